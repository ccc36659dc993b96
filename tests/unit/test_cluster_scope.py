"""The rule that gives every SlurmPartition, NodeSet and NodeSet pod to exactly one release (issue 45 item 3;
syncer/model/cluster.py): what a release sees, what it may take, its finalizers, and what `check` warns of."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from syncer.app import check_scope
from syncer.app.settings import SettingsError, add_arguments, load
from syncer.controllers.nodeset.manifests import pod_manifest
from syncer.controllers.nodeset.plan import Member
from syncer.controllers.nodeset.spec import parse
from syncer.model import cluster
from syncer.model.cluster import (
    LABEL,
    LEGACY_PARTITION_FINALIZER,
    ClusterNameError,
    Scoped,
    adoption,
    belongs,
    claimed_finalizers,
    owner,
    partition_finalizer,
    pod_seen,
    problems,
    released_finalizers,
    selector,
    validated,
)
from syncer.model.kube import KubeNodeSet

A, B = "gpu-a", "gpu-b"


@pytest.mark.parametrize("name", ["a", "gpu-a", "slurm-syncer", "hpc.site-1", "x" * cluster.MAX_LENGTH])
def test_a_cluster_name_is_a_label_value_and_a_finalizer_name_part(name: str) -> None:
    assert validated(name) == name
    finalizer = partition_finalizer(name)
    assert finalizer == f"slurm-syncer.dev/partition-{name}" and len(finalizer.split("/")[1]) <= 63


@pytest.mark.parametrize("name", ["", "-a", "a-", "Gpu", "a_b", "a b", "a/b", "x" * (cluster.MAX_LENGTH + 1)])
def test_a_name_that_cannot_be_both_is_refused_saying_what_can(name: str) -> None:
    with pytest.raises(ClusterNameError) as caught:
        validated(name)
    assert "lower-case letters" in str(caught.value)
    assert f"at most {cluster.MAX_LENGTH} characters" in str(caught.value)


def test_a_release_selects_its_own_label_and_unlabelled_objects_apart() -> None:
    assert selector(A) == "slurm-syncer.dev/cluster=gpu-a"
    assert cluster.UNLABELLED == "!slurm-syncer.dev/cluster"


def test_an_object_belongs_to_the_release_its_label_names_and_no_other() -> None:
    assert owner({LABEL: A}) == A and owner({}) is None and owner({LABEL: ""}) == ""
    assert belongs({LABEL: A}, A)
    assert not belongs({LABEL: B}, A)
    assert not belongs({}, A), "an unlabelled object is nobody's until taken"
    assert not belongs({LABEL: ""}, A)


def test_a_release_keeps_its_own_pods_and_unlabelled_ones_never_another_releases() -> None:
    assert pod_seen({LABEL: A}, A)
    assert pod_seen({"app": "slurmd"}, A), "Slinky's pods and pods made before the label carry none"
    assert not pod_seen({LABEL: B}, A)
    assert not pod_seen({LABEL: ""}, A)


def test_only_an_unlabelled_object_is_taken_and_the_patch_names_this_release() -> None:
    assert adoption({}, A) == {"metadata": {"labels": {LABEL: A}}}
    assert adoption({"app": "x"}, A) == {"metadata": {"labels": {LABEL: A}}}
    assert adoption({LABEL: B}, A) is None, "another release took it first"
    assert adoption({LABEL: A}, A) is None, "ours already: nothing to write"
    assert adoption({LABEL: ""}, A) is None, "someone labelled it (empty): not ours to take"


def test_a_claim_puts_this_releases_finalizer_in_place_of_the_legacy_one() -> None:
    own = partition_finalizer(A)
    assert claimed_finalizers([], A) == [own]
    assert claimed_finalizers([LEGACY_PARTITION_FINALIZER], A) == [own]
    assert claimed_finalizers(["x/y", LEGACY_PARTITION_FINALIZER], A) == ["x/y", own]
    assert claimed_finalizers([own], A) is None
    assert claimed_finalizers([own, LEGACY_PARTITION_FINALIZER], A) == [own]
    other = partition_finalizer(B)
    assert claimed_finalizers([other], A) == [other, own], "another release's finalizer is not ours to drop"


def test_a_release_lets_go_of_its_own_and_the_legacy_finalizer_only() -> None:
    own, other = partition_finalizer(A), partition_finalizer(B)
    assert released_finalizers([own], A) == []
    assert released_finalizers([LEGACY_PARTITION_FINALIZER], A) == []
    assert released_finalizers([other, own, "x/y"], A) == [other, "x/y"]
    assert released_finalizers([other], A) is None, "nothing of ours: no write"
    assert released_finalizers([], A) is None


def partition(name: str, labels: dict[str, str], finalizers: tuple[str, ...] = ()) -> Scoped:
    return Scoped("SlurmPartition", name, labels, finalizers)


def test_check_says_nothing_of_a_release_whose_objects_are_all_labelled() -> None:
    objects = [partition("p", {LABEL: A}, (partition_finalizer(A),)), partition("q", {LABEL: B})]
    assert problems(objects, A, adopts=True) == []


def test_check_warns_of_unlabelled_objects_and_says_who_takes_them() -> None:
    objects = [partition(f"p{i}", {}) for i in range(7)]
    [adopting] = problems(objects, A, adopts=True)
    assert adopting.startswith("7 object(s) without label slurm-syncer.dev/cluster (SlurmPartition p0, ")
    assert "and 2 more" in adopting and "p5" not in adopting
    assert "labels them slurm-syncer.dev/cluster=gpu-a" in adopting and "another adopting release" in adopting
    [leaving] = problems(objects[:1], A, adopts=False)
    assert "(SlurmPartition p0)" in leaving and "no release acts on them until one adopts" in leaving


def test_check_warns_of_an_empty_label_and_of_another_releases_finalizer_on_our_object() -> None:
    empty, moved = partition("e", {LABEL: ""}), partition("m", {LABEL: A}, (partition_finalizer(B), "x/y"))
    said = problems([empty, moved], A, adopts=True)
    assert said[0].startswith("SlurmPartition e: label slurm-syncer.dev/cluster is empty: no release acts")
    assert said[1].startswith(
        "SlurmPartition m: finalizer slurm-syncer.dev/partition-gpu-b of another release"
    )
    assert (
        problems([partition("m", {LABEL: A}, (partition_finalizer(A), LEGACY_PARTITION_FINALIZER))], A, True)
        == []
    )
    # another release's object with our finalizer is that release's business, not this one's
    assert problems([partition("n", {LABEL: B}, (partition_finalizer(A),))], A, True) == []


def test_check_names_the_identity_its_source_and_counts_only_its_own() -> None:
    items: list[dict[str, Any]] = [
        {"metadata": {"name": "p", "labels": {LABEL: A}}},
        {"metadata": {"name": "q", "labels": {LABEL: B}}},
        {"metadata": {"name": "u", "namespace": "slurm", "finalizers": ["x/y"]}},
    ]
    found = check_scope.scoped("SlurmPartition", items)
    assert [o.name for o in found] == ["p", "q", "slurm/u"] and found[2].finalizers == ["x/y"]
    (ok, what, _, warn), *rest = check_scope.scope_lines(A, "--cluster-name", True, found)
    assert ok and not warn and what.startswith("cluster identity gpu-a (--cluster-name): acts on")
    assert "(1 of its own); other releases' objects seen (left alone): gpu-b" in what
    assert what.endswith("unlabelled ones are taken (--adopt-unlabelled)")
    assert len(rest) == 1 and rest[0][3] and "kubectl label" in rest[0][2]
    assert [i["metadata"]["name"] for i in check_scope.ours(items, A, adopts=True)] == ["p", "u"]
    assert [i["metadata"]["name"] for i in check_scope.ours(items, A, adopts=False)] == ["p"]


def settings_of(environ: dict[str, str]) -> Any:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return load(parser.parse_args([]), {"SLURM_SYNCER_SLURM_URL": "http://s:1", **environ})


def test_the_identity_is_the_option_else_the_lease_name() -> None:
    assert settings_of({}).cluster_name_resolved() == "slurm-syncer"
    assert settings_of({"SLURM_SYNCER_LEASE_NAME": "gpu-a-slurm-syncer"}).cluster_name_resolved() == (
        "gpu-a-slurm-syncer"
    )
    named = settings_of({"SLURM_SYNCER_CLUSTER_NAME": "hpc1", "SLURM_SYNCER_LEASE_NAME": "x"})
    assert named.cluster_name_resolved() == "hpc1" and named.adopt_unlabelled
    assert not settings_of({"SLURM_SYNCER_ADOPT_UNLABELLED": "false"}).adopt_unlabelled


def test_a_bad_identity_is_refused_naming_the_option() -> None:
    with pytest.raises(SettingsError) as caught:
        settings_of({"SLURM_SYNCER_CLUSTER_NAME": "GPU_A"})
    assert "'GPU_A' for SLURM_SYNCER_CLUSTER_NAME" in str(caught.value) and "lower-case" in str(caught.value)
    long_lease = settings_of({"SLURM_SYNCER_LEASE_NAME": "x" * 60})
    with pytest.raises(SettingsError) as unset:
        long_lease.cluster_name_resolved()
    assert "set --cluster-name (env SLURM_SYNCER_CLUSTER_NAME)" in str(unset.value)


def test_a_nodesets_pods_carry_the_releases_identity() -> None:
    body: dict[str, Any] = {
        "spec": {"replicas": 1, "template": {"metadata": {"labels": {LABEL: "forged"}},
                                             "spec": {"containers": [{"name": "slurmd", "image": "i"}]}}},
    }  # fmt: skip
    nodeset = KubeNodeSet(namespace="slurm", name="gpu", uid="u1", spec=body["spec"])
    spec = parse("gpu", body["spec"])
    labels = pod_manifest(nodeset, spec, Member("gpu-0", 0), A)["metadata"]["labels"]
    assert labels[LABEL] == A, "the template cannot give the pod to another release"
    assert pod_manifest(nodeset, spec, Member("gpu-0", 0))["metadata"]["labels"][LABEL] == "forged"


def test_check_words_each_warning_in_full() -> None:
    """What an admin reads: the whole sentence, so that a changed word is a changed test."""
    moved = partition("m", {LABEL: A}, (partition_finalizer(B), "x/y", partition_finalizer("hpc-c")))
    assert problems([moved], A, adopts=True) == [
        "SlurmPartition m: finalizer slurm-syncer.dev/partition-gpu-b, slurm-syncer.dev/partition-hpc-c of "
        "another release, which no longer sees it (its label was changed): the CR cannot go until that "
        "release's partition is removed and the finalizer taken off by hand"
    ]
    five = [partition(f"p{i}", {}) for i in range(5)]
    listed = ", ".join(f"SlurmPartition p{i}" for i in range(5))
    assert problems(five, A, adopts=True) == [
        f"5 object(s) without label slurm-syncer.dev/cluster ({listed}): this release (--adopt-unlabelled) "
        "labels them slurm-syncer.dev/cluster=gpu-a and acts on them, unless another adopting release "
        "labels them first; with several releases in this Kubernetes cluster label each with its release's "
        "cluster name"
    ]
    assert problems([*five, partition("p5", {})], A, adopts=False) == [
        f"6 object(s) without label slurm-syncer.dev/cluster ({listed} and 1 more): no release acts on them "
        "until one adopts them (--adopt-unlabelled) or they are labelled; with several releases in this "
        "Kubernetes cluster label each with its release's cluster name"
    ]
