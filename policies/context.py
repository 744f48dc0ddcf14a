"""What a policy reads: the resolved specs as normalized documents, the plan, and positions.

`PolicyContext` is built once per evaluation by `policies.engine`. Every resource becomes a
`Subject`: its address, kind, name, project, normalized document (`{metadata, spec}` with
canonical values, as state and plans hold it) and the file it was declared in, relative to
the spec folder. `previous` holds, for each resource the change updates or deletes, its
document before the change: from the plan (the spec last applied) for plan and apply, from
the base branch's specs for review. Both give the same map for the same change, so a policy
that compares (quota-cut, a rule reading `previous`) reaches the same verdict in plan and in
review.
`locate` turns a field path into `file:line:column`, re-reading a file with
ruamel's position-keeping loader only when a finding needs it (once per file).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainform.planner.normalize import normalize_document
from trainform.planner.plan_model import Plan
from trainform.policies.codeowners import CodeOwners
from trainform.specs import Resource, SpecSet
from trainform.specs.quantity import Duration, parse_quantity
from trainform.specs.validation import format_path

if TYPE_CHECKING:
    from trainform.specs.positions import SourceMap

Path_ = tuple[str | int, ...]


@dataclass
class Subject:
    """One resource as policies see it."""

    address: str
    kind: str
    name: str
    project: str | None
    given_document: dict[str, Any] | None
    """The normalized document; None: normalized from `resource` when first read."""
    file: str
    resource: Resource

    @property
    def document(self) -> dict[str, Any]:
        if self.given_document is None:
            self.given_document = normalize_document(self.resource.document)
        return self.given_document

    @property
    def spec(self) -> dict[str, Any]:
        return self.document["spec"]  # type: ignore[no-any-return]

    @property
    def annotations(self) -> dict[str, str]:
        return self.document["metadata"].get("annotations", {})  # type: ignore[no-any-return]


@dataclass
class PolicyContext:
    specs: SpecSet
    plan: Plan | None
    subjects: dict[str, Subject]
    code_owners: CodeOwners = field(default_factory=CodeOwners)
    """The trusted CODEOWNERS rules (the engine sets them from `TrustedPolicies`)."""
    previous: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Address -> normalized document before the change, for resources it updates or
    deletes (a deleted one has no subject; its kind is the address's first part)."""
    gone: dict[str, str] = field(default_factory=dict)
    """Address -> `file:line:column` on the base side of each resource a review deletes."""
    _maps: dict[str, SourceMap | None] = field(default_factory=dict)

    @classmethod
    def build(
        cls, specs: SpecSet, plan: Plan | None, before: SpecSet | None = None
    ) -> PolicyContext:
        """The context of `specs`; "before" values from `plan`, else from `before` (the
        base side of a review)."""
        root = os.path.normpath(str(specs.root))
        relative: dict[str, str] = {}
        subjects = {}
        for address, resource in specs.resources.items():
            name = resource.location.file
            if name not in relative:
                relative[name] = Path(os.path.relpath(name, root)).as_posix()
            subjects[address] = Subject(
                address=address,
                kind=resource.kind,
                name=resource.name,
                project=resource.project,
                given_document=None,
                file=relative[name],
                resource=resource,
            )
        if plan is not None:
            previous = _previous_from_plan(plan)
        elif before is not None:
            previous = _previous_from_specs(before, subjects)
        else:
            previous = {}
        gone = _base_locations(before, subjects) if plan is None and before else {}
        return cls(specs, plan, subjects, previous=previous, gone=gone)

    def of_kind(self, *kinds: str) -> list[Subject]:
        return [subject for subject in self.subjects.values() if subject.kind in kinds]

    def locate(self, address: str, path: Sequence[str | int] = ()) -> str:
        """`file:line:column` of `path` in the resource at `address` ("" if unknown)."""
        subject = self.subjects.get(address)
        if subject is None:
            return self.gone.get(address, "")
        start = subject.resource.location
        line, column = start.line, start.column
        if path:
            source = self._source_map(start.file)
            if source is not None:
                found = source.locate(subject.resource.document_index, list(path), False, 0)
                if found[0] >= start.line:
                    line, column = found
        return f"{subject.file}:{line}:{column}" if line else subject.file

    def _source_map(self, file: str) -> SourceMap | None:
        if file not in self._maps:
            try:
                from trainform.specs.positions import SourceMap

                self._maps[file] = SourceMap(Path(file).read_text(encoding="utf-8"))
            except OSError:
                self._maps[file] = None
        return self._maps[file]


def _previous_from_plan(plan: Plan) -> dict[str, dict[str, Any]]:
    """What each updated, replaced or deleted resource was last applied as (the live object
    when nothing better is known): putting back a value changed by hand is no change of the
    specs. A destroy plan's deletes are left out: deleting everything is what it asks."""
    from trainform.planner.plan_model import Action

    kept = {Action.UPDATE, Action.REPLACE} | (set() if plan.destroy else {Action.DELETE})
    previous = {}
    for change in plan.changes:
        if change.action not in kept:
            continue
        document = change.applied if change.applied is not None else change.before
        if document:
            previous[change.address] = document
    return previous


def _previous_from_specs(
    before: SpecSet, subjects: dict[str, Subject]
) -> dict[str, dict[str, Any]]:
    """The base side's normalized documents of the resources the change updates or deletes."""
    previous = {
        address: normalize_document(resource.document)
        for address, resource in before.resources.items()
        if address not in subjects
    }
    for address, subject in subjects.items():
        resource = before.resources.get(address)
        if resource is None or resource.kind != subject.kind:
            continue
        document = normalize_document(resource.document)
        if document != subject.document:
            previous[address] = document
    return previous


def _base_locations(before: SpecSet, subjects: dict[str, Subject]) -> dict[str, str]:
    """Where each resource the head no longer declares was declared on the base side, its
    file relative to the base's spec folder (the same path in the repository)."""
    root = os.path.normpath(str(before.root))
    found = {}
    for address, resource in before.resources.items():
        if address in subjects:
            continue
        where = resource.location
        file = Path(os.path.relpath(where.file, root)).as_posix()
        found[address] = f"{file}:{where.line}:{where.column}" if where.line else file
    return found


def field_path(path: Path_) -> str:
    """`spec.pools[0].nominalQuota.gpu` for ("spec", "pools", 0, "nominalQuota", "gpu")."""
    return format_path(path)


def amount(value: Any) -> Decimal:
    """A normalized quantity (canonical text or number) as an exact number; 0 when unset."""
    if value is None or value == "":
        return Decimal(0)
    return parse_quantity(str(value))


def seconds(value: Any) -> int | None:
    """A duration (canonical text or a Duration setting) in seconds; None when unset."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return int(value)
    return Duration(str(value)).seconds


def show_amount(value: Decimal) -> str:
    """An exact number as a person reads it: 96, 0.5, 2Ti for memory-sized byte counts."""
    from trainform.planner.normalize import humanize

    text = format(value.normalize(), "f") if value == value.to_integral() else str(value)
    if "." in text:
        return text.rstrip("0").rstrip(".")
    return humanize(text)
