"""What a power-managed NodeSet declares to Slurm for each member before its pod exists (`POST
/new/node/`): CPUs, RealMemory, Gres and Features, read from the slurmd container's resources and
`slurm.features`, or from `spec.power.node` when given (a container's request is what Kubernetes
reserves, not always what Slurm should offer: a fractional CPU, memory left to slurmd itself, or a GRES
type such as gpu:a100:8 that no resource name spells)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$")
_SCALE = {
    None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50,
}  # fmt: skip
# Kubernetes extended resources that are Slurm GPUs
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")


class ShapeError(ValueError):
    """The node cannot be described to Slurm; the message names the field and the fix."""


@dataclass(frozen=True)
class NodeShape:
    cpus: int
    real_memory_mb: int
    gres: str = ""  # e.g. "gpu:2"; "" for none
    features: tuple[str, ...] = ()

    def node_conf(self, name: str, port: int = 0) -> str:
        """The `node_conf` line of `POST /new/node/`: a powered-down CLOUD node (measured on 26.05.5:
        `IDLE+CLOUD+DYNAMIC_NORM+POWERED_DOWN`). No address: the slurmd's registration sets it."""
        parts = [f"NodeName={name}", f"CPUs={self.cpus}", f"RealMemory={self.real_memory_mb}", "State=CLOUD"]
        if self.features:
            parts.append("Features=" + ",".join(self.features))
        if self.gres:
            parts.append(f"Gres={self.gres}")
        if port:
            parts.append(f"Port={port}")
        return " ".join(parts)


def quantity(text: object) -> float | None:
    """A Kubernetes quantity ("4", "500m", "16Gi", "1.5") as a number; None when it is not one."""
    match = _QUANTITY.match(str(text).strip()) if isinstance(text, (str, int, float)) else None
    if match is None:
        return None
    return float(match.group(1)) * _SCALE[match.group(2)]


def slurmd_container(template: dict[str, Any]) -> dict[str, Any]:
    """The container named slurmd, else the first one."""
    containers = [c for c in (template.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    named = [c for c in containers if c.get("name") == "slurmd"]
    return (named or containers or [{}])[0]


def slurmd_path(template: dict[str, Any]) -> frozenset[str]:
    """The containers slurmd needs to run: its own and the init containers before it (not a native sidecar,
    an init container with restartPolicy Always, which runs beside it)."""
    spec = template.get("spec") or {}
    init = [c for c in spec.get("initContainers") or [] if isinstance(c, dict)]
    names = {str(c.get("name", "")) for c in init if c.get("restartPolicy") != "Always"}
    slurmd = slurmd_container(template).get("name")
    return frozenset(names | ({str(slurmd)} if slurmd is not None else set()))


def _resource(container: dict[str, Any], name: str) -> float | None:
    resources = container.get("resources") or {}
    for kind in ("limits", "requests"):
        value = (resources.get(kind) or {}).get(name)
        if value is not None:
            return quantity(value)
    return None


def _read(container: dict[str, Any], resource: str, field: str) -> float:
    found = _resource(container, resource)
    if found is None:
        raise ShapeError(
            f"spec.power.node.{field} is needed: container {container.get('name', '?')!r} of spec.template "
            f"has no {resource} limit or request to read it from"
        )
    return found


def shape(template: dict[str, Any], features: tuple[str, ...], override: dict[str, Any]) -> NodeShape:
    container = slurmd_container(template)
    cpus = override.get("cpus")
    if cpus is None:
        cpus = max(1, math.floor(_read(container, "cpu", "cpus")))
    memory = override.get("realMemory")
    if memory is None:
        memory = max(1, math.floor(_read(container, "memory", "realMemory") / 2**20))
    gres = override.get("gres")
    if gres is None:
        gpus = sum(int(_resource(container, name) or 0) for name in GPU_RESOURCES)
        gres = f"gpu:{gpus}" if gpus else ""
    return NodeShape(cpus=int(cpus), real_memory_mb=int(memory), gres=str(gres), features=features)
