"""SlurmPartition CRs -> Slurm partitions: how soon a CR change shows in Slurm, and a label change moving
many nodes between two partitions.

    python benchmarks/partitions.py --nodes 1000 --changes 100 --out benchmarks/results/partitions-1k

Real Slurm 26.05 sandbox (N+1 CLOUD nodes, `ReconfigFlags=KeepPartInfo` added as the controller requires),
the Kubernetes API emulator with N+1 node-bound Nodes, and the syncer's service in this process with
`--partitions-enabled`. Measures (1) `--changes` times: the CR's `maxTime` patched -> Slurm's
`GET /partitions/` shows it (polled every 10 ms from this process: the figure includes up to one poll),
p50/p99/max, and the requests each took; (2) N Nodes relabelled from partition A's selector to B's (one
node is in both throughout: a selector matching nothing is refused) -> both partitions as wanted in
Slurm, seconds and partition requests. Prints the figures and writes DIR/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.maintenance import CONFIG as MAINTENANCE_CONFIG
from benchmarks.maintenance import progress
from syncer.app.service import SyncerService
from syncer.kube.client import KubeClient
from syncer.model.keys import Keys
from syncer.plan.partition_controller import PartitionOptions
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing.demo import wait
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import up
from syncer.testing.sandbox.config import sim_node_names

CONFIG = replace(MAINTENANCE_CONFIG, partitions=PartitionOptions(enabled=True))  # the same service, one more
GROUP, VERSION, PLURAL = "slurm-syncer.dev", "v1alpha1", "slurmpartitions"
POLL_S = 0.01


def partition_requests(service: SyncerService) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (endpoint, _status), count in service.slurm.stats.requests.items():
        if endpoint.startswith("partition"):
            counts[endpoint] = counts.get(endpoint, 0) + count
    return counts


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run(nodes: int, changes: int, directory: Path) -> dict[str, Any]:
    progress(f"sandbox: Slurm 26.05 with {nodes + 1} CLOUD nodes, ReconfigFlags=KeepPartInfo")
    sandbox = up(directory / "slurm", nodes=nodes + 1, slurm="26.05")
    with sandbox.slurm_conf.open("a") as slurm_conf:
        slurm_conf.write("ReconfigFlags=KeepPartInfo\n")
    sandbox.scontrol("reconfigure")
    kube = KubeApiEmulator()
    await kube.start()
    names = sim_node_names(nodes + 1)
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is ready"}
    for name in names:
        # names[0] is in both partitions throughout: a selector matching no Node is refused
        labels = {Keys.NODE_NAME_LABEL: name, "bench-pool": "a", "bench-b": str(name == names[0]).lower()}
        body = {"metadata": {"name": f"host-{name}", "labels": labels}, "status": {"conditions": [ready]}}
        kube.create("", "v1", "nodes", body)
    reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    await reader.start()
    kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
    slurm = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    client = await KubeClient.from_config(str(kubeconfig), qps=500, burst=1000)
    service = SyncerService(slurm, client, replace(CONFIG))
    results: dict[str, Any] = {"nodes": nodes, "slurm": sandbox.slurm_version, "changes": changes}

    async def partitions() -> dict[str, Any]:
        return {p.name: p for p in await reader.partition_states()}

    try:
        conf = await reader.slurmctld_conf()
        assert conf is not None and conf.keeps_partitions, "KeepPartInfo not in effect"
        await service.start()
        await service.wait_ready(300)
        selector = {"matchLabels": {"bench-pool": "a"}}
        spec = {"nodes": {"selector": selector}, "maxTime": 60}
        kube.create(GROUP, VERSION, PLURAL, {"metadata": {"name": "bench-a"}, "spec": spec})

        async def a_made() -> bool:
            found = (await partitions()).get("bench-a")
            return found is not None and len(found.nodes) == nodes + 1

        results["create_s"] = await wait(a_made, "partition bench-a over every node", 300)
        controller = service.partitions
        assert controller is not None
        await wait(lambda: getattr(controller.outcomes.get("bench-a"), "ready", False), "bench-a Ready", 60)

        progress(f"{changes} CR changes (maxTime), each until Slurm shows it")
        before = partition_requests(service)
        latencies = []
        for i in range(changes):
            wanted = 61 + i % 2  # 61, 62, 61, ...: each a change
            started = time.monotonic()
            kube.patch(GROUP, VERSION, PLURAL, "bench-a", {"spec": {"maxTime": wanted}})
            while (await partitions())["bench-a"].settings.max_time != wanted:  # noqa: ASYNC110 - polls Slurm
                await asyncio.sleep(POLL_S)
            latencies.append(time.monotonic() - started)
        after = partition_requests(service)
        results["cr_change_to_slurm_s"] = {
            "p50": round(statistics.median(latencies), 3), "p99": round(percentile(latencies, 0.99), 3),
            "max": round(max(latencies), 3), "min": round(min(latencies), 3), "n": len(latencies),
        }  # fmt: skip
        results["requests_per_change"] = {k: (after.get(k, 0) - before.get(k, 0)) / changes for k in after}

        progress(f"relabelling {nodes} Nodes from bench-a's selector to bench-b's")
        kube.create(GROUP, VERSION, PLURAL, {"metadata": {"name": "bench-b"}, "spec": {
            "nodes": {"selector": {"matchLabels": {"bench-b": "true"}}}}})  # fmt: skip
        await wait(lambda: _has(partitions, "bench-b", 1), "bench-b over its one host", 60)
        before = partition_requests(service)
        started = time.monotonic()
        for name in names[1:]:
            moved_labels = {"bench-pool": "b", "bench-b": "true"}
            kube.patch("", "v1", "nodes", f"host-{name}", {"metadata": {"labels": moved_labels}})
        results["relabel_patches_s"] = round(time.monotonic() - started, 3)

        async def moved() -> bool:
            found = await partitions()
            return len(found["bench-a"].nodes) == 1 and len(found["bench-b"].nodes) == nodes + 1

        await wait(moved, f"{nodes} nodes moved", 300)
        results["relabel_to_slurm_s"] = round(time.monotonic() - started, 3)
        after = partition_requests(service)
        results["relabel_requests"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    finally:
        await service.stop()
        await reader.close()
        await kube.stop()
        sandbox.down()
    return results


async def _has(partitions: Any, name: str, count: int) -> bool:
    found = (await partitions()).get(name)
    return found is not None and len(found.nodes) == count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-partitions-") as tmp:
        results = asyncio.run(run(args.nodes, args.changes, Path(tmp)))
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
