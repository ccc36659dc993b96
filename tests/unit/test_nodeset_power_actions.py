"""What PowerActions does with a power decision when Slurm answers something else than the plan saw: it
reads the record again before forcing a member down, and one refused write never stops the rest. Slurm is
a recorder here (its answers are the measured ones: SLURM-NOTES.md); the integration tests drive the
real sandbox."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import structlog

from syncer.model.slurm import SlurmNode
from syncer.nodeset.power import CEILING_LOWERED, PowerDecision
from syncer.nodeset.power_actions import PowerActions
from syncer.slurm.errors import SlurmApiError, SlurmMessage, SlurmNotFound
from tests.unit.test_nodeset_plan import NOW, NS
from tests.unit.test_nodeset_power_plan import CONF_DOWN, DOWN, MINE, UP, power, rec


class Slurm:
    """The records Slurm answers now, and the writes asked of it."""

    def __init__(self, *nodes: SlurmNode) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.forced: list[str] = []
        self.deleted: list[str] = []
        self.refuse_delete: dict[str, Exception] = {}

    async def get_node(self, name: str) -> SlurmNode:
        if name not in self.nodes:
            raise SlurmNotFound(f"node {name} does not exist", endpoint="node", status=404)
        return self.nodes[name]

    async def power_down_force(self, name: str, reason: str) -> bool:
        self.forced.append(name)
        return True

    async def delete_node(self, name: str) -> bool:
        if name in self.refuse_delete:
            raise self.refuse_delete[name]
        self.deleted.append(name)
        return True

    async def set_comment(self, name: str, comment: str) -> bool:
        return True


async def apply(slurm: Slurm, decision: PowerDecision) -> list[tuple[str, str, str]]:
    context: Any = SimpleNamespace(
        slurm=slurm, clock=lambda: NOW, kube_cache=SimpleNamespace(nodes=SimpleNamespace(items={}))
    )
    writes: Any = SimpleNamespace(slurm_writer=slurm)
    events: list[tuple[str, str, str]] = []

    async def event(type_: str, reason: str, message: str) -> None:
        events.append((type_, reason, message))

    spec = power(1).power
    assert spec is not None
    await PowerActions(context, writes, "k8s: ").apply(
        NS, spec, decision, {}, dict(slurm.nodes), event, structlog.get_logger("test")
    )
    return events


async def test_a_ceiling_member_that_came_up_meanwhile_is_not_forced_down() -> None:
    """The plan saw gpu-3 POWERING_UP above a lowered ceiling; Slurm now shows it up and running a job:
    forcing it down would end a --no-requeue job NODE_FAIL."""
    slurm = Slurm(rec("gpu-3", "ALLOCATED", "CLOUD", "DYNAMIC_NORM"), rec("gpu-4", *UP))
    await apply(slurm, PowerDecision(force_down={"gpu-3": CEILING_LOWERED, "gpu-4": CEILING_LOWERED}))
    assert slurm.forced == ["gpu-4"]  # still powering up: its job only waits, it is requeued


async def test_a_ceiling_member_gone_meanwhile_is_not_forced_down() -> None:
    slurm = Slurm()
    await apply(slurm, PowerDecision(force_down={"gpu-3": CEILING_LOWERED}))
    assert slurm.forced == []


async def test_one_refused_delete_does_not_stop_the_rest() -> None:
    """Slurm answers 500 (error 2028) to `DELETE /node/` on a node it will not delete: the next member is
    still deleted, the pass goes on to its forced power-downs, and an Event names the refusal."""
    refused = SlurmApiError(
        "DELETE /node/gpu-3", endpoint="node_delete", status=500,
        errors=(SlurmMessage(description="Unable to delete node", error_number=2028),),
    )  # fmt: skip
    slurm = Slurm(rec("gpu-3", *DOWN), rec("gpu-4", *DOWN), rec("gpu-5", *UP))
    slurm.refuse_delete["gpu-3"] = refused
    decision = PowerDecision(undeclare=["gpu-3", "gpu-4"], force_down={"gpu-5": CEILING_LOWERED})
    events = await apply(slurm, decision)
    assert slurm.deleted == ["gpu-4"] and slurm.forced == ["gpu-5"]
    assert any(r == "DeleteSlurmNodeFailed" and "gpu-3" in m for _, r, m in events)


async def test_a_slurm_conf_member_is_not_deleted_but_named_for_the_admin() -> None:
    slurm = Slurm(rec("gpu-2", *CONF_DOWN, comment=MINE))
    events = await apply(slurm, PowerDecision(undeclare=["gpu-2"], conf_above=["gpu-2"]))
    assert slurm.deleted == []
    assert [r for _, r, _ in events] == ["SlurmConfMemberAboveCeiling"]
    assert "NodeName=gpu-2" in events[0][2]
