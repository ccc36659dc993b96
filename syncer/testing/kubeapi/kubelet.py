"""A fake scheduler and kubelet: pods get a Node, start, turn Ready, follow their Node's health and
terminate, so what users see on a cordoned or NotReady Node matches a real cluster."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

from syncer.testing.kubeapi import room
from syncer.testing.kubeapi.api import Api, pod_ready, rfc3339
from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.kubeapi.scheduling import AFFINITY, misfit, misfits, unschedulable_message
from syncer.testing.kubeapi.store import Change

PODS = ("", "pods")
NODES = ("", "nodes")
# Test conventions (docs/emulator.md): images under these prefixes fail to pull, or crash on every start.
PULL_FAILS = "invalid.example/"
CRASH_LOOPS = "crashloop.example/"


def node_ready(node: dict[str, Any] | None) -> bool:
    if node is None:
        return False
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


DEFAULT_SCHEDULER = "default-scheduler"  # what kube-apiserver defaults spec.schedulerName to
OTHER_SCHEDULER = "\x00"  # index key of unscheduled pods another scheduler places: Node changes skip them


class FakeKubelet:
    def __init__(
        self,
        api: Api,
        termination_s: float = 0.5,
        start_delay_s: float = 0.0,
        pull_backoff_s: float = 0.5,
        scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER,),
    ) -> None:
        self.api = api
        # kube-scheduler's profiles: it places only pods whose spec.schedulerName is one of these and
        # leaves the others alone (no condition, no Event), for their own scheduler to bind
        self.scheduler_names = scheduler_names
        self.termination_s = termination_s
        self.start_delay_s = start_delay_s
        self.pull_backoff_s = pull_backoff_s  # ErrImagePull shows this long before ImagePullBackOff
        self._pull_failed_since: dict[tuple[str, str, str], float] = {}
        self._dirty: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._ip_counter = 0
        self._terminating_since: dict[tuple[str, str, str], float] = {}
        # nodeName ("" while unscheduled) -> its pods, so a Node's change finds them without a scan
        self._pods_on: dict[str, set[tuple[str, str]]] = {}
        self._ended_on: dict[str, set[tuple[str, str]]] = {}  # of those, the Succeeded or Failed ones

    def start(self) -> None:
        self.api.store.listeners.append(self._on_change)
        for pod in self.api.store.objects_of(PODS):
            self._place(None, pod)
            self._mark(pod)
        self._task = asyncio.create_task(self._run(), name="emulator-kubelet")

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.api.store.listeners.remove(self._on_change)
        for timer in self._timers:
            timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _mark(self, pod: dict[str, Any]) -> None:
        self._dirty.put_nowait(_pod_key(pod))

    def _place(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Moves a pod in the index from where its old version ran to where its new one runs."""
        if old is not None:
            self._pods_on.get(self._waits_on(old), set()).discard(_pod_key(old))
            self._ended_on.get(_node_of(old), set()).discard(_pod_key(old))
        if new is not None:
            self._pods_on.setdefault(self._waits_on(new), set()).add(_pod_key(new))
            if (new.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                self._ended_on.setdefault(_node_of(new), set()).add(_pod_key(new))

    def ours(self, pod: dict[str, Any]) -> bool:
        """Whether the emulated kube-scheduler places this pod."""
        return (pod.get("spec") or {}).get("schedulerName", DEFAULT_SCHEDULER) in self.scheduler_names

    def _waits_on(self, pod: dict[str, Any]) -> str:
        """The pod's Node; "" while it waits for our scheduler, OTHER_SCHEDULER while for another."""
        node = _node_of(pod)
        return node or ("" if self.ours(pod) else OTHER_SCHEDULER)

    def _on_change(self, change: Change) -> None:
        if change.resource == PODS:
            deleted = change.type == "DELETED"
            self._place(change.old, None if deleted else change.obj)
            if deleted:
                meta = change.obj["metadata"]
                self._pull_failed_since.pop((meta["namespace"], meta["name"], meta.get("uid", "")), None)
            else:
                self._mark(change.obj)
        elif change.resource == NODES:
            # A Node's health or schedulability changed: its pods, and pods waiting for a Node, follow.
            name = change.obj["metadata"]["name"]
            for key in sorted(self._pods_on.get(name, set()) | self._pods_on.get("", set())):
                self._dirty.put_nowait(key)

    async def _run(self) -> None:
        while True:
            namespace, name = await self._dirty.get()
            try:
                self._reconcile(namespace, name)
            except ApiError:
                pass  # the pod changed or went away meanwhile; its next change marks it again
            finally:
                self._dirty.task_done()

    async def settled(self) -> None:
        """Returns once every pod change so far has been acted on (timers still pending aside)."""
        await self._dirty.join()

    def _later(self, delay_s: float, namespace: str, name: str) -> None:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(delay_s, self._dirty.put_nowait, (namespace, name))
        self._timers.add(timer)

    def _reconcile(self, namespace: str, name: str) -> None:
        pods = self.api.resource("", "v1", "pods")
        pod = self.api.store.get(PODS, namespace, name)
        if pod is None:
            return
        spec = pod.get("spec") or {}
        meta = pod["metadata"]
        node_name = spec.get("nodeName")
        if not node_name:
            if not meta.get("deletionTimestamp") and self.ours(pod):
                self._schedule(pod)
            return
        node = self.api.store.get(NODES, "", node_name)
        if meta.get("deletionTimestamp"):
            self._terminate(pod)
            return
        status = dict(pod.get("status") or {})
        if not status.get("startTime"):
            if status.get("phase") in ("Failed", "Succeeded"):
                return  # rejected at admission (or ended before it started): nothing runs
            if node is not None and self._rejected(pod, node, status):
                return
        now = rfc3339(self.api.clock())
        ready = node_ready(node)
        if not status.get("podIP"):
            self._ip_counter += 1
            status.update(
                podIP=f"10.244.{self._ip_counter // 250 % 250}.{self._ip_counter % 250 + 2}",
                hostIP=_node_ip(node),
                startTime=now,
            )
        containers = spec.get("containers") or [{"name": "main"}]
        if any(_pull_fails(c) for c in containers):
            key = (namespace, name, meta.get("uid", ""))
            since = self._pull_failed_since.setdefault(key, self.api.clock())
            backed_off = self.api.clock() - since >= self.pull_backoff_s
            if not backed_off:
                self._later(since + self.pull_backoff_s - self.api.clock() + 0.01, namespace, name)
        else:
            backed_off = False
        statuses = [_container_status(c, pod, status.get("startTime", now), backed_off) for c in containers]
        unready = [c["name"] for c in statuses if not c["ready"]]
        if status.get("phase") == "Pending" and all(
            c["state"].get("running") or c.get("restartCount") for c in statuses
        ):
            status["phase"] = "Running"  # every container has started at least once
        if status.get("phase") in ("Failed", "Succeeded"):  # a pod someone marked ended runs nothing
            statuses = [{**c, "ready": False, "started": False} for c in statuses]
            unready = [c["name"] for c in statuses]
        container_ready = status.get("phase") == "Running" and not unready
        conditions = {
            "PodScheduled": "True",
            "Initialized": "True",
            "ContainersReady": "True" if container_ready else "False",
            "Ready": "True" if container_ready and ready else "False",
        }
        old_conditions = {c["type"]: c for c in status.get("conditions") or []}
        merged = []
        for type_, value in conditions.items():
            old = old_conditions.pop(type_, None)
            if old is not None and old.get("status") == value:
                merged.append(old)
            else:
                entry = {"type": type_, "status": value, "lastTransitionTime": now}
                if type_ == "Ready" and value == "False" and not ready:
                    entry.update(reason="NodeNotReady", message=f"Node {node_name} is not ready")
                elif type_ in ("Ready", "ContainersReady") and value == "False" and unready:
                    entry.update(
                        reason="ContainersNotReady",
                        message=f"containers with unready status: [{' '.join(unready)}]",
                    )
                merged.append(entry)
        merged.extend(old_conditions.values())  # conditions others set (e.g. the syncer's) are kept
        status["conditions"] = merged
        status["containerStatuses"] = statuses
        if status != pod.get("status"):
            self.api.update(pods, namespace, name, {**pod, "status": status}, subresource="status")

    def _terminate(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        delay = min(grace, self.termination_s)
        # deletionTimestamp has second resolution: time the grace period from when the kubelet saw it
        key = (meta["namespace"], meta["name"], meta.get("uid", ""))
        seen = self._terminating_since.setdefault(key, self.api.clock())
        remaining = seen + delay - self.api.clock()
        if remaining > 0:
            self._later(remaining + 0.01, meta["namespace"], meta["name"])
            return
        if meta.get("finalizers"):
            status = dict(pod.get("status") or {})
            if status.get("phase") not in ("Succeeded", "Failed"):
                status["phase"] = "Succeeded"
                status["conditions"] = [
                    {**c, "status": "False"} if c.get("type") in ("Ready", "ContainersReady") else c
                    for c in status.get("conditions") or []
                ]
                pods = self.api.resource("", "v1", "pods")
                self.api.update(
                    pods, meta["namespace"], meta["name"], {**pod, "status": status}, subresource="status"
                )
            return  # the pod stays until whoever owns the finalizer removes it
        self._terminating_since.pop(key, None)
        self.api.store.remove(PODS, meta["namespace"], meta["name"])

    def _holding(
        self, node_name: str, pod: dict[str, Any], admitted_only: bool = False
    ) -> list[dict[str, Any]]:
        """The pods bound to the Node that hold room there (not ended; for the kubelet, admitted ones),
        `pod` aside."""
        found = []
        for key in self._pods_on.get(node_name, ()):
            other = self.api.store.get(PODS, *key)
            if other is None or key == _pod_key(pod):
                continue
            status = other.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed") or (
                admitted_only and not status.get("startTime")
            ):
                continue
            found.append(other)
        return found

    def _rejected(self, pod: dict[str, Any], node: dict[str, Any], status: dict[str, Any]) -> bool:
        """The kubelet's admission (pkg/kubelet/lifecycle/predicate.go): a pod bound where it does not fit
        beside the pods admitted already is Failed with the first reason, and never runs."""
        meta = pod["metadata"]
        admitted = self._holding(node["metadata"]["name"], pod, admitted_only=True)
        short = room.shortfalls(pod, node, len(admitted), lambda: admitted)
        if short:
            name, requested, used, capacity = short[0]
            reason = f"OutOf{name}"
            message = (
                f"Node didn't have enough resource: {name}, requested: {requested}, used: {used}, "
                f"capacity: {capacity}"
            )
        elif misfit(pod, node) == AFFINITY:
            reason, message = "NodeAffinity", f"Predicate NodeAffinity failed: {AFFINITY}"
        else:
            return False
        status.update(phase="Failed", reason=reason, message=f"Pod was rejected: {message}")
        pods = self.api.resource("", "v1", "pods")
        self.api.update(
            pods, meta["namespace"], meta["name"], {**pod, "status": status}, subresource="status"
        )
        return True

    def _schedule(self, pod: dict[str, Any]) -> None:
        candidates, reasons = [], []
        for node in self.api.store.objects_of(NODES):
            name = node["metadata"]["name"]
            holders = len(self._pods_on.get(name, ())) - len(self._ended_on.get(name, ()))
            why = misfits(pod, node, holders, functools.partial(self._holding, name, pod))
            if why:
                reasons.append(why)
            else:
                candidates.append(node)
        pods = self.api.resource("", "v1", "pods")
        meta = pod["metadata"]
        if not candidates:
            status = dict(pod.get("status") or {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            current: dict[str, Any] = next(
                (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {}
            )
            wanted = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable_message(reasons),
                "lastProbeTime": None,
                # as kube-apiserver keeps it: a new message is not a new transition
                "lastTransitionTime": current.get("lastTransitionTime")
                if current.get("status") == "False"
                else rfc3339(self.api.clock()),
            }
            if all(current.get(k) == v for k, v in wanted.items() if v is not None):
                return
            status["conditions"] = [*conditions, wanted]
            self.api.update(
                pods, meta["namespace"], meta["name"], {**pod, "status": status}, subresource="status"
            )
            return
        chosen = min(
            candidates,
            key=lambda n: (len(self._pods_on.get(n["metadata"]["name"], ())), n["metadata"]["name"]),
        )
        spec = {**pod["spec"], "nodeName": chosen["metadata"]["name"]}
        self.api.update(pods, meta["namespace"], meta["name"], {**pod, "spec": spec})


def _pull_fails(container: dict[str, Any]) -> bool:
    return str(container.get("image", "")).startswith(PULL_FAILS)


def _container_status(
    container: dict[str, Any], pod: dict[str, Any], started_at: str, backed_off: bool
) -> dict[str, Any]:
    """One container's status as the kubelet reports it; by the test conventions of the image name,
    a failing pull or a crash loop instead of a running container."""
    meta = pod["metadata"]
    name, image = container.get("name", "main"), str(container.get("image", ""))
    status: dict[str, Any] = {"name": name, "image": image, "imageID": "", "ready": False, "restartCount": 0}
    status["started"] = False
    if _pull_fails(container):
        if backed_off:
            waiting = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}
        else:
            waiting = {
                "reason": "ErrImagePull",
                "message": f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
                f'failed to resolve reference "{image}": {image}: not found',
            }
        return {**status, "state": {"waiting": waiting}}
    status["imageID"] = f"docker.io/library/{image or 'unknown'}@sha256:{'0' * 64}"
    status["containerID"] = f"containerd://{abs(hash((meta['namespace'], meta['name'], name))):064x}"[:77]
    if image.startswith(CRASH_LOOPS):
        message = f"back-off 10s restarting failed container={name} pod={meta['name']}_{meta['namespace']}"
        message += f"({meta.get('uid', '')})"
        ended = {"exitCode": 1, "reason": "Error", "startedAt": started_at, "finishedAt": started_at}
        return {
            **status,
            "restartCount": 1,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": message}},
            "lastState": {"terminated": ended},
        }
    return {**status, "ready": True, "started": True, "state": {"running": {"startedAt": started_at}}}


def _pod_key(pod: dict[str, Any]) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]


def _node_of(pod: dict[str, Any]) -> str:
    """The Node a pod is bound to, "" while it waits for one."""
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _node_ip(node: dict[str, Any] | None) -> str:
    for address in ((node or {}).get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address", ""))
    return ""


__all__ = ["FakeKubelet", "node_ready", "pod_ready"]
