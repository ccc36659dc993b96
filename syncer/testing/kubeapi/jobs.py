"""`batch/v1` Jobs: kube-apiserver's defaults and the checks that matter here, and a small Job controller
(the pods of a Job, counted as they end), enough for gangs: a Job with `parallelism` N gets N pods at once.

From kube-apiserver (pkg/apis/batch/v1/defaults.go, pkg/registry/batch/job/strategy.go): `parallelism` and
`completions` default to 1 when both are unset (only `parallelism` when `completions` is given),
`backoffLimit` 6, `completionMode` NonIndexed, `suspend` and `manualSelector` false,
`podReplacementPolicy` TerminatingOrFailed; the template gets the labels
`batch.kubernetes.io/controller-uid`, `batch.kubernetes.io/job-name` and their legacy forms `controller-uid`,
`job-name`, and `spec.selector` matches the controller-uid; a Job without labels takes its template's (the
same map, so the generated ones too); `restartPolicy` must be OnFailure or Never.

From kube-controller-manager's Job controller (pkg/controller/job): pods named `<job>-<random>` (Indexed:
`<job>-<index>-<random>`, with the index in an annotation and a label and `hostname` `<job>-<index>`),
owned by the Job (controller reference), held by the `batch.kubernetes.io/job-tracking` finalizer until
counted; a pod that fails or is deleted before it succeeds counts as failed and is replaced; more failures
than `backoffLimit` fail the Job; `SuccessCriteriaMet` and `Complete` once enough pods succeeded. A Job
deleted with `propagationPolicy` Background or Foreground takes its pods with it (the garbage collector's
part); Orphan, batch/v1's default, leaves them without their owner. What it leaves out: docs/emulator.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Mapping
from typing import Any

from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.kubeapi.store import Change

JOBS = ("batch", "jobs")
PODS = ("", "pods")
TRACKING = "batch.kubernetes.io/job-tracking"
FOREGROUND = "foregroundDeletion"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"
INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETED = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


def default_job(job: dict[str, Any]) -> None:
    """SetDefaults_Job, then the strategy's generated selector (the Job's uid is set by then)."""
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )
    template = spec.setdefault("template", {})
    meta = job["metadata"]
    labels = (template.setdefault("metadata", {})).get("labels")
    shared = labels is not None and not meta.get("labels")  # Go shares one map between the two
    if not spec["manualSelector"]:
        labels = template["metadata"].setdefault("labels", {}) if labels is None else labels
        for key in (LEGACY_JOB_NAME, JOB_NAME):
            labels.setdefault(key, meta["name"])
        for key in (LEGACY_CONTROLLER_UID, CONTROLLER_UID):
            labels.setdefault(key, meta["uid"])
        selector = spec.setdefault("selector", {}).setdefault("matchLabels", {})
        selector.setdefault(CONTROLLER_UID, meta["uid"])
    if shared:
        meta["labels"] = dict(labels or {})
    pod_spec = template.setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Always")  # the pod template's default, refused below
    pod_spec.setdefault("terminationGracePeriodSeconds", 30)
    pod_spec.setdefault("schedulerName", "default-scheduler")
    job["status"] = {}


def job_causes(job: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The checks of ValidateJob the emulator makes."""
    spec = job.get("spec") or {}
    causes = []
    policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if policy not in ("OnFailure", "Never"):
        causes.append(
            (
                "spec.template.spec.restartPolicy",
                f'Unsupported value: "{policy or ""}": supported values: "OnFailure", "Never"',
            )
        )
    for field in ("parallelism", "completions", "backoffLimit"):
        value = spec.get(field)
        if isinstance(value, int) and value < 0:
            causes.append((f"spec.{field}", f"Invalid value: {value}: must be greater than or equal to 0"))
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
    return causes


def propagation(options: Mapping[str, Any]) -> str:
    """What happens to a deleted Job's pods: batch/v1 orphans them unless told otherwise."""
    policy = options.get("propagationPolicy")
    if policy in ("Background", "Foreground", "Orphan"):
        return str(policy)
    if options.get("orphanDependents") is False:
        return "Background"
    return "Orphan"


def _owner_uid(pod: Mapping[str, Any]) -> str:
    """The uid of the Job controlling this pod, "" when none does."""
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1":
            return str(ref.get("uid", ""))
    return ""


def _finished(job: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _index(pod: Mapping[str, Any]) -> int | None:
    raw = (pod["metadata"].get("annotations") or {}).get(INDEX)
    return int(raw) if raw is not None and str(raw).isdigit() else None


def _compress(indexes: set[int]) -> str:
    """status.completedIndexes: "0-2,5"."""
    ranges: list[str] = []
    for i in sorted(indexes):
        if ranges and ranges[-1].split("-")[-1] == str(i - 1):
            ranges[-1] = f"{ranges[-1].split('-')[0]}-{i}"
        else:
            ranges.append(str(i))
    return ",".join(ranges)


def _expand(text: str) -> set[int]:
    found: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


class JobController:
    """Reconciles every Job when it or one of its pods changes (a queue of Job keys, like the kubelet's)."""

    def __init__(self, api: Any) -> None:
        self.api = api  # syncer.testing.kubeapi.api.Api (not imported: api.py imports this module)
        self._dirty: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._job_of_uid: dict[str, tuple[str, str]] = {}
        self._pods_of: dict[str, set[tuple[str, str]]] = {}  # job uid -> its pods' keys
        # pods this controller deleted (scale-down, suspend, a finished Job): not counted as failed
        self._removed: set[str] = set()

    def start(self) -> None:
        self.api.store.listeners.append(self._on_change)
        for pod in self.api.store.objects_of(PODS):
            self._track(None, pod)
        for job in self.api.store.objects_of(JOBS):
            self._job_of_uid[job["metadata"]["uid"]] = _key(job)
            self._dirty.put_nowait(_key(job))
        self._task = asyncio.create_task(self._run(), name="emulator-job-controller")

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.api.store.listeners.remove(self._on_change)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def settled(self) -> None:
        """Returns once every change so far has been acted on."""
        await self._dirty.join()

    def _track(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for pod, present in ((old, False), (new, True)):
            owner = _owner_uid(pod) if pod is not None else ""
            if pod is not None and owner:
                keys = self._pods_of.setdefault(owner, set())
                (keys.add if present else keys.discard)(_key(pod))
                if owner in self._job_of_uid:
                    self._dirty.put_nowait(self._job_of_uid[owner])

    def _on_change(self, change: Change) -> None:
        if change.resource == PODS:
            self._track(change.old, None if change.type == "DELETED" else change.obj)
        elif change.resource == JOBS:
            uid = change.obj["metadata"]["uid"]
            if change.type == "DELETED":
                self._job_of_uid.pop(uid, None)
                self._dirty.put_nowait(("", uid))  # the garbage collector's turn: ("", uid)
            else:
                self._job_of_uid[uid] = _key(change.obj)
                self._dirty.put_nowait(_key(change.obj))

    async def _run(self) -> None:
        while True:
            namespace, name = await self._dirty.get()
            try:
                if namespace:
                    self._reconcile(namespace, name)
                else:
                    self._collect(name)
            except ApiError:
                pass  # an object changed or went away meanwhile: its next change marks the Job again
            finally:
                self._dirty.task_done()

    # -- the garbage collector's part ---------------------------------------------------------------
    def _collect(self, uid: str) -> None:
        """A Job is gone: its pods go too (Background, Foreground) or lose their owner (Orphan)."""
        policy = self.api.dependents_policy.pop(uid, "Orphan")
        pods = self.api.resource("", "v1", "pods")
        for key in sorted(self._pods_of.pop(uid, set())):
            pod = self.api.store.get(PODS, *key)
            if pod is None:
                continue
            self._release(pod, orphan_of=uid if policy == "Orphan" else "")
            if policy != "Orphan" and not pod["metadata"].get("deletionTimestamp"):
                self.api.delete(pods, *key)

    def _release(self, pod: dict[str, Any], orphan_of: str = "") -> None:
        """Drops the tracking finalizer of the pod as stored now (and, orphaning it, its Job reference)."""
        current = self.api.store.get(PODS, *_key(pod))
        if current is None:
            return
        meta = current["metadata"]
        finalizers = [f for f in meta.get("finalizers") or [] if f != TRACKING]
        owners = [o for o in meta.get("ownerReferences") or [] if not orphan_of or o.get("uid") != orphan_of]
        if finalizers != (meta.get("finalizers") or []) or owners != (meta.get("ownerReferences") or []):
            pods = self.api.resource("", "v1", "pods")
            self.api.update(pods, *_key(current), {**current, "metadata": _meta(meta, finalizers, owners)})

    # -- the Job controller -------------------------------------------------------------------------
    def _reconcile(self, namespace: str, name: str) -> None:
        job = self.api.store.get(JOBS, namespace, name)
        if job is None:
            return
        uid = job["metadata"]["uid"]
        pods = [
            p
            for k in sorted(self._pods_of.get(uid, set()))
            if (p := self.api.store.get(PODS, *k)) is not None
        ]
        if job["metadata"].get("deletionTimestamp"):
            self._delete_for_foreground(job, pods)
            return
        status = copy.deepcopy(job.get("status") or {})
        self._count_ended(job, pods, status)
        active = [p for p in pods if _active(p)]
        if _finished(job):
            self._delete(active)
        elif status.get("failed", 0) > int(job["spec"].get("backoffLimit", 6)):
            self._delete(active)
            active = []
            _finish(status, "FailureTarget", "Failed", BACKOFF, self._now())
        elif job["spec"].get("suspend"):
            self._delete(active)
            active = []
            _set_condition(status, "Suspended", "True", ("JobSuspended", "Job suspended"), self._now())
            status.pop("startTime", None)
        else:
            if _condition(status, "Suspended") == "True":
                _set_condition(status, "Suspended", "False", ("JobResumed", "Job resumed"), self._now())
            status.setdefault("startTime", self._now())
            active = self._scale(job, active, status)
        self._write_status(job, pods, active, status)

    def _count_ended(self, job: dict[str, Any], pods: list[dict[str, Any]], status: dict[str, Any]) -> None:
        """Pods that ended (or are being deleted) and still carry the tracking finalizer are counted once,
        and the finalizer removed: the Job controller's uncountedTerminatedPods, done in one step here."""
        completed = _expand(status.get("completedIndexes", ""))
        for pod in pods:
            meta = pod["metadata"]
            phase = (pod.get("status") or {}).get("phase")
            ended = phase in ("Succeeded", "Failed") or bool(meta.get("deletionTimestamp"))
            if not ended or TRACKING not in (meta.get("finalizers") or []):
                continue
            if meta.get("uid") in self._removed and phase != "Succeeded":
                self._removed.discard(meta["uid"])
            elif phase == "Succeeded":
                status["succeeded"] = status.get("succeeded", 0) + 1
                if (index := _index(pod)) is not None:
                    completed.add(index)
            else:
                status["failed"] = status.get("failed", 0) + 1
            self._release(pod)
        if job["spec"].get("completionMode") == "Indexed":
            status["completedIndexes"] = _compress(completed)

    def _scale(
        self, job: dict[str, Any], active: list[dict[str, Any]], status: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Creates the pods missing, deletes those too many; completes the Job when it is done."""
        spec = job["spec"]
        parallelism = int(spec.get("parallelism", 1))
        succeeded = int(status.get("succeeded", 0))
        if spec.get("completionMode") == "Indexed":
            done = _expand(status.get("completedIndexes", ""))
            running = {_index(p) for p in active}
            left = [i for i in range(int(spec["completions"])) if i not in done]
            if not left and not active:
                _finish(status, "SuccessCriteriaMet", "Complete", COMPLETED, self._now())
                status["completionTime"] = self._now()
                return active
            for index in [i for i in left if i not in running][: max(0, parallelism - len(active))]:
                active.append(self._create(job, index))
            return active
        completions = spec.get("completions")
        wanted = (
            min(parallelism, int(completions) - succeeded)
            if completions is not None
            else (0 if succeeded else parallelism)
        )
        if wanted <= 0 and not active:
            _finish(status, "SuccessCriteriaMet", "Complete", COMPLETED, self._now())
            status["completionTime"] = self._now()
            return active
        while len(active) < wanted:
            active.append(self._create(job, None))
        if len(active) > wanted:  # not ready first, then the newest: the controller's order
            ranked = sorted(active, key=lambda p: (_ready(p), p["metadata"].get("creationTimestamp", "")))
            self._delete(ranked[: len(active) - wanted])
            active = ranked[len(active) - wanted :]
        return active

    def _create(self, job: dict[str, Any], index: int | None) -> dict[str, Any]:
        meta, template = job["metadata"], copy.deepcopy(job["spec"].get("template") or {})
        pod_meta = template.get("metadata") or {}
        spec = template.get("spec") or {}
        labels = dict(pod_meta.get("labels") or {})
        annotations = dict(pod_meta.get("annotations") or {})
        prefix = f"{meta['name']}-"
        if index is not None:
            prefix = f"{meta['name']}-{index}-"
            labels[INDEX] = annotations[INDEX] = str(index)
            spec.setdefault("hostname", f"{meta['name']}-{index}")
            for container in spec.get("containers") or []:
                env = container.setdefault("env", [])
                env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX}']"}}})  # fmt: skip
        owner = {
            "apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True,
        }  # fmt: skip
        pod = {
            "metadata": {
                "generateName": prefix, "labels": labels, "annotations": annotations,
                "finalizers": [TRACKING], "ownerReferences": [owner],
            },
            "spec": spec,
        }  # fmt: skip
        if not annotations:
            del pod["metadata"]["annotations"]
        pods = self.api.resource("", "v1", "pods")
        created: dict[str, Any] = self.api.create(pods, meta["namespace"], pod)
        return created

    def _delete(self, pods: list[dict[str, Any]]) -> None:
        resource = self.api.resource("", "v1", "pods")
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                self._removed.add(pod["metadata"]["uid"])
                self.api.delete(resource, pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _delete_for_foreground(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        """Foreground deletion: the dependents go first; then the garbage collector lets the Job go."""
        meta = job["metadata"]
        if FOREGROUND not in (meta.get("finalizers") or []):
            return
        self._delete(pods)
        for pod in pods:  # being deleted with their Job: nothing left to count
            self._release(pod)
        if pods:
            return  # looked at again as each pod goes
        finalizers = [f for f in meta["finalizers"] if f != FOREGROUND]
        jobs = self.api.resource("batch", "v1", "jobs")
        self.api.dependents_policy[meta["uid"]] = "Background"
        self.api.update(
            jobs, meta["namespace"], meta["name"], {**job, "metadata": {**meta, "finalizers": finalizers}}
        )

    def _write_status(
        self,
        job: dict[str, Any],
        pods: list[dict[str, Any]],
        active: list[dict[str, Any]],
        status: dict[str, Any],
    ) -> None:
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if _ready(p))
        status["terminating"] = sum(
            1
            for p in pods
            if p["metadata"].get("deletionTimestamp") and _phase(p) not in ("Succeeded", "Failed")
        )
        status.setdefault("uncountedTerminatedPods", {})
        for counter in ("active", "succeeded", "failed"):  # omitempty in batch/v1
            if not status.get(counter):
                status.pop(counter, None)
        if status != (job.get("status") or {}):
            jobs = self.api.resource("batch", "v1", "jobs")
            meta = job["metadata"]
            self.api.update(
                jobs, meta["namespace"], meta["name"], {**job, "status": status}, subresource="status"
            )

    def _now(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.api.clock()))


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", ""))


def _active(pod: Mapping[str, Any]) -> bool:
    return _phase(pod) not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def _meta(meta: Mapping[str, Any], finalizers: list[str], owners: list[Any]) -> dict[str, Any]:
    new = {**meta, "finalizers": finalizers, "ownerReferences": owners}
    for field in ("finalizers", "ownerReferences"):
        if not new[field]:
            del new[field]
    return new


def _condition(status: Mapping[str, Any], type_: str) -> str:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return str(cond.get("status", ""))
    return ""


def _set_condition(status: dict[str, Any], type_: str, value: str, why: tuple[str, str], now: str) -> None:
    conditions = status.setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != value:
                cond.update(
                    status=value, reason=why[0], message=why[1], lastTransitionTime=now, lastProbeTime=now
                )
            return
    conditions.append(
        {"type": type_, "status": value, "lastProbeTime": now, "lastTransitionTime": now,
         "reason": why[0], "message": why[1]}
    )  # fmt: skip


def _finish(status: dict[str, Any], target: str, final: str, why: tuple[str, str], now: str) -> None:
    for type_ in (target, final):
        _set_condition(status, type_, "True", why, now)
