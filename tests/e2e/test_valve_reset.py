"""The operator's safety-valve reset: an annotation on the leader Lease, acted on once by the leader,
audited by an Event on the Lease (real Slurm, emulator)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from syncer.model.keys import Keys
from tests.e2e.rig import FAST, Rig, fresh_slurm_nodes, running_syncer
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]

LEADER = replace(FAST, leader_election=True, lease_duration_s=6.0, renew_deadline_s=4.0, retry_period_s=0.5)


async def test_an_annotation_on_the_lease_resets_the_valve_once_with_an_event(rig: Rig):
    names = fresh_slurm_nodes(20)
    nodes = [rig.bind_pod(n)[0] for n in names]

    async def drained_count() -> int:
        return sum([(await rig.slurm(n)).drain_flag for n in names])

    async with running_syncer(rig, LEADER) as service:  # 10 % of 20 is 2 a minute (the floor's 3 trips too)
        await wait_for(lambda: service.gate.leading, deadline_s=15, what="leadership")
        for node in nodes[:6]:  # automatic causes: a cordon would never be held back
            rig.kube.set_node_condition(
                node, "Ready", "False", "NodeStatusUnknown", "kubelet stopped posting"
            )
        await wait_for(lambda: service.engine.valve.is_open, deadline_s=15, what="valve open")
        await wait_for(lambda: len(service.engine.valve.pending) == 4, what="four drains held back")
        await wait_for(
            lambda: any(
                e["reason"] == "SlurmDrainHeldBack" for n in names for e in rig.events_for(f"slurmd-{n}")
            ),
            what="held-back Event",
        )
        held = [
            e for n in names for e in rig.events_for(f"slurmd-{n}") if e["reason"] == "SlurmDrainHeldBack"
        ]
        assert held and all(Keys.VALVE_RESET in str(e["message"]) for e in held), (
            "the Event says how to reset"
        )
        # the two drains the valve let through are written by their reconciles, which may still be at
        # slurmrestd when the held-back Event is out: the syncer had its chance once the queue is idle
        await service.engine.queue.wait_idle()
        assert await drained_count() == 2
        rig.kube.patch(
            "coordination.k8s.io", "v1", "leases", "slurm-syncer",
            {"metadata": {"annotations": {Keys.VALVE_RESET: "alice: fans checked"}}},
            namespace="default",
        )  # fmt: skip

        async def six() -> bool:
            return await drained_count() == 6

        await wait_for(six, deadline_s=15, what="held drains released by the operator's reset")
        lease = rig.kube.get("coordination.k8s.io", "v1", "leases", "slurm-syncer", namespace="default")
        assert lease is not None
        assert Keys.VALVE_RESET not in (lease["metadata"].get("annotations") or {}), "consumed once"
        events = [
            e
            for e in rig.kube.api.store.objects_of(("", "events"))
            if e["involvedObject"]["kind"] == "Lease" and e["reason"] == "SafetyValveReset"
        ]
        assert len(events) == 1 and "alice: fans checked" in events[0]["message"], events
        assert "4 held drain(s) let through" in events[0]["message"]
