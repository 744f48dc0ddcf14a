"""Plans as text, the way Terraform users read them: symbols, reasons, a summary line.

Each change is rendered as `ResourceChange.shown()` (secret-looking job values masked) and
the whole text is redacted (`specs.secrets.redact`) before it is returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from trainform.cli.render.style import paint
from trainform.planner.diff import FieldChange
from trainform.planner.normalize import humanize
from trainform.planner.plan_model import Action, Plan, ResourceChange
from trainform.specs.secrets import redact
from trainform.specs.split_work import map_halves

_VERB = {
    Action.CREATE: "will be created",
    Action.UPDATE: "will be updated in place",
    Action.REPLACE: "must be replaced",
    Action.DELETE: "will be deleted",
    Action.RESUME: "will resume",
    Action.EVALUATE: "will be evaluated",
}
_TONE = {
    Action.CREATE: "green",
    Action.UPDATE: "yellow",
    Action.REPLACE: "red",
    Action.DELETE: "red",
}
MAX_CREATE_FIELDS = 40


def _leaves(value: dict[str, Any], path: str, out: list[tuple[str, Any]]) -> None:
    """Every set leaf of a document as (dotted path, value), keys sorted; a list of scalars
    is one leaf. Recurses only into containers (plans print thousands of these)."""
    for key in sorted(value):
        child = value[key]
        name = f"{path}.{key}" if path else key
        kind = type(child)
        if kind is dict:
            _leaves(child, name, out)
        elif kind is list:
            if any(type(item) is dict or type(item) is list for item in child):
                for index, item in enumerate(child):
                    if type(item) is dict:
                        _leaves(item, f"{name}[{index}]", out)
                    else:
                        out.append((f"{name}[{index}]", item))
            elif child:
                out.append((name, child))
        elif child is not None and child != "":
            out.append((name, child))


def _show(value: Any) -> str:
    """humanize(), with the common cases (plain words, numbers) answered inline."""
    kind = type(value)
    if kind is str and value and " " not in value and not value.isdigit():
        return value if value.strip() == value and value.isprintable() else humanize(value)
    if kind is int or kind is float:
        return str(value)
    return humanize(value)


def field_line(change: FieldChange) -> str:
    from trainform.planner.diff import is_missing

    before = "(unset)" if is_missing(change.before) else humanize(change.before)
    after = "(unset)" if is_missing(change.after) else humanize(change.after)
    marker = "  # forces replacement" if change.forces_replacement else ""
    return f"      ~ {change.path}: {before} -> {after}{marker}"


def render_change(change: ResourceChange, color: bool = False) -> list[str]:
    change = change.shown()
    tone = _TONE.get(change.action, "bold")
    title = f"  # {change.address} {_VERB[change.action]}"
    lines = [paint(title, "bold", color)]
    lines.append(paint(f"{change.action.symbol:>3} {change.address}", tone, color))
    if change.action is Action.CREATE and change.after is not None:
        leaves: list[tuple[str, Any]] = []
        _leaves(change.after, "", leaves)
        for path, value in leaves[:MAX_CREATE_FIELDS]:
            lines.append(f"      + {path}: {_show(value)}")
        if len(leaves) > MAX_CREATE_FIELDS:
            lines.append(f"      ... {len(leaves) - MAX_CREATE_FIELDS} more fields")
        for name in change.known_after_apply:
            lines.append(f"      + outputs.{name}: (known after apply)")
    elif change.action in (Action.UPDATE, Action.REPLACE):
        lines += [field_line(field) for field in change.changes]
    reasons = [
        r for r in change.reasons if not any(r.startswith(f.path + ":") for f in change.changes)
    ]
    for reason in reasons:
        lines.append(paint(f"      reason: {reason}", "dim", color))
    return lines


def summary_line(plan: Plan) -> str:
    counts = plan.summary()
    if not plan.has_changes:
        return "No changes. The platform matches the specs."
    text = (
        f"Plan: {counts['create']} to create, {counts['update']} to update, "
        f"{counts['replace']} to replace, {counts['delete']} to delete"
    )
    extra = [f"{counts[a]} to {a}" for a in ("resume", "evaluate") if counts[a]]
    return text + (", " + ", ".join(extra) if extra else "") + "."


def header_line(plan: Plan) -> str:
    """Which target a plan is for: environment, spec folder and state location."""
    return target_line(plan.environment, plan.spec_folder, plan.state_location)


def target_line(environment: str | None, folder: str, location: str) -> str:
    """`Environment: prod, spec folder: ., state: ...`, the first line of every plan."""
    return (
        f"Environment: {environment or '(none)'}, spec folder: {folder or '.'}, "
        f"state: {location or '(unknown)'}"
    )


def render_plan_text(plan: Plan, color: bool = False) -> str:
    lines: list[str] = [paint(header_line(plan), "dim", color), ""]
    changes = ""
    if plan.has_changes:
        lines.append("trainform will perform the following actions:")
        lines.append("")
        changes = "".join(map_halves(partial(_render_changes, color=color), plan.actionable))
    head = redact("\n".join(lines) + "\n")
    lines = []
    if plan.findings:
        lines.append(paint("Findings:", "yellow", color))
        for finding in plan.findings:
            lines.append(
                f"  - {finding.severity} [{finding.kind}] {finding.address}: {finding.message}"
            )
        lines.append("")
    lines.append(paint(summary_line(plan), "bold", color))
    return head + changes + redact("\n".join(lines) + "\n")


def _render_changes(changes: Sequence[ResourceChange], color: bool) -> str:
    """The blocks of `changes`, each followed by an empty line, redacted."""
    lines: list[str] = []
    for change in changes:
        lines += render_change(change, color)
        lines.append("")
    return redact("\n".join(lines) + "\n") if lines else ""
