"""Evaluation gates: whether a model's metrics pass an EvalSuite's thresholds.

A gate's threshold is absolute, or a margin over a reference: a baseline job's evaluated
metric, or (`compareTo.release`) the metric recorded when the named ModelRelease was
released. The released reference is only known where a release is planned
(planner/releases.py passes `released`); elsewhere such a gate is not judged and says so.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


@dataclass(frozen=True)
class ReleasedMetric:
    """A released model's recorded metric for a `compareTo.release` gate."""

    value: float | None
    """None: nothing to compare with (see `comparable`)."""
    label: str
    """How the plan names the reference, e.g. `released ModelRelease/p/m`."""
    comparable: bool = True
    """False: a release exists but its metric is not on the same task set (fails)."""
    detail: str = ""


ReleasedLookup = Callable[[str, str], ReleasedMetric]
"""(release name, metric) -> the released reference."""


@dataclass(frozen=True)
class GateResult:
    metric: str
    op: str
    threshold: float
    status: str  # pass, fail, pending
    value: float | None = None
    baseline: float | None = None
    detail: str = ""
    against: str = ""
    """What `baseline` is, when it is not a baseline job's metric (e.g. a release)."""

    def describe(self) -> str:
        target = (
            f"{self.against or 'baseline'} {self.baseline:g} + {self.threshold:g}"
            if self.baseline is not None
            else f"{self.threshold:g}"
        )
        value = "?" if self.value is None else f"{self.value:g}"
        text = f"{self.metric} {value} {self.op} {target}: {self.status.upper()}"
        return text + (f" ({self.detail})" if self.detail else "")

    def to_json(self) -> dict[str, Any]:
        against = {"against": self.against} if self.against else {}
        return against | {
            "metric": self.metric,
            "op": self.op,
            "threshold": self.threshold,
            "status": self.status,
            "value": self.value,
            "baseline": self.baseline,
            "detail": self.detail,
        }


def evaluate_gates(
    gates: list[dict[str, Any]],
    metrics: dict[str, Any] | None,
    baseline_metrics: Callable[[str], dict[str, Any] | None] = lambda job: None,
    released: ReleasedLookup | None = None,
) -> list[GateResult]:
    """One result per gate; `pending` while metrics (or a baseline's) are not in yet."""
    results = []
    for gate in gates:
        metric, op, threshold = gate["metric"], gate["op"], float(gate["threshold"])
        if gate.get("compareTo") and metrics is not None and metric in metrics:
            results.append(_against_release(gate, float(metrics[metric]), released))
            continue
        baseline_job = (gate.get("baseline") or {}).get("job")
        if metrics is None or metric not in metrics:
            detail = "no evaluation yet" if metrics is None else f"metric {metric} not reported"
            status = "pending" if metrics is None else "fail"
            results.append(GateResult(metric, op, threshold, status, detail=detail))
            continue
        value = float(metrics[metric])
        target = threshold
        baseline_value = None
        if baseline_job:
            reference = baseline_metrics(baseline_job)
            if reference is None or metric not in reference:
                results.append(
                    GateResult(
                        metric,
                        op,
                        threshold,
                        "pending",
                        value,
                        detail=f"baseline {baseline_job} not evaluated yet",
                    )
                )
                continue
            baseline_value = float(reference[metric])
            target = baseline_value + threshold
        passed = _OPS[op](value, target)
        results.append(
            GateResult(metric, op, threshold, "pass" if passed else "fail", value, baseline_value)
        )
    return results


def _against_release(
    gate: dict[str, Any], value: float, released: ReleasedLookup | None
) -> GateResult:
    metric, op, threshold = gate["metric"], gate["op"], float(gate["threshold"])
    name = gate["compareTo"]["release"]
    if released is None:
        detail = f"compared with release {name} when a ModelRelease is planned"
        return GateResult(metric, op, threshold, "pass", value, detail=detail)
    reference = released(name, metric)
    if reference.value is None:
        status = "pass" if reference.comparable else "fail"
        return GateResult(metric, op, threshold, status, value, detail=reference.detail)
    target = reference.value + threshold
    status = "pass" if _OPS[op](value, target) else "fail"
    return GateResult(
        metric, op, threshold, status, value, reference.value, reference.detail, reference.label
    )


def overall(results: list[GateResult]) -> str:
    if any(r.status == "fail" for r in results):
        return "fail"
    if any(r.status == "pending" for r in results):
        return "pending"
    return "pass"
