"""Maintenance window over many nodes: N Nodes get the same window at once -> one Slurm reservation.

    python benchmarks/maintenance.py --nodes 1000 --out benchmarks/results/maintenance-1k

Real Slurm 26.05 sandbox (N CLOUD nodes), the Kubernetes API emulator with N node-bound Nodes, and the
syncer's service in this process. Measures the seconds from annotating every Node until Slurm lists one
reservation over all N nodes, the reservation requests that took, until every Node shows
SlurmMaintenanceReserved, and the same for the window's removal. Prints the figures and writes
DIR/results.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.run import progress
from benchmarks.service_bench import CONFIG, main, requests_to, service_bench
from syncer.controllers.maintenance.plan import PREFIX
from syncer.model.keys import Keys
from syncer.testing.demo import wait


async def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    nodes: int = args.nodes
    async with service_bench(directory, nodes, CONFIG) as bench:
        kube, names, reader, service = bench.kube, bench.names, bench.reader, bench.service
        results: dict[str, Any] = {"nodes": nodes, "slurm": bench.sandbox.slurm_version}
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
        results["requests_to_make"] = requests_to(service, "reservation_")
        progress(f"removing the window from {nodes} Nodes")
        annotate_all(None)

        async def none_left() -> bool:
            return not [r for r in await reader.list_reservations() if r.name.startswith(PREFIX)]

        results["removal_to_no_reservation_s"] = await wait(none_left, "the reservation removed", 300)
        results["removal_to_all_conditions_s"] = await wait(
            lambda: service.maintenance.summary.reserved == 0, "every condition False", 300
        )
        await wait(lambda: shown("False"), "the API's conditions False", 60)
        results["requests_total"] = requests_to(service, "reservation_")
        return results


if __name__ == "__main__":
    sys.exit(main(__doc__ or "", run))
