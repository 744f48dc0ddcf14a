"""Priorities within the bounds the platform allows (settings `min` and `max`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.context import PolicyContext
from trainform.policies.findings import Severity

FIELDS = {"Queue": "defaultPriority", "TrainingJob": "priority", "EvalSuite": "priority"}


def check_priorities(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    low, high = params.get("min"), params.get("max")
    if low is None and high is None:
        return
    for subject in context.of_kind(*FIELDS):
        name = FIELDS[subject.kind]
        value = subject.spec.get(name)
        if value is None:
            continue
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"[{'-inf' if low is None else low}, {'+inf' if high is None else high}]"
            yield Violation(
                subject.address,
                ("spec", name),
                f"{name} {value} is outside the allowed range {bounds}",
                key="out-of-range",
            )


PRIORITY_BOUNDS = BuiltinPolicy(
    id="priority-bounds",
    name="Priorities within bounds",
    severity=Severity.DENY,
    kinds=tuple(FIELDS),
    check=check_priorities,
    parameters={"min": None, "max": None},
    description="Queue spec.defaultPriority, TrainingJob and EvalSuite spec.priority lie "
    "within [min, max]; unset bounds do not limit.",
)
