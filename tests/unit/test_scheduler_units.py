"""The scheduler's exact readers: Kubernetes quantities (k8s.io/apimachinery's grammar) and Slurm's time
limit forms (src/common/parse_time.c), including what each refuses and the words it says."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncer.controllers.scheduler import quantity, slurmtime


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("0", 0),
        ("-0", 0),
        ("+2", 2),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("1.", 1),
        (".5", Fraction(1, 2)),
        ("2k", 2000),
        ("3M", 3 * 10**6),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("1Ki", 1024),
        ("1Mi", 1024**2),
        ("1.5Gi", 3 * 1024**3 // 2),
        ("1Ti", 1024**4),
        ("1Pi", 1024**5),
        ("1Ei", 1024**6),
        ("4e3", 4000),
        ("4E3", 4000),
        ("4e+3", 4000),
        ("5e-1", Fraction(1, 2)),
        ("1e30", 10**30),
        ("1e-30", Fraction(1, 10**30)),
        ("0.1", Fraction(1, 10)),
    ],
)
def test_quantities_read_exactly(text: str, value: Fraction | int) -> None:
    assert quantity.parse(text) == value


def test_sums_are_exact() -> None:
    assert quantity.parse("0.1") + quantity.parse("0.2") == Fraction(3, 10)
    assert quantity.canonical("cpu", quantity.parse("0.1") + quantity.parse("0.2")) == 300


@pytest.mark.parametrize("text", ["", "abc", "1e", "1Kb", "1 Gi", "1..2", "Mi", "1mi", "0x10", "1_000", "e3"])
def test_not_quantities(text: str) -> None:
    with pytest.raises(quantity.BadQuantity) as caught:
        quantity.parse(text)
    assert str(caught.value) == f"{text!r} is not a Kubernetes quantity (such as 500m, 2, 1.5Gi, 4e3)"


def test_negative_and_huge_are_refused() -> None:
    with pytest.raises(quantity.BadQuantity, match=r"^'-1' is negative$"):
        quantity.parse("-1")
    with pytest.raises(quantity.BadQuantity, match=r"^'1e31' is out of range \(exponent beyond 30\)$"):
        quantity.parse("1e31")
    with pytest.raises(quantity.BadQuantity, match=r"out of range"):
        quantity.parse("1e-31")


def test_canonical_units_round_up() -> None:
    assert quantity.canonical("cpu", Fraction(1, 10000)) == 1  # 0.1m is 1m, as MilliValue() says
    assert quantity.canonical("cpu", Fraction(3, 2)) == 1500
    assert quantity.canonical("memory", Fraction(1, 2)) == 1
    assert quantity.canonical("nvidia.com/gpu", Fraction(2)) == 2


def test_amounts_of_a_node() -> None:
    assert quantity.amounts({"cpu": "3900m", "memory": "1Gi", "pods": "110", "odd": "x"}) == {
        "cpu": 3900,
        "memory": 1024**3,
        "pods": 110,
        "odd": 0,
    }


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["", "m", "k", "Ki", "Mi", "G"]))
def test_integers_with_suffixes(number: int, suffix: str) -> None:
    scales: dict[str, Fraction | int] = {
        "": 1,
        "m": Fraction(1, 1000),
        "k": 1000,
        "Ki": 1024,
        "Mi": 1024**2,
        "G": 10**9,
    }
    scale = Fraction(scales[suffix])
    assert quantity.parse(f"{number}{suffix}") == number * scale


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("1", 1),
        ("90", 90),
        ("0:30", 1),  # seconds round up
        ("1:00", 1),
        ("1:01", 2),
        ("0:90", 2),
        ("2:00:00", 120),
        ("1:30:30", 91),
        ("1-0", 1440),
        ("2-3", 2 * 1440 + 180),
        ("1-1:30", 1440 + 90),
        ("1-0:0:1", 1441),
        ("0-0:0:61", 2),  # each field counts its own unit
        ("0:2:0", 2),
        ("0:0:61", 2),
        ("0", slurmtime.UNLIMITED),  # sbatch --time=0: no limit
        ("UNLIMITED", slurmtime.UNLIMITED),
        ("infinite", slurmtime.UNLIMITED),
        ("-1", slurmtime.UNLIMITED),
        ("35791394", 35791394),  # 2**31 - 1 seconds is 35791394.1 minutes: just inside
    ],
)
def test_time_limits(text: str, minutes: int) -> None:
    assert slurmtime.parse(text) == minutes


@pytest.mark.parametrize(
    "text", ["", "1h", "1:2:3:4", "1-2-3", "-5", "5-", "1-", "1:", ":5", "1.5", "\uff11", "1-1:1:1:1"]
)
def test_not_time_limits(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        slurmtime.parse(text)
    assert str(caught.value) == (
        f"{text!r} is not a Slurm time limit (minutes, minutes:seconds, hours:minutes:seconds, "
        "days-hours[:minutes[:seconds]] or UNLIMITED)"
    )


def test_time_limit_beyond_what_slurm_counts() -> None:
    assert slurmtime.parse("0:2147483647") == 35791395
    with pytest.raises(
        ValueError, match=r"^'0:2147483648' is longer than Slurm can count \(2147483647 s\); use"
    ):
        slurmtime.parse("0:2147483648")
