"""The evidence of one drill condition and the verdicts drawn from it.

Called by planner/drill.py once a condition's run is settled. From the run as its
provider reports it (planner/timeline.py), the condition's congestion or fault record
(planner/drill_conditions.py) and the baseline's evidence, `condition_evidence` builds the
JSON a report holds per condition: the run's identity (its reproducibility inputs, the
`--replace` counter left out, so the same digest means the same job, data and resources),
timeline, breakdown (planner/drill_breakdown.py), why it waited, the fault and the
checkpoint recovery chose, metrics against the baseline's, the accelerator-hours it cost
(planner/usage.py `compute_usage`), and one verdict per item:

- `verified`: the evidence shows it;
- `needs more testing`: the drill could not show it (with what is missing);
- `not applicable`: the item does not concern this condition.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from trainform.planner.drill_breakdown import run_breakdown_of
from trainform.planner.state import canonical_json
from trainform.planner.timeline import attempt_timelines, delivery, human_duration, run_from_json
from trainform.planner.usage import compute_usage
from trainform.providers.jobs import AccountedRun

VERIFIED, MORE, NOT_APPLICABLE = "verified", "needs more testing", "not applicable"


def identity_digest(inputs: dict[str, Any]) -> str:
    """A digest of the run's inputs without the --replace counter (`rerun`)."""
    kept = {k: v for k, v in inputs.items() if k != "rerun"}
    return "sha256:" + hashlib.sha256(canonical_json(kept).encode()).hexdigest()[:16]


def _verdict(item: str, verdict: str, evidence: str) -> dict[str, str]:
    return {"item": item, "verdict": verdict, "evidence": evidence}


def _waits(timelines: list[Any]) -> list[dict[str, Any]]:
    found = []
    for timeline in timelines:
        for wait in timeline.status.waits:
            found.append(
                {
                    "attempt": timeline.status.attempt,
                    "reason": wait.reason,
                    "since": wait.since,
                    "until": wait.until or None,
                }
            )
    return found


def _usage(address: str, project: str | None, queue: str, run: Any, now: datetime) -> dict:
    window = (datetime(1970, 1, 1, tzinfo=UTC), now)
    rows = compute_usage([AccountedRun(address, project, queue, run)], window, "project").rows
    return {
        "acceleratorHours": round(sum(r.gpu_hours for r in rows), 6),
        "cpuHours": round(sum(r.cpu_hours for r in rows), 6),
        "waitHours": round(sum(r.wait_hours for r in rows), 6),
        "lostAcceleratorHours": round(sum(r.lost_gpu_hours for r in rows), 6),
    }


def _metrics(run: dict[str, Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    for evaluation in run.get("evaluations", []):
        if evaluation.get("phase") == "succeeded":
            found.update({k: float(v) for k, v in (evaluation.get("metrics") or {}).items()})
    return found


def metrics_match(
    metrics: dict[str, float], baseline: dict[str, float], tolerance: float
) -> tuple[bool | None, str]:
    """Every baseline metric within `tolerance` (relative, at least absolute) of it."""
    if not baseline or not metrics:
        return None, "no evaluation metric to compare"
    differing = []
    for name, expected in sorted(baseline.items()):
        value = metrics.get(name)
        if value is None or abs(value - expected) > tolerance * max(1.0, abs(expected)):
            differing.append(f"{name} {value} vs baseline {expected:g}")
    if differing:
        return False, "; ".join(differing) + f" (tolerance {tolerance:g})"
    shown = ", ".join(f"{k}={metrics[k]:g}" for k in sorted(baseline))
    return True, f"{shown}, equal to the baseline's within {tolerance:g}"


def condition_evidence(
    name: str,
    raw_run: dict[str, Any],
    context: dict[str, Any],
    baseline: dict[str, Any] | None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The JSON of one settled condition (see the module docstring). `context` carries
    address, project, queue, inputs, tolerance, and the condition's congestion or fault."""
    now = now or datetime.now(UTC)
    known = {c["id"] for c in raw_run.get("checkpoints", [])}
    seen = [c for c in context.get("seen", []) if c["id"] not in known]
    run = run_from_json({**raw_run, "checkpoints": [*raw_run.get("checkpoints", []), *seen]})
    timelines = attempt_timelines(run, now)
    latest = run.latest
    evidence: dict[str, Any] = {
        "name": name,
        "runId": run.run_id,
        "identity": identity_digest(context["inputs"]),
        "outcome": str(latest.phase) if latest else "not submitted",
        "timeline": [t.to_json() for t in timelines],
        "delivery": delivery(timelines).to_json(),
        "breakdown": run_breakdown_of(timelines, now),
        "waits": _waits(timelines),
        "checkpoints": [
            {
                "id": c.id,
                "step": c.step,
                "valid": c.valid,
                "writtenAt": c.written_at or None,
                "retained": c.id in known,
            }
            for c in run.checkpoints
        ],
        "metrics": _metrics(raw_run),
        "usage": _usage(context["address"], context["project"], context["queue"], run, now),
    }
    for key in ("congestion", "fault", "timeLimitSeconds", "elapsedSeconds", "stopCondition"):
        if key in context:
            evidence[key] = context[key]
    if name == "failure":
        evidence["recovery"] = recovery(timelines, run, context.get("fault") or {})
    evidence["verdicts"] = verdicts(evidence, baseline, context["tolerance"])
    return evidence


def recovery(timelines: list[Any], run: Any, fault: dict[str, Any]) -> dict[str, Any] | None:
    """The attempt after the fault: the checkpoint it resumed from, why, what it lost."""
    resumed = next((t for t in timelines[1:] if t.status.started_at), None)
    if resumed is None:
        return None
    status = resumed.status
    valid = [c for c in run.checkpoints if c.valid and c.written_at]
    before = [c for c in valid if c.written_at <= (status.submitted_at or status.started_at)]
    newest = max(before, key=lambda c: c.step) if before else None
    chosen = status.resumed_from.rstrip("/").rsplit("/", 1)[-1] if status.resumed_from else ""
    if not chosen:
        why = "started over: no valid checkpoint, or resume.policy never"
    elif newest is not None and newest.id == chosen:
        why = f"the latest valid checkpoint when attempt {status.attempt} was submitted"
    else:
        why = "not the latest valid checkpoint" + (f" ({newest.id})" if newest else "")
    return {
        "attempt": status.attempt,
        "checkpoint": chosen or None,
        "step": status.resumed_step,
        "latestValid": newest.id if newest else None,
        "why": why,
        "lostSteps": resumed.lost_steps,
        "lostSeconds": None if resumed.lost_seconds is None else round(resumed.lost_seconds, 3),
        "faultAttempt": fault.get("attempt"),
    }


def verdicts(
    evidence: dict[str, Any], baseline: dict[str, Any] | None, tolerance: float
) -> list[dict[str, str]]:
    name = evidence["name"]
    found = [_completed(evidence)]
    if baseline is None or name == "baseline":
        found.append(_verdict("same job identity", NOT_APPLICABLE, "the baseline is the reference"))
        found.append(_verdict("result matches the baseline", NOT_APPLICABLE, "it is the baseline"))
    else:
        same = evidence["identity"] == baseline["identity"]
        found.append(
            _verdict(
                "same job identity",
                VERIFIED if same else MORE,
                f"inputs digest {evidence['identity']}"
                + (" as the baseline's" if same else f", baseline {baseline['identity']}"),
            )
        )
        matched, words = metrics_match(evidence["metrics"], baseline["metrics"], tolerance)
        found.append(_verdict("result matches the baseline", VERIFIED if matched else MORE, words))
    found.append(
        _waited(evidence)
        if name == "congested"
        else _verdict("waits with its reason", NOT_APPLICABLE, "no congestion was made")
    )
    found.append(_recovered(evidence) if name == "failure" else
                 _verdict("recovers from the latest valid checkpoint", NOT_APPLICABLE,
                          "no fault was injected"))  # fmt: skip
    found.append(_breakdown_verdict(evidence["breakdown"]))
    return found


def _completed(evidence: dict[str, Any]) -> dict[str, str]:
    outcome = evidence["outcome"]
    if outcome == "succeeded":
        return _verdict("run completes", VERIFIED, f"run {evidence['runId']} succeeded")
    return _verdict("run completes", MORE, f"run {evidence['runId']} ended {outcome}")


def _waited(evidence: dict[str, Any]) -> dict[str, str]:
    item = "waits with its reason"
    waited = evidence["delivery"].get("waitedSeconds") or 0.0
    reasons = [w["reason"] for w in evidence["waits"] if w["reason"]]
    if reasons and waited > 0:
        return _verdict(item, VERIFIED, f"waited {human_duration(waited)}: {reasons[0]}")
    return _verdict(item, MORE, "the run did not wait with a reason the scheduler gave")


def _recovered(evidence: dict[str, Any]) -> dict[str, str]:
    item = "recovers from the latest valid checkpoint"
    fault = evidence.get("fault") or {}
    if not fault.get("injected"):
        return _verdict(
            item, MORE, f"the run ended before checkpoint {fault.get('afterCheckpoint')}: no fault"
        )
    found = evidence.get("recovery")
    if not found:
        return _verdict(item, MORE, "no attempt started after the fault")
    if found["checkpoint"] and found["checkpoint"] == found["latestValid"]:
        return _verdict(
            item,
            VERIFIED,
            f"attempt {found['attempt']} resumed from {found['checkpoint']} (step "
            f"{found['step']}), {found['why']}; lost {found['lostSteps']} steps",
        )
    return _verdict(item, MORE, f"resumed from {found['checkpoint'] or 'nothing'}: {found['why']}")


def _breakdown_verdict(breakdown: dict[str, Any]) -> dict[str, str]:
    missing = [k for k, v in breakdown["run"].items() if v["seconds"] is None]
    if not missing:
        return _verdict("time breakdown", VERIFIED, "every item recorded")
    return _verdict(
        "time breakdown", MORE, f"{', '.join(missing)} not recorded (the job emits no run events)"
    )
