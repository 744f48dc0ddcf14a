"""The change first: each queue-policy change as one line of numbers.

`pools[h100].nominalQuota.gpu: 96 -> 80` of Queue/pretrain reads `pretrain h100 gpu nominal
96 → 80 (-16)`; a Quota limit reads `quota team-a/team-a gpu limit 64 → 16 (-48)`; any
other field `queue pretrain defaultPriority 100 → 200`. An added or removed resource is one
line naming it and its set figures. Renderers put these lines before everything else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

from trainform.policies.review.semantic import ChangeAction, FieldChange, SemanticChange

ARROW = "→"
_POOL_FIELD = re.compile(r"pools\[(?P<pool>[^\]]+)\]\.(?P<figure>\w+)\.(?P<resource>\w+)$")
_FIGURES = {"nominalQuota": "nominal", "borrowingLimit": "borrowing limit",
            "lendingLimit": "lending limit"}  # fmt: skip
_NAMES = {"Queue": "queue", "Quota": "quota", "ResourcePool": "pool", "Project": "project"}


def _number(text: str | None) -> Decimal | None:
    from trainform.specs.quantity import parse_quantity

    if text is None:
        return None
    try:
        return parse_quantity(text)
    except (ValueError, ArithmeticError):
        return None


def _delta(old: str | None, new: str | None) -> str:
    from trainform.policies.context import show_amount

    a, b = _number(old), _number(new)
    if a is None or b is None or a == b:
        return ""
    shown = show_amount(abs(b - a))
    return f" ({'+' if b > a else '-'}{shown})"


def _name(change: SemanticChange) -> str:
    return change.address.split("/", 1)[1]


def field_line(change: SemanticChange, item: FieldChange) -> str:
    """One changed field of `change` as `who what old → new (delta)`."""
    values = f"{item.old} {ARROW} {item.new}{_delta(item.old, item.new)}"
    match = _POOL_FIELD.match(item.field)
    if change.kind == "Queue" and match:
        figure = _FIGURES.get(match["figure"], match["figure"])
        return f"`{_name(change)}` {match['pool']} {match['resource']} {figure} {values}"
    if change.kind == "Quota" and item.field.startswith("limits."):
        limit = item.field.removeprefix("limits.")
        return f"quota `{_name(change)}` {limit} limit {values}"
    return f"{_NAMES.get(change.kind, change.kind)} `{_name(change)}` {item.field} {values}"


def _whole_line(change: SemanticChange) -> str:
    kind = _NAMES.get(change.kind, change.kind)
    shown = []
    for item in change.fields:
        value = item.new if change.action is ChangeAction.ADDED else item.old
        match = _POOL_FIELD.match(item.field)
        if match and match["figure"] == "nominalQuota":
            shown.append(f"{match['pool']} {match['resource']} nominal {value}")
        elif item.field.startswith("limits.") or item.field in ("capacity.gpu", "cohort"):
            shown.append(f"{item.field.removeprefix('limits.')} {value}")
    details = f" ({', '.join(shown)})" if shown else ""
    return f"{change.action.value} {kind} `{_name(change)}`{details}"


def change_lines(changes: Sequence[SemanticChange]) -> list[str]:
    """Every change as lines of numbers, in the semantic diff's order."""
    lines = []
    for change in changes:
        if change.action is ChangeAction.CHANGED:
            lines += [field_line(change, item) for item in change.fields]
        else:
            lines.append(_whole_line(change))
    return lines
