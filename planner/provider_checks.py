"""Provider checks at plan time: what each provider finds wrong before anything is called.

`provider_problems` runs every provider's `validate` on each of its resources and its
`validate_all` on all of them at once (cross-resource rules such as cohort cycles), and
names each problem by address, file:line:column of the offending field, and field path.
`change_impacts` asks providers what an update does to work already running,
`delete_impacts` what a delete leaves in place, and `change_steps` what steps a change
takes there beyond writing its objects.
Both are pure reads of specs and observations; make_plan (plan.py) calls them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trainform.planner.desired import DesiredItem
from trainform.planner.plan_model import PlanFinding
from trainform.planner.session import ProviderSet
from trainform.planner.state import ResourceState
from trainform.providers.base import DesiredResource, Observation, ValidationProblem
from trainform.providers.launch import launch_problems
from trainform.specs import Resource, SpecSet

if TYPE_CHECKING:
    from trainform.specs.positions import SourceMap

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_field(field: str) -> tuple[str | int, ...]:
    """("spec", "pools", 0, "lendingLimit") for "spec.pools[0].lendingLimit"."""
    return tuple(
        int(index) if index else name for name, index in _STEP.findall(field) if name or index
    )


class FieldLocator:
    """file:line:column of a field of a loaded resource (the resource's start if unknown)."""

    def __init__(self, specs: SpecSet | None) -> None:
        self._specs = specs
        self._maps: dict[str, SourceMap | None] = {}

    def locate(self, address: str, field: str, fallback: str) -> str:
        resource = self._specs.resources.get(address) if self._specs else None
        if resource is None:
            return fallback
        start = resource.location
        line, column = self.position(resource, parse_field(field))
        shown = os.path.relpath(start.file, self._specs.root) if self._specs else start.file
        return f"{Path(shown).as_posix()}:{line}:{column}"

    def position(
        self, resource: Resource, path: tuple[str | int, ...], key: bool = False
    ) -> tuple[int, int]:
        """(line, column) of a field (of its key when `key`) of a loaded resource; the
        resource's start if unknown."""
        start = resource.location
        source = self._source(start.file)
        if source is not None and path:
            found = source.locate(resource.document_index, list(path), key, 0)
            if found[0] >= start.line:
                return found
        return start.line, start.column

    def _source(self, file: str) -> SourceMap | None:
        if file not in self._maps:
            try:
                from trainform.specs.positions import SourceMap

                self._maps[file] = SourceMap(Path(file).read_text(encoding="utf-8"))
            except OSError:
                self._maps[file] = None
        return self._maps[file]


def provider_problems(
    specs: SpecSet | None,
    desired: dict[str, DesiredItem],
    providers: ProviderSet,
    make_resource: Callable[[DesiredItem], DesiredResource],
) -> list[str]:
    """Every problem providers find in the desired resources, one line each."""
    locator = FieldLocator(specs)
    found: list[tuple[ValidationProblem, str]] = []
    per_instance: dict[str, list[DesiredResource]] = {}
    for item in desired.values():
        if item.kind == "TrainingJob":
            found += [
                (p, item.location) for p in launch_problems(item.address, item.document["spec"])
            ]
        for name in item.providers:
            provider = providers.get(name)
            if not provider.supports(item.kind):
                continue
            resource = make_resource(item)
            per_instance.setdefault(name, []).append(resource)
            found += [(p, item.location) for p in provider.validate(resource)]
    for name, resources in sorted(per_instance.items()):
        for problem in providers.get(name).validate_all(resources):
            item = desired.get(problem.address)
            found.append((problem, item.location if item else problem.address))
    lines = []
    for problem, fallback in found:
        where = locator.locate(problem.address, problem.field, fallback)
        lines.append(f"{problem.address} ({where}): {problem.field}: {problem.message}")
    return sorted(set(lines), key=lines.index)


def read_provider_settings(desired: dict[str, DesiredItem], providers: ProviderSet) -> None:
    """Let each provider instance of the plan read the platform settings its warnings check
    (a plan that refreshes only)."""
    for name in sorted({name for item in desired.values() for name in item.providers}):
        providers.get(name).read_settings()


def provider_warnings(
    desired: dict[str, DesiredItem],
    providers: ProviderSet,
    make_resource: Callable[[DesiredItem], DesiredResource],
) -> list[PlanFinding]:
    """What providers warn of at plan (plan-only findings, never drift)."""
    found = []
    for item in desired.values():
        for name in item.providers:
            provider = providers.get(name)
            if provider.supports(item.kind):
                found += [
                    PlanFinding(item.address, "provider-warning", "warning", f"{name}: {line}")
                    for line in provider.plan_warnings(make_resource(item))
                ]
    return found


def change_impacts(
    providers: ProviderSet,
    names: list[str],
    resource: DesiredResource,
    seen: list[Observation | None],
) -> list[str]:
    """What an update does to running work, as reasons for the change."""
    impacts: list[str] = []
    for name, observation in zip(names, seen, strict=False):
        if observation is None or not observation.exists:
            continue
        impacts += providers.get(name).change_impact(resource, observation)
    return impacts


def delete_impacts(
    providers: ProviderSet, names: list[str], address: str, kind: str, recorded: ResourceState
) -> list[str]:
    """What a delete leaves in place or affects, as reasons for the change."""
    impacts: list[str] = []
    for name in names:
        provider = providers.get(name)
        if provider.supports(kind):
            impacts += provider.delete_impact(address, kind, recorded.outputs.get(name, {}))
    return impacts


def change_steps(
    providers: ProviderSet,
    names: list[str],
    resource: DesiredResource,
    action: str,
    seen: list[Observation | None],
) -> list[str]:
    """The steps each provider takes for a change, as reasons for it."""
    found: list[str] = []
    for index, name in enumerate(names):
        provider = providers.get(name)
        if provider.supports(resource.kind):
            observation = seen[index] if index < len(seen) else None
            found += provider.change_steps(resource, action, observation)
    return found
