"""`slurm-syncer status`: what the live systems say about every bound Slurm node."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict

from syncer.app import settings as settings_mod
from syncer.app.wiring import kube_client, slurm_client, sync_options
from syncer.kube.cache import KubeCache
from syncer.kube.errors import KubeError
from syncer.model.naming import SlurmNameRule
from syncer.slurm.errors import SlurmError
from syncer.sync.drift import Row, drift_rows


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
    cache = KubeCache(
        kube,
        namespace=settings.namespace,
        bind_by_node_name=settings.bind_by_node_name,
        names=SlurmNameRule(settings.node_name_label),
        pod_selector=settings.pod_selector,
    )
    try:
        await slurm.start()
        listing = await slurm.list_all_nodes()
        cache.start()
        await asyncio.wait_for(cache.wait_synced(), 60)
    finally:
        await cache.stop()
        await slurm.close()
        await kube.close()
    slurm_nodes = {n.name: n for n in listing.nodes}
    return drift_rows(
        cache, slurm_nodes, sync_options(settings), time.time(), include_unbound=include_unbound
    )


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
