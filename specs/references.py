"""Resolving references by name: typed, project-first then global; cycles found here.

Rules: a reference from a project-scoped resource looks in its own project first, then
among global resources. A name written `project/name` (accepted where a field allows it,
such as an evaluation gate's baseline job) names another project's resource explicitly. A
reference to a name that exists under another kind is "wrong kind"; a reference to a
resource that was declared but failed validation is not reported again (its own error
says what is wrong). The references of a document that failed validation are checked too
(`check_failed_references`, specs/partial_references.py), in the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trainform.specs.diagnostic_budget import DiagnosticBudget
from trainform.specs.errors import Diagnostic, Location, Severity
from trainform.specs.models.base import Reference, Scope
from trainform.specs.models.config import RootConfig
from trainform.specs.models.kinds import KINDS
from trainform.specs.partial_references import FailedDocument
from trainform.specs.resource import Dependency, Resource
from trainform.specs.suggest import closest_name

Referrer = Resource | FailedDocument
"""Who makes a reference: a resource, or a document that failed validation."""
Locate = Callable[[Referrer, tuple[str | int, ...]], Location]

# Which provider types each kind's `spec.provider` may name.
PROVIDER_TYPES: dict[str, tuple[str, ...]] = {
    "ResourcePool": ("local", "kubernetes", "slurm"),
    "Dataset": ("local", "objectstore"),
    "Image": ("local", "registry", "slurm"),
}


@dataclass(frozen=True, slots=True)
class Declared:
    """Every (kind, project, name) that appeared in the specs, valid or not."""

    names: frozenset[tuple[str, str | None, str]]


class _Names:
    """The resources by name and the names by kind and project, indexed on first use (for
    the diagnostics of unresolved references: one scan of the resources, not one each)."""

    def __init__(self, resources: dict[str, Resource]) -> None:
        self.resources = resources
        self._by_name: dict[str, list[Resource]] = {}
        self._by_scope: dict[tuple[str, str | None], list[str]] = {}
        self._indexed = False

    def _index(self) -> None:
        if not self._indexed:
            for resource in self.resources.values():
                self._by_name.setdefault(resource.name, []).append(resource)
                scope = (resource.kind, resource.project)
                self._by_scope.setdefault(scope, []).append(resource.name)
            self._indexed = True

    def named(self, name: str) -> list[Resource]:
        """The resources of any kind called `name`, in load order."""
        self._index()
        return self._by_name.get(name, [])

    def visible(self, kind: str, referrer: Referrer) -> list[str]:
        """Names of `kind` a reference from `referrer` may name: global or its project's."""
        self._index()
        names = list(self._by_scope.get((kind, None), []))
        if referrer.project is not None:
            names += self._by_scope.get((kind, referrer.project), [])
        return names


def article(kind: str) -> str:
    """`a Queue`, `an Image`: the kind with its indefinite article."""
    return f"{'an' if kind[0] in 'AEIOU' else 'a'} {kind}"


def _describe(ref: Reference) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in ref.path).replace(".[", "[")


def resolve_references(
    resources: dict[str, Resource],
    declared: Declared,
    config: RootConfig,
    locate: Locate,
    found: DiagnosticBudget,
) -> None:
    """Fill `dependencies` of every resource; add to `found` a diagnostic for each reference
    that does not resolve (only counted once `found` is spent: working out a suggestion
    reads every resource)."""
    versions: dict[str, frozenset[str]] = {}
    names = _Names(resources)
    project_capable = {kind: model.scope is not Scope.GLOBAL for kind, model in KINDS.items()}
    global_capable = {kind: model.scope is not Scope.PROJECT for kind, model in KINDS.items()}
    for resource in resources.values():
        project = resource.project
        for ref in resource.document.references():
            target = _target(ref, project, resources, project_capable, global_capable)
            if target is not None:
                resource.dependencies.append(Dependency(target, ref))
                if ref.version is not None:
                    known = versions.get(target)
                    if known is None:
                        known = versions[target] = frozenset(
                            resources[target].document.spec.version_names()  # type: ignore[attr-defined]
                        )
                    if ref.version not in known:
                        found.append(_unknown_version(resources[target], ref, resource, locate))
                continue
            if _declared_but_invalid(ref, resource, declared):
                continue
            if found.spent:
                found.omit(1)
                continue
            found.append(_unresolved(ref, resource, names, locate(resource, ref.path)))
        if resource.kind in PROVIDER_TYPES:
            found.extend(_check_provider(resource, config, locate))


def _target(
    ref: Reference,
    project: str | None,
    resources: dict[str, Resource],
    project_capable: dict[str, bool],
    global_capable: dict[str, bool],
) -> str | None:
    """The address `ref` resolves to from a resource of `project`: its project's first."""
    kind, name = ref.kind, ref.name
    if "/" in name:
        candidate = f"{kind}/{name}"
        return candidate if candidate in resources else None
    if project and project_capable[kind]:
        candidate = f"{kind}/{project}/{name}"
        if candidate in resources:
            return candidate
    if global_capable[kind]:
        candidate = f"{kind}/{name}"
        if candidate in resources:
            return candidate
    return None


def check_failed_references(
    failed: list[FailedDocument],
    resources: dict[str, Resource],
    declared: Declared,
    locate: Locate,
    found: DiagnosticBudget,
) -> None:
    """Add a diagnostic for each reference of a document that failed validation and does
    not resolve, so a typo in one shows beside the document's schema errors."""
    names = _Names(resources)
    project_capable = {kind: model.scope is not Scope.GLOBAL for kind, model in KINDS.items()}
    global_capable = {kind: model.scope is not Scope.PROJECT for kind, model in KINDS.items()}
    for document in failed:
        for ref in document.references:
            target = _target(ref, document.project, resources, project_capable, global_capable)
            if target is not None:
                known = resources[target].document.spec.version_names() if ref.version else ()  # type: ignore[attr-defined]
                if ref.version is not None and ref.version not in known:
                    found.append(_unknown_version(resources[target], ref, document, locate))
                continue
            if _declared_but_invalid(ref, document, declared):
                continue
            if found.spent:
                found.omit(1)
                continue
            found.append(_unresolved(ref, document, names, locate(document, ref.path)))


def _declared_but_invalid(ref: Reference, referrer: Referrer, declared: Declared) -> bool:
    if "/" in ref.name:
        project, name = ref.name.split("/", 1)
        return (ref.kind, project, name) in declared.names
    return (ref.kind, referrer.project, ref.name) in declared.names or (
        ref.kind,
        None,
        ref.name,
    ) in declared.names


def _unresolved(ref: Reference, referrer: Referrer, names: _Names, where: Location) -> Diagnostic:
    field = _describe(ref)
    others = [
        other
        for other in names.named(ref.name)
        if other.project in (None, referrer.project) and other.kind != ref.kind
    ]
    if others:
        other = others[0]
        return Diagnostic(
            Severity.ERROR,
            "wrong-kind",
            f"`{ref.name}` is {article(other.kind)}, but {field} must name {article(ref.kind)}",
            where,
            field=field,
            expected=f"the name of {article(ref.kind)}",
            found=f"{other.address} ({other.location})",
            address=referrer.address,
            related=(other.location,),
        )
    suggestion = closest_name(ref.name, names.visible(ref.kind, referrer))
    project_capable = KINDS[ref.kind].scope is not Scope.GLOBAL
    scope_note = (
        f" in project `{referrer.project}` or globally"
        if referrer.project and project_capable
        else ""
    )
    return Diagnostic(
        Severity.ERROR,
        "unknown-reference",
        f"{ref.kind} `{ref.name}` is not declared{scope_note}",
        where,
        field=field,
        expected=f"the name of a declared {ref.kind}",
        found=ref.name,
        suggestion=suggestion,
        address=referrer.address,
    )


def _unknown_version(
    target: Resource, ref: Reference, referrer: Referrer, locate: Locate
) -> Diagnostic:
    versions = target.document.spec.version_names()  # type: ignore[attr-defined]
    return Diagnostic(
        Severity.ERROR,
        "unknown-version",
        f"dataset `{ref.name}` declares no version `{ref.version}`",
        locate(referrer, ref.path),
        field=_describe(ref),
        expected="one of " + ", ".join(f"`{v}`" for v in versions),
        found=ref.version,
        suggestion=f"{ref.name}@{closest_name(ref.version, versions)}"
        if closest_name(ref.version, versions)
        else "",
        address=referrer.address,
        related=(target.location,),
    )


def _check_provider(resource: Resource, config: RootConfig, locate: Locate) -> list[Diagnostic]:
    allowed = PROVIDER_TYPES.get(resource.kind)
    name = getattr(resource.document.spec, "provider", None) if allowed else None
    if not allowed or name is None:
        return []
    instance = config.provider(name)
    if instance is not None and instance.type in allowed:
        return []
    where = locate(resource, ("spec", "provider"))
    if instance is None:
        known = [provider.name for provider in config.providers]
        return [
            Diagnostic(
                Severity.ERROR,
                "unknown-provider",
                f"provider instance `{name}` is not declared in trainform.yaml",
                where,
                field="spec.provider",
                expected="one of " + (", ".join(f"`{k}`" for k in known) or "(none declared)"),
                found=name,
                suggestion=closest_name(name, known),
                address=resource.address,
            )
        ]
    if instance.type not in allowed:
        return [
            Diagnostic(
                Severity.ERROR,
                "wrong-provider-type",
                f"provider `{name}` is of type {instance.type}; {article(resource.kind)} needs "
                + " or ".join(allowed),
                where,
                field="spec.provider",
                expected=" or ".join(allowed),
                found=instance.type,
                address=resource.address,
            )
        ]
    return []


Cycle = list[tuple[str, Dependency]]


def _acyclic(resources: dict[str, Resource]) -> bool:
    """Kahn's algorithm: cheap proof that there is no cycle, the usual case."""
    remaining: dict[str, int] = {}
    dependents: dict[str, list[str]] = {}
    ready = []
    for address, resource in resources.items():
        count = len(resource.dependencies)
        remaining[address] = count
        if count == 0:
            ready.append(address)
        for dependency in resource.dependencies:
            if dependency.address in dependents:
                dependents[dependency.address].append(address)
            else:
                dependents[dependency.address] = [address]
    removed = 0
    while ready:
        address = ready.pop()
        removed += 1
        for dependent in dependents.get(address, ()):
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                ready.append(dependent)
    return removed == len(resources)


def find_cycles(resources: dict[str, Resource]) -> list[Cycle]:
    """Each reference cycle once, as the list of edges walked in order.

    Tarjan's strongly connected components, iteratively (specs may be deep chains), then one
    cycle per component, started at its smallest address so output is deterministic.
    """
    if _acyclic(resources):
        return []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0

    def edges(address: str) -> Iterable[str]:
        return [dep.address for dep in resources[address].dependencies]

    for root in resources:
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(edges(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges(child))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges(node):
                    components.append(component)
    return [_cycle_in(sorted(component), resources) for component in sorted(components, key=min)]


def _cycle_in(members: list[str], resources: dict[str, Resource]) -> Cycle:
    inside = set(members)
    start = members[0]
    path: Cycle = []
    seen = {start: 0}
    node = start
    while True:
        dep = min(
            (d for d in resources[node].dependencies if d.address in inside),
            key=lambda d: (d.address != start, d.address),
        )
        path.append((node, dep))
        if dep.address in seen:
            return path[seen[dep.address] :]
        seen[dep.address] = len(path)
        node = dep.address


def cycle_diagnostic(cycle: Cycle, resources: dict[str, Resource], locate: Locate) -> Diagnostic:
    first_source = cycle[0][0]
    order = [first_source] + [dep.address for _, dep in cycle]
    locations = [locate(resources[source], dep.reference.path) for source, dep in cycle]
    steps = [
        f"{source} ({where}) -> {dep.address} via {_describe(dep.reference)}"
        for (source, dep), where in zip(cycle, locations, strict=True)
    ]
    first = cycle[0][1]
    return Diagnostic(
        Severity.ERROR,
        "reference-cycle",
        "reference cycle: " + " -> ".join(order),
        locations[0],
        field=_describe(first.reference),
        expected="references that form no cycle; remove one of them",
        address=first_source,
        related=tuple(locations[1:]),
        detail="\n".join(steps),
    )
