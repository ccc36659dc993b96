"""A Node's room as kube-scheduler's NodeResourcesFit and the kubelet's admission count it: the Node's
`status.allocatable` against what the pods bound there request (containers summed, an init container at its
peak, sidecars beside the containers, `overhead`), and one pod slot each against `pods`.

The emulator's own arithmetic (not the syncer's decoder), so the two can disagree and a test then shows it."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

from syncer.model.quantity import QuantityError, parse_quantity

ORDER = ("pods", "cpu", "memory", "ephemeral-storage")  # the order Fits checks them; the rest sorted after


@functools.lru_cache(maxsize=4096)  # Nodes and pods repeat a few quantities; parsing is exact (Fraction)
def _units(resource: str, value: str) -> int:
    try:
        exact = parse_quantity(value)
    except QuantityError:
        return 0  # the API server would have refused it; the emulator does not validate pods
    return math.ceil(exact * 1000) if resource == "cpu" else math.ceil(exact)


def _list(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {name: _units(name, str(value)) for name, value in raw.items()}


_SEEN: dict[
    tuple[str, str], dict[str, int]
] = {}  # (uid, resourceVersion) -> requests: a pod is counted often


def requests(pod: dict[str, Any]) -> dict[str, int]:
    meta = pod.get("metadata") or {}
    key = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
    if key[0] and key in _SEEN:
        return _SEEN[key]
    if len(_SEEN) > 100_000:
        _SEEN.clear()
    _SEEN[key] = found = _requests(pod)
    return found


def _requests(pod: dict[str, Any]) -> dict[str, int]:
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, value in _list((container.get("resources") or {}).get("requests")).items():
            total[name] = total.get(name, 0) + value
    sidecars: dict[str, int] = {}
    for container in spec.get("initContainers") or []:
        own = _list((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            for name, value in own.items():
                total[name] = total.get(name, 0) + value
                sidecars[name] = sidecars.get(name, 0) + value
            need = dict(sidecars)
        else:
            need = {name: own.get(name, 0) + sidecars.get(name, 0) for name in own.keys() | sidecars.keys()}
        for name, value in need.items():
            total[name] = max(total.get(name, 0), value)
    for name, value in _list(spec.get("overhead")).items():
        total[name] = total.get(name, 0) + value
    return total


def shortfalls(
    pod: dict[str, Any], node: dict[str, Any], holders: int, others: Callable[[], Iterable[dict[str, Any]]]
) -> list[tuple[str, int, int, int]]:
    """(resource, requested, used, allocatable) for each resource the Node lacks, pods first; `holders`
    pods hold room there, `others()` lists them (asked only when the pod requests more than a slot). A Node
    without `status.allocatable` (no kubelet ever reported it: a test's bare Node) is not counted."""
    if "allocatable" not in (node.get("status") or {}):
        return []
    allocatable = _list((node.get("status") or {}).get("allocatable"))
    wanted = {"pods": 1, **{k: v for k, v in requests(pod).items() if v > 0}}
    used: dict[str, int] = {"pods": holders}
    for other in others() if len(wanted) > 1 else ():  # only what the pod asks for is counted
        for name, value in requests(other).items():
            used[name] = used.get(name, 0) + value
    names = [n for n in ORDER if n in wanted] + sorted(n for n in wanted if n not in ORDER)
    return [
        (name, wanted[name], used.get(name, 0), allocatable.get(name, 0))
        for name in names
        if wanted[name] > allocatable.get(name, 0) - used.get(name, 0)
    ]
