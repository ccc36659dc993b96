"""What the one-pool scheduler's Kubernetes views cost (issue 44): bytes held per pod once decoded, at
10,000 pods, for each compact view the syncer has, and what one bind's read of a Node's pods costs.

    python benchmarks/scheduler_pods.py --pods 10000 --per-node 110

The pods are built as kube-apiserver serves a Deployment's pod (managedFields, probes, env, volumes,
container statuses: about 5 KB of JSON each); each view decodes the same bytes. "held" is what stays
referenced after the decode (tracemalloc), per pod.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from typing import Any

from syncer.kube.decode import Codec

VIEWS = {
    "SchedulerPod (the scheduler's own pods)": "SchedulerPod",
    "PodUsage (a pod holding room on a Node)": "PodUsage",
    "KubePod (the slurmd pods' informer)": "Pod",
}


def served_pod(i: int, node: str) -> dict[str, Any]:
    """A pod as kube-apiserver serves one of a Deployment's, with a GPU request and a scheduler's status."""
    name = f"serve-7d9f8c6b5-{i:05x}"
    # pods created one every 2 s, started and ready a few seconds later: their times differ
    time_ = _at(1_800_000_000 + 2 * i)
    started, ready = _at(1_800_000_003 + 2 * i), _at(1_800_000_009 + 2 * i)
    resources = {
        "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"},
    }
    server: dict[str, Any] = {'k:{"name":"server"}': {".": {}, "f:image": {}, "f:resources": {}}}
    fields = {
        "f:metadata": {
            "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
            "f:ownerReferences": {".": {}, 'k:{"uid":"0"}': {}},
        },
        "f:spec": {"f:containers": server},
    }
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "generateName": "serve-7d9f8c6b5-",
            "namespace": "inference",
            "uid": f"6f0b1c3e-1d2a-4c5b-9e8f-{i:012x}",
            "resourceVersion": str(1_000_000 + i),
            "creationTimestamp": time_,
            "labels": {"app": "serve", "pod-template-hash": "7d9f8c6b5"},
            "annotations": {"slurm-syncer.dev/partition": "gpu", "kubectl.kubernetes.io/restartedAt": time_},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "serve-7d9f8c6b5",
                    "uid": "0",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": time_,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields,
                }
            ],
        },
        "spec": {
            "schedulerName": "slurm-syncer",
            "nodeName": node,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 20,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "securityContext": {},
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "containers": [
                {
                    "name": "server",
                    "image": "registry.example.org/llm/serve:2.4.1",
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["--model", "/models/llama", "--port", "8000"],
                    "ports": [{"containerPort": 8000, "name": "http", "protocol": "TCP"}],
                    "env": [{"name": "HF_HOME", "value": "/cache"}, {"name": "NCCL_DEBUG", "value": "WARN"}],
                    "resources": resources,
                    "readinessProbe": {
                        "httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"},
                        "periodSeconds": 10,
                        "timeoutSeconds": 1,
                        "successThreshold": 1,
                        "failureThreshold": 3,
                    },
                    "volumeMounts": [
                        {"name": "models", "mountPath": "/models"},
                        {
                            "name": "kube-api-access-x1",
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "readOnly": True,
                        },
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ],
            "volumes": [
                {"name": "models", "persistentVolumeClaim": {"claimName": "models"}},
                {
                    "name": "kube-api-access-x1",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                    },
                },
            ],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
        },
        "status": {
            "phase": "Running",
            "qosClass": "Burstable",
            "hostIP": "10.0.0.7",
            "podIP": f"10.244.{i // 250 % 250}.{i % 250}",
            "startTime": time_,
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": when}
                for t, when in (
                    ("PodReadyToStartContainers", started),
                    ("Initialized", time_),
                    ("Ready", ready),
                    ("ContainersReady", ready),
                    ("PodScheduled", time_),
                )
            ],
            "containerStatuses": [
                {
                    "name": "server",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": "registry.example.org/llm/serve:2.4.1",
                    "imageID": "registry.example.org/llm/serve@sha256:" + "0" * 64,
                    "containerID": "containerd://" + f"{i:064x}",
                    "state": {"running": {"startedAt": time_}},
                }
            ],
        },
    }


def _at(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def held_per_pod(kind: str, bodies: list[bytes]) -> tuple[float, float]:
    """(bytes held per decoded pod, microseconds to decode one)."""
    codec = Codec(kind)
    gc.collect()
    tracemalloc.start()
    try:
        started = time.perf_counter()
        held = [codec.decode_object(body) for body in bodies]
        seconds = time.perf_counter() - started
        gc.collect()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(held) == len(bodies)
    return size / len(bodies), seconds / len(bodies) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--per-node", type=int, default=110, help="pods on one Node (kubelet's default cap)")
    args = parser.parse_args()
    bodies = [json.dumps(served_pod(i, f"gpu-{i // args.per_node:04d}")).encode() for i in range(args.pods)]
    served = sum(len(b) for b in bodies) / len(bodies)
    print(f"{args.pods} pods, {served:,.0f} bytes of JSON each as served")
    for label, kind in VIEWS.items():
        held, micros = held_per_pod(kind, bodies)
        total_mib = held * args.pods / 2**20
        print(f"  {label}: {held:,.0f} bytes held per pod, {total_mib:.1f} MiB at {args.pods:,}, ", end="")
        print(f"{micros:.1f} us to decode one (traced)")
    node_list = (
        b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":['
        + b",".join(bodies[: args.per_node])
        + b"]}"
    )
    codec = Codec("PodUsage")
    started = time.perf_counter()
    codec.decode_list(node_list)
    decode_ms = (time.perf_counter() - started) * 1e3
    size_kib = len(node_list) / 2**10
    print(f"one bind's read of a full Node ({args.per_node} pods): {size_kib:,.0f} KiB on the wire, ", end="")
    print(f"decoded in {decode_ms:.1f} ms, nothing held after the check")


if __name__ == "__main__":
    main()
