"""`slurm-syncer` command line: one sub-command per module, each registering itself."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from syncer import __version__
from syncer.app.logs import FORMATS, LEVELS, LogSettingError, configure_logging, log_settings


class CommandModule(Protocol):
    def register(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


# Each module's register() adds its sub-command and sets `func` (args -> exit code).
COMMAND_MODULES: tuple[str, ...] = (
    "syncer.app.run_cmd",
    "syncer.app.status_cmd",
    "syncer.app.check_cmd",
    "syncer.app.version_cmd",
    "syncer.app.prolog_cmd",
)
# Local tools built on the emulator and the sandbox: imported only when their own command runs, so
# the daemon never loads test code (import-linter cannot see an import by name).
TOOL_COMMANDS: dict[str, tuple[str, str]] = {
    "sandbox": (
        "syncer.testing.sandbox_cli",
        "run a real Slurm (24.11 or 26.05) in a chroot on this machine",
    ),
    "kubeapi": (
        "syncer.testing.kubeapi_cli",
        "serve a Kubernetes API emulator (try the syncer without a cluster)",
    ),
    "demo": ("syncer.testing.demo", "run everything locally (Slurm sandbox + Kubernetes emulator), narrated"),
}
# The container image ships the daemon only (the Dockerfile leaves syncer/testing out): there the local
# tools say where to get them instead of failing with an ImportError.
TOOLS_MISSING = (
    "slurm-syncer {command}: not in this installation. The container image ships the daemon only "
    "(run, status, check, version): the Slurm sandbox, the Kubernetes API emulator and the demo come with a "
    "checkout of the source. There: scripts/bootstrap (or pip install -e '.[dev]'), then "
    ".venv/bin/slurm-syncer {command} --help"
)
_GLOBAL_WITH_VALUE = ("--log-format", "--log-level")


def tools_installed() -> bool:
    """Whether syncer.testing (the sandbox, the emulator, the demo) is importable; asked only when one
    of its commands runs, so the daemon's commands never load it."""
    return importlib.util.find_spec("syncer.testing") is not None


def command_of(argv: Sequence[str]) -> str | None:
    """The sub-command named in `argv` (the first word that is not a global option or its value)."""
    words = iter(argv)
    for word in words:
        if word in _GLOBAL_WITH_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: every production command, and of the local tools only the one named
    (the others are listed with their help line but not imported)."""
    parser = argparse.ArgumentParser(
        prog="slurm-syncer",
        description="Keep Slurm and Kubernetes in agreement about the same machines.",
    )
    parser.add_argument("--version", action="version", version=f"slurm-syncer {__version__}")
    add_log_arguments(parser, None)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        cast(CommandModule, importlib.import_module(name)).register(subparsers)
    wanted = command_of(sys.argv[1:] if argv is None else argv)
    for command, (module, summary) in TOOL_COMMANDS.items():
        if command == wanted and tools_installed():
            cast(CommandModule, importlib.import_module(module)).register(subparsers)
        else:
            subparsers.add_parser(command, help=summary)
    for subparser in subparsers.choices.values():
        # also after the sub-command (`run --log-level debug`, the chart's extraArgs); SUPPRESS: a
        # sub-command that was not given them leaves the global ones standing
        add_log_arguments(subparser.add_argument_group("logging"), argparse.SUPPRESS)
    return parser


def add_log_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, default: object) -> None:
    parser.add_argument(
        "--log-format",
        metavar="|".join(FORMATS),
        default=default,
        help="log format; auto: console on a terminal, JSON otherwise [env SLURM_SYNCER_LOG_FORMAT]",
    )
    parser.add_argument(
        "--log-level",
        metavar="|".join(LEVELS),
        default=default,
        help="least severe level logged (default info) [env SLURM_SYNCER_LOG_LEVEL]",
    )


def main(argv: Sequence[str] | None = None) -> int:
    wanted = command_of(sys.argv[1:] if argv is None else argv)
    if wanted in TOOL_COMMANDS and not tools_installed():  # whatever its arguments: this is the answer
        print(TOOLS_MISSING.format(command=wanted), file=sys.stderr)
        return 2
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        args.log_level, args.log_format = log_settings(args.log_level, args.log_format, os.environ)
    except LogSettingError as exc:
        print(f"slurm-syncer: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.log_format, args.log_level)
    func = cast(Callable[[argparse.Namespace], int] | None, getattr(args, "func", None))
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return func(args)
    except KeyboardInterrupt:
        return 130
