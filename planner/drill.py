"""`trainform drill JOB`: one job run under baseline, congested and failure conditions.

Called by cli/drill.py; returns the report's data (planner/drill_evidence.py per
condition) and never renders. The order of one drill:

1. Refuse a production environment (specs.environments.is_production) unless allowed,
   and refuse a job whose plan is not empty (never applied, pending changes of its own or
   of what it depends on): the drill applies nothing but new runs of the job.
2. Per condition, a new run of the same job (`--replace` through the normal plan and apply,
   planner/drill_engine.py), so image, data, code, command, parameters and resources are
   the same each time; followed until its plan is empty (trained and evaluated) or its time
   limit passes (then it is cancelled, and the condition says so).
   - baseline: as declared;
   - congested: filler runs hold the job's queue and quota first, released after the job
     waited `hold` seconds (planner/drill_conditions.py);
   - failure: a fault after the running attempt wrote `after_checkpoint` checkpoints,
     then the platform's own recovery.
3. Clean up, whatever happened: fillers cancelled, and the job's state entry restored as it
   was (its run before the drill is current again, so `plan` is empty); every apply and the
   restore are audited as `drill`. The drill's runs stay in the provider's records, which
   is what `usage` charges (as the drill's cost, planner/usage.py `drill_charges`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.drill_conditions import Fault, Fillers
from trainform.planner.drill_engine import (
    Deadline,
    DrillError,
    apply_job,
    current_run,
    follow_run,
    job_item,
    job_plan,
    read_run,
)
from trainform.planner.drill_evidence import condition_evidence, identity_digest
from trainform.planner.jobs import JobContext, identity_inputs
from trainform.planner.lockfile import LockFile, resolve_pins
from trainform.planner.state import ResourceState
from trainform.planner.status import matching_jobs
from trainform.planner.timeline import iso
from trainform.planner.workspace import Workspace
from trainform.providers.errors import ProviderError
from trainform.specs.environments import is_production

CONDITIONS = ("baseline", "congested", "failure")
REPORT_FORMAT_VERSION = 1
FAULTS = {"local": "kill the training process", "slurm": "cancel one job step (scancel)",
          "kubernetes": "delete a pod"}  # fmt: skip
FRAMEWORKS = ("python", "pytorch (torchrun)")


@dataclass(frozen=True)
class DrillOptions:
    conditions: tuple[str, ...] = CONDITIONS
    time_limit: float = 600.0
    """Seconds each condition may take, its run and evaluations included."""
    allow_production: bool = False
    tolerance: float = 1e-3
    """Relative (at least absolute) difference allowed between a metric and the baseline's."""
    after_checkpoint: int = 1
    """The failure condition's fault comes once the attempt wrote this many checkpoints."""
    hold: float = 2.0
    """Seconds the congested condition keeps the job waiting behind its fillers."""


def resolve_job(workspace: Workspace, target: str) -> str:
    jobs = [a for a, d in build_desired(workspace.specs).items() if d.kind == "TrainingJob"]
    found = matching_jobs(jobs, target)
    if len(found) == 1:
        return found[0]
    if found:
        raise DrillError(f"{target} is ambiguous: {', '.join(found)}; give the whole address")
    raise DrillError(f"no TrainingJob {target} in the specs")


def preflight(workspace: Workspace, address: str, options: DrillOptions) -> ResourceState:
    """The job's state entry before the drill, once the drill may run on it."""
    environment = workspace.specs.environment
    if is_production(workspace.config, environment) and not options.allow_production:
        raise DrillError(
            f"environment {environment or '(default)'} is production: a drill runs the job "
            "three more times and fills its queue; pass --allow-production to drill it anyway"
        )
    unknown = [c for c in options.conditions if c not in CONDITIONS]
    if unknown or not options.conditions:
        raise DrillError(f"conditions must be among {', '.join(CONDITIONS)}, not {unknown}")
    plan = job_plan(workspace, address)
    if plan.has_changes:
        pending = ", ".join(f"{c.address} ({c.action.value})" for c in plan.actionable)
        raise DrillError(
            f"the plan of {address} is not empty ({pending}): apply it and let the run settle "
            "first; a drill starts from a job whose plan shows no changes"
        )
    state = workspace.backend.read()
    recorded = state.resources.get(address) if state else None
    if recorded is None:
        raise DrillError(f"{address} is not in state: apply it first")
    return ResourceState.from_json(address, recorded.to_json())


def run_drill(
    workspace: Workspace,
    target: str,
    options: DrillOptions = DrillOptions(),  # noqa: B008 - frozen value
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the drill and return its report's data (see the module docstring)."""
    address = resolve_job(workspace, target)
    before = preflight(workspace, address, options)
    item = job_item(workspace, address)
    context = _context(workspace, item, options)
    started = iso(datetime.now(UTC))
    conditions: list[dict[str, Any]] = []
    temporary: list[dict[str, Any]] = []
    try:
        for name in options.conditions:
            say(f"{name}: submitting a new run of {address}")
            baseline = next((c for c in conditions if c["name"] == "baseline"), None)
            evidence = _condition(workspace, item, name, options, context, baseline, temporary)
            say(f"{name}: {evidence['outcome']} (run {evidence['runId']})")
            conditions.append(evidence)
    finally:
        restore(workspace, before)
    after = job_plan(workspace, address)
    return _report(workspace, item, options, started, conditions, temporary, after.has_changes)


def _context(workspace: Workspace, item: DesiredItem, options: DrillOptions) -> dict[str, Any]:
    desired = build_desired(workspace.specs)
    pins = LockFile.read(workspace.root) or resolve_pins(
        desired, workspace.providers, workspace.root
    )
    inputs = identity_inputs(item, JobContext(desired, pins, workspace.root, lambda _: None))
    return {
        "address": item.address,
        "project": item.project,
        "queue": item.document["spec"]["queue"],
        "inputs": inputs,
        "tolerance": options.tolerance,
    }


def _condition(
    workspace: Workspace,
    item: DesiredItem,
    name: str,
    options: DrillOptions,
    context: dict[str, Any],
    baseline: dict[str, Any] | None,
    temporary: list[dict[str, Any]],
) -> dict[str, Any]:
    deadline = Deadline(options.time_limit, f"the {name} run of {item.address}")
    extra: dict[str, Any] = {
        "timeLimitSeconds": options.time_limit,
        "stopCondition": "the job's plan is empty: its run settled and evaluated",
    }
    hook: Fillers | Fault | None = None
    if name == "congested":
        hook = Fillers(workspace, item, options.hold, int(options.time_limit) + 60)
        hook.fill()
    elif name == "failure":
        hook = Fault(workspace, item, options.after_checkpoint)
    error = ""
    try:
        fillers = hook.to_json()["fillers"] if isinstance(hook, Fillers) else None
        note = {"fillers": fillers} if fillers else None
        apply_job(workspace, item, name, replace=True, inputs=context["inputs"], note=note)
        run = follow_run(workspace, item, name, deadline, hook.on_poll if hook else None)
    except (DrillError, ProviderError) as exc:
        error = str(exc)
        run = _stop(workspace, item)
    finally:
        if isinstance(hook, Fillers):
            hook.release()
    extra["elapsedSeconds"] = round(time.monotonic() - deadline.started, 3)
    if isinstance(hook, Fillers):
        extra["congestion"] = hook.to_json()
        temporary.append({"condition": name, **extra["congestion"]})
    elif isinstance(hook, Fault):
        extra["fault"] = hook.to_json() | {"kind": _fault_kind(workspace, item)}
        extra["seen"] = list(hook.seen.values())
    evidence = condition_evidence(name, run, context | extra, baseline)
    if error:
        evidence["error"] = error
    return evidence


def _stop(workspace: Workspace, item: DesiredItem) -> dict[str, Any]:
    """Cancel the condition's run (past its time limit, or failed to go on); what is left."""
    run_id = current_run(workspace, item)
    if run_id is None:
        return {"run_id": "-", "attempts": []}
    provider = workspace.providers.get(item.providers[0])
    try:
        provider.cancel(item.address, run_id)  # type: ignore[attr-defined]
    except ProviderError:
        pass
    return read_run(workspace, item, run_id) or {"run_id": run_id, "attempts": []}


def _fault_kind(workspace: Workspace, item: DesiredItem) -> str:
    instance = workspace.config.provider(item.providers[0])
    return FAULTS.get(getattr(instance, "type", ""), "provider-specific")


def restore(workspace: Workspace, before: ResourceState) -> None:
    """Put the job's state entry back as it was before the drill (audited as `drill`)."""
    backend = workspace.backend
    info = backend.lock("drill")
    try:
        state = backend.read()
        assert state is not None
        backend.record(
            state, {"type": "outcome", "address": before.address, "resource": before.to_json()}
        )
        backend.compact(state)
        backend.finish_audit(
            info, environment=workspace.specs.environment, outcome="succeeded",
            drill={"restored": before.address},
        )  # fmt: skip
    finally:
        backend.unlock(info)


def _total_usage(conditions: list[dict[str, Any]]) -> dict[str, float]:
    """The drill's hours: every condition's run and the congested condition's fillers."""
    parts = [c["usage"] for c in conditions]
    parts += [c["congestion"]["usage"] for c in conditions if c.get("congestion")]
    return {
        key: round(sum(part[key] for part in parts), 6) for key in ("acceleratorHours", "cpuHours")
    }


def _framework(item: DesiredItem) -> str:
    command = [str(part) for part in item.document["spec"].get("command", [])]
    return FRAMEWORKS[1] if any(p.endswith("torchrun") for p in command) else FRAMEWORKS[0]


def _report(
    workspace: Workspace,
    item: DesiredItem,
    options: DrillOptions,
    started: str,
    conditions: list[dict[str, Any]],
    temporary: list[dict[str, Any]],
    plan_changes: bool,
) -> dict[str, Any]:
    instance = workspace.config.provider(item.providers[0])
    provider_type = getattr(instance, "type", "")
    framework = _framework(item)
    tested = (framework, provider_type, FAULTS.get(provider_type, ""))
    untested = [
        {"framework": f, "provider": p, "fault": fault, "status": "untested"}
        for f in FRAMEWORKS
        for p, fault in FAULTS.items()
        if (f, p, fault) != tested or "failure" not in options.conditions
    ]
    return {
        "formatVersion": REPORT_FORMAT_VERSION,
        "job": item.address,
        "environment": workspace.specs.environment,
        "provider": {"name": item.providers[0], "type": provider_type},
        "framework": framework,
        "identity": identity_digest(_context(workspace, item, options)["inputs"]),
        "startedAt": started,
        "endedAt": iso(datetime.now(UTC)),
        "tolerance": options.tolerance,
        "conditions": conditions,
        "temporaryObjects": temporary,
        "cleanup": {
            "stateRestored": True,
            "planAfterDrill": "changes" if plan_changes else "no changes",
            "left": [a for t in temporary for a in t.get("left", [])],
        },
        "usage": _total_usage(conditions),
        "untested": untested,
    }
