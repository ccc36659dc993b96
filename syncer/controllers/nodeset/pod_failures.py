"""Why a member's pod will not start (or stopped being able to run), as a short Slurm node reason.

Pure: a function of the pod and its Kubernetes Node as the API server returns them (plain dicts) and
the time. A power-saving NodeSet powers the member's Slurm node down with this reason, so its jobs are
requeued elsewhere instead of waiting for ResumeTimeout.

The shapes are those kube-apiserver, kube-scheduler and the kubelet write:
- unscheduled: `spec.nodeName` empty, `status.conditions[PodScheduled]` False with reason `Unschedulable`
  (or `SchedulingGated`) and a message such as `0/3 nodes are available: 3 node(s) didn't match Pod's
  node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for
  scheduling.`;
- the slurmd container (named `slurmd`, else the first), or an init container before it, that cannot
  start: `status.{initContainerStatuses,containerStatuses}[].state.waiting` with reason `ErrImagePull`,
  `ImagePullBackOff`, `InvalidImageName`, `ErrImageNeverPull`, `CreateContainerConfigError` or
  `CrashLoopBackOff` (then `restartCount` and `lastState.terminated` say how it ended). A sidecar beside
  slurmd (another container, or an init container with `restartPolicy: Always`) does not count: slurmd
  registers and runs jobs whatever a log shipper does;
- the pod ended: `status.phase` `Failed` (or `Succeeded`: slurmd exited and will not restart), with
  `status.reason`/`status.message` when the kubelet evicted it;
- its Node gone (deleted) or NotReady (`Ready` condition `False` or `Unknown`; with `node_lost_after_s`, only
  once it has lasted that long, from its lastTransitionTime).
"""

from __future__ import annotations

from typing import Any

from syncer.controllers.nodeset.node_shape import slurmd_container
from syncer.kube.decode_base import epoch
from syncer.model.kube import KubePod

# Waiting reasons that mean the container will not start without someone changing something.
CANNOT_START = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
    }
)
CRASH_LOOP = "CrashLoopBackOff"
NODE_NOT_READY = ": NotReady ("  # in a lost-Node reason of a Node still there, not gone
MAX_REASON_BYTES = 200  # leaves room for the syncer's prefix within a drain reason's cap


def start_failure(
    pod: dict[str, Any],
    node: dict[str, Any] | None,
    now: float,
    *,
    unschedulable_after_s: float,
    node_lost_after_s: float = 0.0,
) -> str | None:
    """A short one-line reason naming the pod and why it cannot run, or None while it may still start.

    `node` is the Kubernetes Node named by the pod's `spec.nodeName` (None when that Node does not
    exist, or when the pod is not bound). A terminating pod is judged only by its Node (its own end
    is already decided); an unscheduled pod only once it has waited `unschedulable_after_s` since it
    was created, so a cluster autoscaler has that long to add a machine.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    who = f"pod {meta.get('namespace', '')}/{meta.get('name', '')}"
    node_name = spec.get("nodeName") or ""
    why = None
    if node_name:
        why = _node_lost(node_name, node, now, node_lost_after_s)
    if why is None and not meta.get("deletionTimestamp"):
        why = ended_text(status) or _container_failure(pod)
        if why is None and not node_name:
            why = _unscheduled(meta, status, now, unschedulable_after_s)
    return None if why is None else _one_line(f"{who} {why}")


def may_have_failed(
    pod: KubePod, now: float, *, unschedulable_after_s: float, slurmd_path: frozenset[str] = frozenset()
) -> bool:
    """From the informer's copy of the pod: whether `start_failure` could find a reason on a fresh read, so
    the pod is read only then (1,000 powering-up members were 1,000 GETs a pass). `slurmd_path`: the
    containers whose failure is slurmd's (empty: every container's). Its Node is judged apart."""
    if pod.phase in ("Failed", "Succeeded"):
        return True
    if not pod.terminating and any(
        (reason in CANNOT_START or reason == CRASH_LOOP) and (not slurmd_path or name in slurmd_path)
        for name, reason in pod.waiting
    ):
        return True
    # unscheduled past the bound (an unknown creation time: read it, the read tells)
    return not pod.node_name and not pod.terminating and now - pod.created >= unschedulable_after_s


def _node_lost(node_name: str, node: dict[str, Any] | None, now: float, after_s: float) -> str | None:
    if node is None:
        return f"lost its Node {node_name}: the Node is gone"
    ready = _condition(node.get("status") or {}, "Ready")
    if ready is None or ready.get("status") == "True":
        return None  # a Node without a Ready condition yet is not judged lost
    since = epoch(ready.get("lastTransitionTime"))
    if since and now - since < after_s:
        return None  # NotReady for a moment (a kubelet restart, an apiserver blip): not lost yet
    detail = ready.get("reason") or ready.get("status")
    return f"lost its Node {node_name}{NODE_NOT_READY}{detail})"


def ended_text(status: dict[str, Any]) -> str | None:
    """`Failed: Evicted: The node was low on resource: memory.` for a pod that ended; None while it runs."""
    phase = status.get("phase")
    if phase not in ("Failed", "Succeeded"):
        return None
    detail = ": ".join(str(status[k]) for k in ("reason", "message") if status.get(k))
    if not detail:
        detail = _last_exit(status)
    return f"{phase}" + (f": {detail}" if detail else "")


def _container_failure(pod: dict[str, Any]) -> str | None:
    for container in _slurmd_path(pod):
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        name = container.get("name", "")
        if reason in CANNOT_START:
            message = waiting.get("message")
            return f"{reason} (container {name})" + (f": {message}" if message else "")
        if reason == CRASH_LOOP:
            exit_text = _exit_text(container)
            restarts = container.get("restartCount", 0)
            return f"{CRASH_LOOP} (container {name}, {restarts} restarts" + (
                f", last {exit_text})" if exit_text else ")"
            )
    return None


def _unscheduled(meta: dict[str, Any], status: dict[str, Any], now: float, bound_s: float) -> str | None:
    scheduled = _condition(status, "PodScheduled") or {}
    since = epoch(meta.get("creationTimestamp")) or epoch(scheduled.get("lastTransitionTime"))
    if not since or now - since < bound_s:
        return None
    waited = f"for {int(now - since)}s"
    if scheduled.get("status") != "False":
        return f"not scheduled {waited} (no scheduler decision)"
    # The scheduler's preemption summary adds nothing to why no Node fits.
    message = str(scheduled.get("message") or "").split(" preemption:", 1)[0].rstrip(".")
    reason = scheduled.get("reason") or "Unschedulable"
    return f"{reason} {waited}" + (f": {message}" if message else "")


def _last_exit(status: dict[str, Any]) -> str:
    for container in _containers(status):
        text = _exit_text(container)
        if text:
            return f"container {container.get('name', '')} {text}"
    return ""


def _exit_text(container: dict[str, Any]) -> str:
    """How a container last ended, e.g. `exit 1 (Error)`; "" when it has not."""
    for state in (container.get("state") or {}, container.get("lastState") or {}):
        ended = state.get("terminated")
        if ended:
            reason = ended.get("reason")
            return f"exit {ended.get('exitCode', '?')}" + (f" ({reason})" if reason else "")
    return ""


def _slurmd_path(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The statuses of the containers slurmd needs: init containers but native sidecars (they run beside
    it), and slurmd's own. A pod whose spec names no container (not one the API server returns) is judged by
    every container."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    name = slurmd_container(pod).get("name")
    if name is None:
        return _containers(status)
    sidecars = {c.get("name") for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"}
    init = [c for c in status.get("initContainerStatuses") or [] if c.get("name") not in sidecars]
    return init + [c for c in status.get("containerStatuses") or [] if c.get("name") == name]


def _containers(status: dict[str, Any]) -> list[dict[str, Any]]:
    return list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def _one_line(text: str) -> str:
    """Printable characters only (no newline, tab or bidi control: `sinfo` shows it as is), one space
    between words, at most MAX_REASON_BYTES of UTF-8 without splitting a character."""
    clean = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return clean.encode("utf-8")[:MAX_REASON_BYTES].decode("utf-8", "ignore")
