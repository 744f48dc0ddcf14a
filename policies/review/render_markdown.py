"""The review as Markdown for a pull-request comment: summary first, details folded.

A comment must fit the forge's limit (GitHub: 65,536 characters; CI appends the plan to
it), so the whole text is kept within `MAX_CHARACTERS`: when it is longer, the longest
tables and lists are cut to fewer rows, each with a note of how many were left out
(`--format json` has them all), until it fits.

The comment opens with a hidden marker (`MARKER`) so CI finds and updates its own comment
instead of adding one per push; then the verdict, then the change as numbers. A pull
request that changes no queue policy and brings no finding gets one line.
"""

from __future__ import annotations

import html
import re

from trainform.policies.review.cells import Section
from trainform.policies.review.report import ReviewReport
from trainform.policies.review.sections import review_sections
from trainform.policies.review.summary import one_line, verdict
from trainform.specs.secrets import redact

MARKER = "<!-- trainform-review -->"
MAX_CHARACTERS = 60_000
ROW_LIMITS = (None, 200, 100, 50, 20, 10, 5)


CODE_SPAN = re.compile(r"(`+)(?:.|\n)*?(?<!`)\1(?!`)")


def escape_html(text: str) -> str:
    """`text` with `&`, `<` and `>` as entities outside its code spans: a quoted value such
    as `"<reason>"` is shown, not dropped by GitHub or GitLab as an unknown HTML tag."""
    out, start = [], 0
    for span in CODE_SPAN.finditer(text):
        out += [html.escape(text[start : span.start()], quote=False), span.group(0)]
        start = span.end()
    return "".join(out) + html.escape(text[start:], quote=False)


def _escape(cell: str) -> str:
    return escape_html(cell).replace("|", "\\|").replace("\n", " ")


def _section(section: Section, limit: int | None) -> list[str]:
    lines: list[str] = []
    count = len(section.rows) + len(section.items)
    if section.folded:
        lines += [f"<details><summary>{section.title}</summary>", ""]
    else:
        lines += [f"#### {section.title}", ""]
    if section.headers and section.rows:
        rows = section.rows if limit is None else section.rows[:limit]
        lines.append("| " + " | ".join(section.headers) + " |")
        lines.append("| " + " | ".join("---" for _ in section.headers) + " |")
        lines += ["| " + " | ".join(_escape(cell) for cell in row) + " |" for row in rows]
        lines.append("")
    elif section.headers:
        lines += ["_none_", ""]
    items = section.items if limit is None else section.items[:limit]
    for head, details in items:
        lines.append(f"- {escape_html(head)}")
        lines += [f"  - {escape_html(detail)}" for detail in details]
    if items:
        lines.append("")
    if limit is not None and count > limit:
        lines += [f"_{count - limit} more not shown; `--format json` lists them all._", ""]
    if section.note:
        lines += [f"_{section.note}_", ""]
    if section.folded:
        lines += ["</details>", ""]
    return lines


def _document(report: ReviewReport, limit: int | None) -> str:
    lines = [
        MARKER,
        f"### trainform review: {verdict(report)}",
        "",
        f"`{report.spec_dir}`: base `{report.base}` → head `{report.head}`",
        "",
    ]
    for section in review_sections(report):
        lines += _section(section, limit)
    return redact("\n".join(lines).rstrip("\n") + "\n")  # a PR comment: no credential


def render_review_markdown(report: ReviewReport, max_characters: int = MAX_CHARACTERS) -> str:
    short = one_line(report)
    if short is not None:
        return redact(f"{MARKER} {short}\n")
    text = ""
    for limit in ROW_LIMITS:
        text = _document(report, limit)
        if len(text) <= max_characters:
            return text
    note = "\n\n_Review cut to fit a comment; `--format json` has all of it._\n"
    return text[: max_characters - len(note)] + note
