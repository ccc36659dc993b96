"""Read-your-own-writes for the annotations the engine writes.

The Kubernetes cache learns of a write only when the watch event arrives. A reconcile of the same node in
between would see the old `state` annotation, report the same Slurm transition a second time and write the
annotations again. Only the syncer writes its annotations, so what it wrote last is the truth until the
cache shows it (or a short while has passed, or leadership changed hands)."""

from __future__ import annotations

import time
from typing import TypeVar

import msgspec

from syncer.model.kube import KubeNode, KubePod

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
