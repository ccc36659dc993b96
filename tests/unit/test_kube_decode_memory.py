"""The informers' compact objects share what every object repeats: at 10,000 pods and 10,000 Nodes the
strings of conditions and of label and annotation keys were ~16 MB held once per object."""

from __future__ import annotations

import gc
import json
import tracemalloc

from syncer.kube.decode import Codec
from syncer.model.keys import Keys

COUNT = 2_000


def condition(type_: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-24T08:00:00Z",
    }


def pod_event(i: int) -> bytes:
    name = f"node{i:05d}"
    pod = {
        "metadata": {
            "name": f"slurmd-{name}",
            "namespace": "slurm",
            "uid": f"1b4e28ba-2fa1-11d2-883f-{i:012d}",
            "resourceVersion": str(100_000 + i),
            "labels": {Keys.NODE_NAME_LABEL: name},
            "annotations": {Keys.STATE: "IDLE+CLOUD+POWERED_DOWN"},
        },
        "spec": {"nodeName": f"k8s-{name}"},
        "status": {
            "phase": "Running",
            "conditions": [
                condition("Ready", "True", "", ""),
                condition(Keys.CONDITION_DRAINED, "False", "NotDrained", "Slurm node is not drained"),
                condition(Keys.CONDITION_HEALTHY, "True", "Healthy", "Slurm node is responding"),
            ],
        },
    }
    return json.dumps({"type": "MODIFIED", "object": pod}).encode()


def test_decoded_pods_share_repeated_strings() -> None:
    codec = Codec("Pod")
    events = [pod_event(i) for i in range(COUNT)]
    gc.collect()
    tracemalloc.start()
    try:
        held = [codec.decode_event(event)[1] for event in events]
        gc.collect()
        per_pod = tracemalloc.get_traced_memory()[0] / COUNT
    finally:
        tracemalloc.stop()
    first, last = held[0], held[-1]
    assert next(iter(first.annotations)) is next(iter(last.annotations))
    assert first.conditions[1].message is last.conditions[1].message
    assert first.annotations == {Keys.STATE: "IDLE+CLOUD+POWERED_DOWN"}
    print(f"\n{per_pod:.0f} bytes held per decoded pod")
    assert per_pod < 1_500, per_pod  # measured 1,260 shared, 1,990 each with its own copies


def test_scheduler_pods_pool_what_a_deployments_pods_repeat() -> None:
    """The one-pool scheduler's pods (benchmarks/scheduler_pods.py): labels, requests, tolerations and the
    owner are one copy for all the pods that repeat them."""
    from benchmarks.scheduler_pods import served_pod

    codec = Codec("SchedulerPod")
    bodies = [json.dumps(served_pod(i, f"gpu-{i // 110:04d}")).encode() for i in range(COUNT)]
    gc.collect()
    tracemalloc.start()
    try:
        held = [codec.decode_object(body) for body in bodies]
        gc.collect()
        per_pod = tracemalloc.get_traced_memory()[0] / COUNT
    finally:
        tracemalloc.stop()
    first, last = held[0], held[-1]
    assert first.requests is last.requests and first.tolerations is last.tolerations
    assert first.labels is last.labels and first.owners is last.owners
    print(f"\n{per_pod:.0f} bytes held per decoded scheduler pod")
    assert per_pod < 1_400, per_pod  # measured 1,054 (3,062 before pooling, all conditions kept)


def test_namespaced_objects_take_their_identity_alike_and_share_the_namespace() -> None:
    """Pods, NodeSets, scheduler pods and Jobs: namespace, name, uid and resourceVersion as served, and the
    namespace one string for every object of it (few namespaces, many objects)."""
    for kind in ("Pod", "NodeSet", "SchedulerPod", "Job"):
        codec = Codec(kind)
        first, last = (
            codec.decode_object(
                json.dumps(
                    {
                        "metadata": {
                            "name": f"o{i}",
                            "namespace": "team-a",
                            "uid": f"u{i}",
                            "resourceVersion": f"{i}",
                        }
                    }
                ).encode()
            )
            for i in (1, 2)
        )
        assert (first.namespace, first.name, first.uid, first.resource_version) == ("team-a", "o1", "u1", "1")
        assert (last.name, last.uid, last.resource_version) == ("o2", "u2", "2"), kind
        assert first.namespace is last.namespace, kind
