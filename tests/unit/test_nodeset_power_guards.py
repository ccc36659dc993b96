"""Guards against wrong power actions (issue 39 review): never a pod for a member an admin took out (the
floor included), never a record of another NodeSet touched (a similar name, the same name in another
namespace), never a non-member CLOUD node powered down or deleted, and no create/delete churn while Slurm
data is stale or a member still finishes a job."""

from __future__ import annotations

from typing import Any

from syncer.controllers.nodeset.plan import Plan, plan, removal_stamp
from syncer.controllers.nodeset.power import declared_stamp
from syncer.model.kube import KubeNodeSet
from tests.unit.test_nodeset_plan import NOW, NS, pod
from tests.unit.test_nodeset_power_plan import DOWN, MINE, UP, power, rec, run

GPU_A = KubeNodeSet(namespace="hpc", name="gpu-a", uid="u2")  # "gpu-a-0" starts with "gpu-"
OTHER = KubeNodeSet(namespace="other", name="gpu", uid="u3")  # same member names, another namespace


def run_as(nodeset: KubeNodeSet, ceiling: int, pods: list[Any], nodes: list[Any], floor: int = 0) -> Plan:
    return plan(
        nodeset, power(ceiling, floor=floor), pods, {n.name: n for n in nodes},
        nodes=[], slurm_fresh=True, now=NOW, owner_prefix="k8s: ",
    )  # fmt: skip


def untouched(result: Plan) -> None:
    out = result.power
    assert out is not None
    assert result.create == [] and result.delete_pods == [] and result.delete_slurm_nodes == []
    assert out.undeclare == [] and out.force_down == {} and out.power_down_pods == [] and out.stamp == []


def test_an_admin_drain_on_a_floor_member_gets_no_pod() -> None:
    nodes = [rec("gpu-0", "IDLE", "DRAIN", "CLOUD", "POWERED_DOWN", reason="bad dimm")]
    result = run(power(1, floor=1), [], nodes)
    assert result.create == []
    assert result.power is not None and result.power.counts["heldByAdmin"] == 1


def test_an_admin_down_member_slurm_powers_up_gets_no_pod() -> None:
    nodes = [rec("gpu-0", "DOWN", "CLOUD", "POWERING_UP", reason="admin: rack 4 maintenance")]
    assert run(power(1), [], nodes).create == []


def test_records_of_a_nodeset_with_a_similar_name_are_never_touched() -> None:
    theirs = declared_stamp(removal_stamp(GPU_A))
    nodes = [
        rec("gpu-a-0", *UP, comment=theirs),  # powering up: must not be forced down as "above our ceiling"
        rec("gpu-a-1", *DOWN, comment=theirs),  # idle: must not be deleted
        rec("gpu-0", *DOWN),
    ]
    untouched(run(power(1), [], nodes))


def test_records_of_the_same_name_in_another_namespace_are_foreign() -> None:
    nodes = [rec("gpu-0", *UP), rec("gpu-1", *DOWN), rec("gpu-5", *DOWN)]  # all declared by hpc/gpu
    result = run_as(OTHER, 2, [], nodes)
    untouched(result)
    assert result.power is not None and result.power.foreign == ["gpu-0", "gpu-1"]
    assert result.power.declare == [] and result.power.counts["declared"] == 0


def test_a_non_member_cloud_node_is_never_powered_down_nor_deleted() -> None:
    nodes = [
        rec("gpu-7", *DOWN, comment=""),  # an admin's CLOUD node above the ceiling, no mark of ours
        rec("gpu-8", *UP, comment=""),
        rec("gpux-0", *UP, comment=MINE),  # not a member name at all
        rec("gpu-0", *DOWN),
    ]
    untouched(run(power(1), [], nodes))


def test_a_busy_member_slurm_shows_powering_down_keeps_its_pod() -> None:
    spec = power(1)
    busy = rec("gpu-0", "ALLOCATED", "CLOUD", "POWERING_DOWN")
    result = run(spec, [pod("gpu-0", spec)], [busy])
    assert result.power is not None and result.power.power_down_pods == [] and result.delete_pods == []


def test_no_churn_while_the_cache_lags_behind_slurmctld() -> None:
    """A pod created for a power-up is not deleted on a stale read that still shows the member
    powered down, nor is a second pod made on a stale read that still shows it powering up."""
    spec = power(1)
    created = run(spec, [], [rec("gpu-0", *UP)])
    assert [m.name for m in created.create] == ["gpu-0"]
    stale = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", *DOWN)], fresh=False)
    assert stale.power is not None and stale.power.power_down_pods == [] and stale.delete_pods == []
    again = run(spec, [pod("gpu-0", spec)], [rec("gpu-0", *UP)], fresh=False)
    assert again.create == []
    assert NS.uid != OTHER.uid != GPU_A.uid
