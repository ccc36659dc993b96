"""A TCP relay that counts what crosses the wire between a client and slurmrestd: bytes both ways,
headers and all, connections, and HTTP requests (request lines seen on the way up). The benchmarks put
it in front of slurmrestd so that a syncer's cost is measured where slurmrestd pays it, not from the
syncer's own counters.

    async with WireCounter("127.0.0.1", 6820) as wire:
        ... run a client against wire.url ...
        before = wire.snapshot(); ...; cost = wire.snapshot() - before
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# one Host header per HTTP/1.1 request (JSON bodies never hold a CRLF)
HOST_HEADER = re.compile(rb"\r\nhost: ", re.IGNORECASE)


@dataclass
class WireCounter:
    upstream: str  # http://host:port of slurmrestd
    totals: Counter[str] = field(default_factory=Counter)
    url: str = ""
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def snapshot(self) -> Counter[str]:
        return Counter(self.totals)

    async def __aenter__(self) -> WireCounter:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        target = urlsplit(self.upstream)
        try:
            upstream_r, upstream_w = await asyncio.open_connection(target.hostname, target.port)
        except OSError:
            client_w.close()
            self._tasks.discard(task)
            return
        self.totals["connections"] += 1
        try:
            await asyncio.gather(
                self._pipe(client_r, upstream_w, "bytes_up", count_requests=True),
                self._pipe(upstream_r, client_w, "bytes_down"),
            )
        except asyncio.CancelledError:
            # only __aexit__ cancels a connection; ended quietly, else asyncio's stream callback
            # prints the cancellation as an unhandled error at the end of every run
            pass
        finally:
            for writer in (client_w, upstream_w):
                writer.close()
            self._tasks.discard(task)

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        key: str,
        count_requests: bool = False,
    ) -> None:
        tail = b""  # a header may straddle two reads
        try:
            while chunk := await reader.read(65536):
                self.totals[key] += len(chunk)
                if count_requests:
                    window = tail + chunk
                    self.totals["requests"] += len(HOST_HEADER.findall(window)) - len(
                        HOST_HEADER.findall(tail)
                    )
                    tail = window[-8:]  # shorter than the header name: never counted twice
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if writer.can_write_eof():
                with contextlib.suppress(ConnectionError, OSError):
                    writer.write_eof()
