"""Group commit of Slurm node updates: identical updates (same state and reason, same features, same
topology: one `NodeUpdate`) decided while one is on its way to Slurm go together in the next request, one
`POST /nodes/` for many nodes. Drains (syncer/controllers/sync) and node attributes
(syncer/controllers/attributes) share it.

The first caller's update goes out at once (no added latency when quiet); callers that arrive meanwhile
queue behind it and the caller that sent carries on with the queue until it is empty. A bulk request
that Slurm refuses part-way (it stops at the first unknown node, in hostlist order) is never reported as
done: each node gets its own outcome as read back from Slurm, the unknown ones SlurmNotFound, the ones
Slurm did not reach are sent again without them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from syncer.runtime.gate import Gate
from syncer.slurm.client import BulkUpdateError, SlurmClient
from syncer.slurm.errors import SlurmNotFound
from syncer.slurm.updates import NodeUpdate

log = structlog.get_logger("syncer.slurm")


class Superseded(Exception):
    """A queued update was not sent: its caller's `still` said it is no longer wanted."""


@dataclass
class BulkStats:
    requests: int = 0  # update requests sent (single or bulk)
    bulk_requests: int = 0  # of which `POST /nodes/` for more than one node
    nodes: int = 0  # node updates carried
    partial: int = 0  # bulk requests Slurm refused part-way
    superseded: int = 0  # queued updates dropped: no longer wanted when their request would go out


Still = Callable[[], bool]  # asked just before the request goes out: is this update still wanted?
Entry = tuple[str, asyncio.Future[bool], Still | None]  # the future: True written, False dry run


@dataclass
class _Queue:
    waiting: list[Entry] = field(default_factory=list)
    sending: bool = False


class BulkWriter:
    def __init__(self, slurm: SlurmClient, gate: Gate, *, max_batch: int = 500) -> None:
        self.slurm = slurm
        self.gate = gate  # checked before every request: nothing queued goes out after leadership is lost
        self.max_batch = max_batch  # a list of 500 names is ~5 KB: far under any request limit
        self.stats = BulkStats()
        self._queues: dict[NodeUpdate, _Queue] = {}

    async def update(
        self, name: str, update: NodeUpdate | None = None, *, state: list[str] | None = None,
        reason: str | None = None, linger_s: float = 0.0, still: Still | None = None,
    ) -> bool:  # fmt: skip
        """Applies `update` (or sets `state` and `reason`) on one node, possibly in one request with others;
        raises as `SlurmClient.update_node` would for this node alone (NotLeader if the gate is closed
        when its request would go out: the gate is checked here, once per request). False: a dry run
        (logged here). `linger_s`: how long the first
        of a batch waits for others (drains: none; updates that can wait a little: more share a request).
        `still`: asked right before the request that would carry it goes out (it may wait behind a slow one);
        False drops it with Superseded, so a drain never leaves after the uncordon that arrived meanwhile."""
        key = update or NodeUpdate(tuple(state) if state is not None else None, reason)
        queue = self._queues.setdefault(key, _Queue())
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        queue.waiting.append((name, done, still))
        if not queue.sending:
            queue.sending = True
            batch: list[Entry] = []
            try:
                # the updates decided meanwhile (at least this turn) join the first
                await asyncio.sleep(linger_s)
                while queue.waiting:
                    batch, queue.waiting = queue.waiting[: self.max_batch], queue.waiting[self.max_batch :]
                    await self._send(batch, key)
            except BaseException as exc:  # cancelled mid-send: nobody else would settle these
                error = asyncio.CancelledError() if isinstance(exc, asyncio.CancelledError) else exc
                for _, future, _ in batch + queue.waiting:
                    _settle(future, error)
                queue.waiting.clear()
                raise
            finally:
                queue.sending = False
                if self._queues.get(key) is queue and not queue.waiting:
                    del self._queues[key]
        return await done

    async def _send(self, batch: list[Entry], update: NodeUpdate) -> None:
        futures: dict[str, asyncio.Future[bool]] = {}
        stills = {name: still for name, _, still in batch}
        for name, future, still in batch:
            if future.done():  # a cancelled caller: skip
                continue
            if still is not None and not still():
                self.stats.superseded += 1
                _settle(future, Superseded(f"update of {name} no longer wanted when its turn came"))
                continue
            futures[name] = future
        names = list(futures)
        if not names:
            return
        try:
            if not self.gate.check():
                log.info("dry-run: would update slurm nodes", slurm_nodes=names, update=update.body())
                for future in futures.values():
                    _settle(future, None, written=False)
                return
            self.stats.requests += 1
            self.stats.nodes += len(names)
            if len(names) == 1:
                await self.slurm.update_node(names[0], update)
            else:
                self.stats.bulk_requests += 1
                await self.slurm.update_nodes(names, update)
        except BulkUpdateError as exc:
            self.stats.partial += 1
            outcome = exc.outcome
            log.warning(
                "bulk slurm update refused part-way: unknown nodes fail, the rest are sent again",
                unknown=sorted(outcome.unknown), applied=len(outcome.applied), again=len(outcome.not_applied),
            )  # fmt: skip
            for name in outcome.unknown:
                _settle(futures[name], SlurmNotFound(f"node {name} does not exist", endpoint="nodes_update"))
            for name in outcome.applied:
                _settle(futures[name], None)
            again = [(name, futures[name], stills[name]) for name in names if name in outcome.not_applied]
            if len(again) < len(names):  # fewer nodes each time: this ends
                await self._send(again, update)
            else:
                for _, future, _ in again:
                    _settle(future, exc)
            return
        except Exception as exc:  # the outcome is unknown for every node of the request: each caller decides
            for future in futures.values():
                _settle(future, exc)
            return
        for future in futures.values():
            _settle(future, None)


def _settle(future: asyncio.Future[bool], error: BaseException | None, *, written: bool = True) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(written)
    else:
        future.set_exception(error)
