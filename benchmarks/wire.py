"""A TCP relay that counts what crosses the wire between a client and slurmrestd: bytes both ways,
headers and all, connections, and HTTP requests (request lines seen on the way up). The benchmarks put
it in front of slurmrestd so that a syncer's cost is measured where slurmrestd pays it, not from the
syncer's own counters.

    async with WireCounter("127.0.0.1", 6820) as wire:
        ... run a client against wire.url ...
        before = wire.snapshot(); ...; cost = wire.snapshot() - before

    WireCounter(url, record=True)   # also each request as it arrived: (monotonic time, method, path, body)
    await wire.cut(); ...; await wire.restore()   # slurmrestd unreachable (connection refused) meanwhile
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# one Host header per HTTP/1.1 request (JSON bodies never hold a CRLF)
HOST_HEADER = re.compile(rb"\r\nhost: ", re.IGNORECASE)
Request = tuple[float, str, str, bytes]  # (monotonic time it had fully arrived, method, path, body)


class RequestParser:
    """The HTTP/1.1 requests in one connection's upward bytes, each handed to `sink` once whole (the
    client's requests carry Content-Length bodies; GETs none)."""

    def __init__(self, sink: Callable[[Request], None]) -> None:
        self.sink = sink
        self.buffer = bytearray()
        self.head: tuple[str, str, int] | None = None  # method, path, body length of the one being read

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        while True:
            if self.head is None:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                lines = bytes(self.buffer[:end]).split(b"\r\n")
                del self.buffer[: end + 4]
                words = [word.decode(errors="replace") for word in lines[0].split(b" ")] + ["", ""]
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                self.head = (words[0], words[1], length)
            method, path, length = self.head
            if len(self.buffer) < length:
                return
            body = bytes(self.buffer[:length])
            del self.buffer[:length]
            self.head = None
            self.sink((time.monotonic(), method, path, body))


@dataclass
class WireCounter:
    upstream: str  # http://host:port of slurmrestd
    totals: Counter[str] = field(default_factory=Counter)
    url: str = ""
    record: bool = False  # keep every request in `requests` (the upward bytes parsed)
    requests: list[Request] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _port: int = 0
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def snapshot(self) -> Counter[str]:
        return Counter(self.totals)

    async def __aenter__(self) -> WireCounter:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self._port)
        self._port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self._port}"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.cut()

    async def cut(self) -> None:
        """Slurm unreachable: the port refuses connections, and those open are closed."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def restore(self) -> None:
        """Reachable again, on the same port."""
        await self.__aenter__()

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
        parser = RequestParser(self.requests.append) if self.record else None
        try:
            await asyncio.gather(
                self._pipe(client_r, upstream_w, "bytes_up", count_requests=True, parser=parser),
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
        parser: RequestParser | None = None,
    ) -> None:
        tail = b""  # a header may straddle two reads
        try:
            while chunk := await reader.read(65536):
                self.totals[key] += len(chunk)
                if parser is not None:
                    parser.feed(chunk)
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
