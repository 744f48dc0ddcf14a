"""The drill's evidence report as Markdown and as one self-contained HTML file, both
rendered through jinja2 templates (cli/render/templates/drill.*.j2) from the view built
here out of the report's JSON (planner/drill.py), so the two never disagree.

The HTML has no external assets (inline style, no scripts, nothing fetched) and is
autoescaped; Markdown cells escape `|`, `<` and line breaks. Both are redacted.
"""

from __future__ import annotations

import re
from typing import Any

from trainform.cli.render.drift_report import template_environment
from trainform.planner.drill_breakdown import ITEMS
from trainform.planner.timeline import human_duration
from trainform.specs.secrets import redact

ITEM_TITLES = {
    "wait": "wait",
    "setup": "set-up",
    "dataWait": "data wait",
    "compute": "compute",
    "checkpoint": "checkpoint",
    "recoveryRecompute": "recovery recompute",
    "evaluation": "evaluation",
    "unaccounted": "unaccounted",
}
VERDICT_TONES = {"verified": "green", "needs more testing": "yellow", "not applicable": "dim"}


def _seconds(value: float | None) -> str:
    return "not recorded" if value is None else human_duration(value)


def _cost(usage: dict[str, float] | None) -> str:
    if not usage:
        return "not measured"
    return f"{usage['acceleratorHours']:.4f} accelerator-h, {usage['cpuHours']:.4f} CPU-h"


def _share(item: dict[str, Any]) -> str:
    """`1.4s (62%)`: the item's time and its share of the time running, where known."""
    text = _seconds(item["seconds"])
    share = item.get("share")
    return text if share is None or item["seconds"] is None else f"{text} ({share:.0%})"


def _condition_view(condition: dict[str, Any]) -> dict[str, Any]:
    run = condition["breakdown"]["run"]
    attempts = []
    for entry in condition["timeline"]:
        attempts.append(
            {
                "attempt": entry["attempt"],
                "phase": entry["phase"],
                "cause": entry["cause"] or "-",
                "waited": _seconds(entry["waitedSeconds"]),
                "ran": _seconds(entry["ranSeconds"]),
                "resumed": entry["resumedFrom"] or "-",
                "lost": "-" if entry["lostSteps"] is None else str(entry["lostSteps"]),
                "checkpoints": ", ".join(c["id"] for c in entry["checkpoints"]) or "-",
            }
        )
    delivery = condition["delivery"]
    usage = condition["usage"]
    return {
        "name": condition["name"],
        "run_id": condition["runId"],
        "outcome": condition["outcome"],
        "error": condition.get("error", ""),
        "identity": condition["identity"],
        "elapsed": _seconds(condition.get("elapsedSeconds")),
        "time_limit": _seconds(condition.get("timeLimitSeconds")),
        "stop": condition.get("stopCondition", ""),
        "attempts": attempts,
        "breakdown": [
            {
                "item": ITEM_TITLES[key],
                "value": _share(run[key]),
                "source": run[key]["source"],
            }
            for key in ITEMS
        ],  # fmt: skip
        "waited": _seconds(delivery["waitedSeconds"]),
        "waits": [
            {
                "attempt": w["attempt"],
                "reason": w["reason"],
                "since": w["since"],
                "until": w["until"] or "-",
            }
            for w in condition["waits"]
        ],  # fmt: skip
        "fault": condition.get("fault"),
        "congestion": condition.get("congestion"),
        "filler_cost": _cost((condition.get("congestion") or {}).get("usage")),
        "recovery": condition.get("recovery"),
        "lost_steps": delivery["lostSteps"],
        "lost_seconds": _seconds(delivery["rerunSeconds"]),
        "metrics": ", ".join(f"{k}={v:g}" for k, v in sorted(condition["metrics"].items()))
        or "none",
        "usage": _cost(usage),
        "verdicts": [
            v | {"tone": VERDICT_TONES.get(v["verdict"], "dim")} for v in condition["verdicts"]
        ],
    }


def build_view(report: dict[str, Any]) -> dict[str, Any]:
    usage = report["usage"]
    return {
        "job": report["job"],
        "environment": report["environment"] or "(default)",
        "provider": f"{report['provider']['name']} ({report['provider']['type']})",
        "framework": report["framework"],
        "identity": report["identity"],
        "started": report["startedAt"],
        "ended": report["endedAt"],
        "tolerance": f"{report['tolerance']:g}",
        "conditions": [_condition_view(c) for c in report["conditions"]],
        "temporary": report["temporaryObjects"],
        "cleanup": report["cleanup"],
        "usage": f"{usage['acceleratorHours']:.4f} accelerator-hours, "
        f"{usage['cpuHours']:.4f} CPU-hours",
        "untested": report["untested"],
    }


def render_drill_markdown(report: dict[str, Any]) -> str:
    template = template_environment(False).get_template("drill.md.j2")
    text = template.render(view=build_view(report))
    return redact(re.sub(r"\n{3,}", "\n\n", text).strip() + "\n")


def render_drill_html(report: dict[str, Any]) -> str:
    template = template_environment(True).get_template("drill.html.j2")
    return redact(template.render(view=build_view(report)))
