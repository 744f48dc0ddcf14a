"""Job status as text (for people) and JSON (for tools), redacted (`specs.secrets`): a
reason or log line may carry a provider's words."""

from __future__ import annotations

import json

from planner.render.style import paint
from planner.status import JobReport
from specs.secrets import redact

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
            lines.append(f"  step:        {report.current_step}")
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
        for old in report.history:
            lines.append(
                f"  history:     {old['runId']}: {old['phase']}, {old['attempts']} "
                f"attempt(s), checkpoints: {', '.join(old['checkpoints']) or 'none'}"
            )
        if report.log:
            lines.append(f"  log:         {report.log}")
        lines.append("")
    return redact("\n".join(lines))


def render_status_json(reports: list[JobReport]) -> str:
    document = {"formatVersion": 1, "jobs": [r.to_json() for r in reports]}
    return redact(json.dumps(document, indent=2, sort_keys=True) + "\n")
