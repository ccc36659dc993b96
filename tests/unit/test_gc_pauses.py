"""A full GC pass walks only what became long-lived since the last one (syncer/runtime/gc_pauses.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from syncer.runtime.gc_pauses import FreezeAfterFullPasses


class Node:
    """A cyclic pair's half (a weak reference tells whether it was collected)."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> tuple[Node, weakref.ref[Node]]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a, weakref.ref(a)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def freezer() -> Iterator[tuple[FreezeAfterFullPasses, Clock]]:
    clock = Clock()
    policy = FreezeAfterFullPasses(thaw_every_s=600.0, clock=clock)
    gc.collect()
    policy.install()
    try:
        yield policy, clock
    finally:
        policy.uninstall()
        gc.collect()


def test_a_full_pass_freezes_its_survivors(freezer: tuple[FreezeAfterFullPasses, Clock]) -> None:
    policy, _ = freezer
    kept = [Node() for _ in range(1000)]  # long-lived objects, as the caches hold
    gc.collect()
    assert gc.get_freeze_count() >= len(kept)  # the next full pass does not walk them
    assert policy.freezes == 1
    young = [Node() for _ in range(10)]
    assert all(gc.is_tracked(n) for n in young)
    assert gc.get_freeze_count() >= len(kept)


def test_a_cycle_made_after_a_freeze_is_still_collected(freezer: tuple[FreezeAfterFullPasses, Clock]) -> None:
    gc.collect()
    made, alive = cycle()
    del made
    gc.collect()
    assert alive() is None


def test_a_cycle_that_became_garbage_frozen_is_collected_after_the_thaw(
    freezer: tuple[FreezeAfterFullPasses, Clock],
) -> None:
    policy, clock = freezer
    held, alive = cycle()
    gc.collect()  # frozen while still referenced
    del held
    gc.collect()
    assert alive() is not None  # frozen garbage: not walked until the thaw
    clock.now += 600.0
    gc.collect()  # this full pass ends with the thaw
    assert policy.thaws == 1 and gc.get_freeze_count() == 0
    gc.collect()  # the first full pass after it walks everything
    assert alive() is None
    assert gc.get_freeze_count() > 0  # and freezes again


def test_uninstalled_nothing_stays_frozen(freezer: tuple[FreezeAfterFullPasses, Clock]) -> None:
    policy, _ = freezer
    gc.collect()
    assert gc.get_freeze_count() > 0
    policy.uninstall()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gc.get_freeze_count() == 0
