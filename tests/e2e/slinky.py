"""Pods and writes shaped exactly as SchedMD's Slinky slurm-operator makes them (facts in docs/interop.md,
read from its source at commit f2ed3fc5): the tests bind to them with no relabelling and play the
operator's side of a shared cluster by writing what its code writes."""

from __future__ import annotations

from typing import Any

from syncer.model.keys import Slinky
from syncer.slurm.client import SlurmClient
from syncer.testing.kubeapi import KubeApiEmulator

NODESET_UID = "7f1c9a52-1d7e-4c55-9a0e-5c1a2b3c4d5e"
SLINKY_NODE_STATE_PREFIX = "SlurmNodeState"  # the operator deletes stale conditions with this prefix


def slinky_pod(
    *,
    nodeset: str,
    name: str,
    hostname: str,
    kube_node: str,
    mode: str = "StatefulSet",
    ordinal: int | None = None,
    host_network: bool = False,
    hostname_label: str | None = None,
) -> dict[str, Any]:
    """A v1beta1 NodeSet pod as the operator creates it (labels, annotations, owner, hostname)."""
    labels = {
        "app.kubernetes.io/name": "slurmd",
        "app.kubernetes.io/instance": nodeset,
        "app.kubernetes.io/component": "worker",
        "slinky.slurm.net/cluster": "slurm",
        "controller-revision-hash": "6b9f8d7c5",
        "nodeset.slinky.slurm.net/pod-name": name,
        Slinky.HOSTNAME_LABEL: hostname_label if hostname_label is not None else hostname,
        Slinky.SCALING_MODE_LABEL: mode,
    }
    if ordinal is not None:
        labels["nodeset.slinky.slurm.net/pod-index"] = str(ordinal)
    return {
        "metadata": {
            "name": name,
            "generateName": f"{nodeset}-",
            "labels": labels,
            "annotations": {"kubectl.kubernetes.io/default-container": "slurmd"},
            "ownerReferences": [
                {
                    "apiVersion": "slinky.slurm.net/v1beta1",
                    "kind": "NodeSet",
                    "name": nodeset,
                    "uid": NODESET_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "hostname": hostname,
            "subdomain": "slurm-workers-slurm",
            "nodeName": kube_node,
            "hostNetwork": host_network,
            "automountServiceAccountToken": False,
            "containers": [{"name": "slurmd", "image": "ghcr.io/slinkyproject/slurmd:25.11-ubuntu24.04"}],
            "initContainers": [
                {"name": "logfile", "image": "docker.io/library/alpine", "restartPolicy": "Always"}
            ],
        },
    }


async def operator_drain(slurm: SlurmClient, slurm_node: str, text: str) -> None:
    """The operator's MakeNodeDrain: POST /node/{name} with DRAIN and its prefixed reason."""
    await slurm.update_node(slurm_node, state=["DRAIN"], reason=Slinky.REASON_PREFIX + text)


async def operator_undrain(slurm: SlurmClient, slurm_node: str) -> None:
    """The operator's MakeNodeUndrain of its own drain (reason "")."""
    await slurm.update_node(slurm_node, state=["UNDRAIN"], reason="")


def operator_pod_status(
    kube: KubeApiEmulator,
    namespace: str,
    pod: str,
    states: list[str],
    message: str,
    seen: list[dict[str, Any]],
) -> None:
    """The operator's syncStatus: SlurmNodeState<State> conditions (status True, message = Slurm's reason,
    no reason field), sent as a JSON merge patch of the whole conditions list as its cache saw them
    (`seen`): conditions written by others since are dropped."""
    kept = [c for c in seen if not c.get("type", "").startswith(SLINKY_NODE_STATE_PREFIX)]
    ours = [
        {"type": f"{SLINKY_NODE_STATE_PREFIX}{state}", "status": "True", "message": message,
         "lastTransitionTime": "2026-11-23T00:00:00Z"}
        for state in states
    ]  # fmt: skip
    kube.patch(
        "",
        "v1",
        "pods",
        pod,
        {"status": {"conditions": kept + ours}},
        namespace=namespace,
        subresource="status",
    )
