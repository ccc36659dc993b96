"""The power-saving plan of a NodeSet (spec.power): declare the ceiling's members before any pod, a pod
exactly for each member Slurm powers up, none for one an admin took out, the pod of a member Slurm
powered down deleted, the floor always on, and a lowered ceiling removing members without a phantom or a
killed job. NodeSets without spec.power are untouched (tests/unit/test_nodeset_plan.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from syncer.controllers.nodeset.plan import SCALE_IN, STALE, Plan, declaring_of, plan, removal_stamp
from syncer.controllers.nodeset.power import (
    CEILING_LOWERED,
    DECLARES_PER_PASS,
    RECORD_WRITES_PER_PASS,
    PowerDecision,
    decide_power,
    declare_failed_message,
    declared_stamp,
    name_collision_message,
    slurmd_silent,
    starts_powering_up,
)
from syncer.controllers.nodeset.spec import NodeSetSpec, parse
from tests.unit.test_nodeset_plan import NOW, NS, REASON, ended, pod, slurm

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


def run(
    spec: NodeSetSpec,
    pods: list[Any],
    nodes: list[Any],
    *,
    fresh: bool = True,
    declaring: list[str] | None = None,
) -> Plan:
    """The plan; `declaring`: the members the NodeSet's status says it was declaring (`power.declaring`)."""
    nodeset = (
        NS if declaring is None else msgspec.structs.replace(NS, status={"power": {"declaring": declaring}})
    )
    return plan(nodeset, spec, pods, {n.name: n for n in nodes}, nodes=[], slurm_fresh=fresh, now=NOW)


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
        rec("gpu-2", "IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_UP"),  # an admin's POWER_UP, carried out
        rec("gpu-3", *DOWN),
    ]
    result = run(spec, [], nodes)
    assert [m.name for m in result.create] == ["gpu-1", "gpu-2"]
    # the PoweringUp Event follows this view, not a cache that may have moved on during the create
    assert result.power is not None and result.power.powered_up == {"gpu-1", "gpu-2"}
    # created already (the cache saw it): nothing more
    again = run(spec, [pod("gpu-1", spec), pod("gpu-2", spec)], nodes)
    assert again.create == []


def test_a_power_up_request_gets_its_pod_only_once_slurm_carries_it_out() -> None:
    """`scontrol update state=POWER_UP` sets POWER_UP on the powered-down record; Slurm's power-save pass
    (up to 10 s later) makes it POWERING_UP and stamps the power-up. A slurmd started before that stamp
    is ignored until ResumeTimeout (its boot is older), or registers first and leaves POWER_UP for good."""
    spec = power(2)
    asked = [rec("gpu-0", *DOWN, "POWER_UP"), rec("gpu-1", *DOWN)]
    result = run(spec, [], asked)
    assert result.create == []
    assert result.power is not None and result.power.counts["poweringUp"] == 0
    carried_out = [rec("gpu-0", "IDLE", "CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING", "POWERING_UP"), asked[1]]
    assert [m.name for m in run(spec, [], carried_out).create] == ["gpu-0"]
    # a request on a member whose pod is still there (Slurm powered it down meanwhile) keeps the pod
    kept = run(spec, [pod("gpu-0", spec)], asked).power
    assert kept is not None and kept.power_down_pods == [] and kept.members == {"gpu-0": 0}


def test_a_power_up_flag_left_on_a_registered_member_is_up() -> None:
    """A slurmd that registered before Slurm's pass took the request leaves POWER_UP set on a node that is
    up (Slurm clears it only on a powered-down one): not powering up, so never forced down as one above a
    lowered ceiling (its job would be requeued) and counted as powered up."""
    spec = power(1)
    nodes = [rec("gpu-0", "IDLE", "CLOUD", "POWER_UP"), rec("gpu-1", "ALLOCATED", "CLOUD", "POWER_UP")]
    result = run(spec, [pod("gpu-0", spec), pod("gpu-1", spec)], nodes)
    assert result.power is not None
    assert result.power.force_down == {}
    assert result.mark_removal == {"gpu-1": SCALE_IN}  # busy above the ceiling: drained first, as any
    assert result.power.counts["poweredUp"] == 1 and result.power.counts["poweringUp"] == 0


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
    """gpu-0 was recorded as being declared (the syncer stopped between the create and its comment): ours,
    stamped now. gpu-1 carries someone's comment: left alone."""
    spec = power(2)
    nodes = [rec("gpu-0", *UP, comment=""), rec("gpu-1", *UP, comment="someone's")]
    result = run(spec, [], nodes, declaring=["gpu-0"])
    assert result.power is not None
    assert result.power.stamp == ["gpu-0"]
    assert result.power.foreign == ["gpu-1"]
    assert [m.name for m in result.create] == ["gpu-0"]


SLURMD_Z = ("IDLE", "DYNAMIC_NORM")  # `slurmd -Z` registered it: DYNAMIC_NORM, no CLOUD, no comment


def test_a_slurmd_z_record_under_a_member_name_is_someone_elses() -> None:
    """A Slinky NodeSet's pod (or a NodeSet of ours in another namespace) registered gpu-1 with `slurmd -Z`:
    DYNAMIC_NORM with an empty comment, as our declared record is before its comment. Not recorded as being
    declared and no pod of ours: never stamped, never given a pod, never deleted (lowering the ceiling)."""
    spec = power(2)
    result = run(spec, [], [rec("gpu-0", *DOWN), rec("gpu-1", *SLURMD_Z, comment="")], declaring=["gpu-0"])
    assert result.power is not None and result.power.foreign == ["gpu-1"] and result.power.stamp == []
    assert result.power.counts["declared"] == 1
    lowered = run(power(1), [], [rec("gpu-0", *DOWN), rec("gpu-1", *SLURMD_Z, comment="")])
    assert lowered.power is not None and lowered.power.undeclare == [] and lowered.power.force_down == {}
    assert lowered.power.conf_above == [] and lowered.delete_slurm_nodes == []
    busy = run(spec, [], [rec("gpu-0", *DOWN), rec("gpu-1", "ALLOCATED", "DYNAMIC_NORM", comment="")])
    assert busy.power is not None and busy.create == [] and busy.power.foreign == ["gpu-1"]


def test_a_record_our_own_pod_registered_is_ours() -> None:
    """Our pod runs and its slurmd registered the member again (`-Z`) after its record went: ours."""
    spec = power(1)
    result = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", "IDLE", "DYNAMIC_NORM", comment="")])
    assert result.power is not None and result.power.foreign == [] and result.power.stamp == ["gpu-0"]


def test_a_slurm_conf_member_without_a_comment_is_ours() -> None:
    result = run(power(1), [], [rec("gpu-0", *CONF_DOWN, comment="")])
    assert result.power is not None and result.power.foreign == [] and result.power.stamp == []
    assert result.power.counts["declared"] == 1


def test_declaring_is_read_from_the_status_and_junk_there_is_ignored() -> None:
    def declaring(status: dict[str, Any]) -> frozenset[str]:
        return declaring_of(msgspec.structs.replace(NS, status=status))

    assert declaring({"power": {"declaring": ["gpu-0", 3, "gpu-2"]}}) == {"gpu-0", "gpu-2"}
    assert declaring({}) == declaring({"power": "x"}) == declaring({"power": {"declaring": "gpu-0"}}) == set()


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


def test_a_record_left_with_our_removal_stamp_above_the_ceiling_is_deleted() -> None:
    """A busy member above a lowered ceiling is stamped for removal and drained; its job ends and Slurm
    powers it down before the scale-in deletes its pod; the power way deletes the pod and the sync engine
    undrains the node. The record keeps the removal stamp without our drain: the scale-in way (which needs
    the drain) no longer deletes it, so the ceiling does (26.05 side-by-side e2e, 4 of 25 runs at load
    16-20). Busy, stale or someone else's records stay; one Slurm powers up for a job is forced down."""
    stamp = removal_stamp(NS)
    left = rec("gpu-2", *DOWN, comment=stamp)
    assert decide(power(1), [], [left]).undeclare == ["gpu-2"]
    assert decide(power(1), [], [left], fresh=False).undeclare == []
    assert (
        decide(power(1), [], [rec("gpu-2", "MIXED", "CLOUD", "DYNAMIC_NORM", comment=stamp)]).undeclare == []
    )
    assert decide(power(1), [], [rec("gpu-2", *DOWN, comment="someone's")]).undeclare == []
    assert decide(power(3), [], [left]).undeclare == []  # below the ceiling: a member still
    assert decide(power(1), [], [rec("gpu-2", *UP, comment=stamp)]).force_down == {"gpu-2": CEILING_LOWERED}


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


def test_a_pass_declares_at_most_its_bound_and_looks_again_at_once() -> None:
    """A ceiling of 100,000 was 200,000 serial Slurm writes in one pass: now at most 50 declares (a create
    and a comment each) a pass, the rest on the next, which is queued at once (`more`)."""
    first = run(power(120), [], [])
    assert first.power is not None and first.power.declare == [f"gpu-{i}" for i in range(DECLARES_PER_PASS)]
    assert first.power.more and not first.idle
    done = [rec(f"gpu-{i}", *DOWN) for i in range(DECLARES_PER_PASS)]
    second = run(power(120), [], done)
    assert second.power is not None and second.power.declare[0] == f"gpu-{DECLARES_PER_PASS}"
    last = run(power(DECLARES_PER_PASS), [], [])
    assert last.power is not None and len(last.power.declare) == DECLARES_PER_PASS and not last.power.more


def test_a_plan_left_with_only_declares_is_idle_but_for_them() -> None:
    """What a REST version that cannot create nodes leaves a NodeSet to do (the controller waits for another
    version then, not for its requeue); a pod to create is more."""
    only = run(power(DECLARES_PER_PASS + 1), [], [])
    assert only.power is not None and only.power.declare and only.power.more
    assert not only.idle and only.idle_but_declares
    floor = run(power(2, floor=1), [], [rec("gpu-0", *DOWN)])
    assert floor.create and floor.power is not None and floor.power.declare == ["gpu-1"]
    assert not floor.idle_but_declares


def test_stamps_and_deletes_are_bounded_per_pass_too() -> None:
    count = RECORD_WRITES_PER_PASS + 1
    unstamped = [rec(f"gpu-{i}", *DOWN, comment="") for i in range(count)]
    result = run(power(count), [], unstamped, declaring=[r.name for r in unstamped])
    assert result.power is not None and len(result.power.stamp) == RECORD_WRITES_PER_PASS
    assert result.power.more
    above = run(power(0), [], [rec(f"gpu-{i}", *DOWN) for i in range(count)])
    assert above.power is not None and len(above.power.undeclare) == RECORD_WRITES_PER_PASS
    assert above.power.more
    exact = run(power(0), [], [rec(f"gpu-{i}", *DOWN) for i in range(RECORD_WRITES_PER_PASS)])
    assert exact.power is not None and not exact.power.more


def test_members_declared_a_moment_ago_are_not_declared_again_and_the_bound_takes_the_next() -> None:
    spec = power(DECLARES_PER_PASS + 10)
    sent = frozenset(f"gpu-{i}" for i in range(DECLARES_PER_PASS))
    result = plan(NS, spec, [], {}, nodes=[], slurm_fresh=True, now=NOW, in_flight=sent)
    assert result.power is not None and not result.power.more
    assert result.power.declare == [f"gpu-{i}" for i in range(DECLARES_PER_PASS, DECLARES_PER_PASS + 10)]
    all_sent = plan(
        NS, power(2), [], {}, nodes=[], slurm_fresh=True, now=NOW, in_flight=frozenset({"gpu-0", "gpu-1"})
    )
    assert all_sent.power is not None and all_sent.power.declare == [] and all_sent.idle


def test_power_down_on_stale_data_blocks_the_plan_with_the_reason() -> None:
    spec = power(1)
    result = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", *DOWN)], fresh=False)
    assert result.blocked == STALE


def test_a_record_being_removed_by_the_nodeset_is_its_own() -> None:
    spec = power(1)
    being_removed = rec("gpu-0", "IDLE", "DRAIN", "CLOUD", "DYNAMIC_NORM", comment=removal_stamp(NS))
    result = run(spec, [pod("gpu-0", spec)], [being_removed])
    assert result.power is not None and result.power.foreign == [] and result.power.counts["declared"] == 1


def test_exactly_the_bound_of_stamps_leaves_nothing_for_the_next_pass() -> None:
    unstamped = [rec(f"gpu-{i}", *DOWN, comment="") for i in range(RECORD_WRITES_PER_PASS)]
    result = run(power(RECORD_WRITES_PER_PASS), [], unstamped, declaring=[r.name for r in unstamped])
    assert result.power is not None and len(result.power.stamp) == RECORD_WRITES_PER_PASS
    assert not result.power.more


def test_slurmd_silent_is_slurms_not_responding() -> None:
    assert slurmd_silent(rec("gpu-0", *UP)), "powering up: never registered"
    assert slurmd_silent(rec("gpu-0", "ALLOCATED", "CLOUD", "NOT_RESPONDING"))
    assert not slurmd_silent(rec("gpu-0", "ALLOCATED", "CLOUD"))


def test_the_declare_failed_message_in_full() -> None:
    assert declare_failed_message({"gpu-10": "Failure to create node (error 2169)", "gpu-2": "other"}) == (
        "Slurm refused to declare gpu-2, gpu-10: other; members it powers up still get their pods "
        "(MaxNodeCount in slurm.conf bounds how many nodes Slurm holds)"
    )
    eleven = declare_failed_message({f"gpu-{i}": "x" for i in range(11)})
    assert eleven.startswith(
        "Slurm refused to declare gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7, "
    )
    assert "gpu-9 and 1 more: x;" in eleven
    assert " and " not in declare_failed_message({f"gpu-{i}": "x" for i in range(10)})


def test_the_name_collision_message_in_full() -> None:
    assert name_collision_message(["gpu-1"]) == (
        "Slurm nodes gpu-1 exist under this NodeSet's member names and are not its own (a slurmd -Z "
        "registration, another NodeSet's or someone's record): they are left alone, never stamped, given a "
        "pod or deleted; rename this NodeSet, or remove them (scontrol delete nodename=...) if they are stale"
    )
    many = name_collision_message([f"gpu-{i}" for i in range(12)])
    assert many.startswith(
        "Slurm nodes gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7, gpu-8, gpu-9 and 2 more exist"
    )
    assert " and " not in name_collision_message([f"gpu-{i}" for i in range(10)]).split(" exist")[0]
    assert "gpu-9 and 1 more exist" in name_collision_message([f"gpu-{i}" for i in range(11)])


def test_a_member_starting_to_power_up_names_its_nodeset_and_nothing_else_does() -> None:
    """The trigger that queues a NodeSet ahead of the others: a record under `<nodeset>-<ordinal>` that is
    POWERING_UP now and was not before (or is new). Which NodeSet owns it, and whether a pod follows, is
    still the plan's decision (above)."""
    down, starting = rec("gpu-3", *DOWN), rec("gpu-3", *UP)
    assert starts_powering_up("gpu-3", down, starting) == "gpu"
    assert starts_powering_up("gpu-3", None, starting) == "gpu", "a record first seen powering up"
    assert starts_powering_up("big-gpu-12", down, starting) == "big-gpu", "the last dash splits"
    assert starts_powering_up("gpu-3", starting, starting) is None, "powering up already: told before"
    assert starts_powering_up("gpu-3", starting, down) is None, "powered down: not a power-up"
    assert starts_powering_up("gpu-3", down, None) is None, "gone"
    assert starts_powering_up("gpu-3", None, down) is None, "declared, powered down"
    assert starts_powering_up("gpu-x", down, starting) is None, "no ordinal: no member of a NodeSet"
    assert starts_powering_up("-3", down, starting) is None, "no NodeSet name"
    assert starts_powering_up("gpu3", down, starting) is None, "no dash"


# review5: a member's pod deleted by someone other than the NodeSet (kubectl delete, an eviction by kubectl
# drain or a cluster autoscaler: the busy PDB covers only busy pods) while Slurm has the member up. The sync
# engine drains the node for the terminating pod, and once the pod is gone the node is unbound: nobody lifted
# that drain, and Slurm never powers a drained node up: the member was lost for good, PowerUpFailed naming it.
GONE = "k8s: pod hpc/gpu-0 terminating"


def test_a_member_up_in_slurm_whose_pod_was_deleted_gets_its_pod_again() -> None:
    spec = power(3)
    nodes = [
        rec("gpu-0", "IDLE", "CLOUD", "DYNAMIC_NORM", "DRAIN", reason=GONE),  # idle: evicted, drained by us
        rec("gpu-1", "IDLE", "CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING"),  # deleted before any drain
        rec("gpu-2", "IDLE", "CLOUD", "DYNAMIC_NORM", "POWER_UP"),  # a POWER_UP left on a registered member
    ]
    result = run(spec, [], nodes)
    assert [m.name for m in result.create] == ["gpu-0", "gpu-1", "gpu-2"]
    assert result.power is not None and result.power.powered_up == set()  # not a power-up: no PoweringUp
    assert result.power.members == {"gpu-0": 0, "gpu-1": 1, "gpu-2": 2}
    assert result.power.failed == {}, "our drain is not a failed power-up"
    # on stale data Slurm may have powered it down meanwhile: nothing then
    assert run(spec, [], nodes, fresh=False).create == []
    # what Slurm powers, asks to power or has powered down, or took DOWN, gets none
    for flags in (("IDLE", "POWER_DOWN"), ("IDLE", "POWERING_DOWN"), ("IDLE", "POWERED_DOWN"), ("DOWN",)):
        down = rec("gpu-0", "CLOUD", "DYNAMIC_NORM", *flags, reason=GONE)
        assert run(power(1), [], [down]).create == [], flags
    # a terminating pod holds its name until it is gone
    assert run(power(1), [pod("gpu-0", spec, terminating=True)], nodes[:1]).create == []


def test_a_powered_down_member_left_drained_by_us_without_a_pod_is_undrained() -> None:
    """The syncer was away while the pod went, or Slurm powered the drained member down first: lift our drain
    so Slurm may power it up again. An admin's drain, a busy member, a record being removed (its own way),
    one with a pod (the sync engine's), and stale data: nothing."""
    spec = power(2)
    drained = ("IDLE", "CLOUD", "DYNAMIC_NORM", "DRAIN", "POWERED_DOWN")
    out = decide(spec, [], [rec("gpu-0", *drained, reason=GONE), rec("gpu-1", *drained, reason="bad dimm")])
    assert out.undrain == ["gpu-0"] and out.create == [] and out.failed == {}
    result = run(spec, [], [rec("gpu-0", *drained, reason=GONE)])
    assert result.power is not None and result.power.undrain == ["gpu-0"] and not result.idle
    assert not result.idle_but_declares
    assert decide(spec, [], [rec("gpu-0", *drained, reason=GONE)], fresh=False).undrain == []
    assert decide(spec, [pod("gpu-0", spec)], [rec("gpu-0", *drained, reason=GONE)]).undrain == []
    busy = rec("gpu-0", "MIXED", "CLOUD", "DYNAMIC_NORM", "DRAIN", "POWERING_DOWN", reason=GONE)
    assert decide(spec, [], [busy]).undrain == []
    removed = rec("gpu-0", *drained, reason=GONE, comment=removal_stamp(NS))
    assert decide(spec, [], [removed]).undrain == []
    conf = rec("gpu-0", "IDLE", "CLOUD", "DRAIN", "POWERED_DOWN", reason=GONE, comment="")  # slurm.conf
    assert decide(spec, [], [conf]).undrain == ["gpu-0"]


def test_a_member_slurm_powers_up_again_under_a_pod_that_registered_it_gets_a_new_pod() -> None:
    """review5: the syncer away longer than SuspendTime + SuspendTimeout: Slurm powered the idle member down
    with its pod still running, then up again for a job. That pod's slurmd registered the member before
    (Slurm's boot time of it, `slurmd -b`'s start, is not older than the pod): Slurm waits for a boot after
    its request, which it never makes, and the job waited for ResumeTimeout (NODE_FAIL without requeue).
    The pod is replaced. A pod made for this power-up (the boot time an older slurmd's, or none) is left."""
    spec = power(2)
    stale = msgspec.structs.replace(pod("gpu-0", spec), created=NOW - 100)
    again = msgspec.structs.replace(rec("gpu-0", *UP), boot_time=int(NOW - 100))
    out = decide(spec, [stale], [again])
    assert out.replace == ["gpu-0"] and out.members == {"gpu-0": 0} and out.create == []
    assert out.power_down_pods == [] and out.failed == {}
    result = run(spec, [stale], [again])
    assert result.power is not None and result.power.replace == ["gpu-0"] and not result.idle
    assert not result.idle_but_declares and result.delete_pods == [] and result.mark_removal == {}
    assert decide(spec, [stale], [again], fresh=False).replace == []
    fresh = msgspec.structs.replace(pod("gpu-0", spec), created=NOW - 99)  # after the last registration
    assert decide(spec, [fresh], [again]).replace == []
    never = msgspec.structs.replace(rec("gpu-0", *UP), boot_time=0)  # never registered: no boot time
    assert decide(spec, [stale], [never]).replace == []
    unknown = pod("gpu-0", spec)  # no creation time known: left alone
    assert decide(spec, [unknown], [msgspec.structs.replace(again, boot_time=1)]).replace == []
    going = msgspec.structs.replace(stale, deletion_timestamp=NOW)  # on its way out already
    assert decide(spec, [going], [again]).replace == []
    registered = msgspec.structs.replace(again, state=frozenset({"IDLE", "CLOUD", "DYNAMIC_NORM"}))
    assert decide(spec, [stale], [registered]).replace == []  # up: its slurmd answered this power-up


def test_a_powered_down_member_whose_pod_goes_its_own_way_is_left_to_it() -> None:
    """A pod already terminating, or being removed (scale-in, rolling update), is not deleted again for a
    power-down, nor does it wait for fresh data; the plan says whether it was made on fresh data."""
    spec = power(2)
    going = pod("gpu-0", spec, terminating=True)
    removing = pod("gpu-1", spec, removal="update")
    nodes = [rec("gpu-0", *DOWN), rec("gpu-1", *DOWN)]
    for fresh in (True, False):
        out = decide(spec, [going, removing], nodes, fresh=fresh)
        assert out.power_down_pods == [] and not out.stale and out.fresh is fresh


def test_a_pod_that_ended_is_deleted_and_a_member_slurm_has_up_gets_a_new_one() -> None:
    """review5 #3 for power members: an ended pod (evicted, or slurmd exited) stayed until Slurm powered the
    member down, then DOWN for good. It is deleted (by the plan's rule for ended pods) and the member judged
    as one without a pod: up in Slurm, or the floor, it keeps its name (a new pod once the old is gone);
    powered down, or DOWN with Slurm's reason, it is not kept, nor deleted the power-down way. The
    replacement rule (a pod that registered the member before) leaves it alone."""
    spec = power(4, floor=1)
    again = msgspec.structs.replace(rec("gpu-0", *UP), boot_time=int(NOW))
    nodes = [
        again,
        rec("gpu-1", "IDLE", "CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING"),
        rec("gpu-2", *DOWN),
        rec("gpu-3", "DOWN", "CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING", reason="Not responding"),
    ]
    gone = [msgspec.structs.replace(ended(f"gpu-{i}", spec), created=NOW - 100) for i in range(4)]
    result = run(spec, gone, nodes)
    assert result.power is not None
    assert result.power.members == {"gpu-0": 0, "gpu-1": 1}
    assert result.create == [] and result.power.replace == [] and result.power.power_down_pods == []
    assert result.delete_pods == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert result.ended == {"gpu-0": True, "gpu-1": True, "gpu-2": False, "gpu-3": False}
    # above a lowered ceiling: deleted as ended, not scaled in nor powered down (the next one is)
    pods = [pod("gpu-0", spec), ended("gpu-1", spec), pod("gpu-2", spec)]
    above = run(power(1), pods, [rec("gpu-0", "IDLE"), rec("gpu-1", *DOWN), rec("gpu-2", "IDLE")])
    assert above.power is not None and above.power.scale_in == ["gpu-2"] and above.power.power_down_pods == []
    assert above.mark_removal == {"gpu-2": SCALE_IN}
    assert above.delete_pods == ["gpu-1"] and above.ended == {"gpu-1": False}
