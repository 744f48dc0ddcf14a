"""detect_drift: compare what providers report with what state says was applied.

Classes of findings: modified (with the field diff), missing, orphaned (owned by
trainform but unknown to state), data-mutated and data-missing (from the provider), and
pending (an apply was interrupted). Read-only: nothing is changed.

With the desired resources (the specs as loaded now), a modified finding also carries the
declared value of each changed field where it differs from the applied one, and the
file:line of the spec, for its remedy. The model lives in planner.drift_model.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from trainform.planner.desired import DesiredItem
from trainform.planner.diff import FieldChange, diff_documents, value_at
from trainform.planner.drift_model import DriftFinding, DriftReport, utc_timestamp
from trainform.planner.orphans import find_orphans
from trainform.planner.refresh import Target, observe_all
from trainform.planner.session import ProviderSet
from trainform.planner.state import State
from trainform.providers.base import MANAGED_BY_OTHER, KindSchema, Observation, ObserveRequest

__all__ = ["DriftFinding", "DriftReport", "detect_drift", "job_drift"]


def detect_drift(
    state: State | None,
    providers: ProviderSet,
    desired: dict[str, DesiredItem] | None = None,
    now: datetime | None = None,
) -> DriftReport:
    """What the providers report that differs from what state says was applied."""
    checked_at = utc_timestamp(now or datetime.now(UTC))
    if state is None:
        return DriftReport(None, 0, 0, [], checked_at)
    targets = observe_targets(state, providers)
    observations = observe_all(providers, targets)
    findings: list[DriftFinding] = []
    for (address, name), observation in sorted(observations.items()):
        findings += observed_drift(state, address, name, observation, providers, desired)
    findings += orphan_drift(state, providers, {t.provider for t in targets})
    return DriftReport(state.lineage, state.serial, len(state.resources), findings, checked_at)


def observe_targets(state: State, providers: ProviderSet) -> list[Target]:
    """What to observe: each resource in state, on each of its providers that supports it."""
    targets = []
    for address, resource in sorted(state.resources.items()):
        parts = address.split("/")
        for name in resource.providers:
            if not providers.get(name).supports(resource.kind):
                continue
            targets.append(
                Target(
                    name,
                    ObserveRequest(
                        address,
                        resource.kind,
                        parts[-1],
                        parts[1] if len(parts) == 3 else None,
                        resource.spec,
                        resource.outputs.get(name, {}),
                    ),
                )
            )
    return targets


def observed_drift(
    state: State,
    address: str,
    name: str,
    observation: Observation,
    providers: ProviderSet,
    desired: dict[str, DesiredItem] | None,
) -> list[DriftFinding]:
    """The drift of one resource on provider `name`: pending, missing, modified, its runs'
    (for a job) and whatever the provider found."""
    resource = state.resources[address]
    findings: list[DriftFinding] = []
    if resource.pending:
        findings.append(
            DriftFinding(
                address,
                resource.kind,
                "pending",
                f"an apply was interrupted during {resource.pending}; run plan to converge",
                name,
            )
        )
    if not observation.exists:
        taken = [f for f in observation.findings if f.kind == MANAGED_BY_OTHER]
        findings.append(
            DriftFinding(
                address,
                resource.kind,
                MANAGED_BY_OTHER if taken else "missing",
                taken[0].message if taken else "recorded in state but not found on the provider",
                name,
                evidence=dict(taken[0].evidence) if taken else {},
            )
        )
        return findings
    if observation.live is not None and resource.spec:
        schema = providers.get(name).schemas.get(resource.kind, KindSchema(resource.kind))
        changes = diff_documents(resource.spec, observation.live, schema.ignored)
        if changes:
            item = (desired or {}).get(address)
            findings.append(
                DriftFinding(
                    address,
                    resource.kind,
                    "modified",
                    f"changed outside trainform: {', '.join(c.path for c in changes[:5])}",
                    name,
                    changes,
                    evidence=_evidence(observation.evidence, changes, observation.places),
                    desired=_declared(item, changes) if item else {},
                    location=item.location if item else "",
                )
            )
    if resource.kind == "TrainingJob":
        findings += job_drift(state, address, name, observation.status.get("runs", []))
    for finding in observation.findings:
        findings.append(
            DriftFinding(
                address,
                resource.kind,
                finding.kind,
                finding.message,
                name,
                evidence=finding.evidence,
                warning=finding.warning,
            )
        )
    return findings


def orphan_drift(state: State, providers: ProviderSet, observed: set[str]) -> list[DriftFinding]:
    """Objects trainform owns on the providers (those `observed` and every compute
    instance) that state does not know."""
    instances = observed | _compute_instances(providers)
    return [
        DriftFinding(
            orphan.address,
            orphan.kind,
            "orphaned",
            "owned by trainform on the provider but unknown to state "
            "(adopt it with `trainform import` or delete it)",
            orphan.instance,
            instance_type=orphan.instance_type,
        )
        for orphan in find_orphans(providers, instances, set(state.resources), state.resources)
    ]


def _declared(item: DesiredItem, changes: list[FieldChange]) -> dict[str, Any]:
    """The declared value of each changed path where it differs from the applied one."""
    declared = {}
    for change in changes:
        found, value = value_at(item.document, change.path)
        if not found:
            continue
        if value != change.before:
            declared[change.path] = value
    return declared


def _evidence(
    evidence: dict[str, Any], changes: list[FieldChange], places: dict[str, str]
) -> dict[str, Any]:
    """A modified finding's evidence: the provider's, with `places` (the object of each
    changed field) and, where the provider gave the last change per object (`byPlace`), the
    newest change among the objects whose fields changed."""
    found = dict(evidence)
    by_place = found.pop("byPlace", None) or {}
    where = _places(changes, places)
    relevant = [by_place[p] for p in where.get("places", {}).values() if p in by_place]
    if relevant:
        found.update(max(relevant, key=lambda entry: str(entry.get("changedAt", ""))))
    return {**found, **where}


def _places(changes: list[FieldChange], places: dict[str, str]) -> dict[str, Any]:
    """{"places": {path: object}} for the changes whose path lies under a known place."""
    found = {}
    for change in changes:
        prefixes = [
            p for p in places if change.path == p or change.path.startswith((p + ".", p + "["))
        ]
        if prefixes:
            found[change.path] = places[max(prefixes, key=len)]
    return {"places": found} if found else {}


def _compute_instances(providers: ProviderSet) -> set[str]:
    from trainform.providers.registry import PROVIDER_CLASSES

    return {p.name for p in providers.config.providers if p.type in PROVIDER_CLASSES}


def job_drift(
    state: State, address: str, provider: str, runs: list[dict[str, Any]]
) -> list[DriftFinding]:
    """Failed runs, unusable checkpoints, missing or failing evaluations of a job's run."""
    from trainform.planner.gates import evaluate_gates, overall

    resource = state.resources[address]
    run_id = resource.outputs.get(provider, {}).get("runId")
    run = next((r for r in runs if r["run_id"] == run_id), None)
    if run is None or not run["attempts"]:
        return []
    findings = []

    def add(drift: str, message: str, **evidence: Any) -> None:
        findings.append(
            DriftFinding(address, "TrainingJob", drift, message, provider, evidence=evidence)
        )

    latest = run["attempts"][-1]
    if latest["phase"] in ("failed", "cancelled"):
        add(
            "job-failed",
            f"run {run_id} attempt {latest['attempt']} {latest['phase']}: "
            f"{latest.get('reason') or 'no reason recorded'}",
            log=latest.get("log", ""),
        )
    for checkpoint in run.get("checkpoints", []):
        if not checkpoint["valid"]:
            add(
                "checkpoint-invalid",
                f"run {run_id}: checkpoint {checkpoint['id']} is not "
                f"usable: {checkpoint['problem']}",
                checkpoint=checkpoint["id"],
                runPhase=latest["phase"],
                **checkpoint.get("evidence", {}),
            )
    if latest["phase"] != "succeeded":
        return findings
    suites = [d for d in resource.dependencies if d.startswith("EvalSuite/")]
    for suite in suites:
        tried = [e for e in run.get("evaluations", []) if e["suite"] == suite]
        last = tried[-1] if tried else None
        if last is None:
            add("evaluation-missing", f"run {run_id} succeeded but was never evaluated by {suite}")
            continue
        if last["phase"] in ("failed", "cancelled"):
            add(
                "evaluation-failing",
                f"{suite} on run {run_id} {last['phase']}: {last.get('reason', '')}",
            )
            continue
        suite_state = state.resources.get(suite)
        if last["phase"] != "succeeded" or suite_state is None:
            continue
        results = evaluate_gates(suite_state.spec["spec"]["gates"], last.get("metrics"))
        if overall(results) == "fail":
            add(
                "evaluation-failing",
                f"{suite} on run {run_id}: gate failed: "
                + "; ".join(r.describe() for r in results if r.status == "fail"),
                metrics=last.get("metrics", {}),
            )
    return findings
