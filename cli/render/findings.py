"""Policy findings as text (terminal, after the plan) and Markdown (PR comments).

Both read the same `PolicyReport`; JSON is `PolicyReport.to_json()`. Blocking findings come
first; each shows severity, policy id, address, file:line, field and message, and for a
waived finding the waiver's reason.
"""

from __future__ import annotations

from trainform.cli.render.style import paint
from trainform.policies.engine import PolicyReport
from trainform.policies.findings import PolicyFinding
from trainform.policies.review.render_markdown import escape_html


def _label(finding: PolicyFinding) -> str:
    return f"{finding.severity.value} (waived)" if finding.waived else finding.severity.value


def summary_line(report: PolicyReport) -> str:
    counts = report.counts()
    if report.denied:
        return (
            f"Policies: {counts['deny']} deny, {counts['warn']} warn, {counts['waived']} "
            "waived. Apply is blocked by policy."
        )
    if not report.findings:
        return f"Policies: {len(report.policies)} checked, no findings."
    return f"Policies: {counts['warn']} warn, {counts['waived']} waived. Nothing blocks apply."


def render_findings_text(report: PolicyReport, color: bool = False) -> str:
    """The findings section printed after a plan ("" when there is nothing to show)."""
    if not report.findings:
        return ""
    lines = [paint("Policy findings:", "bold", color)]
    for finding in report.findings:
        tone = "red" if finding.blocking else "yellow"
        lines.append(
            paint(f"  {_label(finding)}[{finding.policy}]", tone, color) + f" {finding.address}"
        )
        if finding.location:
            lines.append(f"    --> {finding.location}")
        if finding.field:
            lines.append(f"    field:  {finding.field}")
        lines.append(f"    {finding.message}")
        if finding.waived:
            lines.append(f"    waived: {finding.waived}")
    lines += ["", paint(summary_line(report), "bold", color)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return escape_html(text).replace("|", "\\|").replace("\n", " ")


def render_findings_markdown(report: PolicyReport) -> str:
    """A `#### Policy findings` section with a table ("" when there is nothing to show)."""
    if not report.findings:
        return ""
    lines = [
        "#### Policy findings",
        "",
        f"**{summary_line(report)}**",
        "",
        "| severity | policy | address | where | message |",
        "| --- | --- | --- | --- | --- |",
    ]
    for finding in report.findings:
        where = f"`{finding.location}`" if finding.location else ""
        if finding.field:
            where += f" `{finding.field}`"
        message = finding.message + (f" (waived: {finding.waived})" if finding.waived else "")
        lines.append(
            f"| {_label(finding)} | `{finding.policy}` | `{finding.address}` | {where.strip()} "
            f"| {_cell(message)} |"
        )
    lines.append("")
    return "\n".join(lines) + "\n"
