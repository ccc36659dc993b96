"""The SlurmPartition controller: SlurmPartition CRs become Slurm partitions over REST v0.0.45
(docs/partitions.md; the decision is plan.py, the CR's reading spec.py).

With `PartitionOptions.slinky` it also watches Slinky's NodeSets and Controllers (slinky.py)
and writes none of the partitions they declare; where KeepPartInfo keeps one unlike its slurm.conf line, it
says so (slinky_frozen.py) from the partitions each reconcile reads anyway (with no CR, read for that alone),
and reads them again every `SLINKY_RECHECK_S` while one disagrees (an `scontrol update` starts no reconcile;
recheck.py).

One key for the whole cluster, like the maintenance reservations: one `GET /partitions/` decides every
partition, and a name two CRs declare or two default partitions need every CR at once. A change is looked at
`BATCH_S` after it arrives, so a label change that moves many nodes becomes one `POST` of `+a,+b,...`; a
CR's own change at once (CRs changing while a reconcile runs are planned together by the next).

Each reconcile reads Slurm's partitions (again after a write, for the status), takes each partition's jobs
from the service's one job poll (`context.jobs`: never a job list of its own, so its cost does not grow with
the queue) and `GET /conf` (KeepPartInfo, preemption) at most once a `CONF_MAX_AGE_S` and after a slurmctld
reload or an API version change, plans, and carries the actions out: claim (the ownership annotation and the
finalizer on the CR, before anything is created; a failed claim stops that CR and is retried with the
runtime's back-off, a record that moved since the informer showed it defers it), delete (Slurm's 2075
"Partition is in use": retried within `IN_USE_RETRY_S`) and release in the plan's order, then every
create/update/drain in one `POST` (Slurm applies each entry it can; the refused ones are sent again alone, so
that each CR gets its own error). A value Slurm refuses (2018 unknown node, 2066 unknown QOS, 9001) stops that
CR with its condition, and is not sent again until the CR changes, what it would send changes, or slurmctld
reloads; the others go on (the reconcile is not retried, except while /conf is unread or a Slinky difference
stands: recheck.py). Then each CR's status through /status and an Event whenever its Ready reason changes. A
CR change that arrives while a reconcile writes leaves that reconcile's re-read and statuses to the next one,
which starts at once and reads Slurm afresh: the change is not queued behind a status it makes stale (issue
47).
What starts a reconcile grows with changes, not with the cluster: a Node's change only when it moves a CR's
selector (`SelectorIndex`), a slurmd pod's only on a Node some selector matches (or where a CR names
NodeSets), a job poll only when a managed partition's counts moved, a Slurm node's change only when it is
new, gone, or a busy node held out of a partition."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import fields, replace
from typing import Any, NoReturn

import structlog

from syncer.control.binding import slurm_nodes_on
from syncer.control.context import ControllerContext
from syncer.control.directory import JobCounts
from syncer.control.registration import Registration, when_enabled
from syncer.control.scope import Scope
from syncer.controllers.partitions.index import SelectorIndex
from syncer.controllers.partitions.options import OPTIONS, PartitionOptions, options_from
from syncer.controllers.partitions.plan import (
    CONFLICT,
    CREATING,
    DRAINING,
    HELD,
    INVALID,
    PRECONDITION,
    UNSUPPORTED,
    UPDATING,
    Action,
    Outcome,
    Plan,
    Wanted,
    World,
    plan,
    records,
)
from syncer.controllers.partitions.recheck import (
    IN_USE_RETRY_S,
    UNREACHABLE_RETRY_S,
    ConfFailures,
    recheck_after,
    stopped_recheck,
)
from syncer.controllers.partitions.slinky import SlinkyPartitions
from syncer.controllers.partitions.slinky_frozen import FrozenPartitions
from syncer.controllers.partitions.spec import (
    NodeSetMembers,
    partition_jobs,
    partition_name,
    record_of,
    status_of,
    wanted_from,
)
from syncer.kube.errors import KubeError
from syncer.kube.events import ObjectRef
from syncer.kube.informer import Informer
from syncer.model import cluster
from syncer.model.cluster import claimed_finalizers, released_finalizers
from syncer.model.keys import Keys
from syncer.model.kube import KubeCustomObject, KubeNode, KubePod
from syncer.runtime.controller import DONE, Controller, Result
from syncer.runtime.errors import RetryAfter, Terminal
from syncer.runtime.watch import Watch, Watches
from syncer.slurm.cache import NodeChange
from syncer.slurm.errors import SlurmApiError, SlurmConnectionError, SlurmError, SlurmTimeout
from syncer.slurm.metrics_hint import SlurmMetricsError
from syncer.slurm.metrics_jobs import job_counts
from syncer.slurm.partitions import (
    InvalidPartition,
    PartitionSettings,
    PartitionWrite,
    partition_in_use,
    refused_entries,
)

log = structlog.get_logger("syncer.controllers.partitions")
KEY = "cluster"
KIND = "SlurmPartition"
API_VERSION = "slurm-syncer.dev/v1alpha1"
PATH = "/apis/slurm-syncer.dev/v1alpha1/slurmpartitions"
BATCH_S = 0.5  # Node and pod changes arriving together (a relabelled rack) planned once: one POST
# a CR's change: at once (its author waits for it; 50 ms here was half a change's p50, issue 47); CRs applied
# together still meet in one or two POSTs: those arriving while a reconcile runs are planned by the next
CR_BATCH_S = 0.0
BUSY_S = 1.0  # a CR still creating or updating after the re-read is looked at again this soon
BUSY = frozenset({CREATING, UPDATING})
CONF_MAX_AGE_S = 60.0  # /conf (KeepPartInfo, preemption) read again after this, and after a slurmctld reload
# slurmctld's metrics as the node cache's hint last read them (every 250 ms by default), no older than this:
# job counts a second fresh at no request of ours, where the service's job poll is 30 s old
HINT_COUNTS_MAX_AGE_S = 2.0
# Slurm's "Invalid node name specified", "Invalid qos specification" (a QOS it does not know: measured on
# 26.05.5) and its refusal of a value: input to fix, not retried
REFUSED = (2018, 2066, 9001)
REFUSED_FIELDS = {2018: ("nodes",), 2066: ("qos", "allowQos", "denyQos")}  # the spec fields each is about
CLAIM_FAILED = "ClaimFailed"
DELETE_REFUSED = "DeleteRefused"  # Slurm's 2075 "Partition is in use": retried, the CR kept
ABSENT = "ABSENT"  # slurm_syncer_partition_state of a CR whose partition Slurm does not have
BATCHED = frozenset({"create", "update", "drain"})  # one POST /partitions/ carries them all
WARNINGS = frozenset({CONFLICT, INVALID, UNSUPPORTED, PRECONDITION, CLAIM_FAILED, DELETE_REFUSED, HELD})
BUSY_STATES = frozenset({"ALLOCATED", "MIXED"})  # a Slurm node running jobs (and COMPLETING, a flag)

EVENT_CREATED = "PartitionCreated"
EVENT_UPDATED = "PartitionUpdated"
EVENT_DRAINING = "PartitionDraining"
EVENT_DELETED = "PartitionDeleted"
EVENT_ADOPTED = "Adopted"  # an unlabelled CR this release took (syncer/model/cluster.py)


def _planned_part(body: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a CR the plan reads, but its status: a change of status alone plans nothing."""
    meta = body.get("metadata") or {}
    fields_read = ("uid", "generation", "annotations", "finalizers", "deletionTimestamp")
    return body.get("spec"), *(meta.get(name) for name in fields_read)


def _sent(action: Action) -> tuple[Any, ...]:
    """What a write sends: a refused one is not sent again while this stays the same."""
    return action.kind, action.nodes, action.settings


def _busy(state: frozenset[str]) -> bool:
    return bool(state & BUSY_STATES) or "COMPLETING" in state


class Stopped(Exception):
    """One CR's writes stop here (its claim failed, or Slurm refused its values): `outcome` says why."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


class ClaimNotWritten(Exception):
    """A claim the API server refused or never answered (the client retries no PATCH on a 5xx): its failure,
    not the CR's, so the reconcile is retried with the runtime's back-off, not `Terminal` (a `created` claim
    left unwritten makes a syncer started meanwhile find its CR `Conflict`)."""


def _settings_text(settings: PartitionSettings, before: PartitionSettings | None) -> str:
    """`field: was -> now` for each managed field (what an update put back)."""
    parts = []
    for f in fields(settings):
        wanted = getattr(settings, f.name)
        if wanted is None:
            continue
        had = getattr(before, f.name) if before is not None else None
        parts.append(f"{f.name}: {had!r} -> {wanted!r}" if before is not None else f"{f.name}={wanted!r}")
    return ", ".join(parts)


def _nodes_text(nodes: str | None, shown: int = 8) -> str:
    """A hostlist or `+a,-b` changes for a log line or an Event: the first few and how many in all."""
    names = [n for n in (nodes or "").split(",") if n]
    if len(names) <= shown:
        return ",".join(names) or "(none)"
    added = sum(n.startswith("+") for n in names)
    removed = sum(n.startswith("-") for n in names)
    counts = f"+{added}, -{removed}" if added or removed else f"{len(names)} nodes"
    return ",".join(names[:shown]) + f",... ({counts})"


class _EveryName:
    """A container holding every name: the bindings are looked up apart from what Slurm knows now."""

    def __contains__(self, name: object) -> bool:
        return True


EVERY_NAME = _EveryName()


class PartitionController(Controller):
    name = "partitions"
    workers = 1  # one key

    def __init__(self, context: ControllerContext, options: PartitionOptions) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.nodeset_members: NodeSetMembers = context.nodesets.members
        self.clock = context.clock
        # this release's CRs (labelled with its cluster identity) and, adopting, the unlabelled ones
        self.scope: Scope[KubeCustomObject] = Scope(context, PATH, KIND, lambda o: o.name, "slurmpartitions")
        self.informer: Informer[KubeCustomObject] = self.scope.informer
        self.keeps_partitions: bool | None = None  # the last /conf read; None: not read or failed
        self.preempts = ""  # the last /conf read: how slurmctld preempts by partition priority, or ""
        self._conf_read_at = -float("inf")  # monotonic; -inf: read at the next reconcile
        self._conf_failures = ConfFailures()  # in a row: what the log tells of them (`_conf_failed`)
        self.outcomes: dict[str, Outcome] = {}  # by CR: the last reconcile's (for the exporter, tests)
        self.slurm_states: dict[str, str] = {}  # by CR: its state in Slurm or ABSENT (exporter)
        self._claimed: dict[
            str, tuple[str, str]
        ] = {}  # CR -> (uid, how) claimed, until the informer shows it
        self._said: dict[str, tuple[str, str]] = {}  # CR -> (reason, message) last told in an Event
        self._written: dict[str, dict[str, Any]] = {}  # CR -> the status document written last
        self.index = SelectorIndex()  # the Nodes each CR's selector matches, kept as Nodes change
        # Kubernetes Node -> the Slurm nodes bound to it, whether Slurm knows them or not: resolved per Node
        # and plan this was 2/3 of a reconcile at 1,000 nodes (issue 47: a CR change waited for it); kept
        # until a pod changes or a Node is added, deleted or relabelled (_pod_moved, _node_moved)
        self._bound_on: dict[str, tuple[str, ...]] = {}
        self._in_use: set[str] = set()  # partitions Slurm would not delete (2075) since their jobs last moved
        self._made: set[str] = set()  # partitions this process created, their `created` claim not written yet
        # CR -> (generation, what was sent, the outcome told) for a write Slurm refused: not sent again as is
        self._refused: dict[str, tuple[int, tuple[Any, ...], Outcome]] = {}
        self.held: dict[str, str] = {}  # by CR: the state kept in Slurm while its CR says otherwise
        self._held_nodes: frozenset[str] = frozenset()  # busy nodes kept out of a partition until idle
        self._names_nodesets = False  # some CR names NodeSets: their pods' changes may change members
        self._closing: dict[
            str, tuple[int, int]
        ] = {}  # partition a deleted CR closes -> its jobs last counted
        self._cr_changes = 0  # CR changes the mapper has named the key for (a reconcile follows each)
        # CR -> (uid, generation) a reconcile planned and wrote for, its status left to the next reconcile
        # (a newer CR change came): counted as observed, as the status it would have written would say
        self._looked_at: dict[str, tuple[str, int]] = {}
        self.slinky = SlinkyPartitions(context.kube) if options.slinky else None
        self.frozen = FrozenPartitions(self.slinky, context.events) if self.slinky is not None else None

    # -- what names the key -----------------------------------------------------------------------
    @property
    def _conf_failed(self) -> bool:
        """The last /conf read failed (an error, not an API version without /conf): nothing else may come
        to start the reconcile that reads it again, so it comes back within UNREACHABLE_RETRY_S, stopped or
        not."""
        return self._conf_failures.count > 0

    def watches(self) -> Watches:
        """A CR's change is looked at at once (CR_BATCH_S); what moves nodes or jobs after BATCH_S (a
        relabelled rack: one POST); a slurmctld reload at once (one without KeepPartInfo forgot REST-made
        partitions), and an API version change (an upgrade to 26.05 lets partitions be written). Each mapper
        names the key only for a change that can move a partition (module docstring)."""
        cache = self.context.slurm_cache
        crs = [Watch(self.scope.subscribe, self._cr_moved, after_s=CR_BATCH_S)]
        if self.slinky is not None:
            crs.append(Watch(self.slinky.subscribe, self._cr_moved, after_s=CR_BATCH_S))
        return (
            *crs,
            Watch(self.context.kube_cache.nodes.subscribe, self._node_moved, after_s=BATCH_S),
            Watch(self.context.kube_cache.pods.subscribe, self._pod_moved, after_s=BATCH_S),
            Watch(self.context.jobs.subscribe, self._jobs_moved, after_s=BATCH_S),
            Watch(cache.subscribe, self._slurm_moved, after_s=BATCH_S),
            Watch(cache.subscribe_reloads, self._reloaded),
            # another REST API version (Slurm upgraded): writes may be possible now (v0.0.45), or no longer
            Watch(self.context.slurm.subscribe_versions, self._reloaded),
        )

    def _ours(self, moved: bool) -> tuple[str, ...]:
        return (KEY,) if moved and self.informer.items else ()

    def _cr_moved(
        self, old: KubeCustomObject | None = None, new: KubeCustomObject | None = None
    ) -> tuple[str, ...]:
        """Every CR change but one of its status alone (our own status write coming back: nothing to plan)."""
        if old is not None and new is not None and _planned_part(old.body) == _planned_part(new.body):
            return ()
        self._cr_changes += 1
        return (KEY,)

    def _cr_changed_since(self, mark: int) -> bool:
        """A CR change arrived after `mark` (`_cr_changes` then): the key is queued again, and its reconcile
        follows this one at once."""
        return self._cr_changes != mark

    def tick(self) -> bool:
        """While a deleted CR's partition is closed behind its jobs: look again once slurmctld's metrics (read
        by the node cache anyway) show its jobs moved, not only at the service's next job poll."""
        if not self._closing:
            return False
        fresh = self._hint_counts()
        moved = {p for p, seen in self._closing.items() if fresh is not None and fresh.get(p, (0, 0)) != seen}
        self._in_use -= moved
        return bool(moved)

    def _hint_counts(self) -> dict[str, tuple[int, int]] | None:
        """(running, pending) per partition from slurmctld's metrics as the hint read them lately; None
        without a working hint (24.11, metrics off) or counts in it."""
        body = self.context.slurm_cache.hint_body(max_age_s=HINT_COUNTS_MAX_AGE_S)
        if body is None:
            return None
        try:
            counts = job_counts(body)
        except SlurmMetricsError:
            return None
        return partition_jobs(counts) if counts is not None else None

    def _reloaded(self) -> tuple[str, ...]:
        """slurmctld restarted or reconfigured, or the REST API version changed: /conf may say otherwise now
        (or be there at all), a refused value may pass."""
        self._conf_read_at = -float("inf")
        self._refused.clear()
        return (KEY,)

    def _node_moved(self, old: KubeNode | None, new: KubeNode | None) -> tuple[str, ...]:
        relabelled = old is None or new is None or old.labels != new.labels
        if relabelled:
            self._bound_on.clear()  # a binding by label, or by the Node's name, may have moved
        return self._ours(relabelled and bool(self.index.node_changed(old, new)))

    def _pod_moved(self, old: KubePod | None, new: KubePod | None) -> tuple[str, ...]:
        self._bound_on.clear()  # a pod's binding may have moved
        names = self.context.kube_cache.slurm_name_of
        was = (old.node_name, names(old)) if old is not None else None
        now = (new.node_name, names(new)) if new is not None else None
        on = {where[0] for where in (was, now) if where is not None and where[0]}
        return self._ours(was != now and (self._names_nodesets or any(map(self.index.selects, on))))

    def _jobs_moved(self, old: JobCounts, new: JobCounts) -> tuple[str, ...]:
        """The service's job poll ({(partition, state): jobs}; `a,b` for a job pending in both): a managed
        partition's jobs moved, so its status (the Running and Pending printer columns) is written again,
        and a partition a deleted CR closed may be deleted now."""
        ours = {o.partition for o in self.outcomes.values()}
        moved = {name for key in {*old, *new} if old.get(key) != new.get(key) for name in key[0].split(",")}
        self._in_use -= moved  # a refused delete is tried again once its partition's jobs moved
        return self._ours(bool(ours & moved))

    def _slurm_moved(self, changes: list[NodeChange]) -> tuple[str, ...]:
        """A node Slurm did not know (a host a CR names) may be known now; a busy node held out may be idle;
        a record's comment is how a power NodeSet's declared member is known as its own (its stamp)."""
        return self._ours(any(self._moves(c) for c in changes))

    def _moves(self, change: NodeChange) -> bool:
        if change.kind != "changed" or change.name in self._held_nodes:
            return True
        return self._names_nodesets and "comment" in change.fields

    # -- lifecycle ----------------------------------------------------------------------------------
    def loops(self) -> dict[str, Callable[[], Awaitable[None]]]:
        slinky = self.slinky.loops() if self.slinky is not None else {}
        return {**self.scope.loops(), **slinky}

    async def prepare(self) -> None:
        await self.scope.synced()
        await self.context.kube_cache.wait_synced()
        if self.slinky is not None:  # no partition planned before Slinky's are known
            await self.slinky.decided()

    async def keys(self) -> list[str]:
        return [KEY]

    # -- one reconcile --------------------------------------------------------------------------------
    async def reconcile(self, key: str) -> Result:
        cache = self.context.slurm_cache
        if not self.context.kube_cache.synced or not cache.synced or cache.stale:
            return Result(requeue_after=1.0)  # fail closed: no node taken out on stale membership
        if await self._adopt():
            return Result(requeue_after=BUSY_S)  # planned once the informer shows them as this release's
        crs = {o.name: o.body for o in self.informer.items.values()}
        try:
            if not crs:
                self.outcomes, self.slurm_states = {}, {}
                return await self._slinky_alone()
            return self._recheck(await self._reconcile(crs))
        except (SlurmConnectionError, SlurmTimeout) as exc:
            raise RetryAfter(UNREACHABLE_RETRY_S, f"slurmrestd unreachable: {exc}") from exc

    async def _slinky_alone(self) -> Result:
        """No CR: Slurm is read only where Slinky's partitions are compared (26.05+: /conf says KeepPartInfo),
        one `GET /partitions/` per reconcile; else not at all."""
        slinky, slurm = self.slinky, self.context.slurm
        if self.frozen is None or slinky is None or not slurm.partition_writes:
            return DONE
        if not slinky.names() and not slinky.removed and not self.frozen.standing:
            return DONE
        present = {p.name: p for p in await slurm.partition_states()}
        await self._read_conf()
        await self.frozen.compare(self.keeps_partitions, present)
        return self._recheck(DONE)

    def _recheck(self, result: Result) -> Result:
        """Looked at again by itself while /conf could not be read or a Slinky partition is kept unlike
        slurm.conf: nothing else may start a reconcile then (recheck.py)."""
        standing = self.frozen is not None and self.frozen.standing
        after = recheck_after(result.requeue_after, conf_failed=self._conf_failed, standing=standing)
        return result if after == result.requeue_after else Result(requeue_after=after)

    async def _adopt(self) -> bool:
        """Take the CRs no release has labelled (this release adopting): True when one was taken."""
        taken = False
        for name, obj in sorted(self.scope.waiting().items()):
            if await self.scope.adopt(f"{PATH}/{name}", f"{KIND} {name}"):
                taken = True
                await self._event(obj.body, "Normal", EVENT_ADOPTED,
                                  f"taken by release {self.context.cluster}: labelled "
                                  f"{cluster.LABEL}={self.context.cluster}")  # fmt: skip
        return taken

    async def _reconcile(self, crs: dict[str, dict[str, Any]]) -> Result:
        mark = self._cr_changes  # taken with `crs`, before the first await
        self._looked_at = {n: seen for n, seen in self._looked_at.items() if n in crs}
        world, counts = await self._world(crs)
        result = plan(self._wanted_all(crs), world)
        self._held_nodes = frozenset(result.held_out)
        stopped: dict[str, Outcome] = {}
        released: set[str] = set()
        in_use: dict[str, Outcome] = {}  # CR -> why Slurm would not delete its partition yet
        deferred: set[str] = set()  # CRs whose record moved since the informer showed it: next reconcile
        wrote = False
        batch: list[Action] = []  # creates, updates, drains: one POST for all (after every claim)
        for action in result.actions:
            if action.cr in stopped or action.cr in in_use or action.cr in deferred:
                continue  # the CR's later actions (its release above all) wait for the next reconcile
            if action.kind in BATCHED:
                batch.append(action)
                continue
            try:
                done = await self._carry_out(action, crs[action.cr])
            except Stopped as stop:
                stopped[action.cr] = stop.outcome
                continue
            except SlurmApiError as exc:
                if not partition_in_use(exc):
                    raise
                in_use[action.cr] = self._refused_delete(action, exc)  # a job came after our read
                continue
            if done is None:
                deferred.add(action.cr)
            wrote |= bool(done)
            if action.kind == "release":
                released.add(action.cr)
        told = self._still_refused([a for a in batch if a.cr not in stopped and a.cr not in deferred], crs)
        batch = [a for a in batch if a.cr not in stopped and a.cr not in deferred and a.cr not in told]
        wrote |= await self._write_all(batch, crs, stopped)
        if wrote and not stopped and not in_use and self._cr_changed_since(mark):
            return self._left_to_next(crs, released)
        if wrote:  # what the status says is what Slurm has now, not what it had before our writes
            world, counts = await self._world(crs, read_conf=False)  # our writes leave /conf as it was
            if not stopped and not in_use and self._cr_changed_since(mark):
                return self._left_to_next(crs, released)
            result = plan(self._wanted_all(crs), world)
            if await self._confirm(result, crs):  # Slurm shows what we created: the claims say `created`
                world = replace(world, owned=records(self._record(cr) for cr in crs.values()),
                                made=frozenset(self._made))  # fmt: skip
                result = plan(self._wanted_all(crs), world)
            self._held_nodes = frozenset(result.held_out)
        outcomes = {**result.outcomes, **told, **stopped, **in_use}
        await self._tell_all(crs, outcomes, world, counts, released)
        if self.frozen is not None:
            await self.frozen.compare(self.keeps_partitions, world.present)
        if in_use or stopped:
            self._stopped(stopped, in_use)
        busy = deferred or any(o.reason in BUSY for o in outcomes.values())
        return Result(requeue_after=BUSY_S) if busy else DONE

    def _stopped(self, stopped: Mapping[str, Outcome], in_use: Mapping[str, Outcome]) -> NoReturn:
        """Ends a reconcile that stopped CRs or had a delete refused: retried within the soonest of the waits
        that apply, as every other reconcile (recheck.py), else `Terminal`."""
        standing = self.frozen is not None and self.frozen.standing
        again = stopped_recheck(in_use=bool(in_use), conf_failed=self._conf_failed, standing=standing)
        said = [f"SlurmPartition {n}: {o.message}" for n, o in sorted(stopped.items())]
        if in_use:
            busy_ones = ", ".join(o.partition for o in in_use.values())
            said.append(f"partition(s) {busy_ones} in use, deleted after their jobs")
        if again is None and any(o.reason == CLAIM_FAILED for o in stopped.values()):
            raise ClaimNotWritten("; ".join(said))  # the runtime's back-off: the refused values stay told
        if again is None:
            raise Terminal("; ".join(said))
        # what else brings it back (the CRs waiting for /conf are made once it answers)
        waits = ["/conf not read"] if self._conf_failed else []
        waits += ["a Slinky partition kept unlike slurm.conf"] if standing else []
        raise RetryAfter(again, "; ".join([*said, *waits]) + f": looked at again in {again:.0f} s")

    def _left_to_next(self, crs: Mapping[str, Mapping[str, Any]], released: set[str]) -> Result:
        """A CR changed while this reconcile wrote: the next reconcile (queued, it starts at once) reads Slurm
        again, plans from it and writes every status; this one stops here, so the change does not wait for a
        re-read and statuses it makes stale. Each CR planned here counts as observed at the generation planned
        (as its status would have said): a state held in Slurm is lifted once per author's change, not again
        by the next reconcile."""
        for name, cr in crs.items():
            if name not in released:
                meta = cr.get("metadata") or {}
                self._looked_at[name] = (str(meta.get("uid", "")), int(meta.get("generation", 0)))
        log.debug("partition statuses left to the next reconcile: a CR changed meanwhile")
        return DONE

    async def _confirm(self, result: Plan, crs: Mapping[str, Mapping[str, Any]]) -> bool:
        """The `created` claims of partitions Slurm now shows this reconcile made; True if any was written."""
        confirmed = False
        for action in result.actions:
            if action.kind == "claim" and action.ownership == "created":
                try:
                    confirmed |= bool(await self._carry_out(action, crs[action.cr]))
                except Stopped:  # told at the next reconcile, which tries again
                    log.warning("partition creation not confirmed on its CR", cr=action.cr)
        return confirmed

    async def _tell_all(
        self,
        crs: Mapping[str, Mapping[str, Any]],
        outcomes: dict[str, Outcome],
        world: World,
        counts: Mapping[str, tuple[int, int]],
        released: set[str],
    ) -> None:
        """What the exporter shows, then each CR's status and Events."""
        self.outcomes = outcomes
        # ABSENT: no such partition in Slurm (refused, not made yet, or deleted behind our back)
        states = {name: world.present[o.partition].settings.state if o.partition in world.present else ABSENT
                  for name, o in outcomes.items()}  # fmt: skip
        self.slurm_states = {name: state for name, state in states.items() if state}
        self.held = {
            name: self.slurm_states.get(name, "") for name, o in outcomes.items() if o.reason == HELD
        }
        self._closing = {o.partition: counts.get(o.partition, (0, 0)) for o in outcomes.values()
                         if o.reason in (DRAINING, DELETE_REFUSED)}  # fmt: skip
        for name, outcome in outcomes.items():
            if name not in released:
                await self._tell(crs[name], outcome, world, counts)

    async def _world(
        self, crs: Mapping[str, Mapping[str, Any]], *, read_conf: bool = True
    ) -> tuple[World, dict[str, tuple[int, int]]]:
        """Slurm's partitions (read now), the (running, pending) jobs of each from the service's last job
        poll, /conf (read again only when older than CONF_MAX_AGE_S or after a reload), the ownership
        records, and the busy Slurm nodes from the node cache."""
        slurm, cache = self.context.slurm, self.context.slurm_cache
        present = {p.name: p for p in await slurm.partition_states()}
        if read_conf:
            await self._read_conf()
        counts = self._hint_counts()
        if counts is None and self.context.jobs.read_once:
            counts = partition_jobs(self.context.jobs.counts)
        jobs = None
        if counts is not None:
            jobs = {name: running + pending for name, (running, pending) in counts.items()}
            jobs.update({name: max(1, jobs.get(name, 0)) for name in self._in_use})
        owned = records(self._record(cr) for cr in crs.values())
        world = World(
            present=present,
            owned=owned,
            jobs=jobs,
            slurm_nodes=frozenset(cache.nodes),
            keeps_partitions=self.keeps_partitions,
            writes=slurm.partition_writes,
            slinky=self.slinky.names() if self.slinky is not None else {},
            made=frozenset(self._made),
            busy=frozenset(n for n, node in cache.nodes.items() if _busy(node.state))
            if self.preempts
            else frozenset(),
            preempts=self.preempts,
        )
        return world, counts or {}

    async def _read_conf(self) -> None:
        slurm = self.context.slurm
        if not slurm.partition_writes:
            # no /conf to read (REST before v0.0.45): nothing to try again
            self._conf_failures = ConfFailures()
            return
        if self.clock() - self._conf_read_at < CONF_MAX_AGE_S:
            return
        try:
            conf = await slurm.slurmctld_conf()
        except SlurmError as exc:
            failures = self._conf_failures
            if failures.failed(self.clock()):  # the first in a row, then once a TELL_EVERY_S
                log.warning("slurmctld's /conf not read: no partition created or changed",
                            error=str(exc), failures=failures.count)  # fmt: skip
            self.keeps_partitions, self._conf_read_at = None, -float("inf")
            return
        ended = self._conf_failures.answered(self.clock())
        if ended is not None:
            log.info("slurmctld's /conf read again", failures=ended[0], after_s=round(ended[1], 1))
        self.keeps_partitions = conf.keeps_partitions if conf is not None else None
        self.preempts = conf.preempts_by_partition if conf is not None else ""
        self._conf_read_at = self.clock()

    def _record(self, cr: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
        """The CR's ownership record; a claim written that the informer has not shown yet counts."""
        name, partition, how = record_of(cr)
        claimed = self._claimed.get(name)
        if claimed is None or claimed[0] != cr["metadata"].get("uid"):
            return name, partition, how
        if how == claimed[1]:
            self._claimed.pop(name, None)
            return name, partition, how
        return record_of({**cr, "metadata": {**cr["metadata"], "annotations": {
            **(cr["metadata"].get("annotations") or {}), Keys.PARTITION_OWNER: claimed[1]}}})  # fmt: skip

    def _wanted_all(self, crs: Mapping[str, Mapping[str, Any]]) -> list[Wanted]:
        selectors = {
            name: ((cr.get("spec") or {}).get("nodes") or {}).get("selector") for name, cr in crs.items()
        }
        self.index.update(selectors, lambda: self.context.kube_cache.nodes.items.values())
        self._names_nodesets = any(
            ((cr.get("spec") or {}).get("nodes") or {}).get("nodeSets") for cr in crs.values()
        )
        return [self._wanted(cr) for cr in crs.values()]

    def _wanted(self, cr: Mapping[str, Any]) -> Wanted:
        cache, known = self.context.kube_cache, self.context.slurm_cache.nodes
        name = cr["metadata"]["name"]
        nodes = [node for node in map(cache.node, sorted(self.index.matched(name))) if node is not None]
        status = self._written.get(name) or cr.get("status") or {}
        observed = status.get("observedGeneration")
        looked = self._looked_at.get(name)
        if looked is not None and looked[0] == str(cr["metadata"].get("uid", "")):
            observed = max(int(observed), looked[1]) if observed is not None else looked[1]
        bound = self._bound_on

        def on(node: str) -> tuple[str, ...]:
            names = bound.get(node)
            if names is None:
                names = bound[node] = slurm_nodes_on(node, cache, EVERY_NAME)
            return tuple(name for name in names if name in known)

        return wanted_from(
            cr, nodes, on, self.nodeset_members,
            observed=int(observed) if observed is not None else None,
        )  # fmt: skip

    # -- writes ---------------------------------------------------------------------------------------
    async def _write_all(
        self, batch: list[Action], crs: Mapping[str, Mapping[str, Any]], stopped: dict[str, Outcome]
    ) -> bool:
        """Creates, updates and drains in one `POST /partitions/` (Slurm applies each entry it can, not
        atomically: measured). The entries it refused, or all when its errors name none, are sent again
        one by one, so that each CR gets its own error. True when Slurm was written."""
        if len(batch) < 2:
            return any([await self._write_one(a, crs[a.cr], stopped) for a in batch])
        writes = [PartitionWrite(a.partition, a.settings, a.nodes) for a in batch]
        again: set[int] = set()
        try:
            if not await self.context.slurm_writer.put_partitions(writes):
                return False
        except (SlurmApiError, InvalidPartition) as exc:
            refused = refused_entries(exc, len(batch))
            again = set(refused) if refused is not None else set(range(len(batch)))
            log.info("partitions refused in a batch: sent again one by one", error=str(exc),
                     partitions=[batch[i].partition for i in sorted(again)])  # fmt: skip
        wrote = False
        for index, action in enumerate(batch):
            if index in again:
                wrote |= await self._write_one(action, crs[action.cr], stopped)
            else:
                await self._after_write(action, crs[action.cr])
                wrote = True
        return wrote

    async def _write_one(self, action: Action, cr: Mapping[str, Any], stopped: dict[str, Outcome]) -> bool:
        try:
            return bool(await self._carry_out(action, cr))
        except Stopped as stop:
            stopped[action.cr] = stop.outcome
            if stop.outcome.reason == INVALID:  # Slurm's (or the check's) refusal: not sent again as is
                generation = int((cr.get("metadata") or {}).get("generation", 0))
                self._refused[action.cr] = (generation, _sent(action), stop.outcome)
            return False

    def _still_refused(self, batch: list[Action], crs: Mapping[str, Mapping[str, Any]]) -> dict[str, Outcome]:
        """The CRs whose write Slurm refused before, unchanged since (same generation, same write): not sent
        again; their outcome is the one told then."""
        told: dict[str, Outcome] = {}
        for action in batch:
            refused = self._refused.get(action.cr)
            generation = int((crs[action.cr].get("metadata") or {}).get("generation", 0))
            if refused is not None and refused[:2] == (generation, _sent(action)):
                told[action.cr] = refused[2]
            else:
                self._refused.pop(action.cr, None)
        return told

    async def _carry_out(self, action: Action, cr: Mapping[str, Any]) -> bool | None:
        """One action through the writers; True when Slurm was written, None when a claim found the record
        moved since the informer showed it (the CR waits for the next reconcile)."""
        if action.kind == "claim":
            return False if await self._claim(action, cr) else None
        if action.kind == "release":
            await self._release(cr)
            return False
        writer = self.context.slurm_writer
        try:
            if action.kind == "delete":
                if not await writer.delete_partition(action.partition):
                    return False
            elif not await writer.put_partition(action.partition, action.settings, nodes=action.nodes):
                return False
        except InvalidPartition as exc:
            raise Stopped(self._stop(action, INVALID, f"spec.{exc.field}: {exc}")) from exc
        except SlurmApiError as exc:
            if any(e.error_number in REFUSED for e in exc.errors):
                said = "; ".join(f"{e.error or e.description} (error {e.error_number})" for e in exc.errors)
                spec = cr.get("spec") or {}
                named = [f"spec.{field}" for e in exc.errors
                         for field in REFUSED_FIELDS.get(e.error_number, ()) if field in spec]  # fmt: skip
                where = f" ({', '.join(dict.fromkeys(named))})" if named else ""
                message = f"Slurm refused partition {action.partition}{where}: {said}"
                raise Stopped(self._stop(action, INVALID, message)) from exc
            raise
        await self._after_write(action, cr)
        return True

    async def _after_write(self, action: Action, cr: Mapping[str, Any]) -> None:
        log.info(f"partition {action.kind}", partition=action.partition, cr=action.cr,
                 nodes=_nodes_text(action.nodes))  # fmt: skip
        self.context.actions(f"partition_{action.kind}", "k8s_to_slurm", action.partition, {"result": "ok"})
        if action.kind == "create":
            self._made.add(action.partition)  # its claim becomes `created` once Slurm shows it
        await self._tell_written(action, cr)

    def _refused_delete(self, action: Action, exc: SlurmApiError) -> Outcome:
        """Slurm's 2075: a job came into the partition after the job poll the plan counted from, before the
        DELETE. The CR keeps its finalizer; the next reconcile counts a job there, closes the partition and
        waits for the poll to see its jobs move."""
        said = "; ".join(f"{e.error or e.description} (error {e.error_number})" for e in exc.errors)
        message = (
            f"Slurm refused to delete partition {action.partition}: {said}; a job came in after the check: "
            f"it is drained and deleted once its jobs have ended (tried again within {IN_USE_RETRY_S:.0f} s)"
        )
        log.warning("partition delete refused", partition=action.partition, cr=action.cr, error=said)
        self._in_use.add(action.partition)  # counted as holding a job until the job poll sees its jobs move
        return Outcome(action.cr, action.partition, False, DELETE_REFUSED, message)

    def _stop(self, action: Action, reason: str, message: str) -> Outcome:
        log.warning("partition write refused", partition=action.partition, cr=action.cr, error=message)
        return Outcome(action.cr, action.partition, False, reason, message)

    async def _tell_written(self, action: Action, cr: Mapping[str, Any]) -> None:
        name = action.partition
        if action.kind == "create":
            message = f"partition {name} created over nodes {_nodes_text(action.nodes)}"
            settings = _settings_text(action.settings, None)
            await self._event(
                cr, "Normal", EVENT_CREATED, message + (f" with {settings}" if settings else "")
            )
        elif action.kind == "delete":
            await self._event(cr, "Normal", EVENT_DELETED, f"partition {name} deleted")
        elif action.kind == "drain":
            state = action.settings.state
            await self._event(cr, "Normal", EVENT_DRAINING,
                              f"partition {name} set {state}: deleted once its jobs have ended")  # fmt: skip
        else:
            settings = _settings_text(action.settings, action.before)
            changes = [
                c for c in (settings, f"nodes {_nodes_text(action.nodes)}" if action.nodes else "") if c
            ]
            message = f"partition {name} put back to its SlurmPartition: {'; '.join(changes)}"
            await self._event(cr, "Normal", EVENT_UPDATED, message)

    def _path(self, cr: Mapping[str, Any]) -> str:
        return f"{PATH}/{cr['metadata']['name']}"

    async def _claim(self, action: Action, cr: Mapping[str, Any]) -> bool:
        """The ownership record and the finalizer on the CR, before anything of it is written to Slurm.
        Written only over the record the plan saw (`replaces`): after a failover the informer may not show
        a `created` claim yet, and an adopting claim over it would leave the partition in Slurm for good.
        False when the record is another one now (nothing written: the next reconcile plans from it)."""
        how = action.ownership or "creating"
        found: list[str | None] = []

        def build(obj: dict[str, Any]) -> dict[str, Any] | None:
            meta = obj.get("metadata") or {}
            patch: dict[str, Any] = {}
            record = (meta.get("annotations") or {}).get(Keys.PARTITION_OWNER)
            found[:] = [record]
            if record not in (how, action.replaces):
                return None
            if record != how:
                patch["annotations"] = {Keys.PARTITION_OWNER: how}
            finalizers = claimed_finalizers(meta.get("finalizers") or [], self.context.cluster)
            if finalizers is not None:  # this release's own, in place of the one of before identities
                patch["finalizers"] = finalizers
            return {"metadata": patch} if patch else None

        try:  # from a fresh read: the informer's copy may not show our own last claim yet
            await self.context.writer.patch_from_current(
                self._path(cr), build, what=f"{KIND} {action.cr} ownership"
            )
        except KubeError as exc:
            message = (
                f"ownership of partition {action.partition} not recorded on the CR ({exc}): nothing "
                "written to Slurm"
            )
            raise Stopped(self._stop(action, CLAIM_FAILED, message)) from exc
        if found and found[0] not in (how, action.replaces):
            log.info(
                "partition ownership moved since the informer showed it: planned again",
                cr=action.cr, partition=action.partition, found=found[0], planned_over=action.replaces,
            )  # fmt: skip
            return False
        self._claimed[action.cr] = (str(cr["metadata"].get("uid", "")), how)
        if how == "created":
            self._made.discard(action.partition)
        return True

    async def _release(self, cr: Mapping[str, Any]) -> None:
        def build(obj: dict[str, Any]) -> dict[str, Any] | None:
            meta = obj.get("metadata") or {}
            finalizers = list(meta.get("finalizers") or [])
            kept = released_finalizers(finalizers, self.context.cluster)
            owned = Keys.PARTITION_OWNER in (meta.get("annotations") or {})
            if kept is None and not owned:
                return None
            # another release's finalizer stays: it is that release's to remove
            return {"metadata": {"annotations": {Keys.PARTITION_OWNER: None},
                                 "finalizers": finalizers if kept is None else kept}}  # fmt: skip

        name = cr["metadata"]["name"]
        try:
            await self.context.writer.patch_from_current(
                self._path(cr), build, current=dict(cr), what=f"{KIND} {name} release"
            )
        except KubeError as exc:
            if exc.status != 404:  # gone already
                raise
        self._claimed.pop(name, None)
        self._said.pop(name, None)
        self._written.pop(name, None)
        self._looked_at.pop(name, None)
        self._refused.pop(name, None)
        self._made.discard(partition_name(cr))

    # -- Kubernetes: status and Events -----------------------------------------------------------------
    async def _tell(
        self, cr: Mapping[str, Any], outcome: Outcome, world: World, counts: Mapping[str, tuple[int, int]]
    ) -> None:
        meta, previous = cr["metadata"], cr.get("status") or {}
        name = meta["name"]
        said = self._said.get(name) or next(
            ((c.get("reason", ""), c.get("message", "")) for c in previous.get("conditions") or []
             if c.get("type") == "Ready"), None,
        )  # fmt: skip
        if said is None or said[0] != outcome.reason:
            type_ = "Warning" if outcome.reason in WARNINGS else "Normal"
            await self._event(cr, type_, outcome.reason, outcome.message)
            if type_ == "Warning":
                log.warning("partition not applied", cr=name, reason=outcome.reason, why=outcome.message)
                # slurm_syncer_actions_total{kind="partition_refused",result=<reason>}: once per refusal
                self.context.actions("partition_refused", "k8s_to_slurm", outcome.partition,
                                     {"result": outcome.reason})  # fmt: skip
        self._said[name] = (outcome.reason, outcome.message)
        record = world.owned.get(outcome.partition)
        ownership = record[1] if record is not None and record[0] == name else None
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock()))
        document = status_of(
            outcome, world.present.get(outcome.partition), counts.get(outcome.partition, (0, 0)),
            int(meta.get("generation", 0)), ownership, self._written.get(name) or previous, stamp,
        )  # fmt: skip
        if document in (previous, self._written.get(name)):
            return
        try:
            written = await self.context.writer.merge_patch(
                self._path(cr) + "/status", {"status": document}, what=f"{KIND} {name} status"
            )
        except KubeError as exc:
            if exc.status != 404:  # deleted meanwhile
                raise
            return
        if written:
            self._written[name] = document

    async def _event(self, cr: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        meta = cr["metadata"]
        ref = ObjectRef(KIND, meta["name"], "", str(meta.get("uid", "")), API_VERSION)
        await self.context.events.record(ref, type_, reason, message)


REGISTRATION = Registration(
    "partitions", when_enabled(PartitionController), PartitionOptions(), OPTIONS, options_from
)
