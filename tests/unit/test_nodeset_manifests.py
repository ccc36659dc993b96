"""The objects a NodeSet owns, as the reconciler writes them: each slurmd pod (the labels that bind it to its
Slurm node, the environment slurmd registers with, the NodeSet as its controlling owner) and the
PodDisruptionBudget that keeps busy slurmd pods from a voluntary eviction."""

from __future__ import annotations

import copy
from typing import Any

from syncer.controllers.nodeset.manifests import (
    busy_pdb_manifest,
    nodeset_path,
    nodesets_path,
    pod_manifest,
    selector,
)
from syncer.controllers.nodeset.plan import Member
from syncer.controllers.nodeset.spec import parse
from syncer.model.keys import Keys
from syncer.model.kube import KubeNodeSet

NS = KubeNodeSet(namespace="hpc", name="gpu", uid="u1")
OWNER = {
    "apiVersion": "slurm-syncer.dev/v1alpha1",
    "kind": "NodeSet",
    "name": "gpu",
    "uid": "u1",
    "controller": True,
    "blockOwnerDeletion": True,
}
OUR_ENV = [
    {"name": "SLURM_NODE_NAME", "value": "gpu-3"},
    {"name": "SLURM_NODESET", "value": "gpu"},
    {"name": "SLURM_PARTITION", "value": "batch"},
    {"name": "SLURM_FEATURES", "value": "a100,ib"},
]


def template(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "slurmd"}, "annotations": {"note": "kept"}},
        "spec": {"containers": [{"name": "slurmd", "image": "slurmd:1"}], **spec},
    }


def spec_of(tmpl: dict[str, Any]) -> Any:
    return parse(
        "gpu", {"replicas": 4, "template": tmpl, "slurm": {"partition": "batch", "features": ["a100", "ib"]}}
    )


def test_a_member_pod_is_the_template_with_the_labels_that_bind_it_and_the_nodeset_as_controller() -> None:
    spec = spec_of(template())
    pod = pod_manifest(NS, spec, Member("gpu-3", 3))
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert pod["metadata"] == {
        "name": "gpu-3",
        "namespace": "hpc",
        "labels": {
            "app": "slurmd",
            Keys.NODE_NAME_LABEL: "gpu-3",
            Keys.NODESET_LABEL: "gpu",
            Keys.TEMPLATE_HASH_LABEL: spec.template_hash(),
        },
        "annotations": {"note": "kept"},
        "ownerReferences": [OWNER],
    }
    assert pod["spec"] == {
        "containers": [{"name": "slurmd", "image": "slurmd:1", "env": OUR_ENV}],
        "hostname": "gpu-3",  # slurmd -Z registers under its host name unless told
    }


def test_a_pods_binding_labels_win_over_the_templates_and_the_cluster_label_only_with_a_cluster() -> None:
    tmpl = template()
    tmpl["metadata"]["labels"] = {Keys.NODE_NAME_LABEL: "other", Keys.NODESET_LABEL: "other"}
    labels = pod_manifest(NS, spec_of(tmpl), Member("gpu-3", 3))["metadata"]["labels"]
    assert labels[Keys.NODE_NAME_LABEL] == "gpu-3" and labels[Keys.NODESET_LABEL] == "gpu"
    assert Keys.CLUSTER_LABEL not in labels
    clustered = pod_manifest(NS, spec_of(tmpl), Member("gpu-3", 3), "east")["metadata"]["labels"]
    assert clustered[Keys.CLUSTER_LABEL] == "east"


def test_a_daemonset_member_is_pinned_to_its_node_and_a_template_hostname_is_kept() -> None:
    spec = spec_of(template(hostname="fixed"))
    pinned = pod_manifest(NS, spec, Member("gpu-node-a", node_name="node-a"))["spec"]
    assert pinned["nodeName"] == "node-a"
    assert pinned["hostname"] == "fixed"
    assert "nodeName" not in pod_manifest(NS, spec, Member("gpu-0", 0))["spec"]


def test_every_container_gets_our_environment_over_its_own_values_of_those_names() -> None:
    tmpl = template()
    tmpl["spec"]["containers"] = [
        {
            "name": "slurmd",
            "env": [{"name": "TZ", "value": "UTC"}, {"name": "SLURM_NODE_NAME", "value": "x"}],
        },
        {"name": "sidecar"},
    ]
    spec = spec_of(tmpl)
    before = copy.deepcopy(spec.template)
    containers = pod_manifest(NS, spec, Member("gpu-3", 3))["spec"]["containers"]
    assert containers[0]["env"] == [{"name": "TZ", "value": "UTC"}, *OUR_ENV]
    assert containers[1]["env"] == OUR_ENV
    assert spec.template == before, "the spec's template is copied, never changed"


def test_a_template_without_metadata_gives_a_pod_of_our_labels_and_no_annotations() -> None:
    spec = spec_of({"spec": {"containers": [{"name": "slurmd"}]}})
    meta = pod_manifest(NS, spec, Member("gpu-0", 0))["metadata"]
    assert meta["annotations"] == {}
    assert set(meta["labels"]) == {Keys.NODE_NAME_LABEL, Keys.NODESET_LABEL, Keys.TEMPLATE_HASH_LABEL}


def test_the_busy_pdb_allows_no_eviction_of_the_nodesets_busy_pods() -> None:
    assert busy_pdb_manifest(NS) == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": "gpu-busy",
            "namespace": "hpc",
            "labels": {Keys.NODESET_LABEL: "gpu"},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "maxUnavailable": 0,
            "selector": {"matchLabels": {Keys.NODESET_LABEL: "gpu", Keys.BUSY_LABEL: "true"}},
        },
    }


def test_nodeset_paths_and_the_pods_selector() -> None:
    assert nodesets_path() == "/apis/slurm-syncer.dev/v1alpha1/nodesets"
    assert nodesets_path("hpc") == "/apis/slurm-syncer.dev/v1alpha1/namespaces/hpc/nodesets"
    assert nodeset_path("hpc", "gpu") == "/apis/slurm-syncer.dev/v1alpha1/namespaces/hpc/nodesets/gpu"
    assert selector("gpu") == f"{Keys.NODESET_LABEL}=gpu"
