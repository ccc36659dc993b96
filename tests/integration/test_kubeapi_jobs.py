"""`batch/v1` Jobs on the emulator, through kubectl and kubernetes_asyncio: kube-apiserver's defaults and
generated labels, the Job controller's pods (owned, tracked by a finalizer, `parallelism` at once), their
counting as they end, and what deleting a Job does to its pods (syncer/testing/kubeapi/jobs.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions
from syncer.testing.kubeapi.jobs import TRACKING
from tests.fixtures.kube import Kubectl
from tests.helpers import wait_for

pytestmark = pytest.mark.kube

NS = "work"


@pytest.fixture
async def batch(kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield client.BatchV1Api(api)


@pytest.fixture
def seeded(kube_api: KubeApiEmulator) -> KubeApiEmulator:
    kube_api.seed(SeedOptions(nodes=2, namespace=NS))
    return kube_api


def job(
    name: str, parallelism: int | None = 2, scheduler: str = "slurm-syncer", **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "train"}},
                "spec": {
                    "schedulerName": scheduler,
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "train:1"}],
                },
            },
            **spec,
        },
    }
    if parallelism is not None:
        body["spec"]["parallelism"] = parallelism
    return body


def pods_of(kube: KubeApiEmulator, name: str) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.api.store.objects_of(("", "pods"), NS)
        if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == name
    ]


def stored_job(kube: KubeApiEmulator, name: str) -> dict[str, Any]:
    found = kube.get("batch", "v1", "jobs", name, NS)
    assert found is not None, f"job {name} not found"
    return found


def finish(kube: KubeApiEmulator, pod: dict[str, Any], phase: str) -> None:
    kube.patch("", "v1", "pods", pod["metadata"]["name"], {"status": {"phase": phase}}, namespace=NS,
               subresource="status")  # fmt: skip


async def settled(kube: KubeApiEmulator) -> None:
    for _ in range(3):  # the two controllers answer each other's writes
        await kube.jobs.settled()
        await kube.kubelet.settled()


async def test_defaults_and_generated_labels_as_kube_apiserver_sets_them(seeded: KubeApiEmulator, batch: Any):
    created = await batch.create_namespaced_job(NS, job("gang", parallelism=None, completions=3))
    uid = created.metadata.uid
    spec = created.spec
    assert (spec.parallelism, spec.completions, spec.backoff_limit) == (1, 3, 6)
    assert (spec.completion_mode, spec.suspend, spec.manual_selector) == ("NonIndexed", False, False)
    assert spec.pod_replacement_policy == "TerminatingOrFailed"
    assert spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    generated = {
        "app": "train", "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "gang",
        "controller-uid": uid, "job-name": "gang",
    }  # fmt: skip
    assert spec.template.metadata.labels == generated
    assert created.metadata.labels == generated  # the template's labels, as Go's shared map leaves them
    only_parallelism = await batch.create_namespaced_job(NS, job("queue", parallelism=2))
    assert (only_parallelism.spec.parallelism, only_parallelism.spec.completions) == (2, None)


async def test_a_pod_template_that_restarts_always_is_refused(seeded: KubeApiEmulator, kubectl: Kubectl):
    body = job("always")
    del body["spec"]["template"]["spec"]["restartPolicy"]  # the pod default, Always
    out = await kubectl("create", "-n", NS, "-f", "-", stdin=json.dumps(body), ok=False)
    assert (
        'The Job "always" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Always": '
        'supported values: "OnFailure", "Never"'
    ) in out


async def test_parallelism_pods_at_once_owned_and_tracked(seeded: KubeApiEmulator, kubectl: Kubectl):
    seeded.create("batch", "v1", "jobs", job("gang", completions=2), NS)
    await wait_for(lambda: len(pods_of(seeded, "gang")) == 2, what="two pods")
    created = stored_job(seeded, "gang")
    for pod in pods_of(seeded, "gang"):
        meta = pod["metadata"]
        assert meta["name"].startswith("gang-") and meta["finalizers"] == [TRACKING]
        assert meta["ownerReferences"] == [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "gang", "uid": created["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True},
        ]  # fmt: skip
        assert pod["spec"]["schedulerName"] == "slurm-syncer" and not pod["spec"].get("nodeName")
    listed = await kubectl("get", "pods", "-n", NS, "-l", "job-name=gang", "-o", "name")
    assert sorted(listed.split()) == sorted(f"pod/{p['metadata']['name']}" for p in pods_of(seeded, "gang"))
    await settled(seeded)
    assert stored_job(seeded, "gang")["status"]["active"] == 2
    table = await kubectl("get", "jobs", "-n", NS)
    assert table.splitlines()[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert table.splitlines()[1].split()[:3] == ["gang", "Running", "0/2"]


async def test_pods_succeed_and_the_job_completes(seeded: KubeApiEmulator, kubectl: Kubectl):
    seeded.create("batch", "v1", "jobs", job("done", completions=2, scheduler="default-scheduler"), NS)
    await wait_for(lambda: len(pods_of(seeded, "done")) == 2, what="two pods")
    for pod in pods_of(seeded, "done"):
        finish(seeded, pod, "Succeeded")

    def complete() -> bool:
        conditions = stored_job(seeded, "done")["status"].get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    await wait_for(complete, what="the Job complete")
    status = stored_job(seeded, "done")["status"]
    assert status["succeeded"] == 2 and "active" not in status and status["completionTime"]
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [
        ("SuccessCriteriaMet", "CompletionsReached"), ("Complete", "CompletionsReached"),
    ]  # fmt: skip
    assert all(TRACKING not in (p["metadata"].get("finalizers") or []) for p in pods_of(seeded, "done"))
    row = (await kubectl("get", "jobs", "-n", NS)).splitlines()[1].split()
    assert row[:3] == ["done", "Complete", "2/2"]


async def test_a_deleted_pod_counts_as_failed_and_is_replaced(seeded: KubeApiEmulator):
    seeded.create("batch", "v1", "jobs", job("gang", completions=2, backoffLimit=0), NS)
    await wait_for(lambda: len(pods_of(seeded, "gang")) == 2, what="two pods")
    first = pods_of(seeded, "gang")[0]
    pods = seeded.api.resource("", "v1", "pods")
    seeded.api.delete(pods, NS, first["metadata"]["name"])  # unscheduled: gone once uncounted

    def failed() -> bool:
        conditions = stored_job(seeded, "gang")["status"].get("conditions") or []
        return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)

    await wait_for(failed, what="the Job failed past backoffLimit 0")
    status = stored_job(seeded, "gang")["status"]
    assert status["failed"] == 1 and status["conditions"][-1]["reason"] == "BackoffLimitExceeded"
    await wait_for(lambda: not pods_of(seeded, "gang"), what="the other pod deleted by the controller")


async def test_a_replacement_within_the_backoff_limit(seeded: KubeApiEmulator):
    seeded.create("batch", "v1", "jobs", job("retry", completions=1, parallelism=1), NS)
    await wait_for(lambda: len(pods_of(seeded, "retry")) == 1, what="one pod")
    first = pods_of(seeded, "retry")[0]["metadata"]["name"]
    finish(seeded, pods_of(seeded, "retry")[0], "Failed")
    await wait_for(
        lambda: any(p["metadata"]["name"] != first for p in pods_of(seeded, "retry")), what="a replacement"
    )
    await settled(seeded)
    assert stored_job(seeded, "retry")["status"]["failed"] == 1


async def test_indexed_pods_carry_their_index(seeded: KubeApiEmulator):
    seeded.create("batch", "v1", "jobs", job("ix", completions=2, completionMode="Indexed"), NS)
    await wait_for(lambda: len(pods_of(seeded, "ix")) == 2, what="two pods")
    indexes = sorted(
        (p["metadata"]["annotations"][INDEX], p["metadata"]["labels"][INDEX], p["spec"]["hostname"])
        for p in pods_of(seeded, "ix")
    )
    assert indexes == [("0", "0", "ix-0"), ("1", "1", "ix-1")]
    assert all(p["metadata"]["name"].startswith(f"ix-{p['metadata']['annotations'][INDEX]}-")
               for p in pods_of(seeded, "ix"))  # fmt: skip


INDEX = "batch.kubernetes.io/job-completion-index"


@pytest.mark.parametrize(("cascade", "pods_left"), [("background", 0), ("foreground", 0), ("orphan", 2)])
async def test_kubectl_delete_job_cascades_as_asked(
    seeded: KubeApiEmulator, kubectl: Kubectl, cascade: str, pods_left: int
):
    seeded.create("batch", "v1", "jobs", job("gone"), NS)
    await wait_for(lambda: len(pods_of(seeded, "gone")) == 2, what="two pods")
    await kubectl("delete", "job", "gone", "-n", NS, f"--cascade={cascade}")
    await wait_for(lambda: seeded.get("batch", "v1", "jobs", "gone", NS) is None, what="the Job gone")
    await wait_for(lambda: len(pods_of(seeded, "gone")) == pods_left, what=f"{pods_left} pods left")
    for pod in pods_of(seeded, "gone"):  # orphans: no owner, no tracking finalizer
        assert not pod["metadata"].get("ownerReferences") and not pod["metadata"].get("finalizers")


async def test_the_api_default_for_batch_v1_orphans(seeded: KubeApiEmulator, batch: Any):
    seeded.create("batch", "v1", "jobs", job("kept"), NS)
    await wait_for(lambda: len(pods_of(seeded, "kept")) == 2, what="two pods")
    await batch.delete_namespaced_job("kept", NS)  # no propagationPolicy: batch/v1 orphans
    await settled(seeded)
    assert len(pods_of(seeded, "kept")) == 2
