"""Benchmark: a rack of Nodes relabelled at once -> every feature in Slurm. How long, and how many Slurm
requests it took (the group commit sends identical feature updates as one `POST /nodes/`).

    python benchmarks/features.py --nodes 1000 [--slurm 26.05]

The syncer runs in this process (SyncerService) beside the Kubernetes API emulator, against the real
Slurm sandbox with that many CLOUD nodes. Prints the measured figures; not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.run import seed
from syncer.app.service import ServiceConfig, SyncerService
from syncer.controllers.attributes.features import FeatureLabel
from syncer.controllers.attributes.options import AttributeOptions
from syncer.kube.client import KubeClient
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox, up
from syncer.testing.sandbox.config import sim_node_names

LABEL = "example.com/rack-gpu"
CONFIG = ServiceConfig(
    controllers={"attributes": AttributeOptions(feature_labels=(FeatureLabel.parse(LABEL),))},
    slurm_poll_interval_s=0.2,
    leader_election=False,
    listen_port=None,
)


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


async def all_show(reader: SlurmClient, names: list[str], feature: str, deadline_s: float) -> float:
    """Seconds until every node lists `feature` (one full node list per check)."""
    started = time.monotonic()
    while True:
        listing = {node.name: node for node in (await reader.list_all_nodes()).nodes}
        if all(feature in listing[name].features for name in names):
            return time.monotonic() - started
        if time.monotonic() - started > deadline_s:
            raise TimeoutError(f"not every node shows {feature} after {deadline_s} s")
        await asyncio.sleep(0.5)  # poll interval of the check (a full list loads slurmctld too)


UPDATES = ("node_update", "nodes_update")


def update_requests(slurm: SlurmClient) -> int:
    return sum(n for (endpoint, _), n in slurm.stats.requests.items() if endpoint in UPDATES)


def update_seconds(slurm: SlurmClient) -> float:
    return sum(slurm.stats.seconds.get(endpoint, 0.0) for endpoint in UPDATES)


async def relabel(
    kube: KubeApiEmulator, service: SyncerService, reader: SlurmClient, names: list[str], value: str
) -> dict[str, float]:
    requests_before, seconds_before = update_requests(service.slurm), update_seconds(service.slurm)
    bulk_before = service.context.slurm_writer.bulk.stats.bulk_requests
    started = time.monotonic()
    for name in names:
        kube.patch("", "v1", "nodes", f"k8s-{name}", {"metadata": {"labels": {LABEL: value}}})
    labelled_s = time.monotonic() - started
    seconds = labelled_s + await all_show(reader, names, f"k8s.rack-gpu:{value}", 300)
    return {
        "seconds": round(seconds, 2),
        "labelling_s": round(labelled_s, 2),
        "requests": update_requests(service.slurm) - requests_before,
        "bulk_requests": service.context.slurm_writer.bulk.stats.bulk_requests - bulk_before,
        "slurm_update_s": round(update_seconds(service.slurm) - seconds_before, 2),
    }


async def main_async(nodes: int, release: str | None) -> int:
    directory = Path(tempfile.mkdtemp(prefix="bench-features-"))
    sandbox: Sandbox = up(directory / "slurm", nodes=nodes, slurm=release)
    kube = KubeApiEmulator()
    await kube.start()
    names = sim_node_names(nodes)
    try:
        seed(kube, names)
        reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
        await reader.start()
        kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
        slurm = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
        client = await KubeClient.from_config(str(kubeconfig), qps=1000, burst=2000)
        service = SyncerService(slurm, client, replace(CONFIG))
        await service.start()
        try:
            await service.wait_ready(60)
            await service.engine.queue.wait_idle()  # the first status writes of every bound node are done
            progress(f"{nodes} bound nodes, Slurm {sandbox.slurm_version}; relabelling all of them, twice")
            first = await relabel(kube, service, reader, names, "h100")
            second = await relabel(kube, service, reader, names, "b200")
        finally:
            await service.stop()
            await reader.close()
        for name, figures in (("first label", first), ("relabel", second)):
            print(
                f"{name}: {nodes} Nodes -> all features in Slurm in {figures['seconds']} s "
                f"(of which {figures['labelling_s']} s patching the Nodes); {figures['requests']} Slurm "
                f"update requests ({figures['bulk_requests']} bulk) taking {figures['slurm_update_s']} s"
            )
    finally:
        await kube.stop()
        sandbox.down()
        shutil.rmtree(directory, ignore_errors=True)  # the sandbox's files: nothing left in /tmp per run
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--slurm", default=None, help="Slurm release (default $SLURM_SYNCER_SLURM_RELEASE)")
    args = parser.parse_args()
    return asyncio.run(main_async(args.nodes, args.slurm))


if __name__ == "__main__":
    sys.exit(main())
