"""The platform view (`status --platform`) as text: GPUs per accelerator type, pools, then
queues with their jobs, then cohorts. Every amount names GPUs per type and memory."""

from __future__ import annotations

from typing import Any

from trainform.cli.render.status_text import clock, human_size, position_text
from trainform.cli.render.words import plural
from trainform.planner.normalize import humanize
from trainform.planner.platform_view import PlatformView


def memory_text(size: float) -> str:
    """Bytes as a person writes a quantity: 21600Gi exactly, else 1.5Ti rounded."""
    if not size:
        return "0"
    exact = humanize(str(int(size))) if size == int(size) else ""
    if exact and not exact.isdigit() and not exact.endswith(("Ki", "Mi")):
        return exact
    return human_size(size).replace(" ", "").replace("iB", "i")


def _gpus(values: dict[str, Any]) -> str:
    """`gpu 72 (nvidia-a100-80gb 64, nvidia-h100-80gb 8)`: the total, then per type."""
    total = f"gpu {values.get('gpu', 0):g}"
    by_type = values.get("gpuByType") or {}
    if not by_type or list(by_type.values()) == [0]:
        return total + (f" ({next(iter(by_type))})" if by_type else "")
    return total + " (" + ", ".join(f"{t} {n:g}" for t, n in by_type.items()) + ")"


def _amounts(values: dict[str, Any]) -> str:
    return (
        f"{_gpus(values)}, cpu {values.get('cpu', 0):g}, "
        f"memory {memory_text(values.get('memory', 0))}"
    )


def _borrowed(values: dict[str, Any]) -> str:
    """Only what a queue borrows: `gpu 8 (nvidia-h100-80gb 8), memory 64Gi`."""
    parts = [_gpus(values)] if values.get("gpu") else []
    parts += [f"cpu {values['cpu']:g}"] if values.get("cpu") else []
    parts += [f"memory {memory_text(values['memory'])}"] if values.get("memory") else []
    return ", ".join(parts)


def _accelerator_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The GPUs per accelerator type, aligned: type, pools, capacity, nominal, in use."""
    if not rows:
        return []
    table = [("type", "pools", "capacity", "nominal", "in use")] + [
        (
            r["type"],
            "+".join(r["pools"]) or "-",
            f"{r['capacity']:g}",
            f"{r['nominal']:g}",
            f"{r['inUse']:g}",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    lines = ["Accelerators:"]
    for row in table:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [cell.rjust(width) for cell, width in zip(row[2:], widths[2:], strict=True)]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def render_platform_text(view: PlatformView) -> str:
    data = view.to_json()
    lines = _accelerator_lines(data["accelerators"])
    lines.append("Pools:")
    if not data["pools"]:
        lines.append("  (none)")
    for pool in data["pools"]:
        each = f", {pool['accelerator']} each" if pool.get("accelerator") else ""
        lines.append(
            f"  {pool['pool']} ({pool['provider']}, {plural(pool['nodes'], 'node')}{each})"
        )
        lines.append(f"    capacity: {_amounts(pool['capacity'])}")
        lines.append(f"    nominal:  {_amounts(pool['nominal'])}")
        lines.append(f"    in use:   {_amounts(pool['inUse'])}")
    lines.append("Queues:")
    if not data["queues"]:
        lines.append("  (none)")
    for queue in data["queues"]:
        cohort = f", cohort {queue['cohort']}" if queue.get("cohort") else ""
        pools = "+".join(queue["pools"]) or "-"
        lines.append(f"  {queue['queue']} ({queue['provider']}, pools {pools}{cohort})")
        lines.append(f"    nominal:  {_amounts(queue['nominal'])}")
        lines.append(f"    in use:   {_amounts(queue['inUse'])}")
        lines.append(f"    borrowed: {_amounts(queue['borrowed'])}")
        lines.append(f"    running:  {len(queue['running'])}, waiting: {len(queue['waiting'])}")
        for job in queue["running"]:
            lines.append(
                f"      running {job['address']} attempt {job['attempt']} "
                f"(gpu {job['gpus']}, cpu {job['cpus']:g}) since {clock(job.get('startedAt'))}"
            )
        for job in queue["waiting"]:
            lines.append(
                f"      waiting {job['address']} attempt {job['attempt']} since "
                f"{clock(job.get('submittedAt'))}: {job.get('reason') or 'no reason reported'}"
            )
            if job.get("queuePosition"):
                lines.append("        " + position_text(job["queuePosition"]))
    if data["cohorts"]:
        lines.append("Cohorts:")
    for cohort in data["cohorts"]:
        lines.append(f"  {cohort['cohort']} (queues {', '.join(cohort['queues'])})")
        lines.append(f"    nominal:  {_amounts(cohort['nominal'])}")
        lines.append(f"    in use:   {_amounts(cohort['inUse'])}")
        borrowers = "; ".join(
            f"{queue} {_borrowed(amounts)}" for queue, amounts in cohort["borrowedBy"].items()
        )
        lines.append(
            f"    borrowed: {_amounts(cohort['borrowed'])}"
            + (f" (by {borrowers}; lent by the others)" if borrowers else "")
        )
        lines.append(f"    unused, lendable: {_amounts(cohort['unusedLendable'])}")
    for problem in data["problems"]:
        lines.append(f"warning: {problem}")
    return "\n".join(lines) + "\n"
