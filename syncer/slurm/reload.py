"""Telling that slurmctld reloaded: a `scontrol reconfigure` or a restart starts slurmctld afresh, and the new
one has forgotten what was written to it over REST (node features and topology back to slurm.conf's), with
none of the node-state counts the metrics hint reads moved.

    watch = ReloadWatch(client, hint)
    marker, size = await watch.read(metrics=True)  # slurmctld's /metrics/scheduler; False: slurmrestd /diag
    if watch.moved(marker, listed=...):            # a new slurmctld since the last read (after a list)
        ...                                        # list; every key the syncer owns in Slurm looked at again
    watch.settling(waited_s)                       # the first list waits while the marker reads 0

One number tells: the time slurmctld counts its statistics from (`last_proc_req_start`), set by each new
slurmctld (a reconfigure starts one too) and read cheaply in two places: `slurm_last_proc_req_start` in
slurmctld's `/metrics/scheduler` (25.11+, no slurmrestd request) and `req_time_start` in slurmrestd's
`GET /diag` (every release). slurmctld also moves it at midnight and on `sdiag --reset`: such a reload seen
where there was none costs one node list and one reconcile of every key, and nothing else.

The marker is whole seconds: two slurmctlds started in the same second (a reconfigure within a second of the
one before) read alike. From `/diag`, the count of statistics requests slurmctld answered before (`/diag`
itself, `REQUEST_STATS_INFO` in `rpcs_by_message_type`) tells them apart: one slurmctld has counted the
watch's previous read, so the count grows from read to read; a new one starts it again at 0. The metrics page
has no such count: a start read there in the second it names is read from `/diag` until slurmctld's clock has
left that second.
"""

from __future__ import annotations

from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmDecodeError
from syncer.slurm.metrics_hint import HintReader, SlurmMetricsDecodeError, count_of, samples
from syncer.slurm.metrics_scheduler import PATH as SCHEDULER_PATH

METRIC = "slurm_last_proc_req_start"
DIAG_FIELD = "req_time_start"
STATS_RPC = "REQUEST_STATS_INFO"  # /diag's own request, counted per slurmctld in rpcs_by_message_type
NOW_METRIC = "slurm_sched_stats_timestamp"  # slurmctld's clock when it answered /metrics/scheduler
SETTLE_S = 5.0  # the first list waits this long at most for a new slurmctld's start (0.6 s measured idle)


def started_from_metrics(text: str) -> int:
    """`slurm_last_proc_req_start` in a `/metrics/scheduler` body (0: a slurmctld just started has not set
    it yet); SlurmMetricsDecodeError when the page has none."""
    found = samples(text, lambda line: line.startswith(METRIC), what=METRIC, endpoint=SCHEDULER_PATH)
    for sample in found:
        if sample.name == METRIC:
            return count_of(sample, "time", SCHEDULER_PATH)
    raise SlurmMetricsDecodeError(f"no {METRIC} in the answer", endpoint=SCHEDULER_PATH)


def now_from_metrics(text: str) -> int | None:
    """slurmctld's clock in a `/metrics/scheduler` body (when it answered); None when the page has none."""
    found = samples(text, lambda line: line.startswith(NOW_METRIC), what=NOW_METRIC, endpoint=SCHEDULER_PATH)
    return next((int(s.value) for s in found if s.name == NOW_METRIC), None)


def now_from_diag(statistics: dict[str, object]) -> int | None:
    """slurmctld's clock in `/diag` (`req_time`: when it answered); None when absent."""
    value = statistics.get("req_time")
    if isinstance(value, dict):
        value = value.get("number")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def started_from_diag(statistics: dict[str, object]) -> int:
    """`req_time_start` of slurmrestd's `/diag` statistics (a number, or `{"set", "number"}`); 0 when not
    set; SlurmDecodeError when absent or not a time."""
    value = statistics.get(DIAG_FIELD)
    if isinstance(value, dict):
        value = value.get("number", 0) if value.get("set", True) and not value.get("infinite") else 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SlurmDecodeError(f"/diag has no {DIAG_FIELD} time: {value!r}"[:160], endpoint="diag")
    return value


def stats_reads_from_diag(statistics: dict[str, object]) -> int | None:
    """How many statistics requests (`/diag`, `sdiag`) slurmctld answered before this one (0 where none is
    listed yet: a type appears at its first count); None when `/diag` has no counts per request type."""
    rpcs = statistics.get("rpcs_by_message_type")
    if not isinstance(rpcs, list):
        return None
    for rpc in rpcs:
        if isinstance(rpc, dict) and rpc.get("message_type") == STATS_RPC:
            count = rpc.get("count")
            return count if isinstance(count, int) and not isinstance(count, bool) else None
    return 0


class ReloadWatch:
    """Reads slurmctld's start marker and remembers the last one seen."""

    def __init__(self, client: SlurmClient, hint: HintReader | None) -> None:
        self._client = client
        self._hint = hint
        self.started = 0  # the marker last read: slurmctld's statistics start (epoch s), 0 before it is set
        self._stats_reads: int | None = None  # statistics requests counted at the last read (/diag only)
        # the last read fell in the second its slurmctld started: another started later in that second would
        # read alike, so the next read is /diag's (with the count) even where the metrics are read
        self._same_second = False
        self._seen = False

    async def read(self, *, metrics: bool) -> tuple[int, int, int | None]:
        """The marker, the bytes read for it and (from `/diag`) the statistics requests counted before it,
        from slurmctld's metrics (`metrics`, with a hint to read them with) or from slurmrestd; from
        slurmrestd too while the marker is slurmctld's current second (the metrics have no count)."""
        size = 0
        if metrics and self._hint is not None and not self._same_second:
            text = await self._hint.read_page(SCHEDULER_PATH)
            marker, now = started_from_metrics(text), now_from_metrics(text)
            if not (marker and now is not None and now <= marker):
                return marker, len(text.encode()), None
            size = len(text.encode())  # read again from /diag, with the count
        statistics, diag_size = await self._client.diag_sized()
        marker, now = started_from_diag(statistics), now_from_diag(statistics)
        self._same_second = bool(marker) and now is not None and now <= marker
        return marker, size + diag_size, stats_reads_from_diag(statistics)

    def moved(self, marker: int, *, listed: bool = True, stats_reads: int | None = None) -> bool:
        """True when `marker` (just read) tells of another slurmctld than the one read before; the first
        read, and any read before the first list was asked for (`listed` False: that list shows whichever
        slurmctld answers it), only record. A new slurmctld reads 0 until its first background pass (0.6 s
        measured), then its start: both tell, the 0 at once and the start too, since another reload within
        that 0 (two reconfigures 0.6 s apart, measured) shows only as a start after it. The second list
        costs one more list per reload; hence the first list waits for a set marker (`settling`). The same
        marker tells too when `stats_reads` (read with it from `/diag`) has not grown since the read before:
        a slurmctld started in the same second as the one read then (measured: a reconfigure 0.3-0.8 s after
        the one before read alike, and no probe said anything changed after that)."""
        first, self._seen = not self._seen, True
        previous, self.started = self.started, marker
        counted, self._stats_reads = self._stats_reads, stats_reads
        if first or not listed:
            return False
        if marker != previous:
            return True
        return stats_reads is not None and counted is not None and stats_reads <= counted

    def settling(self, waited_s: float) -> bool:
        """The first list should wait: the marker last read is a new slurmctld's 0 (a reconfigure or restart
        just before the syncer started), and its start, read after a list, could not be told from a later
        slurmctld's: a reload at the syncer's start (a whole node list more). Before the first read and
        after a failed one too (the metrics are read beside the polls; a slurmctld starting may not answer
        yet); at most `SETTLE_S`."""
        return self.started == 0 and waited_s < SETTLE_S
