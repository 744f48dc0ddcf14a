"""Fixtures of the CI tests: a Python environment that is not the development one.

`clean_python` is a fresh venv (one per test) in which trainform is NOT importable until a
test or a pipeline installs it: the development venv's site-packages are reachable through
a plain path entry (a `.pth` line), so trainform's dependencies are found without a
download, while the development venv's editable install of trainform is not (its `.pth`
hooks are only run for site directories, not for path entries).

Pipelines install trainform from source many times per test (`pip install ./<src>`, once
per job). pip builds it with the development venv's setuptools instead of downloading one
into a throwaway build environment each time (`PIP_NO_BUILD_ISOLATION=0`, what offline CI
runners set): the venv's own older setuptools is removed so that one is found. This halves
each install and changes nothing of what is installed.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest


@pytest.fixture
def clean_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    venv = tmp_path / "clean-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"], check=True
    )
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    (Path(purelib) / "development-dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8"
    )
    probe = subprocess.run(
        [str(python), "-c", "import trainform.planner"], cwd=tmp_path, capture_output=True
    )
    assert probe.returncode != 0, "the clean venv must not see the editable trainform"
    return venv
