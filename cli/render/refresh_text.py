"""A refresh-only plan as text: the state entries it changes, what it leaves alone.

Read like a plan (`~` accept live values, `-` forget), with the field lines of
`plan_text`; redacted like every rendered output.
"""

from __future__ import annotations

from trainform.cli.render.plan_text import field_line
from trainform.cli.render.style import paint
from trainform.cli.render.words import plural
from trainform.planner.refresh_only import RefreshOnlyPlan
from trainform.specs.secrets import redact


def refresh_summary(plan: RefreshOnlyPlan) -> str:
    if not plan.has_changes:
        return "No changes. State matches the live platform."
    accepted = sum(update.action == "accept" for update in plan.updates)
    forgotten = len(plan.updates) - accepted
    return (
        f"Refresh-only plan: {plural(accepted, 'resource')} to accept live values, "
        f"{plural(forgotten, 'resource')} to forget. No provider will be changed."
    )


def render_refresh_only_text(plan: RefreshOnlyPlan, color: bool = False) -> str:
    lines: list[str] = []
    if plan.has_changes:
        lines += ["trainform will update state to match the live platform:", ""]
    for update in plan.updates:
        if update.action == "accept":
            title = f"  # {update.address}: state takes the live values ({update.provider})"
            lines += [paint(title, "bold", color), paint(f"  ~ {update.address}", "yellow", color)]
            lines += [field_line(change) for change in update.changes]
        else:
            title = f"  # {update.address}: not found on {update.provider}, forgotten by state"
            lines += [paint(title, "bold", color), paint(f"  - {update.address}", "red", color)]
        lines.append("")
    if plan.left_alone:
        lines.append(paint("Left alone (not state; see `trainform drift`):", "yellow", color))
        for finding in plan.left_alone:
            lines.append(f"  - [{finding.drift}] {finding.address}: {finding.remedy}")
        lines.append("")
    lines.append(paint(refresh_summary(plan), "bold", color))
    if plan.has_changes:
        lines.append(
            "The specs are not changed: edit them to match, or the next `trainform plan` "
            "puts the declared values back."
        )
    return redact("\n".join(lines) + "\n")
