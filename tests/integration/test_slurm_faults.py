"""The client behind a fault-injecting proxy in front of the real slurmrestd."""

from __future__ import annotations

import asyncio
import time

import pytest

from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmApiError, SlurmDecodeError, SlurmError, SlurmTimeout
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.sandbox import Sandbox

pytestmark = pytest.mark.slurm


async def test_transient_503s_are_retried(slurm_sandbox: Sandbox) -> None:
    async with FaultProxy(slurm_sandbox.rest_url) as proxy:
        async with SlurmClient(proxy.url, TokenFile(slurm_sandbox.token_file)) as client:
            proxy.fail_next(2, status=503)
            node = await client.get_node("node00001")
            assert node.name == "node00001"
            assert client.stats.requests[("node", "503")] == 2


async def test_errors_that_are_not_transient_are_not_retried(slurm_sandbox: Sandbox) -> None:
    async with FaultProxy(slurm_sandbox.rest_url) as proxy:
        async with SlurmClient(proxy.url, TokenFile(slurm_sandbox.token_file)) as client:
            proxy.fail_next(1, status=400)
            before = proxy.requests
            with pytest.raises(SlurmApiError, match="HTTP 400"):
                await client.get_node("node00001")
            assert proxy.requests == before + 1


@pytest.mark.parametrize("fault", ["truncate", "corrupt"])
async def test_damaged_json_is_a_clear_decode_error(slurm_sandbox: Sandbox, fault: str) -> None:
    async with FaultProxy(slurm_sandbox.rest_url) as proxy:
        async with SlurmClient(proxy.url, TokenFile(slurm_sandbox.token_file)) as client:
            setattr(proxy, fault, True)
            with pytest.raises(SlurmDecodeError, match="nodes: response does not match"):
                await client.list_all_nodes()


async def test_a_slow_server_times_out_within_the_deadline(slurm_sandbox: Sandbox) -> None:
    async with (
        FaultProxy(slurm_sandbox.rest_url) as proxy,
        SlurmClient(
            proxy.url, TokenFile(slurm_sandbox.token_file), timeout_s=0.3, deadline_s=1.0, attempts=50
        ) as client,
    ):
        proxy.delay_s = 5.0
        started = time.monotonic()
        with pytest.raises(SlurmTimeout, match="no answer"):
            await client.get_node("node00001")
        assert time.monotonic() - started < 3.0, "retries must stop at the deadline"


async def test_calls_during_a_reconnect_never_meet_a_closed_session(slurm_sandbox: Sandbox) -> None:
    """The node cache reconnects after a silence while reconciles use the same client: their calls succeed or
    fail as SlurmErrors (retried, counted), never with aiohttp's "Session is closed" (found under load in the
    long fault suite, issue 31)."""
    async with FaultProxy(slurm_sandbox.rest_url) as proxy:
        async with SlurmClient(proxy.url, TokenFile(slurm_sandbox.token_file), attempts=1) as client:
            proxy.answer_delay_s = 0.05  # calls stay in flight across the reconnects

            async def calls() -> list[object]:
                return await asyncio.gather(
                    *(client.get_node("node00001") for _ in range(40)), return_exceptions=True
                )

            async def reconnects() -> None:
                for _ in range(5):
                    await client.reconnect()

            answers, _ = await asyncio.gather(calls(), reconnects())
            failures = [a for a in answers if isinstance(a, BaseException)]
            assert all(isinstance(f, SlurmError) for f in failures), failures
            assert len(failures) < len(answers)
