"""What the syncer lists at start with the chart's defaults when the cluster runs many other pods: bytes
from the API server (counted on the wire, in front of the emulator) and pods in the answers, until its
caches are synced. Issue 37: an empty `pod-selector` listed and watched every pod of the cluster.

    python benchmarks/pod_selector.py --unrelated 10000 --slurmd 100

Compared: the chart's `config.pod-selector` (values.yaml) against an empty one (the chart's default
before), with the chart's `config.node-name-label` and `config.namespace` both times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.wire import WireCounter
from syncer.kube import KubeCache, KubeClient
from syncer.model.naming import SlurmNameRule
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi.emulator import SeedOptions

VALUES = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "slurm-syncer" / "values.yaml"


def chart_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(VALUES.read_text())["config"]
    return config


def seed(emulator: KubeApiEmulator, slurmd: int, unrelated: int) -> None:
    emulator.seed(SeedOptions(nodes=slurmd, slurmd_pods=True))
    emulator.create("", "v1", "namespaces", {"metadata": {"name": "apps"}})
    for index in range(unrelated):  # a web shop's pods: labels, one container, on the same Nodes
        pod = {
            "metadata": {
                "name": f"web-{index:05d}",
                "labels": {
                    "app.kubernetes.io/name": "web",
                    "app.kubernetes.io/instance": f"shop-{index % 50}",
                },
            },
            "spec": {
                "nodeName": f"node-{index % slurmd:04d}",
                "containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 8080}]}],
            },
        }
        emulator.create("", "v1", "pods", pod, namespace="apps")


async def listed_at_start(
    kubeconfig: Path, wire: WireCounter, selector: str, config: dict[str, Any]
) -> dict[str, Any]:
    before = wire.snapshot()
    started = time.perf_counter()
    client = await KubeClient.from_config(str(kubeconfig), qps=50, burst=100)
    names = SlurmNameRule(tuple(config["node-name-label"]))
    cache = KubeCache(client, namespace=config["namespace"], names=names, pod_selector=selector)
    cache.start()
    try:
        await cache.wait_synced()
        seconds = time.perf_counter() - started
        cost = wire.snapshot() - before
        # the pods the informer's list carried: the same query, counted
        query = (
            {"labelSelector": selector or names.server_selector}
            if (selector or names.server_selector)
            else {}
        )
        path = f"/api/v1/namespaces/{config['namespace']}/pods" if config["namespace"] else "/api/v1/pods"
        listed = await client.get(path, params=query)
        return {
            "pod_selector": selector,
            "bytes_down": cost["bytes_down"],
            "requests": cost["requests"],
            "pods_listed": len(listed.get("items") or []),
            "pods_kept": len(cache.pods.items),
            "seconds_to_sync": round(seconds, 2),
        }
    finally:
        await cache.stop()
        await client.close()


async def main_async(args: argparse.Namespace) -> int:
    config = chart_config()
    emulator = KubeApiEmulator()
    await emulator.start()
    try:
        seed(emulator, args.slurmd, args.unrelated)
        async with WireCounter(emulator.url) as wire:
            with tempfile.TemporaryDirectory() as tmp:
                kubeconfig = Path(tmp) / "kubeconfig"
                emulator.write_kubeconfig(kubeconfig)
                text = kubeconfig.read_text().replace(emulator.url, wire.url)
                kubeconfig.write_text(text)
                rows = [
                    await listed_at_start(kubeconfig, wire, sel, config)
                    for sel in ("", config["pod-selector"])
                ]
    finally:
        await emulator.stop()
    print(json.dumps({"slurmd_pods": args.slurmd, "unrelated_pods": args.unrelated, "runs": rows}, indent=2))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unrelated", type=int, default=10_000, help="pods that are not slurmd")
    parser.add_argument("--slurmd", type=int, default=100, help="Nodes, each with a labelled slurmd pod")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
