"""Checkpoint validation and retention on local disk (providers/local/checkpoints.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from trainform.providers.local.checkpoints import (
    apply_retention,
    latest_valid,
    list_checkpoints,
    retention_victims,
)


def write_checkpoint(root: Path, step: int, payload: bytes | None = None) -> Path:
    """A complete checkpoint `step-<step>` with one file and its manifest."""
    folder = root / f"step-{step:06d}"
    folder.mkdir(parents=True)
    data = payload if payload is not None else f"weights {step}".encode() * 10
    (folder / "weights.bin").write_bytes(data)
    manifest = {
        "step": step,
        "files": [
            {"path": "weights.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        ],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def truncate(folder: Path) -> None:
    path = folder / "weights.bin"
    path.write_bytes(path.read_bytes()[:5])


def same_size_other_bytes(folder: Path) -> None:
    path = folder / "weights.bin"
    path.write_bytes(b"x" * path.stat().st_size)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        pytest.param(
            lambda f: (f / "manifest.json").unlink(), "manifest.json is missing", id="no-manifest"
        ),
        pytest.param(
            lambda f: (f / "manifest.json").write_text("{not json"),
            "manifest.json cannot be parsed",
            id="unparsable-manifest",
        ),
        pytest.param(
            lambda f: (f / "weights.bin").unlink(), "weights.bin is missing", id="missing-file"
        ),
        pytest.param(truncate, "weights.bin has 5 bytes, the manifest says", id="truncated"),
        pytest.param(same_size_other_bytes, "weights.bin has sha256", id="sha256-mismatch"),
        pytest.param(
            lambda f: (f / "manifest.json").write_text(json.dumps({"step": 9, "files": []})),
            "says step 9",
            id="wrong-step",
        ),
    ],
)
def test_a_damaged_checkpoint_is_invalid_with_its_problem(
    tmp_path: Path, damage: Callable[[Path], object], problem: str
) -> None:
    write_checkpoint(tmp_path, 1)
    newest = write_checkpoint(tmp_path, 2)
    damage(newest)

    checkpoints = list_checkpoints(tmp_path)

    assert [(c.id, c.valid) for c in checkpoints] == [("step-000001", True), ("step-000002", False)]
    assert problem in checkpoints[1].problem
    assert latest_valid(checkpoints).id == "step-000001"  # type: ignore[union-attr]


def test_a_complete_checkpoint_is_valid_and_other_folders_are_ignored(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 3)
    (tmp_path / "not-a-checkpoint").mkdir()
    (tmp_path / "step-x").mkdir()

    checkpoints = list_checkpoints(tmp_path)

    assert [(c.id, c.step, c.valid, c.problem) for c in checkpoints] == [
        ("step-000003", 3, True, "")
    ]
    assert checkpoints[0].path == str(tmp_path / "step-000003")
    assert list_checkpoints(tmp_path / "missing") == []


def test_validation_sees_a_file_damaged_after_an_earlier_check(tmp_path: Path) -> None:
    folder = write_checkpoint(tmp_path, 1)
    assert list_checkpoints(tmp_path)[0].valid

    truncate(folder)

    assert not list_checkpoints(tmp_path)[0].valid


def test_retention_keeps_the_newest_valid_checkpoints(tmp_path: Path) -> None:
    for step in range(1, 6):
        write_checkpoint(tmp_path, step)

    deleted = apply_retention(tmp_path, keep_last=2)

    assert [c.step for c in deleted] == [1, 2, 3]
    assert [c.step for c in list_checkpoints(tmp_path)] == [4, 5]


def test_retention_never_deletes_invalid_checkpoints_newer_than_the_kept_ones(
    tmp_path: Path,
) -> None:
    for step in range(1, 5):
        write_checkpoint(tmp_path, step)
    truncate(tmp_path / "step-000001")  # older than every kept one: superseded
    truncate(tmp_path / "step-000004")  # newer than the newest valid: kept and reported

    deleted = apply_retention(tmp_path, keep_last=1)

    assert [c.step for c in deleted] == [1, 2]
    remaining = list_checkpoints(tmp_path)
    assert [(c.step, c.valid) for c in remaining] == [(3, True), (4, False)]


def test_retention_spares_the_checkpoint_an_unfinished_attempt_resumed_from(
    tmp_path: Path,
) -> None:
    for step in range(1, 5):
        write_checkpoint(tmp_path, step)

    apply_retention(tmp_path, keep_last=1, protect={"step-000002"})

    assert [c.step for c in list_checkpoints(tmp_path)] == [2, 4]


def test_retention_without_keep_last_deletes_nothing(tmp_path: Path) -> None:
    for step in range(1, 4):
        write_checkpoint(tmp_path, step)

    assert apply_retention(tmp_path, keep_last=None) == []
    assert retention_victims(list_checkpoints(tmp_path), keep_last=0) == []
    assert len(list_checkpoints(tmp_path)) == 3
