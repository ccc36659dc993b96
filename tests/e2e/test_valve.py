"""The safety valve's scope (issue 17): it limits automatic drains (Ready past the grace, listed problem
conditions) and never holds back an explicit intent (cordon, drain annotation). Real Slurm, emulator,
default fraction (10 %) and floor (3 nodes per minute)."""

from __future__ import annotations

import pytest

from syncer.model.keys import Keys
from tests.e2e.rig import NAMESPACE, Rig, fresh_slurm_nodes, running_syncer, sync
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


async def drained(rig: Rig, names: list[str]) -> list[str]:
    return [n for n in names if (await rig.slurm(n)).drain_flag]


def held_back_events(rig: Rig, names: list[str]) -> dict[str, list[dict[str, object]]]:
    return {
        n: [e for e in rig.events_for(f"slurmd-{n}") if e["reason"] == "SlurmDrainHeldBack"] for n in names
    }


async def test_three_cordons_on_a_five_node_cluster_all_drain_at_once(rig: Rig):
    names = fresh_slurm_nodes(5)
    nodes = [rig.bind_pod(n)[0] for n in names]
    async with running_syncer(rig) as service:
        assert service.engine.valve.threshold(5) == 2  # automatic drains: the 3rd in a minute trips it
        for node in nodes[:3]:  # an admin cordons three machines within seconds
            rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})

        async def three() -> bool:
            return await drained(rig, names) == names[:3]

        await wait_for(three, deadline_s=10, what="all three cordoned nodes drained in Slurm")
        await service.engine.queue.wait_idle()
        assert not service.engine.valve.is_open and service.engine.stats.valve_refusals == 0
        assert not any(held_back_events(rig, names).values())
        assert await drained(rig, names) == names[:3]  # nothing else drained


async def test_a_cordon_then_a_drain_annotation_both_drain(rig: Rig):
    """The measured case: a cordon followed by a `slurm-syncer.dev/drain` annotation on a 5-node cluster."""
    names = fresh_slurm_nodes(5)
    nodes = [rig.bind_pod(n)[0] for n in names]
    async with running_syncer(
        rig, sync=sync(safety_valve_min_nodes=2)
    ) as service:  # even with the smallest floor
        rig.kube.patch("", "v1", "nodes", nodes[0], {"spec": {"unschedulable": True}})
        rig.kube.patch(
            "", "v1", "pods", f"slurmd-{names[1]}",
            {"metadata": {"annotations": {Keys.DRAIN_REQUEST: "fan replacement"}}}, namespace=NAMESPACE,
        )  # fmt: skip

        async def both() -> bool:
            return await drained(rig, names) == names[:2]

        await wait_for(both, deadline_s=10, what="the cordoned and the annotated node drained")
        assert "fan replacement" in (await rig.slurm(names[1])).reason
        await service.engine.queue.wait_idle()
        assert not service.engine.valve.is_open and service.engine.stats.valve_refusals == 0
        assert not any(held_back_events(rig, names).values())


async def test_a_not_ready_storm_trips_the_valve_but_a_cordon_still_drains(rig: Rig):
    """On a 5-node cluster 60 % of the Nodes lose Ready together: two drain, the valve holds the third;
    operators' cordons still drain while it is open."""
    names = fresh_slurm_nodes(5)
    nodes = [rig.bind_pod(n)[0] for n in names]
    storm = names[:3]
    async with running_syncer(rig) as service:  # ready grace 2 s, default fraction and floor (3 a minute)
        assert service.engine.valve.threshold(5) == 2
        for node in nodes[:3]:
            rig.kube.set_node_condition(
                node, "Ready", "False", "NodeStatusUnknown", "kubelet stopped posting"
            )
        await wait_for(lambda: service.engine.valve.is_open, deadline_s=15, what="valve open")
        await wait_for(lambda: len(service.engine.valve.pending) == 1, deadline_s=10, what="1 held back")
        await service.engine.queue.wait_idle()
        passed = await drained(rig, names)
        held = sorted(service.engine.valve.pending)
        assert len(passed) == 2 and set(passed) | set(held) == set(storm) and not set(passed) & set(held)
        for name in passed:
            assert "Ready: NodeStatusUnknown" in (await rig.slurm(name)).reason
        ready, reasons = service.readiness()
        assert not ready and any("safety valve" in r for r in reasons)
        await wait_for(
            lambda: all(held_back_events(rig, held)[n] for n in held), what="a held-back Event per held node"
        )
        for _ in range(3):  # reconciled again and again while the valve stays open: no Event storm
            await service.engine.runner.resync()
            await service.engine.queue.wait_idle()
        events = held_back_events(rig, names)
        assert {n for n, found in events.items() if found} == set(held)
        for name in held:
            assert len(events[name]) == 1 and events[name][0]["count"] == 1, events[name]
            assert "automatic causes" in str(events[name][0]["message"])
            other = [
                e["reason"] for e in rig.events_for(f"slurmd-{name}") if e["reason"] == "DrainingSlurmNode"
            ]
            assert not other, "a held-back drain was sent"
        assert await drained(rig, names) == passed

        # An operator's cordon while the valve is open: on a healthy node and on the held-back one.
        healthy, held_one = names[3], held[0]
        for node in (nodes[3], nodes[names.index(held_one)]):
            rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})

        async def cordons_drained() -> bool:
            now = set(await drained(rig, names))
            return {healthy, held_one} <= now

        await wait_for(
            cordons_drained, deadline_s=10, what="explicit cordons drained while the valve is open"
        )
        await service.engine.queue.wait_idle()
        assert service.engine.valve.is_open, "explicit drains neither close nor count against the valve"
        assert set(await drained(rig, names)) == {*passed, healthy, held_one}
        assert not service.engine.valve.pending
        assert not held_back_events(rig, [healthy])[healthy]
