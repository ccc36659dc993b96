"""What the informer keeps of a pod's start (its creation time and the reasons its containers wait), so a
power-managed NodeSet judges a powering-up pod without reading it again."""

from __future__ import annotations

import json

from syncer.kube.decode import Codec


def test_a_pod_keeps_its_creation_time_and_its_waiting_containers_init_first() -> None:
    pod = {
        "metadata": {"name": "gpu-3", "namespace": "slurm", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"nodeName": "kw-1"},
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "munge-key", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "..."}}}
            ],
            "containerStatuses": [
                {"name": "slurmd", "state": {"waiting": {"reason": "PodInitializing"}}},
                {"name": "shipper", "state": {"running": {"startedAt": "2023-11-14T22:13:30Z"}}},
                {"name": "empty", "state": {"waiting": {}}},
            ],
        },
    }
    decoded = Codec("Pod").decode_object(json.dumps(pod).encode())
    assert decoded.created == 1_700_000_000.0  # 2023-11-14T22:13:20Z
    assert decoded.waiting == (("munge-key", "ImagePullBackOff"), ("slurmd", "PodInitializing"))


def test_a_running_pod_waits_for_nothing() -> None:
    pod = {"metadata": {"name": "a"}, "status": {"containerStatuses": [{"name": "slurmd", "state": {}}]}}
    decoded = Codec("Pod").decode_object(json.dumps(pod).encode())
    assert decoded.waiting == () and decoded.created == 0.0
