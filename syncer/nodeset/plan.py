"""What a NodeSet needs next, as a pure function of its spec, its pods, the Kubernetes Nodes and
the Slurm nodes. No I/O: the reconciler carries the plan out and calls again."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubeNodeSet, KubePod
from syncer.model.slurm import SlurmNode
from syncer.nodeset.spec import NodeSetSpec


@dataclass(frozen=True)
class Member:
    """One slurmd the NodeSet should have: its pod name is also its Slurm node name."""

    name: str
    ordinal: int = -1  # Replicas mode
    node_name: str = ""  # DaemonSet mode: the Kubernetes Node it is pinned to


@dataclass
class Plan:
    create: list[Member] = field(default_factory=list)
    mark_removal: dict[str, str] = field(default_factory=dict)  # pod -> "scale-in" | "update"
    delete_pods: list[str] = field(default_factory=list)
    delete_slurm_nodes: list[str] = field(default_factory=list)
    draining: list[str] = field(default_factory=list)  # being removed, waiting for Slurm to drain
    timed_out: list[str] = field(default_factory=list)  # draining for longer than drainTimeout
    busy_labels: dict[str, bool] = field(default_factory=dict)  # pod -> should carry the busy label
    blocked: str = ""  # why removals wait (stale Slurm data)

    @property
    def idle(self) -> bool:
        return not (
            self.create or self.mark_removal or self.delete_pods or self.delete_slurm_nodes or self.draining
        )


def desired_members(nodeset: KubeNodeSet, spec: NodeSetSpec, nodes: list[KubeNode]) -> dict[str, Member]:
    if spec.mode == "Replicas":
        return {f"{nodeset.name}-{i}": Member(f"{nodeset.name}-{i}", ordinal=i) for i in range(spec.replicas)}
    members = {}
    for node in nodes:
        if all(node.labels.get(k) == v for k, v in spec.node_selector.items()):
            name = f"{nodeset.name}-{node.name}"[:63].rstrip("-.")
            members[name] = Member(name, node_name=node.name)
    return members


def _ordinal(nodeset: str, name: str) -> int:
    match = re.fullmatch(re.escape(nodeset) + r"-(\d+)", name)
    return int(match.group(1)) if match else -1


def _ready(pod: KubePod) -> bool:
    cond = pod.condition("Ready")
    return cond is not None and cond.status == "True" and not pod.terminating


def scale_in_reason(nodeset: str, owner_prefix: str) -> str:
    return f"{owner_prefix}scale-in of NodeSet {nodeset}"


def plan(
    nodeset: KubeNodeSet,
    spec: NodeSetSpec,
    pods: list[KubePod],
    slurm_nodes: dict[str, SlurmNode],
    *,
    nodes: list[KubeNode],
    slurm_fresh: bool,
    now: float,
    owner_prefix: str = "k8s: ",
) -> Plan:
    result = Plan()
    desired = desired_members(nodeset, spec, nodes)
    current_hash = spec.template_hash()
    by_name = {p.name: p for p in pods}
    # members without a pod: create (a pod still terminating under that name is waited for)
    for name, member in sorted(desired.items(), key=lambda kv: (kv[1].ordinal, kv[0])):
        if name not in by_name:
            result.create.append(member)
    # busy label: pods whose Slurm node runs or finishes jobs are covered by the PDB
    for pod in pods:
        slurm = slurm_nodes.get(pod.labels.get(Keys.NODE_NAME_LABEL, pod.name))
        if slurm_fresh and slurm is not None:
            result.busy_labels[pod.name] = slurm.busy
    # removals already under way (annotated on the pod, so they survive restarts)
    removing = {p.name: p.annotations.get(Keys.REMOVAL, "") for p in pods if p.annotations.get(Keys.REMOVAL)}
    # new scale-in: pods no longer desired
    for pod in pods:
        if pod.name not in desired and pod.name not in removing and not pod.terminating:
            result.mark_removal[pod.name] = "scale-in"
    # rolling update: replace outdated pods, at most maxUnavailable members down at once
    if spec.strategy == "RollingUpdate":
        unavailable = sum(
            1
            for name in desired
            if name not in by_name
            or not _ready(by_name[name])
            or name in removing
            or name in result.mark_removal
        )
        budget = spec.max_unavailable_count(len(desired)) - unavailable
        outdated = [
            by_name[name]
            for name in desired
            if name in by_name
            and by_name[name].labels.get(Keys.TEMPLATE_HASH_LABEL) != current_hash
            and name not in removing
            and not by_name[name].terminating
        ]

        def idle_first(pod: KubePod) -> tuple[int, int, str]:
            slurm = slurm_nodes.get(pod.labels.get(Keys.NODE_NAME_LABEL, pod.name))
            return (1 if slurm is None or slurm.busy else 0, -_ordinal(nodeset.name, pod.name), pod.name)

        for pod in sorted(outdated, key=idle_first):
            if budget <= 0:
                break
            result.mark_removal[pod.name] = "update"
            budget -= 1
    # removals in progress: delete the pod once its Slurm node is drained and idle
    for name in sorted(removing):
        pod = by_name[name]
        if pod.terminating:
            continue
        if not slurm_fresh:
            result.blocked = "Slurm data is stale or missing: nothing is removed until it is fresh"
            result.draining.append(name)
            continue
        slurm = slurm_nodes.get(pod.labels.get(Keys.NODE_NAME_LABEL, name))
        if slurm is None or slurm.drained:
            result.delete_pods.append(name)  # never registered, or drained with no jobs left
            continue
        result.draining.append(name)
        since = float(pod.annotations.get(Keys.REMOVAL_SINCE, "0") or 0)
        if since and now - since > spec.drain_timeout_s:
            result.timed_out.append(name)
    # Slurm node records of members gone for good (scale-in, including after a restart mid-way)
    if spec.node_on_scale_in == "Delete" and slurm_fresh:
        reason = scale_in_reason(nodeset.name, owner_prefix)
        for name, slurm in sorted(slurm_nodes.items()):
            if name in by_name or name in desired:
                continue
            if not name.startswith(nodeset.name + "-") or not slurm.reason.startswith(reason) or slurm.busy:
                continue
            result.delete_slurm_nodes.append(name)
    return result
