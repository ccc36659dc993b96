"""The controller's rules on what Slurm said (controller.py): how old the read of a job may be that a
pod's deletion rests on (the job cache's own read of the job's end if it is at most ENDED_READ_AGE_S old:
an ended job stays ended; any other deletion reads the job now), which answers to an immediate
allocation are Slurm's refusal (the job is then submitted) rather than a lost answer (the job may run: it is
looked for), which jobs it cancelled the job cache shows from a read older than the cancel, and which failed
binds are read back (how long a bind is remembered: test_scheduler_binds.py)."""

from __future__ import annotations

import pytest

from syncer.controllers.scheduler import marker
from syncer.controllers.scheduler.controller import (
    ENDED_READ_AGE_S,
    LIVE_INTERVAL_S,
    allocation_refused,
    awaited_cancels,
    bind_unanswered,
    delete_read_age,
    submit_refused,
)
from syncer.controllers.scheduler.values import Job, PodRef
from syncer.kube.errors import KubeConnectionError, KubeError
from syncer.slurm.errors import SlurmApiError, SlurmMessage

RELEASE = "me:slurm-syncer"
POD = PodRef(namespace="ns", name="web-0", uid="u-1")
MARKER = marker.read(marker.write(RELEASE, "ns/pod/web-0", [POD]), RELEASE)


def job(state: str, *flags: str, job_id: int = 7) -> Job:
    assert MARKER is not None
    return Job(job_id=job_id, state=state, flags=frozenset(flags), marker=MARKER, nodes=("n1",))


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


def refusal(status: int, *numbers: int) -> SlurmApiError:
    errors = tuple(SlurmMessage(error_number=n, error="Requested nodes are busy") for n in numbers)
    return SlurmApiError("Slurm refused", endpoint="job_allocate", status=status, errors=errors)


@pytest.mark.parametrize("number", [2016, 2013, 2035, 2038, 2011, 9999])
def test_any_error_slurm_gives_an_allocation_is_its_refusal_and_the_job_is_then_submitted(
    number: int,
) -> None:
    """No room (busy, not first in line) or anything else Slurm refuses (a bad partition, a QOS): no job
    runs for the try, so the job is submitted (which waits, or is refused saying why)."""
    assert allocation_refused(refusal(422, number))
    assert allocation_refused(refusal(400, number)) and allocation_refused(refusal(499, number))


@pytest.mark.parametrize(
    ("status", "numbers"), [(500, (2016,)), (502, ()), (422, ()), (399, (2016,)), (0, ())]
)
def test_an_answer_without_slurms_refusal_says_nothing_and_the_job_is_looked_for(
    status: int, numbers: tuple[int, ...]
) -> None:
    """A 5xx (slurmrestd's own failure), a 4xx without Slurm's errors: the job may run (found by marker)."""
    assert not allocation_refused(refusal(status, *numbers))


@pytest.mark.parametrize(
    ("status", "numbers"),
    [
        (422, (2000,)),
        (500, (2000,)),
        (500, (2029,)),
        (500, (2014,)),
        (400, ()),
        (401, ()),
        (429, ()),
        (499, ()),
    ],
)
def test_a_submit_slurm_refused_is_said_on_the_pods_and_tried_again_later(
    status: int, numbers: tuple[int, ...]
) -> None:
    """26.05 refuses with 422, 24.11 with 500 and Slurm's error number; a 4xx was turned away before a job."""
    assert submit_refused(refusal(status, *numbers))


@pytest.mark.parametrize("status", [500, 502, 503, 504, 0])
def test_a_submit_answered_without_slurms_word_may_have_made_its_job_which_is_looked_for(status: int) -> None:
    """A gateway's 504 after slurmrestd took the submit: a second submit could make a second job."""
    assert not submit_refused(refusal(status))
    described = SlurmApiError("slurmrestd failed", endpoint="job_submit", status=status,
                              errors=(SlurmMessage(description="injected fault"),))  # fmt: skip
    assert not submit_refused(described), "a description without Slurm's number is not Slurm's refusal"


def test_a_cancelled_job_is_awaited_while_the_cache_shows_it_from_a_read_sent_before_the_answer() -> None:
    """The CI race (26.05): the cache's copy of job 7, read 0.1 s before our cancel was answered, showed it
    RUNNING; a bind rested on it. Awaited until a read sent after the answer shows it (ended, or live: the
    cancel did not take, and the plan decides again)."""
    cancels = {7: 100.0, 8: 100.0}
    reads = {7: 99.9, 8: 99.9, 9: 50.0}
    live = [job("RUNNING", job_id=7), job("PENDING", job_id=8), job("RUNNING", job_id=9)]
    assert awaited_cancels(cancels, live, reads.get) == {7, 8}  # 9: not cancelled here
    unread: dict[int, float] = {}
    assert awaited_cancels(cancels, live, unread.get) == {7, 8}  # never read whole: as old
    assert awaited_cancels(cancels, live, {7: 100.0, 8: 100.0}.get) == {7, 8}  # sent as it was answered
    assert awaited_cancels(cancels, live, {7: 100.1, 8: 99.9}.get) == {8}  # a later read shows 7 live
    ended = [job("CANCELLED", job_id=7), job("RUNNING", "COMPLETING", job_id=8)]
    assert awaited_cancels(cancels, ended, reads.get) == frozenset()  # shown ended, whenever read


@pytest.mark.parametrize(
    ("error", "unanswered"),
    [
        (KubeConnectionError("POST .../binding: TimeoutError"), True),
        (KubeError(500, "InternalError", "etcd failed"), True),
        (KubeError(504, "Timeout", "request did not complete within requested timeout"), True),
        (KubeError(409, "Conflict", 'pod web-0 is already assigned to node "k2"'), False),
        (KubeError(403, "Forbidden", "no"), False),
        (KubeError(429, "TooManyRequests", "slow down"), False),
        (KubeError(499, "Odd", "a 4xx all the same"), False),
    ],
)
def test_a_bind_answered_without_saying_it_was_not_made_is_read_back(
    error: KubeError, unanswered: bool
) -> None:
    """No answer, or a 5xx (the API server may have written the pod first): the pod may be bound, so it is
    read before the gang is planned again (a placement cancel would lose it); a 4xx says it was not made."""
    assert bind_unanswered(error) is unanswered
