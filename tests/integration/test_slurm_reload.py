"""The node cache tells its subscribers that slurmctld reloaded (`scontrol reconfigure`, a restart), against
the real slurmctld: with the metrics hint (26.05), whose counts a reload leaves as they were, and with the
update_time probes (both releases). The reload subscribers are told once a list asked for after the reload
is applied: the cache then already shows what the new slurmctld forgot (here an admin's feature)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from syncer.slurm.auth import TokenFile
from syncer.slurm.cache import NodeCache
from syncer.slurm.client import SlurmClient
from syncer.slurm.metrics_hint import MetricsReader
from syncer.testing.sandbox import Sandbox
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

pytestmark = pytest.mark.slurm
NODE = "node00971"
HINTS = ("hint", "probes") if SELECTED.openmetrics else ("probes",)
# What these tests guard is that a reload is told (and only a reload), not how fast: a reconfigure is told in
# 1-3 s here even at load 20 (a poll, a probe that is a 1,200-node list on 26.05, /diag, a list); a busy
# machine stretches slurmctld's state save, its restart and each list
DEADLINE_S = 30.0


@contextlib.asynccontextmanager
async def watched_cache(sandbox: Sandbox, how: str) -> AsyncIterator[tuple[NodeCache, list[set[str]]]]:
    """A running cache (with the hint: a floor far away, so only the start marker brings the reload; the
    hint test checks no probe ran) and, per reload told, NODE's features as the cache had them then."""
    # a metrics read waits out a slow reconfigure (a failed one falls back to probes, as it should)
    hint = MetricsReader(sandbox.metrics_url, timeout_s=10) if how == "hint" else None
    told: list[set[str]] = []
    async with SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file)) as client:
        cache = NodeCache(
            client, hint=hint, stale_after_s=30.0,
            poll_interval_s=5.0 if hint else 1.0, hint_floor_s=600 if hint else 30.0,
        )  # fmt: skip
        cache.subscribe_reloads(lambda: told.append(set(cache.nodes[NODE].features)))
        task = asyncio.create_task(cache.run())
        try:
            await wait_for(lambda: cache.synced, DEADLINE_S, what="first full list")
            yield cache, told
            assert not task.done(), "the cache's poll loop ended"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if hint is not None:
                await hint.close()


async def settled(cache: NodeCache) -> None:
    """slurmctld's start is known and no reload is pending: on a sandbox started (or reconfigured) just
    before, the first read may have found 0, and the start read after it is told (it may be a later
    slurmctld's), which a test must not count as its own reload."""
    await wait_for(
        lambda: cache.reload_watch.started != 0 and not cache.reloading, DEADLINE_S,
        what="slurmctld's start read",
    )  # fmt: skip


def give_feature(sandbox: Sandbox) -> None:
    sandbox.scontrol("update", f"nodename={NODE}", "availablefeatures=rl1", "activefeatures=rl1")


@pytest.mark.parametrize("how", HINTS)
async def test_a_reconfigure_is_told_once_a_list_shows_what_it_forgot(
    slurm_sandbox: Sandbox, how: str
) -> None:
    give_feature(slurm_sandbox)
    async with watched_cache(slurm_sandbox, how) as (cache, told):
        assert "rl1" in cache.nodes[NODE].features
        await settled(cache)
        if how == "hint":  # read every reload_interval_s, and moves on no other read
            reads = cache.stats.reads["reload"]
            await wait_for(
                lambda: cache.stats.reads["reload"] >= reads + 3, DEADLINE_S, what="three more reads"
            )
            probes = cache.stats.reads["probe"]
        reloads, seen = cache.stats.reloads, len(told)
        started = time.monotonic()
        await asyncio.to_thread(slurm_sandbox.scontrol, "reconfigure")
        await wait_for(lambda: len(told) > seen, DEADLINE_S, what="the reload told")
        print(f"reload told {time.monotonic() - started:.2f} s after the reconfigure began ({how})")
        # told at the new slurmctld's 0 or its start, or both (whichever reads fell where): each time after a
        # list that had the feature gone (slurm.conf gives none)
        assert told[seen:] and all(features == set() for features in told[seen:]), told
        assert cache.stats.reloads > reloads and cache.stats.reload_errors == 0
        size = cache.stats.read_bytes["reload"] / cache.stats.reads["reload"]
        assert 1_000 < size < 32_000, size  # /metrics/scheduler (7 KB) or /diag (4-5 KB)
        if how == "hint":
            assert cache.stats.reads["probe"] == probes  # slurmrestd asked for the list only


@pytest.mark.parametrize("how", HINTS)
async def test_a_restart_is_told_once_a_list_shows_what_it_forgot(slurm_sandbox: Sandbox, how: str) -> None:
    give_feature(slurm_sandbox)
    async with watched_cache(slurm_sandbox, how) as (cache, told):
        await settled(cache)
        seen = len(told)
        await asyncio.to_thread(slurm_sandbox.restart_slurmctld)
        await wait_for(lambda: len(told) > seen, DEADLINE_S, what="the reload told")
        assert all(features == set() for features in told[seen:]), told


async def test_an_unchanged_slurmctld_is_no_reload(slurm_sandbox: Sandbox) -> None:
    """Changes of nodes (a drain and an undrain, each a probe that says "changed") read the marker, which
    has not moved: no reload."""
    async with watched_cache(slurm_sandbox, "probes") as (cache, told):
        await settled(cache)
        reloads, seen, reads = cache.stats.reloads, len(told), cache.stats.reads["reload"]
        for state, reason in (("drain", ["reason=reload test"]), ("undrain", [])):
            slurm_sandbox.scontrol("update", f"nodename={NODE}", f"state={state}", *reason)
            await wait_for(
                lambda: cache.nodes[NODE].drain_flag == (state == "drain"),  # noqa: B023
                DEADLINE_S, what=f"the {state} listed",
            )  # fmt: skip
        assert cache.stats.reads["reload"] > reads
        assert cache.stats.reloads == reloads and len(told) == seen


async def test_a_cache_started_with_slurmctld_still_sees_the_next_reconfigure(slurm_sandbox: Sandbox) -> None:
    """A cache whose first read may fall before slurmctld has set its start (it reads 0 then: the e2e run on
    a fresh 24.11 sandbox once missed the reconfigure after it, an idle cluster reading the marker only
    when a probe says "changed") is told of the reconfigure that follows, whichever way that fell."""
    await asyncio.to_thread(slurm_sandbox.restart_slurmctld)
    give_feature(slurm_sandbox)
    async with watched_cache(slurm_sandbox, "probes") as (cache, told):
        await settled(cache)  # a first read of 0 is read again (without: never, on an idle cluster)
        seen = len(told)  # 0, or 1 when the first read was 0: a start after it may be a later slurmctld's
        await asyncio.to_thread(slurm_sandbox.scontrol, "reconfigure")
        await wait_for(lambda: len(told) > seen, DEADLINE_S, what="the reconfigure told")
        assert all(features == set() for features in told[seen:]), told


@pytest.mark.parametrize("how", HINTS)
async def test_a_cache_started_just_after_a_reconfigure_lists_once_and_tells_no_reload(
    slurm_sandbox: Sandbox, how: str
) -> None:
    """A syncer started as slurmctld reloads (a chart upgrade that changes slurm.conf and rolls the syncer)
    waits for the new slurmctld's start marker before its first list: the start, read after a list, could
    not be told from a later slurmctld's, and was taken for a reload (a whole node list more, every key
    looked at again, and a warning; the e2e test of Slinky partitions, which reconfigures just before its
    syncer starts, failed on it under load)."""
    await asyncio.to_thread(slurm_sandbox.scontrol, "reconfigure")
    async with watched_cache(slurm_sandbox, how) as (cache, told):
        reads = cache.stats.reads["reload"]
        await wait_for(
            lambda: cache.stats.reads["reload"] > reads and cache.reload_watch.started != 0,
            DEADLINE_S, what="slurmctld's start read after the first list",
        )  # fmt: skip
        assert cache.stats.reloads == 0 and told == [], cache.stats
