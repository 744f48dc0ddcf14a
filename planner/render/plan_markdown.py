"""Plans as Markdown for pull-request comments; long sections are folded. Changes are
masked as the text renderer masks them, and the whole comment is redacted."""

from __future__ import annotations

from planner.plan_model import Plan
from planner.render.plan_text import render_change, summary_line
from specs.secrets import redact

FOLD_AFTER = 10


def render_plan_markdown(plan: Plan) -> str:
    counts = plan.summary()
    lines = ["### trainform plan", "", f"**{summary_line(plan)}**", ""]
    if plan.has_changes:
        lines += ["| action | count |", "| --- | ---: |"]
        for action in ("create", "update", "replace", "delete", "resume", "evaluate"):
            if counts[action]:
                lines.append(f"| {action} | {counts[action]} |")
        lines.append("")
        actionable = plan.actionable
        fold = len(actionable) > FOLD_AFTER
        if fold:
            lines += ["<details><summary>Show all changes</summary>", ""]
        lines.append("```diff")
        for change in actionable:
            lines += render_change(change, color=False)
            lines.append("")
        lines.append("```")
        if fold:
            lines += ["", "</details>"]
        lines.append("")
    if plan.findings:
        lines += ["#### Findings", ""]
        for finding in plan.findings:
            lines.append(
                f"- **{finding.severity}** `{finding.kind}` `{finding.address}`: {finding.message}"
            )
        lines.append("")
    return redact("\n".join(lines))
