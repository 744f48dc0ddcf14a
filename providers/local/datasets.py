"""Dataset manifests on a local folder: every file with its size and sha256.

A manifest is the sorted list of (relative path, size, sha256) under a version's folder;
its digest (sha256 of the canonical JSON) pins the version's content. Any file added,
removed or changed under a pinned version changes the digest: "data mutated".

`resolve_source` and `version_folder` are the only ways a dataset source becomes a host
folder; both confine it (specs.confinement) and raise PermanentProviderError if it leaves.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.specs.confinement import PathEscape, confined_path


@dataclass(frozen=True)
class Manifest:
    files: tuple[tuple[str, int, str], ...]

    @property
    def digest(self) -> str:
        encoded = json.dumps(
            [{"path": p, "size": s, "sha256": h} for p, s, h in self.files],
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
        return "sha256:" + hashlib.sha256(encoded).hexdigest()

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size, _ in self.files)

    def summary(self) -> dict[str, Any]:
        return {"manifestDigest": self.digest, "files": len(self.files), "bytes": self.total_bytes}

    def differences(self, other: Manifest) -> list[str]:
        mine = {p: (s, h) for p, s, h in self.files}
        theirs = {p: (s, h) for p, s, h in other.files}
        changes = [f"added {p}" for p in sorted(set(mine) - set(theirs))]
        changes += [f"removed {p}" for p in sorted(set(theirs) - set(mine))]
        changes += [f"changed {p}" for p in sorted(set(mine) & set(theirs)) if mine[p] != theirs[p]]
        return changes


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_manifest(folder: Path) -> Manifest:
    """Manifest of every regular file under `folder` (symlinks are not followed)."""
    entries = []
    for directory, subdirs, files in os.walk(folder):
        subdirs.sort()
        for name in sorted(files):
            path = Path(directory, name)
            if path.is_symlink() or not path.is_file():
                continue
            entries.append(
                (path.relative_to(folder).as_posix(), path.stat().st_size, _sha256(path))
            )
    return Manifest(tuple(sorted(entries)))


def manifest_from_json(data: list[dict[str, Any]]) -> Manifest:
    return Manifest(tuple(sorted((e["path"], int(e["size"]), e["sha256"]) for e in data)))


def manifest_to_json(manifest: Manifest) -> list[dict[str, Any]]:
    return [{"path": p, "size": s, "sha256": h} for p, s, h in manifest.files]


def resolve_source(source: str, spec_root: Path, data_roots: Sequence[str] = ()) -> Path:
    """The real folder of a dataset source on this machine.

    A relative source stays under the spec folder, a file:/// one (or an absolute path,
    which storage.datasets placement produces) under one of `data_roots`; anything else is
    refused before a file under it is listed, hashed, served or deleted.
    """
    try:
        return confined_path(spec_root, source, data_roots, allow_absolute=True)
    except PathEscape as exc:
        raise PermanentProviderError(
            f"cannot use dataset source {source!r}: {exc}; keep the data inside the spec "
            "folder or declare its parent folder in trainform.yaml (security.dataRoots)"
        ) from None


def version_folder(source: Path, version: Mapping[str, Any]) -> Path:
    """The folder of one version (`path`, default its name) under a resolved source folder."""
    relative = str(version.get("path") or version["name"])
    try:
        return confined_path(source, relative, within=f"the dataset's source folder {source}")
    except PathEscape as exc:
        raise PermanentProviderError(
            f"cannot use version {version['name']} of dataset source {source}: {exc}"
        ) from None
