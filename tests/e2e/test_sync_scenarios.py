"""One scenario per rule of the sync contract: the real Slurm sandbox, the emulator, a running syncer."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest

from syncer.app.service import SyncerService
from syncer.controllers.sync.options import SyncOptions
from syncer.model.keys import Keys, NVSentinel
from syncer.model.slurm import SlurmNode
from syncer.slurm.errors import SlurmNotFound
from syncer.testing.faultproxy import FaultProxy
from tests.e2e.rig import (
    NAMESPACE,
    Rig,
    condition,
    fresh_slurm_nodes,
    running_syncer,
    settled,
    start_daemon,
    sync,
)
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


def uncordoned(service: SyncerService, kube_node: str) -> bool:
    """The syncer's own cache has seen the Node uncordoned."""
    node = service.kube_cache.node(kube_node)
    return node is not None and not node.unschedulable


async def drained_reason(rig: Rig, name: str) -> str | None:
    node = await rig.slurm(name)
    return node.reason if node.drain_flag else None


async def test_cordon_drains_and_uncordon_undrains(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with running_syncer(rig):
        rig.kube.patch(
            "", "v1", "nodes", kube_node, {"metadata": {"annotations": {Keys.CORDON_REASON: "bad DIMM"}}}
        )
        started = time.monotonic()
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return (await drained_reason(rig, name)) == "k8s: bad DIMM"

        await wait_for(drained, deadline_s=10, what="cordon -> Slurm drain with the k8s: reason")
        assert time.monotonic() - started < 2.0
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": None}})

        async def undrained() -> bool:
            return not (await rig.slurm(name)).drain_flag

        await wait_for(undrained, deadline_s=10, what="uncordon -> undrain")
        # and Kubernetes shows what Slurm says
        await wait_for(
            lambda: rig.pod_obj(name)["metadata"]["annotations"].get(Keys.STATE, "").startswith("IDLE")
        )


async def test_nvsentinels_cordon_reason_label_becomes_the_drain_reason(rig: Rig):
    """NVSentinel's fault-quarantine cordons and labels the Node in one patch (its default label prefix)."""
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with running_syncer(rig):
        labels = {
            "k8saas.nvidia.com/cordon-by": "NVSentinel",
            NVSentinel.CORDON_REASON_LABEL: "GPU-fatal-error-ruleset",
        }
        rig.kube.patch(
            "", "v1", "nodes", kube_node, {"metadata": {"labels": labels}, "spec": {"unschedulable": True}}
        )

        async def drained() -> bool:
            return (await drained_reason(rig, name)) == "k8s: GPU-fatal-error-ruleset"

        await wait_for(drained, deadline_s=10, what="NVSentinel's cordon -> Slurm drain with its reason")


async def test_a_list_asked_for_between_our_writes_neither_undoes_them_nor_costs_a_read_per_reconcile(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
):
    """A 10,000-node list takes seconds: one asked for between the syncer's drain and undrain of a node
    arrives after the undrain, showing the node drained. It must not flip the pod back to drained (and to
    undrained again with the next list), and the reconciles our own Kubernetes writes bring meanwhile read
    the node from slurmrestd once per write, not each time.

    Every poll is held here, so each write is read back by the resync (every 5 s in FAST), not by a list:
    the undrain's read-back can come 10 s after the hold began, where FAST's staleness bound (10 s without an
    answer) has made the cache stale, and a stale cache rightly reads nothing back (CI: the undrain never
    shown). A list that takes seconds is the case here, not a slurmrestd silent past the bound: the bound is
    set well above the hold."""
    (name,) = fresh_slurm_nodes(1)
    kube_node, pod = rig.bind_pod(name)
    async with running_syncer(rig, slurm_stale_after_s=60.0) as service:
        cache = service.slurm_cache
        await settled(service, lambda: name in cache.nodes, "the node")
        release, held = asyncio.Event(), asyncio.Event()
        real_list = service.slurm.list_nodes

        async def answered_now_heard_later(update_time: int | None = None) -> Any:
            listing = await real_list(update_time)  # slurmrestd answers now; the cache hears it at release
            if update_time is None:
                held.set()
            await release.wait()
            return listing

        monkeypatch.setattr(service.slurm, "list_nodes", answered_now_heard_later)

        def drain_on_pod() -> bool:  # the Slurm state the pod shows (24.11 keeps a CLOUD node's reason)
            state: str = rig.pod_obj(name)["metadata"].get("annotations", {}).get(Keys.STATE, "")
            return "DRAIN" in state

        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
        # read back by the next resync (5 s): no list answers while they are held
        await wait_for(drain_on_pod, 20, what="the drain shown (read back)")
        refreshing = asyncio.create_task(cache.refresh())  # a whole list asked for while drained
        await wait_for(held.is_set, 10, what="a list asked for between drain and undrain, held")
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": None}})
        await wait_for(lambda: not drain_on_pod(), 20, what="the undrain shown (read back)")
        await service.engine.queue.wait_idle()
        reads = service.slurm.stats.requests
        reads_after_undrain = reads[("node", "200")]
        for touch in range(3):  # three more reconciles while lists are held, one after another
            reconciles = service.engine.stats.reconciles
            rig.annotate_pod(pod, {f"example.com/touch-{touch}": "x"})
            await wait_for(
                lambda: service.engine.stats.reconciles > reconciles,  # noqa: B023
                10, what=f"the reconcile of touch {touch}",
            )  # fmt: skip
            await service.engine.queue.wait_idle()
        assert reads[("node", "200")] - reads_after_undrain <= 1  # not one per reconcile
        assert not cache.stale, "a stale cache reads nothing back: the count above would prove nothing"
        shown = rig.pod_obj(name)["metadata"]["resourceVersion"]
        monkeypatch.setattr(service.slurm, "list_nodes", real_list)
        release.set()  # the list showing the node drained arrives, then the polls held meanwhile
        await refreshing
        await settled(service, lambda: not cache.nodes[name].drain_flag, "the undrain in a newer list")
        assert not (await rig.slurm(name)).drain_flag
        assert rig.pod_obj(name)["metadata"]["resourceVersion"] == shown, "the old list flipped the pod"
        actions = service.engine.stats.actions
        assert (
            actions.get(("drain", "k8s_to_slurm", "ok"))
            == actions.get(("undrain", "k8s_to_slurm", "ok"))
            == 1
        )


async def test_admin_drain_is_never_lifted(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    rig.scontrol("update", f"nodename={name}", "state=drain", "reason=admin: firmware")
    async with running_syncer(rig) as service:
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
        await wait_for(
            lambda: rig.pod_obj(name)["metadata"].get("annotations", {}).get(Keys.REASON) == "admin: firmware"
        )
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": None}})
        await settled(service, lambda: uncordoned(service, kube_node), "the uncordon")
        node = await rig.slurm(name)
        assert node.drain_flag and node.reason == "admin: firmware"
        assert not any(k[0] == "undrain" for k in service.engine.stats.actions)


async def test_admin_undrain_of_ours_is_redrained(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
    async with running_syncer(rig):

        async def ours() -> bool:
            return ((await drained_reason(rig, name)) or "").startswith("k8s: ")

        await wait_for(ours, deadline_s=10, what="initial drain")
        rig.scontrol("update", f"nodename={name}", "state=undrain")
        await wait_for(ours, deadline_s=10, what="drained again while the cordon holds")


async def test_drain_annotation_on_the_pod(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    rig.bind_pod(name)
    async with running_syncer(rig):
        rig.kube.patch(
            "",
            "v1",
            "pods",
            f"slurmd-{name}",
            {"metadata": {"annotations": {Keys.DRAIN_REQUEST: "GPU 3 ECC\nerrors"}}},
            namespace=NAMESPACE,
        )

        async def drained() -> bool:
            return (await drained_reason(rig, name)) == "k8s: GPU 3 ECC errors"

        await wait_for(drained, deadline_s=10, what="drain from the pod annotation, newline removed")
        rig.kube.patch(
            "",
            "v1",
            "pods",
            f"slurmd-{name}",
            {"metadata": {"annotations": {Keys.DRAIN_REQUEST: None}}},
            namespace=NAMESPACE,
        )

        async def undrained() -> bool:
            return not (await rig.slurm(name)).drain_flag

        await wait_for(undrained, deadline_s=10, what="annotation removed -> undrained")


async def test_not_ready_drains_only_after_the_grace_period(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with running_syncer(rig, sync=SyncOptions(ready_grace_s=3.0)):
        rig.kube.set_node_condition(kube_node, "Ready", "False", "KubeletNotReady", "PLEG is not healthy")
        flipped = time.monotonic()
        # lastTransitionTime has one-second resolution, so the grace period may end up to 1 s early
        while time.monotonic() - flipped < 1.8:  # within the grace period the node must stay undrained
            assert not (await rig.slurm(name)).drain_flag, "drained before the grace period ran out"
            await asyncio.sleep(0.1)  # sampling interval of a must-not-happen check, not a synchronisation

        async def drained() -> bool:
            return "Ready: KubeletNotReady: PLEG is not healthy" in ((await drained_reason(rig, name)) or "")

        await wait_for(drained, deadline_s=10, what="drain after the grace period")
        assert time.monotonic() - flipped >= 2.0


async def test_configured_problem_condition_drains(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    options = SyncOptions(ready_grace_s=2.0, drain_on_conditions=(("GpuUnhealthy", "True"),))
    async with running_syncer(rig, sync=options):
        rig.kube.set_node_condition(kube_node, "GpuUnhealthy", "True", "XidError", "Xid 79 on GPU 2")

        async def drained() -> bool:
            return (await drained_reason(rig, name)) == "k8s: (GpuUnhealthy: XidError: Xid 79 on GPU 2)"

        await wait_for(drained, deadline_s=10, what="drain from the NPD condition")


async def test_slurm_down_marks_unhealthy(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with running_syncer(rig):
        rig.scontrol("update", f"nodename={name}", "state=down", "reason=admin: cable")

        def unhealthy() -> bool:
            pod_cond = condition(rig.pod_obj(name), Keys.CONDITION_HEALTHY)
            node_cond = condition(rig.node_obj(kube_node), Keys.CONDITION_HEALTHY)
            return bool(
                pod_cond and node_cond and pod_cond["status"] == "False" and node_cond["status"] == "False"
            )

        await wait_for(unhealthy, deadline_s=10, what="SlurmNodeHealthy=False on pod and Node")


async def test_slurm_drain_shows_in_kubernetes(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, pod = rig.bind_pod(name)
    async with running_syncer(rig):
        rig.scontrol("update", f"nodename={name}", "state=drain", "reason=admin: bad fan")

        def shown() -> bool:
            annotations = rig.pod_obj(name)["metadata"].get("annotations") or {}
            drained = condition(rig.pod_obj(name), Keys.CONDITION_DRAINED)
            return (
                annotations.get(Keys.REASON) == "admin: bad fan"
                and "DRAIN" in annotations.get(Keys.STATE, "")
                and bool(annotations.get(Keys.REASON_BY))
                and annotations.get(Keys.REASON_AT, "").endswith("Z")
                and drained is not None
                and drained["status"] == "True"
            )

        await wait_for(shown, deadline_s=10, what="annotations and condition on the pod")
        await wait_for(
            lambda: (condition(rig.node_obj(kube_node), Keys.CONDITION_DRAINED) or {}).get("status") == "True"
        )
        await wait_for(
            lambda: any(e["reason"] == "SlurmNodeDrained" for e in rig.events_for(pod)), what="an Event"
        )
        assert not rig.node_obj(kube_node).get("spec", {}).get("unschedulable"), (
            "cordon-on-slurm-drain is off by default"
        )


async def test_an_admins_reason_shows_on_the_pod_made_safe_and_capped(rig: Rig):
    """Slurm's reason is input from Slurm: an admin's reason with an escape, a tab, a bidi override and 1.6 KB
    of two-byte letters is the drained condition's message sanitised and capped at 1024 UTF-8 bytes (no
    letter cut in two), while Slurm keeps it as written and the syncer, which compares it raw, never lifts
    it."""
    (name,) = fresh_slurm_nodes(1)
    rig.bind_pod(name)
    admin = "bad\x1b[31m fan\tslot 3 \u202eevil " + "é" * 800
    shown = "bad [31m fan slot 3 evil "  # controls and the override as spaces, runs of spaces as one
    capped = shown + "é" * ((1024 - len(shown.encode())) // 2)
    async with running_syncer(rig) as service:
        rig.scontrol("update", f"nodename={name}", "state=drain", f"reason={admin}")

        def message() -> str | None:
            drained = condition(rig.pod_obj(name), Keys.CONDITION_DRAINED) or {}
            return drained.get("message") if drained.get("status") == "True" else None

        await wait_for(lambda: message() is not None, deadline_s=10, what="the drain shown on the pod")
        assert message() == capped
        assert (await rig.slurm(name)).reason == admin
        await service.engine.runner.resync()
        await service.engine.queue.wait_idle()
        assert (await drained_reason(rig, name)) == admin, "an admin's drain is never ours to lift"


async def test_cordon_on_slurm_drain_round_trip_without_echo(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    assert kube_node != name  # the cordon is reported by the Slurm node's name, not the Node's
    options = SyncOptions(ready_grace_s=2.0, cordon_on_slurm_drain=True)
    async with running_syncer(rig, sync=options) as service:
        actions: list[tuple[str, str, dict[str, object]]] = []

        def recorded(kind: str, direction: str, slurm_node: str, details: dict[str, Any]) -> None:
            actions.append((kind, slurm_node, details))

        service.context.actions.subscribe(recorded)
        rig.scontrol("update", f"nodename={name}", "state=drain", "reason=admin: memory test")

        def cordoned() -> bool:
            node = rig.node_obj(kube_node)
            return (
                bool(node.get("spec", {}).get("unschedulable"))
                and node["metadata"]["annotations"].get(Keys.CORDONED_BY) == "slurm"
            )

        await wait_for(cordoned, deadline_s=10, what="cordon marked as ours")
        await service.engine.queue.wait_idle()
        assert (await rig.slurm(name)).reason == "admin: memory test", "our own cordon must not feed back"
        cordons = [(node, details) for kind, node, details in actions if kind == "cordon"]
        assert [node for node, _ in cordons] == [name], actions
        # the drain's propagation to the Node: its latency is kept under the Slurm node it was seen on
        assert isinstance(cordons[0][1].get("latency_s"), float), cordons
        rig.scontrol("update", f"nodename={name}", "state=undrain")
        await wait_for(
            lambda: not rig.node_obj(kube_node).get("spec", {}).get("unschedulable"),
            deadline_s=10,
            what="uncordon",
        )
        assert Keys.CORDONED_BY not in (rig.node_obj(kube_node)["metadata"].get("annotations") or {})

        async def stays_undrained() -> bool:
            return not (await rig.slurm(name)).drain_flag

        await service.engine.queue.wait_idle()
        assert await stays_undrained()


async def test_conflicting_bindings_are_left_alone(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    second = {
        "metadata": {"name": f"impostor-{name}", "labels": {Keys.NODE_NAME_LABEL: name}},
        "spec": {"nodeName": kube_node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
    }
    rig.kube.create("", "v1", "pods", second, namespace=NAMESPACE)
    rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
    async with running_syncer(rig) as service:
        await wait_for(lambda: name in service.engine.stats.conflicts, what="conflict noticed")

        def warned(pod: str) -> bool:
            return any(e["reason"] == "SlurmBindingConflict" for e in rig.events_for(pod))

        # on every claimant
        await wait_for(lambda: warned(f"slurmd-{name}") and warned(f"impostor-{name}"), what="Events")
        await service.engine.queue.wait_idle()
        assert not (await rig.slurm(name)).drain_flag


async def test_dry_run_writes_nothing(rig: Rig):
    names = fresh_slurm_nodes(2)
    kube_nodes = [rig.bind_pod(n)[0] for n in names]
    rig.kube.patch("", "v1", "nodes", kube_nodes[0], {"spec": {"unschedulable": True}})
    rig.scontrol("update", f"nodename={names[1]}", "state=drain", "reason=admin: check")
    before_slurm = [await rig.slurm(n) for n in names]
    async with running_syncer(rig, dry_run=True) as service:
        before_rv = rig.kube.api.store.rv
        await wait_for(lambda: service.engine.stats.actions.get(("drain", "k8s_to_slurm", "dry_run"), 0) >= 1)
        await service.engine.queue.wait_idle()
        assert [await rig.slurm(n) for n in names] == before_slurm
        assert rig.kube.api.store.rv == before_rv, "dry-run wrote to Kubernetes"


async def test_restart_in_the_middle_converges(rig: Rig):
    """`slurm-syncer run` SIGKILLed while its drains are going out (some sent, some not), two cordons
    lifted while it is down; a new syncer converges from the two systems' state alone."""
    names = fresh_slurm_nodes(5)
    kube_nodes = [rig.bind_pod(n)[0] for n in names]
    daemon = await start_daemon(rig)
    try:
        for node in kube_nodes:
            rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})

        async def some_drained() -> bool:
            return any([(await rig.slurm(n)).drain_flag for n in names])

        await wait_for(some_drained, deadline_s=30, what="the first drains to go out")
        daemon.send_signal(signal.SIGKILL)
        assert await daemon.wait() == -signal.SIGKILL
    finally:
        if daemon.returncode is None:
            daemon.kill()
            await daemon.wait()
    for node in kube_nodes[:2]:
        rig.kube.patch(
            "", "v1", "nodes", node, {"spec": {"unschedulable": None}}
        )  # changed while it was down
    async with running_syncer(rig, sync=sync(max_drain_fraction=1.0)):

        async def converged() -> bool:
            states = [(await rig.slurm(n)).drain_flag for n in names]
            return states == [False, False, True, True, True]

        await wait_for(converged, deadline_s=15, what="both systems agree after the restart")


async def test_node_bound_hybrid_host(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    host = rig.bind_node(name)
    async with running_syncer(rig):
        rig.kube.patch("", "v1", "nodes", host, {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return ((await drained_reason(rig, name)) or "").startswith("k8s: ")

        await wait_for(drained, deadline_s=10, what="node-bound drain")
        await wait_for(
            lambda: "DRAIN" in rig.node_obj(host)["metadata"]["annotations"].get(Keys.STATE, ""),
            what="state on the Node",
        )


async def test_terminating_pod_drains(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    rig.bind_pod(name)
    # a finalizer keeps the pod terminating, as a slow slurmd shutdown would
    rig.kube.patch(
        "",
        "v1",
        "pods",
        f"slurmd-{name}",
        {"metadata": {"finalizers": ["example.com/hold"]}},
        namespace=NAMESPACE,
    )
    async with running_syncer(rig):
        rig.kube.api.delete(rig.kube.api.resource("", "v1", "pods"), NAMESPACE, f"slurmd-{name}")

        async def drained() -> bool:
            return f"pod {NAMESPACE}/slurmd-{name} terminating" in ((await drained_reason(rig, name)) or "")

        await wait_for(drained, deadline_s=10, what="drain while the pod terminates")


async def test_no_undrain_on_stale_slurm_data_and_the_undrain_once_it_is_fresh_again(rig: Rig):
    """An uncordon seen while the Slurm data is stale withholds the undrain (fail closed); slurmrestd
    answering again with the node unchanged, the cache turning fresh again brings the node back, not the
    resync (an hour away here: at FAST's 5 s it hid that nothing else did)."""
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with FaultProxy(rig.sandbox.rest_url) as proxy:
        async with running_syncer(
            rig, slurm_url=proxy.url, slurm_stale_after_s=1.0, resync_s=3600.0
        ) as service:
            rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

            async def drained() -> bool:
                return ((await drained_reason(rig, name)) or "").startswith("k8s: ")

            await wait_for(drained, deadline_s=10, what="drain")
            # the syncer's cache shows the drain before it goes stale: fresh again, no node has changed
            cache = service.slurm_cache
            await wait_for(lambda: cache.nodes[name].drain_flag, deadline_s=10, what="the drain in the cache")
            proxy.fail_next(100_000, status=503)
            await wait_for(lambda: service.slurm_cache.stale, deadline_s=10, what="Slurm data stale")
            engine = service.engine
            await engine.queue.wait_idle()
            reconciles = engine.stats.reconciles
            rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": None}})
            # the uncordon's own reconcile (no resync comes): counted from before it, as it may end before the
            # cache is seen showing the uncordon
            await wait_for(
                lambda: uncordoned(service, kube_node) and engine.stats.reconciles > reconciles,
                deadline_s=20, what="the uncordon seen and reconciled",
            )  # fmt: skip
            await engine.queue.wait_idle()
            assert service.slurm_cache.stale, "the data became fresh again: the test proves nothing"
            assert await drained(), "undrained on stale data"
            assert not any(k[0] == "undrain" for k in service.engine.stats.actions)
            proxy.clear_faults()

            async def undrained() -> bool:
                return not (await rig.slurm(name)).drain_flag

            await wait_for(undrained, deadline_s=15, what="undrain once Slurm data is fresh again")


async def test_label_naming_an_unknown_slurm_node_is_reported_once(rig: Rig):
    kube_node, pod = rig.bind_pod("nosuchnode7")  # Slurm has no node of that name
    rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
    async with running_syncer(rig, sync=sync(missing_grace_s=1.0)) as service:
        await wait_for(lambda: "nosuchnode7" in service.engine.stats.missing, what="missing node noticed")
        await wait_for(
            lambda: any(e["reason"] == "SlurmNodeNotFound" for e in rig.events_for(pod)), what="an Event"
        )
        (event,) = [e for e in rig.events_for(pod) if e["reason"] == "SlurmNodeNotFound"]
        assert event["type"] == "Warning"
        assert f"{Keys.NODE_NAME_LABEL}=nosuchnode7" in event["message"]
        await service.engine.runner.resync()  # reconciled again: still one report, no Event per pass
        await service.engine.queue.wait_idle()
        assert [e["count"] for e in rig.events_for(pod) if e["reason"] == "SlurmNodeNotFound"] == [1]
        with pytest.raises(SlurmNotFound):  # nothing was created in Slurm
            await rig.reader.get_node("nosuchnode7")
        rig.kube.patch(
            "", "v1", "pods", pod, {"metadata": {"labels": {Keys.NODE_NAME_LABEL: None}}}, namespace=NAMESPACE
        )
        await wait_for(lambda: not service.engine.stats.missing, what="report cleared once unlabelled")


async def test_hostile_texts_reach_slurm_clean_and_capped(rig: Rig):
    """Drain texts from annotations are user input: control characters, escapes, bidi overrides, shell and
    JSON metacharacters and the largest annotation Kubernetes accepts end as one clean, capped reason."""
    (name,) = fresh_slurm_nodes(1)
    kube_node, pod = rig.bind_pod(name)
    metachars = "$(reboot) `id` ; rm -rf / | \"}{'\\\\"
    hostile = f"\x00\x1b[31m{metachars}\n\tä🚀\u202eevil\u2028" + "x" * 200_000  # annotations cap at 256 KiB
    async with running_syncer(rig):
        rig.annotate_pod(pod, {Keys.DRAIN_REQUEST: hostile})

        async def drained() -> bool:
            return (await drained_reason(rig, name)) is not None

        await wait_for(drained, deadline_s=15, what="a drain from the hostile annotation")
        reason = (await rig.slurm(name)).reason
        # controls become spaces (the escape's printable tail stays), metacharacters are kept literally
        assert reason.startswith(f"k8s: [31m{metachars} ä🚀 evil x"), reason
        assert len(reason.encode()) <= 256
        assert not any(ord(c) < 0x20 or c in "\x7f\u202e\u2028" for c in reason), reason
        cordon = {
            "spec": {"unschedulable": True},
            "metadata": {"annotations": {Keys.CORDON_REASON: "a\r\nb\x07"}},
        }
        rig.kube.patch("", "v1", "nodes", kube_node, cordon)

        async def both_causes() -> bool:  # the cordon comes first, the capped annotation text after it
            return ((await drained_reason(rig, name)) or "").startswith("k8s: a b; [31m$(reboot)")

        await wait_for(both_causes, deadline_s=15, what="the cordon reason joined, cleaned")
        rig.annotate_pod(pod, {Keys.DRAIN_REQUEST: None})
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": None}})

        async def undrained() -> bool:
            return not (await rig.slurm(name)).drain_flag

        await wait_for(undrained, deadline_s=15, what="undrained once both causes are gone")


async def test_node_with_two_slurmd_pods_shows_both_without_flapping(rig: Rig):
    """Two slurmd pods on one Kubernetes Node, each its own Slurm node: the Node's conditions come from both,
    so the two reconciles write the same thing instead of overwriting each other."""
    first, second = fresh_slurm_nodes(2)
    kube_node, _ = rig.bind_pod(first)
    rig.used.append(second)
    second_pod = f"slurmd-{second}"
    body = {
        "metadata": {"name": second_pod, "labels": {Keys.NODE_NAME_LABEL: second}},
        "spec": {"nodeName": kube_node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
    }
    rig.kube.create("", "v1", "pods", body, namespace=NAMESPACE)

    def node_drained() -> dict[str, str]:
        return condition(rig.node_obj(kube_node), Keys.CONDITION_DRAINED) or {}

    def pod_drained(name: str) -> str:
        return str((condition(rig.pod_obj(name), Keys.CONDITION_DRAINED) or {}).get("status", ""))

    # no periodic resync: only the changes themselves may bring the Node up to date
    async with running_syncer(rig, resync_s=3600.0) as service:
        await wait_for(lambda: node_drained().get("reason") == "NotDrained", what="initial Node condition")
        rig.scontrol("update", f"nodename={second}", "state=drain", "reason=test")
        await wait_for(
            lambda: node_drained().get("status") == "True" and pod_drained(second) == "True",
            what="the drained Slurm node shows on its pod and on the shared Node",
        )
        assert node_drained()["reason"] == "Drained"
        assert node_drained()["message"] == f"{second}: test"
        assert pod_drained(first) == "False", "pod conditions stay per Slurm node"
        await service.engine.queue.wait_idle()
        version = rig.node_obj(kube_node)["metadata"]["resourceVersion"]
        for _ in range(3):  # each pass reconciles both Slurm nodes
            await service.engine.runner.resync()
            await service.engine.queue.wait_idle()
            assert node_drained()["status"] == "True"
            assert rig.node_obj(kube_node)["metadata"]["resourceVersion"] == version, "the Node flapped"

        rig.scontrol("update", f"nodename={second}", "state=undrain")
        await wait_for(lambda: node_drained().get("reason") == "NotDrained", what="undrained -> False")
        assert node_drained()["status"] == "False"

        # both drained: both named, in name order
        rig.scontrol("update", f"nodename={first}", "state=drain", "reason=admin: fan")
        rig.scontrol("update", f"nodename={second}", "state=drain", "reason=test")
        await wait_for(
            lambda: node_drained().get("message") == f"{first}: admin: fan; {second}: test",
            what="both drained Slurm nodes named on the Node",
        )
        # the first pod goes away: the pod left on the Node is looked at again and the Node follows it
        rig.kube.api.delete(
            rig.kube.api.resource("", "v1", "pods"), NAMESPACE, f"slurmd-{first}", {"gracePeriodSeconds": 0}
        )
        await wait_for(
            lambda: node_drained().get("message") == "test",
            what="the Node's conditions follow the one pod left on it (its Slurm reason alone, as ever)",
        )
        rig.scontrol("update", f"nodename={second}", "state=undrain")
        await wait_for(lambda: node_drained().get("status") == "False", what="last drain lifted -> False")


async def test_a_drain_carries_the_reason_decided_after_its_fresh_read(rig: Rig):
    """The applier reads the node again before a new drain and decides again on what both sides show
    then; a reason annotation that arrived during that read belongs in the drain it sends."""
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with running_syncer(rig) as service:
        applier = service.engine.applier
        read, update = applier.context.slurm.get_node, applier.context.slurm_writer.update
        sent: list[str | None] = []

        async def annotated_while_reading(node: str) -> SlurmNode:
            answer = await read(node)
            if node == name and not sent:
                annotated = {"metadata": {"annotations": {Keys.CORDON_REASON: "bad GPU 3"}}}
                rig.kube.patch("", "v1", "nodes", kube_node, annotated)

                def cached() -> bool:
                    seen = service.kube_cache.node(kube_node)
                    return seen is not None and Keys.CORDON_REASON in seen.annotations

                await wait_for(cached, deadline_s=10, what="the reason annotation in the syncer's cache")
            return answer

        async def recorded(node: str, *args: Any, reason: str | None = None, **kwargs: Any) -> bool:
            if node == name:
                sent.append(reason)
            return await update(node, *args, reason=reason, **kwargs)

        applier.context.slurm.get_node = annotated_while_reading  # type: ignore[method-assign,assignment]
        applier.context.slurm_writer.update = recorded  # type: ignore[method-assign,assignment]
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
        await wait_for(lambda: bool(sent), deadline_s=10, what="the drain sent")
        assert sent[0] is not None and "bad GPU 3" in sent[0], sent

        async def drained_with_it() -> bool:
            return "bad GPU 3" in (await rig.slurm(name)).reason

        await wait_for(drained_with_it, deadline_s=10, what="the drain in Slurm")
