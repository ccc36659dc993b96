"""The applier: carries out one reconcile's decision, in order. Slurm first (the action as `admit.py` let
it through: its result is what Kubernetes then shows), then the pod and Node (annotations, conditions,
cordon), then the Events of what was done now. It decides nothing: the valve, the echo and the decision
again on a fresh read come before it, in the sync controller's reconcile. Its writes go through the
context's writers (the write gate is checked there)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from syncer.control.binding import Binding
from syncer.control.bulk import Still, Superseded
from syncer.control.context import ControllerContext
from syncer.controllers.sync.admit import Admitted
from syncer.controllers.sync.plan import (
    EVENT_CORDON,
    EVENT_DRAIN,
    EVENT_REDRAIN,
    EVENT_UNCORDON,
    EVENT_UNDRAIN,
    CordonAction,
    Decision,
)
from syncer.controllers.sync.written import WrittenAnnotations, WrittenObjects, WrittenSlurm
from syncer.kube.writer import node_path, pod_path
from syncer.model.keys import CORDONED_BY_SLURM, Keys
from syncer.model.kube import Condition, KubeNode, KubePod
from syncer.model.times import rfc3339

log = structlog.get_logger("syncer.controllers.sync")
SLURM_ACTION_EVENTS = frozenset({EVENT_DRAIN, EVENT_REDRAIN, EVENT_UNDRAIN})
CORDON_EVENTS = frozenset({EVENT_CORDON, EVENT_UNCORDON})
Recorder = Callable[..., None]  # (kind, direction, result, slurm node, **details)


class Applier:
    def __init__(
        self,
        context: ControllerContext,
        *,
        written: WrittenAnnotations,
        slurm_writes: WrittenSlurm,
        record: Recorder,
        clock: Callable[[], float],
        held_for_watch: set[str],
    ) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.written = written
        self.slurm_writes = slurm_writes  # our Slurm writes whose echo the cache still owes
        self.record = record
        self.clock = clock
        self.objects = WrittenObjects()  # each write starts from our last one until the cache has it
        # nodes whose Slurm action waited for a watch gap to close (an update superseded by one is logged so)
        self.held_for_watch = held_for_watch

    async def apply(
        self,
        name: str,
        binding: Binding,
        decision: Decision,
        *,
        send: Admitted | None,
        wait: bool = True,
        still: Still | None = None,
        logger: Any = log,
    ) -> bool:
        """Carries the decision out: `send`, the Slurm action admitted (for a drain or undrain, decided again
        on the node as read now: `admit.py`; None: nothing is sent, whatever the decision's `slurm_action`),
        then the decision's Kubernetes writes and Events.
        `still`: asked by the writer when the update's turn in its group commit comes. `wait=False`:
        Kubernetes writes that would wait for the client's rate limit are left for a later reconcile (True is
        returned then), so that Slurm-bound work never queues behind thousands of Kubernetes writes; the Event
        of a Slurm action taken now still goes out (folded into the storm summary if no token is free)."""
        acted = await self._send(name, send, still, logger) if send is not None else False
        return await self._kube_side(name, binding, decision, logger, slurm_acted=acted, wait=wait)

    async def _send(self, name: str, send: Admitted, still: Still | None, logger: Any) -> bool:
        """Sends the drain or undrain through the writer; True when it was sent now as a new transition."""
        action, repeat = send.action, send.repeat
        kind = action.kind
        try:
            if kind == "drain":
                written = await self.context.slurm_writer.update(
                    name, state=["DRAIN"], reason=action.reason, still=still
                )
            else:
                written = await self.context.slurm_writer.update(name, state=["UNDRAIN"], still=still)
        except Superseded:
            if name in self.held_for_watch:
                logger.info(f"{kind} held: a Kubernetes watch began reconnecting while it waited to be sent")
            else:
                logger.info(f"{kind} skipped: Kubernetes changed while it waited to be sent")
            return False
        if not written:  # a dry run (the writer logged the request)
            logger.info(f"dry-run: would {kind} in Slurm", reason=action.reason)
            self.record(kind, "k8s_to_slurm", "dry_run", name)
            return True
        self.slurm_writes.sent[name] = (kind, action.reason, time.monotonic())
        self.slurm_writes.read_after_write.pop(name, None)
        logger.info(f"slurm node {kind}ed", reason=action.reason, redrain=action.redrain, resent=repeat)
        self.record(kind, "k8s_to_slurm", "ok", name, reason=action.reason)
        self.context.slurm_cache.nudge()  # read the result back soon, so Kubernetes shows it
        # a resend while the Slurm cache cannot confirm the first write is the same transition: no new Event
        return not repeat

    async def _kube_side(
        self, name: str, binding: Binding, decision: Decision, logger: Any, *, slurm_acted: bool, wait: bool
    ) -> bool:
        """The decision's Kubernetes writes (`kube_writes`), in one loop, then the Events; True when a write
        was left for later (`wait`)."""
        wrote = False
        cordoned = False
        left = False  # a write left for a later reconcile: it would have waited for the rate limit
        annotations_left = False  # that write carried the state recorded, so its transition Events wait too
        for write in kube_writes(binding, decision):
            if self._later(wait):
                left = True
                annotations_left |= bool(write.annotations)
                continue
            done = await self._write(name, write, logger)
            wrote |= done
            cordoned |= done and write.cordon is not None
        if wrote:
            state = self.context.slurm_cache.nodes.get(name)
            logger.info("kubernetes updated from slurm", state=state.state_text if state else None)
            self.record("annotate", "slurm_to_k8s", "ok", name)
        for event in decision.events:
            # an action's Event only when the action was taken now, not again while caches catch up
            if event.reason in SLURM_ACTION_EVENTS:
                if not slurm_acted:
                    continue
            elif event.reason in CORDON_EVENTS:
                if not cordoned:
                    continue
            elif annotations_left:
                continue  # a transition's Event goes with the write that records the new state
            ref = binding.ref(event.on)
            if ref is not None:
                await self.context.events.record(ref, event.type, event.reason, event.message, wait=wait)
        return left

    def _later(self, wait: bool) -> bool:
        """A write now would wait for the Kubernetes client's rate limit and the reconcile may not wait
        (a key from the first lane): it is left to a later reconcile. Checked before each write, not once
        (issue 47: with a free token at the start, the next writes queued behind a storm's mirror writes and
        held the worker for seconds while uncordons waited for a worker); no await lies between this check
        and the write's token."""
        return not wait and self.context.writer.throttled()

    async def _write(self, name: str, write: KubeWrite, logger: Any) -> bool:
        """One write: the object's conditions and annotations in one /status patch, or the Node's cordon or
        uncordon (recorded, its latency too, by the Slurm node's name); False when nothing changed (or the
        cordon is not ours to lift)."""
        obj = write.obj
        current = self.objects.current(obj, _cached(obj, with_conditions=True))
        writer = self.context.writer
        if write.cordon is None:
            path = pod_path(obj.namespace, obj.name) if isinstance(obj, KubePod) else node_path(obj.name)
            written = await writer.set_status(
                path, list(write.conditions), rfc3339(self.clock()) or "", annotations=write.annotations,
                current=current, what="slurm state",
            )  # fmt: skip
        else:  # a cordon is always ours to set (its annotation records that); an uncordon lifts only ours
            cordon = write.cordon == "cordon"
            written = await writer.set_unschedulable(
                obj.name, cordon, {Keys.CORDONED_BY: CORDONED_BY_SLURM if cordon else None},
                only_if=None if cordon else _ours, current=current,
            )  # fmt: skip
        if written is None:
            return False
        self.objects.remember(obj, written)
        if write.annotations:
            self.written.remember(obj, write.annotations)
        if write.cordon is not None:
            logger.info(f"kubernetes node {write.cordon}ed for slurm")
            self.record(write.cordon, "slurm_to_k8s", "ok", name, node=obj.name)
        return True


@dataclass(frozen=True)
class KubeWrite:
    """One Kubernetes write of a decision: `obj`'s conditions and annotations (one /status patch), or, with
    `cordon`, the Node's cordon or uncordon."""

    obj: KubePod | KubeNode
    conditions: tuple[Condition, ...] = ()
    annotations: dict[str, str | None] = field(default_factory=dict)
    cordon: CordonAction | None = None


def kube_writes(binding: Binding, decision: Decision) -> list[KubeWrite]:
    """The writes the decision asks of Kubernetes, in their order: the pod's status, the Node's, the Node's
    cordon (the annotations go on the object `annotations_on` names, on the Node when there is no pod)."""
    pod, node = binding.pod, binding.node
    on_pod = decision.annotations_on == "pod" and pod is not None
    writes: list[KubeWrite] = []
    if pod is not None and (decision.pod_conditions or (on_pod and decision.annotations)):
        writes.append(KubeWrite(pod, decision.pod_conditions, decision.annotations if on_pod else {}))
    if node is not None:
        annotations = {} if on_pod else decision.annotations
        if decision.node_conditions or annotations:
            writes.append(KubeWrite(node, decision.node_conditions, annotations))
        if decision.cordon:
            writes.append(KubeWrite(node, cordon=decision.cordon))
    return writes


def _ours(obj: dict[str, Any]) -> dict[str, Any] | None:
    """An uncordon lifts only a cordon marked as ours."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return obj if annotations.get(Keys.CORDONED_BY) == CORDONED_BY_SLURM else None


def _cached(obj: KubePod | KubeNode, with_conditions: bool = False) -> dict[str, Any]:
    """The cached object in API shape, enough for the writer to diff against (409 if it is stale)."""
    body: dict[str, Any] = {
        "metadata": {
            "annotations": dict(obj.annotations),
            "labels": dict(obj.labels),
            "resourceVersion": obj.resource_version,
        }
    }
    if with_conditions:
        body["status"] = {
            "conditions": [
                {
                    "type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                    "lastTransitionTime": rfc3339(c.last_transition_time),
                }
                for c in obj.conditions
            ]
        }  # fmt: skip
    if isinstance(obj, KubeNode):
        body["spec"] = {"unschedulable": obj.unschedulable}
    return body
