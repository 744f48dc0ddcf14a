"""`trainform status` as a table a person scans: one row per job (job, phase, step of the
total, ETA from observed throughput, queue and place in it, time waited, attempts), the
reason of a job that waits or failed under its row; then the releases in state. The
describe view (`-v`) is cli.render.status_text; both read planner.status.JobReport."""

from __future__ import annotations

from typing import Any

from trainform.cli.render.status_text import position_text
from trainform.cli.render.style import paint
from trainform.planner.status import JobReport
from trainform.planner.timeline import human_duration
from trainform.specs.secrets import redact

HEADERS = ("JOB", "PHASE", "STEP", "ETA", "QUEUE", "WAITED", "ATTEMPTS")
_TONE = {"succeeded": "green", "failed": "red", "cancelled": "red", "running": "cyan"}
MAX_REASON = 160


def _step(report: JobReport) -> str:
    current = "-" if report.current_step is None else str(report.current_step)
    return current if report.total_steps is None else f"{current}/{report.total_steps}"


def _queue(report: JobReport) -> str:
    latest = report.attempts[-1] if report.attempts else {}
    queue = str(latest.get("queue") or "-")
    found = latest.get("queuePosition") if report.phase == "queued" else None
    if found:
        pending = f"/{found['pending']}" if found.get("pending") else ""
        queue += f" #{found['position'] + 1}{pending}"
    return queue


def _waited(report: JobReport) -> str:
    """The run's time waiting in queues, as the timeline model counts it (its delivery)."""
    waited = (report.delivery or {}).get("waitedSeconds") if report.attempts else None
    return human_duration(waited)


def _note(report: JobReport) -> str:
    """The line under a job that waits or failed: its place in the queue and the reason."""
    parts = []
    latest = report.attempts[-1] if report.attempts else {}
    if report.phase == "queued" and latest.get("queuePosition"):
        parts.append(position_text(latest["queuePosition"]))
    if report.reason and report.phase not in ("succeeded", "running"):
        reason = " ".join(report.reason.split())
        parts.append(reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1] + "…")
    return "; ".join(parts)


def status_row(report: JobReport) -> tuple[str, ...]:
    return (
        report.address,
        report.phase,
        _step(report),
        human_duration(report.eta_seconds),
        _queue(report),
        _waited(report),
        str(len(report.attempts)),
    )


def render_status_table(reports: list[JobReport], color: bool = False) -> str:
    if not reports:
        return "No training jobs.\n"
    rows = [status_row(report) for report in reports]
    widths = [max(len(row[i]) for row in [HEADERS, *rows]) for i in range(len(HEADERS))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)).rstrip()]
    for report, row in zip(reports, rows, strict=True):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        cells[1] = paint(cells[1], _TONE.get(report.phase, "yellow"), color)
        lines.append("  ".join(cells).rstrip())
        note = _note(report)
        if note:
            lines.append(f"  └ {note}")
    lines.append("")
    lines.append("Details of each job (attempts, checkpoints, evaluations): status -v ADDRESS.")
    return redact("\n".join(lines) + "\n")


def render_releases_table(releases: list[dict[str, Any]]) -> str:
    """The releases in state (planner/release_lineage.py `release_summaries`), one a line."""
    if not releases:
        return ""
    rows = [
        [
            r["address"],
            str(r["version"]),
            str(r["runId"]),
            str(r["digest"] or "")[:19],
            ", ".join(r["published"]) or "-",
        ]
        for r in releases
    ]
    headers = ["RELEASE", "VERSION", "RUN", "DIGEST", "PUBLISHED"]
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return redact("\n" + "\n".join(lines) + "\n")
