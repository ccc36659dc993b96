"""Which partitions Slinky's objects declare in slurm.conf (pure: from the objects' bodies as the API server
returns them; slinky.py watches them). From Slinky's `slinky.slurm.net/v1beta1` source (api/v1beta1,
internal/builder/controllerbuilder):
- a NodeSet with `spec.partition.enabled` (the CRD's default is true: absent counts as true) gets the line
  `PartitionName=<name> Nodes=<name> <spec.partition.config>`, <name> being the NodeSet's name or, when set,
  `spec.template.spec.hostname` with its '-' trimmed;
- a Controller's `spec.extraConf` is appended to slurm.conf as written, after every NodeSet's line: each
  `PartitionName=` in it.

What each line sets (`partition_lines`), read as slurmctld reads slurm.conf (src/common/read_config.c): a
line's first key says what it declares, keys are case-insensitive, `#` starts a comment, a `\\` at a line's
end continues it, and a `PartitionName=DEFAULT` line sets defaults for the lines after it (merged with the
DEFAULT lines before it: a key given again replaces its value)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# `PartitionName=x`, case as Slurm parses it (any), up to a blank; `PartitionName=DEFAULT` sets defaults only
_PARTITION = re.compile(r"(?i)(?:^|\s)PartitionName=(\S+)")


def _logical_lines(text: str) -> list[str]:
    """slurm.conf's lines: comments cut, a trailing `\\` joining a line to the next."""
    lines, pending = [], ""
    for raw in text.splitlines():
        line = pending + raw.partition("#")[0]
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        lines.append(line)
    return [*lines, pending]  # a last line ending in `\\` counts as it is


def _pairs(line: str) -> list[tuple[str, str]]:
    """A line's `Key=Value` pairs, keys lower-cased; a word without `=` is left out."""
    return [(key.lower(), value) for key, eq, value in (w.partition("=") for w in line.split()) if eq]


def partition_lines(text: str) -> dict[str, dict[str, str]]:
    """partition -> its line's settings ({lower-cased key: value as written}, `PartitionName` left out) with
    the DEFAULT lines before it applied; a partition declared twice keeps its first line (slurmctld refuses to
    start on a second one)."""
    defaults: dict[str, str] = {}
    found: dict[str, dict[str, str]] = {}
    for line in _logical_lines(text):
        pairs = _pairs(line)
        if not pairs or pairs[0][0] != "partitionname":
            continue
        name, settings = pairs[0][1], dict(pairs[1:])
        if name.upper() == "DEFAULT":
            defaults.update(settings)
        else:
            found.setdefault(name, {**defaults, **settings})
    return found


def nodeset_partition(obj: Mapping[str, Any]) -> str | None:
    """The partition a Slinky NodeSet declares, or None (`spec.partition.enabled: false`)."""
    spec = obj.get("spec") or {}
    if (spec.get("partition") or {}).get("enabled", True) is False:
        return None
    hostname = str((((spec.get("template") or {}).get("spec")) or {}).get("hostname") or "").strip("-")
    return hostname or str((obj.get("metadata") or {}).get("name") or "") or None


def extra_conf_partitions(text: str) -> list[str]:
    """The partitions a Controller's extraConf declares (comments and `PartitionName=DEFAULT` left out)."""
    found = []
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        found += [name for name in _PARTITION.findall(line) if name.upper() != "DEFAULT"]
    return found


def controller_partitions(obj: Mapping[str, Any]) -> list[str]:
    """The partitions a Slinky Controller declares: those of its `spec.extraConf`."""
    return extra_conf_partitions(str((obj.get("spec") or {}).get("extraConf") or ""))


def nodeset_lines(obj: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The settings of the partition line a NodeSet declares, as the operator renders it
    (`PartitionName=<name> Nodes=<name> <spec.partition.config>`, before extraConf: no DEFAULT line of
    extraConf applies to it)."""
    name = nodeset_partition(obj)
    if name is None:
        return {}
    config = (((obj.get("spec") or {}).get("partition")) or {}).get("config")
    line = f"PartitionName={name} Nodes={name}" + (f" {config}" if config else "")
    found = partition_lines(line)
    return {name: found[name]} if name in found else {}  # a NodeSet named `default` declares defaults


def controller_lines(obj: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The settings of each partition line of a Controller's `spec.extraConf`."""
    extra = (obj.get("spec") or {}).get("extraConf")
    return partition_lines(str(extra)) if extra else {}
