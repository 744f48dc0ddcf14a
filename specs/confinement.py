"""Confining file references to the spec folder and the trusted data roots.

Every path a spec names (a dataset source, a code folder, a spec file found by discovery)
is resolved with its real path, symlinks followed, and must land under the spec root or
under one of the data roots that trainform.yaml declares (`security.dataRoots`). Callers
turn a `PathEscape` into a diagnostic (validate) or an error (plan, lock, apply); nothing
reads a file before its path passed here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


class PathEscape(ValueError):
    """A path leaves every root it may live under; the message says which and where to."""


def is_within(path: Path, root: Path) -> bool:
    """True if the real path of `path` is `root` or below it (both resolved)."""
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def confined_path(
    root: str | os.PathLike[str],
    reference: str,
    data_roots: Sequence[str] = (),
    *,
    allow_absolute: bool = False,
) -> Path:
    """The real path `reference` names, relative to `root`; raises PathEscape if it leaves.

    A relative reference is taken from `root`; an absolute one (or `file:///...`) only when
    `allow_absolute` and it falls under a data root. NUL bytes are refused outright.
    """
    if "\x00" in reference:
        raise PathEscape("contains a NUL byte")
    real_root = Path(root).resolve()
    text = reference
    if text.startswith("file://"):
        text = text[len("file://") :]
        absolute = True
    else:
        absolute = text.startswith("/")
    trusted = [Path(r.removeprefix("file://")).resolve() for r in data_roots]
    if absolute:
        if not allow_absolute or not trusted:
            raise PathEscape(
                f"{reference!r} is an absolute location; specs may name only paths inside "
                "the spec folder, or under a data root declared in trainform.yaml "
                "(security.dataRoots)"
            )
        resolved = Path(text).resolve()
        if any(is_within(resolved, data_root) for data_root in trusted):
            return resolved
        raise PathEscape(
            f"{reference!r} resolves to {resolved}, which is under no data root declared in "
            f"trainform.yaml (security.dataRoots: {', '.join(map(str, trusted))})"
        )
    resolved = (real_root / text).resolve()
    if is_within(resolved, real_root):
        return resolved
    raise PathEscape(
        f"{reference!r} resolves outside the spec folder"
        + (" (through a symbolic link)" if ".." not in Path(text).parts else "")
    )
