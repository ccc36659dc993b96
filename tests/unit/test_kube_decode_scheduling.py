"""The one-pool scheduler's compact views, decoded from raw JSON (syncer/kube/decode_scheduling.py): a pod's
effective requests as kube-scheduler sums them, a quantity that cannot be read named, a Job, a Node's room."""

from __future__ import annotations

import json
from typing import Any

from syncer.kube.decode import Codec
from syncer.model.kube import KubeJob, KubeNode, PodUsage, SchedulerPod

GIB = 2**30


def decode_pod(spec: dict[str, Any], **meta: Any) -> SchedulerPod:
    body = {
        "metadata": {"name": "p", "namespace": "ns", **meta},
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    pod: SchedulerPod = Codec("SchedulerPod").decode_object(json.dumps(body).encode())
    return pod


def container(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **more: Any
) -> Any:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {"name": "c", "image": "i", "resources": resources, **more}


def test_containers_sum() -> None:
    pod = decode_pod({"containers": [container({"cpu": "500m", "memory": "1Gi"}), container({"cpu": "1"})]})
    assert pod.requests == {"cpu": 1500, "memory": GIB}


def test_an_init_container_counts_at_its_peak_sidecars_add_up() -> None:
    spec = {
        "containers": [container({"cpu": "1"})],
        "initContainers": [
            container({"cpu": "4"}),  # runs alone before the others: the peak
            container({"cpu": "200m"}, restartPolicy="Always"),  # a sidecar: runs on beside the containers
            container({"cpu": "300m"}),  # runs beside the sidecar: 0.5 CPUs
        ],
    }
    assert decode_pod(spec).requests == {"cpu": 4000}
    spec["initContainers"][0] = container({"cpu": "1"})
    assert decode_pod(spec).requests == {"cpu": 1200}  # containers + sidecar, above every init step


def test_overhead_and_pod_level_resources() -> None:
    spec = {
        "containers": [container({"cpu": "1", "memory": "1Gi"}, {"cpu": "2"})],
        "overhead": {"cpu": "100m", "memory": "64Mi"},
        "resources": {"requests": {"memory": "8Gi"}, "limits": {"memory": "8Gi"}},
    }
    pod = decode_pod(spec)
    assert pod.requests == {"cpu": 1100, "memory": 8 * GIB + 64 * 2**20}  # pod level replaces, then overhead
    assert pod.limits == {"cpu": 2000, "memory": 8 * GIB}  # no overhead in limits


def test_a_quantity_that_cannot_be_read_is_named_not_guessed() -> None:
    pod = decode_pod({"containers": [container({"cpu": "lots", "memory": "1Gi"}, {"nvidia.com/gpu": "one"})]})
    assert pod.requests == {"memory": GIB} and pod.limits == {}
    assert pod.resources_error == (
        "spec.containers[0].resources.requests[cpu]: 'lots' is not a quantity; "
        "spec.containers[0].resources.limits[nvidia.com/gpu]: 'one' is not a quantity"
    )


def test_everything_the_scheduler_reads() -> None:
    spec = {
        "schedulerName": "slurm-syncer", "nodeName": "", "terminationGracePeriodSeconds": 10,
        "containers": [container({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"})],
        "nodeSelector": {"pool": "gpu"}, "priority": 1000,
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
            ]}}},
        "schedulingGates": [{"name": "example.com/wait"}],
    }  # fmt: skip
    pod = decode_pod(
        spec, uid="u1", resourceVersion="7", creationTimestamp="2027-01-15T08:00:00Z",
        deletionTimestamp="2027-01-15T08:01:00Z", labels={"app": "serve"}, annotations={"a": "b"},
        ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju",
                          "controller": True}],
    )  # fmt: skip
    assert (pod.key, pod.uid, pod.resource_version, pod.scheduler_name) == ("ns/p", "u1", "7", "slurm-syncer")
    assert pod.creation_timestamp == 1_800_000_000.0 and pod.deletion_timestamp == 1_800_000_060.0
    assert pod.terminating and not pod.ended and pod.termination_grace_period_s == 10
    assert pod.requests == pod.limits == {"nvidia.com/gpu": 2}
    assert pod.node_selector == {"pool": "gpu"} and pod.priority == 1000
    assert pod.controller is not None and (pod.controller.kind, pod.controller.uid) == ("Job", "ju")
    assert pod.tolerations[0].operator == "Exists" and pod.tolerations[0].toleration_seconds == 5
    term = pod.affinity[0]
    assert term.match_expressions[0].values == ("a",) and term.match_fields[0].operator == "NotIn"
    assert pod.scheduling_gates == ("example.com/wait",)
    assert decode_pod({}).termination_grace_period_s == 30 and decode_pod({}).affinity == ()


def test_pod_usage_and_a_job_and_a_node() -> None:
    usage: PodUsage = Codec("PodUsage").decode_object(json.dumps({
        "metadata": {"name": "d", "namespace": "kube-system", "uid": "x",
                     "deletionTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"nodeName": "n1", "containers": [container({"cpu": "100m"})]},
        "status": {"phase": "Running"},
    }).encode())  # fmt: skip
    assert (usage.key, usage.node_name, usage.terminating, usage.requests) == (
        "kube-system/d",
        "n1",
        True,
        {"cpu": 100},
    )
    job: KubeJob = Codec("Job").decode_object(json.dumps({
        "metadata": {"name": "j", "namespace": "ns", "uid": "ju"},
        "spec": {"parallelism": 4, "completions": 8, "completionMode": "Indexed", "backoffLimit": 1},
        "status": {"active": 4, "ready": 3, "succeeded": 1, "failed": 1,
                   "conditions": [{"type": "Complete", "status": "False"}]},
    }).encode())  # fmt: skip
    assert (job.parallelism, job.completions, job.completion_mode, job.backoff_limit) == (4, 8, "Indexed", 1)
    assert (job.active, job.ready, job.succeeded, job.failed, job.finished) == (4, 3, 1, 1, False)
    defaults: KubeJob = Codec("Job").decode_object(b'{"metadata": {"name": "q"}, "spec": {}}')
    assert (defaults.parallelism, defaults.completions, defaults.ready) == (1, None, 0)
    node: KubeNode = Codec("Node").decode_object(json.dumps({
        "metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "95", "memory": "1000Mi", "pods": "110", "hugepages-2Mi": "0",
                                   "bad": "x"}},
    }).encode())  # fmt: skip
    assert node.allocatable == {"cpu": 95_000, "memory": 1000 * 2**20, "pods": 110, "hugepages-2Mi": 0}
    assert [(t.key, t.value, t.effect) for t in node.taints] == [("gpu", "a100", "NoSchedule")]
