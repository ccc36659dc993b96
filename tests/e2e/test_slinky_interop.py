"""slurm-syncer beside Slinky's slurm-operator (docs/interop.md): its NodeSet pods, in both scaling modes,
bind with no relabelling; a Slinky drain and ours on one node never undo each other; Slurm drains reach
those pods as annotations, conditions and Events. The operator's side is played by writing exactly what
its code writes (tests/e2e/slinky.py). Our own NodeSet reconciler is off, as in that profile."""

from __future__ import annotations

import pytest

from syncer.app.service import SyncerService
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.model.keys import Keys, Slinky
from tests.e2e.rig import NAMESPACE, Rig, condition, fresh_slurm_nodes, node_body, running_syncer
from tests.e2e.slinky import operator_drain, operator_pod_status, operator_undrain, slinky_pod
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


def add_node(rig: Rig, name: str) -> None:
    if rig.kube.node(name) is None:
        rig.kube.create("", "v1", "nodes", node_body(name, {}))
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})


def cordon(rig: Rig, kube_node: str, on: bool) -> None:
    rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True if on else None}})


async def polls_pass(service: SyncerService, count: int) -> None:
    """Wait until the Slurm cache has answered `count` more polls and the work queue is empty."""
    stats = service.slurm_cache.stats
    start = stats.probes + stats.full_fetches
    await wait_for(lambda: stats.probes + stats.full_fetches >= start + count, deadline_s=30, what="polls")
    await service.engine.queue.wait_idle()


async def test_slinky_pods_bind_in_both_scaling_modes(rig: Rig) -> None:
    sts, ds, host_net = fresh_slurm_nodes(3)
    rig.used.extend([sts, ds, host_net])
    # StatefulSet mode: pod <nodeset>-<ordinal>, Slurm name = spec.hostname (Helm: "<key>-N"-style)
    add_node(rig, f"k8s-{sts}")
    sts_pod = slinky_pod(nodeset="slurm-worker-slinky", name="slurm-worker-slinky-0", hostname=sts,
                         kube_node=f"k8s-{sts}", ordinal=0)  # fmt: skip
    # DaemonSet mode: pod <nodeset>-<random>, Slurm name = the Node's short name
    add_node(rig, ds)
    ds_pod = slinky_pod(nodeset="slurm-worker-gpu", name="slurm-worker-gpu-x7k2q", hostname=ds,
                        kube_node=ds, mode="DaemonSet")  # fmt: skip
    # StatefulSet on the host network: Slurm name = spec.nodeName, while the label still says the hostname
    add_node(rig, host_net)
    hn_pod = slinky_pod(
        nodeset="slurm-worker-hn",
        name="slurm-worker-hn-0",
        hostname="hn-0",
        kube_node=host_net,
        ordinal=0,
        host_network=True,
    )
    for body in (sts_pod, ds_pod, hn_pod):
        rig.kube.create("", "v1", "pods", body, namespace=NAMESPACE)
    assert hn_pod["metadata"]["labels"][Slinky.HOSTNAME_LABEL] == "hn-0"
    async with running_syncer(rig, nodeset=NodeSetOptions(enabled=False)):
        for slurm_name, kube_node in ((sts, f"k8s-{sts}"), (ds, ds), (host_net, host_net)):
            cordon(rig, kube_node, True)

            async def drained(slurm_name: str = slurm_name) -> bool:
                node = await rig.slurm(slurm_name)
                return node.drain_flag and node.reason.startswith("k8s: ")

            await wait_for(drained, deadline_s=15, what=f"cordon of {kube_node} drains {slurm_name}")
            cordon(rig, kube_node, False)

            async def undrained(slurm_name: str = slurm_name) -> bool:
                return not (await rig.slurm(slurm_name)).drain_flag

            await wait_for(undrained, deadline_s=15, what=f"uncordon of {kube_node} lifts our drain")
        # a Slurm drain reaches the Slinky pod: annotations, condition, Event
        rig.scontrol("update", f"nodename={ds}", "state=drain", "reason=admin: bad DIMM")

        def shown() -> bool:
            pod = rig.kube.pod(NAMESPACE, "slurm-worker-gpu-x7k2q") or {}
            cond = condition(pod, Keys.CONDITION_DRAINED)
            return (
                pod.get("metadata", {}).get("annotations", {}).get(Keys.REASON) == "admin: bad DIMM"
                and cond is not None and cond["status"] == "True"
            )  # fmt: skip

        await wait_for(shown, deadline_s=15, what="the Slurm drain on the Slinky pod")
        events = [e["reason"] for e in rig.events_for("slurm-worker-gpu-x7k2q")]
        assert "SlurmNodeDraining" in events or "SlurmNodeDrained" in events, events
        labels = (rig.kube.pod(NAMESPACE, "slurm-worker-gpu-x7k2q") or {})["metadata"]["labels"]
        assert Keys.NODE_NAME_LABEL not in labels  # nothing relabelled


async def test_slinky_drains_and_ours_never_undo_each_other(rig: Rig) -> None:
    theirs, ours = fresh_slurm_nodes(2)
    rig.used.extend([theirs, ours])
    pods = {}
    for slurm_name in (theirs, ours):
        add_node(rig, f"k8s-{slurm_name}")
        pods[slurm_name] = f"slurm-worker-slinky-{slurm_name[-3:]}"
        rig.kube.create("", "v1", "pods", slinky_pod(
            nodeset="slurm-worker-slinky", name=pods[slurm_name], hostname=slurm_name,
            kube_node=f"k8s-{slurm_name}", ordinal=int(slurm_name[-3:]),
        ), namespace=NAMESPACE)  # fmt: skip
    async with running_syncer(rig, nodeset=NodeSetOptions(enabled=False)) as service:
        # The operator reacts to a cordon first: its drain and its pod-cordon mark, then the cordon lands.
        text = f"Node (k8s-{theirs}) was cordoned, Pod ({NAMESPACE}/{pods[theirs]}) must be cordoned"
        await operator_drain(rig.reader, theirs, text)
        rig.annotate_pod(pods[theirs], {"nodeset.slinky.slurm.net/pod-cordon": "true"})
        cordon(rig, f"k8s-{theirs}", True)
        await polls_pass(service, 5)
        assert (await rig.slurm(theirs)).reason == Slinky.REASON_PREFIX + text  # ours did not overwrite it
        cordon(rig, f"k8s-{theirs}", False)
        await polls_pass(service, 5)
        node = await rig.slurm(theirs)
        assert node.drain_flag and node.reason == Slinky.REASON_PREFIX + text  # never lifted by us
        await operator_undrain(rig.reader, theirs)  # the operator lifts its own on uncordon
        await polls_pass(service, 5)
        assert not (await rig.slurm(theirs)).drain_flag  # and we do not drain it again

        # We react first: our drain; the operator sees a foreign reason and only writes its pod conditions,
        # from a cache that has not seen ours yet (its merge patch drops them).
        stale_view = list(
            (rig.kube.pod(NAMESPACE, pods[ours]) or {}).get("status", {}).get("conditions") or []
        )
        cordon(rig, f"k8s-{ours}", True)

        async def drained_by_us() -> bool:
            node = await rig.slurm(ours)
            return node.drain_flag and node.reason.startswith("k8s: ")

        await wait_for(drained_by_us, deadline_s=15, what="our drain")

        def drained_condition() -> str:
            found = condition(rig.kube.pod(NAMESPACE, pods[ours]) or {}, Keys.CONDITION_DRAINED)
            return found["status"] if found else ""

        await wait_for(lambda: drained_condition() == "True", what="our condition written")
        reason = (await rig.slurm(ours)).reason
        operator_pod_status(rig.kube, NAMESPACE, pods[ours], ["Idle", "Drain"], reason, stale_view)
        assert drained_condition() == "False"  # the operator's merge patch put back what its cache saw
        await wait_for(
            lambda: drained_condition() == "True",
            deadline_s=15,
            what="our condition restored after the operator's merge patch reverted it",
        )
        pod = rig.kube.pod(NAMESPACE, pods[ours]) or {}
        assert condition(pod, "SlurmNodeStateDrain") is not None  # and theirs is left alone
        assert (await rig.slurm(ours)).reason == reason
        cordon(rig, f"k8s-{ours}", False)

        async def lifted() -> bool:
            return not (await rig.slurm(ours)).drain_flag

        await wait_for(lifted, deadline_s=15, what="our own drain lifted on uncordon")
