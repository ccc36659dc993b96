"""What every compact decoder shares (decode.py, decode_scheduling.py): object and list metadata, conditions,
watch events and Status bodies, and the sharing of strings every object repeats."""

from __future__ import annotations

import functools
import sys
from datetime import datetime
from typing import Generic, TypedDict, TypeVar

import msgspec

from syncer.model.kube import Condition


class RawCondition(msgspec.Struct):
    type: str = ""
    status: str = "Unknown"
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None


class RawOwner(msgspec.Struct):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class RawMeta(msgspec.Struct):
    """An object's metadata, as far as any decoder reads it."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[RawOwner] | None = None


class RawObject(msgspec.Struct):
    """Any object: its metadata; each decoder's object adds the spec and status it reads."""

    metadata: RawMeta = msgspec.field(default_factory=RawMeta)


class ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # `continue` is a Python keyword: renamed on decode
    continue_: str = msgspec.field(default="", name="continue")


Item = TypeVar("Item")


class RawList(msgspec.Struct, Generic[Item]):
    """A list body of any kind: its items and where the list stands."""

    metadata: ListMeta
    items: list[Item] = msgspec.field(default_factory=list)


class StatusBody(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""
    metadata: ListMeta | None = None


class RawEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


# Strings every object repeats (condition types, statuses, reasons and messages, label and annotation
# keys) are shared instead of held once per object: at 10,000 pods and 10,000 Nodes that was about 16 of
# the 37 MB the informers held (tracemalloc). Values (mostly per-object names) are kept as decoded.
_SHARED_MAX_LEN = 256


def shared(text: str) -> str:
    return sys.intern(text) if len(text) <= _SHARED_MAX_LEN else text


def shared_keys(raw: dict[str, str] | None) -> dict[str, str]:
    return {sys.intern(k): v for k, v in raw.items()} if raw else {}


class Identity(TypedDict):
    """The fields a namespaced object's struct (syncer.model.kube) starts with, from its metadata."""

    namespace: str
    name: str
    uid: str
    resource_version: str


def identity(meta: RawMeta) -> Identity:
    """What every namespaced struct takes from `meta`, the same way: `KubePod(**identity(meta), ...)` (mypy
    checks each key against the struct's fields). Namespaces are few: shared."""
    return {
        "namespace": shared(meta.namespace),
        "name": meta.name,
        "uid": meta.uid,
        "resource_version": meta.resourceVersion,
    }


@functools.lru_cache(maxsize=4096)  # transition times repeat across objects: one float each
def epoch(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def conditions(raw: list[RawCondition] | None) -> tuple[Condition, ...]:
    if not raw:
        return ()
    return tuple(
        Condition(
            type=sys.intern(c.type),
            status=sys.intern(c.status),
            reason=shared(c.reason),
            message=shared(c.message),
            last_transition_time=epoch(c.lastTransitionTime),
        )
        for c in raw
    )
