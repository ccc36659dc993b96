"""A real HTTP proxy in front of slurmrestd that injects faults: errors, delays, truncated or
corrupted bodies. Tests and the fault benchmarks use it instead of a hand-written imitation of Slurm.

    async with FaultProxy(sandbox.rest_url) as proxy:
        proxy.fail_next(2, status=503); proxy.truncate = True; proxy.delay_s = 3.0
        client = SlurmClient(proxy.url, ...)

`hold_next(method, path)` keeps the next such request until the test releases it: the test changes Slurm
meanwhile (a job submitted between the syncer's read and its write), and slurmrestd answers for real.
`failing[("GET", "/conf")] = 500` refuses every such request (counted in `failed`) until removed.
`rewriting[("POST", "/partitions/")] = change` hands slurmrestd `change(body)` in place of each such request's
body (counted in `rewritten`) until removed: a value Slurm refuses put into a write, answered by Slurm itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from syncer.slurm.double_answer import recover

HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}


@dataclass
class Hold:
    """A request kept back: `arrived` once it came, forwarded once `release` is set."""

    method: str
    path_suffix: str
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.delay_s = 0.0  # before forwarding: slurmrestd sees the request late
        # after slurmrestd answered: a slow answer to a request slurmctld served when it came in (a large
        # list is read at its start and spends its time being written out)
        self.answer_delay_s = 0.0
        self.truncate = False
        self.corrupt = False
        # an answer to writes in place of slurmrestd's, after it took the write (a gateway's, or a 500 of
        # slurmrestd's own): no word of Slurm's in it
        self.gateway_status = 0
        self.requests = 0
        self.upstream_failures = 0  # requests whose upstream could not be reached or answered
        # (monotonic time, method, path, body) of non-GETs: who wrote what, and when
        self.writes: list[tuple[float, str, str, bytes]] = []
        # the writes above that never reached slurmrestd: answered by an injected failure, or slurmrestd
        # refused the connection (a write cut off after it was sent may have reached it: not listed)
        self.unforwarded: list[tuple[float, str, str, bytes]] = []
        # called with each write as it is recorded: what the client believed then can be noted at that
        # very instant (the fault benchmarks keep it as evidence of a wrong write)
        self.on_write: Callable[[tuple[float, str, str, bytes]], None] | None = None
        self._fail: list[int] = []
        # (method, path suffix) -> HTTP status: every such request is answered so until removed; `failed`
        # counts them (one endpoint refused while the rest of slurmrestd answers)
        self.failing: dict[tuple[str, str], int] = {}
        self.failed: dict[tuple[str, str], int] = {}
        # (method, path suffix) -> what slurmrestd gets in place of such a request's body; `writes` keeps
        # what the client sent
        self.rewriting: dict[tuple[str, str], Callable[[bytes], bytes]] = {}
        self.rewritten: dict[tuple[str, str], int] = {}
        self._holds: list[Hold] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    def fail_next(self, count: int, status: int = 503) -> None:
        self._fail.extend([status] * count)

    def hold_next(self, method: str, path_suffix: str) -> Hold:
        hold = Hold(method, path_suffix)
        self._holds.append(hold)
        return hold

    def clear_faults(self) -> None:
        self._fail.clear()
        self.failing.clear()
        self.rewriting.clear()
        self.delay_s = self.answer_delay_s = 0.0
        self.truncate = self.corrupt = False
        self.gateway_status = 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        body = await request.read()
        write = (time.monotonic(), request.method, request.path, body)
        if request.method != "GET":
            self.writes.append(write)
            if self.on_write is not None:
                self.on_write(write)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)  # the injected fault itself
        for hold in self._holds:
            if request.method == hold.method and request.path.endswith(hold.path_suffix):
                self._holds.remove(hold)
                hold.arrived.set()
                await hold.release.wait()
                break
        for (method, suffix), status in self.failing.items():
            if request.method == method and request.path.endswith(suffix):
                self.failed[(method, suffix)] = self.failed.get((method, suffix), 0) + 1
                return web.json_response({"errors": [{"description": "injected fault"}]}, status=status)
        if self._fail:
            if request.method != "GET":
                self.unforwarded.append(write)
            return web.json_response(
                {"errors": [{"description": "injected fault"}]}, status=self._fail.pop(0)
            )
        for (method, suffix), change in self.rewriting.items():
            if request.method == method and request.path.endswith(suffix):
                self.rewritten[(method, suffix)] = self.rewritten.get((method, suffix), 0) + 1
                body = change(body)
                break
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        try:
            async with self._session.request(
                request.method, self.upstream + request.path_qs, headers=headers, data=body
            ) as upstream:
                answer = await upstream.read()
                status = upstream.status
        except aiohttp.ClientResponseError as exc:
            # slurmrestd's two answers on one connection (syncer/slurm/double_answer.py): pass the first on,
            # as the client would read it without the proxy
            recovered = recover(exc.message)
            if recovered is None:
                raise
            status, answer = recovered
        except (aiohttp.ClientConnectionError, OSError) as exc:
            # slurmrestd down or gone mid-answer: the client sees its connection cut, as it would
            # without the proxy (not an HTTP error the proxy made up)
            self.upstream_failures += 1
            if request.method != "GET" and isinstance(exc, aiohttp.ClientConnectorError):
                self.unforwarded.append(write)
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=502)
        if self.answer_delay_s:
            await asyncio.sleep(self.answer_delay_s)  # the injected fault itself
        if self.gateway_status and request.method != "GET":
            return web.Response(
                text="<html>gateway</html>", status=self.gateway_status, content_type="text/html"
            )
        if answer and self.truncate:
            answer = answer[: len(answer) // 2]
        if answer and self.corrupt:
            answer = answer.replace(b'"name"', b'"name":{', 1)
        return web.Response(body=answer, status=status, content_type="application/json")

    async def __aenter__(self) -> FaultProxy:
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
