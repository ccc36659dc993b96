"""Machine-readable output of `status` and `check` (`-o json|yaml`), their exit codes, and the one way
a command loads its settings."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import yaml

from syncer.app import settings as settings_mod

FORMATS = ("json", "yaml")
# exit codes of status and check (README.md, docs/operations.md): 0 all is well, 1 something failed or
# could not be reached, 2 a bad option, 3 (status) Slurm and Kubernetes disagree about some node
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DRIFT = 0, 1, 2, 3


def add_output_argument(parser: argparse.ArgumentParser, human: str) -> None:
    parser.add_argument(
        "-o", "--output", choices=(human, *FORMATS), default=human, help=f"{human} (default), json or yaml"
    )


def dump(data: Any, fmt: str) -> str:
    """`data` (lists, dicts, strings, numbers, booleans) as JSON or YAML (PyYAML is a dependency already)."""
    if fmt == "json":
        return json.dumps(data, indent=2)
    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)).rstrip("\n")


def load_settings(command: str, args: argparse.Namespace) -> settings_mod.Settings | None:
    """The command's settings from its flags, the environment and --config; None after saying what is
    wrong on stderr (the command then exits EXIT_USAGE)."""
    try:
        return settings_mod.load(args, os.environ)
    except settings_mod.SettingsError as exc:
        print(f"slurm-syncer {command}: {exc}", file=sys.stderr)
        return None
