"""`slurm-syncer sandbox up|down|env|scontrol`: a real Slurm on this machine (needs root)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from syncer.testing.sandbox import DEFAULT_RELEASE, RELEASE_ENV, RELEASES, SandboxError, down, load, up

DEFAULT_DIR = Path(".sandbox/default")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sandbox",
        help="run a real Slurm 24.11 or 26.05 (slurmctld, slurmd, slurmrestd) in a chroot on this machine",
        description="A real Slurm (24.11 from Debian trixie, 26.05 from Debian sid) in a chroot on this "
        'machine (root needed). Try: eval "$(slurm-syncer sandbox up --slurm 26.05 --nodes 100)"',
    )
    actions = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)

    def with_dir(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument(
            "--dir", type=Path, default=DEFAULT_DIR, help=f"instance directory (default: {DEFAULT_DIR})"
        )
        return sub

    start = with_dir(actions.add_parser("up", help="start (or reuse) a sandbox and print shell exports"))
    start.add_argument("--nodes", type=int, default=100, help="simulated CLOUD nodes (default: 100)")
    start.add_argument(
        "--port", type=int, default=None, help="slurmrestd port on 127.0.0.1 (default: a free one)"
    )
    start.add_argument(
        "--slurm",
        choices=sorted(RELEASES),
        default=None,
        help=f"Slurm release (default: ${RELEASE_ENV}, else {DEFAULT_RELEASE})",
    )
    start.set_defaults(func=_up)
    with_dir(actions.add_parser("down", help="stop what 'up' started in --dir")).set_defaults(func=_down)
    with_dir(actions.add_parser("env", help="print the shell exports of a running sandbox")).set_defaults(
        func=_env
    )
    scontrol = with_dir(actions.add_parser("scontrol", help="run scontrol inside the sandbox"))
    scontrol.add_argument("args", nargs=argparse.REMAINDER, help="scontrol arguments, e.g. show nodes")
    scontrol.set_defaults(func=_scontrol)


def _fail(error: SandboxError) -> int:
    print(f"sandbox: error: {error}", file=sys.stderr)
    return 1


def _up(args: argparse.Namespace) -> int:
    try:
        sandbox = up(args.dir, nodes=args.nodes, rest_port=args.port, slurm=args.slurm)
    except SandboxError as error:
        return _fail(error)
    print(sandbox.exports())
    return 0


def _down(args: argparse.Namespace) -> int:
    try:
        stopped = down(args.dir)
    except SandboxError as error:
        return _fail(error)
    print(
        f"sandbox: {'stopped' if stopped else 'nothing was running in'} {args.dir.resolve()}", file=sys.stderr
    )
    return 0


def _running(directory: Path) -> int | None:
    """None when a complete sandbox runs in `directory`, else the exit code after explaining."""
    sandbox = load(directory)
    if sandbox is None or not sandbox.daemons:
        print(
            f"sandbox: no sandbox runs in {directory.resolve()}: start one with "
            f"'slurm-syncer sandbox up --dir {directory}'",
            file=sys.stderr,
        )
        return 1
    if not sandbox.healthy():
        print(
            f"sandbox: the sandbox in {directory.resolve()} is only partly running "
            f"({', '.join(sorted(sandbox.daemons))}): run 'slurm-syncer sandbox up --dir {directory}' "
            "to restart it",
            file=sys.stderr,
        )
        return 1
    return None


def _env(args: argparse.Namespace) -> int:
    try:
        failed = _running(args.dir)
        if failed is not None:
            return failed
        sandbox = load(args.dir)
    except SandboxError as error:
        return _fail(error)
    assert sandbox is not None
    print(sandbox.exports())
    return 0


def _scontrol(args: argparse.Namespace) -> int:
    try:
        sandbox = load(args.dir)
        if sandbox is None or "slurmctld" not in sandbox.daemons:
            print(
                f"sandbox: no slurmctld runs in {args.dir.resolve()}: run 'sandbox up' first", file=sys.stderr
            )
            return 1
        result = sandbox.run("scontrol", *args.args)
    except SandboxError as error:
        return _fail(error)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode
