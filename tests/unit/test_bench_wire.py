"""The benchmark's byte-counting relay: counts both ways and closes quietly with connections open."""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks.wire import WireCounter


async def test_relay_counts_and_closes_open_connections_quietly() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    upstream = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        async with WireCounter(f"http://127.0.0.1:{port}") as wire:
            host, relay_port = wire.url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(relay_port))
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            echoed = await reader.readexactly(27)
        for _ in range(5):  # let the relay's closed connections' callbacks run
            await asyncio.sleep(0)
        assert echoed.startswith(b"GET /")
        assert wire.totals["requests"] == 1 and wire.totals["bytes_up"] == wire.totals["bytes_down"] == 27
        assert errors == []
        writer.close()
    finally:
        loop.set_exception_handler(None)
        upstream.close()
        await upstream.wait_closed()
