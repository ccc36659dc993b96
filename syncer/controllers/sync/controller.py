"""The sync controller (the sync engine): turns cache changes into keys, and each key's
reconcile into read -> report -> causes -> shown -> decide -> admit -> apply: read both sides once
(`Reader`, syncer/controllers/sync/read.py: the caches, plus one fresh read of a node we just wrote), report a
conflict or a missing node instead of deciding (reports.py), find the drain causes and the Slurm node's
derived facts (shown.py) and decide on them (pure), let the Slurm action through the `Admission` (admit.py:
watch gap, safety valve, echo; a drain or undrain is read from slurmrestd and decided again first, the loop's
second pass), hand the decision to the `Applier` (syncer/controllers/sync/apply.py), which owns the order of
writes and Events.

Level-triggered: a change on either side only says which Slurm node to look at; each reconcile
recomputes everything for that node from both caches, so a missed event, a restart or a re-list
cannot leave the two systems apart. Its runner reconciles only on the leader; a dry run is the writers'.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from typing import Any

import structlog

from syncer.control.binding import Binding
from syncer.control.context import ControllerContext
from syncer.control.registration import Registration
from syncer.controllers.sync.admit import Admission, Admitted
from syncer.controllers.sync.apply import Applier
from syncer.controllers.sync.causes import drain_causes
from syncer.controllers.sync.options import OPTIONS, SyncOptions, options_from
from syncer.controllers.sync.plan import Decision, decide, decide_with
from syncer.controllers.sync.read import Reader, Reading
from syncer.controllers.sync.reports import Reports
from syncer.controllers.sync.shown import shown
from syncer.controllers.sync.stats import EngineStats
from syncer.controllers.sync.valve import DrainValve
from syncer.controllers.sync.written import WrittenAnnotations, WrittenSlurm
from syncer.runtime.controller import DONE, Controller, Result
from syncer.runtime.queue import Lane, WorkQueue, taken_from
from syncer.runtime.watch import Watch, Watches
from syncer.slurm.cache import NodeChange

log = structlog.get_logger("syncer.controllers.sync")
# how soon a Slurm action held for a Kubernetes watch gap is looked at again (a reconnect takes a request)
WATCH_GAP_RECHECK_S = 0.5
FIRST_WORKERS_PER_WORKER = 32  # workers for Kubernetes changes only, per `--workers`
FRESH_READS_PER_WORKER = 4  # single-node reads of Slurm in flight at once, per `--workers` (as before)


class SyncController(Controller):
    name = "sync"  # the controller label of its reconcile metrics and logs

    def __init__(self, context: ControllerContext, options: SyncOptions) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.options = options = replace(options, owner_prefix=context.owner_prefix)
        self.valve = DrainValve(
            max_fraction=options.max_drain_fraction, min_nodes=options.safety_valve_min_nodes
        )
        self.written = WrittenAnnotations()
        self.slurm_writes = WrittenSlurm()
        self.clock = context.clock
        self.actions = context.actions  # (kind, direction, slurm node, details): metrics and test recorders
        # workers for Kubernetes changes only (they never wait for the Kubernetes rate limit, the others may
        # all be waiting for it in a storm of Slurm changes): 1,000 cordons drained in 5.0 s with 8 workers,
        # 1.9 s with 32 (issue 30). A cordon's worker waits for its drain's group commit (~0.1-0.2 s, most of
        # its time): so many that a storm's cordons wait there together, while their fresh reads of Slurm stay
        # at most FRESH_READS_PER_WORKER x workers at once, as with 3 x workers before (issue 47). With 12 x
        # every worker was busy through a 1,000-cordon storm (~0.2 s each under load) and a cordon waited
        # 0.9 s (p50) for one: at 32 x they wait for the read slots, the bound slurmrestd sees, instead
        self.first_workers = FIRST_WORKERS_PER_WORKER * context.workers
        self.stats = EngineStats()
        # Slurm node -> the NodeSet scaling it in, by identity (set by the NodeSet controller)
        self.scale_in = context.scale_in
        # Slurm node -> why the one-pool scheduler holds it (a pod whose job ended still terminates there)
        self.holds = context.holds
        self._observed_at: dict[str, float] = {}  # monotonic time a change was first seen, per key
        # bound nodes decided on stale Slurm data (an undrain, Kubernetes' view of Slurm withheld): looked at
        # again once the data is fresh, whether or not the node changed meanwhile
        self._decided_stale: set[str] = set()
        self.reader = Reader(
            context,
            written=self.written,
            slurm_writes=self.slurm_writes,
            fresh_reads=FRESH_READS_PER_WORKER * context.workers,
        )
        self.reports = Reports(context, stats=self.stats, missing_grace_s=options.missing_grace_s)
        # nodes whose Slurm action waited for a watch gap to close: their reconcile looks again soon
        self.held_for_watch: set[str] = set()
        self.admission = Admission(
            context, self.valve, slurm_writes=self.slurm_writes, stats=self.stats, record=self._record,
            held_for_watch=self.held_for_watch,
        )  # fmt: skip
        self.applier = Applier(
            context, written=self.written, slurm_writes=self.slurm_writes, record=self._record,
            clock=self.clock, held_for_watch=self.held_for_watch,
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
            Watch(self.context.slurm_cache.subscribe_fresh, self._fresh_again),
        )

    def _seen(self, names: Iterable[str]) -> Iterable[str]:
        """Notes when a change of each was first seen (its action's latency starts there)."""
        now = time.monotonic()
        for name in names:
            self._observed_at.setdefault(name, now)
        return names

    def _slurm_changed(self, changes: list[NodeChange]) -> list[str]:
        for change in changes:  # a list asked for after our own write: decide from what it shows now
            self.slurm_writes.caught_up(change.name, self.context.slurm_cache.listed_at)
        return list(self._seen([change.name for change in changes]))

    def _fresh_again(self) -> set[str]:
        """The nodes decided on stale Slurm data since it was last fresh, to be decided again."""
        names, self._decided_stale = self._decided_stale, set()
        return names

    @property
    def queue(self) -> WorkQueue:
        return self.runner.queue

    async def keys(self) -> list[str]:
        names = self.context.kube_cache.slurm_names()
        self.stats.bound = len(names)
        return list(names)

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
        """One Slurm node: read both sides once, report or find its drain causes and its Slurm facts and
        decide (pure), admit the decision's Slurm action; a drain or undrain is read and decided once more
        before it goes out (the loop's second pass); then the writes."""
        self.stats.reconciles += 1
        if not self.context.kube_cache.synced or not self.context.slurm_cache.synced:
            return Result(requeue_after=1.0)
        caches: Reading | None = None  # the first pass's reading, of the caches
        binding, decided = Binding(name), Decision()  # its binding and decision: what the writes go by
        admitted: Admitted | None = None
        requeue: list[float] = []
        logger = log
        # twice at most: on the caches; then, for a drain or undrain the admission let through, on the node as
        # read from slurmrestd now and Kubernetes as the cache shows it then (that read can take seconds: a
        # drain never goes out after an uncordon that arrived meanwhile)
        for _pass in range(2):
            reading = await self.reader.read_node(name, after=caches)
            if caches is None and reading.binding.bound and not reading.fresh:
                # noted in the step that read `stale` (nothing awaited between): a fresh-again call that
                # lands later finds it
                self._decided_stale.add(name)
            if caches is None:
                reported = await self.reports.report(reading)
                if not reported.decide:
                    if not reading.binding.conflict:
                        self._observed_at.pop(name, None)
                    return DONE
                if reported.look_again_s is not None:
                    requeue.append(reported.look_again_s)
            pod, node, now = reading.binding.pod, reading.binding.node, reading.now
            drain = drain_causes(
                pod, node, now=now, opts=self.options, scale_in_of=reading.scale_in, held=reading.held
            )
            facts = shown(reading.slurm_node, reading.node_slurm)
            decision = decide_with(
                reading.slurm_node, pod, node, drain, facts, now=now, opts=self.options,
                slurm_fresh=reading.fresh, node_slurm=reading.node_slurm,
            )  # fmt: skip
            if caches is None:
                caches, binding = reading, reading.binding
                decided = decision
                if decision.recheck_at is not None:
                    requeue.append(max(0.05, decision.recheck_at - now))
                if decision.acts:
                    self.stats.drifted.add(name)
                else:
                    self.stats.drifted.discard(name)
                if not decision.acts and not decision.events:
                    self._observed_at.pop(name, None)
                    return Result(requeue_after=min(requeue)) if requeue else DONE
                logger = log.bind(
                    slurm_node=name, pod=pod.key if pod else None, node=node.name if node else None,
                    causes=[c.text for c in decision.causes] or None,
                )  # fmt: skip
            admitted = (
                self.admission.confirm_action(admitted, reading, decision, logger)
                if admitted is not None
                else await self.admission.admit_action(reading, decision, logger)
            )
            if admitted is None or not admitted.confirm:
                break
        still = None if admitted is None else partial(self._still_wanted, name, admitted)
        # a key taken from the first lane never waits for Kubernetes' rate limit: those writes come later
        wait = taken_from() != Lane.FIRST
        if await self.applier.apply(
            name, binding, decided, wait=wait, send=admitted, still=still, logger=logger
        ):
            self.queue.add(name, lane=Lane.URGENT)
        if name in self.held_for_watch:
            self.held_for_watch.discard(name)
            return Result(requeue_after=min([*requeue, WATCH_GAP_RECHECK_S]))
        return Result(requeue_after=min(requeue)) if requeue else DONE

    def _still_wanted(self, name: str, admitted: Admitted) -> bool:
        """Asked by the Slurm writer when the update's turn in its group commit comes (it may have waited
        behind a slow request to slurmrestd): the same read (`Reader.again`, on the node as read before it
        was admitted) and decision once more; True while they still give an action of the same kind."""
        reading = self.reader.again(name, admitted.current)
        if not reading.kube_current:
            self.held_for_watch.add(name)
            return False
        again = decide(
            reading.slurm_node, reading.binding.pod, reading.binding.node, now=reading.now, opts=self.options,
            slurm_fresh=True, scale_in_of=reading.scale_in, held=reading.held,
        ).slurm_action  # fmt: skip
        return again is not None and again.kind == admitted.action.kind

    def _record(self, kind: str, direction: str, result: str, name: str, **details: Any) -> None:
        self.stats.count(kind, direction, result)
        details["result"] = result
        if result == "ok" and name in self._observed_at:
            latency = time.monotonic() - self._observed_at[name]
            details["latency_s"] = round(latency, 4)
            del self._observed_at[name]
        self.actions(kind, direction, name, details)


REGISTRATION = Registration("sync", SyncController, SyncOptions(), OPTIONS, options_from)
