"""The review as plain text for a terminal: summary, then every section as a table."""

from __future__ import annotations

from trainform.policies.review.cells import Section
from trainform.policies.review.report import ReviewReport
from trainform.policies.review.sections import review_sections
from trainform.policies.review.summary import verdict


def _table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [
        max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)
    ]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            cell.ljust(width) for cell, width in zip(cells, widths, strict=True)
        ).rstrip()

    return [line(headers), line(tuple("-" * width for width in widths)), *map(line, rows)]


def _section(section: Section) -> list[str]:
    lines = [section.title, ""]
    if section.headers:
        lines += _table(section.headers, section.rows) if section.rows else ["  none"]
    for head, details in section.items:
        lines.append(f"  {head.replace('`', '')}")
        lines += [f"      {detail.replace('`', '')}" for detail in details]
    if section.note:
        lines += ["", f"  ({section.note})"]
    return [*lines, ""]


def render_review_text(report: ReviewReport) -> str:
    lines = [
        f"trainform review: {verdict(report)}",
        f"{report.spec_dir}: base {report.base} -> head {report.head}",
        "",
    ]
    for section in review_sections(report):
        lines += _section(section)
    return "\n".join(lines).rstrip("\n") + "\n"
