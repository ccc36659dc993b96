"""What PowerActions does with a power decision when Slurm answers something else than the plan saw: it
reads the record again before forcing a member down, and one refused write never stops the rest. Slurm is
a recorder here (its answers are the measured ones: SLURM-NOTES.md); the integration tests drive the
real sandbox."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import msgspec
import structlog

from syncer.controllers.nodeset.power import CEILING_LOWERED, PowerDecision
from syncer.controllers.nodeset.power_actions import PowerActions
from syncer.kube.errors import KubeError
from syncer.model.kube import Condition, KubeNode, KubePod
from syncer.model.slurm import SlurmNode
from syncer.slurm.errors import SlurmApiError, SlurmMessage, SlurmNotFound
from tests.unit.test_nodeset_plan import NOW, NS, pod
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


class Kube:
    """The pods and Nodes kube-apiserver answers (the Node cache holds the same Nodes)."""

    def __init__(self, pods: list[KubePod], nodes: list[KubeNode]) -> None:
        self.pods = {p.name: p for p in pods}
        self.nodes = {n.name: n for n in nodes}

    async def get(self, path: str) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        if name in self.pods:
            meta = {"namespace": "hpc", "name": name}
            return {"metadata": meta, "spec": {"nodeName": self.pods[name].node_name}, "status": {}}
        raise KubeError(404, "NotFound", f"{path} not found")


async def apply(
    slurm: Slurm, decision: PowerDecision, kube: Kube | None = None, *, limit: int = 2
) -> list[tuple[str, str, str]]:
    kube = kube or Kube([], [])
    context: Any = SimpleNamespace(
        slurm=slurm,
        clock=lambda: NOW,
        kube=kube,
        kube_cache=SimpleNamespace(nodes=SimpleNamespace(items=kube.nodes)),
    )
    writes: Any = SimpleNamespace(slurm_writer=slurm)
    events: list[tuple[str, str, str]] = []

    async def event(type_: str, reason: str, message: str) -> None:
        events.append((type_, reason, message))

    spec = power(1).power
    assert spec is not None
    await PowerActions(context, writes, "k8s: ", node_loss_limit=limit).apply(
        NS, spec, decision, kube.pods, dict(slurm.nodes), event, structlog.get_logger("test")
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


UP_RUNNING = ("ALLOCATED", "CLOUD", "DYNAMIC_NORM")


def running(count: int, not_ready_for: float | None) -> tuple[Slurm, Kube, PowerDecision]:
    """`count` members running jobs, each pod on its own Node kw-N; the Nodes NotReady for `not_ready_for`
    seconds (None: Ready)."""
    spec = power(count)
    pods = [msgspec.structs.replace(pod(f"gpu-{i}", spec), node_name=f"kw-{i}") for i in range(count)]
    status, since = ("True", NOW - 3600) if not_ready_for is None else ("Unknown", NOW - not_ready_for)
    ready = Condition(type="Ready", status=status, reason="NodeStatusUnknown", last_transition_time=since)
    nodes = [KubeNode(name=f"kw-{i}", conditions=(ready,)) for i in range(count)]
    slurm = Slurm(*(rec(f"gpu-{i}", *UP_RUNNING) for i in range(count)))
    return slurm, Kube(pods, nodes), PowerDecision(members={f"gpu-{i}": i for i in range(count)})


async def test_a_node_notready_for_a_moment_forces_nothing_down() -> None:
    """A kubelet restart or an apiserver blip: NotReady for 10s, under startTimeout (5m)."""
    slurm, kube, decision = running(3, not_ready_for=10)
    assert await apply(slurm, decision, kube) == [] and slurm.forced == []


async def test_a_node_notready_past_the_bound_is_lost_but_never_more_than_the_limit_per_pass() -> None:
    slurm, kube, decision = running(4, not_ready_for=600)
    events = await apply(slurm, decision, kube, limit=2)
    assert slurm.forced == ["gpu-0", "gpu-1"]
    assert [r for _, r, _ in events] == ["PowerUpFailed", "PowerUpFailed"]


async def test_a_node_gone_from_the_api_is_lost_at_once() -> None:
    slurm, kube, decision = running(1, not_ready_for=None)
    kube.nodes.clear()
    await apply(slurm, decision, kube)
    assert slurm.forced == ["gpu-0"]
