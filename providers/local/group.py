"""The launchers of a distributed attempt on the local platform: one per node, one group.

The supervisor (providers/local/supervisor.py) runs an attempt through a `LauncherGroup`
when its launch (providers/launch.py) is a torchrun command or has more than one process;
a single process keeps the supervisor's own one-child path. All N nodes are this machine:

- node n of a `torchrun` command is that command, run as given with the launch contract's
  `node_environment(launch, n, "127.0.0.1")` (PET_*, rendezvous on a free port chosen for
  the attempt): torchrun starts the node's workers. Of any other command the supervisor
  starts the node's `procsPerNode` processes itself, each with `process_environment`;
- every process also gets TRAINFORM_NODES, TRAINFORM_NODE_INDEX, TRAINFORM_ATTEMPT_ID and
  its node's share of the GPUs admission assigned (CUDA_VISIBLE_DEVICES);
- each node's output goes to its own log (`attempt-<a>.node-<n>.log` beside the attempt's)
  and, each line prefixed `[node <n>] `, to the attempt's log, which `trainform logs` reads;
- the group starts all together or not at all (a launcher that cannot start stops those
  started), and fails together: the first process that ends badly, a launcher or a worker
  (torchrun's workers are found as its children and named by their RANK), is the group's
  failure ("node 1 rank 3 killed by signal 9 (SIGKILL)"). The other launchers then get
  SIGTERM (torchrun passes it to its workers), the failed node's own torchrun is left to
  stop its workers and report, and whatever of the attempt still runs after a grace
  period gets SIGKILL. A worker torchrun has reaped before its status was seen is named
  from torchrun's failure report in the node's log.

When the group is closed every process of the attempt is gone (found by its
TRAINFORM_ATTEMPT_ID wherever it was reparented), and every line it wrote is in the logs.
"""

from __future__ import annotations

import dataclasses
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainform.providers.launch import (
    Launch,
    launch_of,
    node_environment,
    process_environment,
)
from trainform.providers.launch import processes_per_node as launch_processes
from trainform.providers.local.processes import (
    children_of,
    describe_signal,
    environment_of,
    exit_status,
    processes_with,
    signal_group,
    signal_process,
)
from trainform.providers.local.runs import Attempt, utc_now

LOCALHOST = "127.0.0.1"
GROUP_VARIABLES = ("TRAINFORM_NODES", "TRAINFORM_NODE_INDEX", "TRAINFORM_ATTEMPT_ID")
GRACE_SECONDS = 10.0
JOIN_SECONDS = 10.0


def _resources(attempt: Attempt) -> dict[str, int]:
    """The attempt's `resources` as the launch contract reads a spec's."""
    resources = {"nodes": attempt.nodes, "acceleratorsPerNode": attempt.gpus // attempt.nodes}
    if attempt.launch.get("procs_per_node"):
        resources["procsPerNode"] = int(attempt.launch["procs_per_node"])
    return resources


def attempt_launch(attempt: Attempt) -> Launch:
    """The launch contract's view of an attempt (nodes, processes per node, torchrun)."""
    return launch_of({"command": attempt.launch["command"], "resources": _resources(attempt)})


def processes_per_node(attempt: Attempt) -> int:
    """Processes per node (read from a light launch too: no command needed)."""
    return launch_processes(_resources(attempt))


def runs_as_group(attempt: Attempt) -> bool:
    """True when the attempt needs launchers: torchrun, or more than one process."""
    launch = attempt_launch(attempt)
    return launch.torchrun or launch.world_size > 1


def env_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for each `spec.env` variable a group sets itself for every process
    of the TrainingJob `spec` (the launch contract's, and TRAINFORM_NODES, _NODE_INDEX,
    _ATTEMPT_ID): ours would win, silently; none for a single process."""
    launch = launch_of(spec)
    if not (launch.torchrun or launch.world_size > 1):
        return []
    names = set(node_environment(launch, 0, LOCALHOST)) | set(GROUP_VARIABLES)
    if not launch.torchrun:
        names |= {"RANK", "LOCAL_RANK"}
    return [
        (
            f"spec.env.{name}",
            f"{name} is set by trainform for every process of this job ({launch.nodes} nodes "
            f"x {launch.procs_per_node} processes: the launch contract, docs/distributed.md); "
            "remove it from spec.env",
        )
        for name in sorted(set(spec.get("env") or {}) & names)
    ]


def free_port() -> int:
    """A TCP port free on this machine now (the rendezvous of one attempt)."""
    with socket.socket() as probe:
        probe.bind((LOCALHOST, 0))
        return int(probe.getsockname()[1])


def node_log(attempt: Attempt, node: int) -> Path:
    """`attempt-<a>.node-<n>.log` beside the attempt's own log."""
    log = Path(attempt.log_path)
    return log.with_name(f"{log.stem}.node-{node}{log.suffix}")


def node_devices(devices: str, nodes: int, node: int) -> str:
    """Node `node`'s share of the attempt's GPUs (CUDA_VISIBLE_DEVICES text)."""
    assigned = [d for d in devices.split(",") if d]
    share = len(assigned) // max(nodes, 1)
    return ",".join(assigned[node * share : (node + 1) * share])


def ending(returncode: int) -> str:
    """`exited with code 1`, `killed by signal 9 (SIGKILL)`."""
    if returncode < 0:
        return f"killed by signal {describe_signal(-returncode)}"
    return f"exited with code {returncode}"


@dataclass
class Member:
    """One process the group watches: a node's launcher (rank None) or a worker."""

    pid: int
    node: int
    rank: int | None
    process: subprocess.Popen[bytes] | None = None
    """Set for the supervisor's own children (its exit status is collected by wait4)."""
    pidfd: int | None = None
    ended: bool = False
    returncode: int | None = None
    """None while it runs, and for a worker whose status nobody saw."""
    ended_at: float = 0.0
    ended_time: str = ""
    """When it was seen ended (ISO-8601 UTC)."""

    @property
    def who(self) -> str:
        if self.rank is None:
            return f"node {self.node} launcher"
        return f"node {self.node} rank {self.rank}"

    @property
    def failed(self) -> bool:
        """Ended, and not well (a status nobody saw is not a failure by itself)."""
        return self.ended and self.returncode is not None and self.returncode != 0


class NodeOutput(threading.Thread):
    """Copies the output of one pipe (a node's torchrun, or one of its processes) line by
    line to the node's log and, prefixed, to the attempt's log: lines of two processes
    never mix, however their writes interleave."""

    def __init__(self, node: int, read_end: int, raw: Path, joined: Path) -> None:
        super().__init__(name=f"node-{node}-output", daemon=True)
        self.prefix = f"[node {node}] ".encode()
        self.read_end, self.raw, self.joined = read_end, raw, joined

    def run(self) -> None:
        pending = b""
        try:
            with open(self.raw, "ab") as raw, open(self.joined, "ab") as joined:
                while chunk := os.read(self.read_end, 1 << 16):
                    *lines, pending = (pending + chunk).split(b"\n")
                    if lines:
                        raw.write(b"".join(line + b"\n" for line in lines))
                        raw.flush()
                        joined.write(b"".join(self.prefix + line + b"\n" for line in lines))
                        joined.flush()
                if pending:
                    raw.write(pending + b"\n")
                    joined.write(self.prefix + pending + b"\n")
        except OSError:
            while os.read(self.read_end, 1 << 16):  # a log that cannot be written: drain
                pass
        finally:
            os.close(self.read_end)


class LauncherGroup:
    """The running group of one attempt (see the module docstring); the supervisor calls
    `start`, then `finished` and `pause` until it is done (`signal` to stop it), `close`."""

    def __init__(
        self,
        attempt: Attempt,
        command: list[str],
        environment: dict[str, str],
        say: Callable[[str], None],
    ) -> None:
        self.attempt = attempt
        self.launch = dataclasses.replace(attempt_launch(attempt), port=free_port())
        self.command = command
        self.environment = environment
        self.say = say
        self.members: list[Member] = []
        self.outputs: list[NodeOutput] = []
        self.failure: Member | None = None
        self.unseen: list[Member] = []
        """Workers that ended before any failure, their exit status not seen."""
        self.stopping_since: float | None = None
        self.stopped = False
        self.started: dict[int, str] = {}
        """Node -> when its launcher started (ISO-8601 UTC)."""
        self.peak_rss: int | None = None

    # starting ----------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        """Node 0's first process (recorded as the attempt's child)."""
        return self.members[0].pid

    def start(self) -> None:
        """Start every node; raises OSError (after stopping what started) if one cannot."""
        launch = self.launch
        nodes = f"{launch.nodes} node" + ("s" if launch.nodes > 1 else "")
        processes = f"{launch.procs_per_node} process" + ("es" if launch.procs_per_node > 1 else "")
        self.say(
            f"group of world size {launch.world_size}: {nodes} x {processes}, "
            f"{'torchrun' if launch.torchrun else 'one process per rank'}, "
            f"rendezvous {LOCALHOST}:{launch.port}"
        )
        try:
            for node in range(launch.nodes):
                self._start_node(node)
        except OSError:
            self.signal(signal.SIGKILL)
            self.close()
            raise

    def _start_node(self, node: int) -> None:
        self.started[node] = utc_now()
        if self.launch.torchrun:
            self._spawn(node, None, node_environment(self.launch, node, LOCALHOST))
        else:
            for local in range(self.launch.procs_per_node):
                environment = process_environment(self.launch, node, local, LOCALHOST)
                self._spawn(node, node * self.launch.procs_per_node + local, environment)
        self.say(f"node {node}: started, log {node_log(self.attempt, node)}")

    def _spawn(self, node: int, rank: int | None, contract: dict[str, str]) -> None:
        read_end, write_end = os.pipe()
        output = NodeOutput(
            node, read_end, node_log(self.attempt, node), Path(self.attempt.log_path)
        )
        self.outputs.append(output)
        output.start()
        try:
            self._popen(node, rank, contract, write_end)
        finally:
            os.close(write_end)

    def _popen(self, node: int, rank: int | None, contract: dict[str, str], output: int) -> None:
        environment = {
            **self.environment,
            "CUDA_VISIBLE_DEVICES": node_devices(self.attempt.devices, self.launch.nodes, node),
            **contract,
            "TRAINFORM_NODES": str(self.launch.nodes),
            "TRAINFORM_NODE_INDEX": str(node),
            "TRAINFORM_ATTEMPT_ID": self.attempt.id,
        }
        process = subprocess.Popen(
            self.command,
            cwd=self.attempt.code_dir,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
        self.members.append(Member(process.pid, node, rank, process, _pidfd(process.pid)))

    # watching ----------------------------------------------------------------------------

    def finished(self) -> bool:
        """Collect what ended, find torchrun's workers, act on a failure; True once every
        process the supervisor started has ended."""
        ended = [member for member in self.members if not member.ended and self._ended(member)]
        self._find_workers()
        if self.failure is None and not self.stopped:
            self._judge(ended)
        if self.stopping_since is not None:
            if time.monotonic() - self.stopping_since >= GRACE_SECONDS:
                self._signal_all(signal.SIGKILL)
        return all(member.ended for member in self.members if member.process is not None)

    def _ended(self, member: Member) -> bool:
        if member.process is not None:
            try:
                pid, status, usage = os.wait4(member.pid, os.WNOHANG)
            except ChildProcessError:  # collected already
                return member.ended
            if pid == 0:
                return False
            member.returncode = os.waitstatus_to_exitcode(status)
            scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux
            self.peak_rss = max(self.peak_rss or 0, usage.ru_maxrss * scale)
        else:
            if member.pidfd is not None and not select.select([member.pidfd], [], [], 0)[0]:
                return False
            member.returncode = exit_status(member.pid)
            if member.returncode is None and member.pidfd is None and _alive(member.pid):
                return False
        member.ended, member.ended_at, member.ended_time = True, time.monotonic(), utc_now()
        if member.pidfd is not None:
            os.close(member.pidfd)
            member.pidfd = None
        return True

    def _find_workers(self) -> None:
        """torchrun's workers: children of a running launcher that carry a RANK."""
        if not self.launch.torchrun:
            return
        known = {member.pid for member in self.members}
        for launcher in [m for m in self.members if m.rank is None and not m.ended]:
            for child in children_of(launcher.pid):
                if child in known:
                    continue
                environment = environment_of(child) or {}
                rank = environment.get("RANK", "")
                if environment.get("TRAINFORM_ATTEMPT_ID") == self.attempt.id and rank.isdigit():
                    worker = Member(child, launcher.node, int(rank), None, _pidfd(child))
                    self.members.append(worker)
                    known.add(child)

    def _judge(self, ended: list[Member]) -> None:
        """The group's failure among what just ended, and the stop of the other nodes."""
        self.unseen += [m for m in ended if m.rank is not None and m.returncode is None]
        failed = [member for member in ended if member.failed]
        if not failed:
            return
        # Several at once: a worker before a launcher (its death is why the launcher
        # failed), one killed by a signal before one that exited, then the lowest rank.
        failed.sort(key=lambda m: (m.rank is None, (m.returncode or 0) > 0, m.node, m.rank or 0))
        self.failure = failed[0]
        self.stopping_since = time.monotonic()
        self.say(f"{self.describe()}: stopping the group")
        # A node whose worker failed (or ended unseen before) keeps its torchrun, which
        # stops its own workers and reports how they ended; every other node is stopped.
        spared = {m.node for m in [self.failure, *self.unseen] if m.rank is not None}
        launchers = {m.node: m for m in self.members if m.rank is None}
        for member in self.members:
            if member.ended or (member.rank is None and member.node in spared):
                continue
            if member.process is not None or launchers[member.node].ended:
                signal_group(member.pid, signal.SIGTERM)

    def pause(self, seconds: float) -> None:
        """Sleep up to `seconds`, waking as soon as a watched process ends."""
        descriptors = [m.pidfd for m in self.members if m.pidfd is not None and not m.ended]
        if descriptors:
            select.select(descriptors, [], [], seconds)
        else:
            time.sleep(seconds)

    def signal(self, signum: int) -> None:
        """Stop the group from outside (a cancel, the max runtime): no failure is judged."""
        self.stopped = True
        self._signal_all(signum)

    def _signal_all(self, signum: int) -> None:
        for member in self.members:
            if not member.ended:
                signal_group(member.pid, signum)

    # the end -----------------------------------------------------------------------------

    @property
    def returncode(self) -> int:
        """0 when every node succeeded, else how the group's failure ended (without one,
        as the first process the supervisor started that did not exit 0)."""
        if self.failure is not None and self.failure.returncode is not None:
            return self.failure.returncode
        codes = [m.returncode for m in self.members if m.process is not None]
        return next((code for code in codes if code), 0) or 0

    def launchers(self) -> list[dict[str, Any]]:
        """One entry per node for the attempt's timeline: host, log, start, end, exit."""
        entries = []
        for node, started in sorted(self.started.items()):
            own = [m for m in self.members if m.node == node and m.process is not None]
            done = bool(own) and all(m.ended for m in own)
            code = next((m.returncode for m in own if m.returncode), 0) if done else None
            entry: dict[str, Any] = {
                "node": node,
                "host": self.attempt.host or socket.gethostname(),
                "log": str(node_log(self.attempt, node)),
                "startedAt": started,
                "endedAt": max(m.ended_time for m in own) if done else "",
                "exitCode": code,
            }
            entries.append(entry)
        return entries

    def describe(self) -> str:
        """`node 1 rank 3 killed by signal 9 (SIGKILL)`: the group's failure."""
        if self.failure is None or self.failure.returncode is None:
            return ""
        return f"{self.failure.who} {ending(self.failure.returncode)}"

    def _settle(self) -> None:
        """The failure, once the logs are complete: a worker that ended unseen before the
        failure was judged, which torchrun reports failed, was the first to fail."""
        if self.failure is None:
            return
        for worker in sorted(self.unseen, key=lambda m: m.ended_at):
            if worker.ended_at > self.failure.ended_at:
                break
            code = self._reported_exit(worker)
            if code:
                worker.returncode, self.failure = code, worker
                return

    def _reported_exit(self, worker: Member) -> int | None:
        """The worker's exit code from torchrun's failure report in its node's log."""
        try:
            text = node_log(self.attempt, worker.node).read_text(errors="replace")
        except OSError:
            return None
        found = re.findall(rf"exitcode\s*:\s*(-?\d+) \(pid: {worker.pid}\)", text[-65536:])
        return int(found[-1]) if found else None

    def close(self) -> None:
        """Stop whatever of the attempt still runs and wait until the logs are complete."""
        self._signal_all(signal.SIGKILL)
        for pid in processes_with({"TRAINFORM_ATTEMPT_ID": self.attempt.id}):
            if not signal_group(pid, signal.SIGKILL):
                signal_process(pid, signal.SIGKILL)
        for member in self.members:
            if member.process is not None and not member.ended:
                member.process.wait()
                member.returncode, member.ended = member.process.returncode, True
        deadline = time.monotonic() + JOIN_SECONDS
        for output in self.outputs:
            output.join(max(0.0, deadline - time.monotonic()))
        self._settle()


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` exits (Linux 5.3+), else None."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return exit_status(pid) is None
