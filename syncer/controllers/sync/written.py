"""Read-your-own-writes for the annotations the engine writes.

The Kubernetes cache learns of a write only when the watch event arrives. A reconcile of the same node in
between would see the old `state` annotation, report the same Slurm transition a second time and write the
annotations again. Only the syncer writes its annotations, so what it wrote last is the truth until the
cache shows it (or a short while has passed, or leadership changed hands)."""

from __future__ import annotations

import time
from typing import Any, TypeVar

import msgspec
from cachetools import TTLCache

from syncer.model.keys import ANNOTATION_PREFIX, Keys
from syncer.model.kube import KubeNode, KubePod
from syncer.model.slurm import SlurmNode

OUR_CONDITIONS = frozenset({Keys.CONDITION_DRAINED, Keys.CONDITION_HEALTHY})

T = TypeVar("T", KubePod, KubeNode)


class WrittenAnnotations:
    def __init__(self, ttl_s: float = 30.0) -> None:
        self.ttl_s = ttl_s
        # (kind, namespace/name) -> (uid, annotations written, None = deleted; when)
        self._written: dict[tuple[str, str], tuple[str, dict[str, str | None], float]] = {}

    @staticmethod
    def _key(obj: KubePod | KubeNode) -> tuple[str, str]:
        return ("pod", obj.key) if isinstance(obj, KubePod) else ("node", obj.name)

    def remember(self, obj: KubePod | KubeNode, annotations: dict[str, str | None]) -> None:
        key = self._key(obj)
        previous = self._written.get(key)
        merged = dict(previous[1]) if previous is not None and previous[0] == obj.uid else {}
        merged.update(annotations)
        self._written[key] = (obj.uid, merged, time.monotonic())

    def overlay(self, obj: T | None) -> T | None:
        """`obj` as the cache has it, with our newer annotation writes applied on top."""
        if obj is None:
            return None
        key = self._key(obj)
        entry = self._written.get(key)
        if entry is None:
            return obj
        uid, written, at = entry
        if uid != obj.uid or time.monotonic() - at > self.ttl_s:
            del self._written[key]
            return obj
        merged = dict(obj.annotations)
        for name, value in written.items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        if merged == obj.annotations:
            del self._written[key]  # the cache has caught up
            return obj
        return msgspec.structs.replace(obj, annotations=merged)

    def forget_all(self) -> None:
        self._written.clear()

    def prune(self) -> None:
        now = time.monotonic()
        for key in [k for k, (_uid, _a, at) in self._written.items() if now - at > self.ttl_s]:
            del self._written[key]

    def __len__(self) -> int:
        return len(self._written)


class WrittenObjects:
    """Read-your-own-writes for the next write's starting point: the object as our last write returned
    it (only what the writer diffs against), used while the cache still shows the version we wrote over.
    Without it the next write to the same object in a storm starts from a stale resourceVersion and costs
    a 409, a GET and a second PATCH."""

    def __init__(self, ttl_s: float = 30.0, maxsize: int = 65536) -> None:
        # (kind, key) -> (the cache's resourceVersion when we wrote, the written object's projection)
        self._written: TTLCache[tuple[str, str], tuple[str, dict[str, Any]]] = TTLCache(maxsize, ttl_s)

    @staticmethod
    def _key(obj: KubePod | KubeNode) -> tuple[str, str]:
        return ("pod", obj.key) if isinstance(obj, KubePod) else ("node", obj.name)

    def current(self, obj: KubePod | KubeNode, cached: dict[str, Any]) -> dict[str, Any]:
        """Our last write of `obj` if the cache has not caught up with it, else the cached object."""
        key = self._key(obj)
        entry = self._written.get(key)
        if entry is None:
            return cached
        if entry[0] != obj.resource_version:
            del self._written[key]  # the cache shows our write now, or someone else's after it
            return cached
        return entry[1]

    def remember(self, obj: KubePod | KubeNode, written: dict[str, Any]) -> None:
        """Keeps only what our writes diff against: our annotations, our conditions, the cordon and the
        resourceVersion (20,000 whole objects' metadata and conditions would hold ~60 MB)."""
        meta = written.get("metadata") or {}
        conditions = (written.get("status") or {}).get("conditions") or []
        self._written[self._key(obj)] = (
            obj.resource_version,
            {
                "metadata": {
                    "annotations": {
                        k: v
                        for k, v in (meta.get("annotations") or {}).items()
                        if k.startswith(ANNOTATION_PREFIX)
                    },
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "status": {"conditions": [c for c in conditions if c.get("type") in OUR_CONDITIONS]},
                "spec": {"unschedulable": bool((written.get("spec") or {}).get("unschedulable"))},
            },
        )

    def prune(self) -> None:
        """Drops what outlived its time (the cache expires lazily: only when written to)."""
        self._written.expire()

    def forget_all(self) -> None:
        self._written.clear()

    def __len__(self) -> int:
        return len(self._written)


class WrittenSlurm:
    """Echo suppression for our Slurm writes: the last drain or undrain sent per node, until a list asked
    for after it reaches the Slurm cache (a full list of a big cluster takes seconds); meanwhile the node is
    read once from slurmrestd and that read is what reconciles decide on."""

    def __init__(self) -> None:
        # last Slurm write per node (kind, reason, time.monotonic() it was done), to skip echoes
        self.sent: dict[str, tuple[str, str, float]] = {}
        self.read_after_write: dict[str, SlurmNode] = {}  # the node as read once since that write

    def caught_up(self, name: str, listed_at: float) -> None:
        """The Slurm cache changed for `name` in a list asked for at `listed_at` (time.monotonic()): from one
        asked for after our last write, decide from what it shows now. An older list (asked for before the
        write was done, answered after) shows the node as it was: it must not undo our write in Kubernetes."""
        sent = self.sent.get(name)
        if sent is None or listed_at > sent[2]:
            self.sent.pop(name, None)
            self.read_after_write.pop(name, None)

    def owed(self, name: str, listed_at: float) -> bool:
        """We wrote this Slurm node and no list asked for since the write (the cache's last was asked for
        at `listed_at`) has been applied to the cache."""
        sent = self.sent.get(name)
        return sent is not None and sent[2] >= listed_at
