"""The one-pool scheduler's controller (issue 44, docs/scheduler.md): pods with `spec.schedulerName: NAME`
become Slurm jobs, and are bound to the Kubernetes Node of the Slurm node Slurm allocated.

One key per gang (`<namespace>/<kind>/<name>`, gang.py). A reconcile reads its inputs from the caches (the
scheduler pods' informer, the job cache that follows only our jobs, the Kubernetes cache's Nodes and
bindings), maps them onto the core's values (edges.py), asks the pure `plan` what to do and carries the
actions out in order, stopping at the first that fails (the next reconcile plans again). Before a bind or a
pod deletion the job is read fresh (or taken from the job cache's own read of it, if that is at most 0.25 s
old: a bind, and the deletion of a pod whose job has ended): when Slurm shows anything other than what was
planned on, nothing is written and the gang is planned again on the fresh job.

Its memory is only what the plan takes: the jobs it submitted that the job cache does not show yet, the jobs
it cancelled as they could not be placed until the pod cache shows its condition saying so, the jobs it
cancelled until the job cache shows a read of them made after the cancel (the cache can show a job live from
a read sent just before: never bound, nor its pods deleted, for a job ended here), the binds it made until
the pod informer shows them bound or gone, or the API server shows them not made (the informer can show a
pod unbound after the bind for as long as it lags: never placed again, nor its job cancelled for placement;
binds.py), the jobs bound pods name that a fresh read found live under another release's marker (two releases
serving one scheduler name: those pods are left alone, said once, read again every FOREIGN_RECHECK_S), and the
nodes it holds (syncer/control/holds.py, shared with the sync engine, which drains them).
Answers lost: a submit's blocks the gang until a whole job list has been read (the marker finds the job if
it was made); a cancel that failed has its job read now, and a bind without an answer (or a 5xx) its pod,
before the gang is planned again. Slurm refusing a submit is said on the pods and tried again after
`retry_after_s`, or at once when the gang's pods changed (refusals.py: one made again with the same name); a
REST API without external jobs (24.11) every 5 minutes, and at once when the client's version changes to one
with them (Slurm upgraded: syncer/slurm/version_follow.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import structlog
from prometheus_client import Histogram

from syncer.control.binding import resolve, slurm_nodes_on
from syncer.control.context import ControllerContext
from syncer.control.holds import NodeHolds, held_in
from syncer.control.registration import Registration
from syncer.controllers.scheduler import allocate, edges, gang, marker, refusals
from syncer.controllers.scheduler.binds import BindMemory, MadeBind
from syncer.controllers.scheduler.options import OPTIONS, Options, SchedulerOptions, options_from
from syncer.controllers.scheduler.plan import (
    PENDING,
    PLACEMENT_FAILED,
    REFUSED,
    Bind,
    Cancel,
    DeletePod,
    Hold,
    Plan,
    Release,
    SetScheduled,
    Submit,
    Teardown,
    plan,
    shown_bound,
)
from syncer.controllers.scheduler.request import JobRequest
from syncer.controllers.scheduler.values import Job, Node, PodRef, World, bound_job_id
from syncer.kube.errors import KubeError
from syncer.kube.events import ObjectRef
from syncer.kube.scheduler_pods import SchedulerPods
from syncer.kube.scheduling_reads import SchedulingReads
from syncer.kube.writer import Outcome
from syncer.model.jobs import JobSubmission, SlurmJob
from syncer.model.keys import Keys
from syncer.model.kube import KubeJob, KubeNode, SchedulerPod
from syncer.runtime.controller import DONE, Controller, Result
from syncer.runtime.errors import RetryAfter
from syncer.runtime.watch import Watch, Watches
from syncer.slurm.errors import SlurmApiError, SlurmError, SlurmUnsupported
from syncer.slurm.job_cache import JobCache, JobChange
from syncer.slurm.jobs import Placeholder

log = structlog.get_logger("syncer.controllers.scheduler")

NAMESPACE_TTL_S: Final = 30.0  # a Namespace's annotations (the tenant's defaults) are read again after this
BATCH_JOB_TTL_S: Final = 30.0  # a batch/v1 Job's parallelism, likewise
UNSUPPORTED_RETRY_S: Final = 300.0  # a release without external jobs: said again (and tried) this often
# the states of our jobs not yet ended are read this often (~690 bytes a read for one job, ~67 more a job):
# RUNNING (bind) and an end (delete the pod) are seen within it (benchmarks/RESULTS.md "Scheduler")
LIVE_INTERVAL_S: Final = 0.25
# Before a bind the job is read again unless the cache read it at most this long ago (the cache reads every
# live job's state this often anyway; a job that ends after the bind is torn down as any other). It spares a
# second read of ~12 KB right after the cache's own read of the job that moved (docs/scheduler.md "How fast").
BIND_READ_AGE_S: Final = LIVE_INTERVAL_S
# A pod whose job has ended is deleted on the job cache's read of that end if it is at most this old (the read
# that saw the end, made when the state read found it moved): an ended job stays ended, so a second read of
# ~9 KB per pod only delayed the next pod's deletion (docs/scheduler.md "How fast"). A pod deleted while its
# job still runs (preempted, a duplicate, its Node gone) waits for a read of the job made now.
ENDED_READ_AGE_S: Final = LIVE_INTERVAL_S
# a job submitted is read whole again this long after (then at twice its age): Slurm's pending reason shows
PENDING_FIRST_S: Final = 1.0
CANCEL_SHOWS_S: Final = 1.0  # a gang whose job's cancel the job cache does not show yet: planned again after
SUBMIT_SHOWS_S: Final = 30.0  # a submitted job the job cache does not show after this: a whole list is read
EVENT_SUBMITTED: Final = "SlurmJobSubmitted"
EVENT_SUBMIT_FAILED: Final = "SlurmSubmitFailed"
EVENT_BOUND: Final = "Scheduled"
EVENT_CANCELLED: Final = "SlurmJobCancelled"
EVENT_DELETED: Final = "SlurmPodDeleted"
EVENT_SHARED: Final = "SchedulerNameShared"
# A bound pod's job found live under another release's marker (plan's `foreign`) is read again this often:
# once it ends (that release uninstalled, say) the pod goes as any whose job is gone.
FOREIGN_RECHECK_S: Final = 10.0
CAUSES: Final = (
    "cancelled", "time-limit", "preempted", "suspended", "requeued", "node-failure", "job-ended", "job-gone",
    "node-deleted", "duplicate", "placement", "pod-deleted", "pod-failed", "pod-succeeded",
)  # fmt: skip
BIND_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
_SLURM_REASON: Final = re.compile(r"is pending \(([^)]*)\)")


@dataclass
class SchedulerStats:
    """Counted as it happens, read by the exporter and `status` at scrape time."""

    jobs: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("submitted", "allocated", "allocate-refused", "cancelled", "adopted"), 0
        )
    )
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("submit", "allocate", "cancel"), 0))
    teardowns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0))
    bound: int = 0


@dataclass(frozen=True)
class PodState:
    """One pod of ours as `status` and the exporter show it."""

    key: str  # namespace/name
    state: str  # pending, bound, terminating, ended
    reason: str = ""  # PodScheduled's reason while pending
    slurm_reason: str = ""  # Slurm's pending reason, when its condition names one
    message: str = ""
    age_s: float = 0.0


class SchedulerController(Controller):
    name = "scheduler"

    def __init__(self, context: ControllerContext, options: SchedulerOptions) -> None:
        self.context = context
        self.options = options
        self.clock = context.clock
        # names this deployment's jobs: another syncer's (or another scheduler name's) are not ours
        self.release = f"{context.owner}:{options.name}"
        self.core = Options(release=self.release, gres=options.gres, retry_after_s=options.retry_after_s)
        self.pods = SchedulerPods(context.kube, options.name, options.namespaces)
        self.reads = SchedulingReads(context.kube)
        self.jobs = JobCache(
            context.slurm,
            owned=lambda text: marker.read(text, self.release) is not None,
            live_interval_s=LIVE_INTERVAL_S,
            pending_first_s=PENDING_FIRST_S,
        )
        self.holds: NodeHolds = context.holds
        self.holds.settled = False  # the sync engine keeps held-looking drains until every gang was planned
        self.stats = SchedulerStats()
        self.bind_latency = Histogram(
            "slurm_syncer_scheduler_bind_latency_seconds",
            "Time from a scheduler pod's creation to its binding (its Slurm job allocated, the pod bound).",
            buckets=BIND_BUCKETS,
            registry=None,  # collected by the exporter with the rest (syncer/app/metrics.py)
        )
        self._namespaces: dict[
            str, tuple[float, Mapping[str, str] | None]
        ] = {}  # ns -> (read at, annotations)
        self._batch_jobs: dict[str, tuple[float, KubeJob]] = {}  # Job UID -> (read at, Job)
        self._uid_key: dict[str, str] = {}  # pod UID -> the gang key a job of ours names it in
        self._submitted: dict[
            str, tuple[int, float]
        ] = {}  # gang key -> (job id, when) until the cache has it
        self._lost: set[str] = set()  # gang keys whose submit answer was lost: a whole list first
        # gang keys whose job this pass allocated: planned again at once
        self._allocated_now: set[str] = set()
        self._refused: dict[str, refusals.Refused] = {}  # gang key -> Slurm's refusal, for the pods it names
        # ... for want of external jobs: tried again at once when the API version has them (an upgrade)
        self._unsupported: set[str] = set()
        self._torn: set[int] = set()  # job ids whose tear-down was counted (once per job)
        self._unplaced: set[int] = set()  # job ids cancelled for placement, until the pods show it (plan)
        # job id -> time.monotonic() its cancel was answered, until the job cache shows a later read (plan)
        self._cancelled: dict[int, float] = {}
        self._unanswered: set[int] = set()  # job ids whose cancel failed: read now before planning again
        self._binds = BindMemory(options.bind_shows_s)  # our binds the pod informer does not show (plan)
        self._adopted: set[int] = set()
        # job id -> (the cache's read of it, that read mapped, its namespace): `_jobs_of`
        self._mapped: dict[int, tuple[SlurmJob, Job | None, str]] = {}
        self._settling: set[str] | None = None  # keys still to plan once before the holds are settled
        # leading anew: every job is listed before a gang is planned (`_list_after_election`)
        self._relist = False
        self._relisting = asyncio.Lock()
        self._unserved: set[int] = set()  # jobs of namespaces not served, logged once (`_serves`)
        # job id -> (the other release, time.monotonic() of the read that found it live): plan's `foreign`;
        # kept (said once) while a pod names it, planned on for FOREIGN_RECHECK_S after each read
        self._foreign: dict[int, tuple[str, float]] = {}

    # -- inputs ---------------------------------------------------------------------------------------
    def watches(self) -> Watches:
        return (
            Watch(self.pods.subscribe, self._pod_moved),
            Watch(self.jobs.subscribe, self._jobs_moved),
            Watch(self.context.kube_cache.nodes.subscribe, self._node_moved),
            # slurmrestd replaced (an upgrade): gangs refused for want of external jobs are looked at again
            Watch(self.context.slurm.subscribe_versions, lambda: sorted(self._unsupported)),
        )

    def loops(self) -> dict[str, Any]:
        return {**self.pods.loops(), "scheduler-jobs": self.jobs.run}

    def _key_of(self, found: SchedulerPod) -> str:
        claimed = self._uid_key.get(found.uid)
        if claimed is not None:
            return claimed
        batch = {uid: job for uid, (_, job) in self._batch_jobs.items()}
        return gang.key_of(edges.pod(found), batch)

    def _pod_moved(self, old: SchedulerPod | None, new: SchedulerPod | None) -> list[str]:
        return sorted({self._key_of(pod) for pod in (old, new) if pod is not None})

    def _jobs_moved(self, changes: list[JobChange]) -> list[str]:
        keys: set[str] = set()
        for change in changes:
            if change.kind == "removed":
                self._mapped.pop(change.job_id, None)
            for job in (change.before, change.after):
                read = marker.read(job.marker, self.release) if job is not None else None
                if read is None or not self._serves(read.key):
                    continue
                keys.add(read.key)
                if change.kind == "removed":  # Slurm forgot it: so does this controller's bookkeeping
                    self._torn.discard(change.job_id)
                    self._unplaced.discard(change.job_id)
                    self._cancelled.pop(change.job_id, None)
                    self._unanswered.discard(change.job_id)
                    self._adopted.discard(change.job_id)
                    for uid in read.uids:
                        if self._uid_key.get(uid) == read.key:
                            del self._uid_key[uid]
                else:
                    self._uid_key.update(dict.fromkeys(read.uids, read.key))
        return sorted(keys)

    def _node_moved(self, old: KubeNode | None, new: KubeNode | None) -> list[str]:
        """A Node came or went: the gangs with pods bound there (a pod on a deleted Node goes)."""
        node = new if old is None else old
        if node is None or (old is not None and new is not None):
            return []
        return sorted({self._key_of(pod) for pod in self.pods.items.values() if pod.node_name == node.name})

    async def prepare(self) -> None:
        await self.context.kube_cache.wait_synced()
        await self.pods.wait_synced()
        await self.jobs.wait_synced()
        self._index_jobs()

    def _index_jobs(self) -> None:
        for found in list(self.jobs.jobs.values()):
            read = marker.read(found.marker, self.release)
            if read is not None:
                self._uid_key.update(dict.fromkeys(read.uids, read.key))
                if found.job_id not in self._adopted and edges.job(found, self.release) is not None:
                    self._adopted.add(found.job_id)
                    self.stats.jobs["adopted"] += 1

    async def keys(self) -> list[str]:
        keys = {self._key_of(pod) for pod in list(self.pods.items.values())}
        for found in list(self.jobs.jobs.values()):
            read = marker.read(found.marker, self.release)
            if read is not None and self._serves(read.key):
                keys.add(read.key)
            elif read is not None and found.job_id not in self._unserved:
                self._unserved.add(found.job_id)  # said once: it stays until served again or scancelled
                log.warning(
                    "slurm job of a namespace not served: left alone", job_id=found.job_id, key=read.key
                )
        keys |= self.holds.holders()
        if self._settling is None and not self.holds.settled:
            self._settling = set(keys)
            self._settle_if_done()
        return sorted(keys)

    def elected(self) -> None:
        """Another leader may have held nodes meanwhile: the engine keeps held-looking drains until every
        gang has been planned again."""
        self.holds.settled = False
        self._settling = None
        self._submitted.clear()  # the job cache is the truth: a leader's submits show there by their marker
        self._relist = True  # ... once it has listed them: a follower's cache lists only every 10 minutes

    def _settle_if_done(self) -> None:
        if self._settling is not None and not self._settling:
            self._settling = None
            prefix = self.context.owner_prefix
            nodes = self.context.slurm_cache.nodes
            self.holds.settle(
                lambda: [
                    name for name, node in list(nodes.items()) if held_in(node.reason, prefix) is not None
                ]
            )
            log.info("scheduler holds settled", held=len(self.holds))

    def _serves(self, key: str) -> bool:
        """A gang of a namespace served: a job of ours in another (the list narrowed since its submit) is left
        alone, as its pods cannot be seen (their absence is no deletion: cancelling would free their nodes in
        Slurm under them)."""
        served = self.options.namespaces
        return not served or key.split("/", 1)[0] in served

    @property
    def fresh(self) -> bool:
        return self.context.kube_cache.synced and self.pods.synced and not self.jobs.stale

    # -- one gang ---------------------------------------------------------------------------------------
    async def reconcile(self, key: str) -> Result:
        if not self.fresh:
            return Result(requeue_after=1.0)  # fail closed: nothing submitted, bound or deleted on stale data
        namespace = key.split("/", 1)[0]
        if self._relist:
            await self._list_after_election()
        if key in self._lost:
            await self._list_after_lost(key)
        await self._settle_cancels(key)
        found = [pod for pod in list(self.pods.items.values()) if pod.namespace == namespace]
        learned = await self._read_batch_jobs(found)
        annotations = await self._namespace(namespace)
        pods = [edges.pod(pod) for pod in found]
        jobs = self._jobs_of(namespace)
        batch = {uid: job for uid, (_, job) in self._batch_jobs.items()}
        gangs = gang.group(
            pods, jobs, batch, {namespace: annotations} if annotations is not None else {}, self.core,
            only=None if learned else key,
        )  # fmt: skip
        if learned:  # a Job now known moves its pods to their gang's key (parallelism 1: a pod alone)
            for other in gangs:
                if other != key:
                    self.runner.queue.add(other)
        current = gangs.get(key) or gang.Gang(key=key, pods=(), jobs=(), want=None)
        if not current.pods and not current.jobs:  # nothing left of the gang: forget what was noted of it
            self._refused.pop(key, None)
            self._unsupported.discard(key)
        submitted = self._still_submitted(key, current.jobs)
        unplaced = self._still_unplaced(current)
        cancelled = self._still_cancelled(current)
        bound = await self._still_bound(current)
        await self._read_named(current)
        foreign = self._still_foreign(current)
        world = await self._world(shown_bound(current, bound))
        decided = plan(
            current, world, self.core, held=self.holds.of(key), submitted=submitted, unplaced=unplaced,
            cancelled=cancelled, bound=bound, foreign=foreign,
        )  # fmt: skip
        done = await self._carry_out(key, current, decided, found)
        if self._settling is not None:
            self._settling.discard(key)
            self._settle_if_done()
        if done and key in self._allocated_now:  # its job runs already: bind now, on the read just made
            self._allocated_now.discard(key)
            return await self.reconcile(key)
        if decided.blocked:
            log.debug("gang waits", blocked=decided.blocked)
        return self._next(decided, done, key, awaiting=bool(cancelled), foreign=bool(foreign))

    def _next(
        self, decided: Plan, done: bool, key: str, *, awaiting: bool = False, foreign: bool = False
    ) -> Result:
        now = self.clock()
        waits = [decided.recheck_at - now] if decided.recheck_at is not None else []
        if foreign:  # another release's job: read again then (`_still_foreign`)
            waits.append(FOREIGN_RECHECK_S)
        if awaiting:  # a cancel the job cache does not show yet: its read moves no state if the cancel failed
            waits.append(CANCEL_SHOWS_S)
        if not done:
            waits.append(0.05)  # planned on what Slurm no longer shows: plan again on the fresh job
        if key in self._submitted or key in self._lost:
            waits.append(1.0)
        if key in self._refused:
            waits.append(self._refused[key].retry_at - now)
        if self.holds.of(key):
            waits.append(self.context.resync_s)
        return Result(requeue_after=max(0.05, min(waits))) if waits else DONE

    def _jobs_of(self, namespace: str) -> list[Job]:
        """The namespace's jobs of ours as the core reads them. Each job the cache holds is mapped once per
        read of it, not at every reconcile: the cache keeps ended jobs until Slurm forgets them (MinJobAge),
        hundreds while pods come and go, and mapping them all per pod was most of a tear-down's time
        (benchmarks/RESULTS.md "scancel -> pod deleted")."""
        found = []
        for read in list(self.jobs.jobs.values()):
            memo = self._mapped.get(read.job_id)
            if memo is None or memo[0] is not read:
                mapped = edges.job(read, self.release)
                memo = (read, mapped, mapped.marker.key.split("/", 1)[0] if mapped is not None else "")
                self._mapped[read.job_id] = memo
            if memo[1] is not None and memo[2] == namespace:
                found.append(memo[1])
        return found

    def _still_submitted(self, key: str, jobs: Iterable[Job]) -> int | None:
        """The job this controller submitted for the gang while the job cache does not show it yet."""
        entry = self._submitted.get(key)
        if entry is None:
            return None
        job_id, at = entry
        if job_id in self.jobs.jobs or any(job.job_id == job_id for job in jobs):
            del self._submitted[key]
            return None
        if self.clock() - at > SUBMIT_SHOWS_S:
            self.jobs.request_resync()  # not seen for long: a whole list finds it by its marker, or not
            self._submitted[key] = (job_id, self.clock())
        return job_id

    def _still_unplaced(self, current: gang.Gang) -> frozenset[int]:
        """The gang's jobs this controller cancelled as they could not be placed while an unbound pod of one
        does not show the condition saying so yet (the job cache can show the job ended first: without this
        the plan would read our cancel as Slurm's and delete the pod); forgotten once every one shows it."""
        still: set[int] = set()
        for job in current.jobs:
            if job.job_id not in self._unplaced:
                continue
            said = f"Slurm job {job.job_id} "
            if any(
                (pod.uid in job.marker.uids or pod.job_id == job.job_id)
                and not (pod.ended or pod.node_name)
                and (pod.scheduled is None
                     or pod.scheduled.reason != PLACEMENT_FAILED
                     or not pod.scheduled.message.startswith(said))
                for pod in current.pods
            ):  # fmt: skip
                still.add(job.job_id)
            else:
                self._unplaced.discard(job.job_id)
        return frozenset(still)

    def _still_cancelled(self, current: gang.Gang) -> frozenset[int]:
        """The gang's jobs this controller cancelled that the job cache shows live from a read sent before the
        cancel was answered (`awaited_cancels`); forgotten once a later read shows them (ended; or live: the
        cancel did not take, and the plan decides again)."""
        still = awaited_cancels(self._cancelled, current.jobs, self.jobs.read_at)
        for job in current.jobs:
            if job.job_id in self._cancelled and job.job_id not in still:
                del self._cancelled[job.job_id]
        return still

    def _still_foreign(self, current: gang.Gang) -> frozenset[int]:
        """The jobs the gang's bound pods name that a read at most FOREIGN_RECHECK_S old found live under
        another release's marker (plan's `foreign`); past that the plan decides without them and its hold's or
        deletion's fresh read finds them again (`_same`). Forgotten once no pod names them."""
        if not self._foreign:
            return frozenset()
        named = {bound_job_id(pod.annotations, pod.node_name) for pod in list(self.pods.items.values())}
        for job_id in self._foreign.keys() - named:
            del self._foreign[job_id]
        now = time.monotonic()
        return frozenset(
            pod.job_id
            for pod in current.pods
            if pod.job_id in self._foreign and now - self._foreign[pod.job_id][1] < FOREIGN_RECHECK_S
        )

    async def _read_named(self, current: gang.Gang) -> None:
        """A bound pod whose job-id annotation names no job of the gang while a job of ours names it (the
        annotation overwritten, or another release bound it): the plan takes our job over the annotation
        unless the job it names is another release's (`foreign`), so that job is read first, unless a read
        found it another release's less than FOREIGN_RECHECK_S ago."""
        ids = {job.job_id for job in current.jobs}
        for pod in current.pods:
            job_id = pod.job_id
            if job_id is None or job_id in ids or not any(pod.uid in job.marker.uids for job in current.jobs):
                continue
            seen = self._foreign.get(job_id)
            if seen is not None and time.monotonic() - seen[1] < FOREIGN_RECHECK_S:
                continue
            try:
                read = await self.jobs.fresh(job_id)
            except SlurmError as exc:
                why = f"pod {pod.namespace}/{pod.name} names Slurm job {job_id}, which cannot be read: {exc}"
                raise RetryAfter(1.0, why) from exc
            other = edges.other_release(read, self.release) if read is not None else ""
            if other:
                await self._learned_foreign(job_id, other, current)
            else:
                self._foreign.pop(job_id, None)

    async def _settle_cancels(self, key: str) -> None:
        """A cancel of the gang's job that failed may have ended it all the same (its answer lost): the job
        is read now, before the gang is planned, so the plan sees it ended, or live (cancelled again at
        once), and never binds or deletes on the cache's copy from before the cancel."""
        for job_id in sorted(self._unanswered):
            found = self.jobs.jobs.get(job_id)
            read = marker.read(found.marker, self.release) if found is not None else None
            if read is not None and read.key != key:
                continue  # another gang's
            if read is not None:
                try:
                    await self.jobs.fresh(job_id)
                except SlurmError as exc:
                    raise RetryAfter(
                        1.0, f"Slurm job {job_id}'s cancel failed and it cannot be read: {exc}"
                    ) from exc
            self._unanswered.discard(job_id)

    async def _still_bound(self, current: gang.Gang) -> frozenset[Bind]:
        """The binds this controller made that the pod informer does not show yet, of the gang's pods (plan's
        `bound`), each kept until evidence ends it (binds.py), never for a time only. Those whose answer was
        lost, and those the informer has not shown for another `bind_shows_s`, are read back from the API
        server first; a bind unshown that long is warned of once."""
        now = time.monotonic()
        ended, late = self._binds.sweep(self.pods.get, now)
        for made in late:
            log.warning(
                "bind not shown by the pod informer: kept until it does, or the API server shows it unmade",
                pod=_name(made), node=made.bind.node, job_id=made.bind.job_id, after_s=_age(made, now),
            )  # fmt: skip
        for made in ended:
            log.info("bind shown by the pod informer at last", pod=_name(made), after_s=_age(made, now))
        ours = {pod.uid for pod in current.pods}
        for made in self._binds.due(ours, now):
            await self._settle_bind(made)
        return self._binds.of(ours)

    async def _settle_bind(self, made: MadeBind) -> None:
        """A bind read back from the API server: the pod on that Node, kept (a bind whose answer was lost is
        then counted and told as made); anything else, forgotten (not bound: the plan decides again; gone; or
        bound elsewhere, which the informer will show). A bind whose answer was lost holds the gang while its
        pod cannot be read; one answered is kept as it is (read again at the next pass)."""
        ref = made.bind.pod
        try:
            read = await self.reads.pod(ref.namespace, ref.name)
        except KubeError as exc:
            if made.answered:
                log.info("a bind not shown by the pod informer cannot be read back: kept", pod=_name(made))
                return
            raise RetryAfter(
                1.0, f"a bind's answer was lost and pod {ref.namespace}/{ref.name} cannot be read: {exc}"
            ) from exc
        if not self._binds.settle(made, read, time.monotonic()):
            if made.answered:
                log.info(
                    "bind not on its Node in the API server: forgotten", pod=_name(made), node=made.bind.node
                )
        elif not made.answered:
            log.info("a bind whose answer was lost was made", pod=_name(made))
            await self._said_bound(made.bind, read)

    async def _list_after_election(self) -> None:
        """Leading anew: a whole job list before any gang is planned. The cache of a follower lists every job
        at its start and then every `list_interval_s` (10 minutes) only: a job the old leader submitted
        since is unknown to it, and its pod would get a second job."""
        async with self._relisting:
            if not self._relist:
                return  # listed by another reconcile meanwhile
            try:
                await self.jobs.resync()
            except SlurmError as exc:
                raise RetryAfter(1.0, f"leading now, and the job list cannot be read: {exc}") from exc
            self._relist = False

    async def _list_after_lost(self, key: str) -> None:
        """A submit whose answer was lost may have made a job: a whole list finds it by its marker."""
        try:
            await self.jobs.resync()
        except SlurmError as exc:
            raise RetryAfter(
                1.0, f"a submit's answer was lost and the job list cannot be read: {exc}"
            ) from exc
        self._lost.discard(key)

    async def _namespace(self, namespace: str) -> Mapping[str, str] | None:
        """The Namespace's annotations (the tenant's defaults), read again after NAMESPACE_TTL_S; None while
        unknown (nothing is submitted there meanwhile)."""
        at, annotations = self._namespaces.get(namespace, (-1e18, None))
        if self.clock() - at < NAMESPACE_TTL_S:
            return annotations
        try:
            body = await self.context.kube.get(f"/api/v1/namespaces/{namespace}")
        except KubeError as exc:
            if not exc.not_found:
                log.warning("namespace not readable: its pods wait", namespace=namespace, error=str(exc))
                return annotations
            body = None
        meta = (body or {}).get("metadata") or {}
        found = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()} if body else None
        self._namespaces[namespace] = (self.clock(), found)
        return found

    async def _read_batch_jobs(self, found: Iterable[SchedulerPod]) -> bool:
        """The batch/v1 Jobs owning these pods, read when unknown or older than BATCH_JOB_TTL_S; True when
        one became known (its pods change gang)."""
        learned = False
        wanted = {
            owner.uid: (pod.namespace, owner.name)
            for pod in found
            if (owner := pod.controller) is not None
            and owner.kind == "Job"
            and owner.api_version == "batch/v1"
        }
        now = self.clock()
        for uid, (namespace, name) in sorted(wanted.items()):
            at, _ = self._batch_jobs.get(uid, (-1e18, None))
            if now - at < BATCH_JOB_TTL_S:
                continue
            read = await self.reads.job(namespace, name)
            if read is None or read.uid != uid:
                continue  # gone, or the name holds another Job now: its pods wait
            learned = learned or uid not in self._batch_jobs
            self._batch_jobs[uid] = (now, read)
        alive = set(wanted)
        for uid in [
            uid for uid in self._batch_jobs if uid not in alive and now - self._batch_jobs[uid][0] > 600
        ]:
            del self._batch_jobs[uid]
        return learned

    async def _world(self, current: gang.Gang) -> World:
        """The binding table and the Nodes this gang's plan reads: the Slurm nodes of its jobs and those on
        its pods' Nodes; a Node a pod may be bound to now is read with the pods already there (fresh)."""
        cache, known = self.context.kube_cache, self.context.slurm_cache.nodes
        bindings: dict[str, str] = {}
        for job in current.jobs:
            for slurm_node in job.nodes:
                binding = resolve(slurm_node, cache)
                if binding.bound and binding.node is not None:
                    bindings[slurm_node] = binding.node.name
        for pod in current.pods:
            if pod.node_name:
                bindings.update(dict.fromkeys(slurm_nodes_on(pod.node_name, cache, known), pod.node_name))
        placing = {
            bindings[slurm_node]
            for job in current.jobs
            if job.state == "RUNNING" and any(not pod.node_name and not pod.ended for pod in current.pods)
            for slurm_node in job.nodes
            if slurm_node in bindings
        }
        names = {pod.node_name for pod in current.pods if pod.node_name} | set(bindings.values())
        nodes: dict[str, Node] = {}
        for name in sorted(names):
            found = cache.node(name)
            if found is None:
                continue
            usage = await self.reads.pods_on_node(name) if name in placing else []
            nodes[name] = edges.node(found, usage)
        return World(bindings=bindings, nodes=nodes, fresh=self.fresh, now=self.clock())

    # -- carrying a plan out ------------------------------------------------------------------------------
    async def _carry_out(
        self, key: str, current: gang.Gang, decided: Plan, found: list[SchedulerPod]
    ) -> bool:
        """Each action in order; False when the plan rested on a job Slurm no longer shows so (plan again)."""
        pods = {pod.uid: pod for pod in found}
        jobs = {job.job_id: job for job in current.jobs}
        for action in decided.actions:
            if isinstance(action, Hold):
                if action.gone is not None and not await self._same(action.gone, None, current=current):
                    return False
                self.holds.hold(action.slurm_node, key, action.reason)
                log.info("slurm node held", slurm_node=action.slurm_node, reason=action.reason)
            elif isinstance(action, Release):
                self.holds.release(action.slurm_node, key)
                log.info("slurm node released", slurm_node=action.slurm_node)
            elif isinstance(action, Submit):
                await self._submit(key, action, pods)
            elif isinstance(action, SetScheduled):
                await self._set_scheduled(action, pods.get(action.pod.uid))
            elif isinstance(action, Bind):
                if self._binds.full:  # the informer this far behind: no more binds (none is forgotten)
                    raise RetryAfter(1.0, f"{len(self._binds.made)} binds not shown by the pod informer yet")
                if not await self._same(action.job_id, jobs.get(action.job_id), max_age_s=BIND_READ_AGE_S):
                    return False
                await self._bind(action, pods.get(action.pod.uid))
            elif isinstance(action, Cancel):
                await self._cancel(action, current)
            elif isinstance(action, DeletePod):
                planned = jobs.get(action.job_id)
                age = delete_read_age(planned)
                if not await self._same(action.job_id, planned, max_age_s=age, current=current):
                    return False
                await self._delete(action, pods.get(action.pod.uid))
        return True

    async def _same(
        self, job_id: int, planned: Job | None, *, max_age_s: float = 0.0, current: gang.Gang | None = None
    ) -> bool:
        """The job read now (or at most `max_age_s` ago) is what the plan read (None: gone from Slurm; not
        when another release's marker names it, live: `_foreign`). Raises when Slurm cannot tell."""
        read = await self.jobs.fresh(job_id, max_age_s=max_age_s)
        now = edges.job(read, self.release) if read is not None else None
        other = edges.other_release(read, self.release) if read is not None and planned is None else ""
        if other:
            await self._learned_foreign(job_id, other, current)
            return False
        self._foreign.pop(job_id, None)
        if now != planned:
            log.info("job changed since planned: planned again", job_id=job_id)
            return False
        return True

    async def _learned_foreign(self, job_id: int, other: str, current: gang.Gang | None) -> None:
        """A pod bound for a job another release runs: planned on as not ours (plan's `foreign`), said once
        (a log line, a Warning Event on each pod naming it): two releases serve one scheduler name."""
        told = job_id in self._foreign
        self._foreign[job_id] = (other, time.monotonic())
        if told:
            return
        log.warning(
            "scheduler name shared with another release: its pod left alone",
            job_id=job_id, other_release=other, release=self.release,
        )  # fmt: skip
        message = (
            f"Slurm job {job_id} runs for slurm-syncer release {other}, which serves scheduler name "
            f"{self.options.name} too: this release ({self.release}) leaves the pod alone; run one release "
            "per scheduler name"
        )
        for pod in current.pods if current is not None else ():
            if pod.job_id == job_id:
                await self._event(pod.namespace, pod.name, pod.uid, "Warning", EVENT_SHARED, message)

    async def _submit(self, key: str, action: Submit, pods: Mapping[str, SchedulerPod]) -> None:
        request = action.request
        now = self.clock()
        # a refusal holds back only the pods it was made for: a gang whose pods changed is submitted now
        refused = refusals.standing(self._refused.get(key), (ref.uid for ref in request.pods), now)
        if key in self._unsupported and self.context.slurm.external_jobs:
            refused = None  # the API version in use has external jobs now (Slurm upgraded): submit
        if refused is not None:
            for ref in request.pods:
                await self._set_scheduled(
                    SetScheduled(pod=ref, reason=REFUSED, message=refused.why), pods.get(ref.uid), event=False
                )
            return
        self._refused.pop(key, None)
        self._unsupported.discard(key)
        placeholder: Placeholder = "fallback" if self.options.placeholder else "never"
        submission = edges.submission(request)
        job_id = await self._allocate(key, request, submission)
        allocated = job_id is not None
        try:
            if job_id is None:
                job_id = await self.context.slurm_writer.submit_job(submission, placeholder=placeholder)
        except SlurmUnsupported as exc:
            release = f"Slurm {self.context.slurm.release}" if self.context.slurm.release else "this Slurm"
            version = self.context.slurm.version.name if self.context.slurm.version else "?"
            why = (
                f"{release} (REST {version}) has no external jobs, so no Slurm job can stand for this pod: "
                "the scheduler needs Slurm 25.05+ (REST v0.0.43+), or --scheduler-placeholder (a placeholder "
                f"batch job per pod) ({exc})"
            )
            await self._refuse(key, request.pods, pods, why, UNSUPPORTED_RETRY_S)
            self._unsupported.add(key)
            return
        except SlurmError as exc:
            self.stats.errors["submit"] += 1
            if isinstance(exc, SlurmApiError) and submit_refused(exc):
                await self._refuse(
                    key, request.pods, pods, f"Slurm refused the job: {exc}", self.core.retry_after_s
                )
                return
            # no answer, or one without Slurm's word: the job may exist; no second submit before a whole list
            raise self._looked_for(key, f"submit of {request.name}", exc) from exc
        if job_id is None:
            return  # dry run
        read = False
        if allocated:  # RUNNING already: read it now (the bind needs its nodes), not again at the next poll
            with contextlib.suppress(SlurmError):  # else the poll reads it (tracked, unread)
                read = await self.jobs.fresh(job_id) is not None
        self.jobs.track(job_id, read=read)
        if read:
            self._allocated_now.add(key)
        self._submitted[key] = (job_id, now)
        self._uid_key.update({ref.uid: key for ref in request.pods})
        how = "allocated at once" if allocated else "submitted"
        self.stats.jobs["allocated" if allocated else "submitted"] += 1
        notes = "".join(f"; {note}" for note in request.notes)
        log.info(f"slurm job {how}", job_id=job_id, name=request.name, nodes=request.nodes)
        self.context.actions("scheduler_submit", "k8s_to_slurm", request.name, {"result": "ok", "how": how})
        for ref in request.pods:
            await self._event(
                ref.namespace, ref.name, ref.uid, "Normal", EVENT_SUBMITTED,
                f"Slurm job {job_id} {how} for {request.name} ({request.nodes} node(s), "
                f"{request.cpus_per_node} CPUs, {request.memory_mib_per_node} MiB"
                f"{', ' + request.tres_per_node if request.tres_per_node else ''} per node){notes}",
            )  # fmt: skip

    async def _allocate(self, key: str, request: JobRequest, submission: JobSubmission) -> int | None:
        """The job allocated at once (`POST /job/allocate`, immediate) when the syncer's view says it could
        start now (allocate.could_start); None: submit it (not tried, or Slurm refused: it cannot start now,
        or a job of higher priority may use the nodes; a FAILED record of the try stays, never the pod's
        job). A lost answer may have made a RUNNING job: RetryAfter, and a whole list looks for it by its
        marker (as for a submit) before anything is asked again."""
        if not self.options.allocate or not self.context.slurm.external_jobs:
            return None
        ours_pending = any(job.pending for job in list(self.jobs.jobs.values()))
        rooms = [edges.room(node) for node in list(self.context.slurm_cache.nodes.values())]
        if not allocate.could_start(request, rooms, ours_pending=ours_pending):
            return None
        tried = dataclasses.replace(submission, marker=marker.via(submission.marker, allocate.VIA))
        try:
            return await self.context.slurm_writer.allocate_job(tried)
        except SlurmUnsupported:
            return None
        except SlurmApiError as exc:
            if allocation_refused(exc):
                self.stats.jobs["allocate-refused"] += 1
                log.info("slurm job not allocated at once: submitted", key=key, why=str(exc))
                return None
            lost: SlurmError = exc  # an answer that says nothing: the job may exist
        except SlurmError as exc:
            lost = exc
        self.stats.errors["allocate"] += 1
        raise self._looked_for(key, f"allocation of {request.name}", lost) from lost

    def _looked_for(self, key: str, what: str, lost: SlurmError) -> RetryAfter:
        """A submit or allocation whose answer says nothing of its job: the gang waits for a whole list,
        which finds the job by its marker if one was made."""
        self._lost.add(key)
        return RetryAfter(1.0, f"{what} unanswered ({lost}): its job is looked for")

    async def _refuse(
        self, key: str, refs: Iterable[PodRef], pods: Mapping[str, SchedulerPod], why: str, retry_s: float
    ) -> None:
        refs = tuple(refs)  # read twice
        self._refused[key] = refusals.Refused(self.clock() + retry_s, why, frozenset(ref.uid for ref in refs))
        log.warning("slurm job not submitted", key=key, why=why)
        for ref in refs:
            await self._event(ref.namespace, ref.name, ref.uid, "Warning", EVENT_SUBMIT_FAILED, why)
            await self._set_scheduled(
                SetScheduled(pod=ref, reason=REFUSED, message=why), pods.get(ref.uid), event=False
            )

    async def _set_scheduled(
        self, action: SetScheduled, found: SchedulerPod | None, *, event: bool = True
    ) -> None:
        if found is None or found.uid != action.pod.uid or found.node_name:
            return
        outcome = await self.context.writer.set_pod_scheduled(
            found, "False", action.reason, action.message, self.clock()
        )
        if outcome is Outcome.DONE and event:
            warning = action.reason in (REFUSED, PLACEMENT_FAILED)
            await self._event(
                found.namespace, found.name, found.uid, "Warning" if warning else "Normal", action.reason,
                action.message,
            )  # fmt: skip

    async def _bind(self, action: Bind, found: SchedulerPod | None) -> None:
        ref = action.pod
        try:
            outcome = await self.context.writer.bind(
                ref.namespace, ref.name, ref.uid, action.node,
                annotations={Keys.SCHEDULER_JOB_ID: str(action.job_id)},
            )  # fmt: skip
        except KubeError as exc:
            if bind_unanswered(exc):  # it may have bound the pod: read back before the gang is planned again
                self._binds.add(action, time.monotonic(), answered=False)
            raise
        if outcome in (Outcome.DONE, Outcome.ALREADY):  # the pod informer may not show it yet
            self._binds.add(action, time.monotonic())
        if outcome is Outcome.DONE:
            await self._said_bound(action, found)

    async def _said_bound(self, action: Bind, found: SchedulerPod | None) -> None:
        """A bind made: counted, timed, logged and told on the pod."""
        ref = action.pod
        self.stats.bound += 1
        if found is not None and found.creation_timestamp:
            self.bind_latency.observe(max(0.0, time.time() - found.creation_timestamp))
        log.info("pod bound", pod=f"{ref.namespace}/{ref.name}", node=action.node, job_id=action.job_id)
        self.context.actions(
            "scheduler_bind", "slurm_to_k8s", f"{ref.namespace}/{ref.name}", {"result": "ok"}
        )
        await self._event(
            ref.namespace, ref.name, ref.uid, "Normal", EVENT_BOUND,
            f"Successfully assigned {ref.namespace}/{ref.name} to {action.node}: Slurm job {action.job_id} "
            f"runs on Slurm node {action.slurm_node}",
        )  # fmt: skip

    def _torn_down(self, action: Teardown) -> None:
        if action.job_id not in self._torn:
            self._torn.add(action.job_id)
            self.stats.teardowns[action.cause] = self.stats.teardowns.get(action.cause, 0) + 1

    async def _cancel(self, action: Cancel, current: gang.Gang) -> None:
        job = self.jobs.jobs.get(action.job_id) or SlurmJob(job_id=action.job_id)
        if action.cause == "placement":  # noted first: a lost answer may have ended it all the same
            self._unplaced.add(action.job_id)
        try:
            ended = await self.context.slurm_writer.end_job(job)
        except SlurmError:
            self.stats.errors["cancel"] += 1
            self._unanswered.add(action.job_id)  # it may have ended the job: read before planning again
            raise
        if ended:  # the cache may show it live from a read sent before now: awaited until a later read
            self._cancelled[action.job_id] = time.monotonic()
        self.stats.jobs["cancelled"] += 1
        self._torn_down(action)
        self.jobs.nudge()
        log.info("slurm job ended", job_id=action.job_id, cause=action.cause)
        self.context.actions("scheduler_cancel", "k8s_to_slurm", str(action.job_id), {"result": "ok"})
        named = next((job.marker for job in current.jobs if job.job_id == action.job_id), None)
        namespace = current.namespace
        for name, uid in named.pods if named is not None else ():
            await self._event(namespace, name, uid, "Normal", EVENT_CANCELLED, action.message)

    async def _delete(self, action: DeletePod, found: SchedulerPod | None) -> None:
        ref = action.pod
        outcome = await self.context.writer.delete_pod(
            ref.namespace, ref.name, ref.uid, grace_period_s=action.grace_s, why=action.message
        )
        if outcome is not Outcome.DONE:
            return
        self._torn_down(action)
        log.info("pod deleted", pod=f"{ref.namespace}/{ref.name}", cause=action.cause, job_id=action.job_id)
        self.context.actions(
            "scheduler_delete", "slurm_to_k8s", f"{ref.namespace}/{ref.name}", {"result": "ok"}
        )
        await self._event(ref.namespace, ref.name, ref.uid, "Warning", EVENT_DELETED, action.message)

    async def _event(
        self, namespace: str, name: str, uid: str, type_: str, reason: str, message: str
    ) -> None:
        await self.context.events.record(ObjectRef.pod(namespace, name, uid), type_, reason, message)

    # -- what status and the exporter show ------------------------------------------------------------
    def unshown_binds(self) -> list[float]:
        """How long ago each bind the pod informer does not show yet was made (s): the exporter's gauges. A
        bind is read back and warned of only when its gang is planned; these show the lag between passes."""
        now = time.monotonic()
        return sorted(now - made.at for made in self._binds.unshown(self.pods.get))

    def pod_states(self) -> list[PodState]:
        now = time.time()
        states = []
        for pod in list(self.pods.items.values()):
            age = max(0.0, now - pod.creation_timestamp) if pod.creation_timestamp else 0.0
            if pod.ended:
                state = "ended"
            elif pod.terminating:
                state = "terminating"
            elif pod.node_name:
                state = "bound"
            else:
                cond = pod.condition("PodScheduled")
                reason = cond.reason if cond is not None and cond.status == "False" else ""
                message = cond.message if cond is not None else ""
                found = _SLURM_REASON.search(message) if reason == PENDING else None
                states.append(
                    PodState(
                        pod.key, "pending", reason or "NoCondition", found[1] if found else "", message, age
                    )
                )
                continue
            states.append(PodState(pod.key, state, age_s=age))
        return sorted(states, key=lambda s: s.key)


def allocation_refused(exc: SlurmApiError) -> bool:
    """An immediate allocation Slurm refused (then the job is submitted): slurmrestd passed on slurmctld's
    error (HTTP 4xx with Slurm's errors), so no job runs for it. Whatever the error: no room (2016 busy,
    2013 a job of higher priority waits for the nodes, 2035, 2038) or anything a submit would be refused or
    wait for too (a bad partition, a QOS limit: the submit then says so). Anything else (a 5xx, an answer
    without Slurm's errors) says nothing of the job, which may run: it is looked for by its marker."""
    return bool(exc.errors) and 400 <= exc.status < 500


def submit_refused(exc: SlurmApiError) -> bool:
    """A submit Slurm refused (said on the pods, tried again after retry_after_s): a 4xx, or any status
    carrying Slurm's error numbers (24.11 answers a bad partition or constraint with HTTP 500 and 2000 or
    2029; 26.05 with 422). A 5xx without them (slurmrestd failing after the job was made; a gateway's
    502-504 never get here: the client raises them as lost) says nothing of the job, which may exist: it is
    looked for by its marker before another submit."""
    return 400 <= exc.status < 500 or any(error.error_number for error in exc.errors)


def awaited_cancels(
    cancels: Mapping[int, float], jobs: Iterable[Job], read_at: Callable[[int], float | None]
) -> frozenset[int]:
    """Of the jobs cancelled (`cancels`: job id -> when the cancel was answered), those shown live from a read
    sent (`read_at`) before that: the job cache's view of them predates the cancel (plan's `cancelled`)."""
    still = set()
    for job in jobs:
        read = read_at(job.job_id)
        if job.job_id in cancels and not job.ended and (read is None or read <= cancels[job.job_id]):
            still.add(job.job_id)
    return frozenset(still)


def bind_unanswered(exc: KubeError) -> bool:
    """A bind that failed without saying it was not made: no answer (a lost connection, a timeout: status 0)
    or a 5xx (the API server may have written the pod before failing). A 4xx says it was not made."""
    return exc.status == 0 or exc.status >= 500


def _name(made: MadeBind) -> str:
    return f"{made.bind.pod.namespace}/{made.bind.pod.name}"


def _age(made: MadeBind, now: float) -> float:
    return round(now - made.at, 1)


def delete_read_age(planned: Job | None) -> float:
    """How old the read of its job a pod's deletion rests on may be: ENDED_READ_AGE_S when the plan saw the
    job ended, else 0 (read now; a job Slurm no longer shows is read now too)."""
    return ENDED_READ_AGE_S if planned is not None and planned.ended else 0.0


REGISTRATION = Registration(
    "scheduler",
    build=lambda context, options: SchedulerController(context, options) if options.enabled else None,
    defaults=SchedulerOptions(),
    options=OPTIONS,
    configure=options_from,
)
