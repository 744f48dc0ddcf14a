"""Exact quantities and durations, parsed the way Kubernetes and Slurm users write them.

`Quantity` follows the Kubernetes resource grammar (`500m`, `16`, `2Ti`, `1.5G`, `1e3`) and
keeps an exact `Decimal` value: `2Ti` is 2 * 2**40, never a float. `Duration` accepts
`90m`, `36h`, `1h30m`, `2d`, `45s` and holds whole seconds. Both compare by value, print
in the user's own spelling (`str`), serialize in one canonical spelling (`2Ti` ->
"2199023255552", `90m` -> "1h30m") and plug into pydantic models as field types.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))$"
)
QUANTITY_PATTERN = (
    r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE])?$"
)
QUANTITY_HELP = "a quantity such as 500m, 16, 64Gi or 2Ti"

_DURATION_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"^(?:[0-9]+(?:w|d|h|m|s))+$")
_DURATION_PART = re.compile(r"([0-9]+)(w|d|h|m|s)")
DURATION_PATTERN = r"^([0-9]+(w|d|h|m|s))+$"
DURATION_HELP = "a duration such as 90m, 36h or 1h30m"


def binary_size(count: float | Decimal | int) -> str:
    """A byte count as people read it in messages: `512 B`, `1.5 GiB`, `3.9 TiB`."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "PiB":
            break
        size /= 1024
    else:
        unit = "PiB"
    return f"{size:.0f} B" if unit == "B" else f"{size:,.1f} {unit}"


def parse_quantity(text: str) -> Decimal:
    """Exact value of a Kubernetes quantity string; ValueError when it is not one."""
    match = _QUANTITY.match(text.strip())
    if not match:
        raise ValueError(f"not a quantity: {text!r}")
    number = Decimal(match["number"])
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > 30:
            raise ValueError(f"exponent out of range: {text!r}")
        return number.scaleb(exponent)
    return number * _DECIMAL[match["decimal"] or ""]


class _Measure:
    """Shared behaviour of Quantity and Duration: exact value, user's spelling, pydantic.

    Subclasses define `_key()` (the exact value compared), `_validate(raw)` and
    `_json_schema()`."""

    __slots__ = ("text",)
    text: str

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return self._key() == other._key()  # type: ignore[attr-defined,no-any-return]
        return NotImplemented

    def __lt__(self, other: _Measure) -> bool:
        return self._key() < other._key()  # type: ignore[attr-defined,no-any-return]

    def __le__(self, other: _Measure) -> bool:
        return self._key() <= other._key()  # type: ignore[attr-defined,no-any-return]

    def __hash__(self) -> int:
        return hash(self._key())  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate,  # type: ignore[attr-defined]
            serialization=core_schema.plain_serializer_function_ser_schema(
                _canonical_of, when_used="always"
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return cls._json_schema()  # type: ignore[attr-defined,no-any-return]


class Quantity(_Measure):
    """A non-negative resource amount with an exact value and the spelling it was given."""

    __slots__ = ("value", "_canonical")

    def __init__(self, text: str | int) -> None:
        spelled = str(text).strip()
        value = parse_quantity(spelled)
        if value < 0:
            raise ValueError(f"negative quantity: {spelled!r}")
        self.text = spelled
        self.value = value
        self._canonical = ""

    def _key(self) -> Decimal:
        return self.value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int | Decimal) and not isinstance(other, bool):
            return self.value == other
        return super().__eq__(other)

    __hash__ = _Measure.__hash__

    @property
    def canonical(self) -> str:
        """Value without suffix or exponent, the form hashes and diffs use."""
        if not self._canonical:
            normalized = self.value.normalize()
            integral = normalized == normalized.to_integral()
            self._canonical = format(normalized, "f") if integral else str(normalized)
        return self._canonical

    @classmethod
    def _validate(cls, raw: Any) -> Quantity:
        if isinstance(raw, Quantity):
            return raw
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise PydanticCustomError("quantity", f"expected {QUANTITY_HELP}")
        quantity = _quantity_from_text(raw if isinstance(raw, str) else repr(raw))
        if quantity is None:
            raise PydanticCustomError("quantity", f"expected {QUANTITY_HELP}")
        return quantity

    @classmethod
    def _json_schema(cls) -> JsonSchemaValue:
        return {
            "anyOf": [
                {"type": "string", "pattern": QUANTITY_PATTERN},
                {"type": "number", "minimum": 0},
            ],
            "description": f"Kubernetes-style quantity: {QUANTITY_HELP}.",
        }


class Duration(_Measure):
    """A span of time in whole seconds, written as `90m`, `36h`, `1h30m` or `2d`."""

    __slots__ = ("seconds",)

    def __init__(self, text: str) -> None:
        spelled = text.strip()
        if not _DURATION.match(spelled):
            raise ValueError(f"not a duration: {text!r}")
        self.text = spelled
        self.seconds = sum(
            int(amount) * _DURATION_UNITS[unit] for amount, unit in _DURATION_PART.findall(spelled)
        )

    def _key(self) -> int:
        return self.seconds

    @property
    def canonical(self) -> str:
        """The one spelling of this span used in hashes and diffs: `90m` -> `1h30m`."""
        remaining = self.seconds
        if remaining == 0:
            return "0s"
        parts = []
        for unit, size in _CANONICAL_UNITS:
            amount, remaining = divmod(remaining, size)
            if amount:
                parts.append(f"{amount}{unit}")
        return "".join(parts)

    @classmethod
    def _validate(cls, raw: Any) -> Duration:
        if isinstance(raw, Duration):
            return raw
        if not isinstance(raw, str):
            raise PydanticCustomError(
                "duration", f"expected {DURATION_HELP} (a string with a unit)"
            )
        duration = _duration_from_text(raw)
        if duration is None:
            raise PydanticCustomError("duration", f"expected {DURATION_HELP}")
        return duration

    @classmethod
    def _json_schema(cls) -> JsonSchemaValue:
        return {
            "type": "string",
            "pattern": DURATION_PATTERN,
            "description": f"Duration: {DURATION_HELP}.",
        }


_CANONICAL_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def _canonical_of(value: _Measure) -> str:
    """Serialized form of a Quantity or Duration: exact and canonical, so a dump of a spec
    compares and hashes by meaning (`2048Mi` and `2Gi` dump alike)."""
    return value.canonical  # type: ignore[attr-defined,no-any-return]


# Both types are immutable, so equal spellings can share one parsed instance: spec folders
# repeat the same few values (`64`, `512Gi`, `24h`) thousands of times.
@lru_cache(maxsize=4096)
def _quantity_from_text(text: str) -> Quantity | None:
    try:
        return Quantity(text)
    except (ValueError, InvalidOperation):
        return None


@lru_cache(maxsize=4096)
def _duration_from_text(text: str) -> Duration | None:
    try:
        return Duration(text)
    except ValueError:
        return None
