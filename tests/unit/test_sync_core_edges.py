"""Edges of the decision core mutation testing found unchecked: a Ready transition time that is not a
number, a lone surrogate in a text to cap, a cut reason ending in a letter X, and NodeSet plan details."""

from __future__ import annotations

import math

from syncer.controllers.nodeset.plan import member_name, plan, slurm_name
from syncer.controllers.sync.causes import drain_causes
from syncer.controllers.sync.options import SyncOptions
from syncer.model import Condition, KubeNode
from syncer.model.keys import Keys
from syncer.model.reason import cap_utf8, compose
from tests.unit.test_nodeset_plan import NS, make_spec, pod, run, slurm

NOW = 1_700_000_000.0


def test_a_ready_transition_time_that_is_not_a_number_counts_as_long_ago() -> None:
    for odd in (math.inf, math.nan):
        ready = Condition(type="Ready", status="False", reason="KubeletNotReady", last_transition_time=odd)
        node = KubeNode(name="k1", conditions=(ready,))
        drain = drain_causes(None, node, now=NOW, opts=SyncOptions())
        assert [c.kind for c in drain.causes] == ["not-ready"] and drain.recheck_at is None, (odd, drain)


def test_capping_a_text_with_a_lone_surrogate_never_raises() -> None:
    text = "\ud800" + "a" * 100
    capped = cap_utf8(text, 10)
    assert len(capped.encode("utf-8", "surrogatepass")) <= 10


def test_a_cut_reason_keeps_a_trailing_capital_x() -> None:
    opts = SyncOptions(max_reason_bytes=20)
    assert compose(opts.owner_prefix, ["X" * 100], opts.max_reason_bytes) == "k8s: " + "X" * 15


def test_member_names_keep_a_trailing_capital_x() -> None:
    assert member_name("gpu", "nodeX") == "gpu-nodeX"


def test_slurm_name_is_the_label_else_the_pod_name() -> None:
    spec = make_spec(1)
    labelled = pod("gpu-0", spec)
    assert slurm_name(labelled) == "gpu-0"
    relabelled = labelled.__class__(
        namespace="hpc", name="gpu-0", labels={**labelled.labels, Keys.NODE_NAME_LABEL: "node7"}
    )
    assert slurm_name(relabelled) == "node7"
    bare = labelled.__class__(namespace="hpc", name="gpu-0")
    assert slurm_name(bare) == "gpu-0"


def test_new_members_carry_their_ordinal() -> None:
    spec = make_spec(3)
    result = run(spec, [pod("gpu-1", spec)], {"gpu-1": slurm("gpu-1")})
    assert [(m.name, m.ordinal) for m in result.create] == [("gpu-0", 0), ("gpu-2", 2)]


def test_daemonset_unmarks_only_scale_ins_of_live_pods_whose_node_matches_again() -> None:
    spec = make_spec(mode="DaemonSet", nodeSelector={"pool": "gpu"})
    nodes = [KubeNode(name="n1", labels={"pool": "gpu"}), KubeNode(name="n2", labels={"pool": "gpu"})]
    back = pod("gpu-n1", spec, removal="scale-in")
    updating = pod("gpu-n2", spec, removal="update")
    result = run(spec, [back, updating], {}, kube_nodes=nodes)
    assert result.unmark == ["gpu-n1"]
    gone = pod("gpu-n1", spec, removal="scale-in", terminating=True)
    assert run(spec, [gone, updating], {}, kube_nodes=nodes).unmark == []
    elsewhere = pod("gpu-n9", spec, removal="scale-in")  # its Node does not match: stays marked
    assert run(spec, [elsewhere], {}, kube_nodes=nodes).unmark == []


def test_a_removal_without_a_start_time_never_times_out() -> None:
    spec = make_spec(0)
    busy = {"gpu-0": slurm("gpu-0", "ALLOCATED", "DRAIN", reason="k8s: scale-in of NodeSet gpu")}
    marked = pod("gpu-0", spec, removal="scale-in")
    bare = marked.__class__(
        namespace="hpc", name="gpu-0", labels=marked.labels, annotations={Keys.REMOVAL: "scale-in"},
        conditions=marked.conditions,
    )  # fmt: skip
    result = run(spec, [bare], busy)
    assert result.draining == ["gpu-0"] and result.timed_out == []


def test_drain_timeout_is_strictly_longer_than_the_setting() -> None:
    spec = make_spec(0, drainTimeout="10m")
    busy = {"gpu-0": slurm("gpu-0", "ALLOCATED", "DRAIN", reason="k8s: scale-in of NodeSet gpu")}
    marked = pod("gpu-0", spec, removal="scale-in", since=NOW - 600)
    assert run(spec, [marked], busy).timed_out == []  # exactly the timeout: not yet
    assert run(spec, [marked], busy, now=NOW + 1).timed_out == ["gpu-0"]


def test_every_removal_is_looked_at_whatever_comes_first() -> None:
    spec = make_spec(0)
    drained = "k8s: scale-in of NodeSet gpu"
    first = pod("gpu-0", spec, removal="scale-in", terminating=True)
    second = pod("gpu-1", spec, removal="scale-in")
    nodes = {"gpu-1": slurm("gpu-1", "IDLE", "DRAIN", reason=drained)}
    assert run(spec, [first, second], nodes).delete_pods == ["gpu-1"]
    stale = run(spec, [pod("gpu-0", spec, removal="scale-in"), second], nodes, fresh=False)
    assert stale.draining == ["gpu-0", "gpu-1"] and stale.delete_pods == []


def test_newly_marked_members_are_reported_draining() -> None:
    spec = make_spec(1)
    result = run(
        spec, [pod("gpu-0", spec), pod("gpu-1", spec)], {"gpu-0": slurm("gpu-0"), "gpu-1": slurm("gpu-1")}
    )
    assert result.draining == ["gpu-1"]


def test_every_old_record_of_ours_is_deleted_whatever_comes_first() -> None:
    spec = make_spec(1, nodeOnScaleIn="Delete")
    ours = "k8s: scale-in of NodeSet gpu"
    nodes = {
        "gpu-0": slurm("gpu-0", "IDLE", "DRAIN", reason=ours),  # its pod still exists: kept
        "gpu-1": slurm("gpu-1", "IDLE", "DRAIN", reason="bad fan"),  # not ours: kept
        "gpu-2": slurm("gpu-2", "ALLOCATED", "DRAIN", reason=ours),  # still busy: kept for now
        "gpu-3": slurm("gpu-3", "IDLE", "DRAIN", reason=ours),  # gone for good: deleted
        "gpx-4": slurm("gpx-4", "IDLE", "DRAIN", reason=ours, comment=""),  # without our stamp: kept
    }
    result = plan(NS, spec, [pod("gpu-0", spec)], nodes, nodes=[], slurm_fresh=True, now=NOW)
    assert result.delete_slurm_nodes == ["gpu-3"]


def test_an_empty_removal_start_never_times_out() -> None:
    spec = make_spec(0)
    busy = {"gpu-0": slurm("gpu-0", "ALLOCATED", "DRAIN", reason="k8s: scale-in of NodeSet gpu")}
    marked = pod("gpu-0", spec, removal="scale-in")
    empty = marked.__class__(
        namespace="hpc", name="gpu-0", labels=marked.labels, conditions=marked.conditions,
        annotations={Keys.REMOVAL: "scale-in", Keys.REMOVAL_SINCE: ""},
    )  # fmt: skip
    assert run(spec, [empty], busy).timed_out == []


def test_records_not_ours_do_not_stop_the_clean_up() -> None:
    spec = make_spec(0, nodeOnScaleIn="Delete")
    ours = "k8s: scale-in of NodeSet gpu"
    nodes = {
        "gp-1": slurm("gp-1", "IDLE", "DRAIN", reason=ours, comment=""),  # sorts first, no stamp: kept
        "gpu-3": slurm("gpu-3", "IDLE", "DRAIN", reason=ours),
    }
    assert run(spec, [], nodes).delete_slurm_nodes == ["gpu-3"]
