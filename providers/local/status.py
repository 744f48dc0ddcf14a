"""Runs of a job as the engine reads them: RunStatus values built from the run store.

Read-only: nothing here changes the database or the disk. An attempt recorded `running`
whose supervisor is gone is reported as it will be recorded by the next admission step
(failed with cause node-failure, or cancelled when a cancel was requested). Checkpoints
are validated on every read (providers/local/checkpoints.py), or only listed with their
sizes for accounting; `current_step` comes from the job's progress file, else from the
newest valid checkpoint.

Every AttemptStatus carries the attempt's timeline as the database recorded it (times
ISO-8601 UTC with milliseconds): submitted, eligible (retry backoff), admitted, started
(its command), ended, the wait reasons seen, the cause, the checkpoint resumed from and
its step, the last step reached (for an unfinished attempt: as far as it got so far), and
what it asked for (queue, nodes, processes per node, GPUs and CPUs of all its nodes) and
where it ran (hosts: one per node, this machine for each); a distributed attempt also
each node's launcher (host, log, start, end, exit code).
"""

from __future__ import annotations

import json
import socket
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from trainform.providers.jobs import (
    AttemptStatus,
    Cause,
    EvaluationStatus,
    LauncherStatus,
    RunPhase,
    RunStatus,
    WaitSpan,
)
from trainform.providers.local.admission import SUPERVISOR_GONE
from trainform.providers.local.checkpoint_sync import remote_store
from trainform.providers.local.checkpoints import CheckCache, latest_valid, list_checkpoints
from trainform.providers.local.group import processes_per_node
from trainform.providers.local.outcomes import reached_step, resumed_step
from trainform.providers.local.processes import supervisor_alive
from trainform.providers.local.runs import Attempt, RunStore
from trainform.providers.run_events import events_path, read_events


def without_supervisor(store: RunStore, attempts: list[Attempt]) -> set[str]:
    """Ids of attempts recorded `running` whose supervisor is gone.

    A supervisor records its outcome, then exits: a row read before it exited is read
    again, so a finished attempt is never mistaken for an abandoned one.
    """
    gone = set()
    for index, attempt in enumerate(attempts):
        if attempt.phase == "running" and not supervisor_alive(attempt.supervisor_pid, attempt.id):
            attempts[index] = store.get(attempt.id) or attempt
            if attempts[index].phase == "running":
                gone.add(attempt.id)
    return gone


def phase_of(attempt: Attempt, gone: set[str]) -> tuple[RunPhase, str]:
    """The attempt's phase and reason as they stand, supervisor liveness included."""
    if attempt.id in gone:
        if attempt.cancel_requested:
            return RunPhase.CANCELLED, "cancelled"
        return RunPhase.FAILED, SUPERVISOR_GONE
    return RunPhase(attempt.phase), attempt.reason


def _progress_step(path: Path) -> int | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    step = data.get("step") if isinstance(data, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _cpus(amount: str) -> float:
    try:
        return float(Decimal(amount))
    except (InvalidOperation, TypeError, ValueError):
        return 0.0


def cause_of(attempt: Attempt, gone: set[str]) -> str:
    """The recorded cause; for an abandoned attempt the one admission will record."""
    if attempt.id in gone:
        return Cause.CANCELLED if attempt.cancel_requested else Cause.NODE_FAILURE
    if attempt.finished and not attempt.cause:  # recorded before causes were
        return {"succeeded": Cause.SUCCEEDED, "cancelled": Cause.CANCELLED}.get(attempt.phase, "")
    return attempt.cause


def attempt_status(attempt: Attempt, gone: set[str]) -> AttemptStatus:
    phase, reason = phase_of(attempt, gone)
    last_step = attempt.last_step
    if attempt.kind == "train" and (not attempt.finished or attempt.id in gone):
        last_step = reached_step(attempt)
    host = attempt.host or (socket.gethostname() if attempt.started_at else "")
    # every node is this machine (before hosts were recorded too, once it started)
    hosts = [host] * attempt.nodes if host else []
    return AttemptStatus(
        attempt=attempt.attempt,
        phase=phase,
        reason=reason,
        exit_code=attempt.exit_code,
        submitted_at=attempt.submitted_at,
        started_at=attempt.started_at,
        ended_at=attempt.ended_at,
        log=attempt.log_path,
        events=read_events(events_path(attempt.log_path)) if attempt.started_at else None,
        resumed_from=attempt.resume_from or "",
        eligible_at=attempt.eligible_at,
        admitted_at=attempt.admitted_at,
        waits=[
            WaitSpan(str(w.get("reason", "")), str(w.get("since", "")), str(w.get("until", "")))
            for w in attempt.waits
        ],
        cause=cause_of(attempt, gone),
        resumed_step=resumed_step(attempt),
        last_step=last_step,
        queue=attempt.queue,
        nodes=attempt.nodes,
        gpus=attempt.gpus,
        cpus=_cpus(attempt.cpu) * attempt.nodes,
        hosts=hosts,
        procs_per_node=processes_per_node(attempt),
        launchers=[
            LauncherStatus(
                node=int(entry.get("node", 0)),
                host=str(entry.get("host", "")),
                log=str(entry.get("log", "")),
                started_at=str(entry.get("startedAt", "")),
                ended_at=str(entry.get("endedAt", "")),
                exit_code=entry.get("exitCode"),
            )
            for entry in attempt.launchers
        ],
    )


def evaluation_status(attempt: Attempt, gone: set[str]) -> EvaluationStatus:
    phase, reason = phase_of(attempt, gone)
    return EvaluationStatus(
        suite=attempt.suite or "",
        run_id=attempt.run_id,
        phase=phase,
        metrics=dict(attempt.metrics or {}),
        reason=reason,
        log=attempt.log_path,
    )


def run_status(
    run_id: str,
    attempts: list[Attempt],
    gone: set[str],
    hashed: bool = True,
    cache: CheckCache | None = None,
) -> RunStatus:
    training = sorted((a for a in attempts if a.kind == "train"), key=lambda a: a.attempt)
    evaluations = [a for a in attempts if a.kind == "eval"]
    status = RunStatus(run_id=run_id)
    status.attempts = [attempt_status(a, gone) for a in training]
    status.evaluations = [evaluation_status(a, gone) for a in evaluations]
    if training:
        latest = training[-1]
        status.output_dir = latest.output_dir
        store = remote_store(latest)
        if store is not None:
            status.checkpoints = store.list()
        else:
            status.checkpoints = list_checkpoints(Path(latest.checkpoint_dir), hashed, cache)
        newest = latest_valid(status.checkpoints)
        status.current_step = _progress_step(Path(latest.workdir) / "progress.json")
        if status.current_step is None and newest is not None:
            status.current_step = newest.step
    return status


def run_statuses(
    store: RunStore, attempts: list[Attempt], hashed: bool = True, cache: CheckCache | None = None
) -> list[RunStatus]:
    """One RunStatus per run, oldest run first (attempts come in submission order)."""
    gone = without_supervisor(store, attempts)
    groups: dict[str, list[Attempt]] = {}
    for attempt in attempts:
        groups.setdefault(attempt.run_id, []).append(attempt)
    shared = cache or CheckCache(store)
    runs = [run_status(run_id, group, gone, hashed, shared) for run_id, group in groups.items()]
    if cache is None:
        shared.flush()
    return runs


def run_to_json(run: RunStatus) -> dict[str, Any]:
    """A RunStatus as plain JSON-ready data (phases as their lowercase strings); what
    `dataclasses.asdict` gives, built directly (asdict deep-copies every value: the
    largest cost of reading many runs)."""
    attempts = []
    for attempt in run.attempts:
        entry = dict(vars(attempt))
        entry["phase"] = str(attempt.phase)
        entry["waits"] = [dict(vars(wait)) for wait in attempt.waits]
        entry["hosts"] = list(attempt.hosts)
        entry["launchers"] = [dict(vars(launcher)) for launcher in attempt.launchers]
        entry.pop("runs", None)
        if entry.get("events") is None:
            entry.pop("events", None)  # only attempts whose job reported events carry them
        if attempt.runs:  # a requeued attempt's runs (providers.jobs.RunSpan)
            entry["runs"] = [dict(vars(span)) for span in attempt.runs]
        attempts.append(entry)
    evaluations = []
    for evaluation in run.evaluations:
        entry = dict(vars(evaluation))
        entry["phase"] = str(evaluation.phase)
        entry["metrics"] = dict(evaluation.metrics)
        evaluations.append(entry)
    checkpoints = []
    for checkpoint in run.checkpoints:
        entry = dict(vars(checkpoint))
        entry["evidence"] = dict(checkpoint.evidence)
        checkpoints.append(entry)
    return {
        "run_id": run.run_id,
        "attempts": attempts,
        "checkpoints": checkpoints,
        "current_step": run.current_step,
        "evaluations": evaluations,
        "output_dir": run.output_dir,
    }
