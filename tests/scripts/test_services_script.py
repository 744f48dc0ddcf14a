"""scripts/services.sh leaves the machine as it found it.

The script runs against stand-ins for `id`, `dpkg` and `apt-get` placed first on PATH (so
nothing is installed), with the policy-rc.d path pointed into a temporary folder. The fake
apt-get records whether policy-rc.d was in place while it ran.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO

SCRIPT = REPO / "scripts" / "services.sh"


def _fake_tools(bin_dir: Path, *, apt_exit: int) -> None:
    bin_dir.mkdir()
    tools = {
        "id": "#!/bin/sh\necho 0\n",
        "dpkg": "#!/bin/sh\nexit 1\n",
        "apt-get": (
            "#!/bin/sh\n"
            'if [ -x "$TRAINFORM_POLICY_RC_D" ]; then echo present >> "$APT_LOG";'
            ' else echo absent >> "$APT_LOG"; fi\n'
            f"exit {apt_exit}\n"
        ),
    }
    for name, text in tools.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)


def _run(tmp_path: Path, *, apt_exit: int = 0) -> tuple[subprocess.CompletedProcess[str], Path]:
    _fake_tools(tmp_path / "bin", apt_exit=apt_exit)
    policy = tmp_path / "policy-rc.d"
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "TRAINFORM_POLICY_RC_D": str(policy),
        "APT_LOG": str(tmp_path / "apt.log"),
    }
    result = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    return result, policy


@pytest.mark.parametrize(
    "apt_exit", [pytest.param(0, id="install-ok"), pytest.param(1, id="install-fails")]
)
def test_policy_rc_d_is_in_place_during_install_and_removed_after(
    tmp_path: Path, apt_exit: int
) -> None:
    result, policy = _run(tmp_path, apt_exit=apt_exit)
    assert (result.returncode == 0) == (apt_exit == 0), result.stderr
    assert "present" in (tmp_path / "apt.log").read_text().split()
    assert not policy.exists()


def test_an_existing_policy_rc_d_is_left_untouched(tmp_path: Path) -> None:
    policy = tmp_path / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 0\n")
    policy.chmod(0o755)
    result, _ = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert policy.read_text() == "#!/bin/sh\nexit 0\n"


def test_policy_rc_d_is_removed_when_the_install_is_interrupted(tmp_path: Path) -> None:
    _fake_tools(tmp_path / "bin", apt_exit=0)
    (tmp_path / "bin" / "apt-get").write_text("#!/bin/sh\nkill -TERM $PPID\nsleep 0.2\n")
    policy = tmp_path / "policy-rc.d"
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "TRAINFORM_POLICY_RC_D": str(policy),
    }
    result = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 143
    assert not policy.exists()
