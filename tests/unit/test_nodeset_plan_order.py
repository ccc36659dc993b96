"""The NodeSet plan's choices that mutation testing found unchecked: which members a scale-in takes
first, which outdated members a rolling update replaces first, a percentage maxUnavailable, and member
names as DNS labels. (Ownership of Slurm records by reason is tested with issue 16's changes.)"""

from __future__ import annotations

from syncer.controllers.nodeset.plan import SCALE_IN, UPDATE, member_name, ordinal
from syncer.model.kube import KubeNode
from tests.unit.test_nodeset_plan import make_spec, pod, run, slurm


def test_scale_in_takes_unregistered_and_not_ready_first_then_idle_then_busy() -> None:
    spec = make_spec(3)
    pods = [
        pod("gpu-0", spec),  # idle
        pod("gpu-1", spec),  # busy
        pod("gpu-2", spec),  # never registered in Slurm
        pod("gpu-3", spec, ready=False),  # registered but not ready
        pod("gpu-4", spec),  # busy
        pod("gpu-5", spec),  # idle
    ]
    nodes = {
        "gpu-0": slurm("gpu-0"),
        "gpu-1": slurm("gpu-1", "ALLOCATED"),
        "gpu-3": slurm("gpu-3"),
        "gpu-4": slurm("gpu-4", "MIXED"),
        "gpu-5": slurm("gpu-5"),
    }
    # three go: the two that serve nothing (gpu-3 before gpu-2: highest ordinal first), then the idle
    # member with the highest ordinal; both busy members and the other idle one stay
    assert list(run(spec, pods, nodes).mark_removal) == ["gpu-3", "gpu-2", "gpu-5"]
    # one more replica kept: the idle member is spared
    assert list(run(make_spec(4), pods, nodes).mark_removal) == ["gpu-3", "gpu-2"]
    # down to one: busy members go last, the highest ordinal first
    assert list(run(make_spec(1), pods, nodes).mark_removal) == ["gpu-3", "gpu-2", "gpu-5", "gpu-0", "gpu-4"]


def test_scale_in_takes_members_being_updated_last_among_equals() -> None:
    spec = make_spec(2)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec), pod("gpu-2", spec), pod("gpu-3", spec, removal=UPDATE)]
    nodes = {f"gpu-{i}": slurm(f"gpu-{i}") for i in range(4)}
    # gpu-3 is already on its way out for an update and will come back: the others go first
    assert list(run(spec, pods, nodes).mark_removal) == ["gpu-2", "gpu-1"]


def test_scale_in_ties_break_on_the_name() -> None:
    spec = make_spec(1)
    pods = [pod("gpu-x", spec), pod("gpu-a", spec), pod("gpu-0", spec)]  # no ordinal: -1 for both names
    nodes = {name: slurm(name) for name in ("gpu-x", "gpu-a", "gpu-0")}
    assert list(run(spec, pods, nodes).mark_removal) == ["gpu-0", "gpu-a"]


def test_rolling_update_replaces_idle_members_first() -> None:
    old = make_spec(6, image="slurmd:1")
    new = make_spec(6, image="slurmd:2", updateStrategy={"rollingUpdate": {"maxUnavailable": 2}})
    pods = [pod(f"gpu-{i}", old) for i in range(6)]
    # the highest ordinals are busy: idle ones go first, the highest of them first
    nodes = {f"gpu-{i}": slurm(f"gpu-{i}", "ALLOCATED" if i >= 4 else "IDLE") for i in range(6)}
    assert list(run(new, pods, nodes).mark_removal) == ["gpu-3", "gpu-2"]
    # all busy: the highest ordinals
    busy = {f"gpu-{i}": slurm(f"gpu-{i}", "ALLOCATED") for i in range(6)}
    assert list(run(new, pods, busy).mark_removal) == ["gpu-5", "gpu-4"]
    assert all(why == UPDATE for why in run(new, pods, nodes).mark_removal.values())


def test_percentage_max_unavailable() -> None:
    old = make_spec(6, image="slurmd:1")
    pods = [pod(f"gpu-{i}", old) for i in range(6)]
    nodes = {f"gpu-{i}": slurm(f"gpu-{i}") for i in range(6)}

    def marked(percent: str) -> int:
        new = make_spec(6, image="slurmd:2", updateStrategy={"rollingUpdate": {"maxUnavailable": percent}})
        return len(run(new, pods, nodes).mark_removal)

    assert marked("50%") == 3  # half of 6
    assert marked("34%") == 2  # 2.04 rounds down
    assert marked("10%") == 1  # 0.6 rounds down to 0, but at least one at a time
    assert marked("100%") == 6
    # members already unavailable count against the budget
    new = make_spec(6, image="slurmd:2", updateStrategy={"rollingUpdate": {"maxUnavailable": "50%"}})
    down = [pod("gpu-0", old, ready=False), *pods[1:]]
    assert len(run(new, down, nodes).mark_removal) == 2


def test_member_names_are_dns_labels() -> None:
    long_host = "node-" + "a" * 80 + ".cluster.example.com"
    name = member_name("gpu", long_host)
    assert len(name) == 63 and name == ("gpu-node-" + "a" * 80)[:63]
    # a cut that would end on a dash (a dot turned dash) drops it: a DNS label ends alphanumeric
    host = "x" * 58 + ".b.example"  # "gpu-" + 58 x's = 62 characters, the 63rd is the dot
    assert member_name("gpu", host) == "gpu-" + "x" * 58
    assert member_name("gpu", "n1.example.com") == "gpu-n1-example-com"
    spec = make_spec(mode="DaemonSet")
    result = run(spec, [], {}, kube_nodes=[KubeNode(name=long_host)])
    assert [m.name for m in result.create] == [name] and [m.node_name for m in result.create] == [long_host]


def test_ordinals_only_from_the_nodeset_prefix() -> None:
    assert ordinal("gpu", "gpu-12") == 12
    assert ordinal("gpu", "gpu-x") == -1 and ordinal("gpu", "cpu-3") == -1 and ordinal("gpu", "gpu-3-a") == -1
    assert ordinal("g.u", "gxu-3") == -1  # the prefix is literal, not a pattern


def test_scale_in_marks_are_scale_in() -> None:
    spec = make_spec(1)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec)]
    assert run(spec, pods, {"gpu-0": slurm("gpu-0"), "gpu-1": slurm("gpu-1")}).mark_removal == {
        "gpu-1": SCALE_IN
    }
