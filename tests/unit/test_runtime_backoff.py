"""The one retry policy (syncer/runtime/backoff.py): each rule of the delay before retry number n, stated
on its own. The jitter is pinned by replacing `random.uniform` with a recorder, so no rule rests on chance."""

from __future__ import annotations

import random

import pytest

from syncer.runtime.backoff import Backoff


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """Every `random.uniform(a, b)` the policy makes, answered with `b` (the top of its range)."""
    made: list[tuple[float, float]] = []

    def top(a: float, b: float) -> float:
        made.append((a, b))
        return b

    monkeypatch.setattr(random, "uniform", top)
    return made


def test_the_default_policy_starts_at_50_ms_and_is_capped_at_30_s() -> None:
    backoff = Backoff()
    assert (backoff.base_s, backoff.max_s) == (0.05, 30.0)
    assert backoff.ceiling(1) == 0.05
    assert backoff.ceiling(100) == 30.0


def test_the_first_retry_waits_at_most_base_and_each_later_one_doubles_that() -> None:
    backoff = Backoff(0.1, 100.0)
    assert [backoff.ceiling(n) for n in (1, 2, 3, 4, 5)] == [0.1, 0.2, 0.4, 0.8, 1.6]


def test_no_ceiling_exceeds_max() -> None:
    backoff = Backoff(0.1, 1.0)
    assert [backoff.ceiling(n) for n in (4, 5, 6, 50)] == [0.8, 1.0, 1.0, 1.0]


def test_an_attempt_below_one_waits_as_the_first_retry() -> None:
    backoff = Backoff(0.1, 100.0)
    assert backoff.ceiling(0) == backoff.ceiling(-3) == backoff.ceiling(1) == 0.1


def test_doubling_stops_after_64_doublings_so_any_attempt_count_is_a_number() -> None:
    """2.0 ** n overflows for n past 1023: the exponent is capped, the cap on the ceiling does the rest."""
    backoff = Backoff(1.0, 1e300)
    assert backoff.ceiling(65) == 2.0**64
    assert backoff.ceiling(66) == backoff.ceiling(10**6) == 2.0**64
    assert Backoff(0.05, 30.0).ceiling(10**6) == 30.0


def test_the_delay_is_half_the_ceiling_plus_a_uniform_draw_up_to_the_other_half(
    draws: list[tuple[float, float]],
) -> None:
    backoff = Backoff(0.1, 100.0)
    assert backoff.delay(3) == 0.4  # the draw at its top: the whole ceiling
    assert draws == [(0.0, 0.2)]  # the draw's range: [0, ceiling / 2]


def test_the_delay_never_leaves_half_to_all_of_the_ceiling() -> None:
    backoff = Backoff(0.1, 1.0)
    for attempt, ceiling in ((1, 0.1), (2, 0.2), (3, 0.4), (10, 1.0)):
        delays = {backoff.delay(attempt) for _ in range(50)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(delays) > 1  # jittered: keys failing together do not retry in lock-step


@pytest.mark.parametrize("base_s", [0.0, -0.1])
def test_base_must_be_positive(base_s: float) -> None:
    with pytest.raises(ValueError, match="0 < base_s <= max_s"):
        Backoff(base_s, 1.0)


def test_base_may_not_exceed_max_but_may_equal_it() -> None:
    with pytest.raises(ValueError, match=r"got 2\.0, 1\.0"):
        Backoff(2.0, 1.0)
    assert Backoff(1.0, 1.0).ceiling(5) == 1.0
