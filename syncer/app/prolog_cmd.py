"""`slurm-syncer prolog`: prints the PrologSlurmctld script shipped in the package (issue 47), to be copied
where slurmctld runs (a ConfigMap for Slinky or Soperator: docs/operations.md)."""

from __future__ import annotations

import argparse
from importlib import resources

from syncer.app.output import EXIT_OK

SCRIPT = "slurm-syncer-prolog"


def script() -> str:
    return (resources.files("syncer.app") / "files" / SCRIPT).read_text()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "prolog",
        help="print the PrologSlurmctld that starts jobs on powered-up nodes once they are ready",
        description="Print slurm-syncer's PrologSlurmctld (a POSIX sh script: curl, or bash and timeout). "
        "Install it where slurmctld runs, name it in slurm.conf (PrologSlurmctld=<path>) and point it "
        "at the syncer (SLURM_SYNCER_URL in slurm-syncer-prolog.env beside it): docs/operations.md.",
    )
    parser.set_defaults(func=run)


def run(_args: argparse.Namespace) -> int:
    print(script(), end="")
    return EXIT_OK
