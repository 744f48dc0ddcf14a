"""Job status as text (for people) and JSON (for tools), redacted (`specs.secrets`): a
reason or log line may carry a provider's words."""

from __future__ import annotations

import json
from typing import Any

from trainform.cli.render.style import paint
from trainform.cli.render.words import plural
from trainform.planner.status import JobReport
from trainform.planner.timeline import human_duration
from trainform.specs.secrets import redact

_TONE = {
    "succeeded": "green",
    "failed": "red",
    "cancelled": "red",
    "running": "cyan",
    "queued": "yellow",
}


def render_status_text(reports: list[JobReport], color: bool = False) -> str:
    if not reports:
        return "No training jobs.\n"
    lines = []
    for report in reports:
        phase = paint(report.phase, _TONE.get(report.phase, "bold"), color)
        lines.append(paint(report.address, "bold", color))
        attempt = f", attempt {report.attempt}" if report.attempt else ""
        lines.append(f"  run:         {report.run_id}{attempt}")
        lines.append(f"  phase:       {phase}" + (f": {report.reason}" if report.reason else ""))
        if report.current_step is not None:
            total = f" of {report.total_steps}" if report.total_steps is not None else ""
            lines.append(f"  step:        {report.current_step}{total}")
        if report.latest_checkpoint:
            checkpoint = report.latest_checkpoint
            lines.append(f"  checkpoint:  {checkpoint['id']} (step {checkpoint['step']}, valid)")
        for bad in report.invalid_checkpoints:
            lines.append(paint(f"  invalid:     {bad['id']}: {bad['problem']}", "red", color))
        for evaluation in report.evaluations:
            metrics = ", ".join(f"{k}={v:g}" for k, v in sorted(evaluation["metrics"].items()))
            lines.append(
                f"  evaluation:  {evaluation['suite']}: {evaluation['phase']}"
                + (f" ({metrics})" if metrics else "")
                + (f": {evaluation['reason']}" if evaluation["reason"] else "")
            )
            for gate in evaluation["gates"]:
                tone = {"pass": "green", "fail": "red"}.get(gate["status"], "yellow")
                lines.append("    gate:      " + paint(gate["text"], tone, color))
        if report.attempts:
            lines.append("  attempts:")
            for entry in report.attempts:
                lines += attempt_lines(entry, color)
        if report.delivery and report.attempts:
            lines.append("  delivery:    " + delivery_text(report.delivery))
            if (report.delivery.get("breakdown") or {}).get("ranSeconds"):
                lines.append("  time spent:  " + breakdown_text(report.delivery["breakdown"]))
        if report.last_lines:
            lines.append(f"  last lines of attempt {report.attempt}:")
            lines += [f"    | {line}" for line in report.last_lines]
        for old in report.history:
            lines.append(
                f"  history:     {old['runId']}: {old['phase']}, "
                f"{plural(old['attempts'], 'attempt')}, "
                f"checkpoints: {', '.join(old['checkpoints']) or 'none'}"
            )
            if old.get("delivery") and old.get("timeline"):
                lines.append("               " + delivery_text(old["delivery"]))
        if report.log:
            lines.append(f"  log:         {report.log}")
        lines.append("")
    return redact("\n".join(lines))


def clock(text: str | None) -> str:
    """`2026-12-01 10:00:04` from an ISO-8601 UTC time (to the second), "-" for none."""
    if not text:
        return "-"
    return text.replace("T", " ")[:19]


def position_text(found: dict[str, Any]) -> str:
    """`queue position 3 of 5 (2 ahead, from Kueue's visibility API)`: counted from 1 for
    people (the JSON keeps the scheduler's count from 0)."""
    ahead = found["position"]
    text = f"queue position {ahead + 1}"
    if found.get("pending"):
        text += f" of {found['pending']}"
    source = f", from {found['source']}" if found.get("source") else ""
    return text + f" ({plural(ahead, 'workload')} ahead{source})"


def attempt_lines(entry: dict[str, Any], color: bool) -> list[str]:
    """One attempt of a timeline: how it ended, then when it waited, ran and stopped."""
    phase = entry["phase"]
    head = paint(phase, _TONE.get(phase, "bold"), color)
    if entry.get("cause") and entry["cause"] != phase:
        head += f" ({entry['cause']}"
        head += f": {entry['reason']})" if entry.get("reason") else ")"
    elif entry.get("reason"):
        head += f": {entry['reason']}"
    lines = [f"    #{entry['attempt']:<3} {head}"]
    if entry.get("resumedFrom"):
        lost = []
        if entry.get("lostSteps") is not None:
            lost.append(plural(entry["lostSteps"], "step"))
        if entry.get("lostSeconds") is not None:
            lost.append(human_duration(entry["lostSeconds"]))
        lines.append(
            f"         resumed from {entry['resumedFrom']}"
            + (f" (step {entry['resumedStep']})" if entry.get("resumedStep") is not None else "")
            + (f", lost {' and '.join(lost)} of the attempt before" if lost else "")
        )
    elif entry["attempt"] > 1 and entry.get("lostSteps") is not None:
        lines.append(
            f"         started over: lost {plural(entry['lostSteps'], 'step')}, "
            f"{human_duration(entry.get('lostSeconds'))}"
        )
    line = f"         submitted {clock(entry.get('submittedAt'))}"
    if entry.get("backoffSeconds"):
        line += f", retry backoff {human_duration(entry['backoffSeconds'])}"
    if entry.get("waitedSeconds") is not None:
        line += f", waited {human_duration(entry['waitedSeconds'])}"
    if entry.get("heldSeconds"):
        line += f", held {human_duration(entry['heldSeconds'])} between runs (requeued)"
    lines.append(line)
    for wait in entry.get("waits", []):
        lines.append(f"           waiting since {clock(wait['since'])}: {wait['reason']}")
    if entry.get("queuePosition"):
        lines.append("           " + position_text(entry["queuePosition"]))
    if entry.get("startedAt"):
        ran = f"         ran {clock(entry['startedAt'])} -> {clock(entry.get('endedAt'))}"
        ran += f" ({human_duration(entry.get('ranSeconds'))})"
        if entry.get("hosts") and (entry.get("nodes") or 1) > 1:
            ran += f" on {plural(entry['nodes'], 'node')}"
        elif entry.get("hosts"):
            ran += " on " + ", ".join(entry["hosts"])
        if entry.get("lastStep") is not None:
            ran += f", reached step {entry['lastStep']}"
        if entry.get("requeues"):
            ran += f", in {len(entry['requeues']) + 1} runs"
        lines.append(ran)
        if entry.get("breakdown"):
            lines.append("         time: " + breakdown_text(entry["breakdown"]))
    lines += [requeue_line(requeue) for requeue in entry.get("requeues") or []]
    if (entry.get("worldSize") or 1) > 1:
        lines.append("         group: " + group_text(entry))
    for launcher in entry.get("launchers") or []:
        ended = "running"
        if launcher.get("endedAt"):
            ended = f"ended {clock(launcher['endedAt'])}, exit code {launcher.get('exitCode')}"
        lines.append(
            f"           node {launcher['node']} on {launcher.get('host') or '-'}: {ended}, "
            f"log {launcher.get('log') or '-'}"
        )
    for checkpoint in entry.get("checkpoints", []):
        lines.append(
            f"           checkpoint {checkpoint['id']} at {clock(checkpoint.get('writtenAt'))}"
            f" ({human_size(checkpoint.get('size') or 0)})"
        )
    if entry.get("exitCode") is not None and entry["phase"] != "succeeded":
        lines.append(f"         exit code {entry['exitCode']}")
    return lines


def requeue_line(requeue: dict[str, Any]) -> str:
    """`preempted 10:01:09 after running 1m05s (step 5), held 2m01s; lost 1 step and 12s`."""
    line = (
        f"           {requeue['stoppedBy']} {clock(requeue.get('endedAt'))} after running "
        f"{human_duration(requeue.get('ranSeconds'))}"
    )
    if requeue.get("lastStep") is not None:
        line += f" (step {requeue['lastStep']})"
    held = requeue.get("heldSeconds")
    line += f", held {human_duration(held)} before it ran again" if held is not None else ""
    lost = []
    if requeue.get("lostSteps") is not None:
        lost.append(plural(requeue["lostSteps"], "step"))
    if requeue.get("lostSeconds") is not None:
        lost.append(human_duration(requeue["lostSeconds"]))
    return line + (f"; lost {' and '.join(lost)}" if lost else "")


def group_text(entry: dict[str, Any]) -> str:
    """`2 nodes x 2 processes, world size 4 (node 0 on a, node 1 on b)`."""
    processes = plural(entry["procsPerNode"], "process", "processes")
    text = f"{plural(entry['nodes'], 'node')} x {processes}, world size {entry['worldSize']}"
    hosts = entry.get("hosts") or []
    if hosts:
        text += " (" + ", ".join(f"node {n} on {host}" for n, host in enumerate(hosts)) + ")"
    return text


def delivery_text(cycle: dict[str, Any]) -> str:
    return (
        f"{plural(cycle['attempts'], 'attempt')}: waited {human_duration(cycle['waitedSeconds'])}"
        + (
            f" (+ retry backoff {human_duration(cycle['backoffSeconds'])})"
            if cycle.get("backoffSeconds")
            else ""
        )
        + (
            f" (+ held {human_duration(cycle['heldSeconds'])} by requeues)"
            if cycle.get("heldSeconds")
            else ""
        )
        + ", "
        f"ran {human_duration(cycle['ranSeconds'])} "
        f"(effective {human_duration(cycle['effectiveSeconds'])}, "
        f"re-running lost steps {human_duration(cycle['rerunSeconds'])}, "
        f"{plural(cycle['lostSteps'], 'step')} lost)"
    )


_PARTS = (
    ("setup", "setup"),
    ("dataWait", "data wait"),
    ("compute", "compute"),
    ("checkpoint", "checkpoint"),
    ("recovery", "recovery recompute"),
    ("evaluation", "evaluation"),
    ("other", "other"),
    ("unaccounted", "unaccounted"),
)
_SOURCES = {
    "events": "from the job's run events",
    "provider": "the job reported no run events",
    "mixed": "some attempts reported no run events",
}


def breakdown_text(breakdown: dict[str, Any]) -> str:
    """`setup 5.0s (14%), data wait 10s (27%), ... (from the job's run events)`: the parts of
    the time running that are known and not zero (planner/run_breakdown.py)."""
    parts = []
    for key, name in _PARTS:
        seconds, share = breakdown.get(f"{key}Seconds"), breakdown["shares"].get(key)
        if not seconds:
            continue
        part = f"{name} {human_duration(seconds)}"
        part += f" ({share:.0%})" if share is not None else ""
        if key == "checkpoint":
            part += f" for {plural(breakdown['checkpoints'], 'write')}"
            part += f" of {human_size(breakdown['checkpointBytes'])}"
        parts.append(part)
    if not breakdown.get("checkpointSeconds") and breakdown.get("checkpoints"):
        parts.append(
            f"{plural(breakdown['checkpoints'], 'checkpoint')} "
            f"of {human_size(breakdown['checkpointBytes'])} written"
        )
    notes = [_SOURCES.get(breakdown.get("source", ""), breakdown.get("source", ""))]
    events = breakdown.get("events") or {}
    if events.get("ranks", 0) > 1:
        notes.append(f"mean of {events['ranks']} ranks")
    if events.get("ignoredLines"):
        notes.append(f"{plural(events['ignoredLines'], 'unreadable event line')} skipped")
    if events.get("truncated"):
        notes.append("events file cut at its size limit")
    if events.get("openPhases"):
        notes.append("ended inside " + ", ".join(events["openPhases"]))
    return ", ".join(parts or ["nothing known"]) + f" ({'; '.join(notes)})"


def human_size(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"


def render_status_json(
    reports: list[JobReport], releases: list[dict[str, Any]] | None = None
) -> str:
    """`{"formatVersion": 1, "jobs": [...]}` with one job per line: a status of thousands
    of jobs is encoded by json's C encoder (indenting falls back to the pure-Python one,
    several times slower), and a person can still page through it job by job."""
    jobs = [json.dumps(r.to_json(), sort_keys=True) for r in reports]
    body = ",\n    ".join(jobs)
    shown = f',\n  "releases": {json.dumps(releases, sort_keys=True)}' if releases else ""
    text = (
        '{\n  "formatVersion": 1,\n  "jobs": ['
        + (f"\n    {body}\n  " if jobs else "")
        + "]"
        + shown
        + "\n}\n"
    )
    return redact(text)
