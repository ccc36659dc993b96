"""Raw Kubernetes JSON straight into the compact structs of syncer.model.kube (msgspec, typed):
only the fields the syncer reads are materialised, the rest of each object is skipped unparsed."""

from __future__ import annotations

import functools
import sys
from datetime import datetime
from typing import Any

import msgspec

from syncer.model.kube import Condition, KubeCustomObject, KubeNode, KubeNodeSet, KubePod


class _RawCondition(msgspec.Struct):
    type: str = ""
    status: str = "Unknown"
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None


class _RawOwner(msgspec.Struct):
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class _RawMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    deletionTimestamp: str | None = None
    ownerReferences: list[_RawOwner] | None = None


class _RawNodeSpec(msgspec.Struct):
    unschedulable: bool = False


class _RawPodSpec(msgspec.Struct):
    nodeName: str = ""
    hostname: str = ""
    hostNetwork: bool = False


class _RawStatus(msgspec.Struct):
    phase: str = ""
    conditions: list[_RawCondition] | None = None


class _RawWaiting(msgspec.Struct):
    reason: str = ""


class _RawContainerState(msgspec.Struct):
    waiting: _RawWaiting | None = None


class _RawContainerStatus(msgspec.Struct):
    name: str = ""
    state: _RawContainerState = msgspec.field(default_factory=_RawContainerState)


class _RawPodStatus(_RawStatus):
    initContainerStatuses: list[_RawContainerStatus] | None = None
    containerStatuses: list[_RawContainerStatus] | None = None


class _RawObject(msgspec.Struct):
    metadata: _RawMeta = msgspec.field(default_factory=_RawMeta)
    status: _RawStatus = msgspec.field(default_factory=_RawStatus)


class _RawNode(_RawObject):
    spec: _RawNodeSpec = msgspec.field(default_factory=_RawNodeSpec)


class _RawPod(_RawObject):
    spec: _RawPodSpec = msgspec.field(default_factory=_RawPodSpec)
    status: _RawPodStatus = msgspec.field(default_factory=_RawPodStatus)


class _RawNodeSetMeta(_RawMeta):
    generation: int = 0


class _RawNodeSet(msgspec.Struct):
    metadata: _RawNodeSetMeta = msgspec.field(default_factory=_RawNodeSetMeta)
    spec: dict[str, Any] = msgspec.field(default_factory=dict)
    status: dict[str, Any] = msgspec.field(default_factory=dict)


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # `continue` is a Python keyword: renamed on decode
    continue_: str = msgspec.field(default="", name="continue")


class _NodeSetList(msgspec.Struct):
    metadata: _ListMeta
    items: list[_RawNodeSet] = msgspec.field(default_factory=list)


class _CustomList(msgspec.Struct):
    metadata: _ListMeta
    items: list[dict[str, Any]] = msgspec.field(default_factory=list)


class _NodeList(msgspec.Struct):
    metadata: _ListMeta
    items: list[_RawNode] = msgspec.field(default_factory=list)


class _PodList(msgspec.Struct):
    metadata: _ListMeta
    items: list[_RawPod] = msgspec.field(default_factory=list)


class _StatusBody(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""
    metadata: _ListMeta | None = None


class _NodeEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


# Strings every object repeats (condition types, statuses, reasons and messages, label and annotation
# keys) are shared instead of held once per object: at 10,000 pods and 10,000 Nodes that was about 16 of
# the 37 MB the informers held (tracemalloc). Values (mostly per-object names) are kept as decoded.
_SHARED_MAX_LEN = 256


def _shared(text: str) -> str:
    return sys.intern(text) if len(text) <= _SHARED_MAX_LEN else text


def _shared_keys(raw: dict[str, str] | None) -> dict[str, str]:
    return {sys.intern(k): v for k, v in raw.items()} if raw else {}


@functools.lru_cache(maxsize=4096)  # transition times repeat across objects: one float each
def epoch(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _conditions(raw: list[_RawCondition] | None) -> tuple[Condition, ...]:
    if not raw:
        return ()
    return tuple(
        Condition(
            type=sys.intern(c.type),
            status=sys.intern(c.status),
            reason=_shared(c.reason),
            message=_shared(c.message),
            last_transition_time=epoch(c.lastTransitionTime),
        )
        for c in raw
    )


def _node(raw: _RawNode) -> KubeNode:
    meta = raw.metadata
    return KubeNode(
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resourceVersion,
        unschedulable=raw.spec.unschedulable,
        labels=_shared_keys(meta.labels),
        annotations=_shared_keys(meta.annotations),
        conditions=_conditions(raw.status.conditions),
    )


def _pod(raw: _RawPod) -> KubePod:
    meta = raw.metadata
    owner = next((o for o in meta.ownerReferences or () if o.controller), None)
    return KubePod(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resourceVersion,
        node_name=raw.spec.nodeName,
        hostname=raw.spec.hostname,
        host_network=raw.spec.hostNetwork,
        labels=_shared_keys(meta.labels),
        annotations=_shared_keys(meta.annotations),
        deletion_timestamp=epoch(meta.deletionTimestamp) if meta.deletionTimestamp else None,
        phase=sys.intern(raw.status.phase),
        conditions=_conditions(raw.status.conditions),
        owner_kind=owner.kind if owner else "",
        owner_name=owner.name if owner else "",
        owner_uid=owner.uid if owner else "",
        created=epoch(meta.creationTimestamp),
        waiting=_waiting(raw.status),
    )


def _waiting(status: _RawPodStatus) -> tuple[tuple[str, str], ...]:
    found = [
        (c.name, sys.intern(c.state.waiting.reason))
        for c in (status.initContainerStatuses or []) + (status.containerStatuses or [])
        if c.state.waiting is not None and c.state.waiting.reason
    ]
    return tuple(found) if found else ()


def _nodeset(raw: _RawNodeSet) -> KubeNodeSet:
    meta = raw.metadata
    return KubeNodeSet(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resourceVersion,
        generation=meta.generation,
        deleting=meta.deletionTimestamp is not None,
        spec=raw.spec,
        status=raw.status,
    )


def _custom(raw: dict[str, Any]) -> KubeCustomObject:
    meta = raw.get("metadata") or {}
    return KubeCustomObject(
        name=str(meta.get("name", "")), resource_version=str(meta.get("resourceVersion", "")), body=raw
    )


# kinds kept whole (custom resources read by pure code as the API server serves them)
WHOLE = frozenset({"SlurmPartition", "SlinkyNodeSet", "SlinkyController"})


class Codec:
    """Decoders for one kind: list bodies, single objects and watch events."""

    def __init__(self, kind: str) -> None:
        if kind == "Node":
            self._list: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_NodeList)
            self._one: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_RawNode)
            self._convert: Any = _node
        elif kind == "Pod":
            self._list = msgspec.json.Decoder(_PodList)
            self._one = msgspec.json.Decoder(_RawPod)
            self._convert = _pod
        elif kind == "NodeSet":
            self._list = msgspec.json.Decoder(_NodeSetList)
            self._one = msgspec.json.Decoder(_RawNodeSet)
            self._convert = _nodeset
        elif kind in WHOLE:
            self._list = msgspec.json.Decoder(_CustomList)
            self._one = msgspec.json.Decoder(dict[str, Any])
            self._convert = _custom
        else:
            raise ValueError(f"no compact decoder for kind {kind!r}")
        self._event = msgspec.json.Decoder(_NodeEvent)
        self._status = msgspec.json.Decoder(_StatusBody)

    def decode_list(self, raw: bytes) -> tuple[list[Any], str, str]:
        """(objects, resourceVersion, continue token)."""
        body = self._list.decode(raw)
        return (
            [self._convert(item) for item in body.items],
            body.metadata.resourceVersion,
            body.metadata.continue_,
        )

    def decode_object(self, raw: bytes) -> Any:
        return self._convert(self._one.decode(raw))

    def decode_event(self, line: bytes) -> tuple[str, Any]:
        """(type, object): a compact struct, list metadata (BOOKMARK) or a Status (ERROR)."""
        event = self._event.decode(line)
        if event.type == "BOOKMARK":
            return event.type, self._status.decode(event.object).metadata
        if event.type == "ERROR":
            return event.type, self._status.decode(event.object)
        return event.type, self._convert(self._one.decode(event.object))
