"""make_plan: desired platform + state (+ what providers observe) -> ordered changes.

For each address in the specs or in state: no-op, create, update in place, replace (a
field that forces replacement changed), or delete. A refreshed plan compares against what
providers report, so changes made by hand are corrected and vanished objects recreated.
Every change carries its reasons (a resource's change is decided in
planner.resource_changes, a job's next step in planner.jobs). Changes are ordered so
dependencies are created first and deleted last (see `order_changes`).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as replace_options
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from trainform.planner.delete_guards import delete_guard_problems
from trainform.planner.desired import DesiredItem, build_desired, spec_digest
from trainform.planner.errors import PlannerError
from trainform.planner.foreign_objects import foreign_object_problems
from trainform.planner.jobs import JobContext, plan_job
from trainform.planner.lockfile import (
    LOCK_FILE,
    LockFile,
    local_roots,
    pins_from_state,
    resolve_pins,
    stale_entries,
)
from trainform.planner.orphans import orphan_findings
from trainform.planner.plan_model import Action, Plan, PlanFinding, ResourceChange
from trainform.planner.provider_checks import (
    FieldLocator,
    change_impacts,
    change_steps,
    delete_impacts,
    provider_problems,
    provider_warnings,
    read_provider_settings,
)
from trainform.planner.refresh import Target, observe_all
from trainform.planner.releases import ReleaseContext, resolve_releases
from trainform.planner.resource_changes import change_for, forced_replace
from trainform.planner.session import ProviderSet, config_as_data
from trainform.planner.short_names import full_addresses
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


@dataclass(slots=True)
class PlanScope:
    """The resources a plan covers, with the findings and problems met on the way."""

    desired: dict[str, DesiredItem]
    recorded: dict[str, ResourceState]
    protected: dict[str, str]
    """The spec location of each resource with lifecycle.preventDestroy, by address."""
    findings: list[PlanFinding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    resolved: dict[str, DesiredItem] = field(default_factory=dict)
    """ModelReleases with their resolved `release` section (planner/releases.py)."""
    notes: dict[str, list[str]] = field(default_factory=dict)


def make_plan(
    specs: SpecSet | None,
    state: State | None,
    providers: ProviderSet,
    options: PlanOptions = PlanOptions(),  # noqa: B008 - frozen value
) -> Plan:
    """The plan that makes the platform match `specs` (or removes everything: destroy)."""
    if options.targets or options.replace:
        known = {*(build_desired(specs) if specs else {}), *(state.resources if state else {})}
        options = replace_options(
            options,
            targets=full_addresses(known, options.targets, "--target"),
            replace=full_addresses(known, options.replace, "--replace"),
        )
    scope = gather_resources(specs, state, providers, options)
    observations: dict[tuple[str, str], Observation] = {}
    if options.refresh:
        targets = _observe_targets(scope.desired, scope.recorded, providers)
        observations = observe_all(providers, targets)
        scope.findings += _observation_findings(observations)
        scope.problems += foreign_object_problems(observations, scope.desired, scope.recorded)
        read_provider_settings(scope.desired, providers)
    scope.findings += provider_warnings(
        scope.desired, providers, lambda item: _desired_resource(item, scope.recorded)
    )
    jobs = _job_context(
        specs, scope.desired, scope.recorded, providers, observations, options, scope.findings
    )
    if jobs is not None:
        resolve_release_items(specs, scope, providers, jobs)
    changes = diff_resources(scope, providers, observations, jobs, options)
    check_changes(scope, changes, providers, options)
    return order_plan(specs, state, providers, scope, changes, jobs, options)


def gather_resources(
    specs: SpecSet | None, state: State | None, providers: ProviderSet, options: PlanOptions
) -> PlanScope:
    """The desired and recorded resources the plan covers; PlanError for a bad request."""
    desired: dict[str, DesiredItem] = {} if specs is None else build_desired(specs)
    protected = {a: d.location for a, d in desired.items() if d.prevent_destroy}
    if options.locked and specs is not None and not options.destroy:
        check_lock(desired, providers, specs, options.lock)
    if options.destroy:
        desired = {}
    scope = PlanScope(desired, dict(state.resources) if state else {}, protected)
    drop_unsupported(scope, providers)
    if options.targets:
        select_targets(scope, options.targets)
    check_requests(scope, specs, providers, options.replace)
    return scope


def resolve_release_items(
    specs: SpecSet | None, scope: PlanScope, providers: ProviderSet, jobs: JobContext
) -> None:
    """Resolve each ModelRelease's run, gates and artifact; PlanError for a refused one."""
    if not any(item.kind == "ModelRelease" for item in scope.desired.values()):
        return
    context = ReleaseContext(
        jobs, scope.recorded, providers.context.object_store, FieldLocator(specs).locate
    )
    resolved = resolve_releases(scope.desired, context)
    scope.resolved, scope.notes = resolved.items, resolved.notes
    if resolved.problems:
        raise PlanError(resolved.problems)


def check_lock(
    desired: dict[str, DesiredItem], providers: ProviderSet, specs: SpecSet, lock: LockFile | None
) -> None:
    """--locked: PlanError unless the lock file pins what the specs resolve to now."""
    stale = stale_entries(lock, resolve_pins(desired, providers, specs.root))
    if stale:
        raise PlanError(
            [f"--locked: {LOCK_FILE} is stale: {entry}" for entry in stale]
            + [f"run `trainform lock` and commit {LOCK_FILE}"]
        )


def drop_unsupported(scope: PlanScope, providers: ProviderSet) -> None:
    """Leave out (with a finding) the resources no provider of theirs reconciles."""
    unsupported = [
        item
        for item in scope.desired.values()
        if _schema(providers, item.providers, item.kind) is None
    ]
    for item in unsupported:
        scope.findings.append(
            PlanFinding(
                item.address,
                "not-reconciled",
                "warning",
                f"provider {', '.join(item.providers)} does not reconcile {item.kind} "
                "resources in this release; it is validated but not applied",
            )
        )
        del scope.desired[item.address]


def select_targets(scope: PlanScope, targets: tuple[str, ...]) -> None:
    """Keep only the --target resources and what they depend on."""
    desired, recorded = scope.desired, scope.recorded
    unknown = [t for t in targets if t not in desired and t not in recorded]
    if unknown:
        raise PlanError([f"--target {t}: no such resource in specs or state" for t in unknown])
    edges = {a: d.dependencies for a, d in desired.items()}
    keep = _with_dependencies(targets, edges, set(desired))
    keep |= {t for t in targets if t in recorded}
    scope.desired = {a: d for a, d in desired.items() if a in keep}
    scope.recorded = {a: r for a, r in recorded.items() if a in keep}


def check_requests(
    scope: PlanScope, specs: SpecSet | None, providers: ProviderSet, replace: tuple[str, ...]
) -> None:
    """PlanError for a --replace of nothing, or what the providers refuse to plan."""
    desired, recorded = scope.desired, scope.recorded
    for address in replace:
        if address not in desired:
            scope.problems.append(f"--replace {address}: no such resource in the specs")
        elif address not in recorded:
            scope.problems.append(
                f"--replace {address}: not created yet, so there is nothing to replace"
            )
    scope.problems += provider_problems(
        specs, desired, providers, lambda item: _desired_resource(item, recorded)
    )
    if scope.problems:
        raise PlanError(scope.problems)


def diff_resources(
    scope: PlanScope,
    providers: ProviderSet,
    observations: dict[tuple[str, str], Observation],
    jobs: JobContext | None,
    options: PlanOptions,
) -> list[ResourceChange]:
    """One change for each address in the specs or in state, in address order."""
    desired, recorded, protected = scope.desired, scope.recorded, scope.protected
    findings = scope.findings
    changes = []
    for address in sorted(set(desired) | set(recorded)):
        item = scope.resolved.get(address) or desired.get(address)
        previous = recorded.get(address)
        names = item.providers if item else previous.providers  # type: ignore[union-attr]
        kind = item.kind if item else previous.kind  # type: ignore[union-attr]
        schema = _schema(providers, names, kind) or KindSchema(kind)
        seen = [observations.get((address, n)) for n in names] if options.refresh else []
        if item is not None and kind == "TrainingJob" and jobs is not None:
            change, job_findings = plan_job(item, previous, jobs, options.refresh)
            findings += job_findings
        else:
            change = change_for(
                address, item, previous, schema, seen, options.refresh, options.destroy
            )
            if item is not None and previous is not None and address in options.replace:
                change = forced_replace(change, item, previous, schema)
            if item is not None and change.action is Action.UPDATE and options.refresh:
                impacts = change_impacts(providers, names, _desired_resource(item, recorded), seen)
                change.reasons.extend(impacts)
                findings += [PlanFinding(address, "running-work", "warning", i) for i in impacts]
            if change.action is Action.DELETE and options.refresh and previous is not None:
                change.reasons.extend(delete_impacts(providers, names, address, kind, previous))
            if item is not None and change.action in (Action.CREATE, Action.UPDATE, Action.REPLACE):
                resource = _desired_resource(item, recorded)
                change.reasons.extend(
                    change_steps(providers, names, resource, change.action.value, seen)
                )
        if change.action is not Action.NOOP and item is not None:
            change.reasons.extend(scope.notes.get(address, []))
        if change.action in (Action.DELETE, Action.REPLACE) and address in protected:
            scope.problems.append(
                f"{address} ({protected[address]}): lifecycle.preventDestroy is set, "
                f"but the plan would {change.action.value} it: " + "; ".join(change.reasons)
            )
        changes.append(change)
    return changes


def check_changes(
    scope: PlanScope, changes: list[ResourceChange], providers: ProviderSet, options: PlanOptions
) -> None:
    """Orphans as findings; PlanError for a protected or too large delete."""
    if options.refresh and not options.destroy and not options.targets:
        scope.findings += orphan_findings(providers, scope.desired, scope.recorded)
    if not options.destroy and not options.allow_mass_delete:
        scope.problems += delete_guard_problems(
            changes, scope.recorded, options.mass_delete_share, options.mass_delete_minimum
        )
    if scope.problems:
        raise PlanError(scope.problems)


def order_plan(
    specs: SpecSet | None,
    state: State | None,
    providers: ProviderSet,
    scope: PlanScope,
    changes: list[ResourceChange],
    jobs: JobContext | None,
    options: PlanOptions,
) -> Plan:
    """The plan: its changes in apply order, its findings sorted, what it was made from."""
    config = config_as_data(providers.config)
    return Plan(
        tool_version=tool_version(),
        lineage=state.lineage if state else None,
        serial=state.serial if state else 0,
        spec_digest=spec_digest(scope.desired, config),
        lock_digest=options.lock_digest,
        config=config,
        refresh=options.refresh,
        destroy=options.destroy,
        targets=list(options.targets),
        changes=order_changes(changes),
        findings=sorted(scope.findings, key=lambda f: (f.address, f.kind, f.message)),
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
    findings: list[PlanFinding],
) -> JobContext | None:
    """Pins and observed runs for planning jobs; None when no job is planned."""
    if specs is None or not any(item.kind == "TrainingJob" for item in desired.values()):
        return None
    pins = options.lock
    if options.refresh and not options.locked:
        # What runs is what resolves now; a stale lock must not name another code or data.
        fresh = resolve_pins(desired, providers, specs.root)
        for entry in stale_entries(pins, fresh) if pins is not None else []:
            findings.append(
                PlanFinding(
                    LOCK_FILE,
                    "stale-lock",
                    "warning",
                    f"{LOCK_FILE} is stale: {entry}; this plan runs and records what resolves "
                    f"now (run `trainform lock` and commit {LOCK_FILE}, or plan --locked)",
                )
            )
        pins = fresh
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
        desired,
        pins,
        Path(specs.root),
        runs_of,
        mutated,
        replace=frozenset(options.replace),
        code_exclude=local_roots(specs.config, Path(specs.root)),
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


def order_changes(changes: list[ResourceChange]) -> list[ResourceChange]:
    """Actionable changes in apply order (lexicographic among equals), then no-ops.

    Creates, updates and replaces follow dependencies (also through resources the plan
    leaves unchanged); deletes run before whatever they depended on is deleted, and after
    whatever referenced them has been updated away.
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
    unchanged = {c.address: c for c in changes if c.action is Action.NOOP}
    edges: dict[str, set[str]] = {address: set() for address in actionable}
    constructive = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.RESUME, Action.EVALUATE)
    for change in actionable.values():
        if change.action in constructive:
            for dependency in _through_unchanged(change.dependencies, unchanged):
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


def _through_unchanged(dependencies: list[str], unchanged: dict[str, ResourceChange]) -> set[str]:
    """`dependencies`, and through each one the plan leaves unchanged, what it depends on:
    a Quota whose Queue does not change still waits for a replaced pool under that Queue
    (the replacement rewrites the Quota's objects on the way)."""
    found: set[str] = set()
    stack = list(dependencies)
    while stack:
        address = stack.pop()
        if address in found:
            continue
        found.add(address)
        if address in unchanged:
            stack.extend(unchanged[address].dependencies)
    return found


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
