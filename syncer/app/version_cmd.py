"""`slurm-syncer version`: this build, and the Slurm REST API versions it speaks."""

from __future__ import annotations

import argparse
import platform

from syncer import __version__
from syncer.app.output import EXIT_OK, add_output_argument, dump
from syncer.slurm.versions import VERSIONS


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "version", help="print the version", description="Print slurm-syncer's version."
    )
    add_output_argument(parser, "text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.output == "text":
        print(f"slurm-syncer {__version__}")
    else:
        about = {
            "version": __version__,
            "python": platform.python_version(),
            "slurm_rest_api_versions": [v.name for v in VERSIONS.values()],
        }
        print(dump(about, args.output))
    return EXIT_OK
