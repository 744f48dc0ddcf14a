"""Rendering diagnostics as text (compiler style) or versioned JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

from trainform.cli.render.style import paint
from trainform.specs import Diagnostic, Severity

DIAGNOSTICS_FORMAT_VERSION = 1


def _counts(diagnostics: Sequence[Diagnostic]) -> tuple[int, int]:
    errors = sum(1 for d in diagnostics if d.severity is Severity.ERROR)
    return errors, len(diagnostics) - errors


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def render_diagnostic_text(diagnostic: Diagnostic, color: bool = False) -> str:
    tone = "red" if diagnostic.severity is Severity.ERROR else "yellow"
    head = paint(f"{diagnostic.severity.value}[{diagnostic.code}]", tone, color)
    lines = [f"{head}: {paint(diagnostic.summary, 'bold', color)}"]
    if diagnostic.location is not None:
        lines.append(f"  --> {diagnostic.location}")
    rows = [
        ("address", diagnostic.address),
        ("field", diagnostic.field),
        ("expected", diagnostic.expected),
        ("found", diagnostic.found),
    ]
    lines += [f"   {label + ':':<10}{value}" for label, value in rows if value]
    if diagnostic.related and not diagnostic.detail:
        lines += [f"   {'see:':<10}{related}" for related in diagnostic.related]
    if diagnostic.detail:
        lines += [f"   {line}" for line in diagnostic.detail.splitlines()]
    if diagnostic.suggestion:
        lines.append(paint(f"   help:     did you mean `{diagnostic.suggestion}`?", "cyan", color))
    return "\n".join(lines)


def render_diagnostics_text(
    diagnostics: Sequence[Diagnostic],
    files: int | None = None,
    color: bool = False,
    max_chars: int | None = None,
) -> str:
    """Every diagnostic, then the counts. With `max_chars`, whole diagnostics are left out
    from the end so that the text stays within it, and a line says how many."""
    errors, warnings = _counts(diagnostics)
    blocks = [render_diagnostic_text(d, color) for d in diagnostics]
    where = f" in {_plural(files, 'file')}" if files is not None else ""
    summary = paint(
        f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}{where}",
        "red" if errors else "yellow",
        color,
    )
    if max_chars is not None:
        blocks = _within(blocks, max_chars - len(summary) - 3, max_chars)
    blocks.append(summary)
    return "\n\n".join(blocks) + "\n"


def truncation_note(left_out: int, max_chars: int) -> str:
    """The line standing for the diagnostics left out to keep the output within size."""
    return (
        f"... {left_out:,} more diagnostic{'' if left_out == 1 else 's'} not shown: the output "
        f"is limited to {max_chars:,} characters (--max-chars)"
    )


def _within(blocks: list[str], room: int, max_chars: int) -> list[str]:
    """The first blocks that fit in `room` characters (joined by blank lines) with the
    note counting the others; `blocks` itself when all of them fit."""
    if sum(len(block) + 2 for block in blocks) <= room:
        return blocks
    room -= len(truncation_note(len(blocks), max_chars)) + 2
    kept: list[str] = []
    for block in blocks:
        room -= len(block) + 2
        if room < 0:
            break
        kept.append(block)
    return [*kept, truncation_note(len(blocks) - len(kept), max_chars)]


def render_diagnostics_json(
    diagnostics: Sequence[Diagnostic], extra: dict[str, object] | None = None
) -> str:
    errors, warnings = _counts(diagnostics)
    document = {
        "formatVersion": DIAGNOSTICS_FORMAT_VERSION,
        "valid": errors == 0,
        "errorCount": errors,
        "warningCount": warnings,
        **(extra or {}),
        "diagnostics": [d.as_dict() for d in diagnostics],
    }
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
