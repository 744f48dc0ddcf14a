"""The release example trains and evaluates the quickstart's model: a spec folder may only
take code from inside itself, so it holds a copy, and the copy must not drift."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("folder", ["code", "data"])
def test_the_release_example_holds_the_quickstarts_code_and_data(folder: str) -> None:
    original, copy = EXAMPLES / "quickstart" / folder, EXAMPLES / "release" / folder
    names = files(original)
    assert names == files(copy)
    for name in names:
        assert (copy / name).read_bytes() == (original / name).read_bytes(), name


def files(root: Path) -> list[Path]:
    return sorted(
        p.relative_to(root) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
