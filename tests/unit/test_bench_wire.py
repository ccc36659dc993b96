"""The benchmark's byte-counting relay: counts both ways and closes quietly with connections open; records
whole requests; refuses connections while cut."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from benchmarks.wire import RequestParser, WireCounter


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


def test_requests_are_recorded_whole_across_reads() -> None:
    """Request lines and Content-Length bodies, split anywhere between reads, each handed over once whole."""
    seen: list[tuple[float, str, str, bytes]] = []
    parser = RequestParser(seen.append)
    stream = (
        b"GET /slurm/v0.0.45/node/n1 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /slurm/v0.0.45/node/n2 HTTP/1.1\r\nHost: x\r\nContent-Length: 19\r\n\r\n"
        b'{"state":["DRAIN"]}'
    )
    for i in range(0, len(stream), 7):
        parser.feed(stream[i : i + 7])
    assert [(m, p, b) for _t, m, p, b in seen] == [
        ("GET", "/slurm/v0.0.45/node/n1", b""),
        ("POST", "/slurm/v0.0.45/node/n2", b'{"state":["DRAIN"]}'),
    ]


async def test_a_cut_relay_refuses_connections_until_restored_on_the_same_port() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    upstream = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    try:
        async with WireCounter(f"http://127.0.0.1:{port}", record=True) as wire:
            host, relay_port = wire.url.removeprefix("http://").split(":")

            async def ask() -> bytes:
                reader, writer = await asyncio.open_connection(host, int(relay_port))
                writer.write(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
                await writer.drain()
                got = await reader.read()
                writer.close()
                return got

            assert await ask() == b"ok"
            await wire.cut()
            with pytest.raises(ConnectionRefusedError):
                await ask()
            await wire.restore()
            assert await ask() == b"ok"
            assert [p for _t, _m, p, _b in wire.requests] == ["/x", "/x"]
    finally:
        upstream.close()
        await upstream.wait_closed()
