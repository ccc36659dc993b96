"""A pod's Slurm job over the real slurmrestd (issue 44), on both releases: submit, read, list by marker,
states, hold and release, cancel, a job Slurm does not have; 26.05 takes external jobs (REST v0.0.43+), 24.11
refuses them and runs a placeholder batch job instead when the caller allows it. Jobs land on the session
sandbox's real node (1 CPU, 100 MB of its 2 CPUs, 1000 MB) and are cancelled at the end of each test."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from syncer.controllers.scheduler import edges
from syncer.controllers.scheduler import marker as job_marker
from syncer.controllers.scheduler.allocate import VIA, could_start
from syncer.controllers.scheduler.controller import allocation_refused
from syncer.controllers.scheduler.request import JobRequest
from syncer.controllers.scheduler.values import PodRef
from syncer.model.jobs import JobSubmission, SlurmJob
from syncer.model.slurm import SlurmNode
from syncer.slurm.auth import StaticToken, TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmApiError, SlurmError, SlurmNotFound, SlurmUnsupported
from syncer.slurm.job_cache import JobCache
from syncer.slurm.jobs import Placeholder
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.sandbox import REAL_NODE, Sandbox
from tests.fixtures.slurm import API_VERSIONS, SELECTED
from tests.helpers import wait_for

pytestmark = pytest.mark.slurm
YEAR_MINUTES = 365 * 24 * 60  # backfill's stand-in for an unlimited partition's MaxTime
PLAIN_USER = "slurmrest"  # a user of the sandbox that is no Slurm administrator


def marker() -> str:
    return f"slurm-syncer.dev/test={uuid.uuid4().hex[:12]} pods=ns/web-0"


def pod_job(text: str, **changes: object) -> JobSubmission:
    fields: dict[str, object] = {
        "name": "pod-web-0", "marker": text, "cpus_per_task": 1, "tasks": 1, "memory_per_node_mb": 100,
        "required_nodes": (REAL_NODE,), **changes,
    }  # fmt: skip
    return JobSubmission(**fields)  # type: ignore[arg-type]


@pytest.fixture
async def client(slurm_sandbox: Sandbox) -> AsyncIterator[SlurmClient]:
    """The newest API version; every job it submitted is cancelled afterwards."""
    async with SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file)) as c:
        submitted: list[int] = []
        submit = c.submit_job

        async def recorded(submission: JobSubmission, *, placeholder: Placeholder = "never") -> int:
            job_id = await submit(submission, placeholder=placeholder)
            submitted.append(job_id)
            return job_id

        c.submit_job = recorded  # type: ignore[method-assign]
        try:
            yield c
        finally:
            for job_id in submitted:
                await c.cancel_job(job_id)


async def submit(client: SlurmClient, submission: JobSubmission) -> int:
    """External where the release has it; a placeholder batch job on 24.11 (refused without permission)."""
    if client.external_jobs:
        return await client.submit_job(submission)
    sent = sum(client.stats.requests.values())
    with pytest.raises(SlurmUnsupported, match=r"Slurm 25\.05\+ \(REST v0\.0\.43\+\)"):
        await client.submit_job(submission)
    assert sum(client.stats.requests.values()) == sent, "refused before any request"
    return await client.submit_job(submission, placeholder="fallback")


async def until(client: SlurmClient, job_id: int, test: str, deadline_s: float = 20) -> SlurmJob:
    found: list[SlurmJob] = []

    async def check() -> bool:
        found[:] = [await client.get_job(job_id)]
        return bool(getattr(found[0], test))

    await wait_for(check, deadline_s, what=f"job {job_id} {test}")
    return found[0]


async def test_a_pods_job_runs_with_exactly_its_resources_and_ends_on_cancel(client: SlurmClient) -> None:
    text = marker()
    started = time.time()
    job_id = await submit(client, pod_job(text))
    job = await until(client, job_id, "running")
    assert job.nodes == (REAL_NODE,) and job.marker == text and job.name == "pod-web-0"
    assert [(a.node, a.cpus, a.memory_mb) for a in job.allocation] == [(REAL_NODE, 1, 100)]
    assert job.external is client.external_jobs, "external on 25.05+, a placeholder batch job on 24.11"
    assert not job.requeue, "a pod cannot move: Slurm must not run its job again elsewhere"
    assert job.start_time >= int(started) - 1 and not job.preempting
    # no limit; a job that Slurm's backfill pass started on a MaxTime=UNLIMITED partition reads a year
    assert job.time_limit_min in (None, YEAR_MINUTES)
    assert await client.job_states([job_id, 999_999_999]) == {job_id: frozenset({"RUNNING"})}
    assert await client.cancel_job(job_id) is True
    ended = await until(client, job_id, "released")
    assert ended.base_state == "CANCELLED" and ended.ended
    assert await client.cancel_job(job_id) is False, "already ended: nothing to do"


async def test_only_jobs_with_our_marker_are_decoded_from_a_list(client: SlurmClient) -> None:
    ours, theirs = marker(), marker()
    mine = await submit(client, pod_job(ours, hold=True))
    other = await submit(client, pod_job(theirs, hold=True))
    listing = await client.list_job_details(keep=lambda text: text == ours)
    assert listing is not None and listing.total >= 2 and listing.last_update > 0
    assert [job.job_id for job in listing.jobs] == [mine]
    everything = await client.list_job_details()
    assert everything is not None and {mine, other} <= {job.job_id for job in everything.jobs}


async def test_changed_since_answers_nothing_when_no_job_changed(client: SlurmClient) -> None:
    """`update_time` (v0.0.42+): no job while nothing changed (HTTP 200 with an empty list and a 0 time on
    both releases), every job once one changed - never only the changed ones."""
    job_id = await submit(client, pod_job(marker(), hold=True))
    quiet: list[bool] = []

    async def unchanged_for_a_second() -> bool:
        listing = await client.list_job_details()
        assert listing is not None
        await asyncio.sleep(1.1)  # not a wait for a condition: slurmctld's job time has whole seconds
        quiet[:] = [await client.list_job_details(update_time=listing.last_update) is None]
        return quiet[0]

    await wait_for(unchanged_for_a_second, 15, what="a second in which no job changed")
    listing = await client.list_job_details()
    assert listing is not None
    await asyncio.sleep(1.1)  # as above
    await client.update_job(job_id, nice=10)
    changed = await client.list_job_details(update_time=listing.last_update)
    assert changed is not None and job_id in {job.job_id for job in changed.jobs}
    assert changed.total == listing.total, "changed: every job, not only the one that changed"


async def test_a_held_job_waits_with_its_reason_and_runs_once_released(client: SlurmClient) -> None:
    job_id = await submit(client, pod_job(marker(), hold=True))
    held = await until(client, job_id, "pending")
    assert held.hold and held.reason == "JobHeldUser" and held.priority == 0 and not held.nodes
    await client.update_job(job_id, hold=False)
    job = await until(client, job_id, "running")
    assert not job.hold and job.reason == "" and job.nodes == (REAL_NODE,)


async def test_a_job_slurm_does_not_have(client: SlurmClient) -> None:
    with pytest.raises(SlurmNotFound):
        await client.get_job(999_999_999)
    assert await client.cancel_job(999_999_999) is False
    with pytest.raises(SlurmNotFound):
        await client.update_job(999_999_999, hold=True)


@pytest.mark.parametrize("version", API_VERSIONS)
async def test_external_jobs_parse_exactly_where_the_version_table_says(
    slurm_sandbox: Sandbox, version: str
) -> None:
    """`ApiVersion.external_jobs` against the real parser of each version: a held external job is made where
    it says so; where it does not, the client refuses before any request and slurmrestd refuses the flag."""
    token = TokenFile(slurm_sandbox.token_file)
    async with SlurmClient(slurm_sandbox.rest_url, token, api_version=version) as c:
        if c.external_jobs:
            job_id = await c.submit_job(pod_job(marker(), hold=True))
            try:
                assert (await c.get_job(job_id)).external
            finally:
                await c.cancel_job(job_id)
            return
        with pytest.raises(SlurmUnsupported):
            await c.submit_job(pod_job(marker(), hold=True))
    body = {"job": {"name": "x", "flags": ["EXTERNAL_JOB"], "nodes": "1", "hold": True,
                    "current_working_directory": "/tmp", "environment": ["PATH=/bin"]}}  # fmt: skip
    async with aiohttp.ClientSession(headers=token.headers()) as session:
        url = f"{slurm_sandbox.rest_url}/slurm/{version}/job/submit"
        try:
            async with session.post(url, json=body) as answer:
                status, text = answer.status, await answer.text()
        except aiohttp.ClientResponseError as exc:  # 26.05 sends a second answer after the error (client.py)
            status, text = exc.status, exc.message
    assert status != 200 and "Unknown flag" in text and "EXTERNAL_JOB" in text, text[:300]


async def test_only_an_administrator_can_write_the_marker(
    client: SlurmClient, slurm_sandbox: Sandbox
) -> None:
    """The marker sits in `admin_comment`: a plain user can neither submit with it nor change it (over REST or
    with scontrol), so a job's owner cannot make it stand for other pods; `comment` it could change."""
    text = marker()
    job_id = await submit(client, pod_job(text, hold=True))
    user = StaticToken(slurm_sandbox.token(user=PLAIN_USER))
    async with SlurmClient(slurm_sandbox.rest_url, user) as plain:
        with pytest.raises(SlurmApiError):
            await plain.submit_job(pod_job(marker(), hold=True), placeholder="fallback")
    changed = slurm_sandbox.run("scontrol", "update", f"jobid={job_id}", "AdminComment=x", user=PLAIN_USER)
    assert changed.returncode != 0
    assert (await client.get_job(job_id)).marker == text


async def test_a_placeholder_holds_its_cpus_through_a_cancel_and_ends_at_once_for_the_syncer(
    client: SlurmClient,
) -> None:
    """A placeholder batch job (24.11's pod job; on any release on request): a cancel leaves it COMPLETING
    (its script ignores SIGTERM) until Slurm's SIGKILL after KillWait (5 s here), time to delete the pod;
    `end_job` (the syncer, once the pod is gone) ends it at once, COMPLETED. Both once its script runs (Slurm
    shows the job RUNNING before: a signal then is lost, docs/slurm-releases.md)."""
    before = placeholder_sleeps()
    cancelled = await client.submit_job(pod_job(marker()), placeholder="always")
    job = await launched(client, cancelled, before)
    assert not job.external and job.nodes == (REAL_NODE,)
    assert await client.cancel_job(cancelled)
    held = await client.get_job(cancelled)
    assert held.ended and not held.released and held.base_state == "CANCELLED", held.state
    await until(client, cancelled, "released")
    before = placeholder_sleeps()
    ended = await client.submit_job(pod_job(marker()), placeholder="always")
    assert await client.end_job(await launched(client, ended, before))
    done = await until(client, ended, "released", deadline_s=4)  # before KillWait could have passed
    assert done.base_state == "COMPLETED"
    assert await client.end_job(done) is False, "already ended"


def placeholder_sleeps() -> set[str]:
    """PIDs of placeholder scripts' `sleep 3600` children on this machine (a script past its traps)."""
    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if cmdline.read_bytes() == b"sleep\x003600\x00":
                found.add(cmdline.parent.name)
    return found


async def launched(client: SlurmClient, job_id: int, before: set[str]) -> SlurmJob:
    """The job RUNNING and its script past its traps (a `sleep 3600` that was not there `before` the
    submit)."""
    job = await until(client, job_id, "running")
    await wait_for(lambda: bool(placeholder_sleeps() - before), 20, what=f"job {job_id}'s script running")
    return job


async def test_end_job_cancels_a_job_that_does_not_run_a_placeholder(client: SlurmClient) -> None:
    pending = await submit(client, pod_job(marker(), hold=True))
    assert await client.end_job(await client.get_job(pending))
    assert (await until(client, pending, "released")).base_state == "CANCELLED"


GPU_NODE = "gres-typed"  # a real slurmd with one a100 and two v100 (config.GRES: GresTypes=gpu)


@pytest.fixture
def gpu_node(slurm_sandbox: Sandbox) -> Iterator[str]:
    gres = [slurm_sandbox.write_gres(GPU_NODE, count=n, kind=kind) for kind, n in (("a100", 1), ("v100", 2))]
    slurm_sandbox.start_slurmd(GPU_NODE, cpus=4, memory_mb=500, gres=",".join(gres))  # 2 cores: room left
    try:
        yield GPU_NODE
    finally:
        slurm_sandbox.delete_node(GPU_NODE)


async def listed(client: SlurmClient, name: str) -> SlurmNode:
    """The node as the node cache reads it: in a whole list (a single node's read, `GET /node/{name}`, showed
    it ALLOCATED with alloc_cpus 0 for 20 s under a 1-CPU job on 26.05.5, where the list said MIXED, 1)."""
    listing = await client.list_all_nodes()
    return next(node for node in listing.nodes if node.name == name)


def gpu_request(*gres: tuple[str, int]) -> JobRequest:
    pod = PodRef(namespace="ns", name="gpu-0", uid="u-gpu")
    return JobRequest(
        key="ns/pod/gpu-0", name="ns/gpu-0", comment="", pods=(pod,), nodes=1, cpus_per_node=1,
        memory_mib_per_node=100, gres_per_node=gres,
    )  # fmt: skip


async def test_a_gpu_nodes_free_gres_are_read_from_its_gres_and_gres_used(
    client: SlurmClient, gpu_node: str
) -> None:
    """What allocate.could_start reads of a GPU node (edges.room: `gres`, `gres_used`) as slurmrestd lists
    it on this release: every type free, then, with a job holding the a100, the v100 only."""
    node = await listed(client, gpu_node)
    assert set(node.gres.split(",")) == {"gpu:a100:1", "gpu:v100:2"}
    assert edges.room(node).free_gres == (("gpu", 3), ("gpu:a100", 1), ("gpu:v100", 2))
    job_id = await submit(
        client, pod_job(marker(), required_nodes=(gpu_node,), tres_per_node="gres/gpu:a100:1")
    )
    try:
        await until(client, job_id, "running")

        async def a100_taken() -> bool:
            room = edges.room(await listed(client, gpu_node))
            return "MIXED" in room.state and room.free_gres == (("gpu", 2), ("gpu:a100", 0), ("gpu:v100", 2))

        await wait_for(a100_taken, 20, what="the a100 shown in use, the node MIXED")
        room = edges.room(await listed(client, gpu_node))
        assert not could_start(gpu_request(("gpu:a100", 1)), [room], ours_pending=False)
        assert could_start(gpu_request(("gpu:v100", 2)), [room], ours_pending=False)
        assert could_start(gpu_request(("gpu", 2)), [room], ours_pending=False)
        assert not could_start(gpu_request(("gpu", 3)), [room], ours_pending=False)
    finally:
        await client.cancel_job(job_id)
        await until(client, job_id, "released")


# --- allocate at once, else submit (docs/scheduler.md "Allocate at once") ---------------------------------
RELEASE = "test:alloc"
EXTERNAL = SELECTED.name != "24.11"


def scheduler_marker() -> str:
    """A marker as the scheduler writes it, for an immediate allocation (`via=allocate`)."""
    pod = PodRef(namespace="ns", name="web-0", uid=uuid.uuid4().hex)
    return job_marker.via(job_marker.write(RELEASE, "ns/pod/web-0", [pod]), VIA)


@contextlib.asynccontextmanager
async def allocations(client: SlurmClient) -> AsyncIterator[list[str]]:
    """Markers the test allocates with; every job that names one is cancelled afterwards."""
    texts: list[str] = []
    try:
        yield texts
    finally:
        listing = await client.list_job_details(keep=lambda text: text in texts)
        for job in listing.jobs if listing is not None else ():
            await client.cancel_job(job.job_id)


async def by_marker(client: SlurmClient, text: str) -> list[SlurmJob]:
    listing = await client.list_job_details(keep=lambda found: found == text)
    assert listing is not None
    return list(listing.jobs)


async def test_allocate_starts_a_job_at_once_where_there_is_room(client: SlurmClient) -> None:
    if not client.external_jobs:  # 24.11: no external jobs, so nothing to allocate; said before any request
        sent = sum(client.stats.requests.values())
        with pytest.raises(SlurmUnsupported, match="no external jobs"):
            await client.allocate_job(pod_job(scheduler_marker()))
        assert sum(client.stats.requests.values()) == sent
        return
    async with allocations(client) as texts:
        texts.append(text := scheduler_marker())
        job_id = await client.allocate_job(pod_job(text))
        job = await client.get_job(job_id)  # no wait: the answer comes once Slurm has allocated it
        assert job.running and job.nodes == (REAL_NODE,) and job.external and job.marker == text
        assert [(a.node, a.cpus, a.memory_mb) for a in job.allocation] == [(REAL_NODE, 1, 100)]
        found = edges.job(job, RELEASE)
        assert found is not None and found.marker.via == VIA, "allocated: the pod's job like any other"


if EXTERNAL:  # REST v0.0.43+ (25.05+); 24.11 refuses before any request (the test above)

    async def test_allocate_on_a_busy_node_is_refused_at_once_leaving_a_record_that_is_no_pods_job(
        client: SlurmClient,
    ) -> None:
        async with allocations(client) as texts:
            texts.extend((blocker := scheduler_marker(), refused := scheduler_marker(), later := marker()))
            await client.allocate_job(pod_job(blocker, cpus_per_task=2))  # the node's every CPU
            with pytest.raises(SlurmApiError) as raised:
                await client.allocate_job(pod_job(refused))
            assert raised.value.status == 422 and [e.error_number for e in raised.value.errors] == [2016]
            assert allocation_refused(raised.value), "the scheduler reads it as Slurm's refusal: it submits"
            [record] = await by_marker(client, refused)
            assert record.base_state == "FAILED" and record.reason == "BadConstraints" and record.nodes == ()
            assert edges.job(record, RELEASE) is None, "a refused try is never the pod's job"
            # ... and the pod's job is then submitted: it waits for the node as any job does
            waiting = await client.submit_job(pod_job(later))
            assert (await client.get_job(waiting)).pending

    async def test_an_allocation_never_overtakes_a_higher_priority_job_waiting_for_the_node(
        client: SlurmClient,
    ) -> None:
        """slurmctld's `job_allocate()` tests `_top_priority()` before it selects nodes for an immediate
        job: a pending job of higher priority whose partitions overlap refuses it (2013), CPUs free or not."""
        async with allocations(client) as texts:
            texts.extend((blocker := scheduler_marker(), first := marker(), second := scheduler_marker()))
            held = await client.allocate_job(pod_job(blocker))  # 1 of the node's 2 CPUs
            ahead = await client.submit_job(pod_job(first, cpus_per_task=2, priority=100_000))
            await until(client, ahead, "pending")
            with pytest.raises(SlurmApiError) as raised:
                await client.allocate_job(pod_job(second))  # 1 CPU is free, but the job ahead waits for it
            assert [e.error_number for e in raised.value.errors] == [2013]
            assert raised.value.status == 422 and allocation_refused(raised.value)
            assert raised.value.has_error("insufficient priority")
            assert (await client.get_job(ahead)).pending, "still first in line"
            await client.cancel_job(held)
            job = await until(client, ahead, "running")  # the node goes to the job that was ahead
            assert job.nodes == (REAL_NODE,)

    async def test_an_allocation_whose_answer_is_lost_is_found_once_by_its_marker(
        slurm_sandbox: Sandbox, client: SlurmClient
    ) -> None:
        async with allocations(client) as texts:
            texts.append(text := scheduler_marker())
            async with FaultProxy(slurm_sandbox.rest_url) as proxy:
                async with SlurmClient(proxy.url, TokenFile(slurm_sandbox.token_file), timeout_s=1) as lossy:
                    proxy.answer_delay_s = 3.0  # slurmctld allocates; its answer never reaches the caller
                    with pytest.raises(SlurmError) as raised:
                        await lossy.allocate_job(pod_job(text))
                    assert not isinstance(raised.value, SlurmApiError), "lost, not refused: the job may exist"
            cache = JobCache(client, owned=lambda found: found == text, list_interval_s=None)
            await cache.resync()  # what the scheduler does before it asks again
            [job] = cache.jobs.values()
            assert job.running and job.marker == text and edges.job(job, RELEASE) is not None
