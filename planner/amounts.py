"""Resource amounts of the platform view: exact `Decimal`s keyed by resource.

Keys: `gpu` (all accelerators), `cpu`, `memory` (bytes) and `gpu:<type>` (the
accelerators of one type, `ResourcePool.spec.accelerator.type`), so accelerators of
different types are counted apart as well as together. Read by planner/platform_view.py
and planner/cohort_view.py; JSON as `{"gpu", "cpu", "memory", "gpuByType": {type: n}}`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

BASE_RESOURCES = ("gpu", "cpu", "memory")
TYPED = "gpu:"


def amount(value: Any) -> Decimal:
    """A normalized spec value (a decimal string, memory in bytes) as a Decimal; 0 if unset."""
    return Decimal(str(value)) if value not in (None, "") else Decimal(0)


def zero() -> dict[str, Decimal]:
    return dict.fromkeys(BASE_RESOURCES, Decimal(0))


def add(target: dict[str, Decimal], key: str, value: Decimal) -> None:
    target[key] = target.get(key, Decimal(0)) + value


def number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def amounts_json(values: dict[str, Decimal]) -> dict[str, Any]:
    """`{"gpu": total, "cpu": n, "memory": bytes, "gpuByType": {type: n}}`."""
    found: dict[str, Any] = {k: number(v) for k, v in values.items() if not k.startswith(TYPED)}
    found["gpuByType"] = {
        k[len(TYPED) :]: number(v) for k, v in sorted(values.items()) if k.startswith(TYPED)
    }
    return found
