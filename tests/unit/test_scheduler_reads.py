"""How old the read of a job may be that the scheduler's writes rest on (controller.py): a pod is deleted for
its job's end on the job cache's own read of that end if it is at most ENDED_READ_AGE_S old (an ended job
stays ended); any other deletion reads the job now."""

from __future__ import annotations

import pytest

from syncer.controllers.scheduler import marker
from syncer.controllers.scheduler.controller import ENDED_READ_AGE_S, LIVE_INTERVAL_S, delete_read_age
from syncer.controllers.scheduler.values import Job, PodRef

RELEASE = "me:slurm-syncer"
POD = PodRef(namespace="ns", name="web-0", uid="u-1")
MARKER = marker.read(marker.write(RELEASE, "ns/pod/web-0", [POD]), RELEASE)


def job(state: str, *flags: str) -> Job:
    assert MARKER is not None
    return Job(job_id=7, state=state, flags=frozenset(flags), marker=MARKER, nodes=("n1",))


@pytest.mark.parametrize(
    ("state", "flags"),
    [("CANCELLED", ()), ("COMPLETED", ()), ("TIMEOUT", ()), ("NODE_FAIL", ()), ("PREEMPTED", ()),
     ("FAILED", ()), ("RUNNING", ("COMPLETING",))],
)  # fmt: skip
def test_an_ended_jobs_pod_is_deleted_on_the_caches_read_of_the_end(state: str, flags: tuple[str]) -> None:
    assert delete_read_age(job(state, *flags)) == ENDED_READ_AGE_S > 0


@pytest.mark.parametrize("state", ["RUNNING", "PENDING", "SUSPENDED"])
def test_a_pod_whose_job_still_holds_its_resources_is_deleted_only_on_a_read_made_now(state: str) -> None:
    """Preempted (GraceTime), a duplicate, a pod on a Node gone, requeued: the job is read again first."""
    assert delete_read_age(job(state)) == 0.0


def test_a_job_slurm_no_longer_shows_is_read_now_and_the_age_is_no_older_than_the_live_reads() -> None:
    assert delete_read_age(None) == 0.0
    assert ENDED_READ_AGE_S <= LIVE_INTERVAL_S, "never older than the cache's own live state reads"
