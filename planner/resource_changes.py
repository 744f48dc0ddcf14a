"""The change one resource (other than a training job) needs, with its reasons.

Delete (no longer in the specs, or destroy), create (not yet created, an interrupted
create, adopted, or missing on the provider), update in place, replace (a field that
forces replacement changed, or --replace), or no-op. A refreshed change compares against
what the providers report, so a change made by hand is corrected.
"""

from __future__ import annotations

from typing import Any

from trainform.planner.desired import DesiredItem
from trainform.planner.diff import FieldChange, diff_documents, is_missing
from trainform.planner.normalize import humanize
from trainform.planner.plan_model import Action, ResourceChange
from trainform.planner.state import ResourceState
from trainform.providers.base import KindSchema, Observation


def change_for(
    address: str,
    item: DesiredItem | None,
    previous: ResourceState | None,
    schema: KindSchema,
    seen: list[Observation | None],
    refreshed: bool,
    destroying: bool = False,
) -> ResourceChange:
    """The change that makes `address` match `item` (None: delete it), from `previous`."""
    if item is None:
        assert previous is not None
        return delete_change(address, previous, schema, destroying)
    common: dict[str, Any] = {
        "after": item.document,
        "after_hash": item.spec_hash,
        "dependencies": item.dependencies,
        "location": item.location,
        "replace_order": schema.replace_order.value,
    }
    if previous is None or (not previous.spec and previous.pending):
        return create_change(address, item, previous, schema, seen, refreshed, common)
    common["previous_dependencies"] = previous.dependencies
    base = previous.spec
    reasons: list[str] = []
    if refreshed:
        missing = [
            name for name, o in zip(item.providers, seen, strict=False) if o is None or not o.exists
        ]
        if missing:
            return recreate_change(address, item, previous, schema, missing, common)
        base = compare_live(previous, schema, seen, common, reasons)
        unsettled = [f.message for o in seen if o is not None for f in o.findings if f.unsettled]
        if unsettled:
            common["unsettled"] = unsettled
    return update_change(address, item, previous, schema, base, reasons, common)


def delete_change(
    address: str, previous: ResourceState, schema: KindSchema, destroying: bool
) -> ResourceChange:
    """Delete what state records; data-bearing kinds keep their data unless told not to."""
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
        schema.kind,
        Action.DELETE,
        previous.providers,
        reasons,
        before=previous.spec,
        previous_dependencies=previous.dependencies,
        data_kept=keeps_data,
    )


def create_change(
    address: str,
    item: DesiredItem,
    previous: ResourceState | None,
    schema: KindSchema,
    seen: list[Observation | None],
    refreshed: bool,
    common: dict[str, Any],
) -> ResourceChange:
    """Create a resource state does not hold (or whose create was interrupted), or adopt it."""
    exists = refreshed and any(o is not None and o.exists for o in seen)
    reasons = ["not yet created"]
    if previous is not None:
        reasons = [f"an earlier {previous.pending} was interrupted; converging"]
    elif exists:
        reasons = ["exists on the provider but not in state: adopting it"]
    return ResourceChange(
        address,
        schema.kind,
        Action.CREATE,
        item.providers,
        reasons,
        known_after_apply=list(schema.computed),
        **common,
    )


def recreate_change(
    address: str,
    item: DesiredItem,
    previous: ResourceState,
    schema: KindSchema,
    missing: list[str],
    common: dict[str, Any],
) -> ResourceChange:
    """Create again what state records but the providers named in `missing` do not have."""
    recorded = [name for name in missing if name in previous.outputs]
    reason = (
        "missing on the provider: deleted outside trainform"
        if recorded or not previous.outputs
        else f"not on {', '.join(missing)} yet (never created there)"
    )
    return ResourceChange(
        address,
        schema.kind,
        Action.CREATE,
        item.providers,
        [reason],
        before=previous.spec,
        known_after_apply=list(schema.computed),
        **common,
    )


def compare_live(
    previous: ResourceState,
    schema: KindSchema,
    seen: list[Observation | None],
    common: dict[str, Any],
    reasons: list[str],
) -> dict[str, Any]:
    """What to diff the specs against: the live object where it drifted from the applied
    spec (then `common` keeps the applied one and `reasons` says what drifted)."""
    live = next((o.live for o in seen if o is not None and o.live is not None), None)
    if live is None:
        return previous.spec
    drift = diff_documents(previous.spec, live, schema.ignored)
    if not drift:
        return previous.spec
    common["applied"] = previous.spec
    reasons.append("modified outside trainform: " + ", ".join(c.path for c in drift[:5]))
    return live


def update_change(
    address: str,
    item: DesiredItem,
    previous: ResourceState,
    schema: KindSchema,
    base: dict[str, Any],
    reasons: list[str],
    common: dict[str, Any],
) -> ResourceChange:
    """Update in place, replace, or leave alone, by the fields that differ from `base`."""
    kind = schema.kind
    unsettled = common.pop("unsettled", [])
    changes = diff_documents(base, item.document, schema.ignored, schema.forces_replacement)
    if sorted(item.providers) != sorted(previous.providers):
        changes.append(
            FieldChange("providers", previous.providers, item.providers, forces_replacement=True)
        )
    if previous.pending:
        reasons.append(f"an earlier {previous.pending} was interrupted; converging")
    if not changes:
        if previous.pending or previous.spec_hash != item.spec_hash or unsettled:
            return ResourceChange(
                address,
                kind,
                Action.UPDATE,
                item.providers,
                [*reasons, *unsettled] or ["state is out of date"],
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
    reasons += [reason_for(change) for change in changes] + unsettled
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


def reason_for(change: FieldChange) -> str:
    """A field change as a plan reason: `path: before -> after`."""
    if is_missing(change.before):
        text = f"{change.path}: (unset) -> {humanize(change.after)}"
    elif is_missing(change.after):
        text = f"{change.path}: {humanize(change.before)} -> (unset)"
    else:
        text = f"{change.path}: {humanize(change.before)} -> {humanize(change.after)}"
    return text + (" (forces replacement)" if change.forces_replacement else "")


def forced_replace(
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
