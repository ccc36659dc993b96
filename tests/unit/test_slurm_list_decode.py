"""A full node list is decoded a chunk at a time, with the event loop running in between: at 10,000 nodes a
decode in one go held every reconcile and write back for 0.17 s (docs/architecture.md)."""

from __future__ import annotations

import asyncio
import json

import msgspec

from syncer.slurm.client import DECODE_CHUNK, NodeDecoder, decode_nodes, nodes_in_turns
from syncer.slurm.models import NodeListResponse


def listing(count: int) -> NodeListResponse:
    nodes = [{"name": f"node{i:05d}", "state": ["IDLE"], "reason": ""} for i in range(count)]
    return msgspec.json.decode(json.dumps({"nodes": nodes}).encode(), type=NodeListResponse)


async def test_the_loop_runs_between_chunks_of_a_big_list() -> None:
    raw = listing(4 * DECODE_CHUNK).nodes
    turns = 0
    done = False

    async def other_work() -> None:  # what reconciles and writes do meanwhile: take loop turns
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    worker = asyncio.create_task(other_work())
    await asyncio.sleep(0)  # the other work is running
    started_at = turns
    nodes = await nodes_in_turns(raw)
    done = True
    await worker
    assert [n.name for n in nodes] == [f"node{i:05d}" for i in range(4 * DECODE_CHUNK)]
    assert turns - started_at >= 3, "the other work got no turn while the list was decoded"


async def test_a_small_list_is_decoded_in_one_go() -> None:
    nodes = await nodes_in_turns(listing(3).nodes)
    assert [n.name for n in nodes] == ["node00000", "node00001", "node00002"]


async def test_an_unchanged_node_is_the_last_lists_node_and_a_changed_one_is_new() -> None:
    decoder = NodeDecoder()

    def body(reasons: dict[str, str]) -> list[msgspec.Raw]:
        nodes = [{"name": name, "state": ["IDLE"], "reason": reason} for name, reason in reasons.items()]
        return msgspec.json.decode(json.dumps({"nodes": nodes}).encode(), type=NodeListResponse).nodes

    first = await decoder.decode(body({"a": "", "b": "", "c": ""}))
    second = await decoder.decode(body({"a": "", "b": "admin: bad dimm", "d": ""}))
    assert second[0] is first[0]  # unchanged: no new object, the diff sees the same one
    assert second[1] is not first[1] and second[1].reason == "admin: bad dimm"
    assert second[1] == decode_nodes(body({"b": "admin: bad dimm"}))[0]  # as a fresh decode has it
    assert second[2].name == "d"
    third = await decoder.decode(body({"c": "", "b": ""}))
    # c was not in the list before (only the last list is kept): decoded afresh, equal all the same
    assert third[0] is not first[2] and third[0] == first[2]
    assert third[1] is not second[1] and third[1].reason == ""
