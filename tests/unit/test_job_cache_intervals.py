"""The job cache's two quick reads (issue 44, benchmarks/RESULTS.md "Scheduler"): which jobs the frequent
state read covers (those not yet ended, and those tracked and not yet read), and when a pending job that
this process submitted is read whole again (its reason: 1, 2, 4, ... s after the submit, then every
`pending_interval_s`)."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from syncer.model.jobs import SlurmJob
from syncer.slurm.auth import StaticToken
from syncer.slurm.client import SlurmClient
from syncer.slurm.job_cache import JobCache
from syncer.slurm.jobs import JobListing


def cache(**options: Any) -> JobCache:
    # never started: these rules read no Slurm
    return JobCache(SlurmClient("http://127.0.0.1:9", StaticToken("unused")), owned=lambda _: True, **options)


def job(job_id: int, *state: str) -> SlurmJob:
    return SlurmJob(job_id=job_id, state=frozenset(state))


def test_a_pending_job_submitted_here_is_read_again_at_twice_its_age_up_to_the_pending_interval() -> None:
    found = cache(pending_first_s=1.0, pending_interval_s=30.0)
    tracked, read_at, reads = 100.0, 100.0, []
    while read_at - tracked < 100:
        read_at += found.pending_every_s(read_at, tracked)
        reads.append(round(read_at - tracked, 3))
    assert reads[:7] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 62.0]
    assert all(b - a == 30.0 for a, b in itertools.pairwise(reads[5:])), "then every 30 s"


def test_the_first_read_again_waits_pending_first_s_and_no_longer_than_the_pending_interval() -> None:
    found = cache(pending_first_s=1.5, pending_interval_s=10.0)
    assert found.pending_every_s(100.0, 100.0) == 1.5, "read at the submit: again after pending_first_s"
    assert found.pending_every_s(100.2, 100.0) == 1.5
    assert found.pending_every_s(103.0, 100.0) == 3.0
    assert found.pending_every_s(150.0, 100.0) == 10.0


def test_without_pending_first_s_or_for_an_adopted_job_the_pending_interval_holds() -> None:
    assert cache(pending_interval_s=30.0).pending_every_s(100.0, 100.0) == 30.0
    assert cache(pending_first_s=1.0, pending_interval_s=30.0).pending_every_s(100.0, None) == 30.0


def test_the_frequent_state_read_covers_the_jobs_not_yet_ended_and_those_not_yet_read() -> None:
    found = cache(live_interval_s=0.25)
    found.jobs = {
        1: job(1, "PENDING"), 2: job(2, "RUNNING"), 3: job(3, "CANCELLED"), 4: job(4, "COMPLETED"),
        5: job(5, "CANCELLED", "COMPLETING"),
    }  # fmt: skip
    found.track(6)
    assert found.live_ids() == {1, 2, 6}


def test_the_poll_wakes_for_the_frequent_read_only_while_a_job_is_not_yet_ended() -> None:
    found = cache(poll_interval_s=1.0, live_interval_s=0.25, pending_first_s=0.5)
    assert found._poll_delay() == 1.0, "no job: the states interval"
    found.jobs = {3: job(3, "CANCELLED")}
    assert found._poll_delay() == 1.0, "an ended job is read with the rest every poll_interval_s"
    found.jobs[2] = job(2, "RUNNING")
    assert found._poll_delay() == 0.25
    plain = cache(poll_interval_s=1.0, pending_first_s=0.5)
    plain.jobs = {1: job(1, "PENDING")}
    assert plain._poll_delay() == 0.5, "a pending job's early reads are not late by a whole poll"


def listing(started: float, *jobs: SlurmJob) -> JobListing:
    return JobListing(jobs=jobs, total=len(jobs), last_update=1, body_bytes=0, seconds=0.0, started=started)


def test_a_tracked_job_leaves_the_cache_only_when_a_read_sent_after_its_track_finds_it_gone() -> None:
    found = cache()
    sent_before = time.monotonic()
    found.track(7)
    found._apply_list(listing(sent_before))  # a list sent before the submit cannot show the job
    assert found.tracked == {7} and found.live_ids() == {7}, "kept, and still to be read"
    found._apply_list(listing(time.monotonic()))  # a list sent after: Slurm has it no more
    assert found.tracked == frozenset() and found.live_ids() == set()
    found.track(8)
    found._apply_one(8, job(8, "RUNNING"), time.monotonic())
    found._apply_one(8, None, time.monotonic())  # a state read that no longer finds it
    assert found.tracked == frozenset() and 8 not in found.jobs


def test_a_job_tracked_right_after_its_fresh_read_is_not_read_whole_again() -> None:
    found = cache()
    found._apply_one(9, job(9, "RUNNING"), time.monotonic())  # as fresh() leaves it
    found.track(9, read=True)
    assert found.tracked == {9} and found._unread == set(), "no second whole read of it at the next poll"
    found.track(10)
    assert found._unread == {10}


async def test_a_live_job_brought_in_by_another_read_cuts_a_long_pause_to_the_live_interval() -> None:
    """After an allocation the scheduler reads the job (`fresh()`, RUNNING) while the poll loop may be in a
    pause of `poll_interval_s` (no job was live when it began): the pause then ends `live_interval_s` after
    the last live read, so the job's end is not seen a whole poll interval late."""
    found = cache(poll_interval_s=600.0, live_interval_s=0.25)
    found._lived_at = time.monotonic() - 1.0  # the last live read a second ago: due at once
    pause = asyncio.create_task(found._pause())
    await asyncio.sleep(0)
    assert not pause.done(), "nothing live: a whole poll interval"
    found._apply_one(9, job(9, "RUNNING"), time.monotonic())  # as fresh() leaves it
    await asyncio.wait_for(pause, 10)
    found._lived_at = time.monotonic()  # just read: the pause ends one live interval later
    pause = asyncio.create_task(found._pause())
    await asyncio.wait_for(pause, 10)


async def test_an_ended_job_read_does_not_end_the_pause_and_a_job_to_read_ends_it_at_once() -> None:
    found = cache(poll_interval_s=600.0, live_interval_s=0.25)
    found._lived_at = time.monotonic() - 1.0
    found._apply_one(3, job(3, "CANCELLED"), time.monotonic())
    assert not found._wake.is_set(), "nothing to follow quickly"
    without = cache(poll_interval_s=600.0)
    without._apply_one(4, job(4, "RUNNING"), time.monotonic())
    assert not without._wake.is_set(), "no live interval: the poll interval holds"
    found._lived_at = time.monotonic()
    pause = asyncio.create_task(found._pause())  # no job live: a pause of 600 s
    await asyncio.sleep(0)
    found.track(6)  # submitted, not read yet: read at once
    await asyncio.wait_for(pause, 10)
    assert found._read_now
