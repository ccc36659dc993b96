"""What PowerActions does with a power decision when Slurm answers something else than the plan saw: it
reads the record again before forcing a member down, and one refused write never stops the rest. Slurm is
a recorder here (its answers are the measured ones: SLURM-NOTES.md); the integration tests drive the
real sandbox."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import msgspec
import structlog

from syncer.controllers.nodeset.disruption import ZONE_LABEL
from syncer.controllers.nodeset.plan import removal_stamp
from syncer.controllers.nodeset.power import CEILING_LOWERED, PowerDecision, declare_failed_message
from syncer.controllers.nodeset.power_actions import PowerActions
from syncer.kube.errors import KubeError
from syncer.model.kube import Condition, KubeNode, KubePod
from syncer.model.slurm import SlurmNode
from syncer.slurm.errors import SlurmApiError, SlurmMessage, SlurmNotFound, SlurmVersionError
from tests.unit.test_nodeset_plan import NOW, NS, pod
from tests.unit.test_nodeset_power_plan import CONF_DOWN, DOWN, MINE, UP, power, rec


class Slurm:
    """The records Slurm answers now, and the writes asked of it."""

    def __init__(self, *nodes: SlurmNode) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.forced: list[str] = []
        self.deleted: list[str] = []
        self.refuse_delete: dict[str, Exception] = {}
        self.refuse_create: dict[str, Exception] = {}
        self.created: list[str] = []
        self.commented: list[str] = []
        self.intents: list[list[str]] = []  # status.power.declaring written before the declares
        self.refuse_status = False  # the NodeSet's status write fails
        self.refuse_comment: set[str] = set()
        self.node_create = True  # the REST version can create nodes (v0.0.44+)
        self.updated: list[tuple[str, tuple[str, ...]]] = []  # node updates (state) through the writer
        self.annotated: list[str] = []  # pods marked (power-down annotation) before their delete
        self.pods_deleted: list[str] = []

    async def update(self, name: str, *, state: list[str]) -> bool:
        await self.get_node(name)  # gone: SlurmNotFound, as the writer raises
        self.updated.append((name, tuple(state)))
        return True

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
        if name in self.refuse_comment:
            raise SlurmApiError(f"POST /node/{name}", endpoint="node_update", status=500)
        self.commented.append(name)
        return True

    def need_node_create(self) -> None:
        if not self.node_create:
            raise SlurmVersionError("REST API v0.0.42 cannot create nodes", endpoint="node_create")

    async def create_node(self, name: str, node_conf: str) -> bool:
        self.need_node_create()
        if name in self.refuse_create:
            raise self.refuse_create[name]
        self.created.append(name)
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


def parts(slurm: Slurm, kube: Kube) -> tuple[Any, Any, None]:
    """The context and the writes PowerActions is built from, over the recorders."""

    async def set_annotations(path: str, wanted: dict[str, Any], what: str) -> bool:
        slurm.annotated.append(path.rsplit("/", 1)[1])
        return True

    async def delete_pod(pod: KubePod) -> bool:
        slurm.pods_deleted.append(pod.name)
        return True

    context: Any = SimpleNamespace(
        slurm=slurm,
        clock=lambda: NOW,
        kube=kube,
        kube_cache=SimpleNamespace(nodes=SimpleNamespace(items=kube.nodes)),
        writer=SimpleNamespace(set_annotations=set_annotations),
    )

    async def status(_nodeset: Any, status: dict[str, Any]) -> None:
        if slurm.refuse_status:
            raise KubeError(500, "InternalError", "etcd unavailable")
        slurm.intents.append(status["power"]["declaring"])

    writes: Any = SimpleNamespace(slurm_writer=slurm, status=status, delete_pod=delete_pod)
    return context, writes, None


async def apply(
    slurm: Slurm, decision: PowerDecision, kube: Kube | None = None, *, limit: int = 2,
    problems: list[str] | None = None,
) -> list[tuple[str, str, str]]:  # fmt: skip
    kube = kube or Kube([], [])
    context, writes, _ = parts(slurm, kube)
    events: list[tuple[str, str, str]] = []

    async def event(type_: str, reason: str, message: str) -> None:
        events.append((type_, reason, message))

    spec = power(1).power
    assert spec is not None
    actions = PowerActions(context, writes, "k8s: ", node_loss_limit=limit)
    for node in kube.nodes.values():  # what the controller's Node informer feeds it
        actions.zones.update(None, node)
    found = await actions.apply(
        NS, spec, decision, kube.pods, dict(slurm.nodes), event, structlog.get_logger("test")
    )
    if problems is not None:
        problems.extend(found)
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


async def test_a_record_with_our_removal_stamp_is_deleted_on_a_fresh_read_that_agrees() -> None:
    """Above the ceiling, a record that kept our removal stamp (its scale-in cut short by Slurm's power-down)
    is ours to delete as one with our declared stamp; on the fresh read, busy or someone else's is kept."""
    stamp = removal_stamp(NS)
    slurm = Slurm(
        rec("gpu-2", *DOWN, comment=stamp),
        rec("gpu-3", "MIXED", "CLOUD", "DYNAMIC_NORM", comment=stamp),
        rec("gpu-4", *DOWN, comment="someone's"),
    )
    await apply(slurm, PowerDecision(undeclare=["gpu-2", "gpu-3", "gpu-4"]))
    assert slurm.deleted == ["gpu-2"]


async def test_a_slurm_conf_member_is_not_deleted_but_named_for_the_admin() -> None:
    slurm = Slurm(rec("gpu-2", *CONF_DOWN, comment=MINE))
    events = await apply(slurm, PowerDecision(undeclare=["gpu-2"], conf_above=["gpu-2"]))
    assert slurm.deleted == []
    assert [r for _, r, _ in events] == ["SlurmConfMemberAboveCeiling"]
    assert "NodeName=gpu-2" in events[0][2]


UP_RUNNING = ("ALLOCATED", "CLOUD", "DYNAMIC_NORM")


def running(
    count: int, not_ready_for: float | None, *, slurmd: tuple[str, ...] = UP_RUNNING, zone: str = ""
) -> tuple[Slurm, Kube, PowerDecision]:
    """`count` members running jobs, each pod on its own Node kw-N, each Node in a zone of its own (or all
    in `zone`); the Nodes NotReady for `not_ready_for` seconds (None: Ready); Slurm shows the members
    `slurmd` (by default up, their slurmd answering)."""
    spec = power(count)
    pods = [msgspec.structs.replace(pod(f"gpu-{i}", spec), node_name=f"kw-{i}") for i in range(count)]
    status, since = ("True", NOW - 3600) if not_ready_for is None else ("Unknown", NOW - not_ready_for)
    ready = Condition(type="Ready", status=status, reason="NodeStatusUnknown", last_transition_time=since)
    nodes = [
        KubeNode(name=f"kw-{i}", labels={ZONE_LABEL: zone or f"z{i}"}, conditions=(ready,))
        for i in range(count)
    ]
    slurm = Slurm(*(rec(f"gpu-{i}", *slurmd) for i in range(count)))
    return slurm, Kube(pods, nodes), PowerDecision(members={f"gpu-{i}": i for i in range(count)})


SILENT = (*UP_RUNNING, "NOT_RESPONDING")  # slurmctld's pings to its slurmd fail


async def test_a_node_notready_for_a_moment_forces_nothing_down() -> None:
    """A kubelet restart or an apiserver blip: NotReady for 10s, under startTimeout (5m)."""
    slurm, kube, decision = running(3, not_ready_for=10)
    assert await apply(slurm, decision, kube) == [] and slurm.forced == []


async def test_a_node_notready_past_the_bound_under_a_busy_member_whose_slurmd_answers_is_not_lost() -> None:
    """Kubelet certificates expired, or the API server lost its Nodes: Ready=Unknown for longer than
    startTimeout while every slurmd answers Slurm; forcing the members down would end their jobs."""
    slurm, kube, decision = running(3, not_ready_for=600)
    assert await apply(slurm, decision, kube) == [] and slurm.forced == []


async def test_a_node_notready_is_lost_only_if_slurm_still_cannot_reach_the_slurmd_on_a_fresh_read() -> None:
    """The cache saw NOT_RESPONDING a second ago; Slurm answers now that the slurmd responds: not forced."""
    slurm, kube, decision = running(2, not_ready_for=600, slurmd=SILENT)
    slurm.nodes["gpu-0"] = rec("gpu-0", *UP_RUNNING)
    await apply(slurm, decision, kube)
    assert slurm.forced == ["gpu-1"]


async def test_a_node_notready_past_the_bound_is_lost_but_never_more_than_the_limit_per_pass() -> None:
    slurm, kube, decision = running(4, not_ready_for=600, slurmd=SILENT)
    events = await apply(slurm, decision, kube, limit=2)
    assert slurm.forced == ["gpu-0", "gpu-1"]
    assert [r for _, r, _ in events] == ["PowerUpFailed", "PowerUpFailed"]


async def test_a_node_gone_from_the_api_is_lost_at_once() -> None:
    slurm, kube, decision = running(1, not_ready_for=None)
    kube.nodes.clear()
    await apply(slurm, decision, kube)
    assert slurm.forced == ["gpu-0"]


def refused_create(name: str) -> SlurmApiError:
    return SlurmApiError(
        f"POST /new/node/ {name}", endpoint="node_create", status=422,
        errors=(SlurmMessage(description="Failure to create node", error_number=2169),),
    )  # fmt: skip


async def test_a_refused_declare_stops_no_other_member_nor_the_rest_of_the_pass() -> None:
    """MaxNodeCount reached: Slurm refuses gpu-2's declare; gpu-3 is still tried, the forced power-down
    after it still happens, a Warning Event names the member and Slurm's error, and the pass reports what
    failed (it raises at its end, once the pods are created)."""
    slurm = Slurm(rec("gpu-5", *UP))
    slurm.refuse_create["gpu-2"] = refused_create("gpu-2")
    decision = PowerDecision(declare=["gpu-2", "gpu-3"], force_down={"gpu-5": CEILING_LOWERED})
    problems: list[str] = []
    events = await apply(slurm, decision, problems=problems)
    assert slurm.intents == [["gpu-2", "gpu-3"]], "the intent is recorded before any create"
    assert slurm.created == ["gpu-3"] and slurm.commented == ["gpu-3"] and slurm.forced == ["gpu-5"]
    assert len(problems) == 1 and problems[0].startswith("declare of gpu-2: ")
    refusals = [m for _, r, m in events if r == "DeclareFailed"]
    assert len(refusals) == 1 and "gpu-2" in refusals[0] and "Failure to create node" in refusals[0]


def test_the_declare_failed_message_names_the_members_in_order_and_the_error() -> None:
    refused = {f"gpu-{i}": "Failure to create node (error 2169)" for i in (11, 2, 10)}
    message = declare_failed_message(refused)
    assert message.startswith("Slurm refused to declare gpu-2, gpu-10, gpu-11: Failure to create node")
    many = declare_failed_message({f"gpu-{i}": "x" for i in range(12)})
    assert "gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7, gpu-8, gpu-9 and 2 more: x;" in many


async def test_a_disrupted_zone_holds_every_lost_node_power_down_and_says_so_once() -> None:
    """Every Node of zone a NotReady past startTimeout, slurmctld unable to reach the slurmds (a network
    partition): nothing forced down there (Kubernetes stops evicting in a full disruption), one Warning
    Event naming the zone, the count and the members."""
    slurm, kube, decision = running(3, not_ready_for=600, slurmd=SILENT, zone="a")
    events = await apply(slurm, decision, kube)
    assert slurm.forced == []
    assert [r for _, r, _ in events] == ["NodeDisruption"]
    assert "3 of 3 Nodes in zone a are NotReady" in events[0][2] and "gpu-0, gpu-1, gpu-2" in events[0][2]


async def test_a_gone_node_is_lost_even_in_a_disrupted_zone() -> None:
    """A Node deleted from the API is a decision (an admin's, or the cloud provider's: the machine is gone),
    not a control plane that lost it: its member goes, the NotReady ones of the disrupted zone stay."""
    slurm, kube, decision = running(4, not_ready_for=600, slurmd=SILENT, zone="a")
    del kube.nodes["kw-0"]
    events = await apply(slurm, decision, kube)
    assert slurm.forced == ["gpu-0"]
    held = [m for _, r, m in events if r == "NodeDisruption"]
    assert len(held) == 1 and "3 of 3 Nodes in zone a" in held[0] and "(gpu-1, gpu-2, gpu-3)" in held[0]


async def test_no_intent_recorded_no_declare() -> None:
    """The NodeSet's status cannot be written: nothing is declared (a record with no comment and no
    recorded intent would later look like someone else's)."""
    slurm = Slurm()
    slurm.refuse_status = True
    problems: list[str] = []
    await apply(slurm, PowerDecision(declare=["gpu-0"]), problems=problems)
    assert slurm.created == [] and problems and "status" in problems[0]


async def test_a_version_that_cannot_create_nodes_gets_no_intent_written_and_waits_for_another() -> None:
    """24.11's REST refuses every declare: no intent is written (written and cleared in each pass, it woke the
    NodeSet again: ~140 passes a second, two status writes each, measured), the reason is kept for this
    NodeSet's PowerSaving condition, one Warning Event, and the pass is no progress. Another version: the
    members are declared and the reason is gone."""
    slurm = Slurm()
    slurm.node_create = False
    context, writes, _ = parts(slurm, Kube([], []))
    actions = PowerActions(context, writes, "k8s: ")
    spec = power(2).power
    assert spec is not None
    told: list[str] = []

    async def event(_type: str, reason: str, message: str) -> None:
        told.append(reason)

    async def a_pass(decision: PowerDecision | None = None) -> None:
        decision = decision or PowerDecision(declare=["gpu-0", "gpu-1"])
        await actions.apply(NS, spec, decision, {}, {}, event, structlog.get_logger())

    for _ in range(2):
        await a_pass()
    assert slurm.intents == [] and slurm.created == []
    assert "cannot create nodes" in actions.unsupported[NS.key] and not actions.progressed[NS.key]
    assert told == ["PowerSavingUnsupported"]
    await a_pass(PowerDecision(fresh=False))  # planned on stale data: nothing to declare, as far as it knows
    assert NS.key in actions.unsupported, "the reason stays until fresh data or another version"
    slurm.node_create = True
    await a_pass()
    assert slurm.intents == [["gpu-0", "gpu-1"]] and slurm.created == ["gpu-0", "gpu-1"]
    assert NS.key not in actions.unsupported and actions.progressed[NS.key]
    slurm.node_create = False
    await a_pass()
    await a_pass(PowerDecision())  # fresh data, nothing to declare (named in slurm.conf meanwhile)
    assert NS.key not in actions.unsupported


async def test_a_record_whose_comment_failed_stays_in_the_intent() -> None:
    slurm = Slurm()
    slurm.refuse_comment = {"gpu-0"}
    context, writes, _ = parts(slurm, Kube([], []))
    actions = PowerActions(context, writes, "k8s: ")
    spec = power(1).power
    assert spec is not None

    async def event(*_: str) -> None:
        return None

    await actions.apply(
        NS, spec, PowerDecision(declare=["gpu-0", "gpu-1"]), {}, {}, event, structlog.get_logger()
    )
    assert slurm.created == ["gpu-0", "gpu-1"] and actions.declaring[NS.key] == ["gpu-0"]
    assert actions.intent_written[NS.key], "the pass's end status is written even if the informer lags"


async def test_a_name_collision_is_told_once_while_it_lasts() -> None:
    slurm = Slurm()
    context, writes, _ = parts(slurm, Kube([], []))
    actions = PowerActions(context, writes, "k8s: ")
    spec = power(2).power
    assert spec is not None
    told: list[str] = []

    async def event(_type: str, reason: str, message: str) -> None:
        told.append(reason)

    for _ in range(2):
        await actions.apply(NS, spec, PowerDecision(foreign=["gpu-1"]), {}, {}, event, structlog.get_logger())
    assert told == ["NameCollision"]


async def test_a_member_declared_a_moment_ago_is_not_declared_again_before_the_cache_shows_it() -> None:
    """The NodeSet's own status write wakes a pass before the next Slurm poll: that pass still sees no
    record and would POST every member again (for Slurm's 'already exists'): 133 creates for 50 members in
    benchmarks/power.py before this."""
    slurm = Slurm()
    context, writes, _ = parts(slurm, Kube([], []))
    actions = PowerActions(context, writes, "k8s: ")
    spec = power(2).power
    assert spec is not None

    async def event(*_: str) -> None:
        return None

    progressed = []
    for _ in range(2):
        await actions.apply(
            NS, spec, PowerDecision(declare=["gpu-0", "gpu-1"]), {}, {}, event, structlog.get_logger()
        )
        progressed.append(actions.progressed[NS.key])
    assert slurm.created == ["gpu-0", "gpu-1"] and len(slurm.intents) == 1
    assert progressed == [True, False], "a pass that sent nothing is not followed by another at once"
    assert actions.declaring[NS.key] == ["gpu-0", "gpu-1"], "their intent stays until the cache shows them"


def test_in_flight_forgets_what_the_slurm_data_shows_and_what_is_old() -> None:
    slurm = Slurm()
    context, writes, _ = parts(slurm, Kube([], []))
    clock = [NOW]
    context.clock = lambda: clock[0]
    actions = PowerActions(context, writes, "k8s: ")
    actions._declared_at[NS.key] = {"gpu-0": NOW, "gpu-1": NOW, "gpu-2": NOW - 31}
    assert actions.in_flight(NS.key, {"gpu-1": rec("gpu-1", *DOWN)}) == {"gpu-0"}
    clock[0] = NOW + 30
    assert actions.in_flight(NS.key, {}) == set()


GONE = "k8s: pod hpc/gpu-0 terminating"
DRAINED_DOWN = ("IDLE", "CLOUD", "DYNAMIC_NORM", "DRAIN", "POWERED_DOWN")


async def test_our_drain_on_a_powered_down_member_without_a_pod_is_lifted_on_a_read_that_agrees() -> None:
    """review5: the plan saw each powered down with our drain and no pod; Slurm now shows gpu-1 powering up,
    gpu-2 an admin's drain, gpu-3 busy, gpu-4 gone, gpu-5 with a pod again: only gpu-0 is undrained."""
    slurm = Slurm(
        rec("gpu-0", *DRAINED_DOWN, reason=GONE),
        rec("gpu-1", "IDLE", "CLOUD", "DYNAMIC_NORM", "DRAIN", "POWERING_UP", reason=GONE),
        rec("gpu-2", *DRAINED_DOWN, reason="bad dimm"),
        rec("gpu-3", "MIXED", "CLOUD", "DYNAMIC_NORM", "DRAIN", "POWERING_DOWN", reason=GONE),
        rec("gpu-5", *DRAINED_DOWN, reason=GONE),
        rec("gpu-6", "IDLE", "CLOUD", "DYNAMIC_NORM", "DRAIN", reason=GONE),  # up: its pod comes instead
    )
    kube = Kube([pod("gpu-5", power(7))], [])
    names = ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6"]
    problems: list[str] = []
    events = await apply(slurm, PowerDecision(undrain=names), kube, problems=problems)
    assert slurm.updated == [("gpu-0", ("UNDRAIN",))] and problems == []
    assert [(r, m.split(" ")[2]) for _, r, m in events] == [("MemberUndrained", "gpu-0")]


async def test_a_pod_that_registered_before_its_member_powers_up_again_is_replaced_on_a_fresh_read() -> None:
    """review5: marked as a power-down's (no drain as it terminates), then deleted; not when Slurm now shows
    the member registered (up), gone, or booted by a slurmd younger than the pod (this power-up's)."""
    spec = power(4)
    pods = [msgspec.structs.replace(pod(f"gpu-{i}", spec), created=NOW - 100) for i in range(4)]
    again = msgspec.structs.replace(rec("gpu-0", *UP), boot_time=int(NOW - 100))
    slurm = Slurm(
        again,
        msgspec.structs.replace(again, name="gpu-1", state=frozenset({"IDLE", "CLOUD", "DYNAMIC_NORM"})),
        msgspec.structs.replace(again, name="gpu-3", boot_time=int(NOW - 200)),
    )
    events = await apply(slurm, PowerDecision(replace=["gpu-0", "gpu-1", "gpu-2", "gpu-3"]), Kube(pods, []))
    assert slurm.annotated == ["gpu-0"] and slurm.pods_deleted == ["gpu-0"]
    assert [(r, m.split(" ")[2]) for _, r, m in events] == [("PodReplaced", "gpu-0")]
