"""Which Slurm node a pod runs: from the first configured label it carries, with Slinky's own rule
where its label can be stale (a StatefulSet-mode pod on the host network is its Node's name)."""

from __future__ import annotations

from dataclasses import dataclass

from syncer.model.keys import DEFAULT_NODE_NAME_LABELS, Slinky
from syncer.model.kube import KubePod


@dataclass(frozen=True)
class SlurmNameRule:
    labels: tuple[str, ...] = DEFAULT_NODE_NAME_LABELS

    def __post_init__(self) -> None:
        if not self.labels or any(not label for label in self.labels):
            raise ValueError("at least one non-empty node-name label is needed")

    def of(self, pod: KubePod) -> str:
        """The pod's Slurm node name, or "" when it carries none of the labels."""
        for label in self.labels:
            value = pod.labels.get(label, "")
            if value:
                return (_slinky_name(pod) or value) if label == Slinky.HOSTNAME_LABEL else value
        return ""

    @property
    def server_selector(self) -> str:
        """A label selector the API server can apply: only with one label (a selector cannot OR keys)."""
        return self.labels[0] if len(self.labels) == 1 else ""


def _slinky_name(pod: KubePod) -> str:
    """The operator's GetSlurmNodeName: the label is written once, at creation, and misses hostNetwork."""
    mode = pod.labels.get(Slinky.SCALING_MODE_LABEL, "")
    if mode == "StatefulSet":
        if pod.host_network:
            return pod.node_name  # "" until scheduled: the label then stands
        return pod.hostname or pod.name
    if mode == "DaemonSet":
        return pod.hostname
    return ""
