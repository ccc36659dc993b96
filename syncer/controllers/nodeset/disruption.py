"""Which zones are disrupted: most of their Kubernetes Nodes NotReady at once. No I/O.

When a control plane loses its Nodes (the API server's lease updates stop arriving, kubelet certificates
expire, a network partition), every Node turns NotReady at once while the machines and their slurmd keep
running. Kubernetes' node lifecycle controller then stops evicting pods in that zone (its "full
disruption" and "partial disruption" states: kube-controller-manager's --unhealthy-zone-threshold 0.55,
and more than 2 Nodes NotReady). A power-managed NodeSet does the same with its lost-Node power-downs:
forcing members down there would requeue or end every job on them for a fault of the control plane.

Zones are the Nodes' `topology.kubernetes.io/zone` label; Nodes without one form the zone "".
"""

from __future__ import annotations

from dataclasses import dataclass

from syncer.model.kube import KubeNode

ZONE_LABEL = "topology.kubernetes.io/zone"
UNHEALTHY_SHARE = 0.55  # kube-controller-manager's --unhealthy-zone-threshold default
MIN_NOT_READY = 3  # Kubernetes: a zone is partially disrupted with more than 2 Nodes NotReady


def zone_of(node: KubeNode) -> str:
    return node.labels.get(ZONE_LABEL, "")


def not_ready(node: KubeNode) -> bool:
    """Ready False or Unknown (a Node with no Ready condition yet has not been judged)."""
    cond = node.condition("Ready")
    return cond is not None and cond.status != "True"


def disrupted(not_ready_count: int, total: int) -> bool:
    return not_ready_count >= MIN_NOT_READY and not_ready_count >= UNHEALTHY_SHARE * total


@dataclass(frozen=True)
class ZoneCount:
    not_ready: int
    total: int

    @property
    def disrupted(self) -> bool:
        return disrupted(self.not_ready, self.total)


class ZoneHealth:
    """NotReady and total Nodes per zone, kept from the Node informer's changes (O(1) each)."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[str, bool]] = {}  # Node name -> (zone, NotReady)
        self._counts: dict[str, list[int]] = {}  # zone -> [NotReady, total]

    def update(self, old: KubeNode | None, new: KubeNode | None) -> None:
        either = new or old
        if either is None:
            return
        name = either.name
        before = self._nodes.pop(name, None)
        if before is not None:
            counts = self._counts[before[0]]
            counts[0] -= before[1]
            counts[1] -= 1
            if not counts[1]:
                del self._counts[before[0]]
        if new is not None:
            zone, down = zone_of(new), not_ready(new)
            self._nodes[name] = (zone, down)
            counts = self._counts.setdefault(zone, [0, 0])
            counts[0] += down
            counts[1] += 1

    def count(self, zone: str) -> ZoneCount:
        not_ready_count, total = self._counts.get(zone, (0, 0))
        return ZoneCount(not_ready_count, total)

    def zones(self) -> dict[str, ZoneCount]:
        return {zone: ZoneCount(c[0], c[1]) for zone, c in sorted(self._counts.items())}
