"""Fixtures of the CI tests: a Python environment that is not the development one, and what
a session builds once for every test (the spec repository's template, trainform's wheel and
its Git repository).

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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ci import gitlab_api
from tests.ci.platform_repo import make_template, make_trainform_repository
from tests.ci.wheel import build_wheel

DEVELOPMENT_TRAINFORM = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "trainform"


@pytest.fixture(scope="session")
def origin_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One spec repository per session (platform, lock); each test copies it."""
    template = tmp_path_factory.mktemp("origin-template") / "origin"
    make_template(template, DEVELOPMENT_TRAINFORM)
    return template


@pytest.fixture(scope="session")
def trainform_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """trainform's wheel, built once per session from this checkout."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def trainform_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """trainform's own Git repository, for spec repositories that pin it as a submodule."""
    return make_trainform_repository(tmp_path_factory.mktemp("trainform-repo") / "trainform")


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


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[gitlab_api.Forge, str]]:
    """The GitLab API stand-in, serving on a local port for one test: (its records, URL)."""
    forge = gitlab_api.Forge(artifacts=tmp_path / "artifacts")
    server, url = gitlab_api.serve(forge)
    yield forge, url
    server.shutdown()
    server.server_close()
