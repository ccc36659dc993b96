"""slurm-syncer's PrologSlurmctld script (issue 47) against an HTTP server that answers as the syncer's
/prolog/ready does (syncer/app/job_ready.py): with curl and with bash's /dev/tcp alone, it asks again while
told to wait, ends on any other answer, and always exits 0 and within its bound: no URL, nobody listening,
an error, or a server that never answers."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp import web

from syncer.app.prolog_cmd import SCRIPT, script

Answer = Callable[[int], tuple[int, str] | None]  # request number -> (status, body), None: never answer
CLIENTS = ("curl", "bash")
# what the bash client needs, and nothing more (curl left out)
BASH_TOOLS = ("sh", "bash", "sed", "date", "tr", "timeout", "cat")


@pytest.fixture
def prolog(tmp_path: Path) -> Path:
    path = tmp_path / SCRIPT
    path.write_text(script())
    path.chmod(0o755)
    return path


def tools_without_curl(directory: Path) -> str:
    directory.mkdir(exist_ok=True)
    for tool in BASH_TOOLS:
        if (directory / tool).exists():
            continue
        found = shutil.which(tool)
        assert found, f"{tool} missing on this machine"
        (directory / tool).symlink_to(found)
    return str(directory)


async def run(
    prolog: Path, url: str, client: str, *, wait: int = 30, nodes: str = "pw-[0-1],x3"
) -> tuple[int, float]:
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": nodes}
    env["PATH"] = os.environ["PATH"] if client == "curl" else tools_without_curl(prolog.parent / "bin")
    (prolog.parent / f"{SCRIPT}.env").write_text(f"SLURM_SYNCER_URL={url}\nSLURM_SYNCER_PROLOG_WAIT={wait}\n")
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(str(prolog), env=env)
    code = await asyncio.wait_for(process.wait(), timeout=60)
    return code, time.monotonic() - started


class Syncer:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.asked: list[dict[str, str]] = []
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.asked.append(dict(request.query))
        reply = self.answer(len(self.asked))
        if reply is None:
            await asyncio.sleep(3600)
            raise AssertionError("unreachable")
        return web.Response(status=reply[0], text=reply[1])


async def listening(syncer: Syncer) -> web.AppRunner:
    app = web.Application()
    app.router.add_get("/prolog/ready", syncer.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    syncer.port = runner.addresses[0][1]
    return runner


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("client", CLIENTS)
async def test_asks_again_while_told_to_wait_and_ends_when_done(prolog: Path, client: str) -> None:
    syncer = Syncer(lambda n: (200, "wait for pw-0\n") if n < 3 else (200, "done ready\n"))
    runner = await listening(syncer)
    try:
        code, _ = await run(prolog, f"http://127.0.0.1:{syncer.port}", client, wait=30)
    finally:
        await runner.cleanup()
    assert code == 0
    assert len(syncer.asked) == 3
    assert syncer.asked[0]["job"] == "42" and syncer.asked[0]["nodes"] == "pw-[0-1],x3"
    assert 28 <= int(syncer.asked[0]["wait"]) <= 30


@pytest.mark.parametrize("client", CLIENTS)
async def test_ends_at_once_on_an_error_or_an_unknown_answer(prolog: Path, client: str) -> None:
    for answer in ((500, "wait oops\n"), (200, "done none\n"), (200, "something else\n")):
        syncer = Syncer(lambda _n, a=answer: a)  # type: ignore[misc]
        runner = await listening(syncer)
        try:
            code, took = await run(prolog, f"http://127.0.0.1:{syncer.port}", client)
        finally:
            await runner.cleanup()
        assert (code, len(syncer.asked)) == (0, 1), answer
        assert took < 10, answer


@pytest.mark.parametrize("client", CLIENTS)
async def test_nobody_listening_ends_at_once(prolog: Path, client: str) -> None:
    code, took = await run(prolog, f"http://127.0.0.1:{free_port()}", client)
    assert code == 0 and took < 10


@pytest.mark.parametrize("client", CLIENTS)
async def test_a_syncer_that_never_answers_is_left_within_the_bound(prolog: Path, client: str) -> None:
    syncer = Syncer(lambda _n: None)
    runner = await listening(syncer)
    try:
        code, took = await run(prolog, f"http://127.0.0.1:{syncer.port}", client, wait=1)
    finally:
        await runner.cleanup()
    assert code == 0
    assert took < 1 + 5 + 5, f"{took:.1f} s"  # the wait, the client's slack, a busy machine


async def test_no_url_or_no_nodes_asks_nobody(prolog: Path) -> None:
    syncer = Syncer(lambda _n: (200, "done none\n"))
    runner = await listening(syncer)
    try:
        assert (await run(prolog, "", "curl"))[0] == 0
        assert (await run(prolog, f"http://127.0.0.1:{syncer.port}", "curl", nodes=""))[0] == 0
    finally:
        await runner.cleanup()
    assert syncer.asked == []
