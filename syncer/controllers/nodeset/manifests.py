"""The objects a NodeSet owns, built from its spec: slurmd pods and the PodDisruptionBudget that
protects busy ones."""

from __future__ import annotations

import copy
from typing import Any

from syncer.controllers.nodeset.plan import Member
from syncer.controllers.nodeset.spec import NodeSetSpec
from syncer.model.keys import Keys
from syncer.model.kube import KubeNodeSet

GROUP = "slurm-syncer.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


def nodesets_path(namespace: str = "") -> str:
    if namespace:
        return f"/apis/{API_VERSION}/namespaces/{namespace}/nodesets"
    return f"/apis/{API_VERSION}/nodesets"


def nodeset_path(namespace: str, name: str) -> str:
    return f"{nodesets_path(namespace)}/{name}"


def selector(nodeset: str) -> str:
    """The label selector of the NodeSet's pods (status.selector, used by the scale subresource)."""
    return f"{Keys.NODESET_LABEL}={nodeset}"


def owner_reference(nodeset: KubeNodeSet) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "NodeSet",
        "name": nodeset.name,
        "uid": nodeset.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_manifest(
    nodeset: KubeNodeSet, spec: NodeSetSpec, member: Member, cluster: str = ""
) -> dict[str, Any]:
    """A slurmd pod: the template plus the labels that bind it (and the release's cluster identity, so no
    other release keeps it in its caches), and the environment slurmd's entrypoint needs to register as
    dynamic node `member.name` (`slurmd -Z -N $SLURM_NODE_NAME --conf "Feature=$SLURM_FEATURES"`)."""
    template = copy.deepcopy(spec.template)
    meta = template.get("metadata") or {}
    labels = {
        **(meta.get("labels") or {}),
        Keys.NODE_NAME_LABEL: member.name,
        Keys.NODESET_LABEL: nodeset.name,
        Keys.TEMPLATE_HASH_LABEL: spec.template_hash(),
        **({Keys.CLUSTER_LABEL: cluster} if cluster else {}),
    }
    pod_spec = template.get("spec") or {}
    if member.node_name:
        pod_spec["nodeName"] = member.node_name
    pod_spec.setdefault("hostname", member.name)
    env = [
        {"name": "SLURM_NODE_NAME", "value": member.name},
        {"name": "SLURM_NODESET", "value": nodeset.name},
        {"name": "SLURM_PARTITION", "value": spec.partition},
        {"name": "SLURM_FEATURES", "value": ",".join(spec.features)},
    ]
    ours = {e["name"] for e in env}
    for container in pod_spec.get("containers") or []:
        kept = [e for e in container.get("env") or [] if e.get("name") not in ours]
        container["env"] = kept + env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": member.name,
            "namespace": nodeset.namespace,
            "labels": labels,
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(nodeset)],
        },
        "spec": pod_spec,
    }


def busy_pdb_name(nodeset: str) -> str:
    return f"{nodeset}-busy"


def busy_pdb_manifest(nodeset: KubeNodeSet) -> dict[str, Any]:
    """No voluntary disruption (kubectl drain, eviction API) of a slurmd whose node runs jobs."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": busy_pdb_name(nodeset.name),
            "namespace": nodeset.namespace,
            "labels": {Keys.NODESET_LABEL: nodeset.name},
            "ownerReferences": [owner_reference(nodeset)],
        },
        "spec": {
            "maxUnavailable": 0,
            "selector": {"matchLabels": {Keys.NODESET_LABEL: nodeset.name, Keys.BUSY_LABEL: "true"}},
        },
    }
