"""The SlurmPartition controller's options and their rows of the option table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from syncer.runtime.options import Option, parse_bool


@dataclass(frozen=True)
class PartitionOptions:
    # opt-in: the informer needs the SlurmPartition CRD installed and RBAC on it (the chart's value)
    enabled: bool = False
    # watch Slinky's NodeSets and Controllers (where served) and never write their partitions; needs
    # list/watch on them (--slinky-partitions)
    slinky: bool = False


OPTIONS = (
    Option(
        "partitions-enabled",
        parse_bool,
        False,
        "run the SlurmPartition controller (Slurm 26.05+, ReconfigFlags=KeepPartInfo; needs the "
        "SlurmPartition CRD and its RBAC: the chart's crds.slurmPartition)",
        "Sync",
        "flag",
    ),
    Option(
        "slinky-partitions",
        parse_bool,
        False,
        "with --partitions-enabled: watch Slinky's NodeSets and Controllers (slinky.slurm.net/v1beta1, where "
        "served) and never write the partitions they declare in slurm.conf, adopt or not (needs list and "
        "watch on them: the chart's RBAC follows this value)",
        "Sync",
        "flag",
    ),
)


def options_from(values: Mapping[str, Any]) -> PartitionOptions:
    return PartitionOptions(
        enabled=values["partitions_enabled"],
        slinky=values["partitions_enabled"] and values["slinky_partitions"],
    )
