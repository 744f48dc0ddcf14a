"""Work of a large load or plan shared with a forked copy of the process.

A plan of thousands of resources spends most of its time in work that reads nothing but
its items (parsing files, hashing documents, rendering changes). The second core takes a
share of it in a child made with os.fork, which sends its result back pickled through a
pipe while the parent goes on:

- `map_halves(function, items)`: the child computes `function` of the second half of the
  items while the parent computes it of the first half. It returns [function(first half),
  function(second half)], or [function(items)] when it does not split; the caller joins
  the parts.
- `both(first, second, size)`: two independent jobs at once, `second` in the child (the
  loader checks data sources while it resolves references).
- `in_background(job, size)`: the child starts `job` now; the parent asks for its value
  when it needs it (the loader parses the second half of the files while it loads the
  first).
- `alongside(job, weight)` hands one more independent job (checking policies while the
  plan renders) to the child of the next `map_halves` inside the `with` block: the child
  takes fewer items to make room for it (`weight`: the job's cost as a share of the split
  work's), and `result()` returns its value, computed in the parent when no split carried
  it.

Decisions:
- Only where it is safe and pays: os.fork exists, the process runs a single thread (a
  fork copies only the calling thread; a lock another thread held would stay held in the
  child), and there are at least `minimum` items (a fork of a large process costs a few
  milliseconds, and the parent then pays a page copy for each page it writes).
- The child never runs the parent's exit path: it resets SIGINT and SIGTERM to their
  defaults, writes, and leaves with os._exit (no atexit handlers, no flush of inherited
  stdio buffers).
- Any failure of the child (an exception, a signal, a short read) makes the parent compute
  that share itself: the results are the same, only slower, and an exception the function
  raises surfaces in the parent as it would without the split.
- A child whose result the parent no longer wants (the parent's own share raised) is
  killed and reaped before the error goes on.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
Other = TypeVar("Other")

MINIMUM_ITEMS = 2_000
DISABLE_VARIABLE = "TRAINFORM_NO_FORK"
"""Set to 1 to compute everything in one process (debugging, profiling)."""


class SideJob(Generic[Result]):
    """A job for the child of the next split; its value once computed, wherever it ran."""

    def __init__(self, job: Callable[[], Result], weight: float) -> None:
        self.job = job
        self.weight = min(max(weight, 0.0), 0.8)
        self.done = False
        self.value: Result | None = None

    def result(self) -> Result:
        if not self.done:
            self.value, self.done = self.job(), True
        return self.value  # type: ignore[return-value]


_pending: list[SideJob[Any]] = []


@contextmanager
def alongside(job: Callable[[], Result], weight: float) -> Iterator[SideJob[Result]]:
    """`job` goes with the child of the next split made inside the block (if any)."""
    side = SideJob(job, weight)
    _pending.append(side)
    try:
        yield side
    finally:
        if side in _pending:
            _pending.remove(side)


def can_split(count: int, minimum: int = MINIMUM_ITEMS) -> bool:
    return (
        count >= minimum
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and os.environ.get(DISABLE_VARIABLE, "") in ("", "0")
    )


class _Child:
    """A forked child computing `job`; `value()` waits for it (or computes `job` here)."""

    def __init__(self, job: Callable[[], Any]) -> None:
        self.job = job
        self.pid = 0
        self.reader = -1
        self.received = False
        self.result: Any = None

    def start(self) -> bool:
        reader, writer = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(reader)
            os.close(writer)
            return False
        if pid == 0:
            os.close(reader)
            _run_child(self.job, writer)
        os.close(writer)
        self.pid, self.reader = pid, reader
        return True

    def value(self) -> Any:
        if not self.received:
            found, result = _receive(self.reader, self.pid) if self.pid else (False, None)
            self.pid, self.received = 0, True
            self.result = result if found else self.job()
        return self.result

    def stop(self) -> None:
        """Kill and reap a child whose result is no longer wanted."""
        if self.pid:
            os.close(self.reader)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = 0


@contextmanager
def in_background(
    job: Callable[[], Result], size: int, minimum: int = MINIMUM_ITEMS
) -> Iterator[Callable[[], Result]]:
    """A function returning job(): started now in a forked child when `size` makes it pay
    (else computed at the first call). `job` must only read what the parent may change
    meanwhile. A child still running when the block ends is stopped."""
    child = _Child(job)
    if can_split(size, minimum):
        child.start()
    try:
        yield child.value
    finally:
        child.stop()


def both(
    first: Callable[[], Result], second: Callable[[], Other], size: int
) -> tuple[Result, Other]:
    """(first(), second()); `second` computed in a forked child when `size` is at least
    MINIMUM_ITEMS and splitting is safe. `first` runs in this process, so it may change
    what it reads; `second` must only read."""
    with in_background(second, size) as theirs:
        mine = first()
        return mine, theirs()


def map_halves(
    function: Callable[[Sequence[Item]], Result],
    items: Sequence[Item],
    minimum: int = MINIMUM_ITEMS,
) -> list[Result]:
    """[function(first half), function(second half)], the second computed in a forked
    child; [function(items)] when splitting is not safe or does not pay."""
    if not can_split(len(items), minimum):
        return [function(items)]
    side = _pending.pop() if _pending else None
    share = 0.5 if side is None else (1 + side.weight) / 2
    half = round(len(items) * share)
    first, second = items[:half], items[half:]
    child = _Child(lambda: (function(second), None if side is None else side.job()))
    if not child.start():
        if side is not None:
            _pending.append(side)
        return [function(items)]
    try:
        mine = function(first)
        theirs, side_value = child.value()
    finally:
        child.stop()
    if side is not None and not side.done:
        side.value, side.done = side_value, True
    return [mine, theirs]


def _run_child(job: Callable[[], Any], writer: int) -> None:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        data = pickle.dumps(job(), pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(writer, view) :]
        code = 0
    except BaseException:  # noqa: BLE001 - the parent computes this share again
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
