"""Writes to Kubernetes with optimistic concurrency: each patch is built from the object's current
state and carries its resourceVersion; a 409 means someone else wrote first, so the object is
fetched again and the patch rebuilt (or found unnecessary)."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from syncer.kube.client import MERGE_PATCH, STRATEGIC_PATCH, KubeClient
from syncer.kube.errors import KubeError
from syncer.model.kube import Condition, SchedulerPod
from syncer.model.times import rfc3339
from syncer.runtime.backoff import Backoff
from syncer.runtime.gate import Gate, allowed
from syncer.runtime.retry import retrying

log = structlog.get_logger("syncer.kube")

Wanted = dict[str, str | None]  # annotations or labels: a value to set, None to remove
Obj = dict[str, Any] | None  # an object as the API server returned it; None: not read, or not written
PatchBuilder = Callable[[dict[str, Any]], dict[str, Any] | None]  # current object -> patch, None = no-op

_CONFLICT = Backoff(0.01, 0.1)  # client-go's RetryOnConflict: a fresh read and a short, jittered wait


class Outcome(enum.Enum):
    """What a write to one pod came to."""

    DONE = "done"  # written now
    ALREADY = "already"  # the API server had it so already (a bind answered before and asked again)
    GONE = "gone"  # no pod of that uid: deleted, or its name now holds another pod
    DRY_RUN = "dry-run"  # logged, not written


_ASSIGNED = re.compile(r'is already assigned to node "([^"]*)"')


def assigned_node(exc: KubeError) -> str | None:
    """The Node a 409 from `pods/binding` says the pod is on already; None for any other answer."""
    found = _ASSIGNED.search(exc.message) if exc.status == 409 else None
    return found.group(1) if found else None


def _other_pod(exc: KubeError) -> bool:
    """A uid precondition failed: the name now holds another pod (binding: storage's words; delete:
    rest.BeforeDelete's; a patch: the uid is immutable)."""
    return (exc.status == 409 and ("UID in precondition" in exc.message or "the UID in the precondition" in
            exc.message)) or (exc.status == 422 and "metadata.uid" in exc.message)  # fmt: skip


@dataclass
class WriteStats:
    writes: int = 0  # patches and binds the API server took
    conflicts: int = 0  # 409 answers to a patch: each one retried from a fresh read, and the last given up
    skipped_dry_run: int = 0  # patches and binds a dry run held back (logged instead)
    noops: int = 0  # patches not sent: the object already was as wanted


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

    async def set_annotations(self, path: str, wanted: Wanted, *, current: Obj = None, what: str = "") -> Obj:
        """Make the object's annotations match `wanted` (None removes a key); untouched keys stay."""
        return await self._set_map(path, "annotations", wanted, current, what)

    async def set_labels(self, path: str, wanted: Wanted, *, current: Obj = None, what: str = "") -> Obj:
        """Make the object's labels match `wanted`, as set_annotations does its annotations."""
        return await self._set_map(path, "labels", wanted, current, what)

    async def _set_map(self, path: str, field: str, wanted: Wanted, current: Obj, what: str) -> Obj:
        def build(obj: dict[str, Any]) -> dict[str, Any] | None:
            delta = _map_delta(obj, field, wanted)
            return {"metadata": {field: delta}} if delta else None

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

    # -- the one-pool scheduler's pod writes -----------------------------------------------------------
    async def bind(
        self, namespace: str, name: str, uid: str, node: str, *, annotations: Mapping[str, str] | None = None
    ) -> Outcome:
        """Binds the pod to `node` as kube-scheduler's DefaultBinder does: `POST .../pods/NAME/binding`, the
        pod's uid a precondition; `annotations` go on the Binding, which the API server copies onto the pod
        in the same write. DONE; ALREADY when the pod is on `node` already (our answer was lost and
        we asked again); GONE when no pod of that uid is there; DRY_RUN. Raises KubeError for anything else:
        409 when the pod is on another Node (`assigned_node(exc)` names it), being deleted, or gated; 403,
        5xx. The API server does not look the Node up: the caller checks it exists and has room."""
        path = f"{pod_path(namespace, name)}/binding"
        if not self._allowed("bind", path, f"pod {namespace}/{name} to Node {node}", node=node, uid=uid):
            self.stats.skipped_dry_run += 1
            return Outcome.DRY_RUN
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            await self.client.create(path, body)
        except KubeError as exc:
            if exc.not_found or _other_pod(exc):
                return Outcome.GONE
            if assigned_node(exc) == node:
                return Outcome.ALREADY
            raise
        self.stats.writes += 1
        return Outcome.DONE

    async def set_pod_scheduled(
        self, pod: SchedulerPod, status: str, reason: str, message: str, now: float
    ) -> Outcome:
        """The pod's `PodScheduled` condition, as kube-scheduler writes it (`lastProbeTime` null, the
        transition time kept while the status stays): one strategic merge patch on `/status` with the
        pod's resourceVersion; on a 409, read again and write only if the pod still has that uid and no
        Node (a bind that the informer has not shown yet must not be followed by a False). ALREADY when
        the condition reads so already, GONE when the pod went or was bound meanwhile, DRY_RUN."""
        old = pod.condition("PodScheduled")
        if old is not None and (old.status, old.reason, old.message) == (status, reason, message):
            return Outcome.ALREADY
        since = old.last_transition_time if old is not None and old.status == status else 0.0
        condition = {
            "type": "PodScheduled",
            "status": status,
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(since or now),
        }
        gone: list[bool] = []

        def build(current: dict[str, Any]) -> dict[str, Any] | None:
            meta, spec = current.get("metadata") or {}, current.get("spec") or {}
            if meta.get("uid") != pod.uid or spec.get("nodeName") or meta.get("deletionTimestamp"):
                gone.append(True)
                return None
            listed = (current.get("status") or {}).get("conditions") or []
            have: dict[str, Any] = next((c for c in listed if c.get("type") == "PodScheduled"), {})
            if (have.get("status"), have.get("reason", ""), have.get("message", "")) == (
                status,
                reason,
                message,
            ):
                return None
            return {"status": {"conditions": [condition]}}

        cached_meta: dict[str, Any] = {"uid": pod.uid, "resourceVersion": pod.resource_version}
        if pod.terminating:
            cached_meta["deletionTimestamp"] = "set"
        cached = {
            "metadata": cached_meta,
            "spec": {"nodeName": pod.node_name},
            "status": {"conditions": [{"type": "PodScheduled", **_condition_fields(old)}] if old else []},
        }
        skipped = self.stats.skipped_dry_run
        try:
            written = await self.patch_from_current(
                pod_path(pod.namespace, pod.name), build, current=cached, subresource="status",
                content_type=STRATEGIC_PATCH, what="PodScheduled",
            )  # fmt: skip
        except KubeError as exc:
            if exc.not_found:
                return Outcome.GONE
            raise
        if gone:
            return Outcome.GONE
        if written is None:
            return Outcome.DRY_RUN if self.stats.skipped_dry_run > skipped else Outcome.ALREADY
        return Outcome.DONE

    async def delete_pod(
        self, namespace: str, name: str, uid: str, *, grace_period_s: int | None = None, why: str = ""
    ) -> Outcome:
        """Deletes the pod of that uid (a precondition: never the next pod of the name), with the grace
        period given (None: the pod's own terminationGracePeriodSeconds). DONE (the pod may run on until
        its grace period ends: watch it go), GONE, DRY_RUN; other errors raise."""
        path = pod_path(namespace, name)
        if not self._allowed(
            "delete", path, why or f"pod {namespace}/{name}", uid=uid, grace_period_s=grace_period_s
        ):
            self.stats.skipped_dry_run += 1
            return Outcome.DRY_RUN
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        if grace_period_s is not None:
            body["gracePeriodSeconds"] = grace_period_s
        try:
            await self.client.delete(path, body)
        except KubeError as exc:
            if exc.not_found or _other_pod(exc):
                return Outcome.GONE
            raise
        self.stats.writes += 1
        return Outcome.DONE

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


def _condition_fields(old: Condition | None) -> dict[str, Any]:
    if old is None:
        return {}
    return {
        "status": old.status,
        "reason": old.reason,
        "message": old.message,
        "lastTransitionTime": rfc3339(old.last_transition_time) if old.last_transition_time else None,
    }
