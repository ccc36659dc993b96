"""check's line for two releases serving one scheduler name (docs/scheduler.md "Two releases, one
schedulerName"): live jobs of another release's marker naming pods of ours are named with the fix."""

from __future__ import annotations

from typing import Any

from syncer.app.check_scheduler import shared
from syncer.controllers.scheduler import marker
from syncer.controllers.scheduler.values import PodRef
from syncer.model.jobs import SlurmJob

OURS = "ns/green:sched"
PODS: list[dict[str, Any]] = [
    {"metadata": {"name": "a", "uid": "u-a"}},
    {"metadata": {"name": "b", "uid": "u-b"}},
]


def job(job_id: int, release: str, *uids: str, state: str = "RUNNING") -> SlurmJob:
    text = marker.write(release, f"ns/pod/{uids[0]}", [PodRef(namespace="ns", name=u, uid=u) for u in uids])
    return SlurmJob(job_id=job_id, state=frozenset({state}), marker=text)


def test_another_releases_live_job_naming_our_pods_is_named_with_the_fix() -> None:
    jobs = [job(7, "ns/blue:sched", "u-a"), job(9, "ns/blue:sched", "u-b"), job(8, "ns/red:sched", "u-b")]
    ok, what, fix, warn = shared(PODS, jobs, OURS)
    assert not ok and warn
    assert what == (
        "scheduler: another slurm-syncer release serves this scheduler name too (this is ns/green:sched): "
        "ns/blue:sched: Slurm job(s) 7, 9; ns/red:sched: Slurm job(s) 8"
    )
    assert "run one release per --scheduler-name" in fix


def test_ours_ended_or_naming_no_pod_of_ours_is_fine() -> None:
    jobs = [
        job(1, OURS, "u-a"),  # ours
        job(2, "ns/blue:sched", "u-a", state="COMPLETED"),  # ended
        job(5, "ns/blue:sched", "u-b", state="COMPLETING"),  # ending: the controller counts it ended too
        job(3, "ns/blue:other", "u-z"),  # another name's pods
        SlurmJob(job_id=4, state=frozenset({"RUNNING"}), marker="an admin's note u-a"),
    ]
    assert shared(PODS, jobs, OURS) == (True, "scheduler: no other release's job names its pods", "", False)
    assert shared([], [job(7, "ns/blue:sched", "u-a")], OURS)[0]
