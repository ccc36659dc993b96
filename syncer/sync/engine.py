"""The sync engine: turns cache changes into keys, keys into decisions, decisions into writes.

Level-triggered: a change on either side only says which Slurm node to look at; each reconcile
recomputes everything for that node from both caches, so a missed event, a restart or a re-list
cannot leave the two systems apart. Only the leader writes; in dry-run nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from syncer.kube.cache import KubeCache
from syncer.kube.events import EventRecorder, ObjectRef
from syncer.kube.gate import NotLeader, WriteGate
from syncer.kube.writer import KubeWriter, node_path, pod_path
from syncer.model.keys import CORDONED_BY_SLURM, Keys
from syncer.model.kube import Condition, KubeNode, KubePod, NodeSetRef
from syncer.model.slurm import SlurmNode
from syncer.runtime.backoff import Backoff
from syncer.runtime.controller import DONE, ControllerRunner, ReconcileMetrics, Result
from syncer.slurm.cache import NodeCache, NodeChange
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmError
from syncer.sync.binding import Binding, node_slurm, resolve
from syncer.sync.decide import (
    EVENT_CORDON,
    EVENT_DRAIN,
    EVENT_REDRAIN,
    EVENT_UNCORDON,
    EVENT_UNDRAIN,
    Decision,
    EventSpec,
    decide,
    rfc3339,
)
from syncer.sync.options import SyncOptions
from syncer.sync.valve import DrainValve
from syncer.sync.written import WrittenAnnotations
from syncer.tasks import cancel_and_wait

log = structlog.get_logger("syncer.sync")
SLURM_ACTION_EVENTS = frozenset({EVENT_DRAIN, EVENT_REDRAIN, EVENT_UNDRAIN})
CORDON_EVENTS = frozenset({EVENT_CORDON, EVENT_UNCORDON})


@dataclass
class EngineStats:
    reconciles: int = 0
    actions: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (kind, direction, result)
    conflicts: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)  # bound, but Slurm reports no node of that name
    valve_refusals: int = 0
    drifted: set[str] = field(default_factory=set)
    bound: int = 0

    def count(self, kind: str, direction: str, result: str) -> None:
        key = (kind, direction, result)
        self.actions[key] = self.actions.get(key, 0) + 1


class SyncEngine:
    name = "sync"  # the controller label of its reconcile metrics

    def __init__(
        self,
        *,
        slurm: SlurmClient,
        slurm_cache: NodeCache,
        kube_cache: KubeCache,
        writer: KubeWriter,
        events: EventRecorder,
        gate: WriteGate,
        options: SyncOptions,
        valve: DrainValve | None = None,
        workers: int = 8,
        resync_s: float,
        missing_grace_s: float,
        clock: Callable[[], float] = time.time,
        on_action: Callable[[str, str, str, dict[str, Any]], None] | None = None,
        reconcile_metrics: ReconcileMetrics | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.slurm = slurm
        self.slurm_cache = slurm_cache
        self.kube_cache = kube_cache
        self.writer = writer
        self.events = events
        self.gate = gate
        self.options = options
        self.valve = valve or DrainValve()
        self.resync_s = resync_s
        self.missing_grace_s = missing_grace_s
        self._missing_since: dict[str, float] = {}
        self.written = WrittenAnnotations()
        self.clock = clock
        self.on_action = on_action  # (kind, direction, slurm node, details): metrics and test recorders
        self.runner = ControllerRunner(self, workers=workers, metrics=reconcile_metrics, backoff=backoff)
        self.queue = self.runner.queue
        self.stats = EngineStats()
        # Slurm node -> the NodeSet scaling it in, by identity (set by the NodeSet reconciler)
        self.scale_in: dict[str, NodeSetRef] = {}
        self._sent: dict[str, tuple[str, str, float]] = {}  # last Slurm write per node, to skip echoes
        self._observed_at: dict[str, float] = {}  # monotonic time a change was first seen, per key
        self._tasks: list[asyncio.Task[None]] = []
        slurm_cache.subscribe(self._on_slurm_changes)
        kube_cache.subscribe(self._on_kube_keys)

    # -- inputs -----------------------------------------------------------------------------------
    def _mark(self, name: str) -> None:
        self._observed_at.setdefault(name, time.monotonic())
        self.queue.add(name, urgent=True)  # ahead of resync keys

    def _on_slurm_changes(self, changes: list[NodeChange]) -> None:
        for change in changes:
            self._sent.pop(change.name, None)  # the cache caught up: decide from what it shows now
            self._mark(change.name)

    def _on_kube_keys(self, keys: set[str]) -> None:
        for key in keys:
            self._mark(key)

    def enqueue_all(self) -> int:
        names = self.kube_cache.slurm_names()
        for name in names:
            self.queue.add(name)
        self.stats.bound = len(names)
        return len(names)

    def mark_scale_in(self, slurm_name: str, nodeset: NodeSetRef | None) -> None:
        if nodeset is not None:
            self.scale_in[slurm_name] = nodeset
        else:
            self.scale_in.pop(slurm_name, None)
        self._mark(slurm_name)

    def _scale_in_of(self, slurm_name: str) -> str | None:
        """The name of the NodeSet scaling this node in, for the drain reason's text."""
        owner = self.scale_in.get(slurm_name)
        return owner.name if owner is not None else None

    # -- lifecycle --------------------------------------------------------------------------------
    async def run(self) -> None:
        await self.kube_cache.wait_synced()
        while not self.slurm_cache.synced:  # noqa: ASYNC110 - NodeCache has no event for its first answer
            await asyncio.sleep(0.1)
        log.info("caches synced, reconciling every bound Slurm node", bound=self.enqueue_all())
        self._tasks = [
            asyncio.create_task(self.queue.run(), name="sync-queue"),
            asyncio.create_task(self._housekeeping(), name="sync-housekeeping"),
        ]
        try:
            await asyncio.gather(*self._tasks)
        finally:
            await self.stop()

    async def stop(self) -> None:
        self.queue.stop()
        await cancel_and_wait(self._tasks)
        self._tasks = []

    async def _housekeeping(self) -> None:
        """Full resync now and then (level-triggered safety net) and the valve closing by itself."""
        next_resync = time.monotonic() + self.resync_s
        was_open = self.valve.is_open
        was_leading = self.gate.leading
        while True:
            await asyncio.sleep(1.0)
            bound = len(self.kube_cache.slurm_names())
            self.stats.bound = bound
            is_open = self.valve.tick(self.clock(), bound)
            leading = self.gate.leading
            if leading != was_leading:
                self.written.forget_all()  # another replica may have written meanwhile
            self.written.prune()
            if (was_open and not is_open) or (leading and not was_leading) or time.monotonic() >= next_resync:
                self.enqueue_all()  # valve closed, leadership gained, or periodic: look at everything
                next_resync = time.monotonic() + self.resync_s
            was_open, was_leading = is_open, leading

    def reset_valve(self) -> None:
        """Operator override: let the refused drains through."""
        self.valve.reset()
        self.enqueue_all()

    # -- one key ----------------------------------------------------------------------------------
    async def reconcile(self, name: str) -> Result:
        """One Slurm node: read both sides once, decide (pure), then apply the decision's writes."""
        self.stats.reconciles += 1
        if not self.kube_cache.synced or not self.slurm_cache.synced:
            return Result(requeue_after=1.0)
        binding = resolve(name, self.kube_cache)
        if binding.bound:
            binding = replace(
                binding, pod=self.written.overlay(binding.pod), node=self.written.overlay(binding.node)
            )
        if binding.conflict:
            await self._report_conflict(binding)
            return DONE
        self.stats.conflicts.discard(name)
        if not binding.bound:
            self._observed_at.pop(name, None)
            self._forget_missing(name)
            return DONE
        now = self.clock()
        slurm_node = self.slurm_cache.nodes.get(name)
        fresh = not self.slurm_cache.stale
        requeue: list[float] = []
        if fresh and slurm_node is None and name not in self._sent:
            if (wait_s := await self._report_missing(binding)) is not None:
                requeue.append(wait_s)
        else:
            self._forget_missing(name)
        if fresh and name in self._sent:
            # we wrote this node and the cache has not caught up (a full list of a big cluster takes
            # seconds): read this one node now rather than decide on what it was before our write
            with contextlib.suppress(SlurmError):
                slurm_node = await self.slurm.get_node(name)
        decision = decide(
            slurm_node, binding.pod, binding.node, now=now, opts=self.options, slurm_fresh=fresh,
            scale_in_of=self._scale_in_of(name), node_slurm=self._node_slurm(binding, slurm_node),
        )  # fmt: skip
        if decision.recheck_at is not None:
            requeue.append(max(0.05, decision.recheck_at - now))
        after = Result(requeue_after=min(requeue)) if requeue else DONE
        if decision.acts:
            self.stats.drifted.add(name)
        else:
            self.stats.drifted.discard(name)
        if not decision.acts and not decision.events:
            self._observed_at.pop(name, None)
            return after
        if not self.gate.leading:
            return after  # followers keep caches and metrics warm, nothing else
        await self._apply(name, binding, decision)
        return after

    async def _apply(self, name: str, binding: Binding, decision: Decision) -> None:
        """The decision's writes, in order: Slurm first (its result is what Kubernetes then shows),
        then the pod and Node, then the Events of what was done now; each write passes the gate."""
        logger = log.bind(
            slurm_node=name,
            pod=binding.pod.key if binding.pod else None,
            node=binding.node.name if binding.node else None,
            causes=[c.text for c in decision.causes] or None,
        )
        try:
            acted = await self._slurm_side(name, binding, decision, logger)
            await self._kube_side(name, binding, decision, logger, slurm_acted=acted)
        except NotLeader:
            logger.info("leadership lost mid-reconcile: remaining writes dropped")

    def _node_slurm(
        self, binding: Binding, slurm_node: SlurmNode | None
    ) -> list[tuple[str, SlurmNode | None]] | None:
        """The Slurm nodes of every bound slurmd pod on this one's Kubernetes Node, when there are several:
        the Node's conditions are decided from all of them, so that each of their reconciles writes the same
        (this node's own data as read for this reconcile, the others' from the Slurm cache)."""
        members = node_slurm(binding, self.kube_cache, self.slurm_cache.nodes)
        if members is None:
            return None
        return [(n, slurm_node if n == binding.slurm_name else found) for n, found in members]

    async def _report_conflict(self, binding: Binding) -> None:
        name = binding.slurm_name
        if name in self.stats.conflicts:
            return
        self.stats.conflicts.add(name)
        log.warning("conflicting bindings: Slurm node left alone", slurm_node=name, conflict=binding.conflict)
        if not self.gate.leading:
            return
        for pod in self.kube_cache.pods_for(name):
            await self.events.record(
                ObjectRef.pod(pod.namespace, pod.name, pod.uid),
                "Warning",
                "SlurmBindingConflict",
                binding.conflict,
            )
        for node in self.kube_cache.nodes_for(name):
            await self.events.record(
                ObjectRef.node(node.name), "Warning", "SlurmBindingConflict", binding.conflict
            )

    async def _report_missing(self, binding: Binding) -> float | None:
        """A label naming a Slurm node that Slurm does not know (a typo, or slurmd never registered) is
        reported once it has lasted `missing_grace_s` with slurmd's pod running: slurmd registers a
        dynamic node only after its pod has started. Returns when to look again, if the grace runs."""
        name, pod = binding.slurm_name, binding.pod
        if pod is not None and (pod.phase != "Running" or pod.terminating):
            self._forget_missing(name)
            return None
        first = self._missing_since.setdefault(name, time.monotonic())
        waited = time.monotonic() - first
        if waited < self.missing_grace_s:
            return self.missing_grace_s - waited + 0.05
        if name in self.stats.missing:
            return None
        self.stats.missing.add(name)
        message = (
            f"labelled {Keys.NODE_NAME_LABEL}={name}, but Slurm has no node of that name after "
            f"{self.missing_grace_s:.0f} s: check the label, or why slurmd did not register"
        )
        log.warning(
            "bound Slurm node not found in Slurm",
            slurm_node=name,
            pod=pod.key if pod else None,
            node=binding.node.name if binding.node else None,
        )
        ref = self._ref(binding, "pod" if pod is not None else "node")
        if ref is not None and self.gate.leading:
            await self.events.record(ref, "Warning", "SlurmNodeNotFound", message)
        return None

    def _forget_missing(self, name: str) -> None:
        self._missing_since.pop(name, None)
        self.stats.missing.discard(name)

    def _record(self, kind: str, direction: str, result: str, name: str, **details: Any) -> None:
        self.stats.count(kind, direction, result)
        details["result"] = result
        if result == "ok" and name in self._observed_at:
            latency = time.monotonic() - self._observed_at[name]
            details["latency_s"] = round(latency, 4)
            del self._observed_at[name]
        if self.on_action is not None:
            self.on_action(kind, direction, name, details)

    async def _slurm_side(self, name: str, binding: Binding, decision: Decision, logger: Any) -> bool:
        """Carries out the Slurm action, if any; True when it was sent now."""
        action = decision.slurm_action
        if action is None:
            return False
        if action.kind == "drain" and not action.redrain:
            bound = len(self.kube_cache.slurm_names())
            told = self.valve.holds(name)  # its "held back" Event went out when it was first refused
            if not self.valve.admit(name, self.clock(), bound):
                self.stats.valve_refusals += 1
                self._record("drain", "k8s_to_slurm", "valve", name)
                logger.warning(
                    "safety valve open: drain held back",
                    reason=action.reason,
                    threshold=self.valve.threshold(bound),
                )
                ref = self._ref(binding, "pod" if binding.pod else "node")
                if ref is not None and not told:
                    await self.events.record(
                        ref, "Warning", "SlurmDrainHeldBack",
                        f"safety valve open: more than {self.options_fraction()} of bound nodes would drain "
                        "within a minute; this drain waits until the storm subsides or an operator resets it",
                    )  # fmt: skip
                return False
        sent = self._sent.get(name)
        signature = (action.kind, action.reason)
        if (
            sent is not None
            and sent[:2] == signature
            and time.monotonic() - sent[2] < self.slurm_cache.stale_after_s
        ):
            return False  # already sent; the Slurm cache has not caught up yet
        if action.kind == "undrain":
            # the cache may be a second old: read the node again so an admin's new reason is never lifted
            current = await self.slurm.get_node(name)
            recheck = decide(
                current, binding.pod, binding.node, now=self.clock(), opts=self.options, slurm_fresh=True,
                scale_in_of=self._scale_in_of(name),
            )  # fmt: skip
            if recheck.slurm_action is None or recheck.slurm_action.kind != "undrain":
                logger.info(
                    "undrain skipped: Slurm changed meanwhile", reason=current.reason if current else None
                )
                return False
        if not self.gate.check():
            logger.info(f"dry-run: would {action.kind} in Slurm", reason=action.reason)
            self._record(action.kind, "k8s_to_slurm", "dry_run", name)
            return True
        if action.kind == "drain":
            await self.slurm.update_node(name, state=["DRAIN"], reason=action.reason)
        else:
            await self.slurm.update_node(name, state=["UNDRAIN"])
        self._sent[name] = (*signature, time.monotonic())
        logger.info(f"slurm node {action.kind}ed", reason=action.reason, redrain=action.redrain)
        self._record(action.kind, "k8s_to_slurm", "ok", name, reason=action.reason)
        self.slurm_cache.nudge()  # read the result back soon, so Kubernetes shows it
        return True

    def options_fraction(self) -> str:
        return f"{self.valve.max_fraction:.0%}"

    def _ref(self, binding: Binding, on: str) -> ObjectRef | None:
        if on == "pod" and binding.pod is not None:
            return ObjectRef.pod(binding.pod.namespace, binding.pod.name, binding.pod.uid)
        if binding.node is not None:
            return ObjectRef.node(binding.node.name)
        return None

    async def _kube_side(
        self, name: str, binding: Binding, decision: Decision, logger: Any, *, slurm_acted: bool
    ) -> None:
        pod, node = binding.pod, binding.node
        wrote = False
        cordoned = False
        fresh: dict[bool, dict[str, Any]] = {}  # True: the pod, False: the Node, as last written
        if decision.annotations:
            target_pod = decision.annotations_on == "pod" and pod is not None
            path = (
                pod_path(pod.namespace, pod.name)
                if target_pod and pod
                else node_path(node.name)
                if node
                else ""
            )
            current = _cached(pod if target_pod else node)
            written = (
                await self.writer.set_annotations(
                    path, decision.annotations, current=current, what="slurm state"
                )
                if path
                else None
            )
            if written is not None:
                wrote = True
                target = pod if target_pod else node
                if target is not None:
                    self.written.remember(target, decision.annotations)
                # the written object carries the new resourceVersion: the next write starts from it
                # instead of the cached one (which would only earn a 409 and a fresh GET)
                fresh[target_pod] = written
        if pod is not None and decision.pod_conditions:
            wrote |= await self._conditions(
                pod_path(pod.namespace, pod.name), decision.pod_conditions, pod, fresh.get(True)
            )
        if node is not None and decision.node_conditions:
            wrote |= await self._conditions(
                node_path(node.name), decision.node_conditions, node, fresh.get(False)
            )
        if decision.cordon and node is not None:
            cordoned = await self._cordon(node, decision.cordon, logger)
            wrote |= cordoned
        if wrote:
            state = self.slurm_cache.nodes.get(name)
            logger.info("kubernetes updated from slurm", state=state.state_text if state else None)
            self._record("annotate", "slurm_to_k8s", "ok", name)
        for event in decision.events:
            # an action's Event only when the action was taken now, not again while caches catch up
            if event.reason in SLURM_ACTION_EVENTS and not slurm_acted:
                continue
            if event.reason in CORDON_EVENTS and not cordoned:
                continue
            await self._event(binding, event)

    async def _conditions(
        self,
        path: str,
        conditions: tuple[Condition, ...],
        obj: KubePod | KubeNode,
        fresh: dict[str, Any] | None = None,
    ) -> bool:
        now = rfc3339(self.clock()) or ""
        current = fresh if fresh is not None else _cached(obj, with_conditions=True)
        written = await self.writer.set_conditions(path, list(conditions), now, current=current)
        return written is not None

    async def _cordon(self, node: KubeNode, action: str, logger: Any) -> bool:
        if action == "cordon":

            def allowed(obj: dict[str, Any]) -> dict[str, Any] | None:
                return obj  # cordoning is always safe; the annotation records that it is ours

            written = await self.writer.set_unschedulable(
                node.name, True, {Keys.CORDONED_BY: CORDONED_BY_SLURM}, only_if=allowed
            )
        else:

            def ours(obj: dict[str, Any]) -> dict[str, Any] | None:
                annotations = (obj.get("metadata") or {}).get("annotations") or {}
                return obj if annotations.get(Keys.CORDONED_BY) == CORDONED_BY_SLURM else None

            written = await self.writer.set_unschedulable(
                node.name, False, {Keys.CORDONED_BY: None}, only_if=ours
            )
        if written is None:
            return False  # nothing to change (or not ours to lift)
        logger.info(f"kubernetes node {action}ed for slurm")
        self._record(action, "slurm_to_k8s", "ok", node.name)
        return True

    async def _event(self, binding: Binding, event: EventSpec) -> None:
        ref = self._ref(binding, event.on)
        if ref is not None:
            await self.events.record(ref, event.type, event.reason, event.message)


def _cached(obj: KubePod | KubeNode | None, with_conditions: bool = False) -> dict[str, Any] | None:
    """The cached object in API shape, enough for the writer to diff against (409 if it is stale)."""
    if obj is None:
        return None
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
