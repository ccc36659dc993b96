"""The job cache (issue 44): the Slurm jobs that stand for pods, kept current without a list of every job per
pod.

    cache = JobCache(client, owned=lambda marker: marker.startswith("slurm-syncer.dev/"), hint=metrics)
    cache.subscribe(lambda changes: ...)     # list[JobChange] after each change seen
    task = asyncio.create_task(cache.run())
    job_id = await client.submit_job(...); cache.track(job_id)
    job = await cache.fresh(job_id)          # GET /job/{id} now: before a bind or a delete
    await cache.resync()                     # a whole list now: after a submit whose answer was lost
    cache.jobs[job_id], cache.synced, cache.stale, cache.age_s, cache.cause

Which jobs: those whose marker (`admin_comment`) `owned` accepts, found by one whole list at the start (and
every `list_interval_s`, or on `resync()`; as `GET /jobs/?update_time=`, which answers with no job when none
changed), and those `track()`ed after a submit. A whole list is the only costly read (~8.9 KB a job, every
job of the cluster: measured in docs/slurm-releases.md "Jobs for pods"); nothing else grows with the queue:

- **States** (`GET /jobs/state/?job_id=...`, ~620 bytes plus ~67 a job of ours, ~1 ms whatever the queue,
  one request per 100 jobs): every `poll_interval_s`; with `live_interval_s`, those of the jobs not yet ended
  (a state change to bind or tear down on) also every `live_interval_s` (~690 bytes a read for one job). A
  job whose state moved is read whole at once (`GET /job/{id}`); one that Slurm no longer lists is removed
  (it ended MinJobAge ago). With `hint=`
  (slurmctld's `/metrics/jobs` gauges, 26.05) the states are read only when a gauge moved, or `hint_floor_s`
  after the last read; off by default, as measured it costs more than it saves: slurmctld walks every job for
  each read (6.7 ms at 1,000 jobs queued, 92 ms at 10,000; four reads a second) where the state read it
  spares takes 1.2 ms.
- **Details** of a running job every `detail_interval_s` (`preempt_time`/`end_time`: a preemption's grace
  window moves no state and no gauge, measured), of a pending one every `pending_interval_s` (its reason;
  no state read carries it). With `pending_first_s`, a job `track()`ed is read again `pending_first_s` after
  its submit, then at twice its age each time until `pending_interval_s` (1, 2, 4, 8, 16 s...): Slurm's first
  reason shows within a scheduling pass, at most log2(pending_interval_s / pending_first_s) + 1 reads more.
  Read one by one (~12 KB, ~2 ms whatever the queue), or as one `update_time` list where that is expected to
  cost less.

Fail closed: `stale` is True until the first list and whenever the last read that covered every job is older
than `stale_after_s`; `cause` says why. A job that is absent while the cache is synced has ended and been
forgotten by Slurm; while it is stale, absence proves nothing.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from syncer.model.jobs import SlurmJob
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmNotFound
from syncer.slurm.jobs import STATE_CHUNK, JobListing
from syncer.slurm.metrics_hint import HintReader, SlurmMetricsError
from syncer.slurm.metrics_jobs import JOBS_PATH, JobFingerprint, job_fingerprint
from syncer.slurm.polled import Change, Polled

log = structlog.get_logger("syncer.slurm.job_cache")
JOB_FIELDS: tuple[str, ...] = SlurmJob.__struct_fields__
READ_PATHS = ("list", "state", "detail", "fresh", "metrics")
DETAIL_BYTES = 9000  # a job read whole, as measured on 26.05.5 (8.9 KB): the estimate before one is read


class JobChange(Change[int, SlurmJob]):
    @property
    def job_id(self) -> int:
        return self.key


def diff_one(job_id: int, before: SlurmJob | None, after: SlurmJob | None) -> JobChange | None:
    if before is None and after is None:
        return None
    if before is None:
        return JobChange(job_id, "added", None, after)
    if after is None:
        return JobChange(job_id, "removed", before, None)
    if before == after:
        return None
    fields = tuple(f for f in JOB_FIELDS if getattr(before, f) != getattr(after, f))
    return JobChange(job_id, "changed", before, after, fields)


@dataclass
class JobCacheStats:
    reads: dict[str, int] = field(default_factory=lambda: dict.fromkeys(READ_PATHS, 0))
    read_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(READ_PATHS, 0))
    unchanged_lists: int = 0  # `update_time` lists answered "no job changed"
    hint_changed: int = 0
    hint_unchanged: int = 0
    hint_errors: int = 0
    hint_failing: bool = False
    errors: int = 0
    fresh_cached: int = 0  # fresh() answered from a read younger than its max_age_s
    last_list_bytes: int = 0
    last_list_jobs: int = 0  # jobs in the cluster at the last whole list (ours or not)


class JobCache(Polled[JobChange]):
    def __init__(
        self,
        client: SlurmClient,
        *,
        owned: Callable[[str], bool],
        hint: HintReader | None = None,
        poll_interval_s: float = 1.0,
        hint_interval_s: float = 0.25,
        hint_floor_s: float = 5.0,
        detail_interval_s: float = 5.0,
        pending_interval_s: float = 30.0,
        live_interval_s: float | None = None,
        pending_first_s: float | None = None,
        list_interval_s: float | None = 600.0,
        stale_after_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(poll_interval_s=poll_interval_s, stale_after_s=stale_after_s, clock=clock)
        self._client = client
        self._owned = owned
        self.hint = hint
        self.hint_interval_s = hint_interval_s
        self.hint_floor_s = hint_floor_s
        self.detail_interval_s = detail_interval_s
        self.pending_interval_s = pending_interval_s
        self.live_interval_s = live_interval_s
        self.pending_first_s = pending_first_s
        self.list_interval_s = list_interval_s
        self.jobs: dict[int, SlurmJob] = {}
        self.stats = JobCacheStats()
        self._wake = asyncio.Event()  # set to end the poll loop's pause early (`_pause`)
        self._read_now = False  # ... to poll at once (a job to read, a nudge, a resync), not only sooner
        self._lock = asyncio.Lock()  # one read-and-apply at a time (the poll loop, fresh(), resync())
        self._tracked_at: dict[int, float] = {}  # job -> time.monotonic() track() was called
        # job -> time.monotonic() the read applied last was sent: an older read answering later (a long list
        # beside a fresh read) does not take the cache back
        self._read_at: dict[int, float] = {}
        self._unread: set[int] = set()  # tracked, not yet read whole
        self._last_update = 0  # the last whole list's time: `update_time` of the next
        self._listed_at = -math.inf
        self._stated_at = -math.inf
        self._lived_at = -math.inf  # the last read of the states of the jobs not yet ended
        self._hint_at = -math.inf
        self._hint_seen: JobFingerprint | None = None
        self._hint_retry_at = 0.0
        self._resync = False

    # --- what consumers read (and age_s, stale, wait_synced, subscribe: Polled's) ---------------------------
    @property
    def cause(self) -> str:
        """Why the data may be old, in words ("" while it is fresh)."""
        if self.last_error:
            return self.last_error
        if self._polling_since is not None and self._clock() - self._polling_since > self.poll_interval_s:
            return f"slurmrestd has not answered for {self._clock() - self._polling_since:.0f} s"
        if not self.synced:
            return "no job list read yet"
        if self.stale:
            return f"no answer from slurmrestd for {self.age_s:.0f} s"
        return ""

    @property
    def tracked(self) -> frozenset[int]:
        """The jobs followed since `track()` that Slurm has not forgotten yet."""
        return frozenset(self._tracked_at)

    def read_at(self, job_id: int) -> float | None:
        """When the read the cache's copy of the job came from was sent (`time.monotonic()`); None: unread."""
        return self._read_at.get(job_id)

    def nudge(self) -> None:
        """Read the states now instead of at the next interval."""
        self._stated_at = -math.inf
        self._poll_now()

    def track(self, job_id: int, *, read: bool = False) -> None:
        """Follow a job just submitted: it is read whole at the next poll (and a list that started before
        this call does not remove it); `read`: the caller has just read it (`fresh()`), so not again."""
        self._tracked_at[job_id] = time.monotonic()
        if not read:
            self._unread.add(job_id)
            self._poll_now()

    def _untrack(self, job_id: int) -> None:
        """A tracked job Slurm no longer has (a read sent after its track() found none) is followed no more;
        its `_read_at` stays until the next whole list (an older read answering late does not bring it
        back)."""
        self._tracked_at.pop(job_id, None)
        self._unread.discard(job_id)

    def forget(self, job_id: int) -> None:
        """Stop following a job (its pods are gone and it has ended)."""
        self._tracked_at.pop(job_id, None)
        self._unread.discard(job_id)
        self._apply_one(job_id, None, time.monotonic())
        self._read_at.pop(job_id, None)

    async def fresh(self, job_id: int, *, max_age_s: float = 0.0) -> SlurmJob | None:
        """The job read now (`GET /job/{id}`), applied to the cache and told to subscribers; None when Slurm
        no longer has it. Raises SlurmError when slurmrestd cannot tell (the caller fails closed). It does not
        wait for a poll in flight (a whole list of a long queue takes seconds). With `max_age_s`, the cache's
        copy when the read it came from was sent at most that long ago (no request): as fresh as the states
        the cache reads every `live_interval_s` anyway."""
        read_at = self._read_at.get(job_id)
        fresh_enough = read_at is not None and time.monotonic() - read_at <= max_age_s
        if max_age_s > 0 and job_id in self.jobs and fresh_enough:
            self.stats.fresh_cached += 1
            return self.jobs[job_id]
        sent = time.monotonic()
        job = await self._read_one(job_id, "fresh")
        self._unread.discard(job_id)
        self._apply_one(job_id, job if job is not None and self._keeps(job) else None, sent)
        return job

    async def resync(self) -> None:
        """A whole list now (not conditional): finds a job whose submit answer was lost by its marker."""
        async with self._lock:
            await self._list(conditional=False)

    # --- reading ------------------------------------------------------------------------
    def _keeps(self, job: SlurmJob) -> bool:
        return job.job_id in self._tracked_at or self._owned(job.marker)

    async def _read_one(self, job_id: int, path: str) -> SlurmJob | None:
        self.stats.reads[path] += 1
        before = self._client.stats.body_bytes["job"]
        try:
            return await self._client.get_job(job_id)
        except SlurmNotFound:
            return None
        finally:
            self.stats.read_bytes[path] += self._client.stats.body_bytes["job"] - before

    async def _list(self, *, conditional: bool) -> None:
        update_time = self._last_update if conditional and self.synced and self._last_update else None
        self.stats.reads["list"] += 1
        sent = time.monotonic()
        listing = await self._client.list_job_details(update_time, keep=self._owned)
        self._listed_at = self._clock()
        if listing is None:  # no job changed since the last list: each of ours is as read then
            self.stats.unchanged_lists += 1
            self._read_at.update((job_id, sent) for job_id in self.jobs if not self._newer_than(job_id, sent))
            self._succeeded()
            return
        self.stats.read_bytes["list"] += listing.body_bytes
        self.stats.last_list_bytes, self.stats.last_list_jobs = listing.body_bytes, listing.total
        self._apply_list(listing)

    def _apply_list(self, listing: JobListing) -> None:
        """The jobs a whole list found replace the cache's, except those read after the list was sent (a
        fresh read, a job tracked after it: submitted after the list was read, it is not in it, yet there)."""
        found = {job.job_id: job for job in listing.jobs}
        newer = {j for j in self.jobs.keys() | found.keys() if self._newer_than(j, listing.started)}
        new = {j: job for j, job in found.items() if j not in newer}
        new.update((j, self.jobs[j]) for j in newer if j in self.jobs)
        changes = [diff_one(j, self.jobs.get(j), new.get(j)) for j in sorted(self.jobs.keys() | new.keys())]
        self.jobs = new
        for job_id in found.keys() - newer:
            self._read_at[job_id] = listing.started
        for job_id in self._read_at.keys() - new.keys() - self._tracked_at.keys():
            del self._read_at[job_id]  # gone for good: nothing older can bring it back after this list
        for job_id in [
            j for j in self._tracked_at.keys() - new.keys() if not self._newer_than(j, listing.started)
        ]:
            self._untrack(job_id)  # tracked before this list was sent, and Slurm has it no more
        self._unread -= found.keys()
        self._last_update = listing.last_update
        self._succeeded()
        self._tell([c for c in changes if c is not None])

    def _newer_than(self, job_id: int, sent: float) -> bool:
        return max(self._read_at.get(job_id, -math.inf), self._tracked_at.get(job_id, -math.inf)) > sent

    async def _read_states(self, live_only: bool = False) -> None:
        """The states of every job of ours (or, `live_only`, of those not yet ended); a job whose state
        moved is read whole."""
        ids = self.live_ids() if live_only else set(self.jobs) | self._unread
        self._lived_at = self._clock()
        if not live_only:
            self._stated_at = self._lived_at
        if not ids:
            if not live_only:
                self._succeeded()
            return
        sent = time.monotonic()
        before = self._client.stats.body_bytes["job_states"]
        self.stats.reads["state"] += -(-len(ids) // STATE_CHUNK)
        states = await self._client.job_states(ids)
        self.stats.read_bytes["state"] += self._client.stats.body_bytes["job_states"] - before
        moved = [
            j for j in sorted(ids)
            if j in self._unread or (j in states and j in self.jobs and states[j] != self.jobs[j].state)
        ]  # fmt: skip
        for job_id in [j for j in self.jobs if j in ids and j not in states]:
            self._apply_one(job_id, None, sent)  # Slurm has forgotten it (MinJobAge after its end)
        await self._read_whole(moved)
        if not live_only:
            self._succeeded()  # a read of every job: absence proves an end

    async def _read_whole(self, ids: list[int]) -> None:
        for job_id in ids:
            sent = time.monotonic()
            job = await self._read_one(job_id, "detail")
            self._unread.discard(job_id)
            self._apply_one(job_id, job if job is not None and self._keeps(job) else None, sent)

    def live_ids(self) -> set[int]:
        """The jobs not yet ended (and those tracked, not yet read): what a state change is awaited of."""
        return {job_id for job_id, job in self.jobs.items() if not job.ended} | self._unread

    def pending_every_s(self, read_at: float, tracked_at: float | None) -> float:
        """How long after a whole read at `read_at` a pending job is read again: `pending_interval_s`, or for
        a job tracked at `tracked_at` (with `pending_first_s`) its age at that read, from `pending_first_s` up
        to `pending_interval_s`."""
        if self.pending_first_s is None or tracked_at is None:
            return self.pending_interval_s
        return min(self.pending_interval_s, max(self.pending_first_s, read_at - tracked_at))

    def _details_due(self) -> list[int]:
        """The jobs not yet ended whose last whole read is older than their interval: `detail_interval_s` for
        a running job (a preemption shows only there), `pending_every_s` for a pending one (its reason)."""
        now = time.monotonic()
        due = []
        for job_id, job in self.jobs.items():
            if job.ended:
                continue
            read_at = self._read_at.get(job_id, -math.inf)
            every = (
                self.pending_every_s(read_at, self._tracked_at.get(job_id))
                if job.pending
                else self.detail_interval_s
            )
            if now - read_at >= every:
                due.append(job_id)
        return due

    async def _read_details(self, due: list[int]) -> None:
        """Jobs read whole: one by one, or as one `update_time` list when that is expected to cost less."""
        per_job = self.stats.read_bytes["detail"] / max(1, self.stats.reads["detail"]) or DETAIL_BYTES
        if self.stats.last_list_bytes and self.stats.last_list_bytes < per_job * len(due):
            await self._list(conditional=True)
        else:
            await self._read_whole(due)

    def _apply_one(self, job_id: int, job: SlurmJob | None, sent: float) -> None:
        """One job as a read sent at `sent` found it (None: Slurm has it no more, or it is not ours)."""
        if self._newer_than(job_id, sent):
            return
        self._read_at[job_id] = sent
        change = diff_one(job_id, self.jobs.get(job_id), job)
        if job is None:
            self.jobs.pop(job_id, None)
            self._untrack(job_id)
        else:
            self.jobs[job_id] = job
            if not job.ended and self.live_interval_s is not None:
                self._wake.set()  # a job to follow quickly (e.g. fresh() after an allocation): `_pause`
        if change is not None:
            self._tell([change])

    def _tell(self, changes: list[JobChange]) -> None:
        if not changes:
            return
        for callback in self._subscribers:
            try:
                callback(changes)
            except Exception:  # a subscriber's bug must not stop the cache
                log.exception("slurm_job_cache_subscriber_failed")

    def _succeeded(self) -> None:
        self.last_success = self._clock()
        if not self.synced and self._listed_at > -math.inf:
            self.synced = True
            self._first_answer.set()

    # --- the hint -----------------------------------------------------------------------
    async def _hint_moved(self) -> bool | None:
        """True when slurmctld's job gauges moved since the last read, False when not, None when they cannot
        be read (logged once, counted; the cache reads states every poll interval until they can)."""
        if self.hint is None or self._clock() < self._hint_retry_at:
            return None
        self._hint_at = self._clock()
        self.stats.reads["metrics"] += 1
        try:
            text = await self.hint.read_page(JOBS_PATH)
            fingerprint = job_fingerprint(text)
        except SlurmMetricsError as exc:
            self.stats.hint_errors += 1
            self._hint_retry_at = self._clock() + self.hint_floor_s
            if not self.stats.hint_failing:
                log.warning(
                    "slurm_job_hint_failed", error=str(exc), fallback="job states every poll interval"
                )
            self.stats.hint_failing = True
            return None
        self.stats.read_bytes["metrics"] += len(text.encode())
        if self.stats.hint_failing:
            log.info("slurm_job_hint_recovered")
        self.stats.hint_failing = False
        moved = fingerprint != self._hint_seen
        self._hint_seen = fingerprint
        if moved:
            self.stats.hint_changed += 1
        else:
            self.stats.hint_unchanged += 1
        return moved

    # --- the loop -----------------------------------------------------------------------
    def _due(self, at: float, interval: float | None) -> bool:
        return interval is not None and self._clock() - at >= interval

    async def poll_once(self) -> None:
        """One round: a whole list when due, else the states when due (or the hint moved), then the
        details when due."""
        if self._client.version is None:
            await self._client.start()
        async with self._lock:
            if not self.synced or self._resync or self._due(self._listed_at, self.list_interval_s):
                resync, self._resync = self._resync, False
                await self._list(conditional=not resync)
                return
            if self._unread or await self._states_due():
                await self._read_states()
            elif self._live_due():
                await self._read_states(live_only=True)
            due = self._details_due()
            if due:
                await self._read_details(due)

    async def _states_due(self) -> bool:
        if self._due(self._stated_at, self.poll_interval_s) and (
            self.hint is None or self.stats.hint_failing
        ):
            return True
        if self._due(self._stated_at, self.hint_floor_s):
            return True
        if self._due(self._hint_at, self.hint_interval_s):
            moved = await self._hint_moved()
            if moved is None:
                return self._due(self._stated_at, self.poll_interval_s)
            if not moved:
                self._succeeded()  # slurmctld answered and no job moved
            return moved
        return False

    def _live_due(self) -> bool:
        return self.live_interval_s is not None and self._due(self._lived_at, self.live_interval_s)

    def _poll_delay(self) -> float:
        hinted = self.hint is not None and not self.stats.hint_failing
        delay = min(self.poll_interval_s, self.hint_interval_s) if hinted else self.poll_interval_s
        if self.live_interval_s is not None and any(not job.ended for job in self.jobs.values()):
            delay = min(delay, self.live_interval_s)
        if self.pending_first_s is not None and any(job.pending for job in self.jobs.values()):
            delay = min(delay, self.pending_first_s)
        return delay

    async def run(self) -> None:
        """Poll until cancelled; every failure is logged, counted, kept with its cause and retried."""
        while True:
            self._wake.clear()
            self._read_now = False
            await self._guarded(self.poll_once)
            await self._pause()

    async def _pause(self) -> None:
        """Until the next poll: `_poll_delay()`; at once when told to read (`track()` of a job not read yet,
        `nudge()`, `request_resync()`); sooner when another read brought in a job not yet ended (`fresh()`
        right after an allocation, while the pause was a whole `poll_interval_s` as no job was live): its
        states are then read `live_interval_s` after the last such read, as every live job's are."""
        until = self._clock() + self._poll_delay()
        while (left := until - self._clock()) > 0:
            try:
                async with asyncio.timeout(left):
                    await self._wake.wait()
            except TimeoutError:
                return
            if self._read_now:
                return
            self._wake.clear()
            until = min(until, self._lived_at + self._poll_delay())

    def _failed(self, error: str, exc_info: bool = False) -> None:
        self.stats.errors += 1
        if error != self.last_error:
            log.warning("slurm_job_poll_failed", error=error, stale=self.stale, exc_info=exc_info)
        self.last_error = error

    def request_resync(self) -> None:
        """A whole list at the next poll (without waiting for it, unlike `resync()`)."""
        self._resync = True
        self._poll_now()

    def _poll_now(self) -> None:
        self._read_now = True
        self._wake.set()
