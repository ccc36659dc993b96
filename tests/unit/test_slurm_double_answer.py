"""slurmrestd 26.05's two answers on one connection (recorded byte for byte from 26.05.5 on a rejected
token and a refused update) become the client's typed errors, never aiohttp's parser error. A local
server replays the bytes, so a change in aiohttp's message format fails here, not in a cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from syncer.slurm.auth import StaticToken
from syncer.slurm.client import SlurmClient
from syncer.slurm.double_answer import recover
from syncer.slurm.errors import SlurmApiError, SlurmAuthError, SlurmNotFound


def _answer(status: str, body: bytes, content_type: str) -> bytes:
    head = f"HTTP/1.1 {status}\r\nConnection: Close\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + f"Content-Type: {content_type}\r\n\r\n".encode() + body


def _json_error(description: str, number: int, error: str) -> bytes:
    return (
        b'{\n  "errors": [\n    {\n      "description": "' + description.encode() + b'",\n'
        b'      "error_number": ' + str(number).encode() + b',\n      "error": "' + error.encode() + b'",\n'
        b'      "source": "_dump_nodes"\n    }\n  ],\n  "warnings": [],\n'
        b'  "meta": {"slurm": {"release": "26.05.5"}}\n}'
    )


REJECTED_TOKEN = _answer(
    "511 Network Authentication Required",
    _json_error("Failure to query nodes", 1007, "Protocol authentication error"),
    "application/json",
) + _answer("511 Network Authentication Required", b"Protocol authentication error", "text/plain")
UNKNOWN_NODE = _answer(
    "422 UNPROCESSABLE CONTENT",
    _json_error("Failure to update node nosuch", 2018, "Invalid node name specified"),
    "application/json",
) + _answer("422 UNPROCESSABLE CONTENT", b"Invalid node name specified", "text/plain")
OPENAPI = b'{"paths": {"/slurm/v0.0.45/ping/": {}}}'


@pytest.fixture
async def replaying_server() -> AsyncIterator[str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in request.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        if length:
            await reader.readexactly(length)
        if b"/openapi/v3" in request:
            writer.write(_answer("200 OK", OPENAPI, "application/json"))
        elif request.startswith(b"POST"):
            writer.write(UNKNOWN_NODE)
        elif b"/jobs/" in request:  # a close followed by bytes that quote no status at all
            writer.write(_answer("500 INTERNAL ERROR", b"{}", "application/json") + b"garbage\r\n")
        else:
            writer.write(REJECTED_TOKEN)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_rejected_token_is_an_auth_error(replaying_server: str) -> None:
    async with SlurmClient(replaying_server, StaticToken("t"), attempts=1) as client:
        with pytest.raises(SlurmAuthError, match="rejected the token") as info:
            await client.list_all_nodes()
    assert "Connection: close" not in str(info.value)


async def test_a_refused_update_keeps_slurms_own_error(replaying_server: str) -> None:
    async with SlurmClient(replaying_server, StaticToken("t"), attempts=1) as client:
        with pytest.raises(SlurmNotFound, match="node nosuch does not exist") as info:
            await client.update_node("nosuch", state=["DRAIN"], reason="k8s: x")
    assert info.value.status == 422 and info.value.has_error("Invalid node name")
    assert client.release == "26.05.5"


def test_a_message_that_quotes_nothing_recoverable_is_left_alone() -> None:
    assert recover("Data after `Connection: close`") is None
    assert recover("Data after `Connection: close`:\n\n  b'no status here'\n  ^") is None
    assert recover("some other parser error") is None
    assert recover("Data after `Connection: close`:\n\n  b'{}HTTP/1.1 503 Busy'\n  ^") == (503, b"{}")


async def test_an_unrecoverable_double_answer_is_still_a_slurm_error(replaying_server: str) -> None:
    async with SlurmClient(replaying_server, StaticToken("t"), attempts=1) as client:
        with pytest.raises(SlurmApiError, match="not valid HTTP"):
            await client.list_jobs()


# recover()'s rules one by one, on messages shaped as aiohttp writes them: the marker, a blank line, the
# refused bytes as an indented bytes literal, then a caret line under them.
def _message(quoted: str, marker: str = "Data after `Connection: close`:") -> str:
    return f"{marker}\n\n  {quoted}\n  {' ' * len(quoted)}^"


def test_only_a_message_that_starts_with_aiohttps_marker_is_a_double_answer() -> None:
    quoted = "b'{}HTTP/1.1 503 Busy'"
    assert recover(_message(quoted)) == (503, b"{}")
    assert recover(_message(quoted, marker="Bad status line: Data after `Connection: close`:")) is None
    assert recover(_message(quoted, marker="Data after Connection: close:")) is None


def test_the_quoted_bytes_may_be_in_double_quotes_when_the_body_holds_a_single_quote() -> None:
    body = b"it's gone"
    quoted = repr(body + b"HTTP/1.1 404 Not Found")
    assert quoted.startswith('b"')  # Python's own choice of quotes, as aiohttp's message shows it
    assert recover(_message(quoted)) == (404, body)


def test_the_first_quoted_line_is_read_and_lines_before_it_are_skipped() -> None:
    message = (
        "Data after `Connection: close`:\nsome words\n  b'first HTTP/1.1 500 X'\n  b'second HTTP/1.1 502 Y'"
    )
    assert recover(message) == (500, b"first ")


def test_the_status_is_the_last_one_quoted_and_the_body_everything_before_it() -> None:
    """A body may itself mention a status line: the second answer's own line comes last."""
    quoted = repr(b'{"said": "HTTP/1.1 200 OK"}HTTP/1.1 511 Network Authentication Required')
    assert recover(_message(quoted)) == (511, b'{"said": "HTTP/1.1 200 OK"}')


def test_a_status_line_of_http_1_0_counts_too() -> None:
    assert recover(_message("b'{}HTTP/1.0 422 Unprocessable'")) == (422, b"{}")


def test_an_empty_first_body_is_recovered_as_empty() -> None:
    assert recover(_message("b'HTTP/1.1 401 Unauthorized'")) == (401, b"")


def test_only_http_1_x_status_lines_of_three_digits_count() -> None:
    assert recover(_message("b'{}HTTP/2.0 503 Busy'")) is None
    assert recover(_message("b'{}HTTP/1.1 50 Busy'")) is None


@pytest.mark.parametrize(
    "quoted",
    [
        "b'{}HTTP/1.1 503 Busy",  # cut off: a SyntaxError
        "b'{}' + b'HTTP/1.1 503 Busy'",  # an expression, not a literal: a ValueError
        "b'{}HTTP/1.1 503 Busy', 1",  # a literal, but a tuple, not bytes
    ],
)
def test_a_quoted_line_that_is_not_one_bytes_literal_is_left_alone(quoted: str) -> None:
    assert recover(_message(quoted)) is None
