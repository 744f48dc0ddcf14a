"""Confining file references to the spec folder and the trusted data roots.

Every path a spec names (a dataset source, a code folder, a spec file found by discovery)
is resolved with its real path, symlinks followed, and must land under the spec root or
under one of the data roots that trainform.yaml declares (`security.dataRoots`). Callers
turn a `PathEscape` into a diagnostic (validate) or an error (plan, lock, apply); nothing
reads a file before its path passed here.

Resolution never raises anything but `PathEscape`: a symbolic-link loop, a NUL byte or a
`file://` URI without an absolute path are escapes too, since no real path can be shown
to stay inside.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

FILE_SCHEME = "file://"
# Kernel views of processes and devices: never a spec, a dataset or code, whatever links there.
SPECIAL_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))


class PathEscape(ValueError):
    """A path leaves every root it may live under; the message says which and where to."""


def is_within(path: Path, root: Path) -> bool:
    """True if the real path of `path` is `root` or below it (both resolved). Compares the
    normalized text, as Path.relative_to does, without building a relative path."""
    inner, outer = str(path), str(root)
    if inner == outer:
        return True
    return inner.startswith(outer if outer.endswith("/") else outer + "/")


def real_path(path: str | os.PathLike[str]) -> Path:
    """`path` with every symbolic link followed and `..` applied; PathEscape on a link loop.

    os.path.realpath stops at a loop and returns the rest unresolved (Path.resolve raises
    RuntimeError instead); no real location exists, so a loop is a PathEscape too.
    """
    text = os.fspath(path)
    if "\x00" in text:
        raise PathEscape("contains a NUL byte")
    try:
        resolved = os.path.realpath(text)
    except (OSError, ValueError) as exc:
        raise PathEscape(f"cannot be resolved ({exc})") from None
    # A loop is left unresolved: `..` kept after it, or the last link itself returned.
    if os.path.normpath(resolved) != resolved or os.path.islink(resolved):
        raise PathEscape("passes through a loop of symbolic links")
    return Path(resolved)


def is_special(path: Path) -> bool:
    """True if a resolved path is under /proc, /sys or /dev."""
    return any(is_within(path, tree) for tree in SPECIAL_TREES)


def split_location(reference: str) -> tuple[str, bool]:
    """(path text, whether it is absolute) of a path or `file:///...` URI."""
    if reference.startswith(FILE_SCHEME):
        text = reference[len(FILE_SCHEME) :]
        if not text.startswith("/"):
            raise PathEscape(
                f"{reference!r} is a file:// URI without an absolute path; write "
                "file:///absolute/path"
            )
        return text, True
    return reference, reference.startswith("/")


def confined_path(
    root: str | os.PathLike[str],
    reference: str,
    data_roots: Sequence[str] = (),
    *,
    allow_absolute: bool = False,
    within: str = "the spec folder",
    root_is_real: bool = False,
) -> Path:
    """The real path `reference` names, relative to `root`; raises PathEscape if it leaves.

    A relative reference is taken from `root`; an absolute one (or `file:///...`) only when
    `allow_absolute` and it falls under a data root. NUL bytes are refused outright.
    `within` names `root` in messages (the spec folder, a dataset's source folder...).
    `root_is_real`: `root` is already a real path (what this function or real_path
    returned), so it is not resolved again.
    """
    if "\x00" in reference:
        raise PathEscape("contains a NUL byte")
    text, absolute = split_location(reference)
    if absolute:
        trusted = [real_path(r.removeprefix(FILE_SCHEME)) for r in data_roots]
        if not allow_absolute or not trusted:
            raise PathEscape(
                f"{reference!r} is an absolute location; specs may name only paths inside "
                "the spec folder, or under a data root declared in trainform.yaml "
                "(security.dataRoots)"
            )
        resolved = real_path(text)
        if any(is_within(resolved, data_root) for data_root in trusted) and not is_special(
            resolved
        ):
            return resolved
        raise PathEscape(
            f"{reference!r} resolves to {resolved}, which is under no data root declared in "
            f"trainform.yaml (security.dataRoots: {', '.join(map(str, trusted))})"
        )
    real_root = Path(root) if root_is_real else real_path(root)
    resolved = real_path(real_root / text)
    if is_within(resolved, real_root) and not is_special(resolved):
        return resolved
    through_link = ".." not in Path(text).parts
    raise PathEscape(
        f"{reference!r} resolves outside {within}"
        + (" (through a symbolic link)" if through_link else "")
    )
