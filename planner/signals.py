"""SIGINT and SIGTERM: a clean stop on the first, an immediate one on the second.

CI cancels a job with SIGINT, then SIGTERM, then SIGKILL. Outside an apply the first
signal raises `Interrupted` (a KeyboardInterrupt carrying the signal number), which the
CLI turns into a message and exit 128 + signal. During an apply (`graceful_stop`) it
raises nothing: it sets the apply's stop event, so nothing new starts, calls in flight
finish, the journal is folded into state and the lock released by the apply itself. A
second signal runs the registered emergency steps (release the lock: the journal is
already durable) and exits at once. SIGKILL cannot be caught; the journal makes it
recoverable.

Whatever must not be left behind (a state lock) is `held` from the moment it exists until
it is gone: a second signal releases everything held before exiting, and the CLI releases
what is still held on any way out (`release_held`). Taking and releasing a lock run
`deferred`: a signal arriving inside waits until the step is complete, so no lock exists
that is not also held.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _Stop:
    event: threading.Event | None = None
    signum: int | None = None
    emergency: list[Callable[[], None]] = []
    held: dict[str, Callable[[], None]] = {}
    deferring = 0
    pending: list[int] = []


def exit_code_for(error: KeyboardInterrupt) -> int:
    return error.exit_code if isinstance(error, Interrupted) else 130


def received() -> int | None:
    """The signal that stopped the current apply, if one did."""
    return _Stop.signum


def _say(text: str) -> None:
    """Write to stderr from a signal handler: straight to the descriptor, since the
    interrupted code may be inside a write to sys.stderr (buffered writes are not
    reentrant)."""
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:
        pass


def _run_emergency_steps() -> None:
    steps = [*reversed(_Stop.emergency), *reversed(list(_Stop.held.values()))]
    _Stop.held.clear()
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001, S110 - nothing may stop an emergency exit
            pass


def _handle(signum: int, frame: FrameType | None) -> None:
    if _Stop.deferring:
        _Stop.pending.append(signum)
        return
    if _Stop.signum is not None:
        _say(
            f"\n{signal.Signals(signum).name} again: stopping now; the journal keeps every "
            "finished change, the next command folds it into state.\n"
        )
        _run_emergency_steps()
        os._exit(128 + signum)
    _Stop.signum = signum
    if _Stop.event is not None:
        _say(
            f"\n{signal.Signals(signum).name}: starting nothing new, letting calls in flight "
            "finish (send it again to stop at once)...\n"
        )
        _Stop.event.set()
        return
    raise Interrupted(signum)


def install() -> None:
    """Route SIGINT and SIGTERM through `_handle` (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        for number in HANDLED:
            signal.signal(number, _handle)


@contextmanager
def graceful_stop(emergency: Callable[[], None]) -> Iterator[threading.Event]:
    """While applying: signals set the returned event; `emergency` runs on a second one."""
    event = threading.Event()
    _Stop.event = event
    _Stop.emergency.append(emergency)
    if _Stop.signum is not None:
        event.set()
    try:
        yield event
    finally:
        _Stop.event = None
        _Stop.emergency.remove(emergency)


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM received inside wait until the block is done (then act as usual).

    Only the main thread runs Python signal handlers, so this is exact there; in another
    thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _Stop.deferring += 1
    try:
        yield
    finally:
        _Stop.deferring -= 1
        if not _Stop.deferring and _Stop.pending:
            waiting, _Stop.pending = _Stop.pending, []
            for signum in waiting:
                _handle(signum, None)


def hold(key: str, release: Callable[[], None]) -> None:
    """`release` runs on a second signal or at `release_held`, until `let_go(key)`."""
    _Stop.held[key] = release


def let_go(key: str) -> None:
    _Stop.held.pop(key, None)


def release_held() -> None:
    """Release everything still held (the CLI calls it on every way out)."""
    while _Stop.held:
        _, release = _Stop.held.popitem()
        try:
            release()
        except Exception:  # noqa: BLE001, S110 - the command is ending; its error is reported
            pass
