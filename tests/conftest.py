"""Shared fixtures and the `--update-golden` flag (rewrites expected files of golden cases)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_tree
from tests.services.browser import launch_chromium
from tests.services.kube_api.fixtures import kube_api, kueue, kueue_api  # noqa: F401 - fixtures
from tests.services.s3 import S3Server, credentials_env, serve
from tests.services.slurm import SlurmCluster, serve_slurm


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep every test of the real Slurm cluster on one xdist worker.

    The cluster is a session fixture, so each worker that ran one of these tests would
    start a cluster of its own (munge, MariaDB, slurmdbd, slurmctld, two slurmd: about
    15 s and a core's worth of start-up), and the calibrations that time its scheduler
    would run beside another cluster's jobs; `--dist loadgroup` sends a group to a single
    worker. The group is the largest unit of work, so xdist hands it out first. This runs
    before xdist reads the markers.
    """
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm_cluster"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Rewrite the expected files of golden cases from the current output.",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def spec_folder(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Path]:
    """Write `{relative path: text}` under a fresh folder and return the folder."""

    def make(files: dict[str, str | bytes]) -> Path:
        root = tmp_path / "specs"
        write_tree(root, files)
        return root

    return make


@pytest.fixture(scope="session", params=["moto", "seaweedfs"])
def s3_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[S3Server]:
    """A real S3 endpoint for the whole session: the moto server, then SeaweedFS."""
    yield from serve(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A real one-node Slurm cluster (4 fake GPUs, accounting) for the whole session."""
    yield from serve_slurm()


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The server's credentials in this process's environment (boto3's chain reads them)."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in credentials_env().items():
        monkeypatch.setenv(key, value)
    return s3_server


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium per worker: Playwright's sync driver runs an event loop in its
    thread, so a second driver started while the first lives is refused."""
    yield from launch_chromium()
