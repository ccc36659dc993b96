"""A NodeSet's spec, checked and typed. The CRD schema rejects most bad input at the API server;
this catches the rest (and specs written before a schema change) with a message naming the field."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from syncer.controllers.nodeset.node_shape import NodeShape, ShapeError, shape, slurmd_path

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# spec.power's ceiling and floor, as the CRD bounds them (issue 45: every member is a Slurm record the plan
# looks at on every pass); checked again here for objects stored before the schema said so
MAX_POWER_REPLICAS = 10_000


class SpecError(ValueError):
    """The NodeSet cannot be acted on; the message says which field and why."""


@dataclass(frozen=True)
class PowerSpec:
    """`spec.power`: Slurm's power saving grows and shrinks the NodeSet between a floor of members that
    always have pods and a ceiling of members declared to Slurm as powered-down CLOUD nodes."""

    min_replicas: int  # the floor: ordinals below it always have a pod
    max_replicas: int  # the ceiling: ordinals below it are declared to Slurm
    node: NodeShape  # what each member is declared with
    start_timeout_s: float = 300.0  # a powering-up member's pod unschedulable this long: powered down
    slurmd_path: frozenset[str] = frozenset()  # containers whose failure is slurmd's (node_shape.slurmd_path)


@dataclass(frozen=True)
class NodeSetSpec:
    mode: str  # "Replicas" or "DaemonSet"
    replicas: int
    node_selector: dict[str, str]
    template: dict[str, Any]
    partition: str
    features: tuple[str, ...]
    node_on_scale_in: str  # "Delete" or "Keep"
    strategy: str  # "RollingUpdate" or "OnDelete"
    max_unavailable: int | str
    drain_timeout_s: float
    power: PowerSpec | None = None

    def template_hash(self) -> str:
        """Changes when anything a pod is built from changes: the trigger of a rolling update."""
        material = {"template": self.template, "partition": self.partition, "features": self.features}
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:10]

    def max_unavailable_count(self, desired: int) -> int:
        value = self.max_unavailable
        if isinstance(value, str):
            return max(1, math.floor(int(value.rstrip("%")) * desired / 100))
        return max(1, value)


def parse_duration(text: str) -> float:
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise SpecError(f"spec.drainTimeout {text!r} is not a duration such as 30m or 1h30m")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def parse(name: str, raw: dict[str, Any]) -> NodeSetSpec:
    if not _NAME.match(name) or len(name) > 40:
        raise SpecError(
            f"NodeSet name {name!r} must be a DNS label of at most 40 characters (pods are <name>-<n>)"
        )
    mode = raw.get("mode", "Replicas")
    if mode not in ("Replicas", "DaemonSet"):
        raise SpecError(f"spec.mode {mode!r} must be Replicas or DaemonSet")
    replicas = raw.get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise SpecError(f"spec.replicas {replicas!r} must be a whole number >= 0")
    selector = raw.get("nodeSelector") or {}
    if not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        raise SpecError("spec.nodeSelector must map label names to strings")
    template = raw.get("template")
    containers = (
        ((template or {}).get("spec") or {}).get("containers") if isinstance(template, dict) else None
    )
    if not isinstance(containers, list) or not containers:
        raise SpecError("spec.template.spec.containers must list the slurmd container")
    slurm = raw.get("slurm") or {}
    features = slurm.get("features") or []
    if not isinstance(features, list) or not all(isinstance(f, str) and f and "," not in f for f in features):
        raise SpecError("spec.slurm.features must be a list of feature names without commas")
    on_scale_in = slurm.get("nodeOnScaleIn", "Delete")
    if on_scale_in not in ("Delete", "Keep"):
        raise SpecError(f"spec.slurm.nodeOnScaleIn {on_scale_in!r} must be Delete or Keep")
    strategy = raw.get("updateStrategy") or {}
    kind = strategy.get("type", "RollingUpdate")
    if kind not in ("RollingUpdate", "OnDelete"):
        raise SpecError(f"spec.updateStrategy.type {kind!r} must be RollingUpdate or OnDelete")
    max_unavailable = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
    if isinstance(max_unavailable, str):
        if not re.fullmatch(r"\d{1,3}%", max_unavailable) or not 0 < int(max_unavailable[:-1]) <= 100:
            raise SpecError(
                f"spec.updateStrategy.rollingUpdate.maxUnavailable {max_unavailable!r} must be 1..100%"
            )
    elif not isinstance(max_unavailable, int) or isinstance(max_unavailable, bool) or max_unavailable < 1:
        raise SpecError(f"spec.updateStrategy.rollingUpdate.maxUnavailable {max_unavailable!r} must be >= 1")
    power = _power(raw.get("power"), mode, template if isinstance(template, dict) else {}, tuple(features))
    return NodeSetSpec(
        mode=mode,
        replicas=replicas,
        node_selector=dict(selector),
        template=template if isinstance(template, dict) else {},
        partition=str(slurm.get("partition") or ""),
        features=tuple(features),
        node_on_scale_in=on_scale_in,
        strategy=kind,
        max_unavailable=max_unavailable,
        drain_timeout_s=parse_duration(str(raw.get("drainTimeout", "1h"))),
        power=power,
    )


def _count(value: object, field: str, least: int, most: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise SpecError(f"{field} {value!r} must be a whole number >= {least}")
    if most is not None and value > most:
        raise SpecError(
            f"{field} {value} must be at most {most} (the CRD's bound; each member is a Slurm node)"
        )
    return value


def _power(raw: object, mode: str, template: dict[str, Any], features: tuple[str, ...]) -> PowerSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError("spec.power must be an object with minReplicas and maxReplicas")
    if mode != "Replicas":
        raise SpecError("spec.power works in Replicas mode only: remove it or set spec.mode to Replicas")
    if "maxReplicas" not in raw:
        raise SpecError("spec.power.maxReplicas is required: the most members Slurm may power up")
    ceiling = _count(raw["maxReplicas"], "spec.power.maxReplicas", 0, MAX_POWER_REPLICAS)
    floor = _count(raw.get("minReplicas", 0), "spec.power.minReplicas", 0, MAX_POWER_REPLICAS)
    if floor > ceiling:
        raise SpecError(f"spec.power.minReplicas {floor} must not exceed spec.power.maxReplicas {ceiling}")
    node = {} if raw.get("node") is None else raw["node"]
    if not isinstance(node, dict):
        raise SpecError("spec.power.node must be an object (cpus, realMemory, gres)")
    for key, least in (("cpus", 1), ("realMemory", 1)):
        if key in node:
            _count(node[key], f"spec.power.node.{key}", least)
    gres = node.get("gres")
    if gres is not None and (not isinstance(gres, str) or not re.fullmatch(r"[A-Za-z0-9_:.,-]*", gres)):
        raise SpecError(f"spec.power.node.gres {gres!r} must be a Slurm GRES such as gpu:2 or gpu:a100:8")
    try:
        declared = shape(template, features, node)
    except ShapeError as exc:
        raise SpecError(str(exc)) from exc
    timeout = str(raw.get("startTimeout", "5m"))
    try:
        start_timeout_s = parse_duration(timeout)
    except SpecError:
        raise SpecError(f"spec.power.startTimeout {timeout!r} is not a duration such as 90s or 5m") from None
    return PowerSpec(
        min_replicas=floor, max_replicas=ceiling, node=declared, start_timeout_s=start_timeout_s,
        slurmd_path=slurmd_path(template),
    )  # fmt: skip
