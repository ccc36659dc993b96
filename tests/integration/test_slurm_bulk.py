"""Group commit of Slurm updates (issue 18) against the real slurmctld/slurmrestd: identical updates
decided together go in one `POST /nodes/`; an unknown node in the batch fails alone, and the nodes Slurm
did not reach because of it are sent again, so none is reported done that is not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from syncer.control.bulk import BulkWriter
from syncer.control.gate import NotLeader, WriteGate
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmNotFound
from syncer.testing.sandbox import Sandbox
from tests.helpers import wait_for

pytestmark = pytest.mark.slurm
NODES = [f"node{300 + i:05d}" for i in range(8)]  # this file's share of the session sandbox


@pytest.fixture
async def client(slurm_sandbox: Sandbox) -> AsyncIterator[SlurmClient]:
    async with SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file)) as c:
        yield c
        await c.update_nodes(NODES, state=["UNDRAIN"])


def drain_reason(sandbox: Sandbox, node: str) -> str:
    text = sandbox.scontrol("show", "node", node)
    return text.split("Reason=", 1)[1].split(" [", 1)[0].strip() if "Reason=" in text else ""


async def test_identical_updates_decided_together_go_in_one_request(
    client: SlurmClient, slurm_sandbox: Sandbox
):
    bulk = BulkWriter(client, WriteGate(always_leader=True))
    await asyncio.gather(*(bulk.update(n, state=["DRAIN"], reason="k8s: cordon") for n in NODES[:5]))
    assert bulk.stats.requests == 1 and bulk.stats.bulk_requests == 1 and bulk.stats.nodes == 5
    assert all("DRAIN" in slurm_sandbox.node_state(n) for n in NODES[:5])
    assert {drain_reason(slurm_sandbox, n) for n in NODES[:5]} == {"k8s: cordon"}
    # another reason is another request; a lone update is a plain single-node request
    await asyncio.gather(
        bulk.update(NODES[5], state=["DRAIN"], reason="k8s: a"),
        bulk.update(NODES[6], state=["DRAIN"], reason="k8s: b"),
    )
    assert bulk.stats.requests == 3 and bulk.stats.bulk_requests == 1
    assert (
        drain_reason(slurm_sandbox, NODES[5]) == "k8s: a"
        and drain_reason(slurm_sandbox, NODES[6]) == "k8s: b"
    )


async def test_updates_arriving_while_one_is_in_flight_go_together_next(
    client: SlurmClient, slurm_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
):
    bulk = BulkWriter(client, WriteGate(always_leader=True))
    release = asyncio.Event()
    real = client.update_node

    async def held(*args: object, **kwargs: object) -> None:  # the first request stays in flight until told
        await release.wait()
        await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(client, "update_node", held)
    first = asyncio.create_task(bulk.update(NODES[0], state=["DRAIN"], reason="k8s: wave"))
    await wait_for(lambda: bulk.stats.requests == 1, 5, what="the first update on its way")
    rest = [asyncio.create_task(bulk.update(n, state=["DRAIN"], reason="k8s: wave")) for n in NODES[1:6]]
    await wait_for(lambda: sum(len(q.waiting) for q in bulk._queues.values()) == 5, 5, what="five queued")
    release.set()
    await asyncio.gather(first, *rest)
    assert bulk.stats.requests == 2 and bulk.stats.bulk_requests == 1 and bulk.stats.nodes == 6
    assert all("DRAIN" in slurm_sandbox.node_state(n) for n in NODES[:6])


async def test_an_unknown_node_in_the_batch_fails_alone_and_the_rest_are_done(
    client: SlurmClient, slurm_sandbox: Sandbox
):
    """Slurm sorts the names and stops at the first unknown one: "aaa-gone" sorts first, so none of ours
    is changed by the first request; they must be sent again, without it."""
    bulk = BulkWriter(client, WriteGate(always_leader=True))
    names = [NODES[0], NODES[1], "aaa-gone", NODES[3], NODES[4]]
    results = await asyncio.gather(
        *(bulk.update(n, state=["DRAIN"], reason="k8s: storm") for n in names), return_exceptions=True
    )
    outcome = dict(zip(names, results, strict=True))
    assert isinstance(outcome["aaa-gone"], SlurmNotFound)
    assert all(outcome[n] is True for n in names if n != "aaa-gone")
    assert all(
        drain_reason(slurm_sandbox, n) == "k8s: storm" for n in (NODES[0], NODES[1], NODES[3], NODES[4])
    )
    assert (
        bulk.stats.partial == 1 and bulk.stats.requests == 2
    )  # the refused one, then the four it did not reach
    assert "DRAIN" not in slurm_sandbox.node_state(NODES[2])  # never named: untouched


async def test_nothing_queued_goes_out_once_the_gate_closes(client: SlurmClient, slurm_sandbox: Sandbox):
    gate = WriteGate()  # not leading
    bulk = BulkWriter(client, gate)
    with pytest.raises(NotLeader):
        await bulk.update(NODES[7], state=["DRAIN"], reason="k8s: stale leader")
    assert bulk.stats.requests == 0 and "DRAIN" not in slurm_sandbox.node_state(NODES[7])
