"""`spec.power`: parsing, each refusal naming its field, and the node declared to Slurm."""

from __future__ import annotations

import re
from typing import Any

import pytest

from syncer.controllers.nodeset.node_shape import NodeShape, quantity
from syncer.controllers.nodeset.spec import SpecError, parse


def template(resources: dict[str, Any] | None = None, name: str = "slurmd") -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "slurmd:26.05"}
    if resources is not None:
        container["resources"] = resources
    return {"spec": {"containers": [{"name": "sidecar", "image": "x"}, container]}}


SIZED = template({"limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}})


def power_spec(power: Any, tmpl: dict[str, Any] = SIZED, **fields: Any) -> dict[str, Any]:
    return {"template": tmpl, "slurm": {"features": ["a100", "ib"]}, "power": power, **fields}


def test_no_power_is_none() -> None:
    assert parse("gpu", {"template": SIZED}).power is None


def test_power_from_the_slurmd_container() -> None:
    power = parse("gpu", power_spec({"minReplicas": 1, "maxReplicas": 8})).power
    assert power is not None
    assert (power.min_replicas, power.max_replicas) == (1, 8)
    assert power.node == NodeShape(cpus=4, real_memory_mb=16384, gres="gpu:2", features=("a100", "ib"))
    assert power.node.node_conf("gpu-3") == (
        "NodeName=gpu-3 CPUs=4 RealMemory=16384 State=CLOUD Features=a100,ib Gres=gpu:2"
    )


def test_requests_when_no_limits_and_fractions_round_down() -> None:
    tmpl = template({"requests": {"cpu": "2500m", "memory": "1500M"}})
    power = parse("gpu", power_spec({"maxReplicas": 2}, tmpl)).power
    assert power is not None
    assert power.node.cpus == 2
    assert power.node.real_memory_mb == 1430  # 1.5e9 bytes in MiB
    assert power.node.gres == ""
    assert power.min_replicas == 0
    assert "Gres=" not in power.node.node_conf("gpu-0")


def test_overrides_win() -> None:
    node = {"cpus": 64, "realMemory": 500000, "gres": "gpu:a100:8"}
    power = parse("gpu", power_spec({"maxReplicas": 2, "node": node}, template())).power
    assert power is not None
    assert power.node == NodeShape(64, 500000, "gpu:a100:8", ("a100", "ib"))


def test_small_cpu_is_one() -> None:
    tmpl = template({"limits": {"cpu": "100m", "memory": "1Gi"}})
    power = parse("gpu", power_spec({"maxReplicas": 1}, tmpl)).power
    assert power is not None and power.node.cpus == 1


@pytest.mark.parametrize(
    ("power", "tmpl", "field"),
    [
        ("yes", SIZED, "spec.power must be an object"),
        ({"minReplicas": 1}, SIZED, "spec.power.maxReplicas is required"),
        ({"maxReplicas": -1}, SIZED, "spec.power.maxReplicas -1"),
        ({"maxReplicas": True}, SIZED, "spec.power.maxReplicas True"),
        ({"maxReplicas": 10_001}, SIZED, "spec.power.maxReplicas 10001 must be at most 10000"),
        (
            {"maxReplicas": 100_000, "minReplicas": 10_001},
            SIZED,
            "spec.power.maxReplicas 100000 must be at most",
        ),
        ({"maxReplicas": 2, "minReplicas": 3}, SIZED, "spec.power.minReplicas 3 must not exceed"),
        ({"maxReplicas": 2, "node": []}, SIZED, "spec.power.node must be an object"),
        ({"maxReplicas": 2, "node": {"cpus": 0}}, SIZED, "spec.power.node.cpus 0"),
        ({"maxReplicas": 2, "node": {"realMemory": "1G"}}, SIZED, "spec.power.node.realMemory '1G'"),
        ({"maxReplicas": 2, "node": {"gres": "gpu 2"}}, SIZED, "spec.power.node.gres 'gpu 2'"),
        ({"maxReplicas": 2}, template(), "spec.power.node.cpus is needed"),
        ({"maxReplicas": 2}, template({"limits": {"cpu": "2"}}), "spec.power.node.realMemory is needed"),
        ({"maxReplicas": 2}, template({"limits": {"cpu": "lots", "memory": "1Gi"}}), "spec.power.node.cpus"),
    ],
)
def test_refusals_name_the_field(power: Any, tmpl: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError, match=re.escape(field)):
        parse("gpu", power_spec(power, tmpl))


def test_daemonset_mode_refused() -> None:
    with pytest.raises(SpecError, match=r"spec\.power works in Replicas mode only"):
        parse("gpu", power_spec({"maxReplicas": 2}, mode="DaemonSet"))


@pytest.mark.parametrize(
    ("text", "value"),
    [("4", 4.0), ("500m", 0.5), ("16Gi", 16 * 2.0**30), ("1k", 1000.0), ("1.5", 1.5), (3, 3.0)],
)
def test_quantity(text: object, value: float) -> None:
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["", "4 Gi", "x", "-1", None, [1]])
def test_not_a_quantity(text: object) -> None:
    assert quantity(text) is None


def test_start_timeout() -> None:
    power = parse("gpu", power_spec({"maxReplicas": 1, "startTimeout": "90s"})).power
    assert power is not None and power.start_timeout_s == 90
    default = parse("gpu", power_spec({"maxReplicas": 1})).power
    assert default is not None and default.start_timeout_s == 300
    with pytest.raises(SpecError, match=re.escape("spec.power.startTimeout 'soon'")):
        parse("gpu", power_spec({"maxReplicas": 1, "startTimeout": "soon"}))


def test_the_ceiling_and_the_floor_are_bounded_as_the_crd_bounds_them() -> None:
    """An object stored before the schema said so (or applied to an emulator without it) is refused in code
    too: each member is a Slurm record the plan looks at on every pass."""
    edge = parse("gpu", power_spec({"maxReplicas": 10_000, "minReplicas": 10_000})).power
    assert edge is not None and edge.max_replicas == edge.min_replicas == 10_000
    with pytest.raises(SpecError, match=r"spec\.power\.minReplicas 10001 must be at most 10000"):
        parse("gpu", power_spec({"maxReplicas": 10_000, "minReplicas": 10_001}))
