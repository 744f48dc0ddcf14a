"""TrainingJob reconciliation: run identity, and the next step of a job's state machine.

Provider-independent. A job's *run* is identified by a hash of what makes it reproducible
(image digest, dataset manifest digests, code identity: the content digest of the code
folder or the pinned commit, command, parameters, resources, initialisation); a change to
any of them plans a new run (replace; the old run and its checkpoints stay in history),
anything else is an in-place update. For the current run the plan is: submit it (create),
wait (no-op while queued or running, or while a failed attempt's retry backoff runs),
resume a failed or preempted attempt from its latest valid checkpoint (while retries
remain), or evaluate a succeeded run with the suites bound to it; gate results, exhausted
retries, invalid checkpoints and mutated data become findings. Nothing is submitted on mutated data.
Secret-looking parameters and command arguments enter the run identity masked
(`specs.secrets.mask_tree`): plans and state show masks, launches carry the real values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from trainform.planner.code_changes import name_code_files
from trainform.planner.desired import DesiredItem
from trainform.planner.diff import diff_documents
from trainform.planner.errors import PlannerError
from trainform.planner.gates import evaluate_gates, overall
from trainform.planner.lockfile import LockFile, code_key
from trainform.planner.plan_model import Action, PlanFinding, ResourceChange
from trainform.planner.state import ResourceState, canonical_json
from trainform.planner.timeline import iso, parse_time
from trainform.providers.jobs import DatasetInput, JobLaunch, retry_delay
from trainform.specs import Duration
from trainform.specs.code_sources import UnsafeCode, parse_repo
from trainform.specs.confinement import PathEscape, confined_path
from trainform.specs.secrets import mask_document, mask_tree


@dataclass
class JobContext:
    desired: dict[str, DesiredItem]
    pins: LockFile
    spec_root: Path
    runs_of: Callable[[str], list[dict[str, Any]] | None]
    mutated: dict[str, set[str]] = field(default_factory=dict)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    replace: frozenset[str] = frozenset()
    """Jobs to start a new run of although their inputs are unchanged (--replace)."""
    code_exclude: tuple[Path, ...] = ()
    """What a code folder's selection leaves out (planner.lockfile.local_roots)."""


def _seconds(text: str | None) -> int | None:
    return Duration(text).seconds if text else None


def _refs(item: DesiredItem, prefix: str) -> list[tuple[str, str, str | None]]:
    return [r for r in item.references if r[0] == prefix or r[0].startswith(prefix + ".")]


def identity_inputs(item: DesiredItem, ctx: JobContext) -> dict[str, Any]:
    spec = item.document["spec"]
    image = next((a for _, a, _ in _refs(item, "spec.image")), "")
    datasets = []
    for _, address, version in _refs(item, "spec.datasets"):
        key = f"{address}@{version}"
        pinned = ctx.pins.datasets.get(key, {}).get("manifestDigest")
        datasets.append({"dataset": key, "manifestDigest": pinned or "unpinned"})
    code = spec.get("code")
    inputs: dict[str, Any] = {
        "image": {
            "image": image,
            "digest": ctx.pins.images.get(image, {}).get("digest", "unpinned"),
        },
        "datasets": sorted(datasets, key=lambda d: d["dataset"]),
        "code": {"location": code_key(code), **ctx.pins.code.get(code_key(code), {})}
        if code
        else None,
        "command": spec["command"],
        "parameters": spec["parameters"],
        "resources": spec["resources"],
    }
    if spec.get("initFrom"):
        inputs["initFrom"] = spec["initFrom"]
    # secret-looking values enter the run id, the plan and state only as their masks
    return mask_tree(inputs)  # type: ignore[no-any-return]


def image_of(item: DesiredItem, ctx: JobContext) -> str:
    """`repository@digest` of a container image the item runs; "" for host runtimes."""
    address = next((a for _, a, _ in _refs(item, "spec.image")), "")
    image = ctx.desired.get(address)
    if image is None or image.document["spec"].get("runtime") == "host":
        return ""
    reference = image.document["spec"].get("reference") or ""
    digest = ctx.pins.images.get(address, {}).get("digest")
    if not reference or not digest:
        return reference
    name = reference.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    return f"{name}@{digest}"


def run_id_of(inputs: dict[str, Any]) -> str:
    return "r-" + hashlib.sha256(canonical_json(inputs).encode()).hexdigest()[:12]


def _input_changes(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    if not before:
        return ["reproducibility inputs changed"]
    return [
        f"{c.path}: {_short(c.before)} -> {_short(c.after)}" for c in diff_documents(before, after)
    ] or ["reproducibility inputs changed"]


def _short(value: Any) -> str:
    text = str(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def _dataset_inputs(item: DesiredItem, ctx: JobContext) -> list[DatasetInput]:
    inputs = []
    for _, address, version in _refs(item, "spec.datasets"):
        dataset = ctx.desired[address]
        chosen = version or dataset.document["spec"]["versions"][-1]["name"]
        pinned = ctx.pins.datasets.get(f"{address}@{chosen}", {}).get("manifestDigest", "")
        inputs.append(DatasetInput(dataset.name, address, chosen, pinned, dataset.document))
    return inputs


def _code_dir(spec: dict[str, Any], ctx: JobContext) -> str | None:
    code = spec.get("code")
    if not code:
        return None
    try:
        if parse_repo(code["repo"]).remote:
            return None
    except UnsafeCode as exc:
        raise PlannerError(f"cannot use code {code['repo']!r}: {exc}") from None
    try:  # validate refused this already (specs.code_sources); never copy a host folder
        folder = confined_path(ctx.spec_root, f"{code['repo']}/{code.get('path') or ''}")
    except PathEscape as exc:
        raise PlannerError(
            f"cannot use code {code['repo']!r}: {exc}; keep job code inside the spec folder"
        ) from None
    return str(folder)


def _queue(item: DesiredItem, ctx: JobContext) -> DesiredItem:
    address = next(a for _, a, _ in _refs(item, "spec.queue"))
    return ctx.desired[address]


def training_launch(
    item: DesiredItem, ctx: JobContext, run_id: str, attempt: int, resume_from: str | None
) -> JobLaunch:
    spec = item.document["spec"]
    queue = _queue(item, ctx)
    checkpoint = spec.get("checkpoint") or {}
    return JobLaunch(
        address=item.address,
        run_id=run_id,
        attempt=attempt,
        kind="train",
        project=item.project,
        queue=queue.name,
        priority=spec["priority"]
        if spec.get("priority") is not None
        else queue.document["spec"]["defaultPriority"],
        command=list(spec["command"]),
        code_dir=_code_dir(spec, ctx),
        parameters=dict(spec["parameters"]),
        env=dict(spec["env"]),
        datasets=_dataset_inputs(item, ctx),
        cpu=spec["resources"]["cpu"],
        memory=spec["resources"]["memory"],
        gpus=spec["resources"]["acceleratorsPerNode"] * spec["resources"]["nodes"],
        nodes=spec["resources"]["nodes"],
        checkpoint_interval=_seconds(checkpoint.get("interval")),
        keep_last=checkpoint.get("keepLast"),
        checkpoint_prefix=checkpoint.get("prefix") or "",
        resume_from=resume_from,
        max_runtime=_seconds(spec.get("maxRuntime")),
        image=image_of(item, ctx),
        retries=spec["retries"]["limit"],
        backoff=_seconds(spec["retries"]["backoff"]) or 0,
        resume=spec["resume"]["policy"],
        procs_per_node=spec["resources"].get("procsPerNode") or 0,
    )


def evaluation_launch(
    item: DesiredItem, suite: DesiredItem, ctx: JobContext, run_id: str, attempt: int
) -> JobLaunch:
    job = item.document["spec"]
    spec = suite.document["spec"]
    resources = spec.get("resources") or {
        "cpu": "1",
        "memory": str(512 * 2**20),
        "nodes": 1,
        "acceleratorsPerNode": 0,
    }
    queue, priority = evaluation_queue(item, suite, ctx)
    return JobLaunch(
        address=item.address,
        run_id=run_id,
        attempt=attempt,
        kind="eval",
        project=item.project,
        queue=queue,
        priority=priority,
        command=list(spec["command"]),
        code_dir=_code_dir(spec, ctx),
        parameters=dict(job["parameters"]),
        env={},
        datasets=_dataset_inputs(suite, ctx),
        cpu=resources["cpu"],
        memory=resources["memory"],
        gpus=resources["acceleratorsPerNode"] * resources["nodes"],
        nodes=resources["nodes"],
        max_runtime=_seconds(spec.get("timeout")),
        suite=suite.address,
        model_run=run_id,
        image=image_of(suite, ctx),
        procs_per_node=resources.get("procsPerNode") or 0,
    )


def evaluation_queue(item: DesiredItem, suite: DesiredItem, ctx: JobContext) -> tuple[str, int]:
    """The queue and priority an evaluation runs at: the suite's where it declares them (a
    suite naming a queue but no priority gets that queue's defaultPriority, as a job
    does), else the training job's; the same on every provider."""
    spec, job = suite.document["spec"], item.document["spec"]
    named = [a for _, a, _ in _refs(suite, "spec.queue")]
    queue = ctx.desired[named[0]] if named else _queue(item, ctx)
    if spec.get("priority") is not None:
        return queue.name, int(spec["priority"])
    if not named and job.get("priority") is not None:
        return queue.name, int(job["priority"])
    return queue.name, int(queue.document["spec"]["defaultPriority"])


def _blocked(item: DesiredItem, ctx: JobContext) -> list[str]:
    reasons = []
    for _, address, version in _refs(item, "spec.datasets"):
        if version in ctx.mutated.get(address, set()):
            reasons.append(f"dataset {address}@{version} was mutated under its pinned version")
    return reasons


def _suites(item: DesiredItem, ctx: JobContext) -> list[DesiredItem]:
    return [ctx.desired[a] for _, a, _ in _refs(item, "spec.evaluations")]


@dataclass(slots=True)
class JobStep:
    """One job being planned: what the decisions about its next step share."""

    item: DesiredItem
    previous: ResourceState | None
    ctx: JobContext
    recorded: dict[str, Any]
    """The job's outputs in state (from its first provider)."""
    inputs: dict[str, Any]
    run_id: str
    history: list[str]
    blocked: list[str]
    """Why nothing may be submitted (mutated data), empty when it may."""
    findings: list[PlanFinding] = field(default_factory=list)

    def change(
        self, action: Action, reasons: list[str], job: dict[str, Any] | None = None, **extra: Any
    ) -> ResourceChange:
        previous = self.previous
        return ResourceChange(
            self.item.address,
            self.item.kind,
            action,
            self.item.providers,
            reasons,
            before=previous.spec if previous else None,
            after=self.item.document,
            after_hash=self.item.spec_hash,
            dependencies=self.item.dependencies,
            previous_dependencies=previous.dependencies if previous else [],
            location=self.item.location,
            job=job or {},
            **extra,
        )

    def base_job(self, attempt: int, **more: Any) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "inputs": self.inputs,
            "attempt": attempt,
            "history": self.history,
            **more,
        }

    def note(self, kind: str, severity: str, message: str) -> None:
        self.findings.append(PlanFinding(self.item.address, kind, severity, message))

    def hold(self) -> ResourceChange:
        """A no-op that says why nothing is submitted (`blocked`)."""
        for reason in self.blocked:
            self.note("not-submitted", "warning", f"not submitted: {reason}")
        return self.change(Action.NOOP, self.blocked)


def plan_job(
    item: DesiredItem, previous: ResourceState | None, ctx: JobContext, refreshed: bool
) -> tuple[ResourceChange, list[PlanFinding]]:
    """The next step for one job, with its reasons, and what the plan should point out."""
    step = identify_run(item, previous, ctx)
    current = step.recorded.get("runId")
    if current is None or current != step.run_id:
        return start_run(step, current), step.findings
    return follow_run(step, refreshed), step.findings


def identify_run(item: DesiredItem, previous: ResourceState | None, ctx: JobContext) -> JobStep:
    """The run the job's inputs identify now, with what its next step is decided from."""
    recorded = previous.outputs.get(item.providers[0], {}) if previous else {}
    inputs = identity_inputs(item, ctx)
    # A run asked for with --replace counts as one more input (`rerun`), kept in state so
    # the plans after it keep the new run's id.
    rerun = (recorded.get("inputs") or {}).get("rerun", 0)
    if recorded.get("runId") is not None and item.address in ctx.replace:
        rerun += 1
    if rerun:
        inputs["rerun"] = rerun
    return JobStep(
        item,
        previous,
        ctx,
        recorded,
        inputs,
        run_id_of(inputs),
        list(recorded.get("history", [])),
        _blocked(item, ctx),
    )


def start_run(step: JobStep, current: str | None) -> ResourceChange:
    """Submit the identified run: the first one (create) or a new one (replace `current`)."""
    if step.blocked:
        return step.hold()
    run_id, item = step.run_id, step.item
    launch = training_launch(item, step.ctx, run_id, 1, None).to_json()
    if current is None:
        return step.change(Action.CREATE, [f"submit run {run_id}"], step.base_job(1, launch=launch))
    folder = _code_dir(item.document["spec"], step.ctx)
    reasons = _input_changes(step.recorded.get("inputs"), step.inputs)
    reasons = name_code_files(reasons, step.recorded, folder, step.ctx.code_exclude)
    reasons = [f"{r}: a reproducibility input changed, so this is a new run" for r in reasons]
    if item.address in step.ctx.replace:
        reasons = ["a new run requested with --replace"]
    reasons.append(f"run {current} and its checkpoints stay in history")
    job = step.base_job(1, launch=launch, cancel=current, history=step.history + [current])
    return step.change(Action.REPLACE, reasons, job)


def follow_run(step: JobStep, refreshed: bool) -> ResourceChange:
    """The next step of the current run, from what the provider reports of it."""
    item, previous, run_id = step.item, step.previous, step.run_id
    spec_changed = previous is not None and previous.spec_hash != item.spec_hash
    masked_document = mask_document(item.document)
    in_place = (
        [c.path for c in diff_documents(previous.spec if previous else {}, masked_document)]
        if spec_changed
        else []
    )
    runs = step.ctx.runs_of(item.address) if refreshed else None
    run = next((r for r in runs or [] if r["run_id"] == run_id), None)
    if run is None or not run["attempts"]:
        if refreshed:
            launch = training_launch(item, step.ctx, run_id, 1, None)
            return step.change(
                Action.CREATE,
                [f"run {run_id} is unknown to the provider: submit it"],
                step.base_job(1, launch=launch.to_json()),
            )
        return _in_place(step, in_place)
    step.findings += _checkpoint_findings(item.address, run)
    latest = run["attempts"][-1]
    phase = latest["phase"]
    if phase in ("queued", "running"):
        waiting = _backoff_until(latest, step.ctx.now)
        if waiting:
            step.note(
                "retry-backoff",
                "info",
                f"run {run_id}: attempt {latest['attempt']} waits for its retry backoff "
                f"until {waiting}; the provider starts it then",
            )
        return _in_place(step, in_place)
    if phase in ("failed", "cancelled"):
        return retry_run(step, run, in_place)
    return evaluate_run(step, run, in_place)


def retry_run(step: JobStep, run: dict[str, Any], in_place: list[str]) -> ResourceChange:
    """A failed or cancelled run: resume it while retries remain and its backoff is over."""
    item, run_id = step.item, step.run_id
    latest = run["attempts"][-1]
    phase = latest["phase"]
    attempts = len(run["attempts"])
    limit = item.document["spec"]["retries"]["limit"]
    if attempts > limit:
        step.note(
            "retries-exhausted",
            "warning",
            f"run {run_id}: retries exhausted ({attempts} attempts, "
            f"retries.limit {limit}); last attempt {phase}: "
            f"{latest.get('reason') or 'no reason recorded'}",
        )
        return _in_place(step, in_place)
    if step.blocked:
        return step.hold()
    due = _retry_due(item, latest, attempts, step.ctx.now) if phase == "failed" else None
    if due is not None:
        step.note(
            "retry-backoff",
            "info",
            f"run {run_id}: attempt {attempts} failed "
            f"({latest.get('reason') or 'no reason recorded'}); attempt {attempts + 1} "
            f"resumes after its retry backoff, at {due}",
        )
        return _in_place(step, in_place)
    return resume_run(step, run)


def resume_run(step: JobStep, run: dict[str, Any]) -> ResourceChange:
    """The next attempt of the run, from its latest valid checkpoint if it has one."""
    item = step.item
    latest = run["attempts"][-1]
    phase = latest["phase"]
    attempts = len(run["attempts"])
    checkpoint = _resume_point(item, run)
    reasons = [f"attempt {attempts} {phase}: {latest.get('reason') or 'no reason recorded'}"]
    if checkpoint:
        reasons.append(
            f"resume from the latest valid checkpoint {checkpoint['id']} "
            f"(step {checkpoint['step']})"
        )
    else:
        reasons.append("no valid checkpoint to resume from: start the run over")
    launch = training_launch(
        item, step.ctx, step.run_id, attempts + 1, checkpoint["id"] if checkpoint else None
    )
    if phase == "failed":
        launch = replace(launch, eligible_at=_retry_time(item, latest, attempts))
    job = step.base_job(
        attempts + 1,
        launch=launch.to_json(),
        resumeFrom=checkpoint["id"] if checkpoint else None,
    )
    return step.change(Action.RESUME, reasons, job)


def evaluate_run(step: JobStep, run: dict[str, Any], in_place: list[str]) -> ResourceChange:
    """A succeeded run: evaluate it with the suites not yet (successfully) run on it."""
    item, run_id = step.item, step.run_id
    launches = []
    reasons = []
    for suite in _suites(item, step.ctx):
        tried = [e for e in run.get("evaluations", []) if e["suite"] == suite.address]
        last = tried[-1] if tried else None
        if last is None or (
            last["phase"] in ("failed", "cancelled")
            and len(tried) <= item.document["spec"]["retries"]["limit"]
        ):
            launch = evaluation_launch(item, suite, step.ctx, run_id, len(tried) + 1)
            launches.append(launch.to_json())
            reasons.append(
                f"run {run_id} succeeded: evaluate with {suite.address}"
                + (f" (attempt {len(tried) + 1})" if tried else "")
            )
            continue
        judge_evaluation(step, suite, last)
    if launches:
        job = step.base_job(len(run["attempts"]), evaluations=launches)
        return step.change(Action.EVALUATE, reasons, job)
    return _in_place(step, in_place)


def judge_evaluation(step: JobStep, suite: DesiredItem, last: dict[str, Any]) -> None:
    """Findings for a suite's last evaluation of the run: failing gates, or its failure."""
    run_id = step.run_id
    if last["phase"] == "succeeded":
        results = evaluate_gates(
            suite.document["spec"]["gates"],
            last.get("metrics"),
            baseline_lookup(step.item, step.ctx, suite),
        )
        verdict = overall(results)
        if verdict != "pass":
            step.note(
                f"gate-{verdict}",
                "warning",
                f"{suite.address} on run {run_id}: "
                + "; ".join(r.describe() for r in results if r.status != "pass"),
            )
    elif last["phase"] in ("failed", "cancelled"):
        step.note(
            "evaluation-failed",
            "warning",
            f"{suite.address} on run {run_id} {last['phase']}: {last.get('reason', '')}",
        )


def _backoff_until(attempt: dict[str, Any], now: datetime) -> str | None:
    """The attempt's eligible time, when it is queued and that time is still ahead."""
    eligible = parse_time(attempt.get("eligible_at") or "")
    if attempt.get("phase") != "queued" or eligible is None or eligible <= now:
        return None
    return iso(eligible)


def _retry_time(item: DesiredItem, latest: dict[str, Any], failed: int) -> str:
    """When a failed attempt's retry backoff ends ("" when its end is not recorded)."""
    backoff = Duration(item.document["spec"]["retries"]["backoff"]).seconds
    ended = parse_time(latest.get("ended_at") or "")
    if ended is None:
        return ""
    return iso(ended + timedelta(seconds=retry_delay(backoff, failed)))


def _retry_due(item: DesiredItem, latest: dict[str, Any], failed: int, now: datetime) -> str | None:
    """When a failed attempt may be resubmitted, if that is still ahead (its backoff)."""
    due = parse_time(_retry_time(item, latest, failed))
    return iso(due) if due is not None and due > now else None


def _in_place(step: JobStep, paths: list[str]) -> ResourceChange:
    """The run continues: a no-op, or an update of the fields that changed in place."""
    if not paths:
        return step.change(Action.NOOP, [])
    job = {k: v for k, v in step.recorded.items()}
    reasons = [f"{p} changed (in place: the run continues)" for p in paths]
    return step.change(Action.UPDATE, reasons, job)


def _resume_point(item: DesiredItem, run: dict[str, Any]) -> dict[str, Any] | None:
    if item.document["spec"]["resume"]["policy"] == "never":
        return None
    valid = [c for c in run.get("checkpoints", []) if c["valid"]]
    return max(valid, key=lambda c: c["step"]) if valid else None


def _checkpoint_findings(address: str, run: dict[str, Any]) -> list[PlanFinding]:
    return [
        PlanFinding(
            address,
            "checkpoint-invalid",
            "warning",
            f"run {run['run_id']}: checkpoint {c['id']} is not usable: {c['problem']}",
        )
        for c in run.get("checkpoints", [])
        if not c["valid"]
    ]


def baseline_lookup(
    item: DesiredItem, ctx: JobContext, suite: DesiredItem
) -> Callable[[str], dict[str, Any] | None]:
    def lookup(job: str) -> dict[str, Any] | None:
        address = next(
            (
                a
                for p, a, _ in suite.references
                if p.endswith("baseline.job") and a.endswith("/" + job.split("/")[-1])
            ),
            None,
        )
        if address is None:
            return None
        for run in reversed(ctx.runs_of(address) or []):
            for evaluation in reversed(run.get("evaluations", [])):
                if evaluation["suite"] == suite.address and evaluation["phase"] == "succeeded":
                    return evaluation.get("metrics")  # type: ignore[no-any-return]
        return None

    return lookup
