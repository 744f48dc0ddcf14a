"""One attempt's timeline from Slurm's records and the attempt folder's own files.

Pure: called by providers/slurm/jobs.py with what it read (the squeue record, the sacct
records of the job, oldest first, and the attempt folder's JSON files); returns the
`AttemptStatus` facts the engine's planner/timeline.py derives durations and losses from.

Decisions:
- An attempt is one trainform submission (one Slurm job id). A requeue by Slurm (node
  failure, preemption, `scontrol requeue`) restarts the same attempt: `sacct --duplicates`
  lists each run, the attempt spans them (first submit, first start, last end) and the
  requeue shows as a wait ("requeued by Slurm ..."); attempt numbers count submissions only.
- Times are Slurm's (Submit, Eligible, Start, End); `eligible_at` only when later than the
  submit time (a `--begin` retry backoff), `admitted_at` is Slurm's start. Slurm keeps
  whole seconds: the end is the runner's millisecond record when it falls in that second
  (or the next), so checkpoints written just before the end fall inside the attempt.
- Waits: Slurm keeps no history of reasons. A pending job's current reason (squeue) is a
  span from its submit time; a started job's span is the reason sacct kept for it, and a
  retry whose eligible time is later than its submit time waited out its backoff even when
  sacct kept no reason (the scheduler clears BeginTime once the time has come).
- Cause: the Slurm state, corrected by the runner's record: `"refused": true` is a refusal
  before the command ran; a FAILED job without a runner record lost its runner (killed, or
  its node went away) and counts as node-failure.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trainform.providers.jobs import (
    AttemptStatus,
    Cause,
    RunPhase,
    RunSpan,
    WaitSpan,
    parse_utc,
)
from trainform.providers.run_events import events_path, read_events
from trainform.providers.slurm.status import (
    SlurmJobState,
    cause_of_state,
    is_wait_reason,
    phase_of,
    readable_reason,
)

REQUEUED = "requeued by Slurm"
REQUEUED_AFTER = {
    "PREEMPTED": "preempted, then requeued by Slurm",
    "NODE_FAIL": "requeued by Slurm after its node failed",
    "REQUEUED": REQUEUED,
}
STOPPED_BY = {"PREEMPTED": "preempted", "NODE_FAIL": "node-failure", "REQUEUED": "requeued"}
RANGE = re.compile(r"^(\d+)-(\d+)$")
STEP_NAME = re.compile(r"^step-(\d+)$")
PRECISION = 2.0


def expand_hostlist(text: str) -> list[str]:
    """`vm`, `gpu[01-03,7]`, `a1,b[2-3]` -> host names, in order."""
    hosts: list[str] = []
    for part in _top_level(text):
        hosts.extend(_expand(part))
    return hosts


def _top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current += char
    parts.append(current)
    return [p for p in (part.strip() for part in parts) if p]


def _expand(pattern: str) -> list[str]:
    opening = pattern.find("[")
    closing = pattern.find("]", opening)
    if opening < 0 or closing < 0:
        return [pattern]
    head, body, tail = pattern[:opening], pattern[opening + 1 : closing], pattern[closing + 1 :]
    names = []
    for item in body.split(","):
        found = RANGE.match(item)
        if found:
            first, last = found.groups()
            width = len(first)
            names += [f"{head}{n:0{width}d}" for n in range(int(first), int(last) + 1)]
        else:
            names.append(head + item)
    return [name + rest for name in names for rest in _expand(tail)] if tail else names


def runs_of(
    records: list[SlurmJobState], starts: list[dict[str, Any]], last_step: Any
) -> list[RunSpan]:
    """Each run of a requeued attempt, from sacct's record of it (its times, Elapsed and
    AllocTRES) and the runner's start records (the step each run resumed from, and the
    step the run before it reached); [] for an attempt that was never requeued."""
    if len(records) < 2:
        return []
    by_restart = {s.get("restart"): s for s in starts if isinstance(s, dict)}
    runs = []
    for index, record in enumerate(records):
        if not record.started_at:
            continue
        later = index + 1 < len(records)
        following = by_restart.get(index + 1, {}) if later else {}
        reached = following.get("before_step") if following else last_step
        resumed = by_restart.get(index, {}).get("resumed_step")
        runs.append(
            RunSpan(
                started_at=record.started_at,
                ended_at=record.ended_at,
                stopped_by=STOPPED_BY.get(record.state, record.state.lower()) if later else "",
                elapsed=record.elapsed,
                gpus=int(record.tres.get("gres/gpu") or 0),
                cpus=float(record.tres.get("cpu") or 0.0),
                resumed_step=resumed if isinstance(resumed, int) else None,
                last_step=reached if isinstance(reached, int) else None,
                eligible_at=record.eligible_at
                if _after(record.eligible_at, record.submitted_at)
                else "",
            )
        )
    return runs


def requeue_text(stopped: str, why: str) -> str:
    """Why a requeued job waits: what stopped its run (`stopped`, its Slurm state), then
    what it waits for now."""
    prefix = REQUEUED_AFTER.get(stopped, f"requeued by Slurm after it was {stopped.lower()}")
    if why.startswith(REQUEUED):
        return prefix + why[len(REQUEUED) :]
    return f"{prefix}; then {why}" if why else prefix


def _sentence(record: SlurmJobState, retry: bool, requeued: bool) -> str:
    if record.reason == "BeginTime" and record.eligible_at:
        if requeued:
            return f"requeued by Slurm: waiting out its requeue delay until {record.eligible_at}"
        if retry:
            return f"waiting for retry backoff until {record.eligible_at} (BeginTime)"
    return readable_reason(record.reason)


def waits_of(records: list[SlurmJobState], retry: bool) -> list[WaitSpan]:
    """What the attempt waited for, run by run of the job (see the module docstring)."""
    spans: list[WaitSpan] = []
    for index, record in enumerate(records):
        until = record.started_at or ("" if record.pending else record.ended_at)
        known = is_wait_reason(record.reason) and (record.pending or record.source == "sacct")
        if index > 0:
            before = records[index - 1]
            why = _sentence(record, retry, requeued=True) if known else ""
            text = requeue_text(before.state, why)
            spans.append(WaitSpan(text, before.ended_at or record.submitted_at, until))
        elif known:
            spans.append(WaitSpan(_sentence(record, retry, False), record.submitted_at, until))
        elif retry and _after(record.eligible_at, record.submitted_at):
            # Slurm replaces BeginTime once the backoff ends; the eligible time still tells it.
            text = f"waiting for retry backoff until {record.eligible_at} (BeginTime)"
            spans.append(WaitSpan(text, record.submitted_at, until))
    return spans


def _cause(current: SlurmJobState | None, result: dict[str, Any], phase: RunPhase) -> str:
    if not phase.finished:
        return ""
    if result.get("refused"):
        return Cause.REFUSED
    if current is None:  # gone from Slurm: the runner's record is all there is
        if not result:
            return Cause.NODE_FAILURE
        return Cause.SUCCEEDED if result.get("exit_code") == 0 else Cause.CODE_ERROR
    cause = cause_of_state(current.state) or Cause.CODE_ERROR
    if cause == Cause.SUCCEEDED and result.get("exit_code") not in (0, None):
        return Cause.CODE_ERROR
    if cause == Cause.CODE_ERROR and not result:
        return Cause.NODE_FAILURE  # the batch step died without the runner recording it
    return cause


def _phase(
    current: SlurmJobState | None,
    result: dict[str, Any],
    retry: bool,
    before: SlurmJobState | None = None,
) -> tuple[RunPhase, str]:
    if current is None:
        if result:
            code = result.get("exit_code")
            phase = RunPhase.SUCCEEDED if code == 0 else RunPhase.FAILED
            return phase, str(result.get("reason", ""))
        return RunPhase.FAILED, "the job vanished from Slurm (not in squeue or sacct)"
    phase = phase_of(current.state)
    if phase == RunPhase.QUEUED:
        why = _sentence(current, retry, requeued=current.restarts > 0 or before is not None)
        return phase, requeue_text(before.state, why) if before is not None else why
    if result.get("refused"):
        return RunPhase.FAILED, f"refused before start: {result.get('reason', '')}"
    if phase.finished and phase != RunPhase.SUCCEEDED:
        why = result.get("reason") or readable_reason(current.reason)
        if not result and current.signal:
            why = f"the batch step was killed by signal {current.signal}"
        if not why:  # "cancelled" says no more than the phase itself
            return phase, "" if current.state.lower() == phase.value else current.state.lower()
        return phase, f"{current.state.lower()}: {why}"
    if phase == RunPhase.SUCCEEDED and result.get("exit_code") not in (0, None):
        return RunPhase.FAILED, str(result.get("reason", ""))
    return phase, ""


def _after(later: str, earlier: str) -> bool:
    first, second = parse_utc(earlier), parse_utc(later)
    return first is not None and second is not None and second > first


def _refined(slurm: str, runner: Any) -> str:
    """Slurm's end time (whole seconds, truncated), or the runner's own record of it (to
    the millisecond) when that falls within the same second or just after."""
    first, precise = parse_utc(slurm), parse_utc(runner)
    if first is None:
        return str(runner) if precise is not None else ""
    if precise is not None and 0 <= (precise - first).total_seconds() < PRECISION:
        return str(runner)
    return slurm


def _exit_code(current: SlurmJobState | None, result: dict[str, Any]) -> int | None:
    code = result.get("exit_code")
    if isinstance(code, int):
        return code
    if current is None or not phase_of(current.state).finished:
        return None
    if current.signal:
        return 128 + current.signal
    return current.exit_code


def attempt_status(
    attempt: int,
    folder: Path,
    files: dict[str, dict[str, Any]],
    records: list[SlurmJobState],
    queue: str,
    progress: int | None,
) -> AttemptStatus:
    """The attempt's timeline. `files` holds the attempt folder's JSON records by name
    (submission, result, starts); `records` the job's Slurm records oldest first, the
    current one last; `progress` the run's progress step (used while it runs)."""
    submission, result = files.get("submission", {}), files.get("result", {})
    starts = files.get("starts", {}).get("starts") or [{}]
    retry = submission.get("by") == "runner" or attempt > 1
    current = records[-1] if records else None
    first = records[0] if records else None
    before = records[-2] if len(records) > 1 else None
    phase, reason = _phase(current, result, retry, before)
    submitted = submission.get("submitted_at", "")
    if first is not None and first.submitted_at and not first.restarts:
        submitted = first.submitted_at
    eligible = first.eligible_at if first is not None else ""
    started = next((r.started_at for r in records if r.started_at), "")
    if not started and phase != RunPhase.QUEUED:
        started = result.get("started_at", "")
    ended = ""
    if phase.finished:
        ended = _refined(current.ended_at if current is not None else "", result.get("ended_at"))
    last_step = result.get("last_step")
    if not isinstance(last_step, int) and phase == RunPhase.RUNNING:
        last_step = progress
    resumed_from = starts[0].get("resumed_from") or ""
    if not resumed_from and "at" not in starts[0]:  # no start recorded: the runner's result
        resumed_from = result.get("resumed_from") or ""
    resumed_step = starts[0].get("resumed_step")
    if not resumed_from and files.get("launch", {}).get("resume_from"):
        resumed_from = files["launch"]["resume_from"]  # chosen, not started yet
        named = STEP_NAME.match(Path(resumed_from).name)
        resumed_step = int(named.group(1)) if named else None
    live = current or SlurmJobState("", "", "", None, "")
    tres = live.tres
    return AttemptStatus(
        attempt=attempt,
        phase=phase,
        reason=reason,
        exit_code=_exit_code(current, result),
        submitted_at=submitted,
        started_at=started,
        ended_at=ended,
        log=str(folder / "slurm.log"),
        events=read_events(events_path(folder / "slurm.log")) if started else None,
        resumed_from=Path(resumed_from).name if resumed_from else "",
        eligible_at=eligible if _after(eligible, submitted) else "",
        admitted_at=started,
        waits=waits_of(records, retry),
        cause=_cause(current, result, phase),
        resumed_step=resumed_step if isinstance(resumed_step, int) else None,
        last_step=last_step if isinstance(last_step, int) else None,
        queue=live.partition or queue,
        nodes=int(tres.get("node") or live.node_count or 1),
        gpus=int(tres.get("gres/gpu") or 0),
        cpus=float(tres.get("cpu") or 0.0),
        hosts=expand_hostlist(live.node_list),
        runs=runs_of(records, files.get("starts", {}).get("starts") or [], last_step),
    )
