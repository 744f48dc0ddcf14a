"""The README's first command, `bash scripts/quickstart.sh`, runs the whole loop on the
local provider and ends with no changes and no drift (exit 0)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import REPO


@pytest.mark.slow
def test_the_quickstart_script_runs_end_to_end(tmp_path_factory: pytest.TempPathFactory) -> None:
    scratch = tmp_path_factory.mktemp("quickstart-script")
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "quickstart.sh")],
        env={**os.environ, "TMPDIR": str(scratch), "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "<= 30: PASS" in output, output[-4000:]
    assert "No changes. The platform matches the specs." in output
    assert result.stdout.rstrip().endswith("resources match what was applied.")
