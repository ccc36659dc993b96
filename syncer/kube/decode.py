"""Raw Kubernetes JSON straight into the compact structs of syncer.model.kube (msgspec, typed):
only the fields the syncer reads are materialised, the rest of each object is skipped unparsed."""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from syncer.kube import decode_scheduling as scheduling
from syncer.kube.decode_base import (
    RawCondition,
    RawEvent,
    RawList,
    RawMeta,
    RawObject,
    StatusBody,
    conditions,
    epoch,
    identity,
    shared_keys,
)
from syncer.model.kube import KubeCustomObject, KubeNode, KubeNodeSet, KubePod


class _RawNodeSpec(msgspec.Struct):
    unschedulable: bool = False
    taints: list[scheduling.RawTaint] | None = None


class _RawPodSpec(msgspec.Struct):
    nodeName: str = ""
    hostname: str = ""
    hostNetwork: bool = False


class _RawStatus(msgspec.Struct):
    phase: str = ""
    conditions: list[RawCondition] | None = None


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


class _RawNodeStatus(_RawStatus):
    allocatable: dict[str, Any] | None = None


class _RawNode(RawObject):
    status: _RawNodeStatus = msgspec.field(default_factory=_RawNodeStatus)
    spec: _RawNodeSpec = msgspec.field(default_factory=_RawNodeSpec)


class _RawPod(RawObject):
    spec: _RawPodSpec = msgspec.field(default_factory=_RawPodSpec)
    status: _RawPodStatus = msgspec.field(default_factory=_RawPodStatus)


class _RawNodeSetMeta(RawMeta):
    generation: int = 0


class _RawNodeSet(msgspec.Struct):
    metadata: _RawNodeSetMeta = msgspec.field(default_factory=_RawNodeSetMeta)
    spec: dict[str, Any] = msgspec.field(default_factory=dict)
    status: dict[str, Any] = msgspec.field(default_factory=dict)


def _node(raw: _RawNode) -> KubeNode:
    meta = raw.metadata
    return KubeNode(
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resourceVersion,
        unschedulable=raw.spec.unschedulable,
        labels=shared_keys(meta.labels),
        annotations=shared_keys(meta.annotations),
        conditions=conditions(raw.status.conditions),
        allocatable=scheduling.pooled(
            scheduling.resources_of(raw.status.allocatable, "status.allocatable", [])
        ),
        taints=scheduling.taints(raw.spec.taints) if raw.spec.taints else (),
    )


def _pod(raw: _RawPod) -> KubePod:
    meta = raw.metadata
    owner = next((o for o in meta.ownerReferences or () if o.controller), None)
    return KubePod(
        **identity(meta),
        node_name=raw.spec.nodeName,
        hostname=raw.spec.hostname,
        host_network=raw.spec.hostNetwork,
        labels=shared_keys(meta.labels),
        annotations=shared_keys(meta.annotations),
        deletion_timestamp=epoch(meta.deletionTimestamp) if meta.deletionTimestamp else None,
        phase=sys.intern(raw.status.phase),
        conditions=conditions(raw.status.conditions),
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
        **identity(meta),
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


# the one-pool scheduler's views (scheduling.py): raw item type and conversion, by kind
_SCHEDULING: dict[str, tuple[type[Any], Any]] = {
    "SchedulerPod": (scheduling.RawSchedulerPod, scheduling.scheduler_pod),
    "PodUsage": (scheduling.RawPodUsage, scheduling.pod_usage),
    "Job": (scheduling.RawJob, scheduling.job),
}


# kinds kept whole (custom resources read by pure code as the API server serves them)
WHOLE = frozenset({"SlurmPartition", "SlinkyNodeSet", "SlinkyController"})


class Codec:
    """Decoders for one kind: list bodies, single objects and watch events."""

    def __init__(self, kind: str) -> None:
        if kind == "Node":
            self._list: msgspec.json.Decoder[Any] = msgspec.json.Decoder(RawList[_RawNode])
            self._one: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_RawNode)
            self._convert: Any = _node
        elif kind == "Pod":
            self._list = msgspec.json.Decoder(RawList[_RawPod])
            self._one = msgspec.json.Decoder(_RawPod)
            self._convert = _pod
        elif kind == "NodeSet":
            self._list = msgspec.json.Decoder(RawList[_RawNodeSet])
            self._one = msgspec.json.Decoder(_RawNodeSet)
            self._convert = _nodeset
        elif kind in _SCHEDULING:
            item, self._convert = _SCHEDULING[kind]
            self._one = msgspec.json.Decoder(item)
            self._list = msgspec.json.Decoder(RawList[item])  # type: ignore[valid-type]
        elif kind in WHOLE:
            self._list = msgspec.json.Decoder(RawList[dict[str, Any]])
            self._one = msgspec.json.Decoder(dict[str, Any])
            self._convert = _custom
        else:
            raise ValueError(f"no compact decoder for kind {kind!r}")
        self._event = msgspec.json.Decoder(RawEvent)
        self._status = msgspec.json.Decoder(StatusBody)

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
