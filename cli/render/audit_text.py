"""`trainform state audit` as an aligned table: one row per record (time, command, phase
or outcome, who, environment, changes, details), oldest first. Reads the records
planner.audit writes; the JSON is the records themselves (docs/state-backends.md)."""

from __future__ import annotations

from typing import Any

HEADERS = ("TIME", "COMMAND", "PHASE", "WHO", "ENV", "CHANGES", "DETAILS")


def _who(record: dict[str, Any]) -> str:
    person = record.get("who") or {}
    ci = person.get("ci") or {}
    run = ci.get("githubRunId") or ci.get("gitlabPipelineId")
    by = f"{person.get('user', '?')}@{person.get('host', '?')}"
    return by + (f" (CI run {run})" if run else "")


def _phase(record: dict[str, Any], completed: set[Any]) -> str:
    phase = record.get("phase")
    if phase == "started":
        return "started" if record.get("sequence") in completed else "started, never completed"
    if phase == "completed":
        return str(record.get("outcome", "completed"))
    return str(phase or "-")


def _details(record: dict[str, Any]) -> str:
    extra = []
    if record.get("specCommit"):
        extra.append(f"commit {record['specCommit'][:12]}")
    if record.get("planDigest"):
        extra.append(f"plan {record['planDigest'][:19]}")
    if record.get("lock"):
        extra.append(f"lock {record['lock'].get('id')}")
    return "; ".join(extra) or "-"


def audit_row(record: dict[str, Any], completed: set[Any]) -> tuple[str, ...]:
    summary = record.get("summary") or {}
    counts = ", ".join(f"{v} {k}" for k, v in sorted(summary.items()) if v)
    return (
        str(record.get("time", "-")),
        str(record.get("operation", "-")),
        _phase(record, completed),
        _who(record),
        str(record.get("environment") or "-"),
        counts or "-",
        _details(record),
    )


def render_audit_table(records: list[dict[str, Any]]) -> str:
    if not records:
        return "No audit records.\n"
    completed = {r.get("started") for r in records if r.get("phase") == "completed"}
    rows = [audit_row(record, completed) for record in records]
    widths = [max(len(row[i]) for row in [HEADERS, *rows]) for i in range(len(HEADERS))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [HEADERS, *rows]
    ]
    return "\n".join(lines) + "\n"
