"""What a NodeSet needs next, as a pure function of its spec, its pods, the Kubernetes Nodes and
the Slurm nodes. No I/O: the reconciler carries the plan out and calls again.

A pod's name is its Slurm node name. Removals (scale-in and rolling update) are recorded on the pod
as an annotation, so a restarted syncer carries on where it stopped; the pod is deleted only once
its Slurm node is drained with nothing running or completing, and only on fresh Slurm data. A pod that
ended (phase Failed or Succeeded: evicted, or slurmd exited) runs nothing: it is deleted whatever Slurm
shows, and its member, if it stays one, gets a new pod once the old one is gone (as a StatefulSet does).

Ownership is by identity, never by name prefix or reason text: a pod is the NodeSet's when its
controlling ownerReference carries the NodeSet's UID; a Slurm record is being removed by the
NodeSet when its comment carries the NodeSet's removal stamp (namespace, name and UID), written
when the removal starts and cleared when it is cancelled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from syncer.controllers.nodeset.power import PowerDecision, decide_power, declared_stamp
from syncer.controllers.nodeset.spec import NodeSetSpec
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubeNodeSet, KubePod
from syncer.model.slurm import SlurmNode

SCALE_IN = "scale-in"
UPDATE = "update"
STALE = "Slurm data is stale or missing: nothing is removed until it is fresh"


@dataclass(frozen=True)
class Member:
    """One slurmd the NodeSet should have: its pod name is also its Slurm node name."""

    name: str
    ordinal: int = -1  # Replicas mode
    node_name: str = ""  # DaemonSet mode: the Kubernetes Node it is pinned to


@dataclass
class Plan:
    desired: int = 0
    create: list[Member] = field(default_factory=list)
    mark_removal: dict[str, str] = field(default_factory=dict)  # pod -> SCALE_IN | UPDATE
    unmark: list[str] = field(default_factory=list)  # scale-in cancelled by a scale-out
    delete_pods: list[str] = field(default_factory=list)
    ended: dict[str, bool] = field(default_factory=dict)  # of those, pods that ended -> their member stays
    delete_slurm_nodes: list[str] = field(default_factory=list)
    draining: list[str] = field(default_factory=list)  # being removed, waiting for Slurm to drain
    timed_out: list[str] = field(default_factory=list)  # draining for longer than drainTimeout
    busy_labels: dict[str, bool] = field(default_factory=dict)  # pod -> should carry the busy label
    scale_in_marks: set[str] = field(default_factory=set)  # Slurm nodes the engine drains for us
    stamp: list[str] = field(default_factory=list)  # Slurm nodes to mark with removal_stamp()
    unstamp: list[str] = field(default_factory=list)  # ... whose mark goes: the removal was cancelled
    unstampable: list[str] = field(default_factory=list)  # someone else's comment: record kept
    blocked: str = ""  # why removals wait
    power: PowerDecision | None = None  # spec.power: declarations, power-downs (see power.py)

    @property
    def idle(self) -> bool:
        power = self.power
        return self.idle_but_declares and not (power is not None and (power.declare or power.more))

    @property
    def idle_but_declares(self) -> bool:
        """Nothing to do but declare members (and the ones past the per-pass bound): all that a REST version
        unable to create nodes leaves to do, and only another version can do it."""
        power = self.power
        return not (
            self.create
            or self.mark_removal
            or self.unmark
            or self.delete_pods
            or self.delete_slurm_nodes
            or self.draining
            or (
                power is not None
                and bool(
                    power.power_down_pods
                    or power.replace
                    or power.undeclare
                    or power.force_down
                    or power.resume
                    or power.undrain
                )
            )
        )


def member_name(nodeset: str, node: str) -> str:
    """DaemonSet mode: `<nodeset>-<node>` as a DNS label (dots of FQDN node names become dashes)."""
    return f"{nodeset}-{node}".replace(".", "-")[:63].rstrip("-")


def ordinal(nodeset: str, name: str) -> int:
    match = re.fullmatch(re.escape(nodeset) + r"-(\d+)", name)
    return int(match.group(1)) if match else -1


def ready(pod: KubePod) -> bool:
    cond = pod.condition("Ready")
    return cond is not None and cond.status == "True" and not pod.terminating


def slurm_name(pod: KubePod) -> str:
    return pod.labels.get(Keys.NODE_NAME_LABEL, pod.name)


def scale_in_text(nodeset: str) -> str:
    return f"scale-in of NodeSet {nodeset}"


def owns(nodeset: KubeNodeSet, pod: KubePod) -> bool:
    """The pod's controlling owner is this NodeSet (same UID; the namespace is the pod's own)."""
    return bool(nodeset.uid) and pod.owner_uid == nodeset.uid and pod.namespace == nodeset.namespace


def removal_stamp(nodeset: KubeNodeSet) -> str:
    """The Slurm node comment that says this NodeSet, and only it, is removing the node."""
    return f"{Keys.NODESET_LABEL}={nodeset.namespace}/{nodeset.name} uid={nodeset.uid}"


def declaring_of(nodeset: KubeNodeSet) -> frozenset[str]:
    """The members whose declare the NodeSet recorded in its status before sending it (`power.declaring`):
    a record under such a name with no comment yet is its own (the comment follows the create), any other
    such record is not."""
    power = nodeset.status.get("power")
    names = power.get("declaring") if isinstance(power, dict) else None
    return frozenset(n for n in names if isinstance(n, str)) if isinstance(names, list) else frozenset()


def removed_by_us(slurm: SlurmNode, nodeset: KubeNodeSet, owner_prefix: str) -> bool:
    """Being removed by this NodeSet (its stamp, by identity) and drained by the syncer (an admin's
    own drain reason means the admin owns the node now)."""
    return (
        bool(nodeset.uid)
        and slurm.comment == removal_stamp(nodeset)
        and slurm.reason.startswith(owner_prefix)
    )


def removable(slurm: SlurmNode) -> bool:
    """Its pod may go: drained with nothing running or completing, or DOWN (with someone else's
    reason, which the syncer does not overwrite) and so running nothing either."""
    return slurm.drained or (slurm.base_state == "DOWN" and not slurm.busy)


def removal_of(pod: KubePod) -> str:
    return pod.annotations.get(Keys.REMOVAL, "")


def _power_members(
    nodeset: KubeNodeSet,
    spec: NodeSetSpec,
    pods: list[KubePod],
    slurm_nodes: dict[str, SlurmNode],
    result: Plan,
    slurm_fresh: bool,
    owner_prefix: str,
    in_flight: frozenset[str],
) -> list[str]:
    """spec.power: Slurm's power states decide which members have pods (power.py)."""
    assert spec.power is not None
    decision = decide_power(
        nodeset.name, spec.power, pods, slurm_nodes,
        removal_stamp=removal_stamp(nodeset), ordinal=lambda name: ordinal(nodeset.name, name),
        slurm_fresh=slurm_fresh, owner_prefix=owner_prefix, declaring=declaring_of(nodeset),
        in_flight=in_flight,
    )  # fmt: skip
    result.power = decision
    result.unmark.extend(decision.unmark)
    result.mark_removal.update(dict.fromkeys(decision.scale_in, SCALE_IN))
    result.create = [Member(name, ordinal=decision.members[name]) for name in decision.create]
    if decision.stale:
        result.blocked = STALE
    return list(decision.members)


def _members(
    nodeset: KubeNodeSet,
    spec: NodeSetSpec,
    pods: list[KubePod],
    slurm_nodes: dict[str, SlurmNode],
    nodes: list[KubeNode],
    result: Plan,
    slurm_fresh: bool,
    owner_prefix: str,
    in_flight: frozenset[str],
) -> list[str]:
    """The names of the members the NodeSet keeps; records scale-in marks, cancellations and new members."""
    by_name = {p.name: p for p in pods}
    if spec.power is not None:
        return _power_members(nodeset, spec, pods, slurm_nodes, result, slurm_fresh, owner_prefix, in_flight)
    if spec.mode == "DaemonSet":
        desired = {}
        for node in nodes:
            if all(node.labels.get(k) == v for k, v in spec.node_selector.items()):
                name = member_name(nodeset.name, node.name)
                desired[name] = Member(name, node_name=node.name)
        for pod in pods:
            if pod.name in desired and removal_of(pod) == SCALE_IN and not pod.terminating:
                result.unmark.append(pod.name)  # its Node matches again
            elif pod.name not in desired and not removal_of(pod) and not pod.terminating:
                result.mark_removal[pod.name] = SCALE_IN
        result.create = [m for name, m in sorted(desired.items()) if name not in by_name]
        return list(desired)
    # Replicas: every pod not being scaled in is a member (a terminating one holds its name until it
    # is gone, then is recreated under it, as a StatefulSet does).
    kept = [p for p in pods if removal_of(p) != SCALE_IN]
    scaling_in = sorted(
        (p for p in pods if removal_of(p) == SCALE_IN and not p.terminating),
        key=lambda p: (ordinal(nodeset.name, p.name), p.name),
    )
    members = dict.fromkeys(p.name for p in kept)  # names, in order
    if len(kept) > spec.replicas:

        def removal_order(pod: KubePod) -> tuple[int, int, int, str]:
            # unregistered or not-ready first, then idle, then busy; highest ordinal first among equals
            slurm = slurm_nodes.get(slurm_name(pod))
            rank = 0 if slurm is None or not ready(pod) else (2 if slurm.busy else 1)
            return (rank, 1 if removal_of(pod) == UPDATE else 0, -ordinal(nodeset.name, pod.name), pod.name)

        candidates = sorted((p for p in kept if not p.terminating), key=removal_order)
        for pod in candidates[: len(kept) - spec.replicas]:
            result.mark_removal[pod.name] = SCALE_IN
            del members[pod.name]
    elif len(kept) < spec.replicas:
        missing = spec.replicas - len(kept)
        for pod in scaling_in[:missing]:  # cancel a scale-in before adding new ordinals
            result.unmark.append(pod.name)
            members[pod.name] = None
        missing -= min(missing, len(scaling_in))
        index = 0
        while missing:
            name = f"{nodeset.name}-{index}"
            if name not in by_name:
                members[name] = None
                result.create.append(Member(name, ordinal=index))
                missing -= 1
            index += 1
    return list(members)


@dataclass(frozen=True)
class _Seen:
    """What every step of one plan reads: the NodeSet, its pods by name, the Slurm records and whether they
    are fresh."""

    nodeset: KubeNodeSet
    spec: NodeSetSpec
    by_name: dict[str, KubePod]
    slurm_nodes: dict[str, SlurmNode]
    slurm_fresh: bool
    owner_prefix: str


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
    in_flight: frozenset[str] = frozenset(),
) -> Plan:
    """`in_flight`: power members declared a moment ago that the Slurm data does not show yet (power.py)."""
    result = Plan()
    by_name = {p.name: p for p in pods}
    members = _members(nodeset, spec, pods, slurm_nodes, nodes, result, slurm_fresh, owner_prefix, in_flight)
    result.desired = len(members)
    # busy label: pods whose Slurm node runs or finishes jobs are covered by the PodDisruptionBudget
    if slurm_fresh:
        for pod in pods:
            slurm = slurm_nodes.get(slurm_name(pod))
            result.busy_labels[pod.name] = slurm is not None and slurm.busy
    removing = {p.name: removal_of(p) for p in pods if removal_of(p) and p.name not in result.unmark}
    seen = _Seen(nodeset, spec, by_name, slurm_nodes, slurm_fresh, owner_prefix)
    if spec.strategy == "RollingUpdate":
        _rolling_update(seen, members, removing, result)
    for name in result.mark_removal:
        removing[name] = result.mark_removal[name]
    _stamps(seen, removing, result)
    _removals(seen, removing, now, result)
    _ended(seen, members, result)
    if spec.node_on_scale_in == "Delete":
        _delete_records(seen, result)
    return result


def _rolling_update(seen: _Seen, members: list[str], removing: dict[str, str], result: Plan) -> None:
    """Rolling update: replace outdated members, at most maxUnavailable of them down at once."""
    current_hash = seen.spec.template_hash()
    unavailable = sum(
        1
        for name in members
        if name not in seen.by_name
        or not ready(seen.by_name[name])
        or name in removing
        or name in result.mark_removal
    )
    budget = seen.spec.max_unavailable_count(len(members)) - unavailable
    outdated = [
        seen.by_name[name]
        for name in members
        if name in seen.by_name
        and seen.by_name[name].labels.get(Keys.TEMPLATE_HASH_LABEL) != current_hash
        and name not in removing
        and name not in result.mark_removal
        and not seen.by_name[name].terminating
    ]

    def idle_first(pod: KubePod) -> tuple[int, int, str]:
        slurm = seen.slurm_nodes.get(slurm_name(pod))
        return (1 if slurm is not None and slurm.busy else 0, -ordinal(seen.nodeset.name, pod.name), pod.name)

    for pod in sorted(outdated, key=idle_first):
        if budget <= 0:
            break
        result.mark_removal[pod.name] = UPDATE
        budget -= 1


def _removals(seen: _Seen, removing: dict[str, str], now: float, result: Plan) -> None:
    """Removals in progress: delete the pod once its Slurm node is drained and idle."""
    for name in sorted(removing):
        pod = seen.by_name[name]
        result.scale_in_marks.add(slurm_name(pod))  # kept while terminating: the reason says why
        if pod.terminating or pod.ended:
            continue  # an ended pod goes at once (_ended)
        if name in result.mark_removal:
            result.draining.append(name)  # the drain is requested this round
            continue
        if not seen.slurm_fresh:
            result.blocked = STALE
            result.draining.append(name)
            continue
        slurm = seen.slurm_nodes.get(slurm_name(pod))
        if slurm is None or removable(slurm):
            result.delete_pods.append(name)  # never registered, or drained with no jobs left
            continue
        result.draining.append(name)
        since = float(pod.annotations.get(Keys.REMOVAL_SINCE, "0") or 0)
        if since and now - since > seen.spec.drain_timeout_s:
            result.timed_out.append(name)


def _ended(seen: _Seen, members: list[str], result: Plan) -> None:
    """Pods that ended (phase Failed or Succeeded, not yet deleted): their containers ended, so no job runs
    there whatever Slurm shows; each is deleted now, and a member that stays gets its pod back once it is
    gone (its name is held until then, as a terminating pod's is)."""
    for name, pod in sorted(seen.by_name.items()):
        if pod.ended and not pod.terminating:
            result.delete_pods.append(name)
            result.ended[name] = name in members


def _delete_records(seen: _Seen, result: Plan) -> None:
    """`Delete`: the Slurm records of members gone for good, and of members about to be recreated (so the
    new slurmd registers afresh with the new template's features)."""
    for name, slurm in sorted(seen.slurm_nodes.items()):
        if name in seen.by_name or not removed_by_us(slurm, seen.nodeset, seen.owner_prefix):
            continue
        if not seen.slurm_fresh:
            result.blocked = STALE
            continue
        if slurm.busy:
            continue
        result.delete_slurm_nodes.append(name)
    # a name whose old record is ours waits for that record to go before its pod is created
    result.create = [
        m
        for m in result.create
        if m.name not in seen.slurm_nodes
        or not removed_by_us(seen.slurm_nodes[m.name], seen.nodeset, seen.owner_prefix)
    ]


def _stamps(seen: _Seen, removing: dict[str, str], result: Plan) -> None:
    """Which Slurm records get this NodeSet's removal stamp (members being removed), and which lose
    it (members that stay: a cancelled removal, or a name reused under `Keep`). Fresh data only."""
    if not seen.slurm_fresh or not seen.nodeset.uid:
        return
    stamp = removal_stamp(seen.nodeset)
    for name, pod in sorted(seen.by_name.items()):
        slurm = seen.slurm_nodes.get(slurm_name(pod))
        if slurm is None:
            continue
        if name in removing:
            if slurm.comment != stamp:
                ours = slurm.comment in ("", declared_stamp(stamp))
                (result.stamp if ours else result.unstampable).append(slurm.name)
        elif slurm.comment == stamp and not pod.terminating:
            result.unstamp.append(slurm.name)
