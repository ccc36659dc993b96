"""Which Slurm node a pod runs: the first configured label present, with Slinky's own rule for its pods."""

from __future__ import annotations

import pytest

from syncer.model.keys import Keys, Slinky
from syncer.model.kube import KubePod
from syncer.model.naming import SlurmNameRule


def pod(labels: dict[str, str], **spec: object) -> KubePod:
    return KubePod(namespace="slurm", name="slurm-worker-slinky-0", labels=labels, **spec)  # type: ignore[arg-type]


def test_ours_first_then_slinkys() -> None:
    rule = SlurmNameRule()
    both = {Keys.NODE_NAME_LABEL: "ours-1", Slinky.HOSTNAME_LABEL: "theirs-1"}
    assert rule.of(pod(both, hostname="theirs-1")) == "ours-1"
    assert rule.of(pod({Slinky.HOSTNAME_LABEL: "slinky-0"}, hostname="slinky-0")) == "slinky-0"
    assert rule.of(pod({"app": "slurmd"})) == ""
    assert rule.server_selector == ""  # two labels cannot be ORed in a selector
    assert SlurmNameRule((Keys.NODE_NAME_LABEL,)).server_selector == Keys.NODE_NAME_LABEL


def test_slinkys_rule_beats_its_label_where_the_label_is_stale() -> None:
    rule = SlurmNameRule()
    sts = {Slinky.HOSTNAME_LABEL: "hn-0", Slinky.SCALING_MODE_LABEL: "StatefulSet"}
    assert rule.of(pod(sts, hostname="hn-0", host_network=True, node_name="gpu-17")) == "gpu-17"
    assert rule.of(pod(sts, hostname="hn-0", host_network=True)) == "hn-0"  # not scheduled yet: the label
    assert rule.of(pod(sts, hostname="slinky-0")) == "slinky-0"
    assert rule.of(pod(sts)) == "slurm-worker-slinky-0"  # no hostname: the pod's name
    ds = {Slinky.HOSTNAME_LABEL: "gpu-17", Slinky.SCALING_MODE_LABEL: "DaemonSet"}
    assert rule.of(pod(ds, hostname="gpu-17-override")) == "gpu-17-override"
    assert rule.of(pod({Slinky.HOSTNAME_LABEL: "x-1"}, hostname="y")) == "x-1"  # no mode label: the label


def test_a_custom_label_list_and_a_bad_one() -> None:
    rule = SlurmNameRule(("example.com/slurm-node", Keys.NODE_NAME_LABEL))
    assert rule.of(pod({"example.com/slurm-node": "a1", Keys.NODE_NAME_LABEL: "b1"})) == "a1"
    with pytest.raises(ValueError, match="at least one"):
        SlurmNameRule(())


def test_slinkys_rule_reads_slinkys_label_only_never_ours() -> None:
    """Our label names the Slurm node as it is: a pod carrying Slinky's scaling-mode label as well is not
    renamed by Slinky's rule."""
    labels = {Keys.NODE_NAME_LABEL: "ours-1", Slinky.SCALING_MODE_LABEL: "StatefulSet"}
    assert SlurmNameRule().of(pod(labels, hostname="host-9")) == "ours-1"


def test_a_label_list_with_an_empty_label_is_refused_in_these_words() -> None:
    for labels in ((), (Keys.NODE_NAME_LABEL, "")):
        with pytest.raises(ValueError, match=r"^at least one non-empty node-name label is needed$"):
            SlurmNameRule(labels)
