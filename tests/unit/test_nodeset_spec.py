"""NodeSet spec parsing: defaults, every rejected field named in the error, the template hash."""

from __future__ import annotations

from typing import Any

import pytest

from syncer.controllers.nodeset.spec import SpecError, parse, parse_duration

TEMPLATE = {"spec": {"containers": [{"name": "slurmd", "image": "slurmd:24.11"}]}}


def spec(**fields: Any) -> dict[str, Any]:
    return {"template": TEMPLATE, **fields}


def test_defaults() -> None:
    parsed = parse("gpu", spec())
    assert parsed.mode == "Replicas"
    assert parsed.replicas == 0
    assert parsed.strategy == "RollingUpdate"
    assert parsed.max_unavailable == 1
    assert parsed.node_on_scale_in == "Delete"
    assert parsed.drain_timeout_s == 3600
    assert parsed.features == ()


def test_full_spec() -> None:
    parsed = parse(
        "gpu",
        spec(
            mode="DaemonSet",
            nodeSelector={"pool": "gpu"},
            slurm={"partition": "batch", "features": ["a100", "ib"], "nodeOnScaleIn": "Keep"},
            updateStrategy={"type": "OnDelete", "rollingUpdate": {"maxUnavailable": "25%"}},
            drainTimeout="1h30m",
        ),
    )
    assert (parsed.mode, parsed.partition, parsed.features) == ("DaemonSet", "batch", ("a100", "ib"))
    assert parsed.node_selector == {"pool": "gpu"}
    assert (parsed.node_on_scale_in, parsed.strategy) == ("Keep", "OnDelete")
    assert parsed.drain_timeout_s == 5400


@pytest.mark.parametrize(
    ("name", "raw", "field"),
    [
        ("Bad_Name", spec(), "NodeSet name"),
        ("x" * 41, spec(), "NodeSet name"),
        ("gpu", spec(mode="StatefulSet"), "spec.mode"),
        ("gpu", spec(replicas=-1), "spec.replicas"),
        ("gpu", spec(replicas=True), "spec.replicas"),
        ("gpu", spec(replicas="3"), "spec.replicas"),
        ("gpu", {"template": {"spec": {}}}, "spec.template.spec.containers"),
        ("gpu", {}, "spec.template.spec.containers"),
        ("gpu", spec(nodeSelector={"pool": 1}), "spec.nodeSelector"),
        ("gpu", spec(slurm={"features": ["a,b"]}), "spec.slurm.features"),
        ("gpu", spec(slurm={"nodeOnScaleIn": "Drop"}), "spec.slurm.nodeOnScaleIn"),
        ("gpu", spec(updateStrategy={"type": "Recreate"}), "spec.updateStrategy.type"),
        ("gpu", spec(updateStrategy={"rollingUpdate": {"maxUnavailable": 0}}), "maxUnavailable"),
        ("gpu", spec(updateStrategy={"rollingUpdate": {"maxUnavailable": "0%"}}), "maxUnavailable"),
        ("gpu", spec(updateStrategy={"rollingUpdate": {"maxUnavailable": "150%"}}), "maxUnavailable"),
        ("gpu", spec(drainTimeout="soon"), "spec.drainTimeout"),
        ("gpu", spec(drainTimeout="10"), "spec.drainTimeout"),
    ],
)
def test_bad_input_names_the_field(name: str, raw: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        parse(name, raw)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("1h30m", 5400), ("500ms", 0.5), ("1.5h", 5400), ("2m", 120)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "desired", "count"), [(1, 10, 1), (3, 10, 3), ("25%", 10, 2), ("10%", 5, 1)]
)
def test_max_unavailable(value: int | str, desired: int, count: int) -> None:
    parsed = parse("gpu", spec(updateStrategy={"rollingUpdate": {"maxUnavailable": value}}))
    assert parsed.max_unavailable_count(desired) == count


def test_template_hash_follows_what_pods_are_built_from() -> None:
    base = parse("gpu", spec(replicas=3))
    assert parse("gpu", spec(replicas=9)).template_hash() == base.template_hash()  # scaling is no update
    other_image = {"spec": {"containers": [{"name": "slurmd", "image": "slurmd:25.05"}]}}
    assert parse("gpu", {"template": other_image}).template_hash() != base.template_hash()
    assert parse("gpu", spec(slurm={"features": ["ib"]})).template_hash() != base.template_hash()
