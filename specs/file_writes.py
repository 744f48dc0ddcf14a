"""Writing a file whole or not at all: the files trainform writes for its user.

`write_file` is what the CLI uses for every file it writes besides state (a saved plan,
trainform.lock, a drift report, a JSON Schema) and what `fmt` and `init` use
(specs.formatting, specs.scaffold). The text goes to a temporary file beside the target,
which then replaces it in one rename: a reader sees the old file or the new one, never
half of one. When the system refuses (a full disk, a quota, no permission), the temporary
file is removed and `FileWriteError` says which path and why (`cannot write plan.tfplan:
No space left on device`); the target is left as it was.

A target that exists and is not a regular file (a FIFO, /dev/stdout) is written in
place, since a rename would replace it; a symbolic link is followed, and its target is
replaced. A new file gets the permissions the umask gives; an existing one keeps its own.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from trainform.specs.errors import FileWriteError

_ATTEMPTS = 10


def write_file(path: str | os.PathLike[str], data: str | bytes, *, sync: bool = True) -> None:
    """Write `data` (text is UTF-8) to `path` whole, replacing it in one rename; `sync`
    makes it durable first (fsync). Raises FileWriteError, leaving nothing behind."""
    shown = os.fspath(path)
    body = data.encode("utf-8") if isinstance(data, str) else data
    target = Path(path)
    try:
        if target.is_symlink():
            target = target.resolve()
        mode = _existing_mode(target)
        if mode is not None and not stat.S_ISREG(mode):
            _write_in_place(target, body)
            return
        _replace(target, body, None if mode is None else stat.S_IMODE(mode), sync)
    except OSError as exc:
        raise FileWriteError(shown, exc.strerror or str(exc)) from None


def _existing_mode(target: Path) -> int | None:
    try:
        return target.stat().st_mode
    except FileNotFoundError:
        return None


def _write_in_place(target: Path, body: bytes) -> None:
    with open(target, "wb") as out:
        out.write(body)


def _replace(target: Path, body: bytes, mode: int | None, sync: bool) -> None:
    """`body` into a new file beside `target`, then renamed over it; the new file is
    removed when any step fails."""
    handle, temporary = _create_beside(target)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(body)
            out.flush()
            if sync:
                os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _create_beside(target: Path) -> tuple[int, str]:
    """A new, empty file in the target's folder (open for writing, mode 0o666 less the
    umask, as any file the user creates), named after it and hidden."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_ATTEMPTS):
        name = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(name, flags, 0o666), str(name)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")
