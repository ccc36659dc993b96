"""/metrics at many Slurm nodes (issue 47): the text is prometheus_client's own for the same registry, the
node figures are the node cache's, and a scrape lets the rest of the daemon run while it works them out (at
10,000 nodes one in one go held every reconcile 0.1 s of CPU, 0.3-0.85 s on a busy machine)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import msgspec
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from syncer.app.metrics_nodes import CHUNK, gpu_count
from syncer.app.service import ServiceConfig, SyncerService
from syncer.kube.client import KubeClient
from syncer.model.slurm import SlurmNode
from syncer.slurm.auth import NoToken
from syncer.slurm.client import NodeDecoder, SlurmClient
from syncer.slurm.models import NodeListResponse

STATES = (["ALLOCATED"], ["MIXED", "DRAIN"], ["IDLE"], ["IDLE", "DRAIN"], ["DOWN", "NOT_RESPONDING"])


def node_json(index: int, state: list[str] | None = None) -> dict[str, Any]:
    """A node as slurmrestd lists it (the fields the syncer reads)."""
    gpu, state = index % 3 != 0, state or STATES[index % len(STATES)]
    used = f"gpu:h100:{index % 9}(IDX:0-7)" if gpu else ""
    return {
        "name": f"node{index:05d}", "state": state,
        "partitions": ["batch", "gpu" if gpu else "cpu"], "cpus": 64, "alloc_cpus": index % 65,
        "real_memory": 256000, "alloc_memory": 1000 * (index % 7),
        "gres": "gpu:h100:8(S:0-1)" if gpu else "", "gres_used": used,
        "reason": "admin: bad dimm" if "DRAIN" in state else "",
    }  # fmt: skip


async def decoded(decoder: NodeDecoder, nodes: list[dict[str, Any]]) -> dict[str, SlurmNode]:
    """The node cache's dict after a list of `nodes` (its own decoder: unchanged nodes keep their object)."""
    raw = msgspec.json.decode(json.dumps({"nodes": nodes}).encode(), type=NodeListResponse).nodes
    return {node.name: node for node in await decoder.decode(raw)}


@pytest.fixture
async def service() -> AsyncIterator[SyncerService]:
    slurm, kube = SlurmClient("http://127.0.0.1:9", NoToken()), KubeClient("http://127.0.0.1:9")
    service = SyncerService(slurm, kube, ServiceConfig(listen_host="127.0.0.1", listen_port=0))
    try:
        await service._serve_http()  # the daemon's own /metrics handler; nothing else started
        yield service
    finally:
        await service.stop()


async def scrape(service: SyncerService) -> str:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{service.http_port}/metrics") as response:
            assert response.status == 200
            return await response.text()


def ours(text: str) -> list[str]:
    """The lines of a scrape but the process' own figures (its CPU seconds and memory move between two)."""
    return [line for line in text.splitlines() if not line.startswith(("process_", "# HELP process_"))]


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    families = {f.name: f for f in text_string_to_metric_families(text)}
    return [(dict(s.labels), s.value) for s in families[name].samples]


def check_figures(text: str, nodes: Mapping[str, SlurmNode]) -> None:
    want = [
        ({"node": n.name, "state": n.base_state.lower(), "drain": str(n.drain_flag).lower()}, 1.0)
        for n in nodes.values()
    ]
    assert samples(text, "slurm_node_info") == want
    by_state = Counter(n.base_state.lower() for n in nodes.values())
    assert {labels["state"]: v for labels, v in samples(text, "slurm_nodes") if v} == dict(by_state)
    gpus: Counter[str] = Counter()
    for node in nodes.values():
        for partition in node.partitions:
            gpus[partition] += gpu_count(node.gres_used)
    got = {labels["partition"]: v for labels, v in samples(text, "slurm_partition_gpus_allocated")}
    assert got == dict(gpus)


async def test_the_scrape_is_prometheus_clients_text_of_the_node_cache(service: SyncerService) -> None:
    decoder = NodeDecoder()
    count = 3 * CHUNK + 7
    listed = [node_json(i) for i in range(count)]
    listed.append(node_json(9999) | {"name": 'odd"name\\with\nall'})  # escaped as prometheus_client does
    service.slurm_cache.nodes = await decoded(decoder, listed)
    text = await scrape(service)
    assert ours(text) == ours(generate_latest(service.metrics.registry).decode())
    check_figures(text, service.slurm_cache.nodes)

    # a list since: nodes drained and undrained, one gone, one new; most node objects the same as before
    drained = ["IDLE", "DRAIN"]
    listed = [node_json(i, drained) if i % 10 == 0 else node_json(i) for i in range(1, count + 2)]
    listed[5] = node_json(6, ["IDLE"])  # was MIXED+DRAIN
    service.slurm_cache.nodes = await decoded(decoder, listed)
    text = await scrape(service)
    assert ours(text) == ours(generate_latest(service.metrics.registry).decode())
    check_figures(text, service.slurm_cache.nodes)
    assert 'slurm_node_info{drain="false",node="node00006",state="idle"} 1.0' in text.splitlines()
    assert "node00000" not in text and f'node="node{count + 1:05d}"' in text


async def test_a_scrape_at_many_nodes_lets_other_work_run_and_shows_the_cache_as_it_began(
    service: SyncerService,
) -> None:
    """A list applied while a scrape works out the node figures is not in it (the next scrape has it), and the
    work in the loop beside the scrape (here that list) ran before the scrape ended."""
    decoder = NodeDecoder()
    service.slurm_cache.nodes = before = await decoded(decoder, [node_json(i) for i in range(8 * CHUNK)])
    after = await decoded(decoder, [node_json(i, ["IDLE", "DRAIN"]) for i in range(8 * CHUNK)])
    turns = 0
    exposition = asyncio.create_task(service.metrics.exposition())

    async def other_work() -> None:  # a reconcile's turns, and a list applied mid-scrape
        nonlocal turns
        while not exposition.done():
            turns += 1
            if turns == 2:
                service.slurm_cache.nodes = after
            await asyncio.sleep(0)

    await asyncio.gather(exposition, other_work())
    assert turns >= 7, f"the scrape held the loop: {turns} turns for other work while it ran"
    check_figures(exposition.result().decode(), before)
    check_figures((await service.metrics.exposition()).decode(), after)


async def test_the_usual_flags_are_exported_at_zero_when_no_node_carries_them(service: SyncerService) -> None:
    """SlurmManyNodesDrainedOrDown adds `slurm_node_flags{flag="drain"}` to the DOWN count: with no drained
    node the series must be 0, not absent: the sum is empty and the alert never fires on DOWN nodes alone."""
    service.slurm_cache.nodes = await decoded(NodeDecoder(), [node_json(i, ["DOWN"]) for i in range(4)])
    flags = {labels["flag"]: v for labels, v in samples(await scrape(service), "slurm_node_flags")}
    assert flags == {"completing": 0.0, "drain": 0.0, "fail": 0.0, "not_responding": 0.0}
