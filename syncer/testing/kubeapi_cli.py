"""`slurm-syncer kubeapi`: serve a seeded Kubernetes API emulator (or, with --real, the real API
server built from Debian's packages) until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import tempfile
import threading
from pathlib import Path

from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions, bundled_crds
from syncer.testing.kubeapi.emulator import nodeset_manifest
from syncer.testing.kubeapi_real import RealKubeApi, RealKubeApiError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "kubeapi",
        help="serve a Kubernetes API emulator (for trying the syncer and kubectl without a cluster)",
        description="Serve a seeded Kubernetes API emulator on 127.0.0.1 until Ctrl-C. See docs/emulator.md.",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="serve the real Kubernetes API server (CRDs and custom resources only; built on first use, "
        "about 5 min) instead of the emulator",
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    parser.add_argument("--nodes", type=int, default=10, help="Kubernetes Nodes to create (default 10)")
    parser.add_argument("--node-prefix", default="node-", help="Node name prefix (default node-)")
    parser.add_argument("--namespace", default="slurm", help="namespace for the NodeSet (default slurm)")
    parser.add_argument(
        "--nodeset", default="", help="also create a NodeSet of this name, one replica per Node"
    )
    parser.add_argument("--slurmd-pods", action="store_true", help="one labelled slurmd pod per Node")
    parser.add_argument("--token", default=None, help="require this bearer token (default: none)")
    parser.add_argument(
        "--kubeconfig-out",
        type=Path,
        default=Path("kubeconfig.emulator"),
        help="where to write the kubeconfig",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.nodes < 0 or not 0 <= args.port < 65536:
        print("kubeapi: --nodes must be >= 0 and --port within 0..65535", file=sys.stderr)
        return 2
    if args.real:
        return _serve_real(args)
    try:
        return asyncio.run(_serve(args))
    except OSError as exc:
        message = f"kubeapi: cannot listen on 127.0.0.1:{args.port}: {exc.strerror} (pick another --port)"
        print(message, file=sys.stderr)
        return 1


async def _serve(args: argparse.Namespace) -> int:
    emulator = KubeApiEmulator(token=args.token)
    emulator.seed(
        SeedOptions(
            nodes=args.nodes,
            node_prefix=args.node_prefix,
            namespace=args.namespace,
            nodeset=args.nodeset,
            slurmd_pods=args.slurmd_pods,
        )
    )
    url = await emulator.start(port=args.port)
    await emulator.kubelet.settled()  # pods seeded above are Running before anyone is told to connect
    kubeconfig = emulator.write_kubeconfig(args.kubeconfig_out, namespace=args.namespace).resolve()
    print(f"kubeapi: serving {args.nodes} Nodes at {url}", flush=True)
    print(f"kubeapi: kubeconfig written to {kubeconfig}", flush=True)
    print(f"kubeapi: try  KUBECONFIG={kubeconfig} kubectl get nodes   (Ctrl-C stops)", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await emulator.stop()
        print("kubeapi: stopped", flush=True)
    return 0


def _serve_real(args: argparse.Namespace) -> int:
    if args.slurmd_pods or args.token:
        print(
            "kubeapi --real: the real server serves only CRDs and custom resources (no Pods) and accepts "
            "any token: drop --slurmd-pods and --token",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with tempfile.TemporaryDirectory(prefix="slurm-syncer-kubeapi-real-") as directory:
        server = RealKubeApi(Path(directory), port=args.port)
        try:
            url = server.start()
            server.install_crds(bundled_crds())
            if args.nodeset:
                path = f"/apis/slurm-syncer.dev/v1alpha1/namespaces/{args.namespace}/nodesets"
                status, body = server.request("POST", path, nodeset_manifest(args.nodeset, args.nodes))
                if status != 201:
                    raise RealKubeApiError(
                        f"creating the NodeSet {args.nodeset} was refused ({status}): {body}"
                    )
        except RealKubeApiError as error:
            server.stop()
            print(f"kubeapi --real: {error}", file=sys.stderr)
            return 1
        try:
            kubeconfig = server.write_kubeconfig(args.kubeconfig_out, namespace=args.namespace).resolve()
            print(f"kubeapi: serving the real API server {server.version} (etcd, CRDs) at {url}", flush=True)
            print(f"kubeapi: kubeconfig written to {kubeconfig}", flush=True)
            print(f"kubeapi: try  KUBECONFIG={kubeconfig} kubectl get nodesets   (Ctrl-C stops)", flush=True)
            stop.wait()
        finally:
            server.stop()
            print("kubeapi: stopped", flush=True)
    return 0
