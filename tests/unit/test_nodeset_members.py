"""The Slurm node names of a NodeSet, as a SlurmPartition's `nodes.nodeSets` puts them in a partition: its
pods' and, when power-managed, every declared member of its own, powered down or not; sorted; each once."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from syncer.controllers.nodeset.members import slurm_names
from syncer.controllers.nodeset.plan import removal_stamp, slurm_name
from syncer.model.kube import KubeNodeSet, KubePod
from tests.unit.test_nodeset_plan import NS, pod
from tests.unit.test_nodeset_power_plan import CONF_DOWN, DOWN, TEMPLATE, UP, power, rec

PLAIN = {"replicas": 2, "template": TEMPLATE}
POWER = {"template": TEMPLATE, "power": {"maxReplicas": 4}}


def nodeset(spec: dict[str, Any], declaring: list[str] | None = None) -> KubeNodeSet:
    status = {"power": {"declaring": declaring}} if declaring is not None else {}
    return msgspec.structs.replace(NS, spec=spec, status=status)


def names(ns: KubeNodeSet, pods: list[KubePod], records: list[Any]) -> list[str]:
    return slurm_names(ns, pods, {r.name: r for r in records}, slurm_name)


def test_a_plain_nodeset_is_its_pods_nodes_sorted() -> None:
    spec = power(1)
    pods = [pod("gpu-1", spec), pod("gpu-0", spec)]
    assert names(nodeset(PLAIN), pods, []) == ["gpu-0", "gpu-1"]
    assert names(nodeset(PLAIN), [], []) == [], "no pods: empty, not None (the NodeSet exists)"


def test_a_power_nodeset_counts_every_declared_member_powered_down_or_not() -> None:
    """gpu-0 powered down, gpu-1 powering up, gpu-2 running with its pod; gpu-3 not declared yet (Slurm
    would refuse a partition naming it)."""
    spec = power(4)
    records = [rec("gpu-0", *DOWN), rec("gpu-1", *UP), rec("gpu-2", "ALLOCATED", "CLOUD", "DYNAMIC_NORM")]
    assert names(nodeset(POWER), [pod("gpu-2", spec)], records) == ["gpu-0", "gpu-1", "gpu-2"]


def test_records_not_its_own_are_left_out() -> None:
    records = [
        rec("gpu-0", *DOWN),
        rec("gpu-1", "IDLE", "DYNAMIC_NORM", comment=""),  # a slurmd -Z registration of someone else's
        rec("gpu-2", *DOWN, comment="someone's"),
        rec("gpu-3", *DOWN, comment=""),  # declared, its comment not written yet: recorded as declaring
        rec("gpu-9", *DOWN),  # above the ceiling, no pod: being removed
    ]
    assert names(nodeset(POWER, declaring=["gpu-3"]), [], records) == ["gpu-0", "gpu-3"]
    being_removed = rec("gpu-1", "IDLE", "DRAIN", "CLOUD", "DYNAMIC_NORM", comment=removal_stamp(NS))
    assert names(nodeset(POWER), [], [being_removed]) == ["gpu-1"], "the removal stamp is ours too"
    assert names(nodeset(POWER), [], [rec("gpu-0", *CONF_DOWN, comment="")]) == ["gpu-0"]  # slurm.conf


def test_two_slurmd_pods_on_one_node_are_both_counted() -> None:
    spec = power(1)
    pods = [msgspec.structs.replace(pod(f"gpu-{i}", spec), node_name="kw-1") for i in range(2)]
    assert names(nodeset(PLAIN), pods, []) == ["gpu-0", "gpu-1"]


def test_an_invalid_spec_still_counts_its_pods() -> None:
    spec = power(1)
    assert names(nodeset({"power": "yes", "template": TEMPLATE}), [pod("gpu-0", spec)], []) == ["gpu-0"]


@given(st.permutations(range(4)))
def test_the_same_nodeset_gives_the_same_list_whatever_the_order(order: list[int]) -> None:
    spec = power(4)
    pods = [pod(f"gpu-{i}", spec) for i in order]
    records = [rec(f"gpu-{i}", *DOWN) for i in reversed(order)]
    assert names(nodeset(POWER), pods, records) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
