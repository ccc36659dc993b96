"""The valve's sliding window of attempts and the lifetime of an operator's grant (mutation testing found
both unchecked)."""

from __future__ import annotations

import pytest

from syncer.controllers.sync.valve import DrainValve

T0 = 1_000.0
BOUND = 20  # threshold 2 at 10 %


def test_a_key_attempted_again_moves_to_the_end_of_the_window() -> None:
    valve = DrainValve(window_s=60.0)
    assert valve.admit("a", T0, BOUND) and valve.admit("b", T0, BOUND)
    assert not valve.admit("c", T0, BOUND)  # opens
    assert not valve.admit("a", T0 + 50, BOUND)  # a tries again late in the window
    # a full window after opening, b and c are older than the window and only a's late attempt is left:
    # one attempt is fewer than the threshold (2), the storm subsided, the valve closes
    assert not valve.tick(T0 + 70, BOUND)


def test_the_valve_stays_open_while_the_window_still_holds_enough_attempts() -> None:
    valve = DrainValve(window_s=60.0)
    valve.admit("a", T0, BOUND)
    valve.admit("b", T0, BOUND)
    valve.admit("c", T0, BOUND)
    valve.admit("a", T0 + 50, BOUND)
    valve.admit("b", T0 + 55, BOUND)
    assert valve.tick(T0 + 70, BOUND)  # a and b within the last window: 2 attempts, not fewer than 2


def test_an_operator_grant_lasts_one_window_from_its_first_use() -> None:
    valve = DrainValve(window_s=60.0)
    valve.admit("a", T0, BOUND)
    valve.admit("b", T0, BOUND)
    assert not valve.admit("x", T0, BOUND)  # refused: pending
    valve.reset()  # the operator lets x through
    assert valve.admit("x", T0 + 100, BOUND)  # first use of the grant
    assert valve.admit("y", T0 + 150, BOUND)  # x was not counted: y fits
    assert valve.admit("x", T0 + 159, BOUND)  # within a window of its first use: still granted
    # a window after its first use the grant is gone: x counts again, beside y the threshold is reached
    assert valve.admit("z", T0 + 159, BOUND)
    assert not valve.admit("x", T0 + 161, BOUND)
    assert valve.is_open


def test_an_unused_grant_waits() -> None:
    valve = DrainValve(window_s=60.0)
    valve.admit("a", T0, BOUND)
    valve.admit("b", T0, BOUND)
    valve.admit("x", T0, BOUND)
    valve.reset()
    valve.admit("c", T0 + 1, BOUND)
    valve.admit("d", T0 + 1, BOUND)
    assert valve.admit("x", T0 + 1_000, BOUND)  # unused grants never expire


def test_settings_errors_name_the_setting_and_edges_are_allowed() -> None:
    with pytest.raises(ValueError, match=r"^max_fraction must be in \(0, 1\]$"):
        DrainValve(max_fraction=0.0)
    with pytest.raises(ValueError, match=r"^window_s must be positive$"):
        DrainValve(window_s=0.0)
    assert DrainValve(max_fraction=1.0).threshold(10) == 10  # 1.0 is allowed
    assert DrainValve(window_s=0.5).window_s == 0.5  # below a second is allowed


def test_a_fresh_and_a_reset_valve_read_closed() -> None:
    valve = DrainValve(min_nodes=2)  # no floor beyond one: the second drain trips it
    assert valve.is_open is False and valve.opened_at is None and valve.refused == 0
    valve.admit("a", T0, 10)
    assert not valve.admit("b", T0, 10)
    assert valve.is_open is True and valve.opened_at == T0 and valve.refused == 1
    valve.reset()
    assert valve.is_open is False and valve.opened_at is None


def test_it_stays_open_for_a_full_window_even_if_the_cluster_grows() -> None:
    valve = DrainValve(window_s=60.0)
    valve.admit("a", T0, BOUND)
    valve.admit("b", T0, BOUND)
    valve.admit("c", T0, BOUND)
    # 1,000 bound nodes now: three attempts are far below the new threshold, but the window is not over
    assert valve.tick(T0 + 30, 1_000)
    assert not valve.tick(T0 + 60, 1_000)


def test_a_grant_expires_exactly_one_window_after_its_first_use() -> None:
    valve = DrainValve(window_s=60.0)
    valve.admit("a", T0, BOUND)
    valve.admit("b", T0, BOUND)
    valve.admit("x", T0, BOUND)
    valve.reset()
    assert valve.admit("x", T0 + 100, BOUND)
    valve.admit("y", T0 + 130, BOUND)
    valve.admit("z", T0 + 130, BOUND)
    assert not valve.admit("x", T0 + 160, BOUND)  # 60 s after its first use: no longer granted


def test_defaults_are_ten_percent_per_minute() -> None:
    valve = DrainValve()
    assert valve.max_fraction == 0.10 and valve.window_s == 60.0
