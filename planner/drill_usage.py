"""What drills cost: the accelerator- and CPU-hours of every run a drill made.

Called by planner/usage.py (`usage_report`), so `trainform usage` shows the drills' share
of the hours it counts. A drill's runs are ordinary runs of the job (and, for the congested
condition, its filler runs); the drill names them in its audit records (operation `drill`,
field `drill`: condition, address, run id and fillers; planner/drill_engine.py), and the
hours come from the same provider accounting and the same window arithmetic as every
other row (planner/usage.py `compute_usage`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from trainform.providers.jobs import AccountedRun


def drill_runs(records: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(address, run id) -> condition, for every run a drill's audit records name."""
    found: dict[tuple[str, str], str] = {}
    for record in records:
        note = record.get("drill")
        if record.get("operation") != "drill" or not isinstance(note, dict):
            continue
        condition = str(note.get("condition") or "")
        if note.get("address") and note.get("runId"):
            found[(str(note["address"]), str(note["runId"]))] = condition
        for filler in note.get("fillers") or []:
            if isinstance(filler, dict) and filler.get("address") and filler.get("runId"):
                found[(str(filler["address"]), str(filler["runId"]))] = f"{condition} (filler)"
    return found


def drill_charges(
    runs: list[AccountedRun],
    records: list[dict[str, Any]],
    window: tuple[datetime, datetime],
    compute_usage: Callable[..., Any],
) -> list[dict[str, Any]]:
    """One entry per drill run with hours inside the window (already counted in the rows);
    `compute_usage` is planner/usage.py's, so a drill run is measured as every run is."""
    named = drill_runs(records)
    charges = []
    for accounted in runs:
        condition = named.get((accounted.address, accounted.run.run_id))
        if condition is None:
            continue
        rows = compute_usage([accounted], window, "project").rows
        if not rows:
            continue
        charges.append(
            {
                "address": accounted.address,
                "runId": accounted.run.run_id,
                "condition": condition,
                "acceleratorHours": round(sum(r.gpu_hours for r in rows), 4),
                "cpuHours": round(sum(r.cpu_hours for r in rows), 4),
            }
        )
    return sorted(charges, key=lambda c: (c["address"], c["runId"]))
