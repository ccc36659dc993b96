"""Safety valve against drain storms: time is passed in, so every window edge is exact."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncer.controllers.sync.valve import DrainValve

T0 = 1_000.0


def fill(valve: DrainValve, count: int, now: float, bound: int = 100, prefix: str = "n") -> list[bool]:
    return [valve.admit(f"{prefix}{i}", now, bound) for i in range(count)]


@pytest.mark.parametrize(
    ("bound", "threshold"),
    [(0, 2), (1, 2), (5, 2), (29, 2), (30, 3), (39, 3), (40, 4), (100, 10), (1000, 100), (1005, 100)],
)
def test_threshold_is_ten_percent_but_never_trips_below_three(bound: int, threshold: int) -> None:
    assert DrainValve().threshold(bound) == threshold


@pytest.mark.parametrize(("floor", "bound", "threshold"), [(2, 5, 1), (2, 20, 2), (5, 20, 4), (5, 100, 10)])
def test_the_floor_is_configurable(floor: int, bound: int, threshold: int) -> None:
    assert DrainValve(min_nodes=floor).threshold(bound) == threshold


def test_a_small_cluster_trips_only_past_the_floor() -> None:
    valve = DrainValve()  # 5 nodes: 10 % is 0; it never trips below 3 a minute: two pass, the third trips
    assert fill(valve, 2, T0, bound=5) == [True] * 2
    assert not valve.is_open
    assert not valve.admit("n2", T0 + 1, 5)
    assert valve.is_open


def test_admits_up_to_threshold_then_opens() -> None:
    valve = DrainValve()
    assert fill(valve, 10, T0) == [True] * 10
    assert not valve.is_open
    assert not valve.admit("n10", T0 + 1, 100)
    assert valve.is_open
    assert valve.opened_at == T0 + 1
    assert valve.refused == 1
    assert not valve.admit("n11", T0 + 2, 100)
    assert valve.refused == 2
    assert valve.pending == {"n10", "n11"}


def test_retries_of_an_admitted_key_are_free() -> None:
    valve = DrainValve()
    assert fill(valve, 10, T0) == [True] * 10
    assert all(valve.admit("n3", T0 + s, 100) for s in range(5))
    assert not valve.is_open


def test_open_valve_refuses_even_admitted_keys() -> None:
    valve = DrainValve()
    fill(valve, 10, T0)
    assert not valve.admit("storm", T0, 100)
    assert not valve.admit("n0", T0 + 1, 100)  # stop draining means stop


def test_sliding_window_frees_budget() -> None:
    valve = DrainValve(window_s=60)
    fill(valve, 10, T0)
    assert not valve.is_open
    assert fill(valve, 1, T0 + 59.9, prefix="late") == [False]  # still inside the window: opens
    calm = DrainValve(window_s=60)
    fill(calm, 10, T0)
    assert fill(calm, 10, T0 + 60, prefix="next") == [True] * 10  # earlier drains left the window
    assert not calm.is_open


def test_closes_by_itself_after_a_full_calm_window() -> None:
    valve = DrainValve(window_s=60)
    fill(valve, 11, T0)  # the 11th opens it
    assert valve.is_open
    assert valve.tick(T0 + 59)  # not a full window yet
    assert valve.tick(T0 + 60) is False  # everything aged out, open a full window: storm over
    assert valve.opened_at is None
    assert valve.pending == frozenset()
    assert valve.admit("fresh", T0 + 61, 100)


def test_stays_open_while_the_storm_goes_on() -> None:
    valve = DrainValve(window_s=60)
    fill(valve, 11, T0)
    for step in range(1, 10):  # the same 30 nodes keep asking to drain
        assert fill(valve, 30, T0 + step * 30, prefix="s") == [False] * 30
        assert valve.is_open
    refused = valve.refused
    assert refused == 1 + 9 * 30
    # Storm over (nobody asks): closes once a full window is quiet.
    last = T0 + 9 * 30
    assert valve.tick(last + 59)
    assert not valve.tick(last + 60)


def test_trickle_below_threshold_lets_it_close() -> None:
    valve = DrainValve(window_s=60)
    fill(valve, 11, T0)
    assert fill(valve, 30, T0 + 30, prefix="s") == [False] * 30  # storm goes on
    # From here 5 nodes (< 10) keep asking: refused while the last window still holds the storm...
    assert fill(valve, 5, T0 + 61, prefix="t") == [False] * 5
    assert valve.is_open
    # ...and let through once the last full window holds only the trickle.
    assert fill(valve, 5, T0 + 91, prefix="t") == [True] * 5
    assert not valve.is_open


def test_operator_reset_lets_pending_drains_through_uncounted() -> None:
    valve = DrainValve()
    fill(valve, 10, T0)
    assert fill(valve, 30, T0 + 1, prefix="s") == [False] * 30
    valve.reset()
    assert not valve.is_open
    assert fill(valve, 30, T0 + 2, prefix="s") == [True] * 30  # the approved ones
    assert fill(valve, 30, T0 + 3, prefix="s") == [True] * 30  # and their retries
    assert fill(valve, 10, T0 + 4, prefix="new") == [True] * 10  # fresh budget
    assert not valve.admit("new10", T0 + 5, 100)
    assert valve.is_open


def test_refused_total_counts_across_episodes() -> None:
    valve = DrainValve()
    fill(valve, 11, T0)
    valve.reset()
    fill(valve, 11, T0 + 1, prefix="b")
    assert valve.refused == 1
    assert valve.refused_total == 2


def test_threshold_follows_the_bound_node_count() -> None:
    valve = DrainValve()
    assert fill(valve, 4, T0, bound=40) == [True] * 4
    assert not valve.admit("x", T0, 40)
    small = DrainValve(min_nodes=2)
    assert small.admit("only", T0, 3)  # tiny cluster, floor 2: one drain per window
    assert not small.admit("second", T0, 3)


@pytest.mark.parametrize(
    ("fraction", "window", "floor", "names"),
    [
        (0.0, 60.0, 3, r"^max_fraction must be in \(0, 1\]$"),
        (1.5, 60.0, 3, r"^max_fraction must be in \(0, 1\]$"),
        (0.1, 0.0, 3, r"^window_s must be positive$"),
        (-0.1, 60.0, 3, r"^max_fraction must be in \(0, 1\]$"),
        (0.1, 60.0, 1, r"^min_nodes must be at least 2 \(one automatic drain a window always passes\)$"),
        (0.1, 60.0, -2, r"^min_nodes must be at least 2 \(one automatic drain a window always passes\)$"),
    ],
)
def test_refuses_nonsense_settings_naming_the_bad_one(
    fraction: float, window: float, floor: int, names: str
) -> None:
    with pytest.raises(ValueError, match=names):
        DrainValve(max_fraction=fraction, window_s=window, min_nodes=floor)


@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=40), st.floats(min_value=0, max_value=5)), max_size=200
    ),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=2, max_value=5),
)
def test_never_more_than_threshold_new_drains_per_window(
    steps: list[tuple[int, float]], bound: int, floor: int
) -> None:
    valve = DrainValve(window_s=60, min_nodes=floor)
    now = T0
    counted_at: dict[str, float] = {}  # key -> when its current admission was counted
    new_drains: list[float] = []
    for key, gap in steps:
        now += gap
        name = f"k{key}"
        if valve.admit(name, now, bound) and not (name in counted_at and now - counted_at[name] < 60):
            counted_at[name] = now
            new_drains.append(now)
    for i, start in enumerate(new_drains):
        assert len([t for t in new_drains[i:] if t - start < 60]) <= valve.threshold(bound)


def test_holds_names_keys_refused_since_the_valve_opened() -> None:
    valve = DrainValve(window_s=60)
    fill(valve, 10, T0)
    assert not valve.holds("n10")
    fill(valve, 11, T0)  # the 11th is refused and opens it
    assert valve.holds("n10") and not valve.holds("n0")
    assert valve.tick(T0 + 60) is False  # closed by itself: nothing held any more
    assert not valve.holds("n10")
    fill(valve, 12, T0 + 61)
    assert valve.holds("n11")
    valve.reset()  # the operator released them
    assert not valve.holds("n11")


def test_forget_releases_a_held_key_without_counting_it() -> None:
    valve = DrainValve()
    fill(valve, 11, T0)  # the 11th is held back
    assert valve.holds("n10")
    valve.forget("n10")  # it drained for an explicit cause meanwhile
    assert not valve.holds("n10") and "n10" not in valve.pending
    assert valve.is_open  # the storm of automatic drains goes on
    valve.forget("never-seen")  # harmless
