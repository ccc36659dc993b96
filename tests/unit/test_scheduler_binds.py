"""The scheduler's memory of its own binds (binds.py): kept until evidence ends it, never for a time only (an
informer can lag longer than any bound: the job of a bound pod would be cancelled for placement, then the pod
deleted); read back from the API server when its answer was lost and every `shows_s` while unshown; warned of
once; bounded by count."""

from __future__ import annotations

import pytest

from syncer.controllers.scheduler.binds import BINDS_MAX, BindMemory, MadeBind, read_back, unshown_bind
from syncer.controllers.scheduler.plan import Bind
from syncer.controllers.scheduler.values import PodRef
from syncer.model.kube import SchedulerPod

SHOWS_S = 30.0


def bind(uid: str = "u-1", name: str = "web-0", node: str = "k1") -> Bind:
    return Bind(pod=PodRef(namespace="ns", name=name, uid=uid), node=node, job_id=7, slurm_node="n1")


def pod(uid: str = "u-1", node: str = "", name: str = "web-0") -> SchedulerPod:
    return SchedulerPod(namespace="ns", name=name, uid=uid, node_name=node)


def test_the_informer_ends_a_bind_by_showing_the_pod_bound_or_gone_never_by_its_age() -> None:
    made = MadeBind(bind(), at=100.0)
    assert unshown_bind(made, pod()) == ""  # unbound still: kept, however long ago it was made
    assert unshown_bind(made, pod(node="k1")) == "shown"
    assert unshown_bind(made, pod(node="k2")) == "shown"  # elsewhere: the informer's word wins
    assert unshown_bind(made, None) == "gone"
    assert unshown_bind(made, pod(uid="u-2")) == "gone"  # made anew under that name
    assert unshown_bind(made, pod(uid="u-2", node="k1")) == "gone"


def test_the_api_server_shows_a_bind_made_only_with_that_pod_on_that_node() -> None:
    made = MadeBind(bind(), at=100.0)
    assert read_back(made, pod(node="k1"))
    assert not read_back(made, pod())  # unbound: the bind was not made
    assert not read_back(made, pod(node="k2"))  # bound elsewhere: not ours
    assert not read_back(made, None)
    assert not read_back(made, pod(uid="u-2", node="k1"))


def test_a_bind_is_kept_while_the_informer_lags_whatever_its_age_and_warned_of_once() -> None:
    memory = BindMemory(SHOWS_S)
    memory.add(bind(), 100.0)
    unbound = {("ns", "web-0"): pod()}

    def shown(namespace: str, name: str) -> SchedulerPod | None:
        return unbound.get((namespace, name))

    assert memory.sweep(shown, 100.0 + SHOWS_S) == ([], [])
    assert memory.of({"u-1"}) == {bind()}
    ended, late = memory.sweep(shown, 100.0 + SHOWS_S + 0.01)
    assert ended == [] and [m.bind for m in late] == [bind()]
    for now in (200.0, 1e6):  # never forgotten for its age, never warned of again
        assert memory.sweep(shown, now) == ([], [])
        assert memory.of({"u-1"}) == {bind()}
    unbound[("ns", "web-0")] = pod(node="k1")
    ended, late = memory.sweep(shown, 1e6)  # the informer shows it at last: said, as it was warned of
    assert [m.bind for m in ended] == [bind()] and late == []
    assert memory.made == {} and memory.of({"u-1"}) == frozenset()


def test_a_bind_shown_or_gone_before_its_warning_ends_quietly() -> None:
    memory = BindMemory(SHOWS_S)
    memory.add(bind("u-1", "a"), 100.0)
    memory.add(bind("u-2", "b"), 100.0)
    memory.add(bind("u-3", "c"), 100.0)
    informer = {"a": pod("u-1", "k1", "a"), "c": pod("u-9", "", "c")}  # a bound, b deleted, c made anew
    assert memory.sweep(lambda _, name: informer.get(name), 100.5) == ([], [])
    assert memory.made == {}


def test_only_the_gangs_pods_binds_are_planned_on() -> None:
    memory = BindMemory(SHOWS_S)
    memory.add(bind("u-1", "a"), 100.0)
    memory.add(bind("u-2", "b"), 100.0)
    assert memory.of({"u-2", "u-3"}) == {bind("u-2", "b")}
    assert memory.due({"u-2"}, 100.0 + SHOWS_S + 1) == [MadeBind(bind("u-2", "b"), 100.0, read_at=100.0)]


def test_a_bind_whose_answer_was_lost_is_read_back_at_once_and_then_kept_or_forgotten() -> None:
    memory = BindMemory(SHOWS_S)
    memory.add(bind(), 100.0, answered=False)
    (made,) = memory.due({"u-1"}, 100.0)
    assert not made.answered
    assert memory.settle(made, pod(node="k1"), 101.0) is True  # made: kept as answered
    assert memory.made["u-1"] == MadeBind(bind(), 100.0, answered=True, read_at=101.0)
    assert memory.due({"u-1"}, 101.0) == []
    memory.add(bind(), 102.0, answered=False)
    (made,) = memory.due({"u-1"}, 102.0)
    assert memory.settle(made, pod(), 102.5) is False  # not made: the plan decides again
    assert memory.made == {}


def test_a_bind_the_informer_does_not_show_is_read_back_every_shows_s() -> None:
    memory = BindMemory(SHOWS_S)
    memory.add(bind(), 100.0)
    assert memory.due({"u-1"}, 100.0 + SHOWS_S) == []
    (made,) = memory.due({"u-1"}, 100.0 + SHOWS_S + 0.01)
    assert memory.settle(made, pod(node="k1"), 131.0) is True  # the API server shows it: kept, read now
    assert memory.due({"u-1"}, 131.0 + SHOWS_S) == []
    assert memory.due({"u-1"}, 131.0 + SHOWS_S + 0.01) == [memory.made["u-1"]]
    (made,) = memory.due({"u-1"}, 200.0)
    assert memory.settle(made, None, 200.0) is False  # deleted, the informer still behind: forgotten
    assert memory.of({"u-1"}) == frozenset()


def test_a_read_back_keeps_the_warning_and_does_not_bring_back_a_bind_ended_meanwhile() -> None:
    memory = BindMemory(SHOWS_S)
    memory.add(bind(), 100.0)
    memory.sweep(lambda *_: pod(), 200.0)  # warned of
    (made,) = memory.due({"u-1"}, 200.0)
    assert memory.settle(made, pod(node="k1"), 201.0) is True
    assert memory.made["u-1"].warned  # not warned of again
    (made,) = memory.due({"u-1"}, 300.0)
    memory.sweep(lambda *_: pod(node="k1"), 300.0)  # another gang's pass: the informer shows it now
    assert memory.settle(made, pod(node="k1"), 300.1) is True  # made (told as such), not remembered again
    assert memory.made == {}
    assert memory.settle(made, None, 300.2) is False


def test_due_binds_are_read_back_in_one_order() -> None:
    memory = BindMemory(SHOWS_S)
    memory.add(bind("u-2", "b"), 100.0, answered=False)
    memory.add(bind("u-1", "a"), 100.0, answered=False)
    assert [m.bind.pod.uid for m in memory.due({"u-1", "u-2"}, 100.0)] == ["u-1", "u-2"]


@pytest.mark.parametrize("limit", [2, BINDS_MAX])
def test_the_memory_is_bounded_by_count(limit: int) -> None:
    """Full: the controller binds nothing more until the informer shows some (none is forgotten)."""
    memory = BindMemory(SHOWS_S) if limit == BINDS_MAX else BindMemory(SHOWS_S, limit)
    for i in range(limit - 1):
        memory.add(bind(f"u-{i}", f"p-{i}"), 100.0)
    assert not memory.full
    memory.add(bind("u-0", "p-0", node="k2"), 101.0)  # the same pod again: no room taken
    assert not memory.full
    memory.add(bind("last", "last"), 100.0)
    assert memory.full


def test_the_gauges_count_the_binds_unshown_now_forgetting_none() -> None:
    """Between the passes that sweep, the gauges read the memory against the informer as it stands: a bind it
    shows (or whose pod is gone) is not counted, yet stays until a sweep ends it."""
    memory = BindMemory(SHOWS_S)
    memory.add(bind("u-1", "web-0"), 100.0)
    memory.add(bind("u-2", "web-1"), 101.0)
    memory.add(bind("u-3", "web-2"), 102.0)
    informer = {
        ("ns", "web-0"): pod("u-1", name="web-0"),
        ("ns", "web-1"): pod("u-2", node="k1", name="web-1"),
    }

    def shown(namespace: str, name: str) -> SchedulerPod | None:
        return informer.get((namespace, name))

    assert [made.bind for made in memory.unshown(shown)] == [bind("u-1", "web-0")]
    assert len(memory.made) == 3
