"""trainform as users install it: `python -m build --wheel`, the wheel into a fresh venv,
`trainform --version` and the quickstart run from that venv (not from this checkout).

The source is copied first (the files a build reads), so building writes nothing into the
checkout. Dependencies come from the development venv (see tests/ci/conftest.py) to keep
the test offline and short; trainform itself comes only from the wheel, which the test
checks by where `planner` is imported from. The quickstart runs in its `ci` environment
(20 short steps): validate, lock, a saved plan, apply of it, the run to its end.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = ("pyproject.toml", "README.md", "specs", "planner", "providers", "policies")


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    for name in SOURCE:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"),
         str(source)],
        check=True, capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("trainform-*.whl")
    return wheel


def run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "trainform"), *args], cwd=cwd, capture_output=True, text=True,
        timeout=120,
    )


def test_the_built_wheel_installs_and_runs_the_quickstart(
    tmp_path: Path, clean_python: Path
) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "planner/render/templates/" in "".join(names), "templates ship in the wheel"
    assert not any(name.startswith(("tests/", "examples/", "bench/")) for name in names)

    subprocess.run(
        [str(clean_python / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True, capture_output=True,
    )
    version = run(clean_python, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == "trainform, version 0.1.0"
    where = subprocess.run(
        [str(clean_python / "bin" / "python"), "-c", "import planner; print(planner.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout
    assert where.startswith(str(clean_python)), where

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
        result = run(clean_python, *args, cwd=work)
        assert result.returncode == code and text in result.stdout, (
            f"trainform {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout}{result.stderr}"
        )
