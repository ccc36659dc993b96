"""A Kubernetes watch gap never lets a stale cordon reach Slurm: between a watch's end and the next one's
opening the cache may miss an uncordon, and a drain decided on it then lands after the uncordon (found by
the fault harness's Kubernetes API scenario on 24.11: a drain 0.6 to 1.2 s after the uncordon while the
Node informer re-listed after a 410)."""

from __future__ import annotations

from tests.e2e.rig import Rig, cordoned_while_its_read_is_held, fresh_slurm_nodes, running_syncer
from tests.helpers import wait_for


async def test_a_drain_decided_while_the_node_watch_reconnects_waits_and_never_lands_after_the_uncordon(
    rig: Rig,
):
    """The cordon's drain reads the Slurm node afresh (held here); meanwhile the watches are dropped and
    cannot reopen (the API server stops answering) and the Node is uncordoned. Once the read returns, the
    cache still shows the cordon: the drain waits for the watch instead, which brings the uncordon, and no
    drain is sent at all."""
    (name,) = fresh_slurm_nodes(1)
    node, _pod = rig.bind_pod(name)
    async with running_syncer(rig) as service:
        await service.engine.queue.wait_idle()
        bulk = service.context.slurm_writer.bulk
        sent_before = bulk.stats.requests
        # slurmrestd slow to answer the read before the drain
        read = await cordoned_while_its_read_is_held(rig, service, name, node)
        informer = service.kube_cache.nodes
        ended = informer.stats.watch_restarts + informer.stats.errors
        rig.kube.faults.pause()  # the watches' reconnects hang: the gap stays open
        try:
            rig.kube.drop_watches()
            # a dropped stream ends with an error (cut mid-answer) or normally: either way the gap is open
            await wait_for(
                lambda: informer.stats.watch_restarts + informer.stats.errors > ended,
                deadline_s=20,
                what="the Node watch ended",
            )
            rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": False}})
            read.release.set()
            # the read returns with the cache still showing the cordon: the drain waits for the watch
            await wait_for(
                lambda: (
                    service.engine.stats.actions.get(("drain", "k8s_to_slurm", "watch_gap"), 0) >= 1
                    or bulk.stats.requests > sent_before
                ),
                deadline_s=20,
                what="the drain held or sent",
            )
            assert bulk.stats.requests == sent_before, "a drain went out on a cache in a watch gap"
        finally:
            rig.kube.faults.resume()

        def uncordon_seen() -> bool:
            cached = service.kube_cache.node(node)
            return service.kube_cache.current and cached is not None and not cached.unschedulable

        await wait_for(uncordon_seen, deadline_s=30, what="the watch back, with the uncordon")
        await service.engine.queue.wait_idle()
        assert bulk.stats.requests == sent_before, "the held drain went out after the uncordon"
        assert not (await rig.slurm(name)).drain_flag
