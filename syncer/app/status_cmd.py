"""`slurm-syncer status`: what the live systems say about every bound Slurm node."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict, dataclass

from syncer.app import settings as settings_mod
from syncer.app.wiring import kube_client, slurm_client, sync_options
from syncer.kube.cache import KubeCache
from syncer.kube.errors import KubeError
from syncer.model.keys import CORDONED_BY_SLURM, Keys
from syncer.slurm.errors import SlurmError
from syncer.sync.binding import node_slurm, resolve
from syncer.sync.decide import drift


@dataclass(frozen=True)
class Row:
    slurm_node: str
    binding: str
    pod: str
    kube_node: str
    slurm_state: str
    reason: str
    cordon: str  # "", "yes", or "slurm" (the syncer's own cordon)
    drift: bool
    conflict: str = ""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help="table of bound Slurm nodes from the live systems",
        description="Show every Slurm node bound to a pod or Node: states on both sides and drift.",
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--all", action="store_true", help="also list unbound Slurm nodes")
    settings_mod.add_arguments(parser)
    parser.set_defaults(func=run)


async def collect(settings: settings_mod.Settings, include_unbound: bool = False) -> list[Row]:
    slurm = slurm_client(settings)
    kube = await kube_client(settings)
    cache = KubeCache(kube, namespace=settings.namespace, bind_by_node_name=settings.bind_by_node_name)
    try:
        await slurm.start()
        listing = await slurm.list_all_nodes()
        cache.start()
        await asyncio.wait_for(cache.wait_synced(), 60)
    finally:
        await cache.stop()
        await slurm.close()
        await kube.close()
    options = sync_options(settings)
    slurm_nodes = {n.name: n for n in listing.nodes}
    names = sorted(cache.slurm_names() | (set(slurm_nodes) if include_unbound else set()))
    rows = []
    now = time.time()
    for name in names:
        binding = resolve(name, cache)
        node = slurm_nodes.get(name)
        kube_node = binding.node
        cordon = ""
        if kube_node is not None and kube_node.unschedulable:
            cordon = "slurm" if kube_node.annotations.get(Keys.CORDONED_BY) == CORDONED_BY_SLURM else "yes"
        drifted = binding.bound and drift(
            node, binding.pod, kube_node, options, now, node_slurm=node_slurm(binding, cache, slurm_nodes)
        )
        rows.append(
            Row(
                slurm_node=name,
                binding=binding.mode,
                pod=binding.pod.key if binding.pod else "",
                kube_node=kube_node.name if kube_node else "",
                slurm_state=node.state_text if node else "(missing)",
                reason=node.reason if node else "",
                cordon=cordon,
                drift=drifted,
                conflict=binding.conflict,
            )
        )
    return rows


def render(rows: list[Row]) -> str:
    headers = ("SLURM NODE", "BINDING", "POD", "K8S NODE", "SLURM STATE", "REASON", "CORDON", "DRIFT")
    table = [headers] + [
        (
            r.slurm_node, r.binding, r.pod or "-", r.kube_node or "-", r.slurm_state, (r.reason or "-")[:48],
            r.cordon or "-", "yes" if r.drift else "no",
        )
        for r in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]
    drifted = sum(r.drift for r in rows)
    conflicts = [r for r in rows if r.conflict]
    lines.append(f"{len(rows)} nodes, {drifted} drifting, {len(conflicts)} conflicting")
    lines += [f"conflict: {r.conflict}" for r in conflicts]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_mod.load(args, os.environ)
    except settings_mod.SettingsError as exc:
        print(f"slurm-syncer status: {exc}", file=sys.stderr)
        return 2
    try:
        rows = asyncio.run(collect(settings, include_unbound=args.all))
    except (SlurmError, KubeError, TimeoutError) as exc:
        print(f"slurm-syncer status: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(render(rows))
    return 0
