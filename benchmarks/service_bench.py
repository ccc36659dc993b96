"""What the in-process service benchmarks share (benchmarks/maintenance.py, benchmarks/partitions.py): a real
Slurm 26.05 sandbox, the Kubernetes API emulator with one node-bound Node per Slurm node, the syncer's
service in this process, and the command line that runs one and writes DIR/results.json."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.run import progress
from syncer.app.service import ServiceConfig, SyncerService
from syncer.kube.client import KubeClient
from syncer.model.keys import Keys
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox, up
from syncer.testing.sandbox.config import sim_node_names

CONFIG = ServiceConfig(
    slurm_poll_interval_s=1.0,
    leader_election=False,
    listen_host="127.0.0.1",
    listen_port=None,
)
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is ready"}


@dataclass(frozen=True)
class Bench:
    sandbox: Sandbox
    kube: KubeApiEmulator
    names: list[str]  # the Slurm nodes, each bound to the Node f"host-{name}"
    reader: SlurmClient  # the benchmark's own reads, apart from the syncer's counted requests
    service: SyncerService


@asynccontextmanager
async def service_bench(
    directory: Path,
    nodes: int,
    config: ServiceConfig,
    *,
    labels: Callable[[str], dict[str, str]] | None = None,
    ready: bool = False,
    slurm_conf: str = "",
) -> AsyncIterator[Bench]:
    """The sandbox with `nodes` CLOUD nodes (`slurm_conf` lines added, then a reconfigure), `nodes` Nodes
    (each with `labels(name)` beside the binding label; `ready`: with a Ready condition), and the service
    started and ready. Everything is stopped on the way out."""
    progress(
        f"sandbox: Slurm 26.05 with {nodes} CLOUD nodes{', ' + slurm_conf.strip() if slurm_conf else ''}"
    )
    sandbox = up(directory / "slurm", nodes=nodes, slurm="26.05")
    if slurm_conf:
        with sandbox.slurm_conf.open("a") as conf:
            conf.write(slurm_conf)
        sandbox.scontrol("reconfigure")
    kube = KubeApiEmulator()
    await kube.start()
    names = sim_node_names(nodes)
    for name in names:
        extra = labels(name) if labels else {}
        body = {"metadata": {"name": f"host-{name}", "labels": {Keys.NODE_NAME_LABEL: name, **extra}}}
        kube.create("", "v1", "nodes", {**body, "status": {"conditions": [READY]}} if ready else body)
    reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    await reader.start()
    kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
    slurm = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    client = await KubeClient.from_config(str(kubeconfig), qps=500, burst=1000)
    service = SyncerService(slurm, client, config)
    try:
        await service.start()
        await service.wait_ready(300)
        yield Bench(sandbox, kube, names, reader, service)
    finally:
        await service.stop()
        await reader.close()
        await kube.stop()
        sandbox.down()


def requests_to(service: SyncerService, prefix: str) -> dict[str, int]:
    """The syncer's Slurm requests so far whose endpoint starts with `prefix`, by endpoint."""
    counts: dict[str, int] = {}
    for (endpoint, _status), count in service.slurm.stats.requests.items():
        if endpoint.startswith(prefix):
            counts[endpoint] = counts.get(endpoint, 0) + count
    return counts


def main(
    doc: str,
    run: Callable[[argparse.Namespace, Path], Coroutine[Any, Any, dict[str, Any]]],
    arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """`--nodes`, `--out` and the script's own `arguments`; runs `run(args, a temporary directory)`, prints
    its results and writes them to DIR/results.json."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None)
    if arguments:
        arguments(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        results = asyncio.run(run(args, Path(tmp)))
    return report(results, args.out)


def report(results: dict[str, Any], out: Path | None) -> int:
    """Print the figures, and write them to OUT/results.json with --out."""
    print(json.dumps(results, indent=2))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0
