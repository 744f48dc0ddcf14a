"""Shared fixtures and the `--update-golden` flag (rewrites expected files of golden cases)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import write_tree


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
