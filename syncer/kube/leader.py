"""Leader election on a coordination.k8s.io/v1 Lease, with the timing rules of client-go:
a lease is taken over only after it has not changed for `lease_duration_s` as observed locally
(no trust in other machines' clocks); the leader renews every `retry_period_s` and gives up -
closing the write gate at once - when it could not renew within `renew_deadline_s`.

The Lease is also where an operator asks the leader for a safety-valve reset: the annotation
`slurm-syncer.dev/reset-safety-valve` is removed by the leader in its next renewal (so it is acted on
exactly once, by the leader only) and `on_reset` is called with its value."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import structlog

from syncer.kube.client import KubeClient
from syncer.kube.errors import KubeError
from syncer.model.keys import Keys
from syncer.runtime.gate import Gate

log = structlog.get_logger("syncer.kube")


def _now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        gate: Gate,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration_s: float,  # defaults: the option table (syncer/app/settings.py), one place
        renew_deadline_s: float,
        retry_period_s: float,
        on_change: Callable[[bool], None] | None = None,
        on_reset: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        if not retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError(
                "leader election needs retry-period < renew-deadline < lease-duration "
                f"(got {retry_period_s} s, {renew_deadline_s} s, {lease_duration_s} s)"
            )
        self.client = client
        self.gate = gate
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.name = name
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self.on_change = on_change
        self.on_reset = on_reset
        self.namespace = namespace
        self._reset: str | None = None  # a reset request taken from the Lease in the last renewal
        self.is_leader = False
        self.transitions = 0
        self._observed: tuple[str, str] = ("", "")  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._last_renew = 0.0

    async def run(self) -> None:
        try:
            while True:
                sent_at = await self._try_acquire_or_renew()
                now = time.monotonic()
                # a peer counts the lease duration from when it sees our renewal, which is after we sent
                # it: the write window runs from the sending, so an answer that comes late cannot stretch
                # it past the moment the peer may take over
                acquired = sent_at is not None and now - sent_at < self.renew_deadline_s
                if sent_at is not None and not acquired:
                    log.warning(
                        "lease renewal answered too late to lead on",
                        lease=self.name, answered_after_s=round(now - sent_at, 2),
                    )  # fmt: skip
                if acquired and sent_at is not None:
                    self._last_renew = sent_at
                    self.gate.grant(self.renew_deadline_s, since=sent_at)
                    self._set_leader(True)
                    reset, self._reset = self._reset, None
                    if reset is not None and self.on_reset is not None:
                        await self.on_reset(reset)
                elif self.is_leader and now - self._last_renew >= self.renew_deadline_s:
                    log.warning(
                        "leadership lost: lease not renewed in time", lease=self.name, identity=self.identity
                    )
                    self.gate.revoke()
                    self._set_leader(False)
                elif self.is_leader and not acquired and self._observed[0] not in ("", self.identity):
                    log.warning("leadership lost: lease taken by another", holder=self._observed[0])
                    self.gate.revoke()
                    self._set_leader(False)
                await asyncio.sleep(self.retry_period_s)
        finally:
            self.gate.revoke()
            if self.is_leader:
                self._set_leader(False)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._release(), 2.0)

    def _set_leader(self, leading: bool) -> None:
        if leading != self.is_leader:
            self.is_leader = leading
            if leading:
                self.transitions += 1
            log.info("leader election", leading=leading, identity=self.identity, lease=self.name)
            if self.on_change is not None:
                self.on_change(leading)

    async def _try_acquire_or_renew(self) -> float | None:
        """The monotonic time the write that acquired or renewed the lease was sent; None if it was not."""
        try:
            lease = await self.client.get(self.path)
        except KubeError as exc:
            if exc.not_found:
                return await self._create()
            log.debug("lease read failed", error=str(exc))
            return None
        spec: dict[str, Any] = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        observed = (holder, spec.get("renewTime") or "")
        now = time.monotonic()
        if observed != self._observed:
            self._observed, self._observed_at = observed, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration_s)
        if holder and holder != self.identity and now - self._observed_at < duration:
            return None  # someone else holds a live lease
        stamp = _now_micro()
        new_spec = dict(spec)
        new_spec.update(
            holderIdentity=self.identity, renewTime=stamp, leaseDurationSeconds=int(self.lease_duration_s)
        )
        if holder != self.identity:
            new_spec["acquireTime"] = stamp
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        metadata = dict(lease.get("metadata") or {})
        annotations = dict(metadata.get("annotations") or {})
        reset = annotations.pop(Keys.VALVE_RESET, None) if self.on_reset is not None else None
        if reset is not None:
            metadata["annotations"] = annotations  # consumed by this very write (resourceVersion-checked)
        body = {**lease, "metadata": metadata, "spec": new_spec}
        sent_at = time.monotonic()
        try:
            updated = await self.client.replace(self.path, body)
        except KubeError as exc:
            log.debug("lease update failed", error=str(exc), conflict=exc.conflict)
            return None
        if reset is not None:
            self._reset = str(reset)
        updated_spec = updated.get("spec") or {}
        self._observed = (updated_spec.get("holderIdentity") or "", updated_spec.get("renewTime") or "")
        self._observed_at = sent_at
        return sent_at

    async def _create(self) -> float | None:
        stamp = _now_micro()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration_s),
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        }
        sent_at = time.monotonic()
        try:
            await self.client.create(self.collection, body)
        except KubeError as exc:
            log.debug("lease create failed", error=str(exc))
            return None
        self._observed, self._observed_at = (self.identity, stamp), sent_at
        return sent_at

    async def _release(self) -> None:
        """Hand over at once on a clean shutdown: an empty holder may be taken immediately."""
        lease = await self.client.get(self.path)
        spec = dict(lease.get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            return
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_now_micro())
        await self.client.replace(self.path, {**lease, "spec": spec})
