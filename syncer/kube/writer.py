"""Writes to Kubernetes with optimistic concurrency: each patch is built from the object's current
state and carries its resourceVersion; a 409 means someone else wrote first, so the object is
fetched again and the patch rebuilt (or found unnecessary)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from syncer.kube.client import MERGE_PATCH, STRATEGIC_PATCH, KubeClient
from syncer.kube.errors import KubeError
from syncer.model.kube import Condition
from syncer.runtime.backoff import Backoff
from syncer.runtime.gate import Gate, allowed
from syncer.runtime.retry import retrying

log = structlog.get_logger("syncer.kube")

PatchBuilder = Callable[[dict[str, Any]], dict[str, Any] | None]  # current object -> patch, None = no-op

_CONFLICT = Backoff(0.01, 0.1)  # client-go's RetryOnConflict: a fresh read and a short, jittered wait


@dataclass
class WriteStats:
    writes: int = 0
    conflicts: int = 0
    skipped_dry_run: int = 0
    noops: int = 0


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"


def condition_body(condition: Condition, now_rfc3339: str) -> dict[str, Any]:
    return {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": now_rfc3339,
    }


class KubeWriter:
    def __init__(self, client: KubeClient, gate: Gate, *, max_attempts: int = 5) -> None:
        self.client = client
        self.gate = gate
        self.max_attempts = max_attempts
        self.stats = WriteStats()

    def _allowed(self, would: str, path: str, what: str, **fields: Any) -> bool:
        return allowed(self.gate, would, path=path, what=what, **fields)

    async def create(self, path: str, body: dict[str, Any], *, what: str) -> bool:
        """Creates an object in the collection `path`; False in a dry run. The API server's errors raise."""
        if not self._allowed("create", path, what):
            return False
        await self.client.create(path, body)
        return True

    async def delete(self, path: str, body: dict[str, Any] | None = None, *, what: str) -> bool:
        """Deletes `path` (with `body`'s preconditions); False in a dry run. Errors (404, 409) are raised."""
        if not self._allowed("delete", path, what):
            return False
        await self.client.delete(path, body)
        return True

    async def merge_patch(self, path: str, patch: dict[str, Any], *, what: str) -> bool:
        """A merge patch without a precondition (a subresource we alone write); False in a dry run."""
        if not self._allowed("patch", path, what):
            return False
        await self.client.patch(path, patch, MERGE_PATCH)
        return True

    def throttled(self) -> bool:
        """A write now would wait for the client's rate limit."""
        return self.client.limiter.would_wait()

    async def patch_from_current(
        self,
        path: str,
        build: PatchBuilder,
        *,
        current: dict[str, Any] | None = None,
        subresource: str = "",
        content_type: str = MERGE_PATCH,
        what: str = "",
    ) -> dict[str, Any] | None:
        """Build a patch from `current` (fetched when None), send it with a resourceVersion
        precondition, and on 409 start over from a fresh read. Returns the written object, or None
        when nothing needed writing (or dry-run)."""
        target = path + (f"/{subresource}" if subresource else "")

        def conflicted(exc: BaseException, delay_s: float) -> None:
            self.stats.conflicts += 1
            log.debug("write conflict, retrying from fresh state", path=path, delay_s=round(delay_s, 3))

        try:
            async for attempt in retrying(
                backoff=_CONFLICT, attempts=self.max_attempts, before_sleep=conflicted,
                retry_if=lambda exc: isinstance(exc, KubeError) and exc.conflict,
            ):  # fmt: skip
                with attempt:
                    if current is None or attempt.retry_state.attempt_number > 1:
                        current = await self.client.get(path)  # someone else wrote first: start from theirs
                    patch = build(current)
                    if not patch:
                        self.stats.noops += 1
                        return None
                    rv = current.get("metadata", {}).get("resourceVersion")
                    body = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": rv}}
                    if not self._allowed("patch", target, what, patch=patch):
                        self.stats.skipped_dry_run += 1
                        return None
                    written = await self.client.patch(target, body, content_type)
                    self.stats.writes += 1
                    return written
        except KubeError as exc:
            if not exc.conflict:
                raise
            self.stats.conflicts += 1
            raise KubeError(
                409, "Conflict", f"{path}: still conflicting after {self.max_attempts} attempts"
            ) from exc
        raise AssertionError("unreachable: tenacity reraises")

    async def set_annotations(
        self,
        path: str,
        wanted: dict[str, str | None],
        *,
        current: dict[str, Any] | None = None,
        what: str = "",
    ) -> dict[str, Any] | None:
        """Make the object's annotations match `wanted` (None removes a key); untouched keys stay."""

        def build(obj: dict[str, Any]) -> dict[str, Any] | None:
            delta = _map_delta(obj, "annotations", wanted)
            return {"metadata": {"annotations": delta}} if delta else None

        return await self.patch_from_current(path, build, current=current, what=what)

    async def set_labels(
        self,
        path: str,
        wanted: dict[str, str | None],
        *,
        current: dict[str, Any] | None = None,
        what: str = "",
    ) -> dict[str, Any] | None:
        def build(obj: dict[str, Any]) -> dict[str, Any] | None:
            delta = _map_delta(obj, "labels", wanted)
            return {"metadata": {"labels": delta}} if delta else None

        return await self.patch_from_current(path, build, current=current, what=what)

    async def set_conditions(
        self,
        path: str,
        conditions: list[Condition],
        now_rfc3339: str,
        *,
        current: dict[str, Any] | None = None,
        what: str = "",
    ) -> dict[str, Any] | None:
        """Status conditions merged by type (strategic merge on /status); lastTransitionTime moves
        only when the status flips, as Kubernetes conventions ask."""
        return await self.set_status(path, conditions, now_rfc3339, current=current, what=what)

    async def set_status(
        self,
        path: str,
        conditions: list[Condition],
        now_rfc3339: str,
        *,
        annotations: Mapping[str, str | None] | None = None,
        current: dict[str, Any] | None = None,
        what: str = "",
    ) -> dict[str, Any] | None:
        """Conditions and annotations of a pod or Node in one strategic merge patch on /status: for
        these two kinds kube-apiserver's status strategy resets only spec (and a pod's ownerReferences
        and deletionTimestamp), so metadata changes go through. One write per object instead of two."""

        def build(obj: dict[str, Any]) -> dict[str, Any] | None:
            patch: dict[str, Any] = {}
            delta = _map_delta(obj, "annotations", annotations or {})
            if delta:
                patch["metadata"] = {"annotations": delta}
            changed = _condition_delta(obj, conditions, now_rfc3339)
            if changed:
                patch["status"] = {"conditions": changed}
            return patch or None

        return await self.patch_from_current(
            path, build, current=current, subresource="status", content_type=STRATEGIC_PATCH, what=what
        )

    async def set_unschedulable(
        self,
        node_name: str,
        unschedulable: bool,
        annotations: dict[str, str | None],
        *,
        only_if: PatchBuilder | None = None,
        current: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Cordon or uncordon a Node together with the annotations that say who did it.
        `only_if(current)` returning None aborts (e.g. someone else's cordon must not be lifted)."""

        def build(obj: dict[str, Any]) -> dict[str, Any] | None:
            if only_if is not None and only_if(obj) is None:
                return None
            have_unsched = bool((obj.get("spec") or {}).get("unschedulable"))
            delta = _map_delta(obj, "annotations", annotations)
            if have_unsched == unschedulable and not delta:
                return None
            patch: dict[str, Any] = {"spec": {"unschedulable": unschedulable or None}}
            if delta:
                patch["metadata"] = {"annotations": delta}
            return patch

        return await self.patch_from_current(
            node_path(node_name), build, current=current, what="cordon" if unschedulable else "uncordon"
        )


def _map_delta(obj: dict[str, Any], field: str, wanted: Mapping[str, str | None]) -> dict[str, str | None]:
    """What of `wanted` differs from the object's labels or annotations (None removes a present key)."""
    have = obj.get("metadata", {}).get(field) or {}
    return {k: v for k, v in wanted.items() if have.get(k) != v and not (v is None and k not in have)}


def _condition_delta(
    obj: dict[str, Any], conditions: list[Condition], now_rfc3339: str
) -> list[dict[str, Any]]:
    """The conditions that differ from the object's, as patch bodies; lastTransitionTime kept unless the
    status flips."""
    have = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    changed = []
    for cond in conditions:
        old = have.get(cond.type)
        if old and (old.get("status"), old.get("reason", ""), old.get("message", "")) == (
            cond.status,
            cond.reason,
            cond.message,
        ):
            continue
        body = condition_body(cond, now_rfc3339)
        if old and old.get("status") == cond.status and old.get("lastTransitionTime"):
            body["lastTransitionTime"] = old["lastTransitionTime"]
        changed.append(body)
    return changed
