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
    diagnostics: Sequence[Diagnostic], files: int | None = None, color: bool = False
) -> str:
    errors, warnings = _counts(diagnostics)
    blocks = [render_diagnostic_text(d, color) for d in diagnostics]
    where = f" in {_plural(files, 'file')}" if files is not None else ""
    summary = f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}{where}"
    blocks.append(paint(summary, "red" if errors else "yellow", color))
    return "\n\n".join(blocks) + "\n"


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
