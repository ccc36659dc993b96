"""Compact views of Kubernetes objects: only what the syncer reads, decoded from raw JSON."""

from __future__ import annotations

from typing import Any

import msgspec


class Condition(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: float = 0.0  # epoch seconds; 0 when absent


def find_condition(conditions: tuple[Condition, ...], type_: str) -> Condition | None:
    """The condition of that type, or None."""
    return next((cond for cond in conditions if cond.type == type_), None)


class Taint(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    value: str = ""
    effect: str = ""  # NoSchedule | PreferNoSchedule | NoExecute


class Toleration(msgspec.Struct, frozen=True, kw_only=True):
    key: str = ""  # "" with operator Exists: every key
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "": every effect
    toleration_seconds: int | None = None


# A pod's or a Node's resources as kube-scheduler compares them (syncer/model/quantity.py): resource name ->
# millicores for "cpu", whole units (rounded up) for every other resource (bytes, GPUs, pods)
Resources = dict[str, int]


class KubeNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    uid: str = ""
    resource_version: str = ""
    unschedulable: bool = False
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()
    allocatable: Resources = msgspec.field(default_factory=dict)  # status.allocatable, incl. "pods"
    taints: tuple[Taint, ...] = ()

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)


class Namespaced(msgspec.Struct, frozen=True, kw_only=True):
    """An object of a namespace: its fields come first, and its key is `namespace/name`."""

    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class KubePod(Namespaced, frozen=True, kw_only=True):
    uid: str = ""
    resource_version: str = ""
    node_name: str = ""  # spec.nodeName; empty while unscheduled
    hostname: str = ""  # spec.hostname (Slinky's pods: the Slurm node name)
    host_network: bool = False
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    deletion_timestamp: float | None = None  # epoch seconds
    phase: str = ""
    conditions: tuple[Condition, ...] = ()
    owner_kind: str = ""
    owner_name: str = ""
    owner_uid: str = ""  # of the controlling owner: who owns a pod is decided by identity, not name
    created: float = 0.0  # metadata.creationTimestamp (epoch seconds; 0: unknown)
    # (container, reason) of each container waiting with a reason, init containers first (ImagePullBackOff,
    # CrashLoopBackOff, ...): what a member's pod failing to start looks like without a GET
    waiting: tuple[tuple[str, str], ...] = ()

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def ended(self) -> bool:
        """Failed (evicted, its Node shut down) or Succeeded: every container has ended, for good."""
        return self.phase in ("Succeeded", "Failed")

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)


class NodeSetRef(Namespaced, frozen=True, kw_only=True):
    """A NodeSet's identity: two NodeSets of one name in two namespaces, or one deleted and created
    again, are different owners."""

    uid: str


class KubeNodeSet(Namespaced, frozen=True, kw_only=True):
    """A NodeSet custom resource: spec and status kept as decoded JSON (few objects, rich shape)."""

    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    deleting: bool = False
    spec: dict[str, object] = msgspec.field(default_factory=dict)
    status: dict[str, object] = msgspec.field(default_factory=dict)

    @property
    def ref(self) -> NodeSetRef:
        return NodeSetRef(namespace=self.namespace, name=self.name, uid=self.uid)


class KubeCustomObject(msgspec.Struct, frozen=True, kw_only=True):
    """A custom resource kept whole as decoded JSON (a SlurmPartition, Slinky's NodeSets and Controllers: few
    objects, read by pure code that takes the object as the API server serves it)."""

    name: str
    resource_version: str = ""
    body: dict[str, Any] = msgspec.field(default_factory=dict)


class OwnerRef(msgspec.Struct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class NodeSelectorRequirement(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


class NodeSelectorTerm(msgspec.Struct, frozen=True, kw_only=True):
    """One term of required node affinity: all of its requirements hold (ORed with the other terms)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()  # metadata.name only


class SchedulerPod(Namespaced, frozen=True, kw_only=True):
    """A pod a scheduler name owns, as the one-pool scheduler reads it (syncer/kube/scheduler_pods.py):
    what it asks for, where it may go, who owns it and how it ends. `requests` and `limits` are the pod's
    effective ones as kube-scheduler computes them (containers summed, init containers' peak, sidecars,
    overhead, pod-level resources); a quantity that cannot be read is left out and named in
    `resources_error`. Maps (labels, annotations, requests ...) are shared between pods that have equal
    ones: read only."""

    uid: str = ""
    resource_version: str = ""
    creation_timestamp: float = 0.0  # epoch seconds
    scheduler_name: str = ""
    node_name: str = ""  # "" until bound
    phase: str = ""
    deletion_timestamp: float | None = None  # epoch seconds
    termination_grace_period_s: int = 30  # spec.terminationGracePeriodSeconds
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    owners: tuple[OwnerRef, ...] = ()
    requests: Resources = msgspec.field(default_factory=dict)
    limits: Resources = msgspec.field(default_factory=dict)
    resources_error: str = ""  # e.g. 'spec.containers[0].resources.requests[cpu]: "lots" is not a quantity'
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    affinity: tuple[NodeSelectorTerm, ...] = ()  # required node affinity; () when none
    tolerations: tuple[Toleration, ...] = ()
    scheduling_gates: tuple[str, ...] = ()  # a gated pod cannot be bound (409)
    priority: int | None = None  # spec.priority, from the PriorityClass
    conditions: tuple[Condition, ...] = ()  # PodScheduled, Ready and DisruptionTarget only

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def ended(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def controller(self) -> OwnerRef | None:
        """The controlling owner (a Job, a ReplicaSet ...), if any."""
        return next((o for o in self.owners if o.controller), None)

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)


class PodUsage(Namespaced, frozen=True, kw_only=True):
    """A pod bound to a Node, as far as the Node's room goes: what it requests while it has not ended."""

    uid: str = ""
    node_name: str = ""
    phase: str = ""
    terminating: bool = False  # still holds its resources until it is gone
    requests: Resources = msgspec.field(default_factory=dict)


class KubeJob(Namespaced, frozen=True, kw_only=True):
    """A batch/v1 Job: how many pods it runs at once and how far it is."""

    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    parallelism: int = 1
    completions: int | None = None  # None: a work queue (done when any pod succeeds)
    completion_mode: str = "NonIndexed"
    suspend: bool = False
    backoff_limit: int = 6
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: bool = False  # metadata.deletionTimestamp set
    conditions: tuple[Condition, ...] = ()

    @property
    def finished(self) -> bool:
        return any(c.type in ("Complete", "Failed") and c.status == "True" for c in self.conditions)
