"""Issue 18's two risky paths with the whole syncer running: a bulk drain whose batch names a node that
Slurm no longer knows, and slurmctld's metrics hint when its endpoint is absent, slow or lying."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from syncer.model.keys import Keys
from tests.e2e.rig import Rig, fresh_slurm_nodes, get, running_syncer, sample
from tests.fixtures.metrics import fake_metrics
from tests.helpers import wait_for

GONE = "dyn-e2e-gone"  # a dynamic node: sorts before "node...", so Slurm stops at it before any other


async def test_a_node_deleted_while_its_bulk_drain_is_on_the_way_fails_alone(rig: Rig):
    """A rack is cordoned; while the bulk drain is on its way, another controller deletes one of the nodes
    (a dynamic node scaled in). Slurm refuses the request at that node; every other node must still be
    drained, none reported drained that is not, and the syncer must stay up and ready."""
    names = fresh_slurm_nodes(6)
    await asyncio.to_thread(rig.sandbox.start_slurmd, GONE)
    nodes = [rig.bind_pod(n)[0] for n in [*names, GONE]]
    deleted = asyncio.Event()
    held = asyncio.Event()
    try:
        async with running_syncer(rig) as service:
            await wait_for(lambda: GONE in service.slurm_cache.nodes, deadline_s=20, what="the dynamic node")
            await service.engine.queue.wait_idle()
            # the seam is the syncer's own Slurm client: the requests still go to the real slurmrestd
            client = service.context.slurm_writer.bulk.slurm
            single, bulk = client.update_node, client.update_nodes

            async def held_first(name: str, *args: Any, **kwargs: Any) -> None:
                if not held.is_set():  # hold the first update so the rest of the rack queues as one batch
                    held.set()
                    await asyncio.sleep(0.5)  # the window in which the rest of the rack is decided
                await single(name, *args, **kwargs)

            async def deleted_meanwhile(names: list[str], *args: Any, **kwargs: Any) -> None:
                if GONE in names and not deleted.is_set():
                    await asyncio.to_thread(rig.sandbox.delete_node, GONE)
                    deleted.set()
                await bulk(names, *args, **kwargs)

            client.update_node, client.update_nodes = held_first, deleted_meanwhile  # type: ignore[method-assign,assignment]
            with capture_logs() as logs:
                # the first cordon alone, held at its request; then the rest with the dynamic node, whose
                # drains all queue behind it and go as one batch (cordoned at once, two or more could be
                # decided in one turn of the loop and leave the dynamic node alone in a later request)
                cordon = {"spec": {"unschedulable": True}}
                rig.kube.patch("", "v1", "nodes", nodes[0], cordon)
                await wait_for(held.is_set, deadline_s=10, what="the first drain held at its request")
                for node in nodes[1:]:
                    rig.kube.patch("", "v1", "nodes", node, cordon)

                async def rest_drained() -> bool:
                    listing = await rig.reader.list_all_nodes()
                    return {n.name for n in listing.nodes if n.drain_flag} >= set(names)

                await wait_for(rest_drained, deadline_s=30, what="every other node of the rack drained")
                assert deleted.is_set(), "the bulk request never named the deleted node"
            stats = service.context.slurm_writer.bulk.stats
            assert stats.partial >= 1 and stats.bulk_requests >= 2, stats
            _, exposed = await get(service, "/metrics")
            assert sample(exposed, "slurm_syncer_slurm_bulk_refused_total") == stats.partial
            assert any("refused part-way" in str(e.get("event")) for e in logs), [e["event"] for e in logs]
            for name in names:
                assert (await rig.slurm(name)).reason == "k8s: Node cordoned", name
            # the deleted node is never shown drained: no Slurm record, nothing written as if it were
            pod = rig.pod_obj(GONE)
            assert "DRAIN" not in (pod["metadata"].get("annotations") or {}).get(Keys.STATE, "")
            assert service.readiness()[0], service.readiness()  # still ready after the refused request
            assert service.manager.failure is None
    finally:
        if not deleted.is_set() and rig.sandbox.running(f"slurmd:{GONE}"):
            await asyncio.to_thread(rig.sandbox.delete_node, GONE)


@pytest.mark.parametrize("kind", ["absent", "slow", "frozen"])
async def test_a_bad_metrics_endpoint_never_hides_a_slurm_drain(rig: Rig, kind: str):
    """`--slurm-metrics-url` pointing at nothing, at an endpoint slower than the hint's timeout, or at one
    whose counts never move (a lie that parses): a Slurm drain still reaches the pod within the floor, and
    the syncer stays ready; a failing hint says so once and in its metric."""
    (name,) = fresh_slurm_nodes(1)
    rig.bind_pod(name)
    floor = 3.0
    with capture_logs() as logs:
        async with (
            fake_metrics(kind) as url,
            running_syncer(rig, slurm_metrics_url=url, slurm_metrics_floor_s=floor) as service,
        ):
            await wait_for(lambda: name in service.slurm_cache.nodes, deadline_s=20, what="the node listed")
            await service.engine.queue.wait_idle()
            rig.scontrol("update", f"nodename={name}", "state=drain", f"reason=admin: hint {kind}")

            def shown() -> bool:
                annotations = rig.pod_obj(name)["metadata"].get("annotations") or {}
                return annotations.get(Keys.REASON) == f"admin: hint {kind}"

            # floor + the hint's 2 s timeout + a poll and a list, with slack
            await wait_for(shown, deadline_s=floor + 2.0 + 5.0, what=f"the drain on the pod ({kind})")
            assert service.readiness()[0] and not service.slurm_cache.stale, service.readiness()
            failing = service.slurm_cache.stats.hint_failing
            assert failing == (kind != "frozen"), service.slurm_cache.stats
    said = [e for e in logs if e.get("event") == "slurm_metrics_hint_failed"]
    assert len(said) == (0 if kind == "frozen" else 1), said


async def test_a_drain_queued_behind_a_slow_request_is_dropped_when_its_node_is_uncordoned_meanwhile(
    rig: Rig,
):
    """A cordon's drain waits in the group commit behind a request slurmrestd is slow to answer; the Node is
    uncordoned meanwhile. When the drain's turn comes it is decided once more and not sent: a drain never
    reaches Slurm after its uncordon (found by the long fault suite under load, issue 31)."""
    first, second = fresh_slurm_nodes(2)
    nodes = [rig.bind_pod(name)[0] for name in (first, second)]
    release = asyncio.Event()
    held = asyncio.Event()
    sent: list[str] = []
    async with running_syncer(rig) as service:
        await service.engine.queue.wait_idle()
        client = service.context.slurm_writer.bulk.slurm
        single, bulk = client.update_node, client.update_nodes

        async def slow_first(name: str, *args: Any, **kwargs: Any) -> None:
            sent.append(name)
            if name == first:
                held.set()
                await release.wait()  # slurmrestd slow to answer this one
            await single(name, *args, **kwargs)

        async def recorded(names: list[str], *args: Any, **kwargs: Any) -> None:
            sent.extend(names)
            await bulk(names, *args, **kwargs)

        client.update_node, client.update_nodes = slow_first, recorded  # type: ignore[method-assign,assignment]
        cordon, uncordon = {"spec": {"unschedulable": True}}, {"spec": {"unschedulable": False}}
        rig.kube.patch("", "v1", "nodes", nodes[0], cordon)
        await wait_for(held.is_set, deadline_s=10, what="the first drain in flight")
        rig.kube.patch("", "v1", "nodes", nodes[1], cordon)
        bulk_writer = service.context.slurm_writer.bulk
        await wait_for(
            lambda: any(q.waiting for q in bulk_writer._queues.values()),
            deadline_s=10,
            what="the second queued",
        )
        rig.kube.patch("", "v1", "nodes", nodes[1], uncordon)

        def seen_uncordoned() -> bool:
            node = service.kube_cache.node(nodes[1])
            return node is not None and not node.unschedulable

        await wait_for(seen_uncordoned, deadline_s=10, what="the uncordon in the syncer's cache")
        release.set()

        async def first_drained() -> bool:
            return (await rig.slurm(first)).drain_flag

        await wait_for(first_drained, deadline_s=10, what="the first drain")
        await wait_for(
            lambda: bulk_writer.stats.superseded >= 1, deadline_s=10, what="the queued drain dropped"
        )
        await service.engine.queue.wait_idle()
        assert second not in sent, sent
        assert not (await rig.slurm(second)).drain_flag
