"""Plans as Markdown for pull-request comments, within a size budget.

Layout: a heading naming the environment and the spec folder, the summary line, the state
location, the counts, the policy section (when the CLI passes one), then the changes in a
```diff fence with the markers in column 0 (`+` create, `-` delete, `!` any other change),
so GitHub and GitLab colour them, and the plan's own findings.

The comment never exceeds `budget` characters (GitHub refuses comments over 65,536): when
the whole plan does not fit, changes are left out whole, from the end, and a note says how
many and where the full plan is. Only whole blocks are ever dropped, so a fence or a
`<details>` is always closed. A fence is longer than any run of backticks inside it, so a
spec value cannot end it. Changes are masked as the text renderer masks them and every
block is redacted before it is measured.
"""

from __future__ import annotations

import re

from trainform.cli.render.plan_text import render_change, summary_line
from trainform.planner.plan_model import Plan, ResourceChange
from trainform.policies.review.render_markdown import escape_html
from trainform.specs.secrets import redact

DEFAULT_BUDGET = 60_000
MIN_BUDGET = 2_000
"""Below this even the heading, the counts and the notes might not fit."""
FOLD_AFTER = 10
_MARK = {"+": "+", "-": "-", "~": "!", "-/+": "!", ">": "!", "?": "!"}
_ACTIONS = ("create", "update", "replace", "delete", "resume", "evaluate")


def code_span(text: str) -> str:
    """`text` as inline code that no backtick inside it can end."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{padding}{text}{padding}{ticks}"


def diff_lines(change: ResourceChange) -> list[str]:
    """The text rendering of a change with its markers moved to column 0."""
    lines = []
    for shown in render_change(change, color=False):
        # A key or reason holding a line break would start a line without its marker.
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown)
        body = line.lstrip(" ")
        symbol, _, rest = body.partition(" ")
        if body.startswith("# "):
            lines.append(body)
        elif symbol in _MARK:
            indent = len(line) - len(body)
            lines.append(_MARK[symbol] + " " * max(indent - 1, 1) + rest)
        else:
            lines.append(line)
    return lines


def _header(plan: Plan) -> list[str]:
    environment = code_span(plan.environment) if plan.environment else "(none)"
    folder = code_span(plan.spec_folder or ".")
    lines = [
        f"### trainform plan: environment {environment}, folder {folder}",
        "",
        f"**{summary_line(plan)}**",
        "",
    ]
    if plan.state_location:
        lines += [f"State: {code_span(plan.state_location)}", ""]
    counts = plan.summary()
    if plan.has_changes:
        lines += ["| action | count |", "| --- | ---: |"]
        lines += [f"| {a} | {counts[a]} |" for a in _ACTIONS if counts[a]]
        lines.append("")
    return lines


def _findings(plan: Plan) -> list[str]:
    if not plan.findings:
        return []
    return [
        f"- **{f.severity}** {code_span(f.kind)} {code_span(f.address)}: {escape_html(f.message)}"
        for f in plan.findings
    ]


def _fit(blocks: list[str], room: int) -> int:
    """How many of `blocks`, from the first, fit in `room` characters."""
    used = 0
    for count, block in enumerate(blocks):
        used += len(block)
        if used > room:
            return count
    return len(blocks)


def _note(left_out: int, total: int, what: str, budget: int) -> str:
    return (
        f"> **{left_out} of {total} {what} not shown**: the comment is kept under "
        f"{budget:,} characters. `trainform show PLANFILE` prints the whole plan "
        "(CI keeps the saved plan as an artifact).\n\n"
    )


def render_plan_markdown(plan: Plan, policies: str = "", budget: int = DEFAULT_BUDGET) -> str:
    """The plan as a PR comment of at most `budget` characters (`policies`: a Markdown
    section placed after the counts, shortened by whole lines when it alone is too long)."""
    head = redact("\n".join(_header(plan)) + "\n")
    findings = [redact(line + "\n") for line in _findings(plan)]
    blocks = [redact("\n".join(diff_lines(change)) + "\n\n") for change in plan.actionable]
    note_room = len(_note(10**9, 10**9, "resource changes", budget))

    policy_lines = [line + "\n" for line in policies.splitlines()] if policies else []
    # Each later part may still need its note: room is kept for them.
    room = budget - len(head) - 3 * note_room
    kept = _fit(policy_lines, room)
    policy_part = "".join(policy_lines[:kept])
    if kept < len(policy_lines):
        left_out = len(policy_lines) - kept
        policy_part += "\n" + _note(left_out, len(policy_lines), "policy lines", budget)
    elif policy_part:
        policy_part += "\n"

    findings_title = "#### Findings\n\n"
    room = budget - len(head) - len(policy_part) - 2 * note_room - len(findings_title) - 1
    kept = _fit(findings, room)
    findings_part = ""
    if findings:
        findings_part = findings_title + "".join(findings[:kept]) + "\n"
        if kept < len(findings):
            findings_part += _note(len(findings) - kept, len(findings), "findings", budget)

    changes_part = ""
    if blocks:
        longest = max((len(run) for run in re.findall(r"`+", "".join(blocks))), default=0)
        fence = "`" * max(3, longest + 1)
        fold = len(blocks) > FOLD_AFTER
        opening = ("<details><summary>Show all changes</summary>\n\n" if fold else "") + (
            f"{fence}diff\n"
        )
        closing = f"{fence}\n" + ("\n</details>\n" if fold else "") + "\n"
        room = budget - len(head) - len(policy_part) - len(findings_part) - note_room
        kept = _fit(blocks, room - len(opening) - len(closing))
        if kept:
            changes_part = opening + "".join(blocks[:kept]) + closing
        if kept < len(blocks):
            changes_part += _note(len(blocks) - kept, len(blocks), "resource changes", budget)
    return head + policy_part + changes_part + findings_part
