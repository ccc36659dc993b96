"""Kubernetes quantities, exactly, in the units kube-scheduler compares (syncer/model/quantity.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncer.model.quantity import QuantityError, parse_quantity, scheduler_units


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)), (".5", Fraction(1, 2)),
        ("5.", Fraction(5)), ("100n", Fraction(1, 10**7)), ("3u", Fraction(3, 10**6)), ("2k", Fraction(2000)),
        ("1M", Fraction(10**6)), ("1G", Fraction(10**9)), ("1T", Fraction(10**12)), ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)), ("1Ki", Fraction(1024)), ("16Gi", Fraction(16 * 2**30)),
        ("1Ti", Fraction(2**40)), ("1Pi", Fraction(2**50)), ("1Ei", Fraction(2**60)), ("2e3", Fraction(2000)),
        ("2E3", Fraction(2000)), ("5e-1", Fraction(1, 2)), ("-1", Fraction(-1)), ("+2", Fraction(2)),
        (" 3 ", Fraction(3)), (4, Fraction(4)), (0.5, Fraction(1, 2)),
    ],
)  # fmt: skip
def test_every_suffix(text: object, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", ".", "abc", "1Q", "1 Gi", "1e", "--1", "1\nGi"])
def test_what_is_not_a_quantity_is_named(text: object) -> None:
    with pytest.raises(QuantityError, match=r"^quantity '.*': "):
        parse_quantity(text)


@pytest.mark.parametrize("value", [None, True, [1]])
def test_only_strings_and_numbers_are_read(value: object) -> None:
    with pytest.raises(QuantityError, match="is not a string"):
        parse_quantity(value)


def test_scheduler_units_round_up_as_kubernetes_does() -> None:
    assert scheduler_units("cpu", "250m") == 250 and scheduler_units("cpu", "1") == 1000
    assert scheduler_units("cpu", "100n") == 1  # MilliValue rounds up
    assert scheduler_units("memory", "1500m") == 2  # Value rounds up
    assert scheduler_units("memory", "1Gi") == 2**30 and scheduler_units("nvidia.com/gpu", "2") == 2


@given(
    st.integers(min_value=0, max_value=10**12), st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi", "M", "G"])
)
def test_integers_with_a_suffix_round_trip(number: int, suffix: str) -> None:
    scale: dict[str, Fraction | int] = {
        "": 1,
        "m": Fraction(1, 1000),
        "k": 1000,
        "Ki": 1024,
        "Mi": 2**20,
        "Gi": 2**30,
        "M": 10**6,
        "G": 10**9,
    }
    assert parse_quantity(f"{number}{suffix}") == number * Fraction(scale[suffix])
