"""A review section and its cells, formatted once for every renderer: GPUs as numbers,
waits as durations (`45s`, `12m`, `1h05m`, `2d3h`), a changed value as
`before → after (delta)`. The capacity sections (sections) and the simulation's
(wait_sections) are built of these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from trainform.policies.review.capacity import number

ARROW = "→"


@dataclass(frozen=True)
class Section:
    """A titled table (`headers` and `rows`) or bullet list (`items`), maybe folded."""

    key: str
    title: str
    headers: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)
    items: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    note: str = ""
    folded: bool = True


def gpus(value: Decimal | None) -> str:
    return "-" if value is None else str(number(value))


def signed(value: Decimal | float) -> str:
    if value == 0:
        return "0"
    shown = str(number(value)) if isinstance(value, Decimal) else f"{value:g}"
    return shown if shown.startswith("-") else f"+{shown}"


def change_cell(before: Decimal | None, after: Decimal | None) -> str:
    """`24`, or `32 → 24 (-8)`, or `- → 24` for a side where the row does not exist."""
    if before == after:
        return gpus(after)
    if before is None or after is None:
        return f"{gpus(before)} {ARROW} {gpus(after)}"
    return f"{gpus(before)} {ARROW} {gpus(after)} ({signed(after - before)})"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    negative, total = seconds < 0, round(abs(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        text = f"{days}d{hours}h" if hours else f"{days}d"
    elif hours:
        text = f"{hours}h{minutes:02d}m"
    elif minutes:
        text = f"{minutes}m" if not secs else f"{minutes}m{secs:02d}s"
    else:
        text = f"{secs}s"
    return f"-{text}" if negative else text


def duration_delta(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "-"
    delta = after - before
    if round(delta) == 0:
        return "0"
    return duration(delta) if delta < 0 else f"+{duration(delta)}"


def pairs(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(key, before.get(key), after.get(key)) for key in sorted(before.keys() | after.keys())]
