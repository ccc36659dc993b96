"""Drift: where Slurm and Kubernetes disagree, computed one way for `slurm-syncer status`, the demo
and (through the same `decide`) the engine's drift metric: a bound node drifts when the decision for
it would write something. A node being removed by a NodeSet is judged with its scale-in cause, as
the engine judges it (the removal annotation on its pod is what the NodeSet reconciler marks)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from syncer.control.binding import node_slurm, resolve
from syncer.control.holds import held_in
from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.plan import Decision, decide
from syncer.kube.cache import KubeCache
from syncer.model.keys import CORDONED_BY_SLURM, Keys
from syncer.model.kube import KubePod
from syncer.model.slurm import SlurmNode


@dataclass(frozen=True)
class Row:
    slurm_node: str
    binding: str
    pod: str
    kube_node: str
    slurm_state: str
    reason: str
    cordon: str  # "", "yes", or "slurm" (the syncer's own cordon)
    drift: bool
    conflict: str = ""
    would: str = ""  # what the syncer would write, when it drifts (describe())


def describe(decision: Decision) -> str:
    """What a decision would write, in a few words per side (for `status --drifting`)."""
    parts = []
    action = decision.slurm_action
    if action is not None:
        if action.kind == "drain":
            parts.append(
                f"{'update the drain reason' if action.redrain else 'drain'} in Slurm ({action.reason})"
            )
        else:
            parts.append(f"undrain in Slurm (lift {action.reason!r})")
    if decision.cordon:
        parts.append(f"{decision.cordon} the Node")
    if decision.annotations:
        keys = ", ".join(sorted(decision.annotations))
        parts.append(f"annotate the {decision.annotations_on or 'pod'}: {keys}")
    conditions = [c.type for c in (*decision.pod_conditions, *decision.node_conditions)]
    if conditions:
        parts.append(f"set condition(s) {', '.join(dict.fromkeys(conditions))}")
    return "; ".join(parts)


def scale_in_of(pod: KubePod | None) -> str | None:
    """The NodeSet removing this pod (scale-in or rolling update), as recorded on the pod itself."""
    if pod is None or not pod.annotations.get(Keys.REMOVAL):
        return None
    return pod.owner_name or pod.labels.get(Keys.NODESET_LABEL) or None


def drift_rows(
    cache: KubeCache,
    slurm_nodes: Mapping[str, SlurmNode],
    options: SyncOptions,
    now: float,
    *,
    include_unbound: bool = False,
) -> list[Row]:
    names = sorted(cache.slurm_names() | (set(slurm_nodes) if include_unbound else set()))
    rows = []
    for name in names:
        binding = resolve(name, cache)
        node, kube_node = slurm_nodes.get(name), binding.node
        cordon = ""
        if kube_node is not None and kube_node.unschedulable:
            cordon = "slurm" if kube_node.annotations.get(Keys.CORDONED_BY) == CORDONED_BY_SLURM else "yes"
        # the engine's decision (drift is a decision that writes something, plan.drift); a scheduler hold
        # is the running scheduler's to know: one shown in the reason is taken as still needed
        held = held_in(node.reason, options.owner_prefix) if node is not None else None
        decision = decide(
            node, binding.pod, kube_node, now=now, opts=options, slurm_fresh=True,
            scale_in_of=scale_in_of(binding.pod), node_slurm=node_slurm(binding, cache, slurm_nodes),
            held=held,
        ) if binding.bound else None  # fmt: skip
        drifted = decision is not None and decision.acts
        rows.append(
            Row(
                slurm_node=name,
                binding=binding.mode,
                pod=binding.pod.key if binding.pod else "",
                kube_node=kube_node.name if kube_node else "",
                slurm_state=node.state_text if node else "(missing)",
                reason=node.reason if node else "",
                cordon=cordon,
                drift=drifted,
                conflict=binding.conflict,
                would=describe(decision) if decision is not None and drifted else "",
            )
        )
    return rows
