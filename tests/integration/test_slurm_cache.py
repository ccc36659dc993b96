"""The node cache against the real slurmrestd: 304 probes, change detection, duty limit, staleness."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from syncer.slurm.auth import TokenFile
from syncer.slurm.cache import NodeCache, NodeChange
from syncer.slurm.client import SlurmClient
from syncer.testing.sandbox import Sandbox
from tests.fixtures.slurm import API_VERSIONS, SELECTED
from tests.helpers import wait_for

pytestmark = pytest.mark.slurm


@contextlib.asynccontextmanager
async def running_cache(client: SlurmClient, **options: object) -> AsyncIterator[NodeCache]:
    cache = NodeCache(client, **options)  # type: ignore[arg-type]
    task = asyncio.create_task(cache.run())
    try:
        await wait_for(lambda: cache.synced, deadline_s=20, what="first full list")
        yield cache
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def client42(slurm_sandbox: Sandbox) -> AsyncIterator[SlurmClient]:
    async with SlurmClient(
        slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), api_version="v0.0.42"
    ) as c:
        yield c


async def test_idle_polling_makes_no_full_fetch(client42: SlurmClient, slurm_sandbox: Sandbox) -> None:
    async with running_cache(client42, poll_interval_s=0.05) as cache:
        assert len(cache.nodes) == slurm_sandbox.nodes + 1
        # A fresh slurmctld still settles (node registrations); measure from the first quiet probe.
        await wait_for(lambda: cache.stats.not_modified >= 1, deadline_s=20, what="a first HTTP 304")
        fulls = cache.stats.full_fetches
        await wait_for(lambda: cache.stats.not_modified >= 21, deadline_s=20, what="20 HTTP 304 probes")
        assert cache.stats.full_fetches == fulls
        assert not cache.stale and cache.age_s < 1


@pytest.mark.parametrize("version", [API_VERSIONS[0], API_VERSIONS[-1]])
async def test_a_slurm_side_drain_reaches_subscribers(slurm_sandbox: Sandbox, version: str) -> None:
    node = "node00031" if version == API_VERSIONS[0] else "node00032"
    seen: list[NodeChange] = []
    async with (
        SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), api_version=version) as c,
        running_cache(c, poll_interval_s=0.1) as cache,
    ):
        cache.subscribe(seen.extend)
        slurm_sandbox.scontrol("update", f"nodename={node}", "state=drain", "reason=admin: bad dimm")
        try:
            await wait_for(
                lambda: any(ch.name == node and ch.after and ch.after.drain_flag for ch in seen),
                deadline_s=15, what=f"drain of {node} in the cache",
            )  # fmt: skip
            change = next(ch for ch in seen if ch.name == node and ch.after and ch.after.drain_flag)
            assert change.kind == "changed" and {"state", "reason"} <= set(change.fields)
            assert change.after is not None and change.after.reason == "admin: bad dimm"
            assert cache.nodes[node].drain_flag
            if cache.stats.probes:
                # read from the answers, as measured: 24.11 says "changed" with HTTP 500, 26.05.3+ with 200
                assert cache.stats.probe_answers == ("500" if SELECTED.name == "24.11" else "200")
        finally:
            slurm_sandbox.scontrol("update", f"nodename={node}", "state=undrain")


async def test_probes_run_at_the_probe_interval_where_changed_is_not_a_list(slurm_sandbox: Sandbox) -> None:
    """Without the metrics hint, 24.11 says "changed" with HTTP 500 (no list): probes run every
    `probe_interval_s` (a power-up is seen in 0.25 s, not a poll's 1 s); 26.05.3+ says it with the whole
    list, so once it has, probes go back to one per poll (a busy cluster would list at every probe)."""
    node = "node00033"
    async with (
        SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file)) as client,
        running_cache(client, poll_interval_s=60.0, probe_interval_s=0.05) as cache,
    ):
        assert cache.hint is None
        slurm_sandbox.scontrol("update", f"nodename={node}", "state=drain", "reason=admin: quick probe")
        try:
            if SELECTED.name == "24.11":
                # a 60 s poll would probe once in the test's whole life: these are the quick ones
                await wait_for(lambda: cache.nodes[node].drain_flag, deadline_s=30, what=f"drain of {node}")
                assert cache.stats.probe_answers == "500"
                probes = cache.stats.probes
                await wait_for(lambda: cache.stats.probes >= probes + 5, deadline_s=30, what="quick probes")
            else:
                # the drain (or a registration before it) is answered with the whole list: no quick probes
                await wait_for(lambda: cache.stats.changed_as_200 >= 1, deadline_s=30, what="a 200 probe")
                assert cache._poll_delay() > 50 and cache.stats.probe_answers == "200"
        finally:
            slurm_sandbox.scontrol("update", f"nodename={node}", "state=undrain")


async def test_full_fetches_respect_the_duty_limit(client42: SlurmClient) -> None:
    async with running_cache(client42, poll_interval_s=0.0, strategy="full", max_duty=0.25) as cache:
        start_fetches, start = cache.stats.full_fetches, time.monotonic()
        spent_before = client42.stats.seconds.get("nodes", 0.0)
        await wait_for(lambda: cache.stats.full_fetches >= start_fetches + 5, deadline_s=30, what="5 fetches")
        elapsed = time.monotonic() - start
        spent = client42.stats.seconds.get("nodes", 0.0) - spent_before
        assert spent / elapsed <= 0.35, f"slurmrestd busy {spent / elapsed:.0%} of the time serving us"


async def test_stale_while_slurmrestd_is_down_and_recovers(slurm_sandbox: Sandbox) -> None:
    async with (
        SlurmClient(
            slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), attempts=1, timeout_s=2
        ) as c,
        running_cache(c, poll_interval_s=0.05, stale_after_s=0.5) as cache,
    ):
        slurm_sandbox.stop_slurmrestd()
        try:
            await wait_for(lambda: cache.stale, deadline_s=10, what="stale flag")
            assert cache.stats.errors > 0 and "cannot reach slurmrestd" in cache.last_error
            # silent past the staleness bound: the cache starts over with a new connection
            await wait_for(lambda: cache.stats.reconnects >= 1, deadline_s=10, what="a reconnect")
        finally:
            slurm_sandbox.start_slurmrestd()
        await wait_for(lambda: not cache.stale, deadline_s=20, what="fresh again")
        assert cache.last_error == ""


async def test_a_slurmctld_restart_is_recorded_never_silent_and_recovered(slurm_sandbox: Sandbox) -> None:
    """While slurmctld is down every failed poll is an error with its cause (26.05 answers with two
    HTTP answers on one connection; that once ended the poll loop silently), no answer empties the
    cache, and the cache is fresh again after the restart."""
    removed: list[NodeChange] = []
    async with (
        SlurmClient(
            slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), attempts=1, timeout_s=5
        ) as c,
        running_cache(c, poll_interval_s=0.05, stale_after_s=2.0) as cache,
    ):
        cache.subscribe(lambda changes: removed.extend(ch for ch in changes if ch.kind == "removed"))
        known = len(cache.nodes)
        slurm_sandbox.stop_slurmctld()
        try:
            await wait_for(lambda: cache.stale, deadline_s=30, what="stale while slurmctld is down")
            assert cache.cause, "a stale cache must say why"  # an error, or the wait for an answer
            await wait_for(lambda: cache.stats.errors > 0, deadline_s=30, what="the failed poll recorded")
            assert cache.last_error and "unexpected" not in cache.last_error, cache.last_error
        finally:
            slurm_sandbox.restart_slurmctld()  # starts it and waits for the real node to respond
        await wait_for(lambda: not cache.stale, deadline_s=60, what="fresh after slurmctld restart")
        assert cache.last_error == "" and len(cache.nodes) == known and not removed
