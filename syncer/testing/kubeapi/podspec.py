"""What kube-apiserver adds to a pod it creates: requests defaulted from limits (pkg/apis/core/v1/defaults.go,
`SetDefaults_Pod`, for pods only, not templates) and the QoS class (pkg/apis/core/helper/qos)."""

from __future__ import annotations

from typing import Any

from syncer.model.quantity import QuantityError, parse_quantity

_QOS_RESOURCES = ("cpu", "memory")


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c for field in ("initContainers", "containers") for c in spec.get(field) or [] if isinstance(c, dict)
    ]


def default_requests(spec: dict[str, Any]) -> None:
    """A limit without a request makes the request equal to the limit, container by container."""
    for container in _containers(spec):
        resources = container.get("resources")
        if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
            continue
        requests = resources.setdefault("requests", {})
        for name, value in resources["limits"].items():
            requests.setdefault(name, value)


def qos_class(spec: dict[str, Any]) -> str:
    """BestEffort without any cpu or memory request or limit; Guaranteed when every container limits both
    and requests what it limits; Burstable otherwise."""
    containers = _containers(spec)
    requests = [(c.get("resources") or {}).get("requests") or {} for c in containers]
    limits = [(c.get("resources") or {}).get("limits") or {} for c in containers]
    if not any(r in q for q in requests + limits for r in _QOS_RESOURCES):
        return "BestEffort"
    guaranteed = all(
        all(r in limit and _same(request.get(r), limit[r]) for r in _QOS_RESOURCES)
        for request, limit in zip(requests, limits, strict=True)
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _same(a: object, b: object) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except QuantityError:
        return False
