"""The Slurm node cache: cheap "changed since?" probes, full lists only on change, diffs to subscribers.

    cache = NodeCache(client, poll_interval_s=1.0)
    cache.subscribe(lambda changes: ...)    # list[NodeChange] after each new snapshot
    task = asyncio.create_task(cache.run())
    cache.nodes["n1"], cache.synced, cache.stale, cache.age_s
    cache.nudge()                           # probe now (after the syncer wrote to Slurm)
    cache.subscribe_fresh(lambda: ...)      # once each time the data turns fresh after being stale

Fail closed: `stale` is True until the first full list and whenever the last successful poll is
older than `stale_after_s`; consumers must not undrain, delete or scale in while it is True. What they
withheld meanwhile they decide again when `subscribe_fresh` calls them (no node may have changed).

Never silent: every poll that fails, whatever raised, is counted and kept in `last_error` with its
cause; a cache with no good answer for longer than `stale_after_s` reconnects its client. How the
server answers "changed since?" is read from its answers (24.11: HTTP 500 "Unable to query
partitions"; 26.05.3+: 200 with every node; both: 304 when nothing changed), not from its version.

With a metrics hint (`hint=MetricsReader(...)` or `LocatedMetricsReader`, slurmctld 25.11+), each poll
reads slurmctld's node-state counts instead of probing slurmrestd: a changed fingerprint lists now, an
unchanged one lists nothing until `hint_floor_s` after the last full list (or 304), when the usual probe
runs. A drain that leaves every count as it was (one drain plus one undrain) therefore reaches the cache
within `hint_floor_s` plus one poll, unless it falls in a burst of moving counts: a burst ends with one more
list once the counts have been still for two reads (a drain and an undrain between two reads at the end
of a latency run's 50 drains waited for the floor, 30 s, before), and a list that brings a drain, a health
change or a new reason (not one the syncer wrote itself) counts as a move: in a steady stream drains and
undrains cancel out while the counts stand still, so the trailing lists go on until one brings nothing of
the kind (it once fired mid-stream, and the stream's last two drains waited 10 s for the next round's own
writes). A hint that fails (absent, slow, garbage) is logged once, counted, and the cache polls as without
it, trying the hint again after `hint_floor_s`.

The counts are read every `hint_interval_s` (0.25 s: 12 KB from slurmctld, no list), not every poll
interval: the wait for that read is part of every drain's way to Kubernetes, and slurmrestd is untouched.
While the hint keeps saying "changed" (a burst of drains or failures), lists follow each other under
`hint_duty` instead of `max_duty` (default 1.0: back to back), and the hint is read again as soon as
another list is allowed: the budget is spent while things change. slurmctld answers a list from the
moment it starts, so a drain landing just after is not in it; at duty 1.0 the counts are therefore also
read every `hint_interval_s` while a list runs, and a count that moved starts the next list beside it (up to
`lists_in_flight` at a time, answers applied in the order the lists started) instead of after the one in
flight. Those lists start a list's time over `lists_in_flight` apart (`list_spacing`), not at the first
moved count: two started a count read apart run as a pair and leave nearly a whole list with none
starting, and a drain landing then waits for the pair to end before a list can carry it. Spaced, a drain
waits at most half a list (two in flight) for the list that carries it, and slurmrestd lists no more.

Counts moved while the syncer's own drains and undrains are in flight at slurmrestd (a storm of cordons)
were most likely moved by them, and a list then only slows their fresh reads and writes: the list waits
until those calls have ended, at most `own_work_wait_s` (2 s) at a time.

A slurmctld reload (`scontrol reconfigure`, a restart) forgets what was written over REST and moves no count:
slurmctld's start marker (syncer/slurm/reload.py) tells it, read while the hint works every
`reload_interval_s` (0.5 s, by a task beside the polls) or, without it, from slurmrestd before a list a probe
asked for and a second after each list. A reload lists at once and, once a list asked for after it is applied,
calls the `subscribe_reloads()` callbacks; the client chooses its API version again before its next request
(an upgrade restarts slurmctld). The first list waits (at most 5 s) for a set marker, so a syncer started as
slurmctld reloads lists once, not twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import structlog

from syncer.model.slurm import SlurmNode
from syncer.runtime.tasks import cancel_and_wait
from syncer.slurm.client import NodeListing, SlurmClient
from syncer.slurm.errors import SlurmApiError, SlurmError
from syncer.slurm.metrics_hint import Fingerprint, HintReader, SlurmMetricsError
from syncer.slurm.polled import Change, Polled
from syncer.slurm.reload import ReloadWatch

log = structlog.get_logger("syncer.slurm.cache")
Strategy = Literal["conditional", "full"]
# Slurm's own fields: a change names those (the derived `reason_message` moves with `reason`)
NODE_FIELDS: tuple[str, ...] = tuple(f for f in SlurmNode.__struct_fields__ if f != "reason_message")


class NodeChange(Change[str, SlurmNode]):
    @property
    def name(self) -> str:
        return self.key


# What jobs move on a node every few seconds; the hint's counts leave them out (metrics_hint.JOB_DRIVEN).
JOB_DRIVEN_FLAGS = frozenset({"IDLE", "ALLOCATED", "MIXED", "COMPLETING", "PLANNED"})


def moves_counts(change: NodeChange) -> bool:
    """A change of the kind slurmctld's counts follow (drain, health, power: not jobs), or of a reason."""
    before, after = change.before, change.after
    if before is None or after is None:
        return True
    return before.reason != after.reason or before.state - JOB_DRIVEN_FLAGS != after.state - JOB_DRIVEN_FLAGS


def diff(old: dict[str, SlurmNode], new: dict[str, SlurmNode]) -> list[NodeChange]:
    changes = [NodeChange(n, "removed", old[n], None) for n in old.keys() - new.keys()]
    for name, node in new.items():
        before = old.get(name)
        if before is None:
            changes.append(NodeChange(name, "added", None, node))
        elif before != node:
            fields = tuple(f for f in NODE_FIELDS if getattr(before, f) != getattr(node, f))
            changes.append(NodeChange(name, "changed", before, node, fields))
    return changes


READ_PATHS = ("probe", "list", "metrics", "reload")


@dataclass
class CacheStats:
    probes: int = 0  # conditional reads (update_time) sent
    not_modified: int = 0  # ... answered "nothing changed"
    full_fetches: int = 0  # node lists applied (a probe's whole answer included)
    errors: int = 0  # polls that failed
    last_full_seconds: float = 0.0  # how long the last applied list took
    last_snapshot_bytes: int = 0  # its size
    changed_as_500: int = 0  # probes answered "changed" with HTTP 500 (slurmrestd 24.11 .. 26.05.2)
    changed_as_200: int = 0  # probes answered "changed" with the whole list (26.05.3+)
    reconnects: int = 0
    stale_periods: int = 0  # times the gap between two good answers outgrew the staleness bound
    rejected_listings: int = 0  # full lists not applied: they listed no node where some were known
    older_lists: int = 0  # full lists not applied: asked for before the one already applied
    # what each read path cost: "probe" (update_time), "list" (full list), "metrics" (the hint), "reload"
    # (slurmctld's start marker: /metrics/scheduler beside the hint, slurmrestd's /diag before a list)
    reads: dict[str, int] = field(default_factory=lambda: dict.fromkeys(READ_PATHS, 0))
    read_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(READ_PATHS, 0))
    hint_changed: int = 0  # hint reads whose fingerprint differed from the last listed one
    hint_unchanged: int = 0  # hint reads that let the cache skip slurmrestd
    hint_floor: int = 0  # polls where the floor was due and the usual probe ran
    hint_trailing: int = 0  # lists once the counts stopped moving after a burst
    hint_news: int = 0  # lists that brought a drain, health change or reason the syncer did not write
    hint_errors: int = 0  # failed hint reads (each falls back to the probe)
    hint_failing: bool = False
    early_lists: int = 0  # lists started while another was in flight (the counts moved meanwhile)
    own_work_waits: int = 0  # hinted lists that waited for the syncer's own node calls to end first
    reloads: int = 0  # slurmctld reloads seen (reconfigure, restart, failover; midnight's statistics reset)
    settle_waits: int = 0  # polls the first list waited for a new slurmctld's start marker
    reload_errors: int = 0  # start-marker reads that failed (nothing known: read again next time)

    @property
    def probe_answers(self) -> str:
        """How this server says "changed", as observed: "500", "200", "both" or "" (not seen yet)."""
        seen = [kind for kind, count in (("500", self.changed_as_500), ("200", self.changed_as_200)) if count]
        return "both" if len(seen) == 2 else (seen[0] if seen else "")


SECOND_AFTER_LIST_S = 1.1  # node timestamps are whole seconds
TRAILING_READS = 2  # a burst of moving counts ends with one more list this many quiet reads later
MAX_DUTY = 0.25  # without the hint: slurmrestd lists for us at most this share of the time
POLLER_LISTS_PER_MINUTE = 2.0  # the usual full poller: a whole list every 30 s


def busiest_lists_per_minute(list_s: float, poll_interval_s: float, max_duty: float = MAX_DUTY) -> float:
    """Full lists a minute without the hint when something changes at every poll (job starts and ends on
    a busy cluster): one per poll, or fewer where the duty limit spaces lists that take `list_s` each."""
    return 60.0 / max(poll_interval_s, list_s / max_duty)


class NodeCache(Polled[NodeChange]):
    def __init__(
        self,
        client: SlurmClient,
        *,
        poll_interval_s: float = 1.0,
        probe_interval_s: float | None = None,
        strategy: Strategy = "conditional",
        max_duty: float = MAX_DUTY,
        stale_after_s: float | None = None,
        hint: HintReader | None = None,
        hint_floor_s: float = 30.0,
        hint_duty: float = 1.0,
        lists_in_flight: int = 2,
        hint_interval_s: float = 0.25,
        hint_trailing_s: float | None = None,
        own_work_wait_s: float = 2.0,
        reload_interval_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for label, duty in (("max duty", max_duty), ("hint duty", hint_duty)):
            if not 0 < duty <= 1:
                raise ValueError(f"{label} must be in (0, 1], got {duty}")
        if lists_in_flight < 1:
            raise ValueError(f"lists in flight must be at least 1, got {lists_in_flight}")
        super().__init__(poll_interval_s=poll_interval_s, stale_after_s=stale_after_s, clock=clock)
        self._client = client
        self.probe_interval_s = poll_interval_s if probe_interval_s is None else probe_interval_s
        self.strategy: Strategy = strategy
        self.max_duty = max_duty
        self.nodes: dict[str, SlurmNode] = {}
        self.last_update = 0
        self.stats = CacheStats()
        self._next_full_at = 0.0
        self._conditional_refused = False  # the server rejected update_time: full lists only
        self._changed_is_list = False  # the last probe that said "changed" said it with the whole list
        self._last_reconnect = clock()
        self._wake = asyncio.Event()
        self._changed_pending = False
        self.hint = hint
        self.hint_floor_s = hint_floor_s
        self.hint_duty = hint_duty
        self.lists_in_flight = lists_in_flight
        self.hint_interval_s = hint_interval_s
        trailing = TRAILING_READS * hint_interval_s
        self.hint_trailing_s = trailing if hint_trailing_s is None else hint_trailing_s
        self.own_work_wait_s = own_work_wait_s
        self._own_work_since: float | None = None  # a hinted list has waited for our node calls since
        self._hint_hot = False  # the last hint read said "changed": list again as soon as allowed
        self._confirmed_at = 0.0  # last full list or 304: the floor counts from here
        self._hint_seen: Fingerprint | None = None  # read before the list now pending
        self._hint_listed: Fingerprint | None = None  # read before the last full list
        self._hint_retry_at = 0.0
        self.listed_at = 0.0  # time.monotonic() the applied list was asked for: it shows every write before
        self._hint_body = ""  # slurmctld's last metrics answer, and when it was read
        self._hint_body_at = -math.inf
        self._hot_at: float | None = None  # the counts last moved, in a burst not yet closed by a list
        self._trailing = False  # the list now owed closes a burst
        self.reload_watch = ReloadWatch(client, hint)
        self.reload_interval_s = reload_interval_s
        self._reload_seen_at: float | None = None  # time.monotonic() a reload was seen; not yet listed
        self._reload_subscribers: list[Callable[[], None]] = []
        self._reload_owed = True  # read the marker before the next list (no hint): a probe said "changed"
        # read it at the next poll: the last read (or poll, or hint read) failed, or found a new slurmctld's 0
        self._reload_retry = False
        # without the hint: read it once more a second after a list (a reload in the second the list's
        # timestamp names may not move that timestamp, and a probe would then say nothing changed)
        self._reload_check_at: float | None = None
        self._reload_error = ""
        self._list_asked = False  # a node list has been asked for: marker reads before it only record
        self._settle_since: float | None = None  # the first list began waiting for a set marker
        client.subscribe_versions(self._version_changed)

    # --- what consumers read (and age_s, stale, wait_synced, subscribe: Polled's) ---------------------------
    @property
    def cause(self) -> str:
        """Why the data may be old, in words: the last error, a poll still waiting for its answer, or, between
        polls that got no answer (a list deferred, a failed start-marker read), how old the data is."""
        if self.last_error:
            return self.last_error
        if self._polling_since is not None:
            return f"slurmrestd has not answered for {self._clock() - self._polling_since:.0f} s"
        if self.synced and self.stale:
            return f"no answer from slurmrestd for {self.age_s:.0f} s"
        return ""

    @property
    def reloading(self) -> bool:
        """A slurmctld reload has been seen and the list that shows it is not applied yet."""
        return self._reload_seen_at is not None

    def subscribe_reloads(self, callback: Callable[[], None]) -> None:
        """`callback()` once slurmctld has reloaded (reconfigure, restart, failover) and a node list asked for
        after it has been applied: the new slurmctld forgot what was written to it over REST, so each owner
        of Slurm-side state (node features, topology, partitions) looks at every key it owns again."""
        self._reload_subscribers.append(callback)

    def nudge(self) -> None:
        """Probe now instead of at the next interval."""
        self._wake.set()

    def _version_changed(self) -> None:
        """Another API version (slurmrestd replaced): how it answers "changed since?" is learnt anew."""
        self._conditional_refused = self._changed_is_list = False

    # --- polling ------------------------------------------------------------------------
    def _full_allowed(self) -> bool:
        return self._clock() >= self._next_full_at

    def _apply(self, listing: NodeListing, fingerprint: Fingerprint | None) -> None:
        """`fingerprint`: the hint read before this list started (what it is known to reflect)."""
        if not listing.nodes and self.nodes:
            # slurmctld restarting can answer an empty list; applying it would "remove" every node
            self.stats.rejected_listings += 1
            raise SlurmError(
                f"slurmrestd listed no nodes where {len(self.nodes)} were known: not applied "
                "(slurmctld restarting?)",
                endpoint="nodes",
            )
        if listing.started < self.listed_at:
            # asked for before the list already applied (a refresh beside the poll): older news
            self.stats.older_lists += 1
            return
        now = self._clock()
        # Keep slurmrestd's share of wall time serving us under max_duty, whatever the cluster size
        # (hint_duty while the hint says things are changing).
        # the burst's trailing list is part of the burst: it must not hold the next one back by max_duty
        duty = self.hint_duty if self._hint_hot or self._trailing else self.max_duty
        self._trailing = False
        self._next_full_at = now + listing.seconds * (1 / duty - 1)
        self.stats.full_fetches += 1
        self._confirmed_at = now
        self._hint_listed = fingerprint
        self.stats.last_full_seconds = listing.seconds
        self.stats.last_snapshot_bytes = listing.body_bytes
        new = {node.name: node for node in listing.nodes}
        changes = diff(self.nodes, new)
        if self.hint is not None and self.synced and self._brings_news(changes):
            # news the counts may not have announced: drains and undrains can go on cancelling out while
            # this list ran, so the burst is only over once a list after it brings nothing of the kind
            self._hot_at = now
            self.stats.hint_news += 1
        self.nodes, self.last_update = new, listing.last_update
        self.listed_at = listing.started  # subscribers compare their writes with it
        # a reload seen while this list ran may not be in it: another list is owed at once
        owed = self._reload_seen_at is not None and listing.started < self._reload_seen_at
        self.synced, self.last_success, self._changed_pending = True, now, owed
        if owed:
            self._next_full_at = now
        self._reload_check_at = now + SECOND_AFTER_LIST_S
        self._first_answer.set()
        self._own_work_since = None
        if changes:
            for callback in self._subscribers:
                try:
                    callback(changes)
                except Exception:  # a subscriber's bug must not stop the cache
                    log.exception("slurm_cache_subscriber_failed")
        if self._reload_seen_at is not None and listing.started >= self._reload_seen_at:
            self._reload_seen_at = None  # this list was asked for after the reload: it shows what it forgot
            for reloaded in self._reload_subscribers:
                try:
                    reloaded()
                except Exception:
                    log.exception("slurm_cache_reload_subscriber_failed")

    def _brings_news(self, changes: list[NodeChange]) -> bool:
        """A change of the kind the counts follow that the syncer did not write itself since the list before
        (its own drains are known to it: a run of cordons would otherwise keep trailing lists coming, and
        its reads and writes at slurmrestd wait behind lists)."""
        return any(moves_counts(c) and not self._client.wrote_since(c.name, self.listed_at) for c in changes)

    async def refresh(self) -> None:
        """A full list now, outside the duty limit: for rare decisions (which node to scale in) that
        must not rest on data a poll interval old."""
        await self._list()
        self._tell_fresh()  # it may end a stale period as a poll would

    def _conditional(self) -> bool:
        version = self._client.version
        return (
            self.strategy == "conditional"
            and version is not None
            and version.conditional_nodes
            and not self._conditional_refused
        )

    def _quick_probes(self) -> bool:
        """Probe every `probe_interval_s`, not every poll: no hint to read, and this slurmrestd says "changed"
        without the list (HTTP 500: 24.11, 26.05.0-2), so a probe costs slurmctld one timestamp check and
        a few hundred bytes (a 304 none); the lists it leads to stay under the duty limit. Where "changed"
        is the whole list (26.05.3+; 24.11 too when a partition changed as well), a probe is a list: every
        poll, as before, until a probe says "changed" with a 500 again."""
        return (
            self.probe_interval_s < self.poll_interval_s
            and not self._hint_usable()
            and self._conditional()
            and not self._changed_is_list
        )

    def _nearly_stale(self) -> bool:
        """Waiting any longer for a list could let the data go stale."""
        return self.age_s >= 0.8 * self.stale_after_s

    def _full_due(self) -> bool:
        """The duty limit allows a full list, or waiting for it would let the data go stale."""
        return self._full_allowed() or self._nearly_stale()

    async def _read_hint(self) -> Fingerprint | None:
        """slurmctld's node-state counts, or None (logged once, counted) when they cannot be had."""
        assert self.hint is not None
        self.stats.reads["metrics"] += 1
        try:
            reading = await self.hint.read()
        except SlurmMetricsError as exc:
            self.stats.hint_errors += 1
            self._hint_seen = None
            self._hint_hot = False
            self._hint_retry_at = self._clock() + self.hint_floor_s
            if not self.stats.hint_failing:
                log.warning(
                    "slurm_metrics_hint_failed", error=str(exc), fallback="update_time probes",
                    cost="every job start or end then costs slurmrestd a full node list",
                )  # fmt: skip
            self.stats.hint_failing = True
            self._reload_retry = True  # slurmctld may be restarting: read its marker from slurmrestd
            return None
        self.stats.read_bytes["metrics"] += reading.body_bytes
        if self.stats.hint_failing:
            log.info("slurm_metrics_hint_recovered")
            self.stats.hint_failing = False
        self._hint_seen = reading.fingerprint
        self._hint_body, self._hint_body_at = reading.text, self._clock()
        return reading.fingerprint

    def hint_body(self, max_age_s: float) -> str | None:
        """slurmctld's metrics as the hint read them within `max_age_s`, while the hint works (the exporter
        takes its job counts from them); None otherwise."""
        if self.stats.hint_failing or self._clock() - self._hint_body_at > max_age_s:
            return None
        return self._hint_body or None

    def _hint_usable(self) -> bool:
        return self.hint is not None and self._clock() >= self._hint_retry_at

    async def _hinted(self) -> bool:
        """Poll by the hint; True when that settled this poll (nothing to ask slurmrestd now)."""
        if not self._hint_usable():
            return False
        fingerprint = await self._read_hint()
        if fingerprint is None:
            return False
        self._hint_hot = fingerprint != self._hint_listed
        now = self._clock()
        if self._hint_hot:
            self.stats.hint_changed += 1
            self._changed_pending = True
            self._hot_at = now
            return False
        if self._hot_at is not None and now - self._hot_at >= self.hint_trailing_s:
            # the counts stopped moving: one more list, for what cancelled out in the burst's last moments
            # (a drain and an undrain between two reads, after the list that carried the counts began)
            self._hot_at = None
            self._trailing = True
            self.stats.hint_trailing += 1
            self._changed_pending = True
            return False
        if self._clock() - self._confirmed_at >= self.hint_floor_s:
            self.stats.hint_floor += 1
            return False
        self.stats.hint_unchanged += 1
        self.last_success = self._clock()  # slurmctld answered and no health count moved
        return True

    def _reload_beside_hint(self) -> bool:
        """The start marker is read from slurmctld's metrics, every `reload_interval_s`, while the hint
        works; else from slurmrestd's /diag, before a list a probe asked for and a second after each list (a
        reload moves the node timestamp, and the list costs far more than the marker)."""
        return self._hint_usable() and not self.stats.hint_failing

    def _second_after_list(self) -> bool:
        due = self._reload_check_at is not None and self._clock() >= self._reload_check_at
        if due:
            self._reload_check_at = None
        return due

    async def _watch_reload(self, *, metrics: bool) -> None:
        """Reads slurmctld's start marker: a moved one owes a list now and, once a list asked for after it is
        applied, tells the reload subscribers. A failed read is counted and, like a 0 (a slurmctld starting,
        which tells its start time a moment later), read again at the next poll."""
        self.stats.reads["reload"] += 1
        try:
            marker, size, stats_reads = await self.reload_watch.read(metrics=metrics)
        except SlurmError as exc:
            self.stats.reload_errors += 1
            self._reload_owed = self._reload_retry = True
            if str(exc) != self._reload_error:
                log.warning("slurmctld_start_unread", error=str(exc), then="read again at the next poll")
            self._reload_error = str(exc)
            return
        self._reload_owed, self._reload_retry, self._reload_error = False, marker == 0, ""
        self.stats.read_bytes["reload"] += size
        if self.reload_watch.moved(marker, listed=self._list_asked, stats_reads=stats_reads):
            self.stats.reloads += 1
            # an upgrade restarts slurmctld too: the API version is chosen again before the next request
            self._client.version_may_change("slurmctld started anew")
            self._reload_seen_at = time.monotonic()  # the clock of listing.started
            self._changed_pending = True
            self._next_full_at = min(self._next_full_at, self._clock())  # a reload is rare: list at once
            log.warning(
                "slurmctld_reloaded", started=marker,
                then="a full list, then every key the syncer owns in Slurm is looked at again",
            )  # fmt: skip

    async def poll_once(self) -> None:
        """One probe (and a full list if something changed and the duty limit allows)."""
        if self._client.version is None:
            await self._client.start()  # never negotiated yet (slurmrestd was away at start)
        if (
            not self._reload_beside_hint()
            and self.synced
            and (self._reload_retry or self._second_after_list())
        ):
            await self._watch_reload(metrics=False)  # a reload may hide behind the last read or list
        if not self.synced and self.hint is not None:
            await self._read_hint()  # the first list then carries a fingerprint to compare with
        elif self.synced and not self._changed_pending and await self._hinted():
            return
        elif self._changed_pending and self._hint_usable():
            # a list owed (waiting for the duty limit or our own calls) carries the counts read just before
            # it starts: counts that moved meanwhile are in that list, and must not start an early one
            await self._read_hint()
        conditional = self._conditional()
        if self.synced and conditional and not self._changed_pending:
            self.stats.probes += 1
            self.stats.reads["probe"] += 1
            try:
                listing = await self._client.list_nodes(update_time=self.last_update)
            except SlurmApiError as exc:
                if exc.has_error("Unable to query partitions"):
                    self.stats.changed_as_500 += 1  # 24.11's (and 26.05.0-2's) answer to "yes, changed"
                    self._changed_is_list = False
                    self._changed_pending = self._reload_owed = True
                    self.last_success = self._clock()  # slurmrestd answered: our data is fresh until now
                elif exc.has_error("Parsing of") or exc.has_error("timestamp"):
                    self._conditional_refused = True
                    self._changed_pending = True
                    log.warning("slurm_conditional_probe_refused", error=str(exc), fallback="full lists")
                else:
                    raise
            else:
                if listing is None:
                    self.stats.not_modified += 1
                    self.last_success = self._confirmed_at = self._clock()
                    return
                self.stats.changed_as_200 += 1  # 26.05.3+: the answer is the whole list
                self._changed_is_list = True
                self.stats.read_bytes["probe"] += listing.body_bytes
                self._apply(listing, self._hint_seen)
                if not self._reload_beside_hint():
                    # after: this list may show a reload only in part, and a moved marker owes another
                    await self._watch_reload(metrics=False)
                return
        elif self.synced and not conditional:
            # no cheap probe here: only a full list refreshes freshness
            self._changed_pending = self._reload_owed = True
        if not self.synced or (self._changed_pending and self._full_due()):
            if self._waits_for_own_work():
                return
            # before the first list: read until the marker is set (a 0 read is read again)
            owed = self._reload_owed or (self._reload_retry and not self.synced)
            if owed and not self._reload_beside_hint():
                await self._watch_reload(metrics=False)
            if not self.synced and self._settling():
                return
            if self.synced and self._hint_hot and self.hint_duty >= 1.0 and self.lists_in_flight > 1:
                await self._lists_following_hint()
            else:
                await self._list()

    def _settling(self) -> bool:
        """The first list waits for slurmctld's start marker (ReloadWatch.settling): a syncer started just
        after a reconfigure or restart lists once, not twice (a read that fails there, slurmctld not
        answering yet, is waited on too: the 0 follows it)."""
        now = self._clock()
        if self._settle_since is None:
            self._settle_since = now
        settling = self.reload_watch.settling(now - self._settle_since)
        if settling:
            self.stats.settle_waits += 1
        return settling

    def _waits_for_own_work(self) -> bool:
        """A list the counts asked for waits while the syncer's own node calls run (they most likely moved
        the counts), at most `own_work_wait_s` since it first waited; never past the staleness margin."""
        if not (self.synced and self._hint_hot) or self._nearly_stale() or self._reload_seen_at is not None:
            return False  # a reload's list never waits: it is what the syncer's next writes depend on
        if not self._client.acting_on_nodes(self.hint_interval_s):
            self._own_work_since = None
            return False
        now = self._clock()
        if self._own_work_since is None:
            self._own_work_since = now
            self.stats.own_work_waits += 1
        return now - self._own_work_since < self.own_work_wait_s

    def _poll_delay(self) -> float:
        """Seconds to the next poll: the counts' interval while they can be read, else the poll interval
        (sooner while a list is owed and the duty limit allows one)."""
        usable = self._hint_usable()
        delay = min(self.poll_interval_s, self.hint_interval_s) if usable else self.poll_interval_s
        if not usable and self._quick_probes():
            delay = min(delay, self.probe_interval_s)  # 24.11: a power-up seen in 0.25 s, not 1 s
        if not self.synced and self._settle_since is not None:
            delay = min(delay, self.reload_interval_s)  # the first list waits for the marker: look again soon
        if (self._changed_pending or self._hint_hot) and self._own_work_since is None:
            delay = min(delay, max(0.0, self._next_full_at - self._clock()))
        return delay

    async def _fetch(self) -> NodeListing:
        self._list_asked = True
        self.stats.reads["list"] += 1
        listing = await self._client.list_all_nodes()
        self.stats.read_bytes["list"] += listing.body_bytes
        return listing

    async def _list(self) -> None:
        fingerprint = self._hint_seen
        self._apply(await self._fetch(), fingerprint)

    async def _lists_following_hint(self) -> None:
        """Lists while the counts move: re-read them every `hint_interval_s` while a list runs (and as soon
        as one ends) and start another when they moved since the newest list started, up to
        `lists_in_flight`, each at least `list_spacing` after the one before; answers are applied in the
        order the lists started."""
        loop = asyncio.get_running_loop()
        flights: deque[tuple[asyncio.Task[NodeListing], Fingerprint | None, float]] = deque()
        flights.append((asyncio.create_task(self._fetch()), self._hint_seen, loop.time()))
        recheck_at = loop.time() + self.hint_interval_s
        try:
            while flights:
                oldest, fingerprint, _ = flights[0]
                timeout: float | None = None  # every slot taken: wait for the oldest list
                # an early list yields to the syncer's own work on nodes: the counts moved because of it
                # (a storm of cordons), and its fresh reads and bulk writes wait behind every list
                if (
                    len(flights) < self.lists_in_flight
                    and not self.stats.hint_failing
                    and not self._client.acting_on_nodes(self.hint_interval_s)
                ):
                    due = max(recheck_at, flights[-1][2] + self.list_spacing())
                    if loop.time() >= due:
                        recheck_at = loop.time() + self.hint_interval_s
                        seen = await self._read_hint()
                        if seen is not None and seen != flights[-1][1]:
                            self.stats.early_lists += 1
                            flights.append((asyncio.create_task(self._fetch()), seen, loop.time()))
                            continue
                        due = recheck_at
                    timeout = max(0.0, due - loop.time())
                await asyncio.wait({oldest}, timeout=timeout)
                if oldest.done():
                    flights.popleft()
                    self._apply(oldest.result(), fingerprint)
                    recheck_at = loop.time()  # a slot is free: look at the counts again now
        finally:  # a failed list or a cancelled cache leaves no list running behind it
            await cancel_and_wait(task for task, _, _ in flights)

    def list_spacing(self) -> float:
        """Seconds between the starts of two lists that follow the counts: a list's time shared among the
        slots. Started at once instead, two lists run as a pair and leave a gap of nearly a whole list with
        none starting, and a drain landing in that gap waits for the pair to end before a list can carry
        it (measured at 10,000 nodes: up to two lists and more); evenly spaced, no drain waits for a list to
        start longer than this, and slurmrestd lists no more often."""
        return max(0.0, self.stats.last_full_seconds) / max(1, self.lists_in_flight)

    async def _reconnect_if_silent(self) -> None:
        """No good answer for longer than the staleness bound: start over with a new connection."""
        now = self._clock()
        since = max(self.last_success, self._last_reconnect)
        if now - since <= self.stale_after_s:
            return
        self._last_reconnect = now
        self.stats.reconnects += 1
        log.warning(
            "slurm_cache_reconnecting", silent_s=round(now - self.last_success, 1), error=self.last_error
        )
        await self._client.reconnect()

    async def _watch_reloads_beside_hint(self) -> None:
        """While the hint works, slurmctld's start every `reload_interval_s`, beside the polls: a poll can
        spend seconds on lists while counts move (a reconfigure makes a running slurmd's node `unknown` for
        a moment), and a reload's 0 lasts ~0.6 s. A reload seen wakes the poll."""
        while True:
            try:
                if self._reload_beside_hint():
                    await self._watch_reload(metrics=True)
                    if self._reload_seen_at is not None:
                        self.nudge()
            except Exception:  # a bug here must not end the watch silently
                log.exception("slurmctld_start_watch_failed")
            await asyncio.sleep(self.reload_interval_s)

    async def run(self) -> None:
        """Poll until cancelled; every failure is logged, counted, kept with its cause and retried."""
        watch = asyncio.create_task(self._watch_reloads_beside_hint(), name="slurm-cache-reload-watch")
        try:
            await self._poll_forever()
        finally:
            await cancel_and_wait([watch])

    async def _poll_forever(self) -> None:
        while True:
            self._wake.clear()  # before polling, so a nudge that lands during the poll is kept
            previous_success = self.last_success
            if await self._guarded(self._reconnect_and_poll):
                # a poll that hangs until slurmctld is back (26.05's slurmrestd waits 10 s for it) fails
                # nothing, yet the data was older than the bound meanwhile: that counts too
                gap = self.last_success - previous_success
                if previous_success and gap > self.stale_after_s:
                    self.stats.stale_periods += 1
            delay = self._poll_delay()
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that lands
            # as a nudge wakes it, and the cache would then never stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    async def _reconnect_and_poll(self) -> None:
        await self._reconnect_if_silent()
        await self.poll_once()

    def _failed(self, error: str, exc_info: bool = False) -> None:
        self.stats.errors += 1
        self._reload_retry = True  # slurmctld may be restarting: its marker first, before the next probe
        if error != self.last_error:
            log.warning("slurm_poll_failed", error=error, stale=self.stale, exc_info=exc_info)
        self.last_error = error
