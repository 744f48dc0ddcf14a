"""Quantities parse as Kubernetes does, exactly; durations as `90m`, `36h`, `1h30m`, `2d`."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import BaseModel, ValidationError
from trainform.specs import Duration, Quantity


class _Amounts(BaseModel):
    amount: Quantity
    span: Duration | None = None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("500m", Decimal("0.5"), id="milli"),
        pytest.param("16", Decimal(16), id="plain-integer"),
        pytest.param("2Ti", Decimal(2 * 2**40), id="binary-tebi"),
        pytest.param("1.5G", Decimal(1_500_000_000), id="decimal-giga-fraction"),
        pytest.param("1e3", Decimal(1000), id="exponent"),
        pytest.param("64Gi", Decimal(64 * 2**30), id="binary-gibi"),
        pytest.param("100Mi", Decimal(100 * 2**20), id="binary-mebi"),
        pytest.param("2k", Decimal(2000), id="decimal-kilo"),
        pytest.param("1E-3", Decimal("0.001"), id="negative-exponent"),
        pytest.param(".5", Decimal("0.5"), id="leading-dot"),
        pytest.param("0", Decimal(0), id="zero"),
        pytest.param(" 8 ", Decimal(8), id="surrounding-spaces"),
    ],
)
def test_quantity_parses_to_an_exact_decimal(text: str, value: Decimal) -> None:
    quantity = Quantity(text)
    assert isinstance(quantity.value, Decimal)
    assert quantity.value == value


def test_binary_suffix_is_exact_beyond_float_precision() -> None:
    assert Quantity("3Ei").value + 1 == 3 * 2**60 + 1
    assert Quantity("1.1Ei").value == Decimal("1268213655067531673.6")
    assert Quantity("0.1").value + Quantity("0.2").value == Decimal("0.3")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("-1", id="negative"),
        pytest.param("-500m", id="negative-milli"),
        pytest.param("abc", id="word"),
        pytest.param("", id="empty"),
        pytest.param("1.5.5", id="two-dots"),
        pytest.param("64GB", id="unknown-suffix"),
        pytest.param("64gi", id="lowercase-binary-suffix"),
        pytest.param("1e400", id="exponent-out-of-range"),
        pytest.param("1 Gi", id="space-before-suffix"),
        pytest.param("0x10", id="hex"),
    ],
)
def test_quantity_rejects_invalid_text(text: str) -> None:
    with pytest.raises(ValueError):
        Quantity(text)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(True, id="bool-true"),
        pytest.param(False, id="bool-false"),
        pytest.param(None, id="null"),
        pytest.param([1], id="list"),
        pytest.param({"a": 1}, id="mapping"),
        pytest.param(-2, id="negative-int"),
        pytest.param(float("nan"), id="nan"),
        pytest.param(float("inf"), id="infinity"),
    ],
)
def test_quantity_field_rejects_non_quantities(raw: object) -> None:
    with pytest.raises(ValidationError) as info:
        _Amounts(amount=raw)
    assert "a quantity such as 500m" in str(info.value)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        pytest.param(16, Decimal(16), id="int"),
        pytest.param(1.5, Decimal("1.5"), id="float"),
        pytest.param("64Gi", Decimal(64 * 2**30), id="string"),
    ],
)
def test_quantity_field_accepts_numbers_and_strings(raw: object, value: Decimal) -> None:
    assert _Amounts(amount=raw).amount.value == value


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param("1Gi", "1073741824", id="binary-vs-plain"),
        pytest.param("500m", "0.5", id="milli-vs-fraction"),
        pytest.param("1k", "1e3", id="kilo-vs-exponent"),
        pytest.param("1000M", "1G", id="mega-vs-giga"),
    ],
)
def test_quantities_are_equal_by_value(left: str, right: str) -> None:
    assert Quantity(left) == Quantity(right)
    assert hash(Quantity(left)) == hash(Quantity(right))
    assert Quantity(left).canonical == Quantity(right).canonical


def test_quantity_prints_the_users_spelling_and_serializes_canonically() -> None:
    assert str(Quantity("64Gi")) == "64Gi"
    assert _Amounts(amount="2Ti").model_dump(mode="json")["amount"] == "2199023255552"
    assert _Amounts(amount="2048Gi").model_dump()["amount"] == "2199023255552"


def test_quantities_order_by_value() -> None:
    assert Quantity("900Mi") < Quantity("1Gi") <= Quantity("1024Mi")
    assert sorted([Quantity("2"), Quantity("500m"), Quantity("1k")]) == [
        Quantity("0.5"),
        Quantity("2"),
        Quantity("1000"),
    ]


def test_quantity_compares_with_plain_numbers() -> None:
    assert Quantity("16") == 16
    assert Quantity("1e3") == Decimal(1000)
    assert Quantity("1") != "1"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("90m", 90 * 60, id="minutes"),
        pytest.param("36h", 36 * 3600, id="hours"),
        pytest.param("1h30m", 5400, id="hours-and-minutes"),
        pytest.param("2d", 2 * 86400, id="days"),
        pytest.param("45s", 45, id="seconds"),
        pytest.param("1w", 7 * 86400, id="week"),
        pytest.param("1d2h3m4s", 86400 + 7200 + 180 + 4, id="all-units"),
    ],
)
def test_duration_parses_to_whole_seconds(text: str, seconds: int) -> None:
    assert Duration(text).seconds == seconds


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("90", id="no-unit"),
        pytest.param("1.5h", id="fraction"),
        pytest.param("h", id="unit-only"),
        pytest.param("", id="empty"),
        pytest.param("1h 30m", id="inner-space"),
        pytest.param("-5m", id="negative"),
        pytest.param("5min", id="long-unit"),
        pytest.param("5M", id="uppercase-unit"),
    ],
)
def test_duration_rejects_invalid_text(text: str) -> None:
    with pytest.raises(ValueError):
        Duration(text)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(90, id="bare-int"),
        pytest.param(True, id="bool"),
        pytest.param("ninety", id="word"),
    ],
)
def test_duration_field_rejects_non_durations(raw: object) -> None:
    with pytest.raises(ValidationError) as info:
        _Amounts(amount=1, span=raw)
    assert "a duration such as 90m" in str(info.value)


def test_durations_are_equal_by_value() -> None:
    assert Duration("90m") == Duration("1h30m")
    assert Duration("2d") == Duration("48h")
    assert hash(Duration("60s")) == hash(Duration("1m"))
    assert Duration("59m") < Duration("1h") <= Duration("60m")
    assert str(Duration("1h30m")) == "1h30m"
