"""Which partitions Slinky's objects declare, as its operator writes them into slurm.conf."""

from __future__ import annotations

from syncer.controllers.partitions.slinky_conf import (
    controller_partitions,
    extra_conf_partitions,
    nodeset_partition,
)


def test_a_nodeset_declares_its_name_or_its_trimmed_hostname_unless_its_partition_is_off() -> None:
    assert nodeset_partition({"metadata": {"name": "gpu"}, "spec": {}}) == "gpu"  # the CRD's default: on
    assert nodeset_partition({"metadata": {"name": "gpu"}, "spec": {"partition": {"enabled": True}}}) == "gpu"
    hostname = {"template": {"spec": {"hostname": "gpu-a100-"}}, "partition": {"enabled": True}}
    assert nodeset_partition({"metadata": {"name": "gpu"}, "spec": hostname}) == "gpu-a100"
    assert nodeset_partition({"metadata": {"name": "gpu"}, "spec": {"partition": {"enabled": False}}}) is None


def test_extra_conf_declares_every_partition_name_but_defaults_and_comments() -> None:
    text = (
        "ReconfigFlags=KeepPartInfo\n"
        "PartitionName=DEFAULT MaxTime=60\n"
        "PartitionName=debug Nodes=ALL Default=YES\n"
        "  partitionname=all Nodes=ALL  # lower case parses too\n"
        "# PartitionName=old Nodes=ALL\n"
        "NodeName=x PartitionName=notreally\n"  # never valid slurm.conf, but read as declared: kept off
    )
    assert extra_conf_partitions(text) == ["debug", "all", "notreally"]
    assert extra_conf_partitions("") == []


def test_a_controller_declares_the_partitions_of_its_extra_conf_and_none_without_one() -> None:
    controller = {"spec": {"extraConf": "PartitionName=debug Nodes=ALL\nPartitionName=DEFAULT MaxTime=5"}}
    assert controller_partitions(controller) == ["debug"]
    assert controller_partitions({"spec": {}}) == []
    assert controller_partitions({}) == []


def test_a_commented_out_line_declares_nothing_whatever_follows_its_hash() -> None:
    assert extra_conf_partitions("# PartitionName=old # kept for reference\nPartitionName=a # x # b") == ["a"]
