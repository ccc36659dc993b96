"""What a change costs the Kubernetes API (issue 18): a storm of Slurm drains is shown with one write per
pod and one per Node (annotations and conditions together on /status), and the Events beyond the storm
burst are folded into one summary on the syncer's Lease. Real Slurm, emulator."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
import structlog

from syncer.app.service import SyncerService
from syncer.controllers.sync.plan import Decision, EventSpec
from syncer.kube.ratelimit import TokenBucket
from syncer.model.keys import Keys
from syncer.model.kube import Condition
from tests.e2e.rig import NAMESPACE, Rig, condition, fresh_slurm_nodes, get, running_syncer, sample
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


async def first_pass_done(rig: Rig, service: SyncerService, names: list[str]) -> None:
    """Until every pod shows its Slurm state and the queue is idle: what follows is measured alone."""
    await wait_for(
        lambda: all(Keys.STATE in annotations_of(rig.pod_obj(n)) for n in names),
        deadline_s=30,
        what="the first pass showing every node's Slurm state",
    )
    await service.engine.queue.wait_idle()


async def test_a_slurm_drain_storm_costs_one_write_per_object_and_one_summary_event(rig: Rig):
    names = fresh_slurm_nodes(40)
    nodes = {n: rig.bind_pod(n)[0] for n in names}
    async with running_syncer(rig) as service:
        await first_pass_done(rig, service, names)
        server = rig.kube.server
        server.requests.clear()
        server.record_requests = True
        try:
            rig.scontrol("update", f"nodename={','.join(names)}", "state=drain", "reason=storm")

            def shown() -> bool:
                return all(
                    annotations_of(rig.pod_obj(n)).get(Keys.REASON) == "storm"
                    and (condition(rig.node_obj(nodes[n]), Keys.CONDITION_DRAINED) or {}).get("status")
                    == "True"
                    for n in names
                )

            await wait_for(shown, deadline_s=30, what="every pod and Node showing the storm's drain")

            def summary() -> list[dict[str, Any]]:
                return [e for e in rig.events_for(Keys.LEASE_NAME) if e["reason"] == "SlurmNodeDrained"]

            await wait_for(
                lambda: bool(summary()), deadline_s=15, what="the storm's summary Event on the Lease"
            )
            await service.engine.queue.wait_idle()
        finally:
            server.record_requests = False
        writes = [(method, path.split("?")[0]) for _, method, path in server.requests if method in WRITES]
        objects = Counter(path for _, path in writes if "/events" not in path)
        expected = {f"/api/v1/namespaces/{NAMESPACE}/pods/slurmd-{n}/status" for n in names} | {
            f"/api/v1/nodes/{nodes[n]}/status" for n in names
        }
        assert set(objects) == expected and set(objects.values()) == {1}  # one write per object
        individual = [
            e for n in names for e in rig.events_for(f"slurmd-{n}") if e["reason"] == "SlurmNodeDrained"
        ]
        (lease_event,) = summary()
        folded = int(lease_event["message"].split()[0])
        assert len(individual) + folded == len(names)  # every drain told once: itself or in the summary
        assert folded > 0 and service.events.folded == folded
        assert len([p for _, p in writes if "/events" in p]) == len(individual) + 1


@pytest.mark.parametrize(
    ("why", "reason"),
    [("rack 12 maintenance", "k8s: rack 12 maintenance"), ("", "k8s: Node cordoned")],
    ids=["cordon-reason", "plain-kubectl-cordon"],
)
async def test_a_cordoned_rack_reaches_slurm_in_bulk_requests(rig: Rig, why: str, reason: str):
    """Identical updates (same state and reason) decided together go in one request: a rack cordoned with
    one cordon reason, or with none (every such drain reads the same), drains in bulk, and its undrains
    (no reason) too."""
    names = fresh_slurm_nodes(30)
    nodes = [rig.bind_pod(n)[0] for n in names]
    async with running_syncer(rig) as service:
        await first_pass_done(rig, service, names)
        for node in nodes:  # an admin (or a tool like NVSentinel) cordons a whole rack
            annotations = {Keys.CORDON_REASON: why} if why else {}
            rig.kube.patch(
                "", "v1", "nodes", node,
                {"metadata": {"annotations": annotations}, "spec": {"unschedulable": True}},
            )  # fmt: skip

        async def drained() -> set[str]:
            listing = await rig.reader.list_all_nodes()
            return {n.name for n in listing.nodes if n.drain_flag} & set(names)

        async def all_drained() -> bool:
            return await drained() == set(names)

        await wait_for(all_drained, deadline_s=30, what="every cordoned node drained in Slurm")
        await service.engine.queue.wait_idle()
        for name in names:
            assert (await rig.slurm(name)).reason == reason, name
        stats = service.context.slurm_writer.bulk.stats
        # 8 workers decide at once: drains queued behind one in flight go together
        assert stats.nodes == len(names) and stats.bulk_requests >= 1 and stats.requests < len(names), stats
        assert stats.partial == 0
        _, exposed = await get(service, "/metrics")  # what an admin sees of the batching
        assert sample(exposed, "slurm_syncer_slurm_update_requests_total", kind="bulk") == stats.bulk_requests
        assert sample(exposed, "slurm_syncer_slurm_update_requests_total", kind="single") == (
            stats.requests - stats.bulk_requests
        )
        assert sample(exposed, "slurm_syncer_slurm_updated_nodes_total") == len(names)
        assert sample(exposed, "slurm_syncer_slurm_bulk_refused_total") == 0
        drains = stats.requests
        for node in nodes:
            rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": None}})

        async def none_drained() -> bool:
            return not await drained()

        await wait_for(none_drained, deadline_s=30, what="every node undrained in Slurm")
        assert stats.nodes == 2 * len(names) and stats.requests - drains < len(names), stats


async def test_a_cordon_storm_waits_for_its_group_commits_together_with_its_slurm_reads_bounded(rig: Rig):
    """Issue 47: a cordon's reconcile spends most of its time waiting for its drain's group commit and its
    read slot, so the workers for Kubernetes changes are 32 x `--workers` (with 12 x, every one was busy
    through a 1,000-cordon storm and cordons waited for a worker), while their fresh reads of Slurm stay at
    most 4 x `--workers` at once (as many as every worker together could make before). With slurmrestd's
    single-node reads held: 40 cordons and `--workers 1` are 33 reconciles at once (32 + 1), 4 of them
    reading Slurm; released, every node drains."""
    names = fresh_slurm_nodes(40)
    nodes = [rig.bind_pod(n)[0] for n in names]
    async with running_syncer(rig, workers=1) as service:
        await first_pass_done(rig, service, names)
        slurm = service.context.slurm
        get_node = slurm.get_node
        release = asyncio.Event()
        reading: set[str] = set()
        most = 0

        async def held(name: str) -> Any:
            nonlocal most
            if structlog.contextvars.get_contextvars().get("controller") != "sync":
                return await get_node(name)  # another controller's read: not the engine's bound
            reading.add(name)
            most = max(most, len(reading))
            try:
                await release.wait()
                return await get_node(name)
            finally:
                reading.discard(name)

        slurm.get_node = held  # type: ignore[method-assign]
        try:
            for node in nodes:
                rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})
            queue = service.engine.queue
            await wait_for(lambda: queue.in_flight == 33, 30, what="every worker taking cordons busy")
            assert len(reading) == 4 and most == 4, (len(reading), most)
        finally:
            release.set()
            slurm.get_node = get_node  # type: ignore[method-assign]

        async def all_drained() -> bool:
            listing = await rig.reader.list_all_nodes()
            return {n.name for n in listing.nodes if n.drain_flag} >= set(names)

        await wait_for(all_drained, deadline_s=30, what="every cordoned node drained in Slurm")
        assert most == 4, most


async def test_a_kubernetes_change_leaves_any_write_that_would_wait_for_the_rate_limit(rig: Rig):
    """Issue 47: a key from the first lane (a Kubernetes change) never holds its worker waiting for the
    client's rate limit, at its second write as at its first: each pod or Node write is checked as it comes
    and one that would wait is left to a later reconcile, with the transition Event of the state it records.
    (Checked once at the start, a free token let the first write through and the next one queued behind a
    storm's mirror writes: at 1,000 nodes, uncordons waited seconds for a worker.)"""
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with running_syncer(rig) as service:
        await first_pass_done(rig, service, [name])
        applier = service.engine.applier
        binding = service.engine.reader.again(name, None).binding
        checked = Condition(type="example.com/Checked", status="True", reason="Test")  # none of the syncer's
        decision = Decision(
            annotations={"example.com/state": "recorded"}, annotations_on="node",
            pod_conditions=(checked,), node_conditions=(checked,),
            events=(EventSpec("ExampleTransition", "recorded on the Node", "Normal", "node"),),
        )  # fmt: skip
        folded = service.context.events.folded
        service.kube.limiter = TokenBucket(qps=0.001, burst=1)  # one write now, the next in 1,000 s
        sent = applier.apply(name, binding, decision, send=None, wait=False)
        left = await asyncio.wait_for(sent, timeout=20)
        assert left  # the Node's write is left for later: the caller queues the key again
        assert condition(rig.pod_obj(name), "example.com/Checked") is not None
        assert condition(rig.node_obj(kube_node), "example.com/Checked") is None
        assert "example.com/state" not in annotations_of(rig.node_obj(kube_node))
        assert service.context.events.folded == folded  # not written, not folded: it waits with its write
        assert not [e for e in rig.events_for(kube_node) if e["reason"] == "ExampleTransition"]

        service.kube.limiter = TokenBucket(qps=200, burst=400)
        binding = service.engine.reader.again(name, None).binding
        assert not await applier.apply(name, binding, decision, send=None, wait=True)
        assert annotations_of(rig.node_obj(kube_node)).get("example.com/state") == "recorded"
        assert condition(rig.node_obj(kube_node), "example.com/Checked") is not None
        assert [e for e in rig.events_for(kube_node) if e["reason"] == "ExampleTransition"]


async def test_a_restart_with_nothing_changed_writes_nothing(rig: Rig):
    """Never write what is already there: a syncer started over objects that already show every Slurm
    state makes no write to Kubernetes or Slurm in its first pass."""
    names = fresh_slurm_nodes(20)
    for name in names:
        rig.bind_pod(name)
    rig.scontrol("update", f"nodename={names[0]}", "state=drain", "reason=admin: fan")  # one foreign drain
    async with running_syncer(rig) as first:
        await first_pass_done(rig, first, names)
        assert annotations_of(rig.pod_obj(names[0])).get(Keys.REASON) == "admin: fan"
    server = rig.kube.server
    server.requests.clear()
    server.record_requests = True
    try:
        async with running_syncer(rig) as second:
            reconciles = second.engine.stats.reconciles
            await wait_for(
                lambda: second.engine.stats.reconciles >= reconciles + len(names),
                deadline_s=30,
                what="the restarted syncer's first pass over every node",
            )
            await second.engine.queue.wait_idle()
            writes = [(m, p) for _, m, p in server.requests if m in WRITES]
            assert writes == [], writes[:5]
            assert second.context.slurm_writer.bulk.stats.requests == 0
    finally:
        server.record_requests = False


async def test_a_cordon_is_drained_while_a_storm_of_kubernetes_writes_waits_for_the_rate_limit(rig: Rig):
    """Kubernetes changes go first and never wait for the client's rate limit: a cordon reaches Slurm
    while the writes mirroring a storm of Slurm drains still queue behind it (issue 30: with 8 workers
    each holding a reconcile through its writes, the cordon waited for the whole backlog)."""
    storm = fresh_slurm_nodes(40)
    (cordoned,) = fresh_slurm_nodes(1)
    nodes = {n: rig.bind_pod(n)[0] for n in [*storm, cordoned]}
    async with running_syncer(rig) as service:
        await first_pass_done(rig, service, [*storm, cordoned])
        service.kube.limiter = TokenBucket(qps=2, burst=1)  # the storm's 80 writes: a 40 s backlog
        rig.scontrol("update", f"nodename={','.join(storm)}", "state=drain", "reason=storm")

        def shown() -> list[str]:
            return [n for n in storm if annotations_of(rig.pod_obj(n)).get(Keys.REASON) == "storm"]

        await wait_for(lambda: bool(shown()), deadline_s=30, what="the storm's first writes")
        rig.kube.patch("", "v1", "nodes", nodes[cordoned], {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return (await rig.slurm(cordoned)).drain_flag

        await wait_for(drained, deadline_s=20, what=f"{cordoned} drained in Slurm after its cordon")
        assert len(shown()) < len(storm)  # the backlog was still there: the cordon did not wait for it
        _, exposed = await get(service, "/metrics")  # and an admin sees the rate limit holding writes back
        assert (sample(exposed, "slurm_syncer_kube_throttled_seconds_total") or 0) > 0
        service.kube.limiter = TokenBucket(qps=200, burst=400)
        await wait_for(
            lambda: (
                len(shown()) == len(storm)
                and (annotations_of(rig.pod_obj(cordoned)).get(Keys.REASON) or "").startswith("k8s: ")
            ),
            deadline_s=60,
            what="every write left for later made: the storm and the cordoned node's drain shown",
        )
