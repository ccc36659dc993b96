"""A Node carrying annotations near the 256 KiB limit of the API server, changing every second: the
watch stream carries each change without a re-list or an error, and the Node's cordon still drains
its Slurm node promptly (a regression test: it holds with aiohttp 3.14; an HTTP client limit on line
or chunk size would break it)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from syncer.model.keys import Keys
from tests.e2e.rig import Rig, fresh_slurm_nodes, running_syncer
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
NEAR_LIMIT = 250 * 1024  # the API server rejects more than 256 KiB of annotations per object


def big_value(round_: int) -> str:
    return f"{round_:08d}" + "x" * (NEAR_LIMIT - 8)


async def test_a_node_near_the_annotation_limit_changing_every_second(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    big = "example.com/inventory"
    rig.kube.patch("", "v1", "nodes", kube_node, {"metadata": {"annotations": {big: big_value(0)}}})
    async with running_syncer(rig) as service:
        informer = service.kube_cache.nodes
        lists, errors = informer.stats.lists, informer.stats.errors
        changes = 0

        async def churn() -> None:
            nonlocal changes
            for round_ in range(1, 60):  # bounded: at most a minute of changes
                rig.kube.patch(
                    "", "v1", "nodes", kube_node, {"metadata": {"annotations": {big: big_value(round_)}}}
                )
                changes = round_
                await asyncio.sleep(1.0)  # the load's own rhythm: one change a second

        churner = asyncio.create_task(churn())
        try:

            def seen(round_: int) -> bool:
                node = service.kube_cache.node(kube_node)
                return node is not None and node.annotations.get(big, "")[:8] == f"{round_:08d}"

            await wait_for(lambda: changes >= 3 and seen(changes), deadline_s=20, what="three changes seen")
            rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
            cordoned = time.monotonic()

            async def drained() -> bool:
                return (await rig.slurm(name)).drain_flag

            await wait_for(drained, deadline_s=10, what="the cordon drains the Slurm node")
            took = time.monotonic() - cordoned
            await wait_for(
                lambda: changes >= 6 and seen(changes), deadline_s=20, what="three more changes seen"
            )
        finally:
            churner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await churner
        assert took < 2.0, f"cordon to drain took {took:.2f} s (within a second when the machine is idle)"
        assert (informer.stats.lists, informer.stats.errors) == (lists, errors), "no re-list, no watch error"
        assert informer.stats.relists_after_gone == 0
        await wait_for(
            lambda: "DRAIN" in rig.pod_obj(name)["metadata"]["annotations"].get(Keys.STATE, "").split("+"),
            what="Kubernetes shows the drain",
        )
