"""`slurm-syncer` command line: one sub-command per module, each registering itself."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from syncer import __version__
from syncer.app.logs import configure_logging


class CommandModule(Protocol):
    def register(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


# Each module's register() adds its sub-command and sets `func` (args -> exit code).
COMMAND_MODULES: tuple[str, ...] = (
    "syncer.app.run_cmd",
    "syncer.app.status_cmd",
    "syncer.app.check_cmd",
    "syncer.testing.sandbox_cli",
    "syncer.testing.kubeapi_cli",
    "syncer.testing.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slurm-syncer",
        description="Keep Slurm and Kubernetes in agreement about the same machines.",
    )
    parser.add_argument("--version", action="version", version=f"slurm-syncer {__version__}")
    parser.add_argument(
        "--log-format",
        choices=("auto", "json", "console"),
        default="auto",
        help="log format (default: console on a terminal, JSON otherwise)",
    )
    parser.add_argument("--log-level", default="info", help="debug, info, warning or error")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        cast(CommandModule, importlib.import_module(name)).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    func = cast(Callable[[argparse.Namespace], int] | None, getattr(args, "func", None))
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return func(args)
    except KeyboardInterrupt:
        return 130
