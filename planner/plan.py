"""make_plan: desired platform + state (+ what providers observe) -> ordered changes.

For each address in the specs or in state: no-op, create, update in place, replace (a
field that forces replacement changed), or delete. A refreshed plan compares against what
providers report, so changes made by hand are corrected and vanished objects recreated.
Every change carries its reasons. Changes are ordered so dependencies are created first
and deleted last (see `order_changes`).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from trainform.planner.delete_guards import delete_guard_problems
from trainform.planner.desired import DesiredItem, build_desired, spec_digest
from trainform.planner.diff import FieldChange, diff_documents
from trainform.planner.errors import PlannerError
from trainform.planner.jobs import JobContext, plan_job
from trainform.planner.lockfile import (
    LOCK_FILE,
    LockFile,
    pins_from_state,
    resolve_pins,
    stale_entries,
)
from trainform.planner.normalize import humanize
from trainform.planner.orphans import orphan_findings
from trainform.planner.plan_model import Action, Plan, PlanFinding, ResourceChange
from trainform.planner.provider_checks import change_impacts, provider_problems
from trainform.planner.refresh import Target, observe_all
from trainform.planner.session import ProviderSet, config_as_data
from trainform.planner.state import ResourceState, State
from trainform.providers.base import DesiredResource, KindSchema, Observation, ObserveRequest
from trainform.specs import SpecSet
from trainform.specs.environments import state_location


class PlanError(PlannerError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("cannot plan:\n  " + "\n  ".join(problems))


def tool_version() -> str:
    try:
        return version("trainform")
    except PackageNotFoundError:
        return "0+unknown"


@dataclass(frozen=True)
class PlanOptions:
    refresh: bool = True
    targets: tuple[str, ...] = ()
    replace: tuple[str, ...] = ()
    """Addresses to re-create (a new run, for a job) although nothing changed (--replace)."""
    destroy: bool = False
    allow_mass_delete: bool = False
    mass_delete_share: float = 0.5
    mass_delete_minimum: int = 5
    lock_digest: str = ""
    lock: LockFile | None = None
    locked: bool = False


def _schema(providers: ProviderSet, names: Sequence[str], kind: str) -> KindSchema | None:
    for name in names:
        provider = providers.get(name)
        if provider.supports(kind):
            return provider.schemas[kind]
    return None


def _with_dependencies(
    roots: Iterable[str], edges: dict[str, list[str]], known: set[str]
) -> set[str]:
    selected: set[str] = set()
    stack = [root for root in roots]
    while stack:
        address = stack.pop()
        if address in selected or address not in known:
            continue
        selected.add(address)
        stack.extend(edges.get(address, []))
    return selected


def make_plan(
    specs: SpecSet | None,
    state: State | None,
    providers: ProviderSet,
    options: PlanOptions = PlanOptions(),  # noqa: B008 - frozen value
) -> Plan:
    """The plan that makes the platform match `specs` (or removes everything: destroy)."""
    problems: list[str] = []
    findings: list[PlanFinding] = []
    desired: dict[str, DesiredItem] = {} if specs is None else build_desired(specs)
    protected = {a: d.location for a, d in desired.items() if d.prevent_destroy}
    if options.locked and specs is not None and not options.destroy:
        stale = stale_entries(options.lock, resolve_pins(desired, providers, specs.root))
        if stale:
            raise PlanError(
                [f"--locked: {LOCK_FILE} is stale: {entry}" for entry in stale]
                + [f"run `trainform lock` and commit {LOCK_FILE}"]
            )
    if options.destroy:
        desired = {}
    recorded = dict(state.resources) if state else {}

    unsupported = [
        item for item in desired.values() if _schema(providers, item.providers, item.kind) is None
    ]
    for item in unsupported:
        findings.append(
            PlanFinding(
                item.address,
                "not-reconciled",
                "warning",
                f"provider {', '.join(item.providers)} does not reconcile {item.kind} "
                "resources in this release; it is validated but not applied",
            )
        )
        del desired[item.address]

    if options.targets:
        unknown = [t for t in options.targets if t not in desired and t not in recorded]
        if unknown:
            raise PlanError([f"--target {t}: no such resource in specs or state" for t in unknown])
        edges = {a: d.dependencies for a, d in desired.items()}
        keep = _with_dependencies(options.targets, edges, set(desired))
        keep |= {t for t in options.targets if t in recorded}
        desired = {a: d for a, d in desired.items() if a in keep}
        recorded = {a: r for a, r in recorded.items() if a in keep}

    for address in options.replace:
        if address not in desired:
            problems.append(f"--replace {address}: no such resource in the specs")
        elif address not in recorded:
            problems.append(f"--replace {address}: not created yet, so there is nothing to replace")
    problems += provider_problems(
        specs, desired, providers, lambda item: _desired_resource(item, recorded)
    )
    if problems:
        raise PlanError(problems)

    observations: dict[tuple[str, str], Observation] = {}
    if options.refresh:
        observations = observe_all(providers, _observe_targets(desired, recorded, providers))
        findings += _observation_findings(observations)

    jobs = _job_context(specs, desired, recorded, providers, observations, options)
    changes = []
    for address in sorted(set(desired) | set(recorded)):
        item = desired.get(address)
        previous = recorded.get(address)
        names = item.providers if item else previous.providers  # type: ignore[union-attr]
        kind = item.kind if item else previous.kind  # type: ignore[union-attr]
        schema = _schema(providers, names, kind) or KindSchema(kind)
        seen = [observations.get((address, n)) for n in names] if options.refresh else []
        if item is not None and kind == "TrainingJob" and jobs is not None:
            change, job_findings = plan_job(item, previous, jobs, options.refresh)
            findings += job_findings
        else:
            change = _change_for(
                address, item, previous, schema, seen, options.refresh, options.destroy
            )
            if item is not None and previous is not None and address in options.replace:
                change = _forced_replace(change, item, previous, schema)
            if item is not None and change.action is Action.UPDATE and options.refresh:
                impacts = change_impacts(providers, names, _desired_resource(item, recorded), seen)
                change.reasons.extend(impacts)
                findings += [PlanFinding(address, "running-work", "warning", i) for i in impacts]
        if change.action in (Action.DELETE, Action.REPLACE) and address in protected:
            problems.append(
                f"{address} ({protected[address]}): lifecycle.preventDestroy is set, "
                f"but the plan would {change.action.value} it: " + "; ".join(change.reasons)
            )
        changes.append(change)

    if options.refresh and not options.destroy and not options.targets:
        findings += orphan_findings(providers, desired, recorded)

    if not options.destroy and not options.allow_mass_delete:
        problems += delete_guard_problems(
            changes, recorded, options.mass_delete_share, options.mass_delete_minimum
        )
    if problems:
        raise PlanError(problems)

    config = config_as_data(providers.config)
    return Plan(
        tool_version=tool_version(),
        lineage=state.lineage if state else None,
        serial=state.serial if state else 0,
        spec_digest=spec_digest(desired, config),
        lock_digest=options.lock_digest,
        config=config,
        refresh=options.refresh,
        destroy=options.destroy,
        targets=list(options.targets),
        changes=order_changes(changes),
        findings=sorted(findings, key=lambda f: (f.address, f.kind, f.message)),
        environment=specs.environment if specs else None,
        spec_folder=os.path.normpath(str(specs.root)) if specs else "",
        state_location=state_location(specs.config, specs.root) if specs else "",
        pins=(
            {
                "code": dict(sorted(jobs.pins.code.items())),
                "datasets": dict(sorted(jobs.pins.datasets.items())),
            }
            if jobs
            else {}
        ),
    )


def _job_context(
    specs: SpecSet | None,
    desired: dict[str, DesiredItem],
    recorded: dict[str, ResourceState],
    providers: ProviderSet,
    observations: dict[tuple[str, str], Observation],
    options: PlanOptions,
) -> JobContext | None:
    """Pins and observed runs for planning jobs; None when no job is planned."""
    if specs is None or not any(item.kind == "TrainingJob" for item in desired.values()):
        return None
    pins = options.lock
    if pins is None and options.refresh:
        pins = resolve_pins(desired, providers, specs.root)
    if pins is None:
        pins = pins_from_state(recorded)
    mutated: dict[str, set[str]] = {}
    for (address, _), observation in observations.items():
        for finding in observation.findings:
            if finding.kind == "data-mutated":
                mutated.setdefault(address, set()).add(str(finding.evidence.get("version")))

    def runs_of(address: str) -> list[dict[str, Any]] | None:
        item = desired.get(address)
        for name in item.providers if item else []:
            observation = observations.get((address, name))
            if observation is not None:
                return list(observation.status.get("runs", []))
        return None

    return JobContext(
        desired, pins, Path(specs.root), runs_of, mutated, replace=frozenset(options.replace)
    )


def _desired_resource(item: DesiredItem, recorded: dict[str, ResourceState]) -> DesiredResource:
    return DesiredResource(
        address=item.address,
        kind=item.kind,
        name=item.name,
        project=item.project,
        document=item.document,
        outputs_of_dependencies={
            d: recorded[d].outputs for d in item.dependencies if d in recorded
        },
    )


def _observe_targets(
    desired: dict[str, DesiredItem], recorded: dict[str, ResourceState], providers: ProviderSet
) -> list[Target]:
    targets = []
    for address in sorted(set(desired) | set(recorded)):
        item, previous = desired.get(address), recorded.get(address)
        names = sorted(
            set(item.providers if item else []) | set(previous.providers if previous else [])
        )
        kind = item.kind if item else previous.kind  # type: ignore[union-attr]
        document = previous.spec if previous and previous.spec else item.document if item else {}
        name = address.rsplit("/", 1)[-1]
        project = (
            item.project if item else (address.split("/")[1] if address.count("/") == 2 else None)
        )
        for provider in names:
            if not providers.get(provider).supports(kind):
                continue
            outputs = previous.outputs.get(provider, {}) if previous else {}
            targets.append(
                Target(provider, ObserveRequest(address, kind, name, project, document, outputs))
            )
    return targets


def _observation_findings(observations: dict[tuple[str, str], Observation]) -> list[PlanFinding]:
    return [
        PlanFinding(address, finding.kind, "warning", f"{provider}: {finding.message}")
        for (address, provider), observation in sorted(observations.items())
        for finding in observation.findings
    ]


def _reason_for(change: FieldChange) -> str:
    from trainform.planner.diff import is_missing

    if is_missing(change.before):
        text = f"{change.path}: (unset) -> {humanize(change.after)}"
    elif is_missing(change.after):
        text = f"{change.path}: {humanize(change.before)} -> (unset)"
    else:
        text = f"{change.path}: {humanize(change.before)} -> {humanize(change.after)}"
    return text + (" (forces replacement)" if change.forces_replacement else "")


def _change_for(
    address: str,
    item: DesiredItem | None,
    previous: ResourceState | None,
    schema: KindSchema,
    seen: list[Observation | None],
    refreshed: bool,
    destroying: bool = False,
) -> ResourceChange:
    kind = schema.kind
    if item is None:
        assert previous is not None
        keeps_data = (
            schema.data_bearing
            and previous.spec.get("spec", {}).get("deletionPolicy", "Abandon") != "Delete"
        )
        reasons = ["destroy requested" if destroying else "no longer in the specs"]
        if keeps_data:
            reasons.append("deletionPolicy Abandon: the data itself is kept")
        if previous.pending:
            reasons.append(f"an earlier {previous.pending} was interrupted")
        return ResourceChange(
            address,
            kind,
            Action.DELETE,
            previous.providers,
            reasons,
            before=previous.spec,
            previous_dependencies=previous.dependencies,
            data_kept=keeps_data,
        )
    common: dict[str, Any] = {
        "after": item.document,
        "after_hash": item.spec_hash,
        "dependencies": item.dependencies,
        "location": item.location,
        "replace_order": schema.replace_order.value,
    }
    if previous is None or (not previous.spec and previous.pending):
        exists = refreshed and any(o is not None and o.exists for o in seen)
        reasons = ["not yet created"]
        if previous is not None:
            reasons = [f"an earlier {previous.pending} was interrupted; converging"]
        elif exists:
            reasons = ["exists on the provider but not in state: adopting it"]
        return ResourceChange(
            address,
            kind,
            Action.CREATE,
            item.providers,
            reasons,
            known_after_apply=list(schema.computed),
            **common,
        )
    common["previous_dependencies"] = previous.dependencies
    base = previous.spec
    reasons: list[str] = []
    if refreshed:
        missing = [
            name for name, o in zip(item.providers, seen, strict=False) if o is None or not o.exists
        ]
        if missing:
            recorded = [name for name in missing if name in previous.outputs]
            reason = (
                "missing on the provider: deleted outside trainform"
                if recorded or not previous.outputs
                else f"not on {', '.join(missing)} yet (never created there)"
            )
            return ResourceChange(
                address,
                kind,
                Action.CREATE,
                item.providers,
                [reason],
                before=previous.spec,
                known_after_apply=list(schema.computed),
                **common,
            )
        live = next((o.live for o in seen if o is not None and o.live is not None), None)
        if live is not None:
            drift = diff_documents(previous.spec, live, schema.ignored)
            if drift:
                base = live
                common["applied"] = previous.spec
                reasons.append(
                    "modified outside trainform: " + ", ".join(c.path for c in drift[:5])
                )
    changes = diff_documents(base, item.document, schema.ignored, schema.forces_replacement)
    if sorted(item.providers) != sorted(previous.providers):
        changes.append(
            FieldChange("providers", previous.providers, item.providers, forces_replacement=True)
        )
    if previous.pending:
        reasons.append(f"an earlier {previous.pending} was interrupted; converging")
    if not changes:
        if previous.pending or previous.spec_hash != item.spec_hash:
            return ResourceChange(
                address,
                kind,
                Action.UPDATE,
                item.providers,
                reasons or ["state is out of date"],
                before=previous.spec,
                **common,
            )
        return ResourceChange(
            address,
            kind,
            Action.NOOP,
            item.providers,
            **{k: v for k, v in common.items() if k in ("after_hash", "dependencies", "location")},
        )
    reasons += [_reason_for(change) for change in changes]
    action = Action.REPLACE if any(c.forces_replacement for c in changes) else Action.UPDATE
    return ResourceChange(
        address,
        kind,
        action,
        item.providers,
        reasons,
        changes,
        before=base,
        **common,
    )


def _forced_replace(
    change: ResourceChange, item: DesiredItem, previous: ResourceState, schema: KindSchema
) -> ResourceChange:
    """`change` turned into a replace because --replace named its address."""
    reason = "replacement requested with --replace"
    if change.action in (Action.REPLACE, Action.CREATE):
        change.reasons.append(reason)
        return change
    return ResourceChange(
        change.address,
        change.kind,
        Action.REPLACE,
        item.providers,
        [*change.reasons, reason],
        change.changes,
        before=change.before if change.before is not None else previous.spec,
        after=item.document,
        after_hash=item.spec_hash,
        dependencies=item.dependencies,
        previous_dependencies=previous.dependencies,
        replace_order=schema.replace_order.value,
        known_after_apply=list(schema.computed),
        location=item.location,
        applied=change.applied,
    )


def order_changes(changes: list[ResourceChange]) -> list[ResourceChange]:
    """Actionable changes in apply order (lexicographic among equals), then no-ops.

    Creates, updates and replaces follow dependencies; deletes run before whatever they
    depended on is deleted, and after whatever referenced them has been updated away.
    """
    successors = apply_edges(changes)
    waiting = dict.fromkeys(successors, 0)
    for targets in successors.values():
        for target in targets:
            waiting[target] += 1
    ready = [address for address, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    ordered = []
    while ready:
        address = heapq.heappop(ready)
        ordered.append(address)
        for target in successors[address]:
            waiting[target] -= 1
            if waiting[target] == 0:
                heapq.heappush(ready, target)
    by_address = {c.address: c for c in changes}
    noops = sorted((c for c in changes if c.action is Action.NOOP), key=lambda c: c.address)
    return [by_address[a] for a in ordered] + noops


def apply_edges(changes: list[ResourceChange]) -> dict[str, set[str]]:
    """Successors of each actionable change: `v in edges[u]` means u finishes before v."""
    actionable = {c.address: c for c in changes if c.action is not Action.NOOP}
    edges: dict[str, set[str]] = {address: set() for address in actionable}
    constructive = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.RESUME, Action.EVALUATE)
    for change in actionable.values():
        if change.action in constructive:
            for dependency in change.dependencies:
                other = actionable.get(dependency)
                if other is not None and other.action in constructive:
                    edges[dependency].add(change.address)
            for dependency in change.previous_dependencies:
                other = actionable.get(dependency)
                if other is not None and other.action is Action.DELETE:
                    edges[change.address].add(dependency)
        elif change.action is Action.DELETE:
            for dependency in change.previous_dependencies:
                other = actionable.get(dependency)
                if other is not None and other.action is Action.DELETE:
                    edges[change.address].add(dependency)
    # A replacement deletes first: what depended on the old object and is being deleted
    # goes before it, unless the replacement must already precede that delete.
    for change in actionable.values():
        if change.action is Action.DELETE:
            for dependency in change.previous_dependencies:
                other = actionable.get(dependency)
                if (
                    other is not None
                    and other.action is Action.REPLACE
                    and not _reaches(edges, dependency, change.address)
                ):
                    edges[change.address].add(dependency)
    return edges


def _reaches(edges: dict[str, set[str]], source: str, target: str) -> bool:
    seen = {source}
    stack = [source]
    while stack:
        for following in edges[stack.pop()]:
            if following == target:
                return True
            if following not in seen:
                seen.add(following)
                stack.append(following)
    return False


def apply_graph(changes: list[ResourceChange]) -> Any:
    """DiGraph over actionable changes; an edge u -> v means u must finish before v starts."""
    import networkx as nx

    graph = nx.DiGraph()
    edges = apply_edges(changes)
    graph.add_nodes_from(sorted(edges))
    graph.add_edges_from((u, v) for u, targets in edges.items() for v in targets)
    return graph
