"""An informer of a resource whose CRD may not be served (another project's, installed or not): it looks
first; where the resource is not served it says so once (INFO), does not watch, and looks again silently
every `probe_s`; once served, it lists and watches as any informer. A refusal (RBAC) is a WARNING, once
per distinct message, retried with backoff."""

from __future__ import annotations

import asyncio
from typing import Generic

import structlog

from syncer.kube.errors import KubeError
from syncer.kube.informer import Informer, T
from syncer.runtime.backoff import Backoff

log = structlog.get_logger("syncer.kube")


class OptionalInformer(Generic[T]):
    def __init__(
        self, informer: Informer[T], *, what: str, absent_means: str, probe_s: float = 300.0
    ) -> None:
        self.informer = informer
        self.client = informer.client
        self.path = informer.path
        self.what = what  # for the log lines: "Slinky NodeSets"
        self.absent_means = absent_means  # what an absent resource means here
        self.probe_s = probe_s
        self.decided = asyncio.Event()  # known absent, or listed once
        self.absent = False

    async def run(self) -> None:
        await self._until_served()
        if self.absent:
            log.info(f"{self.what} are served now: watched", resource=self.path)
            self.absent = False
        async with asyncio.TaskGroup() as group:
            group.create_task(self._decided_once_synced())
            await self.informer.run()

    async def _until_served(self) -> None:
        backoff, attempt, told = Backoff(base_s=1.0, max_s=30.0), 0, ""
        while True:
            try:
                await self.client.get(self.path, {"limit": "1"})
                return
            except KubeError as exc:
                if exc.status == 404:
                    if not self.absent:
                        log.info(f"{self.what} are not served here: {self.absent_means}", resource=self.path)
                    self.absent = True
                    self.decided.set()
                    await asyncio.sleep(self.probe_s)
                    continue
                if str(exc) != told:
                    told = str(exc)
                    log.warning(f"{self.what} not readable", resource=self.path, error=told)
                attempt += 1
                await asyncio.sleep(backoff.delay(attempt))

    async def _decided_once_synced(self) -> None:
        await self.informer.synced.wait()
        self.decided.set()
