"""Maintenance window over many nodes: N Nodes get the same window at once -> one Slurm reservation.

    python benchmarks/maintenance.py --nodes 1000 --out results/maintenance-1k

Real Slurm 26.05 sandbox (N CLOUD nodes), the Kubernetes API emulator with N node-bound Nodes, and the
syncer's service in this process. Measures the seconds from annotating every Node until Slurm lists one
reservation over all N nodes, the reservation requests that took, until every Node shows
SlurmMaintenanceReserved, and the same for the window's removal. Prints the figures and writes
DIR/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from syncer.app.service import ServiceConfig, SyncerService
from syncer.kube.client import KubeClient
from syncer.model.keys import Keys
from syncer.plan.maintenance import PREFIX
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.sync.options import SyncOptions
from syncer.testing.demo import wait
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import up
from syncer.testing.sandbox.config import sim_node_names

CONFIG = ServiceConfig(
    options=SyncOptions(),
    slurm_poll_interval_s=1.0,
    leader_election=False,
    listen_host="127.0.0.1",
    listen_port=None,
)


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def reservation_requests(service: SyncerService) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (endpoint, _status), count in service.slurm.stats.requests.items():
        if endpoint.startswith("reservation_"):
            counts[endpoint] = counts.get(endpoint, 0) + count
    return counts


async def run(nodes: int, directory: Path) -> dict[str, Any]:
    progress(f"sandbox: Slurm 26.05 with {nodes} CLOUD nodes")
    sandbox = up(directory / "slurm", nodes=nodes, slurm="26.05")
    kube = KubeApiEmulator()
    await kube.start()
    names = sim_node_names(nodes)
    for name in names:
        kube.create(
            "", "v1", "nodes", {"metadata": {"name": f"host-{name}", "labels": {Keys.NODE_NAME_LABEL: name}}}
        )
    reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    await reader.start()
    kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
    slurm = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    client = await KubeClient.from_config(str(kubeconfig), qps=500, burst=1000)
    service = SyncerService(slurm, client, replace(CONFIG))
    results: dict[str, Any] = {"nodes": nodes, "slurm": sandbox.slurm_version}
    try:
        await service.start()
        await service.wait_ready(120)
        # the engine's first pass writes every Node's Slurm state: measured windows start after it
        await wait(
            lambda: all(
                Keys.STATE in (kube.node(f"host-{n}") or {}).get("metadata", {}).get("annotations", {})
                for n in names
            ),
            "the first pass",
            300,
        )
        await service.engine.queue.wait_idle()
        start = datetime.fromtimestamp(int(time.time()) + 3600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        window = f"{start}/PT4H"

        async def one_over_all() -> bool:
            ours = [r for r in await reader.list_reservations() if r.name.startswith(PREFIX)]
            return len(ours) == 1 and len(ours[0].nodes) == nodes

        def annotate_all(value: str | None) -> None:
            annotation = {"metadata": {"annotations": {Keys.MAINTENANCE_WINDOW: value}}}
            for name in names:
                kube.patch("", "v1", "nodes", f"host-{name}", annotation)

        def shown(status: str | None) -> bool:
            for name in names:
                obj = kube.node(f"host-{name}") or {}
                found = [
                    c
                    for c in (obj.get("status") or {}).get("conditions") or []
                    if c["type"] == Keys.CONDITION_MAINTENANCE
                ]
                if (found[0]["status"] if found else None) != status:
                    return False
            return True

        progress(f"annotating {nodes} Nodes with {window}")
        annotate_all(window)
        results["annotate_to_reservation_s"] = await wait(one_over_all, "one reservation over all nodes", 300)
        # the syncer's own count (cheap to poll beside it), then the API's objects once
        results["annotate_to_all_conditions_s"] = await wait(
            lambda: service.maintenance.summary.reserved == nodes, "every condition True", 300
        )
        assert shown("True"), "the API shows every SlurmMaintenanceReserved condition True"
        results["requests_to_make"] = reservation_requests(service)
        progress(f"removing the window from {nodes} Nodes")
        annotate_all(None)

        async def none_left() -> bool:
            return not [r for r in await reader.list_reservations() if r.name.startswith(PREFIX)]

        results["removal_to_no_reservation_s"] = await wait(none_left, "the reservation removed", 300)
        results["removal_to_all_conditions_s"] = await wait(
            lambda: service.maintenance.summary.reserved == 0, "every condition False", 300
        )
        await wait(lambda: shown("False"), "the API's conditions False", 60)
        results["requests_total"] = reservation_requests(service)
    finally:
        await service.stop()
        await reader.close()
        await kube.stop()
        sandbox.down()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-maint-") as tmp:
        results = asyncio.run(run(args.nodes, Path(tmp)))
    return report(results, args.out)


def report(results: dict[str, Any], out: Path | None) -> int:
    """Print the figures, and write them to OUT/results.json with --out."""
    print(json.dumps(results, indent=2))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
