"""trainform as users install it: `python -m build --wheel`, the wheel into a fresh venv,
`trainform --version` and the quickstart run from that venv (not from this checkout).

The wheel is the session's (tests/ci/wheel.py, built from a copy of the source).
Dependencies come from the development venv (see tests/ci/conftest.py) to keep the test
offline and short; trainform itself comes only from the wheel, which the test
checks by where `trainform.planner` is imported from. The wheel claims one top-level name,
`trainform`: the quickstart also runs with unrelated packages named `specs`, `planner`,
`providers` and `policies` first on the import path. The quickstart runs in its `ci` environment
(20 short steps): validate, lock, a saved plan, apply of it, the run to its end.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

from tests.ci import wheel

REPO = Path(__file__).resolve().parents[2]


def run(
    venv: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "trainform"), *args], cwd=cwd, capture_output=True, text=True,
        timeout=120, env=env,
    )


def archive_text(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name).decode()


def test_the_built_wheel_installs_and_runs_the_quickstart(
    tmp_path: Path, clean_python: Path, trainform_wheel: Path
) -> None:
    wheel = trainform_wheel
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "trainform/cli/render/templates/" in "".join(names), "templates ship"
    outside = [n for n in names if not n.startswith(("trainform/", "trainform-0.1.0.dist-info/"))]
    assert outside == [], "the wheel installs only under the trainform namespace"
    top_level = archive_text(wheel, "trainform-0.1.0.dist-info/top_level.txt")
    assert top_level.split() == ["trainform"]

    subprocess.run(
        [str(clean_python / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True, capture_output=True,
    )
    version = run(clean_python, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == "trainform, version 0.1.0"
    where = subprocess.run(
        [str(clean_python / "bin" / "python"), "-c",
         "import trainform.providers.local as p; print(p.__path__[0])"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout
    assert where.startswith(str(clean_python)), where

    impostors = tmp_path / "impostors"
    for name in ("specs", "planner", "providers", "policies", "cli"):
        (impostors / name).mkdir(parents=True)
        (impostors / name / "__init__.py").write_text(
            f"raise ImportError('the unrelated package {name} was imported')\n"
        )
    environment = {**os.environ, "PYTHONPATH": str(impostors)}

    work = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", work,
                    ignore=shutil.ignore_patterns(".trainform", "trainform.lock"))
    steps = [
        (("validate", ".", "--env", "ci"), 0, "valid"),
        (("lock", ".", "--env", "ci"), 0, "Wrote trainform.lock"),
        (("plan", ".", "--env", "ci", "--locked", "-out", "quickstart.plan"), 0,
         "Saved the plan to quickstart.plan"),
        (("apply", "quickstart.plan"), 0, "Apply complete"),
        (("status", ".", "--env", "ci", "--wait"), 0, "succeeded"),
    ]
    for args, code, text in steps:
        result = run(clean_python, *args, cwd=work, env=environment)
        assert result.returncode == code and text in result.stdout, (
            f"trainform {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout}{result.stderr}"
        )


def test_the_copied_source_holds_every_package_setup_py_lists() -> None:
    # A package added to setup.py's LAYERS and missing here would be left out of the wheel
    # the CI tests build and of the copy the pipeline tests vendor.
    layers = re.search(r"LAYERS = \(([^)]*)\)", (REPO / "setup.py").read_text(encoding="utf-8"))
    assert layers is not None
    assert set(re.findall(r'"(\w+)"', layers.group(1))) <= set(wheel.SOURCE)
