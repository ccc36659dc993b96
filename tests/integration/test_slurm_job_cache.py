"""The job cache against the real slurmrestd (issue 44), on both releases: it adopts our jobs by their marker
with one whole list, then follows them with per-job reads whose cost does not grow with the queue; a submit
whose answer was lost is found by `resync()`; `fresh()` reads one job now; stale data is visible with its
cause; on 26.05 slurmctld's job gauges spare the state reads while no job moves. Jobs land on the session
sandbox's real node and are cancelled at the end of each test."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from syncer.model.jobs import JobSubmission
from syncer.slurm.auth import StaticToken, TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.job_cache import JobCache, JobChange
from syncer.slurm.metrics_hint import MetricsReader
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.sandbox import REAL_NODE, Sandbox
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

pytestmark = pytest.mark.slurm


def pod_job(marker: str, **changes: object) -> JobSubmission:
    fields: dict[str, object] = {
        "name": "pod", "marker": marker, "cpus_per_task": 1, "tasks": 1, "memory_per_node_mb": 100,
        "required_nodes": (REAL_NODE,), **changes,
    }  # fmt: skip
    return JobSubmission(**fields)  # type: ignore[arg-type]


@pytest.fixture
async def client(slurm_sandbox: Sandbox) -> AsyncIterator[SlurmClient]:
    """Every job with this test's marker prefix is cancelled afterwards."""
    async with SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file)) as c:
        yield c
        listing = await c.list_job_details(keep=lambda text: text.startswith(PREFIX))
        for job in listing.jobs if listing is not None else ():
            await c.cancel_job(job.job_id)


PREFIX = f"slurm-syncer.dev/test-job-cache={uuid.uuid4().hex[:8]}"


def ours(text: str) -> bool:
    return text.startswith(PREFIX + " owner=a")


async def submit(client: SlurmClient, owner: str = "a", **changes: object) -> int:
    return await client.submit_job(pod_job(f"{PREFIX} owner={owner}", **changes), placeholder="fallback")


@contextlib.asynccontextmanager
async def running(cache: JobCache) -> AsyncIterator[list[JobChange]]:
    seen: list[JobChange] = []
    cache.subscribe(seen.extend)
    task = asyncio.create_task(cache.run())
    try:
        await asyncio.wait_for(cache.wait_synced(), 20)
        yield seen
        assert not task.done(), "the poll loop ended"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_adopts_our_jobs_by_marker_and_follows_them_without_listing_again(client: SlurmClient) -> None:
    mine = await submit(client, hold=True)
    theirs = await submit(client, owner="b", hold=True)
    cache = JobCache(client, owned=ours, poll_interval_s=0.1, detail_interval_s=60, list_interval_s=None)
    async with running(cache) as seen:
        assert mine in cache.jobs and theirs not in cache.jobs and cache.jobs[mine].hold
        assert not cache.stale and cache.cause == ""
        await client.update_job(mine, hold=False)
        await wait_for(lambda: cache.jobs[mine].running, 20, what="the release seen")
        assert cache.jobs[mine].nodes == (REAL_NODE,)
        await client.cancel_job(mine)
        await wait_for(lambda: cache.jobs[mine].ended, 20, what="the cancel seen")
        kinds = [(c.kind, c.job_id) for c in seen]
        assert kinds[0] == ("added", mine) and ("changed", mine) in kinds
        assert all(c.job_id == mine for c in seen), "only our job is told"
        assert cache.stats.reads["list"] == 1, "one whole list (the first); per-job reads after it"
        assert cache.stats.reads["state"] >= 2 and cache.stats.reads["detail"] >= 2


async def test_a_submit_whose_answer_was_lost_is_found_by_resync(client: SlurmClient) -> None:
    cache = JobCache(client, owned=ours, poll_interval_s=0.1, list_interval_s=None)
    async with running(cache):
        lost = await submit(client, hold=True)  # as if its answer never came: not tracked
        for _ in range(3):  # polls after the submit: state reads cover only the jobs the cache knows
            since = time.monotonic()
            await wait_for(lambda: cache.last_success > since, 10, what="a poll")  # noqa: B023
        assert lost not in cache.jobs
        await cache.resync()
        assert lost in cache.jobs and cache.jobs[lost].marker.startswith(PREFIX)


async def test_a_tracked_job_is_read_at_once_and_fresh_reads_it_now(client: SlurmClient) -> None:
    cache = JobCache(client, owned=ours, poll_interval_s=5.0, detail_interval_s=60, list_interval_s=None)
    async with running(cache) as seen:
        job_id = await submit(client, hold=True)
        cache.track(job_id)
        await wait_for(lambda: job_id in cache.jobs, 5, what="the tracked job read")
        await client.update_job(job_id, hold=False)
        job = await cache.fresh(job_id)
        assert job is not None and not job.hold and cache.jobs[job_id] == job
        assert seen[-1].kind == "changed" and "hold" in seen[-1].fields
        assert await cache.fresh(999_999_999) is None
        await client.cancel_job(job_id)
        fresh = await cache.fresh(job_id)
        assert fresh is not None and fresh.ended and cache.jobs[job_id].ended


async def test_the_frequent_read_sees_a_start_and_an_end_long_before_the_states_interval(
    client: SlurmClient,
) -> None:
    """`live_interval_s`: the states of the jobs not yet ended are read between the reads of every job."""
    cache = JobCache(
        client, owned=ours, poll_interval_s=60.0, live_interval_s=0.1, detail_interval_s=60,
        list_interval_s=None,
    )  # fmt: skip
    async with running(cache):
        job_id = await submit(client, hold=True)
        cache.track(job_id)
        await wait_for(lambda: job_id in cache.jobs, 5, what="the tracked job read")
        await client.update_job(job_id, hold=False)
        await wait_for(lambda: cache.jobs[job_id].running, 5, what="the start seen within seconds")
        await client.cancel_job(job_id)
        await wait_for(lambda: cache.jobs[job_id].ended, 5, what="the end seen within seconds")
        states = cache.stats.reads["state"]
        await asyncio.sleep(0.5)  # a while with no job of ours left to follow: nothing to read
        assert cache.stats.reads["state"] == states, "an ended job is not read by the frequent read"


async def test_a_job_brought_in_by_a_fresh_read_is_followed_quickly_though_the_poll_slept_long(
    client: SlurmClient,
) -> None:
    """What the scheduler does after an allocation (the job RUNNING in the answer): `fresh()`, then
    `track(read=True)`. With no job live, the poll loop had paused for `poll_interval_s`; the live job cuts
    that pause to `live_interval_s`, so its end is seen within it (scancel -> pod deleted), not a pause
    later."""
    cache = JobCache(
        client, owned=ours, poll_interval_s=120.0, live_interval_s=0.1, detail_interval_s=60,
        list_interval_s=None,
    )  # fmt: skip
    async with running(cache):
        job_id = await submit(client)
        await wait_for(lambda: running_now(client, job_id), 20, what="the job running", interval_s=0.2)
        read = await cache.fresh(job_id)
        cache.track(job_id, read=True)
        assert read is not None and read.running
        await client.cancel_job(job_id)
        await wait_for(lambda: cache.jobs[job_id].ended, 30, what="the end seen long before the 120 s pause")
        assert cache.stats.reads["fresh"] == 1


async def running_now(client: SlurmClient, job_id: int) -> bool:
    return (await client.get_job(job_id)).running


async def test_a_submitted_jobs_pending_reason_is_read_again_soon_after_the_submit(
    client: SlurmClient,
) -> None:
    """Slurm gives a job its reason at a scheduling pass after the submit, and no state read carries it:
    `pending_first_s` reads a tracked pending job whole again soon, where `pending_interval_s` would wait."""
    cache = JobCache(
        client, owned=ours, poll_interval_s=0.2, pending_first_s=0.5, pending_interval_s=600,
        detail_interval_s=60, list_interval_s=None,
    )  # fmt: skip
    async with running(cache):
        blocker = await submit(client, cpus_per_task=2)  # the real node's 2 CPUs: the next job waits
        await wait_for(lambda: running_now(client, blocker), 20, what="the blocker running", interval_s=0.2)
        job_id = await submit(client)  # no reason yet: Slurm gives it at its next scheduling pass
        cache.track(job_id)
        await wait_for(lambda: cache.jobs.get(job_id) is not None, 5, what="the tracked job read")
        await wait_for(lambda: cache.jobs[job_id].reason != "", 20, what="Slurm's reason read again")
        assert cache.jobs[job_id].pending and cache.stats.reads["detail"] >= 2, "read again, still pending"


async def test_following_our_jobs_costs_the_same_with_a_longer_queue(client: SlurmClient) -> None:
    """Requests and bytes per second of following one job of ours, with 1 and with 201 other jobs queued: the
    state reads and the job reads are ours only; only the one whole list at the start grows."""
    mine = await submit(client, hold=True)
    costs = []
    for more in (1, 199):  # 1, then 200 jobs of others queued
        for _ in range(more):
            await submit(client, owner="b", hold=True)
        cache = JobCache(
            client, owned=ours, poll_interval_s=0.1, detail_interval_s=0.5, pending_interval_s=0.5,
            list_interval_s=None,
        )  # fmt: skip
        async with running(cache):
            start = dict(client.stats.body_bytes), sum(client.stats.requests.values())
            await asyncio.sleep(2.0)  # the cost over a while is what is measured
            spent = {k: v - start[0].get(k, 0) for k, v in client.stats.body_bytes.items()}
            costs.append((spent, sum(client.stats.requests.values()) - start[1]))
            assert mine in cache.jobs and cache.stats.reads["list"] == 1
    (small, small_requests), (large, large_requests) = costs
    assert large.get("jobs_detail", 0) == small.get("jobs_detail", 0) == 0, "no whole list after the first"
    assert small.get("job", 0) > 0 and small.get("job_states", 0) > 0, "ours read one by one"
    assert large["job_states"] / max(1, large_requests) < 2_000
    assert large["job"] <= 2 * small["job"] + 20_000
    assert large_requests <= 2 * small_requests + 10


async def test_stale_with_its_cause_while_slurmrestd_fails_then_fresh_again(
    client: SlurmClient, slurm_sandbox: Sandbox
) -> None:
    mine = await submit(client, hold=True)
    async with FaultProxy(slurm_sandbox.rest_url) as proxy:
        token = TokenFile(slurm_sandbox.token_file)
        async with SlurmClient(proxy.url, token, attempts=1, timeout_s=2) as proxied:
            cache = JobCache(
                proxied, owned=ours, poll_interval_s=0.05, stale_after_s=0.5, list_interval_s=None
            )
            async with running(cache):
                proxy.fail_next(10_000, status=503)
                await wait_for(lambda: cache.stale, 10, what="stale")
                assert "503" in cache.cause and mine in cache.jobs, "kept, but marked stale"
                proxy.clear_faults()
                await wait_for(lambda: not cache.stale, 10, what="fresh again")
                assert cache.cause == ""


async def test_never_synced_while_slurmrestd_cannot_be_reached() -> None:
    unreachable = SlurmClient("http://127.0.0.1:9", StaticToken("unused"), attempts=1)
    cache = JobCache(unreachable, owned=ours, poll_interval_s=0.05)
    task = asyncio.create_task(cache.run())
    try:
        await wait_for(lambda: cache.stats.errors >= 2, 10, what="failed polls")
        assert not cache.synced and cache.stale and "127.0.0.1:9" in cache.cause
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await unreachable.close()


@pytest.mark.only_where(SELECTED.openmetrics, "slurmctld serves its job gauges from 25.11")
async def test_the_job_gauges_spare_state_reads_while_no_job_moves(
    client: SlurmClient, slurm_sandbox: Sandbox
) -> None:
    """With the hint, a poll reads the states only when a gauge moved (`poll_interval_s` would read them at
    every poll). The gauges count every job of the cluster: another test's job ending, or purged MinJobAge
    after its end, moves them as well (the gauges cannot tell whose job moved) and costs one state read,
    whenever that falls. So: one state read per move, none per still read."""
    mine = await submit(client, hold=True)
    # a slow answer on a busy machine is no failed hint (which would read the states every poll instead)
    hint = MetricsReader(slurm_sandbox.metrics_url, timeout_s=10)
    cache = JobCache(
        client, owned=ours, hint=hint, poll_interval_s=0.1, hint_interval_s=0.1, hint_floor_s=60,
        detail_interval_s=60, list_interval_s=None,
    )  # fmt: skip
    stats = cache.stats
    try:
        async with running(cache):
            await wait_for(lambda: stats.hint_changed >= 1, 20, what="the first gauge read (a move)")
            states, moves, still = stats.reads["state"], stats.hint_changed, stats.hint_unchanged
            await wait_for(lambda: stats.hint_unchanged >= still + 10, 30, what="ten still gauge reads")
            read, moved = stats.reads["state"] - states, stats.hint_changed - moves
            assert read == moved, f"{read} state reads for {moved} gauge moves: one a move, none a still read"
            states, moves = stats.reads["state"], stats.hint_changed
            await client.update_job(mine, hold=False)
            await wait_for(lambda: cache.jobs[mine].running, 20, what="the start seen by a gauge move")
            assert stats.hint_changed > moves and stats.reads["state"] > states
            assert not cache.stale
    finally:
        await hint.close()


async def test_a_tracked_job_slurm_has_forgotten_is_followed_no_more(client: SlurmClient) -> None:
    """track() after each submit must not grow the cache for ever: a job Slurm no longer has (it ended
    MinJobAge ago, or never was) leaves the tracked set at the first read that finds it gone."""
    cache = JobCache(client, owned=ours, poll_interval_s=0.1, detail_interval_s=60, list_interval_s=None)
    async with running(cache):
        job_id = await submit(client, hold=True)
        cache.track(job_id)
        cache.track(999_999_997)  # an id Slurm has not (or no longer) any job for
        await wait_for(lambda: job_id in cache.jobs, 10, what="the tracked job read")
        await wait_for(lambda: cache.tracked == {job_id}, 10, what="the forgotten job untracked")
        assert 999_999_997 not in cache.jobs
        await client.cancel_job(job_id)
        await cache.resync()  # a whole list: the job is still in Slurm (ended): tracked, kept
        assert job_id in cache.jobs and cache.tracked == {job_id}
        other = await submit(client, owner="b", hold=True)  # tracked, but not ours by its marker
        cache.track(other)
        await wait_for(lambda: other in cache.jobs, 10, what="the tracked job read")
        await client.cancel_job(other)
        await cache.resync()  # a list keeps only our markers: gone from the cache, and untracked with it
        assert other not in cache.jobs and cache.tracked == {job_id}


async def test_fresh_reads_again_only_when_the_cached_read_is_older_than_asked(client: SlurmClient) -> None:
    cache = JobCache(client, owned=ours, poll_interval_s=5.0, detail_interval_s=60, list_interval_s=None)
    async with running(cache):
        job_id = await submit(client, hold=True)
        cache.track(job_id)
        first = await cache.fresh(job_id)
        reads = cache.stats.reads["fresh"]
        assert await cache.fresh(job_id, max_age_s=60) == first and cache.stats.reads["fresh"] == reads
        assert cache.stats.fresh_cached == 1
        await client.update_job(job_id, hold=False)
        again = await cache.fresh(job_id)  # no max age: read now
        assert cache.stats.reads["fresh"] == reads + 1 and again is not None and not again.hold
        assert await cache.fresh(999_999_996, max_age_s=60) is None, "not cached: read, and absent"


async def test_a_read_sent_after_slurm_answered_an_end_shows_the_job_ended(client: SlurmClient) -> None:
    """What the scheduler's memory of its own cancels rests on (controller.awaited_cancels): `read_at` is when
    the read the cached copy came from was sent; that copy, read before Slurm answered `end_job`, still shows
    the job running (and `fresh(max_age_s=...)` answers with it), while any read sent after the answer shows
    the job ended."""
    cache = JobCache(client, owned=ours, poll_interval_s=60.0, detail_interval_s=60, list_interval_s=None)
    async with running(cache):
        job_id = await submit(client)
        cache.track(job_id)

        async def runs() -> bool:
            job = await cache.fresh(job_id)
            return job is not None and job.running

        await wait_for(runs, 20, what="the job running", interval_s=0.2)
        sent = cache.read_at(job_id)
        assert sent is not None and sent <= time.monotonic()
        assert await client.end_job(cache.jobs[job_id])
        answered = time.monotonic()
        stale = await cache.fresh(job_id, max_age_s=60)
        assert stale is not None and stale.running and cache.read_at(job_id) == sent < answered
        after = await cache.fresh(job_id)
        read = cache.read_at(job_id)
        assert after is not None and after.ended and read is not None and read > answered
