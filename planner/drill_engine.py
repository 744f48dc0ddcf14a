"""The drill's use of the normal engine: plan and apply one job, follow its run to the end.

Called by planner/drill.py. Every run a drill makes goes through `make_plan` and
`apply_plan` with the job as `--target` (and `--replace` for a new run of the same inputs),
under the state lock and audited as operation `drill` (the record names the condition and
the run, which `usage` reads to charge drills). A drill plan that would change anything
but the job is refused: a drill never applies someone's pending changes.

`follow_run` polls the provider (short waits, never longer than the condition's deadline):
it runs the provider's scheduler step (`tick`), reads the run, lets the condition act on it
(`on_poll`: inject a fault, release a filler), and when nothing of the run is queued or
running asks the plan what comes next (evaluate, resume) and applies it, until the plan of
the job is empty: the run is settled as the engine itself would leave it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainform.planner.apply import apply_plan
from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.errors import PlannerError
from trainform.planner.jobs import run_id_of
from trainform.planner.lockfile import LockFile
from trainform.planner.plan import PlanOptions, make_plan
from trainform.planner.plan_model import Plan
from trainform.planner.state import ResourceState
from trainform.planner.status import observe_jobs
from trainform.planner.workspace import Workspace

POLL_SECONDS = 0.2


class DrillError(PlannerError):
    """A drill cannot start or go on; nothing more is submitted."""


@dataclass
class Deadline:
    """A condition's time limit."""

    seconds: float
    what: str
    started: float = 0.0

    def __post_init__(self) -> None:
        self.started = time.monotonic()

    @property
    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def check(self) -> None:
        if self.left <= 0:
            raise DrillError(
                f"{self.what} did not finish within its time limit of {self.seconds:g}s"
            )


def job_item(workspace: Workspace, address: str) -> DesiredItem:
    item = build_desired(workspace.specs).get(address)
    if item is None or item.kind != "TrainingJob":
        raise DrillError(f"no TrainingJob {address} in the specs")
    return item


def job_plan(workspace: Workspace, address: str, replace: bool = False) -> Plan:
    """The plan of the job and its dependencies (as `plan --target JOB [--replace JOB]`)."""
    options = PlanOptions(
        targets=(address,),
        replace=(address,) if replace else (),
        mass_delete_share=workspace.config.policies.mass_delete_share,
        lock_digest=workspace.lock_digest(),
        lock=LockFile.read(workspace.root),
    )
    return make_plan(workspace.specs, workspace.backend.read(), workspace.providers, options)


def others_changing(plan: Plan, address: str) -> list[str]:
    """What the plan would change besides the job, as `ADDRESS (action)`."""
    return [f"{c.address} ({c.action.value})" for c in plan.actionable if c.address != address]


def current_run(workspace: Workspace, item: DesiredItem) -> str | None:
    state = workspace.backend.read()
    recorded = state.resources.get(item.address) if state else None
    if recorded is None:
        return None
    run_id = recorded.outputs.get(item.providers[0], {}).get("runId")
    return str(run_id) if run_id else None


def fresh_rerun(workspace: Workspace, item: DesiredItem, inputs: dict[str, Any]) -> None:
    """Make the next `--replace` of the job a run its provider has never seen.

    A new run's id counts the replacements (`rerun` in the recorded inputs); the drill
    restores the job's state afterwards, so a later drill would count from the same number
    and name a run an earlier drill already made. Where that is so, the recorded counter
    is moved past every run the provider knows (one journaled state write; the caller
    holds the lock)."""
    known = {r["run_id"] for r in observe_jobs(workspace, [item]).get(item.address, [])}
    state = workspace.backend.read()
    recorded = state.resources.get(item.address) if state else None
    if state is None or recorded is None:
        return
    outputs = recorded.outputs.get(item.providers[0], {})
    start = int((outputs.get("inputs") or {}).get("rerun", 0))
    count = start + 1
    while run_id_of({**inputs, "rerun": count}) in known:
        count += 1
    if count == start + 1:
        return
    moved = ResourceState.from_json(item.address, recorded.to_json())
    mine = moved.outputs.setdefault(item.providers[0], {})
    mine["inputs"] = {**(mine.get("inputs") or inputs), "rerun": count - 1}
    workspace.backend.record(
        state, {"type": "outcome", "address": item.address, "resource": moved.to_json()}
    )


def apply_job(
    workspace: Workspace,
    item: DesiredItem,
    condition: str,
    replace: bool,
    inputs: dict[str, Any] | None = None,
    note: dict[str, Any] | None = None,
) -> Plan:
    """Plan and apply the job's next step under the lock; the plan applied (or empty).
    With `replace`, a new run (`inputs`: the job's identity inputs, see fresh_rerun)."""
    backend = workspace.backend
    info = backend.lock("drill")
    try:
        if replace and inputs is not None:
            fresh_rerun(workspace, item, inputs)
        plan = job_plan(workspace, item.address, replace)
        others = others_changing(plan, item.address)
        if others:
            raise DrillError(
                f"the plan of {item.address} also changes {', '.join(others)}; a drill applies "
                "nothing but its job: apply those changes first"
            )
        if not plan.has_changes:
            return plan
        result = apply_plan(plan, backend, workspace.providers, parallelism=4, location="drill")
        changes = [
            {"address": o.address, "action": o.action.value, "outcome": o.status.value}
            for o in result.outcomes
        ]
        backend.finish_audit(
            info,
            environment=workspace.specs.environment,
            outcome="failed" if result.failed else "succeeded",
            drill={"condition": condition, "address": item.address,
                   "runId": current_run(workspace, item), **(note or {})},
            changes=changes,
        )  # fmt: skip
        if result.failed:
            problems = "; ".join(f"{o.address}: {o.message}" for o in result.outcomes if o.message)
            raise DrillError(f"cannot apply the {condition} run of {item.address}: {problems}")
        return plan
    finally:
        backend.unlock(info)


def tick(workspace: Workspace) -> None:
    """One scheduler step of every provider that has one (the local admission)."""
    for instance in workspace.config.providers:
        step = getattr(workspace.providers.get(instance.name), "tick", None)
        if callable(step):
            step()


def read_run(workspace: Workspace, item: DesiredItem, run_id: str) -> dict[str, Any] | None:
    runs = observe_jobs(workspace, [item]).get(item.address, [])
    return next((r for r in runs if r["run_id"] == run_id), None)


def busy(run: dict[str, Any] | None) -> bool:
    """Something of the run is queued or running (training or an evaluation)."""
    if run is None or not run["attempts"]:
        return True
    phases = [run["attempts"][-1]["phase"], *(e["phase"] for e in run.get("evaluations", []))]
    return any(p in ("queued", "running") for p in phases)


def follow_run(
    workspace: Workspace,
    item: DesiredItem,
    condition: str,
    deadline: Deadline,
    on_poll: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Follow the job's current run until its plan is empty (see the module docstring)."""
    run_id = current_run(workspace, item)
    if run_id is None:
        raise DrillError(f"{item.address} has no run in state after the {condition} apply")
    while True:
        deadline.check()
        tick(workspace)
        run = read_run(workspace, item, run_id)
        if run is not None and on_poll is not None:
            on_poll(run)
        if busy(run):
            time.sleep(POLL_SECONDS)
            continue
        plan = apply_job(workspace, item, condition, replace=False)
        if plan.has_changes:
            continue
        waiting = [f for f in plan.findings if f.kind == "retry-backoff"]
        if not waiting:
            assert run is not None
            return run
        time.sleep(POLL_SECONDS)
