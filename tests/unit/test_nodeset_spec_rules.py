"""A NodeSet's spec: each refusal in its own words, the bounds accepted at their edge, and a template hash
that never changes for the same spec (a changed hash rolls every pod of every NodeSet)."""

from __future__ import annotations

from typing import Any

import pytest

from syncer.controllers.nodeset.node_shape import NodeShape, ShapeError, shape
from syncer.controllers.nodeset.spec import SpecError, parse, parse_duration

TEMPLATE = {"spec": {"containers": [{"name": "slurmd", "image": "slurmd:26.05"}]}}
SIZED = {
    "spec": {
        "initContainers": [{"name": "fetch-conf"}, {"name": "logs", "restartPolicy": "Always"}],
        "containers": [{"name": "slurmd", "resources": {"limits": {"cpu": "4", "memory": "16Gi"}}}],
    }
}


def refusal(raw: dict[str, Any], name: str = "gpu") -> str:
    with pytest.raises(SpecError) as caught:
        parse(name, raw)
    return str(caught.value)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"template": TEMPLATE, "nodeSelector": {"pool": 1}},
            "spec.nodeSelector must map label names to strings",
        ),
        (
            {"template": {"spec": {"containers": []}}},
            "spec.template.spec.containers must list the slurmd container",
        ),
        ({"template": "slurmd"}, "spec.template.spec.containers must list the slurmd container"),
        (
            {"template": TEMPLATE, "slurm": {"features": ["a,b"]}},
            "spec.slurm.features must be a list of feature names without commas",
        ),
        ({"template": TEMPLATE, "power": 3}, "spec.power must be an object with minReplicas and maxReplicas"),
        (
            {"template": TEMPLATE, "mode": "DaemonSet", "power": {"maxReplicas": 1}},
            "spec.power works in Replicas mode only: remove it or set spec.mode to Replicas",
        ),
        (
            {"template": TEMPLATE, "power": {"minReplicas": 1}},
            "spec.power.maxReplicas is required: the most members Slurm may power up",
        ),
        (
            {"template": SIZED, "power": {"maxReplicas": 1, "node": "big"}},
            "spec.power.node must be an object (cpus, realMemory, gres)",
        ),
        (
            {"template": TEMPLATE, "power": {"maxReplicas": 1}},
            "spec.power.node.cpus is needed: container 'slurmd' of spec.template has no cpu limit or "
            "request to read it from",
        ),
        (
            {"template": {"spec": {"containers": [{"image": "slurmd"}]}}, "power": {"maxReplicas": 1}},
            "spec.power.node.cpus is needed: container '?' of spec.template has no cpu limit or "
            "request to read it from",
        ),
    ],
)
def test_each_refusal_in_its_own_words(raw: dict[str, Any], message: str) -> None:
    assert refusal(raw) == message


def test_max_unavailable_edges_and_a_flag_or_fraction_refused() -> None:
    def count(value: object) -> int:
        raw = {"template": TEMPLATE, "updateStrategy": {"rollingUpdate": {"maxUnavailable": value}}}
        return parse("gpu", raw).max_unavailable_count(100)

    assert count("1%") == 1 and count("100%") == 100
    for bad in ("0%", "101%"):
        assert refusal(
            {"template": TEMPLATE, "updateStrategy": {"rollingUpdate": {"maxUnavailable": bad}}}
        ) == (f"spec.updateStrategy.rollingUpdate.maxUnavailable {bad!r} must be 1..100%")
    for flag_or_fraction in (True, 1.5):
        assert refusal(
            {"template": TEMPLATE, "updateStrategy": {"rollingUpdate": {"maxUnavailable": flag_or_fraction}}}
        ) == (f"spec.updateStrategy.rollingUpdate.maxUnavailable {flag_or_fraction!r} must be >= 1")


def test_a_name_of_forty_characters_is_the_longest_accepted() -> None:
    assert parse("a" * 40, {"template": TEMPLATE}).replicas == 0
    assert "at most 40 characters" in refusal({"template": TEMPLATE}, "a" * 41)


def test_no_partition_is_the_empty_one() -> None:
    assert parse("gpu", {"template": TEMPLATE}).partition == ""


@pytest.mark.parametrize("text", ["", "30m later", "later 30m"])
def test_a_duration_with_anything_besides_its_parts_is_refused(text: str) -> None:
    with pytest.raises(SpecError, match="is not a duration"):
        parse_duration(text)


def test_the_template_hash_of_a_spec_never_changes() -> None:
    """The hash is stored on every pod; one computed differently (other fields, order, length) after an
    upgrade would read every pod as outdated and roll them all."""
    template = {
        "metadata": {"labels": {"app": "slurmd"}},
        "spec": {"containers": [{"name": "slurmd", "image": "slurmd:26.05"}]},
    }
    reordered = {
        "spec": {"containers": [{"image": "slurmd:26.05", "name": "slurmd"}]},
        "metadata": {"labels": {"app": "slurmd"}},
    }
    for tmpl in (template, reordered):
        spec = parse("gpu", {"template": tmpl, "slurm": {"partition": "batch", "features": ["a100"]}})
        assert spec.template_hash() == "836fdbcbd7"


def test_power_node_bounds_and_gres_types_in_capitals_are_accepted() -> None:
    node = {"cpus": 1, "realMemory": 1, "gres": "gpu:A100:8"}
    power = parse("gpu", {"template": SIZED, "power": {"maxReplicas": 2, "node": node}}).power
    assert power is not None
    assert power.node == NodeShape(cpus=1, real_memory_mb=1, gres="gpu:A100:8")


def test_a_power_spec_knows_the_containers_slurmd_needs() -> None:
    power = parse("gpu", {"template": SIZED, "power": {"maxReplicas": 2}}).power
    assert power is not None
    assert power.slurmd_path == frozenset({"fetch-conf", "slurmd"})  # not the native sidecar


def test_memory_under_two_mebibytes_declares_one() -> None:
    def memory(text: str) -> int:
        tmpl = {
            "spec": {
                "containers": [{"name": "slurmd", "resources": {"limits": {"cpu": "1", "memory": text}}}]
            }
        }
        return shape(tmpl, (), {}).real_memory_mb

    assert (memory("1Mi"), memory("512Ki"), memory("3Mi")) == (1, 1, 3)
    with pytest.raises(ShapeError):
        shape({"spec": {"containers": [{"name": "slurmd"}]}}, (), {})


def test_a_declared_node_names_its_port_only_when_given_one() -> None:
    node = NodeShape(cpus=2, real_memory_mb=1024, gres="gpu:1", features=("a100", "ib"))
    assert node.node_conf("gpu-0") == (
        "NodeName=gpu-0 CPUs=2 RealMemory=1024 State=CLOUD Features=a100,ib Gres=gpu:1"
    )
    assert node.node_conf("gpu-0", 6818) == (
        "NodeName=gpu-0 CPUs=2 RealMemory=1024 State=CLOUD Features=a100,ib Gres=gpu:1 Port=6818"
    )
