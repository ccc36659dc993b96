"""The applier: carries out one reconcile's decision, in order. Slurm first (its result is what
Kubernetes then shows), then the pod and Node (annotations, conditions, cordon), then the Events of
what was done now. It owns the safety valve's admission of new automatic drains, the
echo suppression of Slurm writes the cache has not caught up with, and the re-read before an
undrain, so the sync controller's reconcile stays read -> decide -> apply. Its writes go through the
context's writers (the write gate is checked there)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from syncer.control.binding import Binding
from syncer.control.bulk import Superseded
from syncer.control.context import ControllerContext
from syncer.controllers.sync.causes import is_automatic
from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.plan import (
    EVENT_CORDON,
    EVENT_DRAIN,
    EVENT_REDRAIN,
    EVENT_UNCORDON,
    EVENT_UNDRAIN,
    CordonAction,
    Decision,
    SlurmAction,
    decide,
)
from syncer.controllers.sync.read import Reader
from syncer.controllers.sync.stats import EngineStats
from syncer.controllers.sync.valve import DrainValve
from syncer.controllers.sync.written import WrittenAnnotations, WrittenObjects, WrittenSlurm
from syncer.kube.writer import node_path, pod_path
from syncer.model.keys import CORDONED_BY_SLURM, Keys
from syncer.model.kube import Condition, KubeNode, KubePod
from syncer.model.slurm import SlurmNode
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
        options: SyncOptions,
        valve: DrainValve,
        written: WrittenAnnotations,
        slurm_writes: WrittenSlurm,
        reader: Reader,
        stats: EngineStats,
        record: Recorder,
        clock: Callable[[], float],
    ) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.options = options
        self.valve = valve
        self.written = written
        self.slurm_writes = slurm_writes  # our Slurm writes whose echo the cache still owes
        self.reader = reader  # to decide again on what both sides show after a slow read
        self.stats = stats
        self.record = record
        self.clock = clock
        self.objects = WrittenObjects()  # each write starts from our last one until the cache has it
        # nodes whose Slurm action waited for a watch gap to close: their reconcile looks again soon
        self.held_for_watch: set[str] = set()

    async def apply(
        self,
        name: str,
        binding: Binding,
        decision: Decision,
        *,
        wait: bool = True,
        read_now: SlurmNode | None = None,
    ) -> bool:
        """Carries the decision out. `wait=False`: Kubernetes writes that would wait for the client's rate
        limit are left for a later reconcile (True is returned then), so that Slurm-bound work never queues
        behind thousands of Kubernetes writes; the Event of a Slurm action taken now still goes out (folded
        into the storm summary if no token is free). `read_now`: the node as read from slurmrestd in this very
        reconcile, not read again before an undrain or a new drain."""
        logger = log.bind(
            slurm_node=name,
            pod=binding.pod.key if binding.pod else None,
            node=binding.node.name if binding.node else None,
            causes=[c.text for c in decision.causes] or None,
        )
        acted = await self._slurm_side(name, binding, decision, logger, read_now)
        return await self._kube_side(name, binding, decision, logger, slurm_acted=acted, wait=wait)

    async def _slurm_side(
        self, name: str, binding: Binding, decision: Decision, logger: Any, read_now: SlurmNode | None
    ) -> bool:
        """Carries out the Slurm action, if any; True when it was sent now as a new transition."""
        action = decision.slurm_action
        if action is None:
            return False
        if not self._kube_current(name):
            logger.info(
                f"{action.kind} held: a Kubernetes watch is reconnecting (a change made meanwhile may be "
                "missing)",
                reason=action.reason,
            )
            self.record(action.kind, "k8s_to_slurm", "watch_gap", name)
            return False
        new_drain = action.kind == "drain" and not action.redrain
        if new_drain and not await self._valve_admits(name, binding, decision, action.reason, logger):
            return False
        sent = self.slurm_writes.sent.get(name)
        repeat = sent is not None and sent[:2] == (action.kind, action.reason)
        if (
            repeat
            and sent is not None
            and time.monotonic() - sent[2] < self.context.slurm_cache.stale_after_s
        ):
            return False  # already sent; the Slurm cache has not caught up yet
        current = self.context.slurm_cache.nodes.get(name)
        if action.kind == "undrain" or not action.redrain:
            confirmed = await self._confirmed(name, action, read_now, logger)
            if confirmed is None:
                return False
            action, current = confirmed
        return await self._send(name, action, current, logger, repeat=repeat)

    async def _confirmed(
        self, name: str, action: SlurmAction, read_now: SlurmNode | None, logger: Any
    ) -> tuple[SlurmAction, SlurmNode | None] | None:
        """The action decided again on the node as read now, with that node; None (logged) when it is no
        longer wanted. The cache may be a poll old: read the node again, so an admin's new reason is never
        lifted and a drain someone else just made (Slinky's operator reacts to the same cordon) keeps its
        reason instead of being overwritten by ours."""
        current = read_now if read_now is not None else await self.reader.fresh(name)
        # that read can take seconds (retries, a slow slurmrestd): decide again on what Kubernetes shows now
        # too, so a drain never goes out after the uncordon that arrived meanwhile
        again = self._decided_again(name, current)
        if again is None or again.kind != action.kind:
            # mostly a list older than our own write: the node already is as wanted
            wanted_flag = action.kind == "drain"
            done = again is None and current is not None and current.drain_flag == wanted_flag
            logger.info(
                f"{action.kind} skipped: "
                + ("Slurm already shows it" if done else "Slurm or Kubernetes changed meanwhile"),
                reason=current.reason if current else None,
            )
            return None
        # the reason too is the one decided on what both sides show now (a drain annotation or a condition
        # that arrived during the read joins it)
        return again, current

    async def _send(
        self, name: str, action: SlurmAction, current: SlurmNode | None, logger: Any, *, repeat: bool
    ) -> bool:
        """Sends the drain or undrain through the writer; True when it was sent now as a new transition."""
        kind = action.kind

        def still_wanted() -> bool:
            # the update may wait behind a slow request to slurmrestd: decided once more when its turn comes
            again = self._decided_again(name, current)
            return again is not None and again.kind == kind

        try:
            if kind == "drain":
                written = await self.context.slurm_writer.update(
                    name, state=["DRAIN"], reason=action.reason, still=still_wanted
                )
            else:
                written = await self.context.slurm_writer.update(name, state=["UNDRAIN"], still=still_wanted)
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

    def _kube_current(self, name: str) -> bool:
        """Kubernetes as the cache shows it may be decided on: no watch gap, in which an uncordon (or a new
        cordon) may have been made and not seen; the written Slurm state would then be a stale decision's
        (a drain after the uncordon). Else `name` is noted to be looked at again once the gap closes."""
        if self.context.kube_cache.current:
            return True
        self.held_for_watch.add(name)
        return False

    def _decided_again(self, name: str, slurm_node: SlurmNode | None) -> SlurmAction | None:
        """The Slurm action decided now, on `slurm_node` and Kubernetes as the cache shows it now (None while
        a watch gap may hide a change)."""
        if not self._kube_current(name):
            return None
        seen = self.reader.again(name, slurm_node)
        if not seen.binding.bound:
            return None
        pod, node = seen.binding.pod, seen.binding.node
        return decide(
            slurm_node, pod, node, now=seen.now, opts=self.options, slurm_fresh=True,
            scale_in_of=seen.scale_in, held=seen.held,
        ).slurm_action  # fmt: skip

    async def _valve_admits(
        self, name: str, binding: Binding, decision: Decision, reason: str, logger: Any
    ) -> bool:
        """The safety valve limits automatic drains only; an explicit intent is never held nor counted."""
        if not is_automatic(decision.causes):
            if self.valve.holds(name):
                logger.info("safety valve open: explicit drain not held back", reason=reason)
            self.valve.forget(name)
            return True
        bound = len(self.context.kube_cache.slurm_names())
        told = self.valve.holds(name)  # its "held back" Event went out when it was first refused
        if self.valve.admit(name, self.clock(), bound):
            return True
        threshold = self.valve.threshold(bound)
        self.stats.valve_refusals += 1
        self.record("drain", "k8s_to_slurm", "valve", name)
        logger.warning("safety valve open: automatic drain held back", reason=reason, threshold=threshold)
        ref = binding.ref("pod" if binding.pod else "node")
        if ref is not None and not told:
            await self.context.events.record(
                ref, "Warning", "SlurmDrainHeldBack",
                f"safety valve open: more than {threshold} of {bound} bound nodes ({self.valve_limit()}) "
                "would newly drain within a minute from automatic causes (Ready past the grace, problem "
                "conditions); this drain waits until the storm subsides or an operator resets the valve "
                f"(annotation {Keys.VALVE_RESET} on the leader Lease; docs/operations.md). Cordons, drain "
                "annotations, terminating pods and scale-in are never held back",
            )  # fmt: skip
        return False

    def valve_limit(self) -> str:
        return f"{self.valve.max_fraction:.0%}, at least {self.valve.min_nodes}"

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
