"""Objects, a global monotonic resourceVersion and the change history that watches replay."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from syncer.testing.kubeapi.errors import ApiError

ResourceKey = tuple[str, str]  # (group, plural): versions of one kind share storage
ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds


@dataclass(frozen=True)
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: ResourceKey
    obj: dict[str, Any]  # never mutated once stored: updates store a new dict
    old: dict[str, Any] | None


class Store:
    def __init__(self, history_limit: int = 200_000, first_rv: int = 1000) -> None:
        self.rv = first_rv
        self.objects: dict[ResourceKey, dict[ObjectKey, dict[str, Any]]] = {}
        self.history: deque[Change] = deque()
        self.history_limit = history_limit
        # Watches may resume from any RV >= compacted_rv; older ones get 410 Gone.
        self.compacted_rv = first_rv
        self.watchers: set[asyncio.Queue[Change | None]] = set()
        self.listeners: list[Callable[[Change], None]] = []

    def get(self, resource: ResourceKey, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(resource, {}).get((namespace, name))

    def objects_of(self, resource: ResourceKey, namespace: str | None = None) -> list[dict[str, Any]]:
        bucket = self.objects.get(resource, {})
        keys = sorted(k for k in bucket if namespace is None or k[0] == namespace)
        return [bucket[k] for k in keys]

    def count(self, resource: ResourceKey) -> int:
        return len(self.objects.get(resource, {}))

    def write(self, resource: ResourceKey, obj: dict[str, Any], change_type: str) -> Change:
        """Stores `obj` (ADDED or MODIFIED) under a new resourceVersion."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        bucket = self.objects.setdefault(resource, {})
        old = bucket.get(key)
        bucket[key] = obj
        return self._record(Change(self.rv, change_type, resource, obj, old))

    def remove(self, resource: ResourceKey, namespace: str, name: str) -> Change:
        bucket = self.objects.get(resource, {})
        old = bucket.pop((namespace, name), None)
        if old is None:
            raise ApiError.not_found(resource[1], name, resource[0])
        self.rv += 1
        # The DELETED event carries the last state with a fresh resourceVersion, as etcd3 reports it.
        final = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self.rv)}}
        return self._record(Change(self.rv, "DELETED", resource, final, old))

    def _record(self, change: Change) -> Change:
        self.history.append(change)
        while len(self.history) > self.history_limit:
            dropped = self.history.popleft()
            self.compacted_rv = dropped.rv
        for queue in self.watchers:
            queue.put_nowait(change)
        for listener in list(self.listeners):
            listener(change)
        return change

    def compact(self) -> None:
        """Forget all history: every watch or exact list from an older RV now gets 410 Gone."""
        self.history.clear()
        self.compacted_rv = self.rv

    def changes_after(self, rv: int) -> list[Change]:
        if rv < self.compacted_rv:
            raise ApiError.gone(f"too old resource version: {rv} ({self.compacted_rv})")
        return [change for change in self.history if change.rv > rv]

    def subscribe(self) -> asyncio.Queue[Change | None]:
        queue: asyncio.Queue[Change | None] = asyncio.Queue()
        self.watchers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Change | None]) -> None:
        self.watchers.discard(queue)

    def drop_watches(self) -> int:
        """Ends every open watch stream (each gets a None sentinel)."""
        count = len(self.watchers)
        for queue in list(self.watchers):
            queue.put_nowait(None)
        return count
