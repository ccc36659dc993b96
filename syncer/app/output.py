"""Machine-readable output of `status` and `check` (`-o json|yaml`), and their exit codes."""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

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
