"""Binding (docs/contract.md "Binding"): which pod and Node a Slurm node is bound to, conflicts, and the
Slurm nodes sharing one Node. The Kubernetes cache is fed objects as its informers would deliver them."""

from __future__ import annotations

import pytest

from syncer.control.binding import Binding, claim, node_slurm, pod_bound_on_node, resolve, slurm_nodes_on
from syncer.kube.cache import KubeCache
from syncer.kube.client import KubeClient
from syncer.kube.events import ObjectRef
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubePod
from syncer.model.slurm import SlurmNode

LABEL = Keys.NODE_NAME_LABEL


def cache(*, bind_by_node_name: bool = False) -> KubeCache:
    return KubeCache(KubeClient("http://127.0.0.1:9"), bind_by_node_name=bind_by_node_name)  # never called


def put_pod(kube: KubeCache, name: str, slurm: str, node: str = "", namespace: str = "slurm") -> KubePod:
    pod = KubePod(namespace=namespace, name=name, node_name=node, labels={LABEL: slurm} if slurm else {})
    previous = kube.pods.items.get(pod.key)
    kube.pods.items[pod.key] = pod
    kube.pods._emit(previous, pod)
    return pod


def put_node(kube: KubeCache, name: str, slurm: str = "") -> KubeNode:
    node = KubeNode(name=name, labels={LABEL: slurm} if slurm else {})
    previous = kube.nodes.items.get(name)
    kube.nodes.items[name] = node
    kube.nodes._emit(previous, node)
    return node


def drop_pod(kube: KubeCache, pod: KubePod) -> None:
    kube.pods.items.pop(pod.key)
    kube.pods._emit(pod, None)


def test_unclaimed_slurm_node_is_unbound() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    binding = resolve("node1", kube)
    assert binding == Binding("node1")
    assert not binding.bound and binding.mode == "unbound" and binding.conflict == ""


def test_pod_bound_carries_the_pods_node() -> None:
    kube = cache()
    node = put_node(kube, "k8s-a")
    pod = put_pod(kube, "slurmd-1", "node1", "k8s-a")
    binding = resolve("node1", kube)
    assert binding.pod == pod and binding.node == node
    assert binding.bound and binding.mode == "pod"


def test_pod_bound_before_scheduling_has_no_node() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    pod = put_pod(kube, "slurmd-1", "node1", "")
    binding = resolve("node1", kube)
    assert binding.pod == pod and binding.node is None and binding.bound and binding.mode == "pod"


def test_pod_on_an_unknown_node() -> None:
    kube = cache()
    pod = put_pod(kube, "slurmd-1", "node1", "k8s-gone")
    binding = resolve("node1", kube)
    assert binding.pod == pod and binding.node is None and binding.mode == "pod"


def test_node_bound_by_label() -> None:
    kube = cache()
    node = put_node(kube, "host-1", slurm="node1")
    binding = resolve("node1", kube)
    assert binding.pod is None and binding.node == node
    assert binding.bound and binding.mode == "node"


def test_node_bound_by_name_only_when_asked() -> None:
    kube = cache(bind_by_node_name=True)
    node = put_node(kube, "node1")
    assert resolve("node1", kube).node == node and resolve("node1", kube).mode == "node"
    plain = cache()
    put_node(plain, "node1")
    assert resolve("node1", plain).mode == "unbound"


def test_two_pods_claiming_one_slurm_node_conflict() -> None:
    kube = cache()
    put_pod(kube, "slurmd-a", "node1", "k8s-a")
    put_pod(kube, "slurmd-b", "node1", "k8s-b")
    binding = resolve("node1", kube)
    assert binding.conflict == "pods slurm/slurmd-a, slurm/slurmd-b all claim Slurm node node1"
    assert binding.pod is None and binding.node is None
    assert not binding.bound and binding.mode == "conflict"


def test_pod_and_another_node_claiming_conflict() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    put_node(kube, "host-b", slurm="node1")
    put_pod(kube, "slurmd-a", "node1", "k8s-a")
    binding = resolve("node1", kube)
    assert binding.conflict == "pod slurm/slurmd-a and Node host-b both claim Slurm node node1"
    assert not binding.bound and binding.mode == "conflict"


def test_pod_and_its_own_node_claiming_agree() -> None:
    kube = cache()
    node = put_node(kube, "k8s-a", slurm="node1")  # the pod's own Node carries the label too
    pod = put_pod(kube, "slurmd-a", "node1", "k8s-a")
    binding = resolve("node1", kube)
    assert binding.conflict == "" and binding.pod == pod and binding.node == node and binding.mode == "pod"


def test_two_nodes_claiming_conflict() -> None:
    kube = cache()
    put_node(kube, "host-a", slurm="node1")
    put_node(kube, "host-b", slurm="node1")
    binding = resolve("node1", kube)
    assert binding.conflict == "Nodes host-a, host-b all claim Slurm node node1"
    assert binding.mode == "conflict" and not binding.bound


def test_conflict_wins_over_pod_and_node_in_mode() -> None:
    # a conflicting binding built by hand with both objects set still reads as a conflict
    pod = KubePod(namespace="slurm", name="p")
    node = KubeNode(name="n")
    binding = Binding("node1", pod, node, conflict="why")
    assert binding.mode == "conflict" and not binding.bound
    assert Binding("node1", None, node).mode == "node"
    assert Binding("node1", pod, None).mode == "pod" and Binding("node1", pod, None).bound


def test_one_pod_on_its_node_shares_with_nobody() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    put_pod(kube, "slurmd-1", "node1", "k8s-a")
    binding = resolve("node1", kube)
    assert pod_bound_on_node(binding, kube) is None
    assert node_slurm(binding, kube, {}) is None


def test_pods_sharing_a_node_are_listed_sorted_with_this_one() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    put_node(kube, "k8s-b")
    put_pod(kube, "slurmd-3", "node3", "k8s-a")
    put_pod(kube, "slurmd-1", "node1", "k8s-a")
    put_pod(kube, "slurmd-2", "node2", "k8s-a")
    put_pod(kube, "slurmd-9", "node9", "k8s-b")  # another Node: not a sibling
    binding = resolve("node2", kube)
    assert pod_bound_on_node(binding, kube) == ("node1", "node2", "node3")
    idle = SlurmNode(name="node1", state=frozenset({"IDLE"}))
    assert node_slurm(binding, kube, {"node1": idle}) == [("node1", idle), ("node2", None), ("node3", None)]
    # what a sync reconcile asks in one call, given the claimants it read: the binding and the Slurm nodes
    # sharing its Node
    assert claim("node2", kube.pods_for("node2"), kube.nodes_for("node2"), kube) == (
        binding,
        ("node1", "node2", "node3"),
    )
    assert claim("node9", kube.pods_for("node9"), [], kube) == (resolve("node9", kube), None)


def test_siblings_in_conflict_or_bound_elsewhere_are_left_out() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    put_node(kube, "k8s-b")
    put_pod(kube, "slurmd-1", "node1", "k8s-a")
    put_pod(kube, "slurmd-2", "node2", "k8s-a")
    put_pod(kube, "slurmd-2b", "node2", "k8s-b")  # node2 claimed twice: a conflict, not a sibling
    put_pod(kube, "slurmd-3", "node3", "k8s-a")
    put_node(kube, "host-3", slurm="node3")  # node3's pod and a Node both claim it: conflict
    put_pod(kube, "slurmd-4", "node4", "k8s-a")
    put_pod(kube, "slurmd-4x", "node4", "k8s-a")  # two pods, same Node, same Slurm node: conflict
    binding = resolve("node1", kube)
    assert pod_bound_on_node(binding, kube) == ("node1",)


def test_a_second_pod_of_the_same_slurm_node_is_not_counted_twice() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    put_pod(kube, "slurmd-1", "node1", "k8s-a")
    put_pod(kube, "slurmd-2", "node2", "k8s-a")
    assert pod_bound_on_node(resolve("node1", kube), kube) == ("node1", "node2")
    assert pod_bound_on_node(resolve("node2", kube), kube) == ("node1", "node2")


@pytest.mark.parametrize("case", ["conflict", "node-bound", "no-node", "unbound"])
def test_no_sharing_without_a_pod_on_a_known_node(case: str) -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    put_pod(kube, "slurmd-x", "nodex", "k8s-a")  # a labelled neighbour on the Node
    if case == "conflict":
        put_pod(kube, "slurmd-1", "node1", "k8s-a")
        put_pod(kube, "slurmd-1b", "node1", "k8s-a")
    elif case == "node-bound":
        put_node(kube, "host-1", slurm="node1")
    elif case == "no-node":
        put_pod(kube, "slurmd-1", "node1", "")
    binding = resolve("node1", kube)
    assert pod_bound_on_node(binding, kube) is None


def test_a_pod_gone_from_the_store_is_not_a_sibling() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    put_pod(kube, "slurmd-1", "node1", "k8s-a")
    gone = put_pod(kube, "slurmd-2", "node2", "k8s-a")
    put_pod(kube, "slurmd-3", "node3", "k8s-a")
    drop_pod(kube, gone)
    assert pod_bound_on_node(resolve("node1", kube), kube) == ("node1", "node3")
    # an index entry whose object vanished from the store (a race) is skipped, not a crash
    kube.pods_by_kube_node["k8s-a"].add("slurm/ghost")
    assert pod_bound_on_node(resolve("node1", kube), kube) == ("node1", "node3")


def test_every_binding_names_its_slurm_node() -> None:
    kube = cache()
    put_node(kube, "host-a", slurm="node1")
    put_node(kube, "host-b", slurm="node1")
    put_node(kube, "host-c", slurm="node2")
    put_node(kube, "k8s-p")
    put_node(kube, "host-d", slurm="node3")
    put_node(kube, "host-e", slurm="node3")
    put_pod(kube, "slurmd-3", "node3", "k8s-p")
    put_pod(kube, "slurmd-4", "node4", "k8s-p")
    put_pod(kube, "slurmd-4b", "node4", "k8s-p")
    for name in ("node1", "node2", "node3", "node4", "node9"):
        assert resolve(name, kube).slurm_name == name
    # a pod and two other Nodes: both Nodes named
    assert resolve("node3", kube).conflict == (
        "pod slurm/slurmd-3 and Node host-d, host-e both claim Slurm node node3"
    )


def test_no_sharing_for_a_binding_in_conflict_even_with_pod_and_node() -> None:
    kube = cache()
    node = put_node(kube, "k8s-a")
    pod = put_pod(kube, "slurmd-1", "node1", "k8s-a")
    put_pod(kube, "slurmd-2", "node2", "k8s-a")
    assert pod_bound_on_node(Binding("node1", pod, node), kube) == ("node1", "node2")
    assert pod_bound_on_node(Binding("node1", pod, node, conflict="two claims"), kube) is None


def test_no_sharing_when_the_bindings_node_hosts_no_labelled_pod() -> None:
    kube = cache()
    put_node(kube, "k8s-a")
    pod = put_pod(kube, "slurmd-1", "node1", "k8s-a")
    put_pod(kube, "slurmd-2", "node2", "k8s-a")
    elsewhere = put_node(kube, "k8s-empty")  # a Node no labelled pod runs on
    assert pod_bound_on_node(Binding("node1", pod, elsewhere), kube) is None


def test_slurm_nodes_on_a_node_are_its_label_its_pods_and_its_name_each_only_when_known_and_bound() -> None:
    kube = cache()
    put_node(kube, "k8s-a", "host1")  # node-bound through its own label
    put_pod(kube, "slurmd-1", "pod1", "k8s-a")
    put_pod(kube, "slurmd-2", "pod2", "k8s-a")
    put_pod(kube, "slurmd-3", "unknown", "k8s-a")  # Slurm does not know it
    put_pod(kube, "slurmd-4", "pod1", "k8s-b")  # a second claim on pod1: a conflict, bound to neither
    known = {"host1", "pod1", "pod2", "k8s-a"}
    assert slurm_nodes_on("k8s-a", kube, known) == ("host1", "pod2")
    assert slurm_nodes_on("k8s-b", kube, known) == ()
    assert slurm_nodes_on("k8s-none", kube, known) == ()
    by_name = cache(bind_by_node_name=True)
    put_node(by_name, "k8s-a")
    assert slurm_nodes_on("k8s-a", by_name, known) == ("k8s-a",)
    assert slurm_nodes_on("k8s-a", by_name, {"host1"}) == ()


def test_an_event_about_a_binding_goes_on_the_pod_when_asked_and_there_is_one_else_on_the_node() -> None:
    pod = KubePod(namespace="slurm", name="slurmd-a", uid="u1")
    node = KubeNode(name="kube-a")
    on_pod = ObjectRef("Pod", "slurmd-a", "slurm", "u1")
    on_node = ObjectRef("Node", "kube-a", "", "kube-a")
    assert Binding("a", pod, node).ref("pod") == on_pod
    assert Binding("a", pod, node).ref("node") == on_node  # asked for the Node: the Node
    assert Binding("a", None, node).ref("pod") == on_node  # no pod: the Node
    assert Binding("a", pod, None).ref("node") is None  # a pod not yet on a Node: nothing to put it on
    assert Binding("a").ref("pod") is None
