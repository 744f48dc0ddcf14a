"""job_status: what each training job is doing, read live from its provider.

Per job: the current run and attempt, its phase and why it waits, the current step, the
latest valid checkpoint and any invalid ones, evaluations with their metrics and gate
results, and earlier runs kept in history; and the shape of its process group (nodes,
processes per node, world size, each node's host) as the provider reports the latest
attempt, the spec filling in what a provider does not report.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.gates import evaluate_gates, overall
from trainform.planner.jobs import JobContext, identity_inputs, run_id_of
from trainform.planner.lockfile import LockFile, resolve_pins
from trainform.planner.progress import eta_seconds, total_steps
from trainform.planner.refresh import Target, observe_all
from trainform.planner.run_breakdown import breakdown_of
from trainform.planner.timeline import attempt_timelines, delivery, run_from_json, world_size
from trainform.planner.workspace import Workspace
from trainform.providers.base import ObserveRequest
from trainform.providers.errors import ProviderError
from trainform.providers.launch import processes_per_node


@dataclass
class JobReport:
    address: str
    run_id: str | None
    phase: str
    reason: str = ""
    attempt: int = 0
    current_step: int | None = None
    latest_checkpoint: dict[str, Any] | None = None
    invalid_checkpoints: list[dict[str, Any]] = field(default_factory=list)
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    delivery: dict[str, Any] | None = None
    last_lines: list[str] = field(default_factory=list)
    nodes: int | None = None
    procs_per_node: int | None = None
    hosts: list[str] = field(default_factory=list)
    """Each node's host (node-rank order), where the provider records them."""
    total_steps: int | None = None
    """The steps the job's parameters declare (planner.progress), None if they do not."""
    eta_seconds: float | None = None
    """Seconds left at the running attempt's observed throughput, None when unknown."""

    @property
    def settled(self) -> bool:
        """Nothing is running or waiting for this job right now."""
        busy = self.phase in ("queued", "running") or any(
            e["phase"] in ("queued", "running") for e in self.evaluations
        )
        return not busy

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "runId": self.run_id,
            "phase": self.phase,
            "reason": self.reason,
            "attempt": self.attempt,
            "currentStep": self.current_step,
            "latestValidCheckpoint": self.latest_checkpoint,
            "invalidCheckpoints": self.invalid_checkpoints,
            "evaluations": self.evaluations,
            "history": self.history,
            "log": self.log,
            "attempts": self.attempts,
            "delivery": self.delivery,
            "lastLines": self.last_lines,
            "nodes": self.nodes,
            "procsPerNode": self.procs_per_node,
            "worldSize": world_size(self.nodes, self.procs_per_node),
            "hosts": self.hosts,
            "totalSteps": self.total_steps,
            "etaSeconds": None if self.eta_seconds is None else round(self.eta_seconds, 1),
        }


def observe_jobs(workspace: Workspace, jobs: list[DesiredItem]) -> dict[str, list[dict[str, Any]]]:
    targets = [
        Target(
            job.providers[0],
            ObserveRequest(job.address, job.kind, job.name, job.project, job.document),
        )
        for job in jobs
        if workspace.providers.get(job.providers[0]).supports(job.kind)
    ]
    observed = observe_all(workspace.providers, targets)
    return {address: list(o.status.get("runs", [])) for (address, _), o in observed.items()}


def job_status(
    workspace: Workspace, address: str | None = None, now: datetime | None = None
) -> list[JobReport]:
    desired = build_desired(workspace.specs)
    jobs = [d for d in desired.values() if d.kind == "TrainingJob"]
    if address is not None:
        jobs = [j for j in jobs if j.address == address]
    if not jobs:
        return []
    state = workspace.backend.read()
    runs = observe_jobs(workspace, jobs)
    pins = LockFile.read(workspace.root) or resolve_pins(
        desired, workspace.providers, workspace.root
    )
    context = JobContext(desired, pins, workspace.root, runs.get)
    reports = []
    for job in jobs:
        recorded = {}
        if state and job.address in state.resources:
            recorded = state.resources[job.address].outputs.get(job.providers[0], {})
        current = recorded.get("runId") or run_id_of(identity_inputs(job, context))
        report = job_report(job, current, runs.get(job.address, []), context, now)
        if recorded.get("runId") == report.run_id and state is not None:
            _steps_as_applied(report, state.resources[job.address].spec)
        if report.phase == "failed" and report.attempts:
            report.last_lines = _last_lines(workspace, job, report)
        reports.append(report)
    return reports


LAST_LINES = 10


def _steps_as_applied(report: JobReport, applied: dict[str, Any]) -> None:
    """The total of the run as applied (its -var values), not as the specs read now."""
    steps = total_steps(applied)
    if steps is not None and steps != report.total_steps:
        report.total_steps = steps
        latest = report.attempts[-1] if report.attempts else {}
        report.eta_seconds = eta_seconds(latest, report.current_step, steps)


def matching_jobs(known: Iterable[str], target: str) -> list[str]:
    """The job addresses `target` names: itself, else every job whose name (or
    `project/name`) it is; several when a short name is ambiguous."""
    addresses = set(known)
    if target in addresses:
        return [target]
    return sorted(
        a for a in addresses if a.rsplit("/", 1)[-1] == target or a.endswith("/" + target)
    )


def _last_lines(workspace: Workspace, job: DesiredItem, report: JobReport) -> list[str]:
    """The tail of the failed attempt's log, or nothing where the provider keeps none."""
    provider = workspace.providers.get(job.providers[0])
    reader = getattr(provider, "read_log", None)
    if reader is None or report.run_id is None:
        return []
    try:
        text, _, _ = read_log_now(reader, job.address, report.run_id, report.attempt)
    except ProviderError:
        return []
    return text.splitlines()[-LAST_LINES:]


def read_log_now(
    reader: Any, address: str, run_id: str, attempt: int, suite: str | None = None
) -> tuple[str, int, bool]:
    """Everything an attempt's log holds now (through the provider's `read_log`): its
    text, the offset after it, and whether the log is complete."""
    parts, offset = [], 0
    while True:
        chunk = reader(address, run_id, attempt, offset, suite)
        parts.append(chunk.text)
        advanced = chunk.next_offset != offset
        offset = chunk.next_offset
        if chunk.complete or not advanced:
            return "".join(parts), offset, chunk.complete


def timeline_json(
    run: dict[str, Any], now: datetime | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each attempt's timeline with its `breakdown` (planner/run_breakdown.py), and the
    run's delivery with the breakdown of the whole run."""
    timelines = attempt_timelines(run_from_json(run), now)
    breakdown = breakdown_of(run["run_id"], timelines)
    attempts = [
        {**timeline.to_json(), "breakdown": part.to_json()}
        for timeline, part in zip(timelines, breakdown.attempts, strict=True)
    ]
    return attempts, {**delivery(timelines).to_json(), "breakdown": breakdown.total.to_json()}


def job_report(
    job: DesiredItem,
    run_id: str,
    runs: list[dict[str, Any]],
    context: JobContext,
    now: datetime | None = None,
) -> JobReport:
    """What one job's run `run_id` is doing, its evaluations and the runs before it."""
    run = next((r for r in runs if r["run_id"] == run_id), None)
    history = []
    for old in runs:
        if old["run_id"] == run_id:
            continue
        attempts, cycle = timeline_json(old, now)
        history.append(
            {
                "runId": old["run_id"],
                "phase": old["attempts"][-1]["phase"] if old["attempts"] else "unknown",
                "attempts": len(old["attempts"]),
                "checkpoints": [c["id"] for c in old.get("checkpoints", [])],
                "timeline": attempts,
                "delivery": cycle,
            }
        )
    resources = job.document.get("spec", {}).get("resources")
    if run is None or not run["attempts"]:
        report = JobReport(
            job.address, run_id, "not submitted", "run `trainform apply`", history=history
        )
        if resources:
            report.nodes, report.procs_per_node = resources["nodes"], processes_per_node(resources)
        report.total_steps = total_steps(job.document)
        return report
    latest = run["attempts"][-1]
    valid = [c for c in run.get("checkpoints", []) if c["valid"]]
    evaluations = []
    for _, suite_address, _ in [r for r in job.references if r[0].startswith("spec.evaluations")]:
        suite = context.desired[suite_address]
        tried = [e for e in run.get("evaluations", []) if e["suite"] == suite_address]
        last = tried[-1] if tried else None
        metrics = last.get("metrics") if last and last["phase"] == "succeeded" else None
        results = evaluate_gates(suite.document["spec"]["gates"], metrics)
        evaluations.append(
            {
                "suite": suite_address,
                "phase": last["phase"] if last else "not run",
                "metrics": metrics or {},
                "gate": overall(results) if last else "pending",
                "gates": [r.to_json() | {"text": r.describe()} for r in results],
                "reason": last.get("reason", "") if last else "",
            }
        )
    attempts, cycle = timeline_json(run, now)
    for entry in attempts if resources else []:  # what the provider did not report
        if entry["procsPerNode"] is None:
            entry["procsPerNode"] = processes_per_node(resources)
            entry["worldSize"] = world_size(entry["nodes"], entry["procsPerNode"])
    shape = attempts[-1] if attempts else {}
    steps = total_steps(job.document)
    return JobReport(
        total_steps=steps,
        eta_seconds=eta_seconds(shape, run.get("current_step"), steps),
        nodes=shape.get("nodes"),
        procs_per_node=shape.get("procsPerNode"),
        hosts=list(shape.get("hosts") or []),
        address=job.address,
        run_id=run_id,
        attempts=attempts,
        delivery=cycle,
        phase=latest["phase"],
        reason=latest.get("reason", ""),
        attempt=latest["attempt"],
        current_step=run.get("current_step"),
        latest_checkpoint=max(valid, key=lambda c: c["step"]) if valid else None,
        invalid_checkpoints=[c for c in run.get("checkpoints", []) if not c["valid"]],
        evaluations=evaluations,
        history=history,
        log=latest.get("log", ""),
    )
