"""The writing side of the run-event protocol (trainform.runtime.protocol): what training
code calls to say where an attempt's time goes.

    from trainform import runtime

    with runtime.phase("setup"):
        model, data = build()
    for step in range(start, steps):
        with runtime.phase("data_wait", step=step):
            batch = next(batches)
        with runtime.phase("compute", step=step):
            train_step(batch)
        if step % every == 0:
            with runtime.phase("checkpoint", step=step) as span:
                span.bytes = save(model)

Without `TRAINFORM_EVENTS_FILE` every call does nothing. Never raises for I/O: a failed
write turns the recorder off (one line on stderr) and training goes on. Per-step phases
(`data_wait`, `compute`) are summed in memory and written now and then, at most every
`FLUSH_SECONDS` early in the run and less often as it ages, so the file stays small over
weeks; other phases are written when they start and end. A forked child (a data loader
worker) writes nothing. Standard library only, Python 3.8 or newer.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from trainform.runtime.protocol import (
    AGGREGATED,
    EVENTS_VARIABLE,
    FORMAT_VERSION,
    MAX_FILE_BYTES,
    PHASE_NAME,
    SPAN,
    START,
    TRUNCATED,
)

FLUSH_SECONDS = 5.0
"""Shortest time between two writes of the summed per-step phases."""
FLUSHES_PER_AGE = 500
"""The flush interval grows to 1/500 of the recorder's age: the lines grow with log(age)."""


class Span:
    """An open phase; set `bytes` (and `step`) before it ends for the record to carry them."""

    def __init__(self, recorder: Recorder, name: str, step: int | None, size: int | None):
        self.recorder, self.name, self.step, self.bytes = recorder, name, step, size
        self.started = 0.0
        self.nested = 0.0

    def __enter__(self) -> Span:
        self.recorder.begin(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.recorder.end(self)


class Recorder:
    """Appends one process's events to `path` (None: records nothing)."""

    def __init__(
        self, path: str | None, rank: int = 0, clock: Callable[[], float] = time.time
    ) -> None:
        self.path, self.rank, self.clock = path, rank, clock
        self.pid = os.getpid()
        self.opened = self.flushed = clock()
        self.descriptor: int | None = None
        self.stopped = not path
        self.pending: dict[str, list[Any]] = {}  # phase -> [seconds, count, since, step]
        self.lock = threading.RLock()
        self.stacks = threading.local()

    @property
    def enabled(self) -> bool:
        return not self.stopped and os.getpid() == self.pid

    def phase(self, name: str, step: int | None = None, bytes: int | None = None) -> Span:
        """A context manager timing one phase `name` (see trainform.runtime.protocol)."""
        if not PHASE_NAME.fullmatch(name):
            raise ValueError(f"phase name {name!r}: lowercase letters, digits, '_', up to 32")
        return Span(self, name, step, bytes)

    def record(
        self,
        name: str,
        seconds: float,
        step: int | None = None,
        bytes: int | None = None,
        count: int = 1,
    ) -> None:
        """A phase the caller timed itself, ending now."""
        if not PHASE_NAME.fullmatch(name):
            raise ValueError(f"phase name {name!r}: lowercase letters, digits, '_', up to 32")
        if not self.enabled:
            return
        now = self.clock()
        self.add(name, max(0.0, float(seconds)), now, step, bytes, count)

    def begin(self, span: Span) -> None:
        span.started = self.clock()
        if not self.enabled:
            return
        self.stack().append(span)
        if span.name not in AGGREGATED:
            with self.lock:
                self.flush_pending(span.started)
                self.write(START, span.name, span.started, step=span.step)

    def end(self, span: Span) -> None:
        if not self.enabled:
            return
        now = self.clock()
        stack = self.stack()
        if span in stack:
            stack.remove(span)
        duration = max(0.0, now - span.started)
        if stack:
            stack[-1].nested += duration
        seconds = max(0.0, duration - span.nested)
        self.add(span.name, seconds, now, span.step, span.bytes, 1, since=span.started)

    def add(
        self,
        name: str,
        seconds: float,
        now: float,
        step: int | None,
        size: int | None,
        count: int,
        since: float | None = None,
    ) -> None:
        with self.lock:
            if name in AGGREGATED and size is None:
                entry = self.pending.setdefault(name, [0.0, 0, now - seconds, None])
                entry[0] += seconds
                entry[1] += count
                entry[3] = step if step is not None else entry[3]
                if now - self.flushed >= self.interval(now):
                    self.flush_pending(now)
                return
            self.flush_pending(now)
            self.write(
                SPAN, name, now, seconds=seconds, step=step, bytes=size, count=count, since=since
            )

    def interval(self, now: float) -> float:
        return max(FLUSH_SECONDS, (now - self.opened) / FLUSHES_PER_AGE)

    def flush(self) -> None:
        """Write the summed per-step phases now (at exit this happens by itself)."""
        if self.enabled:
            with self.lock:
                self.flush_pending(self.clock())

    def flush_pending(self, now: float) -> None:
        pending, self.pending = self.pending, {}
        self.flushed = now
        for name, (seconds, count, since, step) in sorted(pending.items()):
            self.write(SPAN, name, now, seconds=seconds, step=step, count=count, since=since)

    def close(self) -> None:
        self.flush()
        with self.lock:
            if self.descriptor is not None and os.getpid() == self.pid:
                os.close(self.descriptor)
            self.descriptor, self.stopped = None, True

    def stack(self) -> list[Span]:
        stack = getattr(self.stacks, "spans", None)
        if stack is None:
            stack = self.stacks.spans = []
        return stack

    def write(self, event: str, phase: str, moment: float, **fields: Any) -> None:
        record: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "t": round(moment, 6),
            "event": event,
            "phase": phase,
            "rank": self.rank,
        }
        for key, value in fields.items():
            if value is None or (key == "count" and value == 1):
                continue
            record[key] = round(value, 6) if isinstance(value, float) else int(value)
        self.append(json.dumps(record, separators=(",", ":")) + "\n")

    def append(self, line: str) -> None:
        data = line.encode("utf-8")
        try:
            if self.descriptor is None:
                assert self.path
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
                self.descriptor = os.open(self.path, flags, 0o644)
            size = os.fstat(self.descriptor).st_size
            if size + len(data) + 128 > MAX_FILE_BYTES:
                marker = {
                    "v": FORMAT_VERSION,
                    "t": round(self.clock(), 6),
                    "event": TRUNCATED,
                    "rank": self.rank,
                }
                os.write(self.descriptor, (json.dumps(marker) + "\n").encode("utf-8"))
                self.stopped = True
                return
            os.write(self.descriptor, data)
        except (OSError, AssertionError) as exc:
            self.stopped = True
            print(f"trainform.runtime: run events off: {exc}", file=sys.stderr)


def rank_of(environment: Any = None) -> int:
    """This process's rank in its group (RANK, as torchrun and the launch contract set it)."""
    text = (environment if environment is not None else os.environ).get("RANK", "0")
    return int(text) if text.isdigit() else 0


_recorders: dict[int, Recorder] = {}


def recorder() -> Recorder:
    """This process's recorder, writing to `TRAINFORM_EVENTS_FILE` (a no-op when unset)."""
    pid = os.getpid()
    current = _recorders.get(pid)
    if current is None:
        current = _recorders[pid] = Recorder(os.environ.get(EVENTS_VARIABLE) or None, rank_of())
    return current


def phase(name: str, step: int | None = None, bytes: int | None = None) -> Span:
    """`recorder().phase(...)`: time one phase of this process."""
    return recorder().phase(name, step, bytes)


def record(
    name: str, seconds: float, step: int | None = None, bytes: int | None = None, count: int = 1
) -> None:
    """`recorder().record(...)`: a phase timed by the caller, ending now."""
    recorder().record(name, seconds, step, bytes, count)


def flush() -> None:
    """Write what is summed in memory now (before a planned exit it happens by itself)."""
    current = _recorders.get(os.getpid())
    if current is not None:
        current.flush()


atexit.register(flush)
