"""A SlurmPartition CR, pure: spec -> typed settings, members resolved (selector, NodeSets, hosts) with a
problem naming the field for what cannot be resolved, the ownership record, and the status document."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.controllers.partitions.plan import Outcome
from syncer.controllers.partitions.spec import (
    MAX_HOSTS,
    empty_selector,
    partition_jobs,
    record_of,
    selector_matches,
    settings_from_spec,
    status_of,
    wanted_from,
)
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode
from syncer.slurm.partitions import UNLIMITED, OverSubscribe, PartitionSettings, PartitionState, check
from syncer.testing.kubeapi.selectors import labels_match, selector_from_label_selector_object

NODES = [
    KubeNode(name="k1", labels={"pool": "gpu", "zone": "a"}),
    KubeNode(name="k2", labels={"pool": "gpu", "zone": "b"}),
    KubeNode(name="k3", labels={"pool": "cpu"}),
]
BOUND = {"k1": ("gpu-1",), "k2": ("gpu-2",), "k3": ("cpu-1",)}
NODESETS = {("slurm", "a100"): ("a100-0", "a100-1")}


def cr(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "gpu", "uid": "u1", "creationTimestamp": "2026-11-26T00:00:00Z", **meta},
            "spec": spec}  # fmt: skip


def resolve(spec: dict[str, Any], **meta: Any):
    return wanted_from(
        cr(spec, **meta), NODES, lambda n: BOUND.get(n, ()), lambda ns, name: NODESETS.get((ns, name))
    )


def test_every_spec_field_becomes_its_setting():
    spec = {
        "state": "DRAIN", "default": True, "hidden": False, "maxTime": "UNLIMITED", "defaultTime": 60,
        "maxNodes": 4, "minNodes": 1, "priorityTier": 7, "priorityJobFactor": 2, "graceTime": 30,
        "allowAccounts": ["b", "a"], "allowGroups": ["g"], "denyQos": ["low"], "qos": "gpu",
        "overSubscribe": {"mode": "FORCE", "jobs": 2}, "exclusive": "USER", "alternate": "main",
    }  # fmt: skip
    got = settings_from_spec(spec)
    assert got == PartitionSettings(
        state="DRAIN",
        default=True,
        hidden=False,
        max_time=UNLIMITED,
        default_time=60,
        max_nodes=4,
        min_nodes=1,
        priority_tier=7,
        priority_job_factor=2,
        grace_time=30,
        allow_accounts=("a", "b"),
        allow_groups=("g",),
        deny_qos=("low",),
        qos="gpu",
        oversubscribe=OverSubscribe("FORCE", 2),
        exclusive="USER",
        alternate="main",
    )
    check("gpu", got)  # what the CRD accepts, the client sends
    assert settings_from_spec({"nodes": {"hosts": ["x"]}}) == PartitionSettings(), "unset: not managed"


def test_members_are_the_union_of_selector_nodesets_and_hosts():
    want = resolve(
        {
            "nodes": {
                "selector": {"matchLabels": {"pool": "gpu"}},
                "nodeSets": [{"namespace": "slurm", "name": "a100"}],
                "hosts": ["bm[01-02]"],
            },
            "adopt": True,
            "partitionName": "gpu-all",
        }
    )
    assert want.nodes == {"gpu-1", "gpu-2", "a100-0", "a100-1", "bm01", "bm02"} and not want.problems
    assert (want.cr, want.partition, want.adopt, want.deleting) == ("gpu", "gpu-all", True, False)
    assert want.order == ("2026-11-26T00:00:00Z", "u1")
    assert resolve({"nodes": {"hosts": ["x"]}}, deletionTimestamp="2026-11-26T01:00:00Z").deleting


def test_what_cannot_be_resolved_is_a_problem_naming_the_field():
    assert resolve({"nodes": {"selector": {"matchLabels": {"pool": "tpu"}}}}).problems == (
        "spec.nodes.selector matches no Node",
    )
    everything = {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}
    unbound = wanted_from(cr({"nodes": {"selector": everything}}), NODES, lambda _n: (), lambda _ns, _n: None)
    assert unbound.problems == ("spec.nodes.selector matches 3 Node(s), none bound to a Slurm node yet",)
    missing = resolve({"nodes": {"nodeSets": [{"namespace": "slurm", "name": "h100"}]}})
    assert missing.problems == ("spec.nodes.nodeSets: NodeSet slurm/h100 does not exist",)
    bad = resolve({"nodes": {"hosts": ["ok", "bad[1-"]}})
    assert bad.problems == ("spec.nodes.hosts[1]: 'bad[1-' is not a Slurm hostlist (e.g. gpu[01-04])",)


def test_the_ownership_record_is_the_annotation():
    assert record_of(cr({}, annotations={Keys.PARTITION_OWNER: "created"})) == ("gpu", "gpu", "created")
    assert record_of(cr({"partitionName": "p"}, annotations={Keys.PARTITION_OWNER: "adopted"}))[1:] == (
        "p", "adopted",
    )  # fmt: skip
    assert record_of(cr({})) == ("gpu", None, None)


def test_status_keeps_the_transition_time_while_ready_does_not_change():
    have = PartitionState("gpu", frozenset({"a", "b"}), "a,b", PartitionSettings(state="UP"), 8)
    ready = Outcome("gpu", "gpu", True, "Ready", "partition gpu matches")
    first = status_of(ready, have, (2, 1), 3, "created", {}, "T1")
    assert first["slurm"] == {
        "state": "UP",
        "nodes": "a,b",
        "totalNodes": 2,
        "totalCpus": 8,
        "runningJobs": 2,
        "pendingJobs": 1,
    }
    assert first["observedGeneration"] == 3 and first["ownership"] == "created"
    assert (
        status_of(ready, have, (0, 0), 4, "created", first, "T2")["conditions"][0]["lastTransitionTime"]
        == "T1"
    )
    draining = Outcome("gpu", "gpu", False, "Draining", "partition gpu drains: 2 job(s) remain", 2)
    assert (
        status_of(draining, have, (2, 0), 4, "created", first, "T3")["conditions"][0]["lastTransitionTime"]
        == "T3"
    )


label_sets = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]), max_size=3)
expressions = st.lists(
    st.one_of(
        st.builds(lambda k, op, v: {"key": k, "operator": op, "values": v}, st.sampled_from(["a", "b", "c"]),
                  st.sampled_from(["In", "NotIn"]), st.lists(st.sampled_from(["x", "y"]), min_size=1)),
        st.builds(lambda k, op: {"key": k, "operator": op}, st.sampled_from(["a", "b", "c"]),
                  st.sampled_from(["Exists", "DoesNotExist"])),
    ),
    max_size=3,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(label_sets, label_sets, expressions)
def test_the_selector_matches_as_the_api_server_does(labels, match_labels, match_expressions):
    selector = {"matchLabels": match_labels, "matchExpressions": match_expressions}
    assert selector_matches(selector, labels) == labels_match(
        selector_from_label_selector_object(selector), labels
    )


def test_jobs_count_per_partition_from_the_job_poll_running_and_pending_and_flags_and_ended_ones_not():
    counts = partition_jobs({
        ("gpu", "RUNNING"): 1, ("gpu,cpu", "PENDING"): 1, ("gpu", "COMPLETED"): 3, ("cpu", "RUNNING"): 1,
        ("cpu", "COMPLETING"): 1, ("cpu", "CANCELLED"): 1, ("gpu", "SUSPENDED"): 1, ("gpu", "CONFIGURING"): 2,
        ("tpu", "PENDING"): 0, ("", "RUNNING"): 4,
    })  # fmt: skip
    assert counts == {"gpu": (2, 1), "cpu": (1, 1)}


def test_an_empty_selector_would_take_every_node_and_is_refused_naming_the_way_to_say_every_node():
    cases: list[dict[str, Any]] = [
        {}, {"matchLabels": {}}, {"matchExpressions": []}, {"matchLabels": {}, "matchExpressions": []},
    ]  # fmt: skip
    for empty in cases:
        assert empty_selector(empty)
        want = resolve({"nodes": {"selector": empty}})
        assert not want.nodes and len(want.problems) == 1
        assert want.problems[0].startswith("spec.nodes.selector is empty: it would take every Node")
        assert "kubernetes.io/hostname, operator: Exists" in want.problems[0]
    assert not empty_selector({"matchLabels": {"pool": "gpu"}})
    assert not empty_selector({"matchExpressions": [{"key": "pool", "operator": "Exists"}]})


def test_a_node_with_two_slurmd_pods_gives_both_slurm_nodes():
    two = {"k1": ("gpu-1", "gpu-1b"), "k2": ("gpu-2",)}
    want = wanted_from(cr({"nodes": {"selector": {"matchLabels": {"pool": "gpu"}}}}), NODES,
                       lambda n: two.get(n, ()), lambda _ns, _n: None)  # fmt: skip
    assert want.nodes == {"gpu-1", "gpu-1b", "gpu-2"}


def test_hosts_are_counted_before_they_are_expanded_and_bounded_in_all():
    huge = resolve({"nodes": {"hosts": ["n[0-99999999999]"]}})
    assert huge.nodes == frozenset() and huge.problems == (
        f"spec.nodes.hosts[0]: 'n[0-99999999999]' names 100,000,000,000 hosts: at most {MAX_HOSTS:,} in all",
    )
    fits = resolve({"nodes": {"hosts": [f"a[1-{MAX_HOSTS}]"]}})
    assert len(fits.nodes) == MAX_HOSTS and not fits.problems
    over = resolve({"nodes": {"hosts": [f"a[1-{MAX_HOSTS - 1}]", "b[1-2]"]}})
    assert over.nodes == frozenset() and over.problems[0].startswith("spec.nodes.hosts[1]: 'b[1-2]' names 2")
    bad_then_fine = resolve({"nodes": {"hosts": ["x[1-", "y[1-2]"]}})
    assert bad_then_fine.nodes == {"y1", "y2"} and bad_then_fine.problems[0].startswith("spec.nodes.hosts[0]")


def test_nodeset_members_join_once_slurm_knows_them_and_a_nodeset_without_members_is_a_problem():
    sets = {("slurm", "burst"): ("burst-0", "burst-1"), ("slurm", "empty"): ()}
    want = wanted_from(cr({"nodes": {"nodeSets": [{"namespace": "slurm", "name": "burst"}],
                                     "hosts": ["burst-1"]}}), [], lambda _n: (),
                       lambda ns, name: sets.get((ns, name)))  # fmt: skip
    assert want.nodes == {"burst-0", "burst-1"} and want.joining == {"burst-0"}, "hosts are never joining"
    empty = wanted_from(cr({"nodes": {"nodeSets": [{"namespace": "slurm", "name": "empty"}]}}), [],
                        lambda _n: (), lambda ns, name: sets.get((ns, name)))  # fmt: skip
    assert empty.problems == (
        "spec.nodes.nodeSets: NodeSet slurm/empty has no members now (no pod, no member declared to Slurm "
        "yet)",
    )


def test_the_generation_and_the_one_its_status_was_written_for():
    want = wanted_from(cr({"nodes": {"hosts": ["x"]}}, generation=4), [], lambda _n: (), lambda _ns, _n: None,
                       observed=3)  # fmt: skip
    assert (want.generation, want.observed) == (4, 3)
    assert resolve({"nodes": {"hosts": ["x"]}}).observed is None
