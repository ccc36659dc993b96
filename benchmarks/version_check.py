"""What following slurmrestd's REST API version costs (syncer/slurm/version_follow.py), on the real sandbox.

    python benchmarks/version_check.py --slurm 26.05 --n 20 --rounds 3 --requests 2000 [--out DIR]

1. Per event that says slurmrestd may have been replaced (a reconfigure or restart of slurmctld, a connection
   lost): the full negotiation (`SlurmClient._negotiate`: the OpenAPI document, parsed) beside the check that
   now settles such an event (`SlurmClient._version_stands`: the ping under the version in use, and the
   newer versions' pings answered as not served). `--n` of each back to back, `--rounds` times, alternating
   which goes first. Per call: requests and body bytes (the client's own counters), wall time, slurmrestd's
   and slurmctld's CPU (utime+stime from /proc/<pid>/stat before/after, 10 ms ticks: hence n calls), this
   process's CPU (time.process_time), and the parse alone (msgspec of the document, the release regex).
2. Per request: what the request path gained with version following (`_follow_version()` with nothing owed,
   `follow.answered_by`, `unserved`), timed alone in a tight loop over real answers, and whole requests
   (`controllers()`, i.e. ping, and `get_node`) through the client with those steps in vs short-circuited,
   `--requests` each, in alternating blocks of 100: wall time and this process's CPU per request; and
   `controllers()` with the transport stubbed (the real ping bytes answered at once), in vs short-circuited,
   40 alternating blocks of 2,000: the client's own work per request without slurmrestd's noise.
Figures: benchmarks/RESULTS.md, 2026-12-03.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
import syncer.slurm.client as client_module
from benchmarks.power import uptime
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient, _release_of
from syncer.slurm.version_follow import unserved
from syncer.testing.sandbox import Sandbox, up

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def daemon_pid(sandbox: Sandbox, name: str) -> int:
    pid = sandbox.pids[name]
    comm = Path(f"/proc/{pid}/comm").read_text().strip()
    if comm != name:
        raise RuntimeError(f"pid {pid} runs {comm}, not {name}")
    return pid


def sent(client: SlurmClient) -> tuple[int, int]:
    return sum(client.stats.requests.values()), sum(client.stats.body_bytes.values())


async def per_call(
    sandbox: Sandbox, client: SlurmClient, call: Callable[[], Awaitable[Any]], n: int
) -> dict[str, float]:
    rest, ctld = daemon_pid(sandbox, "slurmrestd"), daemon_pid(sandbox, "slurmctld")
    requests0, bytes0 = sent(client)
    rest0, ctld0, own0, wall0 = cpu_s(rest), cpu_s(ctld), time.process_time(), time.perf_counter()
    for _ in range(n):
        await call()
    wall, own = time.perf_counter() - wall0, time.process_time() - own0
    requests1, bytes1 = sent(client)
    return {
        "requests": (requests1 - requests0) / n,
        "bytes": (bytes1 - bytes0) / n,
        "wall_ms": wall / n * 1000,
        "slurmrestd_cpu_ms": (cpu_s(rest) - rest0) / n * 1000,
        "slurmctld_cpu_ms": (cpu_s(ctld) - ctld0) / n * 1000,
        "syncer_cpu_ms": own / n * 1000,
    }


def loop_us(body: Callable[[], object], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        body()
    return (time.perf_counter() - started) / count * 1e6


async def negotiation_cost(sandbox: Sandbox, client: SlurmClient, n: int, rounds: int) -> dict[str, Any]:
    assert client.version is not None
    version = client.version

    async def full() -> None:
        chosen, _ = await client._negotiate()
        assert chosen == version

    async def check() -> None:
        assert await client._version_stands(version) is not None

    kinds: dict[str, list[dict[str, float]]] = {"full negotiation": [], "check": []}
    for number in range(rounds):
        order = list(kinds.items()) if number % 2 == 0 else list(reversed(kinds.items()))
        for label, runs in order:
            runs.append(await per_call(sandbox, client, full if label == "full negotiation" else check, n))
    _, document = await client._send("GET", "/openapi/v3", endpoint="bench")
    _, ping = await client._send("GET", f"{version.prefix}/ping/", endpoint="bench")
    decode = min(
        loop_us(lambda: msgspec.json.decode(document, type=dict[str, Any]), 5) for _ in range(rounds * 3)
    )
    return {
        "version": version.name,
        "openapi_bytes": len(document),
        "ping_bytes": len(ping),
        "openapi_decode_ms": round(decode / 1000, 2),
        "ping_release_us": round(min(loop_us(lambda: _release_of(ping), 10_000) for _ in range(5)), 2),
        "rounds": {label: runs for label, runs in kinds.items()},
        "median": {
            label: {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}
            for label, runs in kinds.items()
        },
    }


async def request_check_cost(sandbox: Sandbox, client: SlurmClient, requests: int) -> dict[str, Any]:
    """The steps version following added to every request, alone and within whole requests."""
    node = sandbox.real_node
    _, ping = await client._send("GET", f"{client._prefix()}/ping/", endpoint="bench")
    _, nodes = await client._send("GET", f"{client._prefix()}/nodes/", endpoint="bench")
    release = client.follow.release
    started = time.monotonic()

    async def steps(payload: bytes, count: int) -> float:
        began = time.perf_counter()
        for _ in range(count):
            await client._follow_version()
            client.follow.answered_by(release, started)
            unserved(200, payload)
        return (time.perf_counter() - began) / count * 1e6

    async def empty(count: int) -> float:
        began = time.perf_counter()
        for _ in range(count):
            pass
        return (time.perf_counter() - began) / count * 1e6

    alone = {
        f"{label} ({len(payload)} B)": round(min([await steps(payload, 100_000) for _ in range(5)]), 3)
        for label, payload in (("ping answer", ping), ("node list", nodes))
    }
    alone["empty loop"] = round(min([await empty(100_000) for _ in range(5)]), 3)

    async def nothing() -> None:
        return None

    module = vars(client_module)  # the request path looks `unserved` up here at each call
    real_follow, real_unserved = client._follow_version, module["unserved"]

    def short_circuited(on: bool) -> None:
        if on:
            client.__dict__.pop("_follow_version", None)
            client.follow.__dict__.pop("answered_by", None)
            module["unserved"] = real_unserved
        else:
            client._follow_version = nothing  # type: ignore[method-assign]
            client.follow.answered_by = lambda release, sent_at: None  # type: ignore[method-assign]
            module["unserved"] = lambda status, payload: False

    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "ping": client.controllers,
        "get_node": lambda: client.get_node(node),
    }
    whole: dict[str, Any] = {}
    for name, call in calls.items():
        samples: dict[str, dict[str, list[float]]] = {
            "check in": {"wall_us": [], "cpu_us": []},
            "short-circuited": {"wall_us": [], "cpu_us": []},
        }
        for block in range(requests // 100):
            for on in (True, False) if block % 2 == 0 else (False, True):
                short_circuited(on)
                label = "check in" if on else "short-circuited"
                cpu0, wall0 = time.process_time(), time.perf_counter()
                for _ in range(100):
                    await call()
                samples[label]["wall_us"].append((time.perf_counter() - wall0) / 100 * 1e6)
                samples[label]["cpu_us"].append((time.process_time() - cpu0) / 100 * 1e6)
        short_circuited(True)
        whole[name] = {
            label: {
                "blocks": len(s["wall_us"]),
                "wall_us_median": round(statistics.median(s["wall_us"]), 1),
                "cpu_us_median": round(statistics.median(s["cpu_us"]), 1),
                "cpu_us_mean": round(statistics.fmean(s["cpu_us"]), 1),
            }
            for label, s in samples.items()
        }
    assert client._follow_version == real_follow
    return {
        "alone_us_per_request": alone,
        "whole_requests_per_block_of_100": whole,
        "client_only_us_per_request": await client_only(client, ping, short_circuited),
    }


async def client_only(
    client: SlurmClient,
    ping: bytes,
    short_circuited: Callable[[bool], None],
    blocks: int = 40,
    per: int = 2000,
) -> dict[str, Any]:
    """`controllers()` with the transport answering the real ping bytes at once: the client's own work per
    request (retry wrapper, the version steps, decode), without slurmrestd's noise."""

    async def answer(
        method: str, path: str, *, endpoint: str, params: dict[str, str] | None = None, body: Any = None
    ) -> tuple[int, bytes]:
        return 200, ping

    client._send = answer  # type: ignore[method-assign]
    took: dict[str, list[float]] = {"check in": [], "short-circuited": []}
    try:
        for block in range(blocks):
            for on in (True, False) if block % 2 == 0 else (False, True):
                short_circuited(on)
                began = time.perf_counter()
                for _ in range(per):
                    await client.controllers()
                took["check in" if on else "short-circuited"].append(
                    (time.perf_counter() - began) / per * 1e6
                )
    finally:
        short_circuited(True)
        del client._send
    return {
        label: {"blocks": len(t), "median": round(statistics.median(t), 2), "min": round(min(t), 2)}
        for label, t in took.items()
    }


async def run(release: str, n: int, rounds: int, requests: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-version-") as tmp:
        sandbox = up(Path(tmp) / "slurm", nodes=100, slurm=release)
        try:
            async with SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file)) as client:
                results: dict[str, Any] = {"slurm": sandbox.slurm_version, "load_before": uptime()}
                results["negotiation"] = await negotiation_cost(sandbox, client, n, rounds)
                results["load_between"] = uptime()
                results["per_request"] = await request_check_cost(sandbox, client, requests)
                results["load_after"] = uptime()
                return results
        finally:
            sandbox.down()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slurm", choices=("26.05", "24.11"), default="26.05")
    parser.add_argument("--n", type=int, default=20, help="calls of each kind per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000, help="whole requests of each kind, per side")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = asyncio.run(run(args.slurm, args.n, args.rounds, args.requests))
    print(json.dumps(results, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
