"""The Slurm node cache: cheap "changed since?" probes, full lists only on change, diffs to subscribers.

    cache = NodeCache(client, poll_interval_s=1.0)
    cache.subscribe(lambda changes: ...)    # list[NodeChange] after each new snapshot
    task = asyncio.create_task(cache.run())
    cache.nodes["n1"], cache.synced, cache.stale, cache.age_s
    cache.nudge()                           # probe now (after the syncer wrote to Slurm)

Fail closed: `stale` is True until the first full list and whenever the last successful poll is
older than `stale_after_s`; consumers must not undrain, delete or scale in while it is True.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import structlog

from syncer.model.slurm import SlurmNode
from syncer.slurm.client import NodeListing, SlurmClient
from syncer.slurm.errors import SlurmApiError, SlurmError

log = structlog.get_logger("syncer.slurm.cache")
Strategy = Literal["conditional", "full"]
NODE_FIELDS: tuple[str, ...] = SlurmNode.__struct_fields__


@dataclass(frozen=True)
class NodeChange:
    name: str
    kind: Literal["added", "removed", "changed"]
    before: SlurmNode | None
    after: SlurmNode | None
    fields: tuple[str, ...] = ()


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


@dataclass
class CacheStats:
    probes: int = 0
    not_modified: int = 0
    full_fetches: int = 0
    errors: int = 0
    last_full_seconds: float = 0.0
    last_snapshot_bytes: int = 0


class NodeCache:
    def __init__(
        self,
        client: SlurmClient,
        *,
        poll_interval_s: float = 1.0,
        strategy: Strategy = "conditional",
        max_duty: float = 0.25,
        stale_after_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < max_duty <= 1:
            raise ValueError(f"max duty must be in (0, 1], got {max_duty}")
        self._client = client
        self.poll_interval_s = poll_interval_s
        self.strategy: Strategy = strategy
        self.max_duty = max_duty
        self.stale_after_s = stale_after_s if stale_after_s is not None else max(10.0, 5 * poll_interval_s)
        self._clock = clock
        self.nodes: dict[str, SlurmNode] = {}
        self.last_update = 0
        self.synced = False
        self.last_success = 0.0
        self.last_error: str = ""
        self.stats = CacheStats()
        self._next_full_at = 0.0
        self._subscribers: list[Callable[[list[NodeChange]], None]] = []
        self._wake = asyncio.Event()
        self._changed_pending = False

    # --- what consumers read ------------------------------------------------------------
    @property
    def age_s(self) -> float:
        return self._clock() - self.last_success if self.synced else float("inf")

    @property
    def stale(self) -> bool:
        return not self.synced or self.age_s > self.stale_after_s

    def subscribe(self, callback: Callable[[list[NodeChange]], None]) -> None:
        self._subscribers.append(callback)

    def nudge(self) -> None:
        """Probe now instead of at the next interval."""
        self._wake.set()

    # --- polling ------------------------------------------------------------------------
    def _full_allowed(self) -> bool:
        return self._clock() >= self._next_full_at

    def _apply(self, listing: NodeListing) -> None:
        now = self._clock()
        # Keep slurmrestd's share of wall time serving us under max_duty, whatever the cluster size.
        self._next_full_at = now + listing.seconds * (1 / self.max_duty - 1)
        self.stats.full_fetches += 1
        self.stats.last_full_seconds = listing.seconds
        self.stats.last_snapshot_bytes = listing.body_bytes
        new = {node.name: node for node in listing.nodes}
        changes = diff(self.nodes, new)
        self.nodes, self.last_update = new, listing.last_update
        self.synced, self.last_success, self._changed_pending = True, now, False
        if changes:
            for callback in self._subscribers:
                try:
                    callback(changes)
                except Exception:  # a subscriber's bug must not stop the cache
                    log.exception("slurm_cache_subscriber_failed")

    async def refresh(self) -> None:
        """A full list now, outside the duty limit: for rare decisions (which node to scale in) that
        must not rest on data a poll interval old."""
        self._apply(await self._client.list_all_nodes())

    async def poll_once(self) -> None:
        """One probe (and a full list if something changed and the duty limit allows)."""
        version = self._client.version
        conditional = self.strategy == "conditional" and version is not None and version.conditional_nodes
        if self.synced and conditional and not self._changed_pending:
            self.stats.probes += 1
            try:
                listing = await self._client.list_nodes(update_time=self.last_update)
            except SlurmApiError as exc:
                if not (
                    version and version.changed_means_500 and exc.has_error("Unable to query partitions")
                ):
                    raise
                listing = None
                self._changed_pending = True  # 24.11's answer to "yes, changed"
            else:
                if listing is None:
                    self.stats.not_modified += 1
                    self.last_success = self._clock()
                    return
                self._apply(listing)  # a server that answers 200 with the whole list
                return
            # slurmrestd answered "changed": fresh, the list follows when the duty allows.
            self.last_success = self._clock()
        elif self.synced and not conditional:
            self._changed_pending = True  # no cheap probe here: only a full list refreshes freshness
        if not self.synced or (self._changed_pending and self._full_allowed()):
            self._apply(await self._client.list_all_nodes())

    async def run(self) -> None:
        """Poll until cancelled; errors are logged, counted and retried, never fatal."""
        while True:
            self._wake.clear()  # before polling, so a nudge that lands during the poll is kept
            try:
                await self.poll_once()
                self.last_error = ""
            except SlurmError as exc:
                self.stats.errors += 1
                if str(exc) != self.last_error:
                    log.warning("slurm_poll_failed", error=str(exc), stale=self.stale)
                self.last_error = str(exc)
            delay = self.poll_interval_s
            if self._changed_pending:
                delay = min(delay, max(0.0, self._next_full_at - self._clock()))
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that lands
            # as a nudge wakes it, and the cache would then never stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
