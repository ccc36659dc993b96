"""Which partitions Slinky's objects declare in slurm.conf (pure: from the objects' bodies as the API server
returns them; slinky.py watches them). From Slinky's `slinky.slurm.net/v1beta1` source (api/v1beta1,
internal/builder/controllerbuilder):
- a NodeSet with `spec.partition.enabled` (the CRD's default is true: absent counts as true) gets the line
  `PartitionName=<name> Nodes=<name> <spec.partition.config>`, <name> being the NodeSet's name or, when set,
  `spec.template.spec.hostname` with its '-' trimmed;
- a Controller's `spec.extraConf` is appended to slurm.conf as written: each `PartitionName=` in it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# `PartitionName=x`, case as Slurm parses it (any), up to a blank; `PartitionName=DEFAULT` sets defaults only
_PARTITION = re.compile(r"(?i)(?:^|\s)PartitionName=(\S+)")


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
