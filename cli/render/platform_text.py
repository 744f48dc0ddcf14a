"""The platform view (`status --platform`) as text: pools, then queues with their jobs."""

from __future__ import annotations

from typing import Any

from trainform.cli.render.status_text import clock, position_text
from trainform.cli.render.words import plural
from trainform.planner.usage import PlatformView


def _amounts(values: dict[str, Any]) -> str:
    return f"gpu {values.get('gpu', 0):g}, cpu {values.get('cpu', 0):g}"


def render_platform_text(view: PlatformView) -> str:
    data = view.to_json()
    lines = ["Pools:"]
    if not data["pools"]:
        lines.append("  (none)")
    for pool in data["pools"]:
        lines.append(f"  {pool['pool']} ({pool['provider']}, {plural(pool['nodes'], 'node')})")
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
            f"{queue} {_amounts(amounts)}" for queue, amounts in cohort["borrowedBy"].items()
        )
        lines.append(
            f"    borrowed: {_amounts(cohort['borrowed'])}"
            + (f" (by {borrowers}; lent by the others)" if borrowers else "")
        )
        lines.append(f"    unused, lendable: {_amounts(cohort['unusedLendable'])}")
    for problem in data["problems"]:
        lines.append(f"warning: {problem}")
    return "\n".join(lines) + "\n"
