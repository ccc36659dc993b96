"""slurmctld's own OpenMetrics (Slurm 25.11+, `MetricsType=metrics/openmetrics`) as a node-change hint.

    reader = MetricsReader("http://slurmctld:6817", timeout_s=2.0)
    reading = await reader.read()      # Reading(fingerprint, body_bytes, seconds)
    await reader.close()

`GET /metrics/partitions` (no authentication; ~12 KB per partition whatever the node count) lists per
partition how many nodes are in each state. The fingerprint keeps the counts that move when a node's
health or drain state moves (drain, drained, draining, down, fail, no_resp, maint, power_*, ...) plus
the node total, and leaves out what jobs move every second (alloc, mixed, idle, cg, planned, CPU and
memory gauges). A changed fingerprint is a strong "list now"; an unchanged one proves nothing (one drain
and one undrain cancel out), so the cache keeps a periodic full list as its correctness floor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from syncer.runtime.proxy import proxy_for
from syncer.slurm.errors import SlurmError

PATH = "/metrics/partitions"
PREFIX = "slurm_partition_nodes"
# Moved by jobs starting and ending, not by health or drains: a hint that followed them would fire on
# every job, as the update_time probe does.
JOB_DRIVEN = frozenset({"alloc", "mixed", "idle", "cg", "planned"})
JOB_DRIVEN_PREFIXES = ("cpus_", "mem_")
DEFAULT_MAX_BYTES = 4 * 1024 * 1024  # measured 12 KB for one partition; a body this large is not metrics

# (partition, state, count), sorted; state "total" is the partition's node count.
Fingerprint = tuple[tuple[str, str, int], ...]


class SlurmMetricsError(SlurmError):
    """slurmctld's metrics could not be read as node-state counts; the hint is unusable for now."""


class SlurmMetricsUnavailable(SlurmMetricsError):
    """Nobody answered, or not with HTTP 200 (MetricsType not set, wrong port, slurmctld down)."""


class SlurmMetricsTimeout(SlurmMetricsError):
    """No whole answer within the deadline."""


class SlurmMetricsDecodeError(SlurmMetricsError):
    """The answer was not the per-partition node counts (garbage, truncated, too large)."""


@dataclass(frozen=True)
class Reading:
    fingerprint: Fingerprint
    body_bytes: int
    seconds: float
    text: str = ""  # the whole body: the exporter's job counts come from it too (metrics_jobs.py)


def _counted(metric: str) -> str | None:
    """The state a metric counts, or None when jobs move it (left out of the fingerprint)."""
    if metric == PREFIX:
        return "total"
    state = metric.removeprefix(PREFIX + "_")
    if state in JOB_DRIVEN or state.startswith(JOB_DRIVEN_PREFIXES):
        return None
    return state


def parse_fingerprint(text: str) -> Fingerprint:
    """The node-state counts in a `/metrics/partitions` body (read by prometheus-client's parser of the
    text exposition format, any labels beside `partition` kept apart); SlurmMetricsDecodeError if it has
    none."""
    counts: dict[tuple[str, str], int] = {}
    # only the node-count samples go to the parser: the rest of the body (jobs, CPUs) is nine tenths of it
    for sample in samples(text, lambda line: line.startswith(PREFIX), what="metrics", endpoint=PATH):
        if not sample.name.startswith(PREFIX):
            continue
        state = _counted(sample.name)
        if state is not None:
            counts[(partition_label(sample.labels), state)] = count_of(sample, "node count", PATH)
    if not any(state == "total" for _, state in counts):
        raise SlurmMetricsDecodeError(f"no {PREFIX}{{partition=...}} counts in the answer", endpoint=PATH)
    return tuple(sorted((p, s, n) for (p, s), n in counts.items()))


def samples(text: str, keep: Callable[[str], bool], *, what: str, endpoint: str) -> list[Sample]:
    """The samples of the lines of a slurmctld metrics page that `keep` keeps (only those go to
    prometheus-client's text-format parser); SlurmMetricsDecodeError naming `what` when unreadable."""
    wanted = "\n".join(line for line in text.splitlines() if keep(line))
    try:
        return [sample for family in text_string_to_metric_families(wanted) for sample in family.samples]
    except (ValueError, TypeError, IndexError) as exc:
        raise SlurmMetricsDecodeError(f"unreadable {what}: {exc}"[:160], endpoint=endpoint) from None


def count_of(sample: Sample, what: str, endpoint: str) -> int:
    """A sample that must be a count (a whole number, not negative); SlurmMetricsDecodeError if not."""
    value = sample.value
    if not float(value).is_integer() or value < 0:
        raise SlurmMetricsDecodeError(
            f"not a {what}: {sample.name}{sample.labels} {value}", endpoint=endpoint
        )
    return int(value)


def partition_label(labels: dict[str, str]) -> str:
    """The partition a count is for; other labels (a newer slurmctld's) keep their series apart."""
    others = ",".join(f"{key}={value}" for key, value in sorted(labels.items()) if key != "partition")
    partition = labels.get("partition", "")
    return f"{partition}{{{others}}}" if others else partition


class HintReader(Protocol):
    """What the node cache reads its hint from: a MetricsReader for a given URL, or one that finds
    slurmctld by itself (syncer/slurm/metrics_locate.py)."""

    async def read(self) -> Reading: ...

    async def read_page(self, path: str) -> str: ...

    async def close(self) -> None: ...


class MetricsReader:
    """Reads the fingerprint from slurmctld's metrics URL (``http://host:SlurmctldPort``)."""

    def __init__(self, url: str, *, timeout_s: float = 2.0, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.base = url.rstrip("/")
        self.url = self.base + PATH
        self.proxy = proxy_for(self.url)  # HTTP_PROXY / NO_PROXY as for slurmrestd
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._session: aiohttp.ClientSession | None = None

    async def read(self) -> Reading:
        started = time.monotonic()
        text, size = await self._get(PATH)
        return Reading(parse_fingerprint(text), size, time.monotonic() - started, text)

    async def read_page(self, path: str) -> str:
        """Another of slurmctld's metrics pages (`/metrics/scheduler`) from the same slurmctld."""
        return (await self._get(path))[0]

    async def _get(self, path: str) -> tuple[str, int]:
        """The text of `path` and its size in bytes; SlurmMetricsError saying why not."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        url = self.base + path
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._session.get(url, allow_redirects=False, proxy=self.proxy) as response:
                    if response.status != 200:
                        raise SlurmMetricsUnavailable(f"HTTP {response.status}", endpoint=path)
                    body = await self._capped(response)
        except TimeoutError:
            raise SlurmMetricsTimeout(f"no answer within {self.timeout_s} s", endpoint=path) from None
        except aiohttp.ClientError as exc:
            raise SlurmMetricsUnavailable(f"{type(exc).__name__}: {exc}", endpoint=path) from None
        if len(body) > self.max_bytes:
            raise SlurmMetricsDecodeError(f"answer larger than {self.max_bytes} bytes", endpoint=path)
        try:
            return body.decode("utf-8"), len(body)
        except UnicodeDecodeError:
            raise SlurmMetricsDecodeError("answer is not UTF-8 text", endpoint=path) from None

    async def _capped(self, response: aiohttp.ClientResponse) -> bytes:
        """The body, read no further than one byte past the cap (a lying server cannot fill memory)."""
        chunks: list[bytes] = []
        size = 0
        while size <= self.max_bytes:
            chunk = await response.content.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
