"""Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource) as exact numbers.

`parse` reads "500m", "2", "10Gi", "1e3", "1.5" (an int is taken as is) into a Fraction;
`milli` turns one into the integer Kueue and quota admission count in (milli-units for cpu,
whole units rounded up for everything else, as `resource.Quantity.Value()` rounds up);
`render` writes a count back the way Kueue's messages print it (cpu in cores or `m`,
byte amounts with the largest exact binary suffix). Used by the quota admission plugin
(admission.py) and the Kueue stand-in (kueue*.py).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_PATTERN = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
MILLI_RESOURCES = ("cpu",)  # counted in milli-units, as Kueue's ResourceValue does


def parse(value: str | int | float) -> Fraction:
    """The exact amount a quantity names; ValueError on a malformed one."""
    if isinstance(value, bool):
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int | float):
        return Fraction(value)
    found = _PATTERN.match(value.strip()) if isinstance(value, str) else None
    if found is None:
        raise ValueError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}"
        )
    number, suffix = Fraction(found.group(1)), found.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _DECIMAL[suffix]


def amount(resource: str, value: str | int | float) -> int:
    """The integer Kueue compares for `resource`: milli-units for cpu, else units rounded up."""
    exact = parse(value)
    return math.ceil(exact * 1000) if resource in MILLI_RESOURCES else math.ceil(exact)


def render(resource: str, count: int) -> str:
    """`count` (as `amount` gives it) in the short form Kueue's messages use."""
    if resource in MILLI_RESOURCES:
        return str(count // 1000) if count % 1000 == 0 else f"{count}m"
    if resource == "memory" or resource.endswith("storage"):
        for suffix, size in reversed(_BINARY.items()):
            if count and count % size == 0:
                return f"{count // size}{suffix}"
    return str(count)
