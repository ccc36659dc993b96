"""Memory per action is bounded: the engine's bookkeeping and the metrics it feeds keep counters and
histograms, never one entry per action (a long-running daemon must not grow with its history)."""

from __future__ import annotations

import gc
import os
import time
import tracemalloc

from syncer.app.service import ServiceConfig, SyncerService
from syncer.kube.client import KubeClient
from syncer.slurm.auth import NoToken
from syncer.slurm.client import SlurmClient

KEYS = 1_000  # the same nodes act again and again, as in a long-running cluster


def act(service: SyncerService, count: int) -> None:
    """`count` acknowledged actions through the engine's one recording path (what every write calls),
    each with a change observed before it, so its propagation latency is measured and exported."""
    engine = service.engine
    for i in range(count):
        name = f"node{i % KEYS:05d}"
        engine._observed_at.setdefault(name, time.monotonic())
        kind, direction = ("drain", "k8s_to_slurm") if i % 2 else ("annotate", "slurm_to_k8s")
        engine._record(kind, direction, "ok", name)


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_100000_actions_hold_no_more_memory_than_1000() -> None:
    slurm, kube = SlurmClient("http://127.0.0.1:9", NoToken()), KubeClient("http://127.0.0.1:9")
    service = SyncerService(slurm, kube, ServiceConfig(listen_port=None))  # never started: no I/O
    try:
        act(service, 1_000)
        gc.collect()
        rss_1k = rss_bytes()
        act(service, 99_000)
        gc.collect()
        rss_100k = rss_bytes()
        # and the Python heap, exactly: what 10,000 more actions keep
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        act(service, 10_000)
        gc.collect()
        kept = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
        tracemalloc.stop()
        print(
            f"\nRSS after 1,000 actions {rss_1k / 1e6:.1f} MB, after 100,000 {rss_100k / 1e6:.1f} MB "
            f"({(rss_100k - rss_1k) / 1e6:+.2f} MB); 10,000 more keep {kept / 1e3:+.1f} kB of heap"
        )
        assert rss_100k - rss_1k < 5_000_000
        assert kept < 64_000, f"{kept} bytes kept by 10,000 actions"
    finally:
        await service.stop()
