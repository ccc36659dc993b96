"""`slurm-syncer prolog`: prints the PrologSlurmctld script shipped in the package (issue 47), with the
syncer's URL and the longest wait written in, to be installed where slurmctld runs (docs/operations.md)."""

from __future__ import annotations

import argparse
import re
import sys
from importlib import resources

from syncer.app.output import EXIT_OK, EXIT_USAGE

SCRIPT = "slurm-syncer-prolog"
DEFAULT_WAIT_S = 300
# what the script may carry in a double-quoted shell string: no quote, `$`, backquote, backslash or space
URL = re.compile(r"https?://[A-Za-z0-9.\-_:\[\]/%@]+")


def script(url: str = "", wait_s: int = DEFAULT_WAIT_S) -> str:
    """The script with `url` and `wait_s` as its settings (ValueError naming the bad one)."""
    if url and not URL.fullmatch(url):
        raise ValueError(f"--url {url!r}: give http://host:port (letters, digits, '.-_:/' only)")
    if not 0 < wait_s <= 86400:
        raise ValueError(f"--wait {wait_s}: give seconds between 1 and 86400")
    text = (resources.files("syncer.app") / "files" / SCRIPT).read_text()
    text = text.replace('\nSLURM_SYNCER_URL=""\n', f'\nSLURM_SYNCER_URL="{url}"\n', 1)
    return text.replace(
        f"\nSLURM_SYNCER_PROLOG_WAIT={DEFAULT_WAIT_S}\n", f"\nSLURM_SYNCER_PROLOG_WAIT={wait_s}\n", 1
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "prolog",
        help="print the PrologSlurmctld that starts jobs on powered-up nodes once they are ready",
        description="Print slurm-syncer's PrologSlurmctld (a POSIX sh script: curl, or bash and timeout). "
        "Install it where slurmctld runs and name it in slurm.conf (PrologSlurmctld=<path>): a job on "
        "nodes Slurm powers up then starts once they are ready, not at slurmctld's 30 s check "
        "(docs/operations.md).",
    )
    parser.add_argument(
        "--url", default="", help="the syncer's HTTP port as slurmctld reaches it (its Service), e.g. "
        "http://slurm-syncer.slurm:8080",
    )  # fmt: skip
    parser.add_argument(
        "--wait", type=int, default=DEFAULT_WAIT_S,
        help="the longest wait for a job's nodes in seconds, then Slurm's own way (below PrologTimeout)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        text = script(args.url, args.wait)
    except ValueError as exc:
        print(f"slurm-syncer prolog: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(text, end="")
    return EXIT_OK
