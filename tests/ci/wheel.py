"""trainform's wheel as users build it (`python -m build --wheel`), from a copy of the source
(the files a build reads), so building writes nothing into the checkout. The CI tests build
it once per session (tests/ci/conftest.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What a build reads: setup.py lists the packages (its LAYERS), pyproject.toml the rest.
SOURCE = (
    "pyproject.toml", "setup.py", "README.md", "runtime", "specs", "planner", "providers",
    "policies", "cli",
)


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
