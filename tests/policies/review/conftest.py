"""Fixtures of the review tests: the fixture repository with its pull request applied."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.engine.support import REPO
from tests.policies.review.fixture import make_repository, move_gpus

BUNDLED_TRACE = REPO / "examples" / "review" / "trace.csv"


@pytest.fixture
def moved(tmp_path: Path) -> Path:
    """tmp_path holding `repo/` (base commit, then 8 GPUs moved to team-b) and `trace.csv`,
    a copy of the bundled 2,000-job trace (examples/review/), made for this platform."""
    make_repository(tmp_path / "repo")
    move_gpus(tmp_path / "repo")
    shutil.copyfile(BUNDLED_TRACE, tmp_path / "trace.csv")
    return tmp_path
