"""Evaluation gates: whether a model's metrics pass an EvalSuite's thresholds."""

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
class GateResult:
    metric: str
    op: str
    threshold: float
    status: str  # pass, fail, pending
    value: float | None = None
    baseline: float | None = None
    detail: str = ""

    def describe(self) -> str:
        target = (
            f"baseline {self.baseline:g} + {self.threshold:g}"
            if self.baseline is not None
            else f"{self.threshold:g}"
        )
        value = "?" if self.value is None else f"{self.value:g}"
        text = f"{self.metric} {value} {self.op} {target}: {self.status.upper()}"
        return text + (f" ({self.detail})" if self.detail else "")

    def to_json(self) -> dict[str, Any]:
        return {
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
) -> list[GateResult]:
    """One result per gate; `pending` while metrics (or a baseline's) are not in yet."""
    results = []
    for gate in gates:
        metric, op, threshold = gate["metric"], gate["op"], float(gate["threshold"])
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


def overall(results: list[GateResult]) -> str:
    if any(r.status == "fail" for r in results):
        return "fail"
    if any(r.status == "pending" for r in results):
        return "pending"
    return "pass"
