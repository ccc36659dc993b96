"""The power-saving plan of a NodeSet (spec.power): declare the ceiling's members before any pod, a pod
exactly for each member Slurm powers up, none for one an admin took out, the pod of a member Slurm
powered down deleted, the floor always on, and a lowered ceiling removing members without a phantom or a
killed job. NodeSets without spec.power are untouched (tests/unit/test_nodeset_plan.py)."""

from __future__ import annotations

from typing import Any

from syncer.controllers.nodeset.plan import SCALE_IN, Plan, plan, removal_stamp
from syncer.controllers.nodeset.power import CEILING_LOWERED, PowerDecision, decide_power, declared_stamp
from syncer.controllers.nodeset.spec import NodeSetSpec, parse
from tests.unit.test_nodeset_plan import NOW, NS, REASON, pod, slurm

MINE = declared_stamp(removal_stamp(NS))
TEMPLATE = {
    "spec": {
        "containers": [
            {"name": "slurmd", "image": "s:1", "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}
        ]
    }
}
DOWN = ("IDLE", "CLOUD", "DYNAMIC_NORM", "POWERED_DOWN")  # declared over REST (DYNAMIC_NORM)
UP = ("ALLOCATED", "CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING", "POWERING_UP")


def power(ceiling: int, floor: int = 0, **fields: Any) -> NodeSetSpec:
    return parse(
        "gpu", {"template": TEMPLATE, "power": {"minReplicas": floor, "maxReplicas": ceiling}, **fields}
    )


def rec(name: str, *flags: str, reason: str = "", comment: str = MINE) -> Any:
    return slurm(name, *flags, reason=reason, comment=comment)


def run(spec: NodeSetSpec, pods: list[Any], nodes: list[Any], *, fresh: bool = True) -> Plan:
    return plan(NS, spec, pods, {n.name: n for n in nodes}, nodes=[], slurm_fresh=fresh, now=NOW)


def test_members_are_declared_before_any_pod() -> None:
    result = run(power(3, floor=1), [], [])
    assert result.power is not None
    assert result.power.declare == ["gpu-0", "gpu-1", "gpu-2"]
    assert result.create == []  # not even the floor's: its record comes first
    assert not result.idle


def test_nothing_declared_on_stale_data() -> None:
    result = run(power(2), [], [], fresh=False)
    assert result.power is not None and result.power.declare == []


def test_floor_members_always_have_pods_and_others_wait_for_slurm() -> None:
    spec = power(3, floor=1)
    result = run(spec, [], [rec(f"gpu-{i}", *DOWN) for i in range(3)])
    assert [m.name for m in result.create] == ["gpu-0"]
    assert result.power is not None and result.power.declare == []
    assert result.power.powered_up == set(), "a floor member is not powered up by Slurm: no PoweringUp"
    assert result.power.counts["poweredDown"] == 3 and result.power.counts["declared"] == 3


def test_a_member_slurm_powers_up_gets_exactly_its_pod() -> None:
    spec = power(4)
    nodes = [
        rec("gpu-0", *DOWN),
        rec("gpu-1", *UP),
        rec("gpu-2", "IDLE", "CLOUD", "POWER_UP"),
        rec("gpu-3", *DOWN),
    ]
    result = run(spec, [], nodes)
    assert [m.name for m in result.create] == ["gpu-1", "gpu-2"]
    # the PoweringUp Event follows this view, not a cache that may have moved on during the create
    assert result.power is not None and result.power.powered_up == {"gpu-1", "gpu-2"}
    # created already (the cache saw it): nothing more
    again = run(spec, [pod("gpu-1", spec), pod("gpu-2", spec)], nodes)
    assert again.create == []


def test_a_running_member_keeps_its_pod_until_slurm_powers_it_down() -> None:
    spec = power(2)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec)]
    nodes = [rec("gpu-0", "IDLE", "CLOUD"), rec("gpu-1", "IDLE", "CLOUD", "POWERING_DOWN")]
    result = run(spec, pods, nodes)
    assert result.power is not None
    assert result.power.power_down_pods == ["gpu-1"]
    assert result.delete_pods == [] and result.mark_removal == {}  # not the drain path: it is idle


def test_a_powered_down_member_still_finishing_a_job_keeps_its_pod_for_now() -> None:
    spec = power(1)
    result = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", "DOWN", "COMPLETING", "CLOUD", "POWERING_DOWN")])
    assert result.power is not None and result.power.power_down_pods == []


def test_power_down_waits_for_fresh_slurm_data() -> None:
    spec = power(1)
    result = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", *DOWN)], fresh=False)
    assert result.power is not None and result.power.power_down_pods == [] and result.power.stale


def test_an_admins_down_or_drain_gets_no_pod() -> None:
    spec = power(3)
    nodes = [
        rec("gpu-0", "IDLE", "DRAIN", "CLOUD", "POWERING_UP", reason="bad dimm"),
        rec("gpu-1", "DOWN", "CLOUD", "POWERED_DOWN", reason="ResumeTimeout"),
        rec("gpu-2", "IDLE", "DRAIN", "CLOUD", "POWERING_UP", reason="k8s: pod gpu-2 terminating"),
    ]
    result = run(spec, [], nodes)
    assert [m.name for m in result.create] == ["gpu-2"]  # our own drain is not an admin's
    assert result.power is not None and result.power.counts["heldByAdmin"] == 2


def test_an_admin_drain_on_a_running_member_leaves_its_pod() -> None:
    spec = power(1)
    result = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", "ALLOCATED", "DRAIN", "CLOUD", reason="admin")])
    assert result.power is not None and result.power.power_down_pods == [] and result.delete_pods == []


def test_a_declared_record_without_our_mark_is_stamped_and_a_foreign_one_left_alone() -> None:
    spec = power(2)
    result = run(spec, [], [rec("gpu-0", *UP, comment=""), rec("gpu-1", *UP, comment="someone's")])
    assert result.power is not None
    assert result.power.stamp == ["gpu-0"]
    assert result.power.foreign == ["gpu-1"]
    assert [m.name for m in result.create] == ["gpu-0"]


def test_ceiling_lowered_removes_idle_records_and_drains_busy_members() -> None:
    spec = power(1)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec), pod("gpu-2", spec)]
    nodes = [
        rec("gpu-0", "IDLE", "CLOUD"),
        rec("gpu-1", "ALLOCATED", "CLOUD"),  # runs a job: drained first
        rec("gpu-2", *DOWN),  # powered down with its pod still there: the pod goes at once
        rec("gpu-3", *DOWN),  # no pod: the record goes
        rec("gpu-4", *UP),  # Slurm powers it up for a job: forced down, the job requeued
        rec("gpu-5", *DOWN, comment="someone's"),  # not ours: kept
    ]
    result = run(spec, pods, nodes)
    assert result.power is not None
    assert result.mark_removal == {"gpu-1": SCALE_IN}
    assert result.power.power_down_pods == ["gpu-2"]
    assert result.power.undeclare == ["gpu-3"]
    assert result.power.force_down == {"gpu-4": CEILING_LOWERED}
    assert result.create == []


def test_ceiling_lowered_waits_on_stale_data() -> None:
    result = run(power(0), [], [rec("gpu-0", *DOWN)], fresh=False)
    assert result.power is not None and result.power.undeclare == [] and result.power.stale


def test_a_drained_member_above_the_ceiling_goes_the_scale_in_way() -> None:
    spec = power(0)
    marked = pod("gpu-0", spec, removal=SCALE_IN)
    nodes = [rec("gpu-0", "IDLE", "DRAIN", "CLOUD", reason=REASON, comment=removal_stamp(NS))]
    result = run(spec, [marked], nodes)
    assert result.delete_pods == ["gpu-0"]
    gone = run(spec, [], nodes)  # its pod gone: the record is removed as scale-in does
    assert gone.delete_slurm_nodes == ["gpu-0"]
    assert gone.power is not None and gone.power.undeclare == []


def test_a_declared_record_being_removed_is_stamped_as_ours() -> None:
    spec = power(0)
    result = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", "ALLOCATED", "CLOUD")])
    assert result.mark_removal == {"gpu-0": SCALE_IN}
    assert result.stamp == ["gpu-0"] and result.unstampable == []


def test_ceiling_raised_again_cancels_a_scale_in() -> None:
    spec = power(2)
    marked = pod("gpu-1", spec, removal=SCALE_IN)
    result = run(
        spec,
        [pod("gpu-0", spec), marked],
        [rec("gpu-0", "IDLE", "CLOUD"), rec("gpu-1", "ALLOCATED", "CLOUD")],
    )
    assert result.unmark == ["gpu-1"]


def test_steady_state_is_idle() -> None:
    spec = power(2, floor=1)
    result = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", "IDLE", "CLOUD"), rec("gpu-1", *DOWN)])
    assert result.idle
    assert result.power is not None and result.power.counts == {
        "declared": 2, "poweredDown": 1, "poweringUp": 0, "poweredUp": 1, "poweringDown": 0, "heldByAdmin": 0,
    }  # fmt: skip


def test_a_member_we_powered_down_is_reported_and_resumed_once_powered_down_without_pod() -> None:
    spec = power(4)
    ours = "k8s: pod hpc/gpu-0 Unschedulable for 300s"
    nodes = [
        rec("gpu-0", "DOWN", "CLOUD", "POWERED_DOWN", reason=ours),
        rec("gpu-1", "DOWN", "CLOUD", "POWERING_DOWN", reason=ours),  # still powering down: not yet
        rec("gpu-2", "DOWN", "CLOUD", "POWERED_DOWN", reason="ResumeTimeout"),  # Slurm's own: left alone
        rec("gpu-3", "IDLE", "CLOUD", "NOT_RESPONDING", "POWER_DOWN", reason=ours),  # as the force leaves it
    ]
    result = run(spec, [], nodes)
    assert result.power is not None
    assert result.power.resume == ["gpu-0"]
    assert result.power.failed == {"gpu-0": ours, "gpu-1": ours, "gpu-3": ours}
    assert result.create == [] and not result.idle
    assert run(spec, [], nodes, fresh=False).power.resume == []  # type: ignore[union-attr]


def decide(spec: NodeSetSpec, pods: list[Any], nodes: list[Any], *, fresh: bool = True) -> PowerDecision:
    assert spec.power is not None
    return decide_power(
        "gpu", spec.power, pods, {n.name: n for n in nodes}, removal_stamp=removal_stamp(NS),
        ordinal=lambda name: int(name.rsplit("-", 1)[1]), slurm_fresh=fresh, owner_prefix="k8s: ",
    )  # fmt: skip


def test_members_carry_their_ordinals_and_a_pod_without_a_record_is_kept() -> None:
    spec = power(3)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec)]
    nodes = [rec("gpu-1", "IDLE", "CLOUD", comment="someone's"), rec("gpu-2", *UP)]
    out = decide(spec, pods, nodes)
    assert out.members == {"gpu-0": 0, "gpu-1": 1, "gpu-2": 2}  # no record: its slurmd may bring it back
    assert out.create == ["gpu-2"] and out.declare == [] and out.foreign == ["gpu-1"]
    result = run(spec, [], nodes)
    assert [(m.name, m.ordinal) for m in result.create] == [("gpu-2", 2)]


def test_a_foreign_record_does_not_stop_the_others() -> None:
    out = decide(power(2), [], [rec("gpu-0", *DOWN, comment="someone's")])
    assert out.foreign == ["gpu-0"] and out.declare == ["gpu-1"] and out.members == {}


def test_nothing_stamped_on_stale_data() -> None:
    assert decide(power(1), [], [rec("gpu-0", *DOWN, comment="")], fresh=False).stamp == []


def test_a_pod_above_the_ceiling_without_a_record_goes_the_scale_in_way() -> None:
    spec = power(1)
    out = decide(spec, [pod("gpu-1", spec)], [])
    assert out.scale_in == ["gpu-1"] and out.power_down_pods == []


def test_ceiling_zero_removes_member_zero_and_the_loop_goes_on() -> None:
    assert decide(power(0), [], [rec("gpu-0", *DOWN)]).undeclare == ["gpu-0"]
    out = decide(power(1), [], [rec("gpu-0", *DOWN), rec("gpu-3", *DOWN)])
    assert out.undeclare == ["gpu-3"]


def test_failed_means_our_reason_while_down_or_powering_down() -> None:
    ours = "k8s: pod hpc/gpu-0 CrashLoopBackOff"
    nodes = [
        rec("gpu-0", "DOWN", "CLOUD", reason=ours),
        rec("gpu-1", "IDLE", "CLOUD", "POWERING_DOWN", reason=ours),
        rec("gpu-2", "IDLE", "CLOUD", "POWERED_DOWN", reason=ours),
        rec("gpu-3", "IDLE", "CLOUD", reason=ours),  # powered up again, the reason lingering: not failed
    ]
    assert sorted(decide(power(4), [], nodes).failed) == ["gpu-0", "gpu-1", "gpu-2"]


CONF_DOWN = ("IDLE", "CLOUD", "POWERED_DOWN")  # a member named in slurm.conf (24.11): no DYNAMIC_NORM


def test_a_slurm_conf_member_is_never_stamped_nor_deleted_above_the_ceiling() -> None:
    """Slurm refuses `DELETE /node/` on a slurm.conf node (500, error 2028): such a member is left, and
    reported, once the ceiling is lowered below it; one stamped by an older syncer as well."""
    nodes = [
        rec("gpu-0", *CONF_DOWN, comment=""),
        rec("gpu-1", *CONF_DOWN, comment=""),
        rec("gpu-2", *CONF_DOWN),  # stamped ours before this fix
        rec("gpu-3", *DOWN),  # declared over REST: deleted as before
    ]
    out = decide(power(1), [], nodes)
    assert out.stamp == []
    assert out.undeclare == ["gpu-3"]
    assert out.conf_above == ["gpu-1", "gpu-2"]
