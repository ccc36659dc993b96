"""A refusal of Slurm's belongs to the pods it was made for (syncer/controllers/scheduler/refusals.py)."""

from __future__ import annotations

from syncer.controllers.scheduler.refusals import Refused, standing

REFUSED = Refused(retry_at=100.0, why="Slurm refused the job: bad constraint", uids=frozenset({"a", "b"}))


def test_the_same_pods_wait_until_the_retry_is_due() -> None:
    assert standing(REFUSED, ["b", "a"], 99.9) is REFUSED  # the order of the pods is no change
    assert standing(REFUSED, ["a", "b"], 100.0) is None
    assert standing(REFUSED, ["a", "b"], 250.0) is None


def test_a_pod_made_again_with_the_same_name_is_not_held_back() -> None:
    # same gang key, a new UID for one pod (deleted and made again, maybe fixed): submitted at once
    assert standing(REFUSED, ["a", "c"], 50.0) is None
    assert standing(Refused(100.0, "no", frozenset({"old"})), ["new"], 50.0) is None


def test_a_gang_that_lost_or_gained_pods_is_not_held_back() -> None:
    assert standing(REFUSED, ["a"], 50.0) is None
    assert standing(REFUSED, ["a", "b", "c"], 50.0) is None


def test_no_refusal_holds_nothing_back() -> None:
    assert standing(None, ["a"], 0.0) is None
