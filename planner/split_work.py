"""Pure per-item work of a large plan shared with a forked copy of the process.

A plan of thousands of resources spends most of its time in work that reads nothing but
its items (hashing documents, rendering changes). `map_halves(function, items)` forks
once: the child computes `function` of the second half of the items and sends the result
back pickled through a pipe while the parent computes it of the first half, so the second
core does half the work. It returns [function(first half), function(second half)], or
[function(items)] when it does not split; the caller joins the parts.

Decisions:
- Only where it is safe and pays: os.fork exists, the process runs a single thread (a
  fork copies only the calling thread; a lock another thread held would stay held in the
  child), and there are at least `minimum` items (a fork of a large process costs a few
  milliseconds).
- The child never runs the parent's exit path: it resets SIGINT and SIGTERM to their
  defaults, writes, and leaves with os._exit (no atexit handlers, no flush of inherited
  stdio buffers).
- Any failure of the child (an exception, a signal, a short read) makes the parent compute
  the second half itself: the results are the same, only slower, and an exception the
  function raises surfaces in the parent as it would without the split.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

MINIMUM_ITEMS = 2_000
DISABLE_VARIABLE = "TRAINFORM_NO_FORK"
"""Set to 1 to compute everything in one process (debugging, profiling)."""


def can_split(count: int, minimum: int = MINIMUM_ITEMS) -> bool:
    return (
        count >= minimum
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and os.environ.get(DISABLE_VARIABLE, "") in ("", "0")
    )


def map_halves(
    function: Callable[[Sequence[Item]], Result],
    items: Sequence[Item],
    minimum: int = MINIMUM_ITEMS,
) -> list[Result]:
    """[function(first half), function(second half)], the second computed in a forked
    child; [function(items)] when splitting is not safe or does not pay."""
    if not can_split(len(items), minimum):
        return [function(items)]
    half = len(items) // 2
    first, second = items[:half], items[half:]
    reader, writer = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(reader)
        os.close(writer)
        return [function(items)]
    if pid == 0:  # the child
        os.close(reader)
        _child(function, second, writer)
    os.close(writer)
    mine = function(first)
    found, theirs = _receive(reader, pid)
    return [mine, theirs if found else function(second)]


def _child(
    function: Callable[[Sequence[Item]], Result], items: Sequence[Item], writer: int
) -> None:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        data = pickle.dumps(function(items), pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(writer, view) :]
        code = 0
    except BaseException:  # noqa: BLE001 - the parent computes this half again
        code = 1
    finally:
        os._exit(code)


def _receive(reader: int, pid: int) -> tuple[bool, Any]:
    """(True, the child's result), or (False, None) when the child failed."""
    chunks = []
    try:
        while chunk := os.read(reader, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(reader)
        _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return False, None
    try:
        return True, pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - computed again in the parent
        return False, None
