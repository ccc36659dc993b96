"""`slurm-syncer sandbox up|down|env|scontrol`: a real Slurm on this machine for the demo and tests."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from syncer.testing.sandbox import Sandbox, SandboxError, load, up

DEFAULT_DIR = Path(".sandbox/default")


def _up(args: argparse.Namespace) -> int:
    sandbox = up(args.dir, nodes=args.nodes, rest_port=args.port)
    print(sandbox.exports())
    print(f"sandbox: running in {sandbox.directory} with {sandbox.nodes} CLOUD nodes", file=sys.stderr)
    return 0


def _running(directory: Path) -> Sandbox:
    sandbox = load(directory)
    if sandbox is None or not sandbox.pids:
        raise SandboxError(
            f"no running sandbox in {directory.resolve()}: start one with 'slurm-syncer sandbox up'"
        )
    return sandbox


def _down(args: argparse.Namespace) -> int:
    sandbox = load(args.dir)
    if sandbox is None or not sandbox.pids:
        print(f"sandbox: nothing running in {args.dir.resolve()}", file=sys.stderr)
        return 0
    sandbox.down()
    print(f"sandbox: stopped everything started in {sandbox.directory}", file=sys.stderr)
    return 0


def _env(args: argparse.Namespace) -> int:
    sandbox = _running(args.dir)
    print(sandbox.exports())
    return 0


def _scontrol(args: argparse.Namespace) -> int:
    sandbox = _running(args.dir)
    result = sandbox.run("scontrol", *args.args)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except SandboxError as exc:
            print(f"slurm-syncer sandbox: {exc}", file=sys.stderr)
            return 1

    return run


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("sandbox", help="a real Slurm 24.11 sandbox on this machine (root)")
    actions = parser.add_subparsers(dest="sandbox_action", metavar="ACTION", required=True)

    def with_dir(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--dir", type=Path, default=DEFAULT_DIR, help=f"instance directory (default {DEFAULT_DIR})"
        )

    p_up = actions.add_parser("up", help="build (once) and start slurmctld, slurmd and slurmrestd")
    with_dir(p_up)
    p_up.add_argument("--nodes", type=int, default=100, help="simulated CLOUD nodes (default 100)")
    p_up.add_argument("--port", type=int, default=None, help="slurmrestd port (default: a free one)")
    p_up.set_defaults(func=_guard(_up))
    p_down = actions.add_parser("down", help="stop what 'up' started")
    with_dir(p_down)
    p_down.set_defaults(func=_guard(_down))
    p_env = actions.add_parser("env", help="print the shell export lines again")
    with_dir(p_env)
    p_env.set_defaults(func=_guard(_env))
    p_sc = actions.add_parser("scontrol", help="run scontrol inside the sandbox")
    with_dir(p_sc)
    p_sc.add_argument("args", nargs=argparse.REMAINDER)
    p_sc.set_defaults(func=_guard(_scontrol))
