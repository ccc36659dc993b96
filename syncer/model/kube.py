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


class KubeNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    uid: str = ""
    resource_version: str = ""
    unschedulable: bool = False
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()

    def condition(self, type_: str) -> Condition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None


class KubePod(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
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
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    def condition(self, type_: str) -> Condition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None


class NodeSetRef(msgspec.Struct, frozen=True, kw_only=True):
    """A NodeSet's identity: two NodeSets of one name in two namespaces, or one deleted and created
    again, are different owners."""

    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class KubeNodeSet(msgspec.Struct, frozen=True, kw_only=True):
    """A NodeSet custom resource: spec and status kept as decoded JSON (few objects, rich shape)."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    deleting: bool = False
    spec: dict[str, object] = msgspec.field(default_factory=dict)
    status: dict[str, object] = msgspec.field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def ref(self) -> NodeSetRef:
        return NodeSetRef(namespace=self.namespace, name=self.name, uid=self.uid)


class KubeCustomObject(msgspec.Struct, frozen=True, kw_only=True):
    """A custom resource kept whole as decoded JSON (a SlurmPartition, Slinky's NodeSets and Controllers: few
    objects, read by pure code that takes the object as the API server serves it)."""

    name: str
    resource_version: str = ""
    body: dict[str, Any] = msgspec.field(default_factory=dict)
