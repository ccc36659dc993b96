"""Kubernetes Events, aggregated: a repeat of the same event on the same object bumps `count` and
`lastTimestamp` of the existing Event instead of creating another object (as client-go does). In a storm
(more Events across all objects than a burst, faster than a steady rate) the surplus is folded: one
summary Event per type and reason on the syncer's own object names the objects, so a thousand drains
cost a handful of Event writes; each object's conditions and annotations still carry its state."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import structlog
from cachetools import LRUCache

from syncer.kube.client import KubeClient
from syncer.kube.errors import KubeError
from syncer.runtime.errors import NotLeader
from syncer.runtime.gate import Gate

log = structlog.get_logger("syncer.kube")


@dataclass(frozen=True)
class ObjectRef:
    kind: str  # "Pod" or "Node"
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def node(cls, name: str) -> ObjectRef:
        # kubelet and kubectl describe use the Node's name as the uid of an event reference
        return cls("Node", name, "", name)

    @classmethod
    def pod(cls, namespace: str, name: str, uid: str = "") -> ObjectRef:
        return cls("Pod", name, namespace, uid)


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


@dataclass
class _Folded:
    objects: list[str] = field(default_factory=list)
    count: int = 0


LISTED_IN_SUMMARY = 20  # objects named in a summary Event's message; the count says the rest


@dataclass
class _Seen:
    namespace: str
    name: str
    count: int


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        gate: Gate,
        *,
        component: str = "slurm-syncer",
        node_event_namespace: str = "default",
        burst_per_object: int = 25,
        refill_s: float = 300.0,
        storm_burst: int = 25,
        storm_rate_per_s: float = 1.0,
        summary_ref: ObjectRef | None = None,
    ) -> None:
        self.client = client
        self.gate = gate
        self.component = component
        self.host = socket.gethostname()
        self.node_event_namespace = node_event_namespace
        self._seen: LRUCache[tuple[Any, ...], _Seen] = LRUCache(maxsize=8192)
        # Per-object token bucket so one flapping object cannot flood the API (client-go: 25 / 5 min).
        self._budget: LRUCache[tuple[str, str, str], tuple[float, float]] = LRUCache(maxsize=16384)
        self.burst_per_object = burst_per_object
        self.refill_s = refill_s
        # across all objects: past the burst, Events beyond the steady rate are folded into summaries
        self.storm_burst = storm_burst
        self.storm_rate_per_s = storm_rate_per_s
        self._storm_tokens = (float(storm_burst), time.monotonic())
        self.summary_ref = summary_ref
        self._folded: dict[tuple[str, str], _Folded] = {}
        self.created = 0
        self.aggregated = 0
        self.dropped = 0
        self.folded = 0

    def _storm_allows(self) -> bool:
        tokens, stamp = self._storm_tokens
        now = time.monotonic()
        tokens = min(float(self.storm_burst), tokens + (now - stamp) * self.storm_rate_per_s)
        allowed = tokens >= 1
        self._storm_tokens = (tokens - 1 if allowed else tokens, now)
        return allowed

    def _allow(self, ref: ObjectRef, now: float) -> bool:
        key = (ref.kind, ref.namespace, ref.name)
        tokens, stamp = self._budget.get(key, (float(self.burst_per_object), now))
        tokens = min(self.burst_per_object, tokens + (now - stamp) / self.refill_s)
        if tokens < 1:
            self._budget[key] = (tokens, now)
            return False
        self._budget[key] = (tokens - 1, now)
        return True

    async def record(
        self, ref: ObjectRef, type_: str, reason: str, message: str, *, wait: bool = True
    ) -> None:
        """Best effort: an Event that cannot be written is logged, never raised. `wait=False`: when the
        client's rate limit has no token now, the Event is folded into the summary instead of waiting."""
        now = time.time()
        if not self._allow(ref, now):
            self.dropped += 1
            log.debug(
                "event dropped by the per-object rate limit", kind=ref.kind, name=ref.name, reason=reason
            )
            return
        if not self.gate.check():  # NotLeader propagates: the caller's writes stop there too
            log.info(
                "dry-run: would record event", kind=ref.kind, name=ref.name, reason=reason, message=message
            )
            return
        throttled = not wait and self.client.limiter.would_wait()
        if self.summary_ref is not None and (throttled or not self._storm_allows()):
            folded = self._folded.setdefault((type_, reason), _Folded())
            folded.count += 1
            if len(folded.objects) < LISTED_IN_SUMMARY:
                folded.objects.append(
                    f"{ref.kind.lower()}/{ref.namespace + '/' if ref.namespace else ''}{ref.name}"
                )
            self.folded += 1
            return
        try:
            await self._write(ref, type_, reason, message[:1024], now)
        except KubeError as exc:
            log.warning("event not recorded", kind=ref.kind, name=ref.name, reason=reason, error=str(exc))

    async def flush(self) -> None:
        """One summary Event per type and reason folded since the last flush, on `summary_ref`."""
        folded, self._folded = self._folded, {}
        if self.summary_ref is None:
            return
        for (type_, reason), what in folded.items():
            listed = ", ".join(what.objects) + (
                f" and {what.count - len(what.objects)} more" if what.count > len(what.objects) else ""
            )
            message = (
                f"{what.count} {reason} Events folded into this one (more than {self.storm_burst} at once "
                f"across objects; each object's conditions and annotations still show its state): {listed}"
            )
            try:
                if not self.gate.check():
                    log.info("dry-run: would record summary event", reason=reason, folded=what.count)
                    continue
                await self._write(self.summary_ref, type_, reason, message[:1024], time.time())
            except NotLeader:  # leadership moved since: the new leader tells its own story
                log.info("summary events dropped: not the leader", reasons=len(folded))
                return
            except KubeError as exc:
                log.warning("summary event not recorded", reason=reason, folded=what.count, error=str(exc))

    async def run_folding(self, interval_s: float = 5.0) -> None:
        """Writes the folded Events' summaries every `interval_s` (a Manager loop)."""
        while True:
            await asyncio.sleep(interval_s)  # the summary period
            await self.flush()

    async def _write(self, ref: ObjectRef, type_: str, reason: str, message: str, now: float) -> None:
        namespace = ref.namespace or self.node_event_namespace
        key = (ref.kind, ref.namespace, ref.name, ref.uid, type_, reason, message)
        seen = self._seen.get(key)
        if seen is not None:
            try:
                await self.client.patch(
                    f"/api/v1/namespaces/{seen.namespace}/events/{seen.name}",
                    {"count": seen.count + 1, "lastTimestamp": _rfc3339(now)},
                )
                seen.count += 1
                self.aggregated += 1
                return
            except KubeError as exc:
                if not exc.not_found:
                    raise
                del self._seen[key]  # expired (events have a TTL): start a new one
        name = f"{ref.name}.{time.time_ns():x}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "kind": ref.kind,
                "name": ref.name,
                "namespace": ref.namespace,
                "uid": ref.uid,
                "apiVersion": ref.api_version,
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "count": 1,
            "firstTimestamp": _rfc3339(now),
            "lastTimestamp": _rfc3339(now),
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        await self.client.create(f"/api/v1/namespaces/{namespace}/events", body)
        self._seen[key] = _Seen(namespace, name, 1)
        self.created += 1
