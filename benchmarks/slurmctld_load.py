"""What an operation costs slurmctld while it runs, as a user of the cluster sees it: requests sent
meanwhile by other clients (their latency), slurmctld's and slurmrestd's CPU seconds, and its `/diag`.

`Probes` sends, each in its own loop with a short pause, `GET /ping/` (slurmrestd asks slurmctld), `GET
/jobs/` (what squeue reads) and `GET /nodes/` (a full node list), and reads `GET /diag/` for slurmctld's
thread count and agent queue; every answer is a timestamped `Sample`, so samples can later be sorted into
the windows of the operations being compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.run import cpu_seconds, percentiles
from syncer.slurm.auth import TokenFile
from syncer.testing.sandbox import Sandbox

# request path under /slurm/<version>, pause after each answer (s): small enough to fall in every window
PROBES = {
    "ping": ("/ping/", 0.05),
    "jobs": ("/jobs/", 0.1),
    "nodes": ("/nodes/", 0.2),
    "diag": ("/diag/", 0.25),
}
PROBE_TIMEOUT_S = 60


@dataclass(frozen=True)
class Sample:
    what: str
    started: float  # monotonic
    seconds: float
    ok: bool  # HTTP 200 with a body; a refused connection or an error status is a failed sample
    diag: dict[str, float] = field(default_factory=dict)  # for "diag": slurmctld's threads and queues


class Probes:
    """The probe loops against slurmrestd, from `async with` until its end."""

    def __init__(self, sandbox: Sandbox, version: str = "v0.0.45") -> None:
        self._base = f"{sandbox.rest_url}/slurm/{version}"
        self._headers = TokenFile(sandbox.token_file).headers()
        self.samples: list[Sample] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Probes:
        timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
        self._http = aiohttp.ClientSession(headers=self._headers, timeout=timeout)
        self._tasks = [asyncio.create_task(self._loop(what, *how)) for what, how in PROBES.items()]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._http is not None:
            await self._http.close()

    async def _loop(self, what: str, path: str, pause_s: float) -> None:
        assert self._http is not None
        while True:
            started = time.monotonic()
            ok, body = False, b""
            try:
                async with self._http.get(self._base + path) as response:
                    body = await response.read()
                    ok = response.status == 200 and bool(body)
            except (aiohttp.ClientError, TimeoutError):
                pass
            seconds = time.monotonic() - started
            self.samples.append(
                Sample(what, started, seconds, ok, _diag_figures(body) if ok and what == "diag" else {})
            )
            await asyncio.sleep(pause_s)

    def within(self, windows: Iterable[tuple[float, float]]) -> list[Sample]:
        """The samples sent during any of these (start, end) windows."""
        spans = list(windows)
        return [s for s in self.samples if any(start <= s.started <= end for start, end in spans)]


def _diag_figures(body: bytes) -> dict[str, float]:
    statistics = json.loads(body).get("statistics") or {}
    figures = {}
    for name in ("server_thread_count", "agent_queue_size", "agent_count", "agent_thread_count"):
        value = statistics.get(name)
        if isinstance(value, int | float):
            figures[name] = float(value)
    return figures


def latency_summary(samples: list[Sample]) -> dict[str, Any]:
    """Per probe: n, p50, p99 (from >= 1,000 samples only, else None: see `max`), max, failed; for /diag the
    largest thread count and agent queue slurmctld reported."""
    summary: dict[str, Any] = {}
    for what in PROBES:
        mine = [s for s in samples if s.what == what]
        figures: dict[str, Any] = {
            k: (round(v, 4) if isinstance(v, float) else v)
            for k, v in percentiles([s.seconds for s in mine if s.ok]).items()
        }
        figures["failed"] = sum(1 for s in mine if not s.ok)
        if what == "diag":
            for name in ("server_thread_count", "agent_queue_size"):
                values = [s.diag[name] for s in mine if name in s.diag]
                figures[f"max_{name}"] = max(values) if values else None
        summary[what] = figures
    return summary


@dataclass
class CpuMeter:
    """CPU seconds of slurmctld and slurmrestd, their own and their reaped children's (a reconfigure may
    fork)."""

    sandbox: Sandbox
    marks: dict[str, float] = field(default_factory=dict)

    def read(self) -> dict[str, float]:
        figures = {"wall": time.monotonic()}
        for name in ("slurmctld", "slurmrestd"):
            pid = self.sandbox.pids.get(name)
            if pid is not None:
                with contextlib.suppress(OSError):
                    figures[name] = cpu_seconds(pid, children=True)
        return figures

    @staticmethod
    def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {k: round(after[k] - before[k], 3) for k in after if k in before}


def net_per_operation(
    spent: dict[str, float], idle_per_s: dict[str, float], operations: int
) -> dict[str, float]:
    """CPU seconds per operation over a phase, less what the same processes spend idle in as long (the
    syncer's polls and this benchmark's own reads go on throughout)."""
    wall = spent["wall"]
    return {
        name: round((spent[name] - idle_per_s.get(name, 0.0) * wall) / operations, 4)
        for name in spent
        if name != "wall"
    }


def per_second(spent: dict[str, float]) -> dict[str, float]:
    return {name: round(value / spent["wall"], 4) for name, value in spent.items() if name != "wall"}


def diag_summary(diag: dict[str, Any]) -> dict[str, Any]:
    """From slurmctld's statistics: when they started (a reconfigure restarts them) and the RPCs by type that
    a partition change or a reconfigure sends."""
    wanted = {
        "REQUEST_UPDATE_PARTITION", "REQUEST_CREATE_PARTITION", "REQUEST_RECONFIGURE",
        "REQUEST_RECONFIGURE_WITH_CONFIG", "REQUEST_PARTITION_INFO", "REQUEST_NODE_INFO", "REQUEST_PING",
    }  # fmt: skip
    rpcs = {}
    for entry in _listed(diag.get("rpcs_by_message_type")):
        name = entry.get("message_type") or entry.get("type")
        if name in wanted:
            rpcs[name] = {k: _number(entry.get(k)) for k in ("count", "average_time", "total_time")}
    return {
        "req_time_start": _number(diag.get("req_time_start")),
        "server_thread_count": _number(diag.get("server_thread_count")),
        "agent_queue_size": _number(diag.get("agent_queue_size")),
        "rpcs": rpcs,
    }


def _listed(value: Any) -> Iterator[dict[str, Any]]:
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, dict):
            yield entry


def _number(value: Any) -> Any:
    """A Slurm number field, plain or as {"set", "infinite", "number"}."""
    if isinstance(value, dict):
        return value.get("number") if value.get("set", True) else None
    return value


def machine_memory() -> dict[str, float]:
    """MemTotal and MemAvailable in MB (/proc/meminfo)."""
    figures: dict[str, float] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            figures[key] = round(int(rest.split()[0]) / 1024)
    return figures


def rss_mb(pid: int) -> float | None:
    """A process's resident memory now (VmRSS), MB."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def machine_load() -> dict[str, Any]:
    """The load averages (1, 5, 15 min) and what `uptime` prints: other engineers share this machine."""
    one, five, fifteen = os.getloadavg()
    return {"loadavg": [round(one, 2), round(five, 2), round(fifteen, 2)], "cores": os.cpu_count()}
