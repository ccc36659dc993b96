"""A drain is read and decided again before it goes out (the reconcile's second pass): what Kubernetes
shows once the fresh read of the Slurm node returns is what the drain goes by. A binding gone or in
conflict by then sends nothing; a failed fresh read sends nothing in that reconcile and the retry drains
once, with one drain Event."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from syncer.app.service import SyncerService
from syncer.controllers.sync.plan import EVENT_DRAIN
from syncer.model.keys import Keys
from syncer.model.slurm import SlurmNode
from syncer.slurm.errors import SlurmError
from tests.e2e.rig import NAMESPACE, Rig, cordoned_while_its_read_is_held, fresh_slurm_nodes, running_syncer
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


def second_claim(rig: Rig, name: str) -> None:
    """Another slurmd pod claims the same Slurm node: a conflict."""
    body = {
        "metadata": {"name": f"slurmd-{name}-again", "labels": {Keys.NODE_NAME_LABEL: name}},
        "spec": {"containers": [{"name": "slurmd", "image": "slurmd"}]},
    }
    rig.kube.create("", "v1", "pods", body, namespace=NAMESPACE)


def label_removed(rig: Rig, name: str) -> None:
    """The slurmd pod no longer names the Slurm node: it is bound to nothing."""
    patch = {"metadata": {"labels": {Keys.NODE_NAME_LABEL: None}}}
    rig.kube.patch("", "v1", "pods", f"slurmd-{name}", patch, namespace=NAMESPACE)


@pytest.mark.parametrize(
    ("change", "seen"),
    [
        (second_claim, lambda s, n: len(s.kube_cache.pods_for(n)) == 2),
        (label_removed, lambda s, n: not s.kube_cache.pods_for(n)),
    ],
    ids=["conflict", "unbound"],
)
async def test_a_binding_changed_during_the_drains_fresh_read_sends_no_drain(
    rig: Rig,
    change: Callable[[Rig, str], None],
    seen: Callable[[SyncerService, str], bool],
):
    (name,) = fresh_slurm_nodes(1)
    node, _pod = rig.bind_pod(name)
    async with running_syncer(rig) as service:
        await service.engine.queue.wait_idle()
        bulk = service.context.slurm_writer.bulk
        sent_before = bulk.stats.requests
        # slurmrestd slow to answer the read before the drain
        read = await cordoned_while_its_read_is_held(rig, service, name, node)
        change(rig, name)
        await wait_for(lambda: seen(service, name), deadline_s=20, what="the change in the syncer's cache")
        read.release.set()
        await service.engine.queue.wait_idle()
        assert bulk.stats.requests == sent_before, "a drain went out for a binding changed meanwhile"
        assert not (await rig.slurm(name)).drain_flag


async def test_a_failed_fresh_read_sends_nothing_then_the_retry_drains_once(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    node, pod = rig.bind_pod(name)
    failed: list[str] = []
    async with running_syncer(rig) as service:
        await service.engine.queue.wait_idle()
        slurm = service.context.slurm
        get_node = slurm.get_node

        async def failing_once(wanted: str) -> SlurmNode:
            if wanted == name and not failed:
                failed.append(wanted)
                raise SlurmError("slurmrestd answered 503 (injected)")
            return await get_node(wanted)

        slurm.get_node = failing_once  # type: ignore[method-assign,assignment]
        rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return (await rig.slurm(name)).drain_flag

        await wait_for(drained, deadline_s=20, what="the drain, on the retry")
        assert failed == [name]
        await service.engine.queue.wait_idle()
        assert len([e for e in rig.events_for(pod) if e["reason"] == EVENT_DRAIN]) == 1
