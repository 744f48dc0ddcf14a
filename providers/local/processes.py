"""Processes of the local platform: is a supervisor alive, is a pid still our job, stop it.

A recorded pid is only trusted after checking what runs under it now, since pids are
reused: a supervisor's command line names its module, a job's environment carries its
run id and attempt. A zombie (exited, not yet reaped) counts as gone; a process whose
arguments are still empty is one that is being exec'd (a supervisor just spawned).

For the processes of a distributed attempt (providers/local/group.py), which are not all
the supervisor's children (torchrun starts the workers, each in a session of its own):
`children_of` a launcher, `environment_of` a process, the `exit_status` of one that has
exited but is not yet reaped by its parent, and `processes_with` variables (every process
of this user whose environment holds them, wherever it was reparented). Linux only (/proc):
elsewhere they find nothing.
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


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (of every one of its threads); [] when it is gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        listed = _read(pid, f"task/{task}/children")
        if listed is None:
            return _children_by_scan(pid)  # a kernel without /proc/<pid>/task/<tid>/children
        found += [int(child) for child in listed.split()]
    return found


def _children_by_scan(pid: int) -> list[int]:
    children = []
    for entry in _process_ids():
        state = _state(entry)
        if state is not None and state[1] == pid:
            children.append(entry)
    return children


def _process_ids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def environment_of(pid: int) -> dict[str, str] | None:
    """The environment `pid` was started with; None when it is gone or not ours."""
    environment = _read(pid, "environ")
    if environment is None:
        return None
    variables = {}
    for entry in environment.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        if equals:
            variables[name.decode(errors="replace")] = value.decode(errors="replace")
    return variables


def exit_status(pid: int) -> int | None:
    """How `pid` ended, as a return code (negative: the signal that killed it), while it
    is a zombie its parent has not reaped; None otherwise."""
    stat = _read(pid, "stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] != b"Z" or len(fields) < 50:
        return None
    return os.waitstatus_to_exitcode(int(fields[-1]))


def processes_with(variables: dict[str, str]) -> list[int]:
    """Every live process of this user (but this one) whose environment holds `variables`."""
    wanted = {f"{name}={value}".encode() for name, value in variables.items()}
    found = []
    for pid in _process_ids():
        if pid == os.getpid():
            continue
        environment = _read(pid, "environ")
        if environment and wanted <= set(environment.split(b"\0")):
            found.append(pid)
    return found


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
