"""`slurm-syncer status`: what the live systems say about every bound Slurm node."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import asdict

from syncer.app import settings as settings_mod
from syncer.app.output import (
    EXIT_DRIFT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    add_output_argument,
    dump,
    load_settings,
)
from syncer.app.wiring import kube_client, slurm_client
from syncer.controllers.sync.drift import Row, drift_rows
from syncer.kube.cache import KubeCache
from syncer.kube.errors import KubeError
from syncer.model.cluster import LABEL
from syncer.model.naming import SlurmNameRule
from syncer.slurm.errors import SlurmError

# the options status's help lists: how to reach both sides and which objects bind. The daemon's tuning
# (and the sync rules drift is judged by) still come from the environment or --config, as for `run`.
CONNECTION_OPTIONS = (
    "slurm-url", "slurm-token-file", "slurm-jwt-key-file", "slurm-jwt-user", "slurm-api-version",
    "slurm-timeout", "kubeconfig", "namespace", "pod-selector", "node-name-label", "bind-by-node-name",
    "cluster-name",
)  # fmt: skip
OTHERS_FROM_ENV = (
    "Every other option of `slurm-syncer run` is read from its SLURM_SYNCER_* environment variable or "
    "--config, as `run` reads it: in the syncer's container (kubectl exec) they are the daemon's."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help="table of bound Slurm nodes from the live systems",
        description="Show every Slurm node bound to a pod or Node: states on both sides and drift. Exit "
        f"code {EXIT_DRIFT} when some node drifts, {EXIT_FAILED} when a side cannot be read. "
        f"Drift is judged by the daemon's sync options. {OTHERS_FROM_ENV}",
    )
    add_output_argument(parser, "table")
    parser.add_argument("--all", action="store_true", help="also list unbound Slurm nodes")
    parser.add_argument(
        "--drifting", action="store_true", help="only the nodes that drift, with what the syncer would do"
    )
    parser.add_argument("--no-headers", action="store_true", help="table without its header and summary")
    settings_mod.add_arguments(parser, CONNECTION_OPTIONS)
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
        cluster=settings.cluster_name_resolved(),  # the pods the daemon keeps: no other release's
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
        cache, slurm_nodes, settings.controller_options("sync"), time.time(), include_unbound=include_unbound
    )


def render(rows: list[Row], *, drifting: bool = False, headers: bool = True, cluster: str = "") -> str:
    columns = ["SLURM NODE", "BINDING", "POD", "K8S NODE", "SLURM STATE", "REASON", "CORDON", "DRIFT"]
    table = [
        [
            r.slurm_node, r.binding, r.pod or "-", r.kube_node or "-", r.slurm_state, (r.reason or "-")[:48],
            r.cordon or "-", "yes" if r.drift else "no",
        ] + ([r.would or "-"] if drifting else [])
        for r in rows
    ]  # fmt: skip
    if drifting:
        columns.append("WOULD")
    if headers:
        table.insert(0, columns)
    widths = [max((len(row[i]) for row in table), default=0) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]
    if headers:
        drifted = sum(r.drift for r in rows)
        conflicts = [r for r in rows if r.conflict]
        release = f" (release {cluster}: {LABEL}={cluster})" if cluster else ""
        lines.append(f"{len(rows)} nodes, {drifted} drifting, {len(conflicts)} conflicting{release}")
        lines += [f"conflict: {r.conflict}" for r in conflicts]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    settings = load_settings("status", args)
    if settings is None:
        return EXIT_USAGE
    try:
        rows = asyncio.run(collect(settings, include_unbound=args.all))
    except (SlurmError, KubeError, TimeoutError) as exc:
        print(f"slurm-syncer status: {exc}", file=sys.stderr)
        return EXIT_FAILED
    shown = [r for r in rows if r.drift] if args.drifting else rows
    if args.output == "table":
        text = render(
            shown,
            drifting=args.drifting,
            headers=not args.no_headers,
            cluster=settings.cluster_name_resolved(),
        )
        if text:  # --drifting --no-headers with no drift: nothing at all, as grep would print
            print(text)
    else:
        print(dump([asdict(r) for r in shown], args.output))
    return EXIT_DRIFT if any(r.drift for r in rows) else EXIT_OK
