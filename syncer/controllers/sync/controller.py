"""The sync controller (the sync engine): turns cache changes into keys, and each key's
reconcile into read -> decide -> apply: read both sides once (the caches, plus one fresh read of a
node we just wrote), call the pure `decide`, hand the decision to the `Applier`
(syncer/controllers/sync/apply.py), which owns ordering, the write gate, the safety valve and Events.

Level-triggered: a change on either side only says which Slurm node to look at; each reconcile
recomputes everything for that node from both caches, so a missed event, a restart or a re-list
cannot leave the two systems apart. Its runner reconciles only on the leader; a dry run is the writers'.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import structlog

from syncer.control.binding import Binding, node_slurm
from syncer.control.context import ControllerContext
from syncer.control.holds import held_in, hold_text
from syncer.control.registration import Registration
from syncer.controllers.sync.apply import Applier
from syncer.controllers.sync.options import OPTIONS, SyncOptions, options_from
from syncer.controllers.sync.plan import decide
from syncer.controllers.sync.stats import EngineStats
from syncer.controllers.sync.valve import DrainValve
from syncer.controllers.sync.written import WrittenAnnotations
from syncer.model.keys import Keys
from syncer.model.slurm import SlurmNode
from syncer.runtime.controller import DONE, Controller, Result
from syncer.runtime.queue import Lane, WorkQueue, taken_from
from syncer.runtime.watch import Watch, Watches
from syncer.slurm.cache import NodeChange
from syncer.slurm.errors import SlurmError

log = structlog.get_logger("syncer.controllers.sync")
# how soon a Slurm action held for a Kubernetes watch gap is looked at again (a reconnect takes a request)
WATCH_GAP_RECHECK_S = 0.5


class SyncController(Controller):
    name = "sync"  # the controller label of its reconcile metrics and logs

    def __init__(self, context: ControllerContext, options: SyncOptions) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.options = options = replace(options, owner_prefix=context.owner_prefix)
        self.valve = DrainValve(
            max_fraction=options.max_drain_fraction, min_nodes=options.safety_valve_min_nodes
        )
        self.missing_grace_s = options.missing_grace_s
        self._missing_since: dict[str, float] = {}
        self.written = WrittenAnnotations()
        self.clock = context.clock
        self.actions = context.actions  # (kind, direction, slurm node, details): metrics and test recorders
        # three times as many workers again for Kubernetes changes only (they never wait for the Kubernetes
        # rate limit, the others may all be waiting for it in a storm of Slurm changes): 1,000 cordons drained
        # in 5.0 s with 8 workers, 1.9 s with 32 (issue 30)
        self.first_workers = 3 * context.workers
        self.stats = EngineStats()
        # Slurm node -> the NodeSet scaling it in, by identity (set by the NodeSet controller)
        self.scale_in = context.scale_in
        # Slurm node -> why the one-pool scheduler holds it (a pod whose job ended still terminates there)
        self.holds = context.holds
        self._observed_at: dict[str, float] = {}  # monotonic time a change was first seen, per key
        self.applier = Applier(
            context, options=options, valve=self.valve, written=self.written, stats=self.stats,
            record=self._record, scale_in_of=self._scale_in_of, clock=self.clock, held_of=self._held_of,
        )  # fmt: skip
        self._was_open = False  # the valve at the last housekeeping

    # -- inputs -----------------------------------------------------------------------------------
    def watches(self) -> Watches:
        # Kubernetes changes first: their work is mostly Slurm-bound (a cordon to drain) and must not queue
        # behind the rate-limited Kubernetes writes a storm of Slurm changes brings; all ahead of a resync
        return (
            Watch(self.context.kube_cache.subscribe, self._seen, lane=Lane.FIRST),
            Watch(self.scale_in.subscribe, lambda name: self._seen((name,)), lane=Lane.FIRST),
            Watch(self.holds.subscribe, lambda name: self._seen((name,)), lane=Lane.FIRST),
            Watch(self.context.slurm_cache.subscribe, self._slurm_changed, lane=Lane.URGENT),
        )

    def _seen(self, names: Iterable[str]) -> Iterable[str]:
        """Notes when a change of each was first seen (its action's latency starts there)."""
        now = time.monotonic()
        for name in names:
            self._observed_at.setdefault(name, now)
        return names

    def _slurm_changed(self, changes: list[NodeChange]) -> list[str]:
        for change in changes:  # a list asked for after our own write: decide from what it shows now
            self.applier.caught_up(change.name, self.context.slurm_cache.listed_at)
        return list(self._seen([change.name for change in changes]))

    @property
    def queue(self) -> WorkQueue:
        return self.runner.queue

    async def keys(self) -> list[str]:
        names = self.context.kube_cache.slurm_names()
        self.stats.bound = len(names)
        return list(names)

    def _scale_in_of(self, slurm_name: str) -> str | None:
        """The name of the NodeSet scaling this node in, for the drain reason's text."""
        owner = self.scale_in.get(slurm_name)
        return owner.name if owner is not None else None

    def _held_of(self, slurm_name: str, slurm_node: SlurmNode | None) -> str | None:
        """The scheduler's hold on this node, as the drain cause's text. Until the scheduler has planned
        every gang once after a start, a drain of ours that reads as a hold is kept as it is: a restart
        must not lift a hold still needed (syncer/control/holds.py)."""
        reason = self.holds.get(slurm_name)
        if reason is not None:
            return hold_text(reason)
        if self.holds.settled or slurm_node is None:
            return None
        return held_in(slurm_node.reason, self.options.owner_prefix)

    # -- lifecycle --------------------------------------------------------------------------------
    async def prepare(self) -> None:
        await self.context.kube_cache.wait_synced()
        await self.context.slurm_cache.wait_synced()
        self._was_open = self.valve.is_open

    def elected(self) -> None:
        """Another replica may have written meanwhile: our records of our own writes no longer hold."""
        self.written.forget_all()
        self.applier.objects.forget_all()

    def tick(self) -> bool:
        """Once a second: the valve closing by itself, our write records kept or forgotten; True when every
        key must be looked at again (the valve closed)."""
        bound = len(self.context.kube_cache.slurm_names())
        self.stats.bound = bound
        is_open = self.valve.tick(self.clock(), bound)
        self.written.prune()
        self.applier.objects.prune()
        closed = self._was_open and not is_open
        self._was_open = is_open
        return closed

    def not_ready(self) -> list[str]:
        return (
            ["safety valve open: automatic Kubernetes-side drains are held back"]
            if self.valve.is_open
            else []
        )

    def reset_valve(self) -> None:
        """Operator override: let the refused drains through."""
        self.valve.reset()
        for name in self.context.kube_cache.slurm_names():
            self.queue.add(name)

    # -- one key ----------------------------------------------------------------------------------
    async def reconcile(self, name: str) -> Result:
        """One Slurm node: read both sides once, decide (pure), then apply the decision's writes."""
        self.stats.reconciles += 1
        if not self.context.kube_cache.synced or not self.context.slurm_cache.synced:
            return Result(requeue_after=1.0)
        binding = self.applier.binding(name)
        if binding.conflict:
            await self._report_conflict(binding)
            return DONE
        self.stats.conflicts.discard(name)
        if not binding.bound:
            self._observed_at.pop(name, None)
            self._forget_missing(name)
            return DONE
        now = self.clock()
        slurm_node = self.context.slurm_cache.nodes.get(name)
        fresh = not self.context.slurm_cache.stale
        requeue: list[float] = []
        if fresh and slurm_node is None and not self.applier.awaiting_echo(name):
            if (wait_s := await self._report_missing(binding)) is not None:
                requeue.append(wait_s)
        else:
            self._forget_missing(name)
        read_now = False
        if fresh and self.applier.awaiting_echo(name):
            # we wrote this node and the cache has not caught up (a full list of a big cluster takes
            # seconds): read this one node rather than decide on what it was before our write, once per
            # write (our own Kubernetes writes bring this node back here several times meanwhile)
            read_after = self.applier.read_after_write.get(name)
            if read_after is not None:
                slurm_node = read_after
            else:
                with contextlib.suppress(SlurmError):
                    slurm_node = await self.context.slurm.get_node(name)
                    self.applier.read_after_write[name] = slurm_node
                    read_now = True
        decision = decide(
            slurm_node, binding.pod, binding.node, now=now, opts=self.options, slurm_fresh=fresh,
            scale_in_of=self._scale_in_of(name), node_slurm=self._node_slurm(binding, slurm_node),
            held=self._held_of(name, slurm_node),
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
        # a key taken from the first lane never waits for Kubernetes' rate limit: those writes come later
        wait, just_read = taken_from() != Lane.FIRST, slurm_node if read_now else None
        if await self.applier.apply(name, binding, decision, wait=wait, read_now=just_read):
            self.queue.add(name, lane=Lane.URGENT)
        if name in self.applier.held_for_watch:
            self.applier.held_for_watch.discard(name)
            return Result(requeue_after=min([*requeue, WATCH_GAP_RECHECK_S]))
        return after

    def _node_slurm(
        self, binding: Binding, slurm_node: SlurmNode | None
    ) -> list[tuple[str, SlurmNode | None]] | None:
        """The Slurm nodes of every bound slurmd pod on this one's Kubernetes Node, when there are several:
        the Node's conditions are decided from all of them, so that each of their reconciles writes the same
        (this node's own data as read for this reconcile, the others' from the Slurm cache)."""
        members = node_slurm(binding, self.context.kube_cache, self.context.slurm_cache.nodes)
        if members is None:
            return None
        return [(n, slurm_node if n == binding.slurm_name else found) for n, found in members]

    async def _report_conflict(self, binding: Binding) -> None:
        name = binding.slurm_name
        if name in self.stats.conflicts:
            return
        self.stats.conflicts.add(name)
        log.warning("conflicting bindings: Slurm node left alone", slurm_node=name, conflict=binding.conflict)
        await self.applier.conflict_events(binding)

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
        labels = pod.labels if pod is not None else {}
        label = next(
            (key for key in self.context.kube_cache.names.labels if labels.get(key)), Keys.NODE_NAME_LABEL
        )
        named = name if labels.get(label, name) == name else f"{labels[label]} (Slurm node {name})"
        message = (
            f"labelled {label}={named}, but Slurm has no node of that name after "
            f"{self.missing_grace_s:.0f} s: check the label, or why slurmd did not register"
        )
        log.warning(
            "bound Slurm node not found in Slurm",
            slurm_node=name,
            pod=pod.key if pod else None,
            node=binding.node.name if binding.node else None,
        )
        await self.applier.event(binding, "pod", "Warning", "SlurmNodeNotFound", message)
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
        self.actions(kind, direction, name, details)


REGISTRATION = Registration("sync", SyncController, SyncOptions(), OPTIONS, options_from)
