"""A reviewed plan next to a fresh one, and a plan's bindings, as text, Markdown and JSON.

Read by `apply --replan-if-same-changes`, `plan-diff` and `plan-overlap` (cli.replanning)
and by `show` (the bindings). Every value is printed whole with both sides, so an approver
sees why a plan is stale and exactly what changed; secrets were masked in the plans
before they reach here, and every output is redacted once more.
"""

from __future__ import annotations

import json
from typing import Any

from trainform.cli.render.plan_markdown import code_span
from trainform.cli.render.words import plural
from trainform.planner.plan_compare import ChangeDifference, Overlap, PlanComparison
from trainform.planner.plan_model import Plan
from trainform.policies.review.render_markdown import escape_html
from trainform.specs.secrets import redact


def value_text(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def _side(value: Any, action_word: str = "") -> str:
    if value is None:
        return "not changed"
    if isinstance(value, dict) and set(value) == {"before", "after"}:
        if value["before"] is None:
            return value_text(value["after"])
        return f"{value_text(value['before'])} -> {value_text(value['after'])}"
    return f"{action_word}{value_text(value)}"


def difference_line(item: ChangeDifference) -> str:
    """`ADDRESS PATH: reviewed X -> Y, now X' -> Y'` and the like, in words."""
    if item.what == "only-reviewed":
        return f"{item.address}: reviewed {item.reviewed}, now not changed"
    if item.what == "only-fresh":
        return f"{item.address}: now {item.now}, not in the reviewed plan"
    if item.what == "action":
        return f"{item.address}: reviewed {item.reviewed}, now {item.now}"
    return f"{item.address} {item.path}: reviewed {_side(item.reviewed)}, now {_side(item.now)}"


def verdict_line(comparison: PlanComparison, reviewed_name: str) -> str:
    if comparison.outcome == "fresh":
        return f"The reviewed plan {reviewed_name} is fresh: it binds what holds now."
    if comparison.outcome == "same-changes":
        return (
            f"The reviewed plan {reviewed_name} is stale, and the fresh plan makes the same "
            "changes (same resources, actions and field values)."
        )
    if not comparison.replannable:
        return (
            f"The reviewed plan {reviewed_name} is for another target than the fresh plan "
            "(environment, state or scope differ); a new plan needs a new review."
        )
    return (
        f"The reviewed plan {reviewed_name} is stale, and the fresh plan makes different "
        f"changes ({plural(len(comparison.differences), 'difference')}); it needs a new review."
    )


def render_comparison_text(comparison: PlanComparison, reviewed_name: str) -> str:
    lines = [verdict_line(comparison, reviewed_name)]
    if comparison.stale:
        lines.append("Why it is stale (when reviewed -> now):")
        lines += [
            f"  {b.name}: {value_text(b.reviewed)} -> {value_text(b.now)}" for b in comparison.stale
        ]
    if comparison.differences:
        lines.append("What differs between the reviewed and the fresh plan:")
        lines += [f"  {difference_line(item)}" for item in comparison.differences]
    return redact("\n".join(lines) + "\n")


def _cell(text: str) -> str:
    return code_span(text).replace("|", "\\|").replace("\n", " ")


def render_comparison_markdown(comparison: PlanComparison, reviewed_name: str) -> str:
    lines = [f"**{escape_html(verdict_line(comparison, reviewed_name))}**", ""]
    if comparison.stale:
        lines += [
            "Why it is stale:",
            "",
            "| binding | when reviewed | now |",
            "| --- | --- | --- |",
        ]
        for binding in comparison.stale:
            old, new = _cell(value_text(binding.reviewed)), _cell(value_text(binding.now))
            lines.append(f"| {escape_html(binding.name)} | {old} | {new} |")
        lines.append("")
    if comparison.differences:
        lines += [
            "What differs between the reviewed and the fresh plan:",
            "",
            "| resource | field | reviewed | now |",
            "| --- | --- | --- | --- |",
        ]
        for item in comparison.differences:
            field = _cell(item.path) if item.path else item.what
            reviewed = _side(item.reviewed) if item.what == "field" else value_text(item.reviewed)
            now = _side(item.now) if item.what == "field" else value_text(item.now)
            if item.what in ("only-reviewed", "only-fresh"):
                reviewed = item.reviewed or "not changed"
                now = item.now or "not changed"
            lines.append(f"| {_cell(item.address)} | {field} | {_cell(reviewed)} | {_cell(now)} |")
        lines.append("")
    return redact("\n".join(lines))


def render_comparison_json(comparison: PlanComparison) -> str:
    return redact(json.dumps(comparison.to_json(), indent=2, sort_keys=True) + "\n")


def binding_rows(plan: Plan, signed: bool) -> list[tuple[str, str]]:
    """What a saved plan binds, as `apply FILE` checks it, one (name, value) per row."""
    rows = [
        ("environment", plan.environment or "(none)"),
        ("state location", plan.state_location or "(not saved)"),
        ("state lineage", plan.lineage or "(no state yet)"),
        ("state serial", str(plan.serial)),
        ("specs digest", plan.spec_digest),
        ("trainform.lock digest", plan.lock_digest or "(no trainform.lock)"),
        ("tool version", plan.tool_version),
    ]
    if plan.targets:
        rows.append(("targets", ", ".join(plan.targets)))
    if plan.destroy:
        rows.append(("destroy", "yes"))
    for group in sorted(plan.pins):
        for key, value in sorted((plan.pins.get(group) or {}).items()):
            rows.append((f"pin {group} {key}", value_text(value)))
    if plan.variables:
        rows.append(("variables", ", ".join(sorted(plan.variables))))
    rows.append(("signed", "yes (TRAINFORM_PLAN_KEY)" if signed else "no"))
    return rows


def render_bindings_text(plan: Plan, signed: bool) -> str:
    rows = binding_rows(plan, signed)
    width = max(len(name) for name, _ in rows)
    lines = ["Bindings (apply FILE refuses the plan when one of them no longer holds):"]
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    return redact("\n".join(lines) + "\n")


def render_bindings_markdown(plan: Plan, signed: bool) -> str:
    lines = [
        "<details><summary>Bindings: what apply checks still holds</summary>",
        "",
        "| binding | value |",
        "| --- | --- |",
    ]
    lines += [
        f"| {escape_html(name)} | {_cell(value)} |" for name, value in binding_rows(plan, signed)
    ]
    return redact("\n".join([*lines, "", "</details>", ""]))


def render_overlaps_text(overlaps: list[Overlap], name: str) -> str:
    if not overlaps:
        return f"No open plan holds a resource that {name} changes.\n"
    lines = []
    for overlap in overlaps:
        lines.append(
            f"{overlap.holder} holds {plural(len(overlap.resources), 'resource')} that {name} "
            "changes too: merge or close it first, then plan again."
        )
        lines += [
            f"  {address}: {mine} here, {theirs} in {overlap.holder}"
            for address, (mine, theirs) in sorted(overlap.resources.items())
        ]
    return redact("\n".join(lines) + "\n")


def render_overlaps_markdown(overlaps: list[Overlap], name: str) -> str:
    if not overlaps:
        return f"No open plan holds a resource that {escape_html(name)} changes.\n"
    lines = []
    for overlap in overlaps:
        lines += [
            f"**{escape_html(overlap.holder)}** holds "
            f"{plural(len(overlap.resources), 'resource')} that this plan changes too: merge "
            "or close it first, then plan again.",
            "",
            "| resource | here | there |",
            "| --- | --- | --- |",
        ]
        lines += [
            f"| {_cell(address)} | {_cell(mine)} | {_cell(theirs)} |"
            for address, (mine, theirs) in sorted(overlap.resources.items())
        ]
        lines.append("")
    return redact("\n".join(lines))


def render_overlaps_json(overlaps: list[Overlap]) -> str:
    body = {"formatVersion": 1, "overlaps": [overlap.to_json() for overlap in overlaps]}
    return redact(json.dumps(body, indent=2, sort_keys=True) + "\n")
