"""Checkpoints of a run on local disk: listing, validation, retention.

A checkpoint is a folder `step-<N>` under the run's checkpoint folder holding
`manifest.json` = {"step": N, "files": [{"path", "size", "sha256"}]}, written last (see
providers/jobs.py). It is valid only if the manifest parses, names step N, and every
listed file exists with the listed size and sha256; otherwise `problem` says what is
wrong. Validation hashes every file; results are remembered per process, and across processes
in the platform database (`CheckCache`), while no file's size, inode, mtime or ctime
changes. `written_at` is the manifest's modification time (it is
written last) and `size` the sum of the sizes the manifest lists. A listing made with
`hashed=False` (accounting) checks presence and sizes only, and says so in `evidence`.

Retention keeps the newest `keep_last` valid checkpoints. Older valid ones are deleted,
and invalid ones older than every kept one (superseded partial writes). Invalid ones
newer than the oldest kept one are left in place and reported; a checkpoint in `protect`
(the one an unfinished attempt resumed from) is never deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from trainform.providers.jobs import CheckpointStatus

STEP_FOLDER = re.compile(r"^step-(\d+)$")
MANIFEST = "manifest.json"

_checked: dict[Path, tuple[tuple[Any, ...], CheckpointStatus]] = {}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fingerprint(folder: Path) -> tuple[Any, ...]:
    """Size, inode, mtime and ctime of every file in the folder tree (cache key). The
    ctime moves on every write and no program can set it back, so content changed in
    place is never taken for the content that was validated."""
    entries: list[tuple[Any, ...]] = []

    def walk(directory: str) -> None:
        try:
            found = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            return
        for entry in found:
            try:
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path)
                    continue
                info = entry.stat()
            except OSError:
                continue
            entries.append(
                (directory, entry.name, info.st_size, info.st_ino, info.st_mtime_ns,
                 info.st_ctime_ns)
            )  # fmt: skip

    walk(str(folder))
    return tuple(entries)


class CheckCache:
    """Validations shared between processes through the platform database (RunStore's
    `checkpoint_checks` table), keyed by path and fingerprint: a checkpoint is hashed
    once after it is written, not by every `status`. New results are saved by `flush`."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._known: dict[str, tuple[str, str]] | None = None
        self._new: list[tuple[str, str, str]] = []

    def get(self, folder: Path, fingerprint: tuple[Any, ...]) -> CheckpointStatus | None:
        if self._known is None:
            self._known = self.store.checkpoint_checks()
        entry = self._known.get(str(folder))
        if entry is None or entry[0] != _key(fingerprint):
            return None
        return CheckpointStatus(**json.loads(entry[1]))

    def put(self, folder: Path, fingerprint: tuple[Any, ...], status: CheckpointStatus) -> None:
        record = (str(folder), _key(fingerprint), json.dumps(vars(status), sort_keys=True))
        self._new.append(record)
        if self._known is not None:
            self._known[record[0]] = (record[1], record[2])

    def flush(self) -> None:
        new, self._new = self._new, []
        self.store.record_checkpoint_checks(new)


def _key(fingerprint: tuple[Any, ...]) -> str:
    return hashlib.sha256(repr(fingerprint).encode()).hexdigest()


def _written(folder: Path) -> tuple[str, int]:
    """When the manifest was written (ISO UTC, milliseconds) and the bytes it lists."""
    manifest_path = folder / MANIFEST
    try:
        modified = manifest_path.stat().st_mtime
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return "", 0
    moment = datetime.fromtimestamp(modified, UTC).isoformat(timespec="milliseconds")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    sizes = [
        entry["size"]
        for entry in (files if isinstance(files, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("size"), int)
    ]
    return moment.replace("+00:00", "Z"), sum(sizes)


def _problem(folder: Path, step: int, hashed: bool = True) -> str:
    """Why the checkpoint folder is not valid, or "" when it is."""
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        return f"{MANIFEST} is missing (incomplete checkpoint)"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"{MANIFEST} cannot be parsed: {exc}"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        return f'{MANIFEST} has no "files" list'
    if "step" in manifest and manifest["step"] != step:
        return f"{MANIFEST} says step {manifest['step']!r}, the folder says step {step}"
    for entry in manifest["files"]:
        if not isinstance(entry, dict) or not {"path", "size", "sha256"} <= set(entry):
            return f"{MANIFEST} has an entry without path, size and sha256: {entry!r}"
        relative = PurePosixPath(str(entry["path"]))
        if relative.is_absolute() or ".." in relative.parts:
            return f"{MANIFEST} lists a path outside the checkpoint: {entry['path']}"
        path = folder / relative
        if not path.is_file():
            return f"file {entry['path']} is missing"
        size = path.stat().st_size
        if size != entry["size"]:
            return f"file {entry['path']} has {size} bytes, the manifest says {entry['size']}"
        if not hashed:
            continue
        digest = _sha256(path)
        if digest != entry["sha256"]:
            return (
                f"file {entry['path']} has sha256 {digest[:12]}..., "
                f"the manifest says {str(entry['sha256'])[:12]}..."
            )
    return ""


def check_checkpoint(
    folder: Path, hashed: bool = True, cache: CheckCache | None = None
) -> CheckpointStatus:
    """Validate one `step-<N>` folder (see the module docstring for the rule)."""
    match = STEP_FOLDER.match(folder.name)
    if match is None:
        raise ValueError(f"{folder} is not a step-<N> checkpoint folder")
    step = int(match.group(1))
    fingerprint = _fingerprint(folder)
    cached = _checked.get(folder)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    shared = cache.get(folder, fingerprint) if cache is not None and hashed else None
    if shared is not None:
        _checked[folder] = (fingerprint, shared)
        return shared
    problem = _problem(folder, step, hashed)
    written_at, size = _written(folder)
    evidence = {} if hashed else {"hashed": False}
    status = CheckpointStatus(
        folder.name, step, not problem, problem, str(folder), evidence, written_at, size
    )
    if hashed:
        _checked[folder] = (fingerprint, status)
        if cache is not None:
            cache.put(folder, fingerprint, status)
    return status


def list_checkpoints(
    checkpoint_dir: Path, hashed: bool = True, cache: CheckCache | None = None
) -> list[CheckpointStatus]:
    """Every `step-<N>` folder of a run, validated, oldest step first."""
    if not checkpoint_dir.is_dir():
        return []
    folders = [
        path for path in checkpoint_dir.iterdir() if path.is_dir() and STEP_FOLDER.match(path.name)
    ]
    statuses = [check_checkpoint(path, hashed, cache) for path in folders]
    return sorted(statuses, key=lambda status: (status.step, status.id))


def latest_valid(checkpoints: Iterable[CheckpointStatus]) -> CheckpointStatus | None:
    valid = [checkpoint for checkpoint in checkpoints if checkpoint.valid]
    return max(valid, key=lambda checkpoint: checkpoint.step) if valid else None


def retention_victims(
    checkpoints: list[CheckpointStatus], keep_last: int, protect: Iterable[str] = ()
) -> list[CheckpointStatus]:
    """The checkpoints retention deletes (pure; see the module docstring)."""
    if keep_last < 1:
        return []
    protected = set(protect)
    valid = sorted((c for c in checkpoints if c.valid), key=lambda c: c.step)
    kept = valid[-keep_last:]
    if not kept:
        return []
    oldest_kept = kept[0].step
    victims = list(valid[:-keep_last])
    victims += [c for c in checkpoints if not c.valid and c.step < oldest_kept]
    return sorted(
        (c for c in victims if c.id not in protected and c.path not in protected),
        key=lambda c: c.step,
    )


def apply_retention(
    checkpoint_dir: Path, keep_last: int | None, protect: Iterable[str] = ()
) -> list[CheckpointStatus]:
    """Delete what retention does not keep; returns the deleted checkpoints."""
    if not keep_last:
        return []
    victims = retention_victims(list_checkpoints(checkpoint_dir), keep_last, protect)
    for victim in victims:
        shutil.rmtree(victim.path, ignore_errors=True)
        _checked.pop(Path(victim.path), None)
    return victims
