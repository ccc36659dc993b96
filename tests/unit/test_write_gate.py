"""The switch every write passes (syncer/control/gate.py), on a clock the test moves: open only while a
granted term runs (or always, running alone), closed at once on revoke and for good on halt, and never
letting a write out in dry-run mode."""

from __future__ import annotations

import pytest

from syncer.control.gate import NotLeader, WriteGate


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def gate_at(now: float, **kwargs: bool) -> tuple[WriteGate, Clock]:
    clock = Clock(now)
    return WriteGate(clock=clock, **kwargs), clock


def test_a_new_gate_leads_only_when_running_alone() -> None:
    gate, _ = gate_at(0.5)
    assert not gate.leading
    assert WriteGate(always_leader=True, clock=Clock(0.5)).leading


def test_a_term_granted_now_runs_for_its_length_and_ends_at_its_deadline() -> None:
    gate, clock = gate_at(100.0)
    gate.grant(10.0)
    assert gate.leading
    clock.now = 109.9
    assert gate.leading
    clock.now = 110.0  # the deadline itself is past the safe window
    assert not gate.leading


def test_a_term_runs_from_when_its_renewal_was_sent_not_from_now() -> None:
    gate, clock = gate_at(100.0)
    gate.grant(10.0, since=95.0)  # the answer came 5 s late: 5 s of the term are gone
    clock.now = 104.9
    assert gate.leading
    clock.now = 105.0
    assert not gate.leading


def test_a_renewal_sent_at_clock_zero_still_counts_from_zero() -> None:
    gate, clock = gate_at(3.0)
    gate.grant(5.0, since=0.0)
    assert gate.leading
    clock.now = 5.0
    assert not gate.leading


def test_a_later_grant_extends_the_term() -> None:
    gate, clock = gate_at(100.0)
    gate.grant(10.0)
    clock.now = 108.0
    gate.grant(10.0)
    clock.now = 115.0
    assert gate.leading


def test_revoke_closes_at_once_and_a_new_grant_opens_again() -> None:
    gate, _ = gate_at(100.0)
    gate.grant(10.0)
    gate.revoke()
    assert not gate.leading and gate.halted is False
    gate.grant(10.0)
    assert gate.leading


def test_revoke_closes_whatever_the_clock_reads_from_zero_on() -> None:
    gate, _ = gate_at(0.5)  # a clock that started at 0, as a test's or a fresh boot's
    gate.grant(10.0)
    gate.revoke()
    assert not gate.leading


def test_a_gate_is_not_halted_until_halt() -> None:
    gate, _ = gate_at(100.0)
    assert gate.halted is False
    gate.revoke()
    assert gate.halted is False
    gate.halt()
    assert gate.halted is True


def test_halt_closes_for_good_even_running_alone_or_granted_again() -> None:
    gate, _ = gate_at(100.0, always_leader=True)
    gate.halt("a loop failed")
    assert gate.halted and not gate.leading
    gate.grant(10.0)
    assert not gate.leading


def test_check_lets_a_write_out_while_leading() -> None:
    gate, _ = gate_at(100.0)
    gate.grant(10.0)
    assert gate.check() is True
    assert gate.refused == 0


def test_check_says_no_write_in_dry_run_mode_though_leading() -> None:
    gate, _ = gate_at(100.0, dry_run=True, always_leader=True)
    assert gate.dry_run
    assert gate.check() is False
    assert gate.refused == 0


def test_a_gate_is_not_dry_run_unless_told() -> None:
    gate, _ = gate_at(100.0, always_leader=True)
    assert gate.dry_run is False
    assert gate.check() is True


def test_check_refuses_every_write_when_not_leading_and_counts_each() -> None:
    gate, clock = gate_at(100.0, dry_run=True)
    for expected in (1, 2):
        with pytest.raises(NotLeader, match=r"^not the leader: write refused$"):
            gate.check()
        assert gate.refused == expected
    gate.grant(10.0)
    clock.now = 110.0
    with pytest.raises(NotLeader):
        gate.check()
    assert gate.refused == 3


def test_the_default_clock_is_the_monotonic_one_the_elector_sends_its_since_on() -> None:
    import time

    gate = WriteGate()
    gate.grant(60.0, since=time.monotonic())
    assert gate.leading
    gate.grant(60.0, since=time.monotonic() - 61.0)
    assert not gate.leading
    gate.grant(60.0)  # from now, on the same clock
    assert gate.leading
