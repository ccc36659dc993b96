"""`GET /prolog/ready`: the answer slurm-syncer's PrologSlurmctld waits for (issue 47; the decision is
syncer/controllers/nodeset/job_ready.py). A long poll: the request is held until every node of the job that
was powering up has registered with slurmctld and its pods are Ready, or `wait` seconds pass (then the
prolog asks again or gives up). Woken by the Slurm cache's changes and the pod informer's, so the answer
follows the syncer's reads (a Slurm poll: 1 s, or 250 ms with slurmctld's metrics) and costs no read of
its own. Anything unclear (caches not synced, Slurm data stale, a bad request) answers at once: the prolog
then ends and Slurm starts the job its own way (its 30 s check)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

import structlog
from aiohttp import web

from syncer.controllers.nodeset.job_ready import (
    JobVerdict,
    NodeReadiness,
    job_verdict,
    newly_watched,
    node_readiness,
)
from syncer.kube.cache import KubeCache
from syncer.slurm.cache import NodeCache
from syncer.slurm.hostlist import expand

log = structlog.get_logger("syncer.prolog")
PATH = "/prolog/ready"
MAX_WAIT_S = 120.0  # one request is held this long at most; the prolog asks again within its own bound
MAX_NODES = 65536  # a job's node list, expanded


@dataclass
class PrologStats:
    answers: dict[str, int] = field(default_factory=dict)  # outcome -> count
    waiting: int = 0  # requests held now
    waited_s: float = 0.0  # sum of the seconds requests that waited were held


class JobReadiness:
    def __init__(self, slurm_cache: NodeCache, kube_cache: KubeCache) -> None:
        self.slurm_cache = slurm_cache
        self.kube_cache = kube_cache
        self.stats = PrologStats()
        self._changed = asyncio.Event()
        slurm_cache.subscribe(lambda _changes: self._wake())
        kube_cache.subscribe(lambda _keys: self._wake())

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()  # waiters hold the one that was just set

    def unusable(self) -> str:
        """Why the caches cannot answer now ("" when they can)."""
        if not self.slurm_cache.synced or not self.kube_cache.synced:
            return "caches not synced yet"
        if self.slurm_cache.stale:
            return f"Slurm data stale ({self.slurm_cache.cause or 'no answer'})"
        return ""

    def readiness(self, nodes: list[str]) -> dict[str, NodeReadiness]:
        slurm, pods_for = self.slurm_cache.nodes, self.kube_cache.pods_for
        return {name: node_readiness(slurm.get(name), pods_for(name)) for name in nodes}

    async def wait(self, nodes: list[str], wait_s: float) -> tuple[str, JobVerdict | None]:
        """(outcome, verdict): "ready" (what was powering up is up), "none" (nothing was), "failed" (a node
        failed), "waiting" (`wait_s` passed; the prolog may ask again), "unusable" (caches cannot tell)."""
        deadline = time.monotonic() + wait_s
        watched: set[str] = set()
        while True:
            if self.unusable():
                return "unusable", None
            readiness = self.readiness(nodes)
            watched |= newly_watched(readiness)
            verdict = job_verdict(readiness, watched)
            if verdict.done:
                outcome = "failed" if verdict.failed else "ready" if watched else "none"
                return outcome, verdict
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "waiting", verdict
            # looked at again after 5 s whatever happened: staleness is judged by the clock, not by an event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=min(remaining, 5.0))

    async def handle(self, request: web.Request) -> web.Response:
        """`?job=<id>&nodes=<hostlist>&wait=<seconds>` -> a text line the prolog reads: `done <outcome> ...`
        (end now) or `wait ...` (ask again)."""
        job = request.query.get("job", "")[:32]
        try:
            nodes = expand(request.query.get("nodes", ""), limit=MAX_NODES)
            wait_s = min(max(float(request.query.get("wait", "0")), 0.0), MAX_WAIT_S)
        except ValueError as exc:
            return self._answer("bad", f"done bad request: {exc}\n", job, 0.0, status=400)
        started = time.monotonic()
        self.stats.waiting += 1
        try:
            outcome, verdict = await self.wait(nodes, wait_s)
        finally:
            self.stats.waiting -= 1
        took = time.monotonic() - started
        if outcome == "waiting" and verdict is not None:
            text = f"wait for {','.join(verdict.waiting_for[:20])}\n"
        elif outcome == "failed" and verdict is not None:
            text = f"done failed {','.join(verdict.failed[:20])}\n"
        elif outcome == "unusable":
            text = f"done unusable {self.unusable()}\n"
        else:
            text = f"done {outcome}\n"
        return self._answer(outcome, text, job, took)

    def _answer(self, outcome: str, text: str, job: str, took: float, status: int = 200) -> web.Response:
        self.stats.answers[outcome] = self.stats.answers.get(outcome, 0) + 1
        if outcome != "none":
            self.stats.waited_s += took
            log.info("prolog answered", job=job, outcome=outcome, seconds=round(took, 3), answer=text.strip())
        return web.Response(status=status, text=text)
