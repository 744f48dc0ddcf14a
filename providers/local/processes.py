"""Processes of the local platform: is a supervisor alive, is a pid still our job, stop it.

A recorded pid is only trusted after checking what runs under it now, since pids are
reused: a supervisor's command line names its module, a job's environment carries its
run id and attempt. A zombie (exited, not yet reaped) counts as gone; a process whose
arguments are still empty is one that is being exec'd (a supervisor just spawned).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

SUPERVISOR_MODULE = "trainform.providers.local.supervisor"


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(pid: int, name: str) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return None


def _state(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) from /proc/<pid>/stat, or None without /proc."""
    stat = _read(pid, "stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1])


def supervisor_alive(pid: int | None, attempt_id: str | None = None) -> bool:
    """True when `pid` is a live supervisor (of `attempt_id`, when given)."""
    if not pid or not _exists(pid):
        return False
    state = _state(pid)
    if state is None:
        # No /proc (not Linux): the pid exists, which is all we can tell.
        return not Path("/proc/self").exists()
    if state[0] in ("Z", "X") or state[1] == 2:  # exited, or a kernel thread took the pid
        return False
    command = _read(pid, "cmdline") or b""
    if not command:
        return True  # between exec and its first instruction: the arguments are not set yet
    arguments = command.split(b"\0")
    if SUPERVISOR_MODULE.encode() not in arguments:
        return False
    return attempt_id is None or attempt_id.encode() in arguments


def is_job_process(pid: int | None, job: str, run_id: str, attempt: int) -> bool:
    """True when `pid` is alive and its environment names this job, run and attempt."""
    if not pid or not _exists(pid):
        return False
    environment = _read(pid, "environ")
    if environment is None:
        return False
    variables = set(environment.split(b"\0"))
    wanted = {f"TRAINFORM_JOB={job}", f"TRAINFORM_RUN_ID={run_id}", f"TRAINFORM_ATTEMPT={attempt}"}
    return {variable.encode() for variable in wanted} <= variables


def signal_group(pid: int, signum: int) -> bool:
    """Send a signal to the process group led by `pid`; False when it is gone."""
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def signal_process(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def describe_signal(signum: int) -> str:
    try:
        return f"{signum} ({signal.Signals(signum).name})"
    except ValueError:
        return str(signum)
