"""Which Kubernetes objects a Slurm node is bound to (SPEC "Binding"), from the Kubernetes cache."""

from __future__ import annotations

from dataclasses import dataclass

from syncer.kube.cache import KubeCache
from syncer.model.kube import KubeNode, KubePod


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


def resolve(name: str, cache: KubeCache) -> Binding:
    pods = cache.pods_for(name)
    # node-bound: the Node's label, or its name with --bind-by-node-name
    claiming_nodes = cache.nodes_for(name)
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
