"""A slurmrestd replaced by one serving other REST API versions (as an upgrade does; here the real slurmrestd
restarted with `-d data_parser/...`, which limits the /slurm/vX/ paths it serves on both releases) is
followed by the client and its node cache without a restart: the old version gone, at once; newer versions
beside it, after slurmrestd was seen away or slurmctld started anew. One negotiation per replacement, and
none for a reconfigure that left slurmrestd as it was (a check under the version in use settles it)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest

from syncer.slurm.auth import TokenFile
from syncer.slurm.cache import NodeCache
from syncer.slurm.client import SlurmClient
from syncer.slurm.versions import VERSIONS
from syncer.testing.sandbox import Sandbox
from tests.fixtures.slurm import API_VERSIONS, restart_slurmrestd, served_only
from tests.helpers import captured_logs, wait_for

pytestmark = pytest.mark.slurm
OLDEST, NEWEST = API_VERSIONS[0], API_VERSIONS[-1]
VERSIONS_NEWER_THAN = {
    name: list(VERSIONS).index(name) for name in VERSIONS
}  # the syncer knows, newest first
BOUND_S = 15.0  # a version change followed within this (a poll, a negotiation; a busy machine)


@contextlib.asynccontextmanager
async def polling(cache: NodeCache) -> AsyncIterator[None]:
    task = asyncio.create_task(cache.run())
    try:
        yield
        assert not task.done(), "the cache's poll loop ended"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@contextlib.asynccontextmanager
async def polled(sandbox: Sandbox) -> AsyncIterator[tuple[SlurmClient, NodeCache]]:
    """A started client (auto version) and its node cache polling as the syncer's does (probes every 0.2 s;
    no hint: the calls that meet the new slurmrestd are slurmrestd's)."""
    async with SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file)) as client:
        cache = NodeCache(client, poll_interval_s=0.2, stale_after_s=30.0)
        async with polling(cache):
            await wait_for(lambda: cache.synced, 20, what="first full list")
            yield client, cache


def negotiations(client: SlurmClient) -> int:
    return client.stats.requests[("openapi", "200")]


def checks(client: SlurmClient) -> int:
    """Requests of version checks (the ping under the version in use, the newer versions' pings)."""
    return sum(n for (endpoint, _), n in client.stats.requests.items() if endpoint == "version_check")


def failed(client: SlurmClient) -> int:
    return sum(n for (_, status), n in client.stats.requests.items() if status == "error")


def changes(logs: list[MutableMapping[str, Any]]) -> list[tuple[object, object]]:
    return [(e["old"], e["new"]) for e in logs if e["event"] == "slurm_api_version_changed"]


async def test_a_slurmrestd_that_no_longer_serves_the_version_in_use_is_followed_at_once(
    slurm_sandbox: Sandbox,
) -> None:
    older = API_VERSIONS[:2]  # 26.05: v0.0.42-43 (no v0.0.45); 24.11: v0.0.40-41 (no v0.0.42)
    async with polled(slurm_sandbox) as (client, cache):
        assert client.version is not None and client.version.name == NEWEST
        before = negotiations(client)
        with captured_logs() as logs:
            async with served_only(slurm_sandbox, older):  # restarted in ~0.1 s: no outage to see
                await wait_for(
                    lambda: client.version is not None and client.version.name == older[-1], BOUND_S,
                    what=f"the client on {older[-1]}",
                )  # fmt: skip
                assert changes(logs.entries) == [(NEWEST, older[-1])]
                changed_at = time.monotonic()
                await wait_for(lambda: cache.last_success > changed_at, BOUND_S, what="a poll answered on it")
                assert negotiations(client) == before + 1, "one negotiation for the replacement"
            # every version again, v0.0.4X kept: nothing tells that newer ones are back but the next event
            await wait_for(lambda: not cache.stale, BOUND_S, what="the cache fresh")


async def test_newer_versions_beside_the_one_in_use_are_taken_after_slurmrestd_was_seen_away(
    slurm_sandbox: Sandbox,
) -> None:
    """The old version still served (no 404 tells), same release: the syncer saw slurmrestd away."""
    async with served_only(slurm_sandbox, [OLDEST]), polled(slurm_sandbox) as (client, cache):
        assert client.version is not None and client.version.name == OLDEST
        probes = cache.stats.probes  # 0 on 24.11's v0.0.40: it refuses update_time, full lists only
        with captured_logs() as logs:
            await asyncio.to_thread(slurm_sandbox.stop_slurmrestd)
            await wait_for(lambda: "cannot reach" in cache.last_error, BOUND_S, what="a poll failing")
            before = negotiations(client)
            await asyncio.to_thread(slurm_sandbox.start_slurmrestd)  # every version of the release
            await wait_for(
                lambda: client.version is not None and client.version.name == NEWEST, BOUND_S,
                what=f"the client on {NEWEST}",
            )  # fmt: skip
            assert changes(logs.entries) == [(OLDEST, NEWEST)]
            assert negotiations(client) == before + 1
        assert client.external_jobs == VERSIONS[NEWEST].external_jobs
        if not VERSIONS[OLDEST].conditional_nodes:  # 24.11's v0.0.40 refuses update_time; v0.0.42 takes it
            assert probes == 0
            await wait_for(lambda: cache.stats.probes > probes, BOUND_S, what="update_time probes")


async def test_newer_versions_are_taken_when_slurmctld_starts_anew(slurm_sandbox: Sandbox) -> None:
    """An upgrade restarts slurmctld too. slurmrestd is replaced while nothing asks it (the old version
    still served, the same release: nothing else tells), then slurmctld restarted: the reload watch tells."""
    async with (
        served_only(slurm_sandbox, [OLDEST]),
        SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file)) as client,
    ):
        cache = NodeCache(client, poll_interval_s=0.2, stale_after_s=30.0)
        async with polling(cache):
            await wait_for(lambda: cache.synced, 20, what="first full list")
            await wait_for(
                lambda: cache.reload_watch.started != 0 and not cache.reloading, 10, what="slurmctld's start"
            )
        assert client.version is not None and client.version.name == OLDEST
        errors = failed(client)
        await asyncio.to_thread(restart_slurmrestd, slurm_sandbox)  # every version of the release
        await asyncio.to_thread(slurm_sandbox.restart_slurmctld)
        with captured_logs() as logs:
            async with polling(cache):
                await wait_for(
                    lambda: client.version is not None and client.version.name == NEWEST, BOUND_S,
                    what=f"the client on {NEWEST}",
                )  # fmt: skip
        assert cache.stats.reloads == 1
        assert [e["why"] for e in logs.entries if e["event"] == "slurm_api_version_changed"] == [
            "slurmctld started anew"
        ]
        assert failed(client) == errors, "slurmrestd was never seen away"


async def test_a_reconfigure_is_settled_by_a_check_without_the_openapi_document(
    slurm_sandbox: Sandbox,
) -> None:
    """`scontrol reconfigure` starts slurmctld anew, which an upgrade does too: the version is checked again,
    by pings under the version in use (and the newer versions', where the release serves fewer than the
    syncer knows), not by the OpenAPI document (887 KB on 26.05.5, 663 KB on 24.11.5)."""
    async with polled(slurm_sandbox) as (client, cache):
        await wait_for(
            lambda: cache.reload_watch.started != 0 and not cache.reloading, 10, what="slurmctld's start"
        )
        assert client.version is not None and client.version.name == NEWEST
        before, reloads, checked = negotiations(client), cache.stats.reloads, client.follow.negotiations
        with captured_logs() as logs:
            await asyncio.to_thread(slurm_sandbox.scontrol, "reconfigure")
            await wait_for(lambda: cache.stats.reloads > reloads, BOUND_S, what="the reconfigure seen")
            await wait_for(
                lambda: client.follow.negotiations > checked and not client.follow.why, BOUND_S,
                what="the version checked again",
            )  # fmt: skip
        assert negotiations(client) == before, "no OpenAPI document read for a reconfigure"
        # 26.05: v0.0.45's ping; 24.11: v0.0.42's, then v0.0.43-45 answered as not served
        assert checks(client) >= 1 + VERSIONS_NEWER_THAN[NEWEST]
        assert client.version.name == NEWEST and changes(logs.entries) == []
