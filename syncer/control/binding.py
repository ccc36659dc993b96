"""Which Kubernetes objects a Slurm node is bound to (SPEC "Binding"), from the Kubernetes cache."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from syncer.kube.cache import KubeCache
from syncer.kube.events import ObjectRef
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubePod
from syncer.model.slurm import SlurmNode


@dataclass(frozen=True)
class Binding:
    slurm_name: str
    pod: KubePod | None = None
    node: KubeNode | None = None
    conflict: str = ""  # why the claims disagree; the node is then left alone

    @property
    def bound(self) -> bool:
        return not self.conflict and (self.pod is not None or self.node is not None)

    @property
    def mode(self) -> str:
        if self.conflict:
            return "conflict"
        if self.pod is not None:
            return "pod"
        return "node" if self.node is not None else "unbound"

    def ref(self, on: str) -> ObjectRef | None:
        """Where an Event about this binding goes: the pod (`on="pod"`, when there is one), else the Node."""
        if on == "pod" and self.pod is not None:
            return ObjectRef.pod(self.pod.namespace, self.pod.name, self.pod.uid)
        if self.node is not None:
            return ObjectRef.node(self.node.name)
        return None


def resolve(name: str, cache: KubeCache) -> Binding:
    """The binding of Slurm node `name`, its claimants read from the cache."""
    return from_claimants(name, cache.pods_for(name), cache.nodes_for(name), cache)


def from_claimants(
    name: str, pods: Sequence[KubePod], claiming_nodes: Sequence[KubeNode], cache: KubeCache
) -> Binding:
    """The binding of Slurm node `name` from its claimants as read from the cache: the pods labelled with it
    (`pods_for`) and the Nodes bound to it (`nodes_for`: the Node's label, or its name with
    --bind-by-node-name); `cache` gives a claiming pod's Node."""
    if len(pods) > 1:
        claimants = ", ".join(p.key for p in pods)
        return Binding(name, conflict=f"pods {claimants} all claim Slurm node {name}")
    if pods:
        pod = pods[0]
        others = [n.name for n in claiming_nodes if n.name != pod.node_name]
        if others:
            return Binding(
                name, conflict=f"pod {pod.key} and Node {', '.join(others)} both claim Slurm node {name}"
            )
        return Binding(name, pod, cache.node(pod.node_name) if pod.node_name else None)
    if len(claiming_nodes) > 1:
        return Binding(
            name, conflict=f"Nodes {', '.join(n.name for n in claiming_nodes)} all claim Slurm node {name}"
        )
    if claiming_nodes:
        return Binding(name, None, claiming_nodes[0])
    return Binding(name)


def slurm_nodes_on(kube_node: str, cache: KubeCache, known: Container[str]) -> tuple[str, ...]:
    """The Slurm nodes Slurm knows (`known`) that are bound to the Kubernetes Node `kube_node` (its label,
    its name with --bind-by-node-name, or a slurmd pod on it), sorted; claims in conflict left out."""
    node = cache.node(kube_node)
    candidates: set[str] = set()
    if node is not None and (label := node.labels.get(Keys.NODE_NAME_LABEL)):
        candidates.add(label)
    if cache.bind_by_node_name:
        candidates.add(kube_node)
    for key in cache.pods_by_kube_node.get(kube_node, ()):
        pod = cache.pods.items.get(key)
        if pod is not None:
            candidates.add(cache.slurm_name_of(pod))
    return tuple(
        sorted(
            name
            for name in candidates
            if name in known
            and (binding := resolve(name, cache)).bound
            and binding.node is not None
            and binding.node.name == kube_node
        )
    )


def pod_bound_on_node(binding: Binding, cache: KubeCache) -> tuple[str, ...] | None:
    """For a pod-bound Slurm node whose Kubernetes Node hosts other labelled pods: the Slurm nodes bound
    through a pod on that Node (this one included, sorted; pods whose claim is in conflict left out). None
    when the Node hosts only this pod, or the binding is not a pod on a known Node.

    Looks only at that Node's pods (`pods_by_kube_node`), never at all pods."""
    pod, node = binding.pod, binding.node
    if not binding.bound or pod is None or node is None:
        return None
    keys = cache.pods_by_kube_node.get(node.name, ())
    if len(keys) < 2:
        return None
    names = {binding.slurm_name}
    for key in keys:
        other = cache.pods.items.get(key)
        slurm_name = cache.slurm_name_of(other) if other is not None else ""
        if not slurm_name or slurm_name in names:
            continue
        sibling = resolve(slurm_name, cache)
        if sibling.bound and sibling.pod is not None and sibling.pod.key == key:
            names.add(slurm_name)
    return tuple(sorted(names))


def claim(
    name: str, pods: Sequence[KubePod], claiming_nodes: Sequence[KubeNode], cache: KubeCache
) -> tuple[Binding, tuple[str, ...] | None]:
    """All that a sync reconcile asks of the binding, in one call, given the claimants its read pass took
    from the cache (`pods_for`, `nodes_for`): the Slurm node's binding (`from_claimants`), and the Slurm
    nodes bound through pods on its Node when that Node hosts several (`pod_bound_on_node`)."""
    found = from_claimants(name, pods, claiming_nodes, cache)
    return found, pod_bound_on_node(found, cache)


def node_slurm(
    binding: Binding, cache: KubeCache, slurm_nodes: Mapping[str, SlurmNode]
) -> list[tuple[str, SlurmNode | None]] | None:
    """`pod_bound_on_node` with each Slurm node's data from `slurm_nodes`: decide()'s `node_slurm`."""
    names = pod_bound_on_node(binding, cache)
    return None if names is None else [(name, slurm_nodes.get(name)) for name in names]
