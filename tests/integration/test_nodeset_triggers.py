"""Which Kubernetes Node changes re-queue a NodeSet: the reconciler runs against the Kubernetes API
emulator, wired as the service wires it. It never leads (leader election is on and no elector runs),
so a reconcile only counts itself and writes nothing; Slurm is never contacted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from syncer.app.service import ServiceConfig, SyncerService
from syncer.controllers.nodeset.controller import NodeSetController
from syncer.controllers.nodeset.plan import removal_stamp
from syncer.controllers.nodeset.power import declared_stamp
from syncer.controllers.nodeset.power_actions import PassIncomplete
from syncer.kube.client import KubeClient
from syncer.model.cluster import LABEL
from syncer.model.keys import Keys
from syncer.model.slurm import SlurmNode
from syncer.runtime.queue import Lane
from syncer.runtime.tasks import cancel_and_wait
from syncer.slurm.auth import NoToken
from syncer.slurm.cache import NodeChange
from syncer.slurm.client import SlurmClient
from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions
from tests.helpers import wait_for

pytestmark = pytest.mark.kube
GROUP, VERSION, NAMESPACE = "slurm-syncer.dev", "v1alpha1", "slurm"
POOL = "slurm-syncer.dev/pool"  # the seeded Nodes carry POOL=gpu


def nodeset(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeSet",
        # this release's (a dry run takes no unlabelled NodeSet: the label write is one it only logs)
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {LABEL: ServiceConfig().cluster_name}},
        "spec": {"template": {"spec": {"containers": [{"name": "slurmd", "image": "slurmd:1"}]}}, **spec},
    }


@pytest.fixture
async def reconciler(kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[NodeSetController]:
    kube = await KubeClient.from_config(str(kubeconfig))
    slurm = SlurmClient("http://127.0.0.1:9", NoToken())  # never started
    # a leader (a follower reconciles nothing) that writes nothing: the reconciles are what is counted
    config = ServiceConfig(listen_port=None, leader_election=False, dry_run=True)
    service = SyncerService(slurm, kube, config)
    assert service.nodesets is not None and service.gate.leading and not service.gate.check()
    service.kube_cache.start()
    tasks = [asyncio.ensure_future(loop()) for loop in service.nodesets.loops().values()]
    tasks.append(asyncio.create_task(service.nodesets.runner.serve()))
    try:
        yield service.nodesets
    finally:
        await cancel_and_wait(tasks)
        await service.kube_cache.stop()
        await kube.close()
        await slurm.close()


async def settle(kube_api: KubeApiEmulator, reconciler: NodeSetController, what: str) -> int:
    """Until the Node cache holds every Node at the version the API server stores (its handlers, the
    reconciler's among them, have run for every change) and the queue has handled all it was given.
    Returns the NodeSet reconciles so far."""
    nodes = reconciler.context.kube_cache.nodes

    def settled() -> bool:
        stored = {
            n["metadata"]["name"]: n["metadata"]["resourceVersion"]
            for n in kube_api.api.store.objects_of(("", "nodes"))
        }
        cached = {name: node.resource_version for name, node in nodes.items.items()}
        queue = reconciler.queue
        return stored == cached and reconciler.stats.reconciles > 0 and queue.depth == queue.in_flight == 0

    await wait_for(settled, what=what)
    return reconciler.stats.reconciles


async def test_only_node_changes_that_can_change_selection_requeue_a_daemonset_nodeset(
    kube_api: KubeApiEmulator, reconciler: NodeSetController
):
    kube_api.seed(SeedOptions(nodes=2, namespace=NAMESPACE))
    kube_api.create(
        GROUP, VERSION, "nodesets", nodeset("ds", mode="DaemonSet", nodeSelector={POOL: "gpu"}), NAMESPACE
    )
    kube_api.create(GROUP, VERSION, "nodesets", nodeset("rs", replicas=0), NAMESPACE)  # Replicas mode
    await wait_for(lambda: len(reconciler.informer.items) == 2, what="both NodeSets cached")
    base = await settle(kube_api, reconciler, "first reconciles")
    events, requeues = reconciler.stats.node_events, reconciler.stats.node_requeues

    # status, cordon, taint, annotation and a label no nodeSelector names: nothing to re-plan
    kube_api.set_node_condition("node-0000", "Ready", "True", "KubeletReady")  # a heartbeat
    kube_api.set_node_condition("node-0001", "Ready", "False", "KubeletNotReady")
    kube_api.set_node_condition("node-0001", "DiskPressure", "True")
    kube_api.patch("", "v1", "nodes", "node-0000", {"spec": {"unschedulable": True}})
    taint = {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}
    kube_api.patch("", "v1", "nodes", "node-0000", {"spec": {"taints": [taint]}})
    kube_api.patch("", "v1", "nodes", "node-0001", {"metadata": {"annotations": {"note": "x"}}})
    kube_api.patch("", "v1", "nodes", "node-0001", {"metadata": {"labels": {"team": "a"}}})
    assert await settle(kube_api, reconciler, "no-op changes seen") == base
    assert reconciler.stats.node_events == events + 7 and reconciler.stats.node_requeues == requeues

    # the same after a re-list: a Node whose status changed while the watch was down
    relists = reconciler.context.kube_cache.nodes.stats.relists_after_gone
    kube_api.faults.pause()
    kube_api.drop_watches()
    kube_api.set_node_condition("node-0000", "Ready", "False", "KubeletNotReady")
    kube_api.compact()
    kube_api.faults.resume()
    assert await settle(kube_api, reconciler, "re-list after a status change") == base
    assert reconciler.context.kube_cache.nodes.stats.relists_after_gone > relists
    assert reconciler.stats.node_events == events + 8 and reconciler.stats.node_requeues == requeues

    # a label the DaemonSet's nodeSelector names: the DaemonSet-mode NodeSet only, once
    kube_api.patch("", "v1", "nodes", "node-0001", {"metadata": {"labels": {POOL: "cpu"}}})
    assert await settle(kube_api, reconciler, "selector label changed") == base + 1
    kube_api.patch("", "v1", "nodes", "node-0001", {"metadata": {"labels": {POOL: None}}})
    assert await settle(kube_api, reconciler, "selector label removed") == base + 2

    # Nodes added and deleted, matching or not
    kube_api.create("", "v1", "nodes", {"metadata": {"name": "late", "labels": {POOL: "gpu"}}})
    assert await settle(kube_api, reconciler, "Node added") == base + 3
    kube_api.api.delete(kube_api.api.resource("", "v1", "nodes"), "", "late")
    assert await settle(kube_api, reconciler, "Node deleted") == base + 4
    assert reconciler.stats.node_requeues == requeues + 4


async def test_a_pod_gone_before_its_label_write_is_skipped_not_a_failed_pass(
    kube_api: KubeApiEmulator, kubeconfig: Path
):
    """The pod cache can be behind the API server: a label or annotation write to a pod it still holds but
    the server has deleted is a 404 on the fresh read. That pod is skipped (None) and the NodeSet's pass
    goes on, as controller-runtime's IgnoreNotFound; the cache is left to the watch's DELETED event."""
    kube = await KubeClient.from_config(str(kubeconfig))
    slurm = SlurmClient("http://127.0.0.1:9", NoToken())  # never started
    service = SyncerService(slurm, kube, ServiceConfig(listen_port=None, leader_election=False))
    assert service.nodesets is not None
    writes, cache = service.nodesets.writes, service.kube_cache
    for name in ("stays", "goes"):
        body = {
            "metadata": {
                "name": name,
                "labels": {Keys.NODE_NAME_LABEL: name, LABEL: ServiceConfig().cluster_name},
            },
            "spec": {"containers": [{"name": "slurmd", "image": "slurmd:1"}]},
        }
        kube_api.create("", "v1", "pods", body, namespace="default")
    cache.start()
    try:
        await wait_for(
            lambda: bool(cache.pods_for("stays") and cache.pods_for("goes")), what="both pods cached"
        )
        stays, goes = cache.pods_for("stays")[0], cache.pods_for("goes")[0]
        kube_api.api.delete(kube_api.api.resource("", "v1", "pods"), "default", "goes")
        busy: dict[str, str | None] = {Keys.BUSY_LABEL: "true"}
        assert await writes.pod_metadata(goes, "labels", busy, "busy label") is None
        assert await writes.pod_metadata(stays, "labels", busy, "busy label") is True
        assert await writes.pod_metadata(stays, "labels", busy, "busy label") is False  # nothing to write
        removal: dict[str, str | None] = {Keys.REMOVAL: "scale-in"}
        assert await writes.pod_metadata(goes, "annotations", removal, "removal") is None
        stored = kube_api.get("", "v1", "pods", "stays", namespace="default")
        assert stored is not None and stored["metadata"]["labels"][Keys.BUSY_LABEL] == "true"
    finally:
        await cache.stop()
        await kube.close()
        await slurm.close()


async def test_a_power_up_pod_is_the_first_write_of_its_pass_and_its_nodeset_is_queued_first(
    kube_api: KubeApiEmulator, kubeconfig: Path
):
    """Slurm waits on a member it powers up (its job CONFIGURING): the member's pod is POSTed before any
    other write of the NodeSet's pass, here before the Warning that a power-down's Slurm read failed (the
    pod used to come after every other write); the rest of the pass still runs and its failure is raised.
    A member starting to power up queues its NodeSet in the urgent lane, ahead of a resync."""
    kube = await KubeClient.from_config(str(kubeconfig))
    slurm = SlurmClient("http://127.0.0.1:9", NoToken())  # never started: every Slurm read fails
    service = SyncerService(slurm, kube, ServiceConfig(listen_port=None, leader_election=False))
    controller = service.nodesets
    assert controller is not None
    power = {"minReplicas": 0, "maxReplicas": 2, "node": {"cpus": 1, "realMemory": 400}}
    kube_api.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    kube_api.create(GROUP, VERSION, "nodesets", nodeset("pw", power=power), NAMESPACE)
    service.kube_cache.start()
    tasks = [asyncio.ensure_future(loop()) for loop in controller.loops().values()]
    try:
        await wait_for(lambda: f"{NAMESPACE}/pw" in controller.informer.items, what="NodeSet cached")
        owner = controller.informer.items[f"{NAMESPACE}/pw"]
        mine = declared_stamp(removal_stamp(owner))
        down = ("IDLE", "CLOUD", "DYNAMIC_NORM", "POWERED_DOWN")
        starting = ("ALLOCATED", "CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING", "POWERING_UP")

        def slurm_says(**flags: tuple[str, ...]) -> None:
            cache = service.slurm_cache
            cache.nodes = {
                name.replace("_", "-"): SlurmNode(
                    name=name.replace("_", "-"), state=frozenset(f), comment=mine
                )
                for name, f in flags.items()
            }
            cache.synced, cache.last_success, cache.stale_after_s = True, time.monotonic(), 3600.0

        slurm_says(pw_0=down, pw_1=starting)
        await controller.reconcile(owner.key)  # pw-1's pod
        await wait_for(lambda: bool(service.kube_cache.pods_for("pw-1")), what="pw-1's pod cached")
        await controller.reconcile(owner.key)  # its status counts the pod

        def status_seen() -> bool:
            stored = kube_api.get(GROUP, VERSION, "nodesets", "pw", namespace=NAMESPACE) or {}
            return controller.informer.items[owner.key].status == stored.get("status")

        await wait_for(status_seen, what="the NodeSet's status as stored, in its informer")
        stored = kube_api.get(GROUP, VERSION, "nodesets", "pw", namespace=NAMESPACE) or {}
        assert stored["status"]["power"].get("declaring") == [], "the intent is kept (the schema pruned it)"
        kube_api.server.record_requests = True
        await controller.reconcile(owner.key)
        writes = [(method, path) for _, method, path in kube_api.server.requests if method != "GET"]
        assert writes == [], "nothing changed: a pass writes nothing, so it queues no pass of its own"
        # Slurm powered pw-1 down (its pod goes after a fresh read, which fails) and powers pw-0 up
        slurm_says(pw_0=starting, pw_1=down)
        kube_api.server.requests.clear()
        with pytest.raises(PassIncomplete, match="power-down of pw-1"):
            await controller.reconcile(owner.key)
        # its writes (an informer's watch or re-list may go on beside)
        sent = [
            (method, path.split("?")[0]) for _, method, path in kube_api.server.requests if method != "GET"
        ]
        assert sent[0] == ("POST", f"/api/v1/namespaces/{NAMESPACE}/pods"), sent
        assert kube_api.get("", "v1", "pods", "pw-0", namespace=NAMESPACE) is not None
        assert ("POST", f"/api/v1/namespaces/{NAMESPACE}/events") in sent[1:], (
            "the pass's other writes follow"
        )

        urgent = [w for w in controller.watches() if w.lane == Lane.URGENT]
        before, after = service.slurm_cache.nodes["pw-1"], SlurmNode(name="pw-1", state=frozenset(starting))
        change = NodeChange("pw-1", "changed", before, after)
        assert [list(w.keys([change])) for w in urgent] == [[owner.key]]
        other = NodeChange("other-1", "changed", before, msgspec.structs.replace(after, name="other-1"))
        assert [list(w.keys([other])) for w in urgent] == [[]], "no NodeSet of that name"
    finally:
        await cancel_and_wait(tasks)
        await service.kube_cache.stop()
        await kube.close()
        await slurm.close()


async def test_a_status_the_stored_one_already_holds_is_not_written_again(
    kube_api: KubeApiEmulator, kubeconfig: Path
):
    """A status write is a merge patch: a pass whose status is what the stored one already holds writes
    nothing (it used to PATCH the same status on every pass). `power`, left from when the NodeSet had
    spec.power, is deleted by one write (the patch names it null), and then nothing is written again."""
    kube = await KubeClient.from_config(str(kubeconfig))
    slurm = SlurmClient("http://127.0.0.1:9", NoToken())  # never started: Slurm data stays stale
    service = SyncerService(slurm, kube, ServiceConfig(listen_port=None, leader_election=False))
    controller = service.nodesets
    assert controller is not None
    kube_api.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    kube_api.create(GROUP, VERSION, "nodesets", nodeset("quiet", replicas=0), NAMESPACE)
    service.kube_cache.start()
    tasks = [asyncio.ensure_future(loop()) for loop in controller.loops().values()]
    key = f"{NAMESPACE}/quiet"

    def stored_status() -> dict[str, Any]:
        stored = kube_api.get(GROUP, VERSION, "nodesets", "quiet", namespace=NAMESPACE) or {}
        return dict(stored.get("status") or {})

    def writes() -> list[tuple[str, str]]:
        return [(m, path.split("?")[0]) for _, m, path in kube_api.server.requests if m != "GET"]

    try:
        await wait_for(lambda: key in controller.informer.items, what="NodeSet cached")
        await controller.reconcile(key)
        await wait_for(lambda: controller.informer.items[key].status == stored_status() != {}, what="status")
        kube_api.server.record_requests = True
        await controller.reconcile(key)
        assert writes() == [], "the status the pass computes is the stored one: nothing written"

        left = {"poweredDown": 1, "declaring": []}  # as an earlier spec.power's passes wrote it
        kube_api.patch(
            GROUP, VERSION, "nodesets", "quiet", {"status": {"power": left}},
            namespace=NAMESPACE, subresource="status",
        )  # fmt: skip
        await wait_for(
            lambda: controller.informer.items[key].status.get("power") == left, what="power in the informer"
        )
        kube_api.server.requests.clear()
        await controller.reconcile(key)
        status_path = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/nodesets/quiet/status"
        assert writes() == [("PATCH", status_path)], "the stale `power` is deleted by one status write"
        assert "power" not in stored_status()
        await wait_for(lambda: "power" not in controller.informer.items[key].status, what="power gone")
        kube_api.server.requests.clear()
        await controller.reconcile(key)
        assert writes() == [], "the status the pass computes is the stored one again: nothing written"
    finally:
        await cancel_and_wait(tasks)
        await service.kube_cache.stop()
        await kube.close()
        await slurm.close()
