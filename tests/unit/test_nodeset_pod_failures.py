"""start_failure: each way a member's pod cannot start gives a one-line reason naming the pod and why;
healthy, starting and not-yet-overdue pods give None. The pod and Node shapes are kube-apiserver's."""

from __future__ import annotations

from typing import Any

import pytest

from syncer.controllers.nodeset.node_shape import slurmd_path
from syncer.controllers.nodeset.pod_failures import (
    CANNOT_START,
    CRASH_LOOP,
    MAX_REASON_BYTES,
    may_have_failed,
    start_failure,
)
from syncer.model.kube import KubePod
from syncer.model.times import rfc3339

NOW = 1_700_000_600.0  # 2023-11-14T22:23:20Z
CREATED = "2023-11-14T22:13:20Z"  # NOW - 600 s
BOUND_S = 300.0


def node(ready: str = "True", reason: str = "KubeletReady") -> dict[str, Any]:
    return {
        "metadata": {"name": "kw-1"},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": ready, "reason": reason},
            ]
        },
    }


def pod(
    *, node_name: str = "kw-1", phase: str = "Running", created: str = CREATED, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "slurm", "name": "gpu-3", "creationTimestamp": created},
        "spec": {"nodeName": node_name, "containers": [{"name": "slurmd", "image": "slurmd:26.05"}]},
        "status": {"phase": phase, **status},
    }


def waiting(reason: str, message: str = "", **extra: Any) -> list[dict[str, Any]]:
    state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    return [{"name": "slurmd", "ready": False, "restartCount": 0, "state": state, **extra}]


def failure(p: dict[str, Any], n: dict[str, Any] | None = None, now: float = NOW) -> str | None:
    return start_failure(p, n, now, unschedulable_after_s=BOUND_S)


RUNNING = [{"name": "slurmd", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": CREATED}}}]
UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "lastTransitionTime": CREATED,
    "message": "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
    "2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: "
    "3 Preemption is not helpful for scheduling.",
}


@pytest.mark.parametrize(
    "p",
    [
        pod(containerStatuses=RUNNING, conditions=[{"type": "Ready", "status": "True"}]),
        pod(phase="Pending", containerStatuses=waiting("ContainerCreating")),
        pod(phase="Pending", initContainerStatuses=waiting("PodInitializing")),
        pod(phase="Pending"),  # bound, the kubelet has not reported yet
        pod(node_name="", phase="Pending", conditions=[UNSCHEDULABLE], created="2023-11-14T22:20:00Z"),
        pod(node_name="", phase="Pending", created="2023-11-14T22:20:00Z"),  # not looked at yet
    ],
    ids=[
        "running",
        "creating",
        "initialising",
        "bound-no-status",
        "unschedulable-young",
        "unscheduled-young",
    ],
)
def test_pods_that_may_still_start_have_no_failure(p: dict[str, Any]) -> None:
    assert failure(p, node() if p["spec"]["nodeName"] else None) is None


def test_unschedulable_past_the_bound_names_the_pod_and_the_schedulers_message() -> None:
    p = pod(node_name="", phase="Pending", conditions=[UNSCHEDULABLE])
    assert failure(p) == (
        "pod slurm/gpu-3 Unschedulable for 600s: 0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }, 2 node(s) didn't match Pod's node affinity/selector"
    )
    assert failure(p, now=NOW - 301) is None  # 299 s: the autoscaler still has time


def test_unscheduled_without_a_scheduler_decision_past_the_bound() -> None:
    assert failure(pod(node_name="", phase="Pending")) == (
        "pod slurm/gpu-3 not scheduled for 600s (no scheduler decision)"
    )


def test_the_bound_falls_back_to_the_conditions_time_without_a_creation_time() -> None:
    p = pod(node_name="", phase="Pending", conditions=[UNSCHEDULABLE], created="")
    assert failure(p) is not None
    assert failure(p, now=NOW - 400) is None


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("ErrImagePull", 'failed to pull and unpack image "invalid.example/slurmd:1": not found'),
        ("ImagePullBackOff", 'Back-off pulling image "invalid.example/slurmd:1"'),
        ("InvalidImageName", 'Failed to apply default image tag "Slurmd:1": invalid reference format'),
        ("ErrImageNeverPull", 'Container image "slurmd:1" is not present with pull policy of Never'),
        ("CreateContainerConfigError", 'secret "munge-key" not found'),
    ],
)
def test_a_container_that_cannot_start(reason: str, message: str) -> None:
    p = pod(phase="Pending", containerStatuses=waiting(reason, message))
    assert failure(p, node()) == f"pod slurm/gpu-3 {reason} (container slurmd): {message}"


def test_an_init_container_that_cannot_start_counts_too() -> None:
    p = pod(
        phase="Pending",
        initContainerStatuses=waiting("ImagePullBackOff"),
        containerStatuses=waiting("PodInitializing"),
    )
    assert failure(p, node()) == "pod slurm/gpu-3 ImagePullBackOff (container slurmd)"


def test_crash_loop_says_how_often_and_how_it_last_ended() -> None:
    crashed = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": CREATED}}
    p = pod(
        containerStatuses=waiting(
            "CrashLoopBackOff",
            "back-off 40s restarting failed container=slurmd pod=gpu-3_slurm(uid)",
            restartCount=3,
            lastState=crashed,
        )
    )
    assert (
        failure(p, node())
        == "pod slurm/gpu-3 CrashLoopBackOff (container slurmd, 3 restarts, last exit 1 (Error))"
    )


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (None, "pod slurm/gpu-3 lost its Node kw-1: the Node is gone"),
        (
            node("Unknown", "NodeStatusUnknown"),
            "pod slurm/gpu-3 lost its Node kw-1: NotReady (NodeStatusUnknown)",
        ),
        (node("False", "KubeletNotReady"), "pod slurm/gpu-3 lost its Node kw-1: NotReady (KubeletNotReady)"),
    ],
    ids=["deleted", "unknown", "not-ready"],
)
def test_node_lost_under_a_running_member(n: dict[str, Any] | None, expected: str) -> None:
    assert failure(pod(containerStatuses=RUNNING), n) == expected


def test_node_lost_is_reported_for_a_terminating_pod_but_nothing_else_is() -> None:
    p = pod(containerStatuses=waiting("ImagePullBackOff"))
    p["metadata"]["deletionTimestamp"] = CREATED
    assert failure(p, node()) is None
    assert failure(p, None) == "pod slurm/gpu-3 lost its Node kw-1: the Node is gone"


def test_a_node_without_a_ready_condition_is_not_judged() -> None:
    assert failure(pod(containerStatuses=RUNNING), {"metadata": {"name": "kw-1"}, "status": {}}) is None


def test_failed_pod_with_the_kubelets_reason() -> None:
    p = pod(phase="Failed", reason="Evicted", message="The node was low on resource: memory. ")
    assert failure(p, node()) == "pod slurm/gpu-3 Failed: Evicted: The node was low on resource: memory."


def test_failed_pod_without_a_reason_says_how_its_container_ended() -> None:
    ended = [
        {"name": "slurmd", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}, "restartCount": 0}
    ]
    assert failure(pod(phase="Failed", containerStatuses=ended), node()) == (
        "pod slurm/gpu-3 Failed: container slurmd exit 2 (Error)"
    )
    assert failure(pod(phase="Succeeded"), node()) == "pod slurm/gpu-3 Succeeded"


def test_the_reason_is_one_short_printable_line() -> None:
    message = "line one\nline two\t\u202eevil " + "\u00e9" * 400
    text = failure(
        pod(phase="Pending", containerStatuses=waiting("CreateContainerConfigError", message)), node()
    )
    assert text is not None
    assert text.startswith(
        "pod slurm/gpu-3 CreateContainerConfigError (container slurmd): line one line two evil é"
    )
    assert text.isprintable()
    assert len(text.encode()) <= MAX_REASON_BYTES
    assert len(text.encode()) >= MAX_REASON_BYTES - 1  # cut at a character boundary, not earlier


def test_a_node_notready_is_lost_only_once_it_lasted_the_bound() -> None:
    """A kubelet restart or an apiserver blip turns Ready Unknown for a moment: not a lost Node."""
    n = node("Unknown", "NodeStatusUnknown")
    n["status"]["conditions"][1]["lastTransitionTime"] = rfc3339(NOW - 10)
    p = pod(containerStatuses=RUNNING)
    assert start_failure(p, n, NOW, unschedulable_after_s=BOUND_S, node_lost_after_s=120) is None
    lost = start_failure(p, n, NOW + 110, unschedulable_after_s=BOUND_S, node_lost_after_s=120)
    assert lost == "pod slurm/gpu-3 lost its Node kw-1: NotReady (NodeStatusUnknown)"


def with_sidecar(p: dict[str, Any], *, native: bool = False) -> dict[str, Any]:
    shipper = {"name": "log-shipper", "image": "crashloop.example/shipper"}
    spec = dict(p["spec"])
    if native:
        spec["initContainers"] = [{**shipper, "restartPolicy": "Always"}]
    else:
        spec["containers"] = [*spec["containers"], shipper]
    return {**p, "spec": spec}


CRASHING_SHIPPER = [
    {
        "name": "log-shipper",
        "ready": False,
        "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
    }
]


@pytest.mark.parametrize("native", [False, True], ids=["container", "native-sidecar"])
def test_a_crash_looping_sidecar_is_not_the_slurmd_failing(native: bool) -> None:
    """Only slurmd's state (and init containers slurmd waits for) says the member cannot come up: a sidecar
    beside it in CrashLoopBackOff, a container or an init container with restartPolicy Always, does not."""
    if native:
        p = with_sidecar(pod(initContainerStatuses=CRASHING_SHIPPER, containerStatuses=RUNNING), native=True)
    else:
        p = with_sidecar(pod(containerStatuses=RUNNING + CRASHING_SHIPPER))
    assert failure(p, node()) is None


def test_the_slurmd_container_is_the_one_named_slurmd_else_the_first() -> None:
    crashing = waiting("CrashLoopBackOff", restartCount=2)
    first = pod(containerStatuses=[{**crashing[0], "name": "main"}])
    first["spec"]["containers"] = [{"name": "main"}, {"name": "shipper"}]
    assert failure(first, node()) == "pod slurm/gpu-3 CrashLoopBackOff (container main, 2 restarts)"
    named = pod(containerStatuses=[{**crashing[0], "name": "main"}])
    named["spec"]["containers"] = [{"name": "main"}, {"name": "slurmd"}]
    assert failure(named, node()) is None  # main is a sidecar here: slurmd is named


def test_a_plain_init_container_that_crash_loops_still_counts() -> None:
    p = with_sidecar(pod(phase="Pending"), native=False)
    p["spec"]["initContainers"] = [{"name": "munge-key"}]
    p["status"]["initContainerStatuses"] = [
        {**waiting("CrashLoopBackOff", restartCount=1)[0], "name": "munge-key"}
    ]
    assert failure(p, node()) == "pod slurm/gpu-3 CrashLoopBackOff (container munge-key, 1 restarts)"


def test_a_pod_without_a_spec_is_judged_by_every_container() -> None:
    p = pod(containerStatuses=[{**waiting("CrashLoopBackOff", restartCount=1)[0], "name": "any"}])
    del p["spec"]["containers"]
    assert failure(p, node()) == "pod slurm/gpu-3 CrashLoopBackOff (container any, 1 restarts)"


def cached(**fields: Any) -> KubePod:
    return KubePod(namespace="slurm", name="gpu-3", **{"created": NOW - 600, **fields})


SLURMD_PATH = frozenset({"slurmd", "munge-key"})


@pytest.mark.parametrize(
    ("p", "looks_failed"),
    [
        (cached(node_name="kw-1", phase="Running"), False),
        (cached(node_name="kw-1", phase="Pending", waiting=(("slurmd", "ContainerCreating"),)), False),
        (cached(node_name="kw-1", phase="Pending", waiting=(("slurmd", "ImagePullBackOff"),)), True),
        (cached(node_name="kw-1", phase="Pending", waiting=(("munge-key", "ErrImagePull"),)), True),
        (cached(node_name="kw-1", phase="Running", waiting=(("slurmd", "CrashLoopBackOff"),)), True),
        (cached(node_name="kw-1", phase="Running", waiting=(("shipper", "CrashLoopBackOff"),)), False),
        (cached(node_name="kw-1", phase="Failed"), True),
        (cached(node_name="kw-1", phase="Succeeded"), True),
        (cached(phase="Pending"), True),  # unscheduled for 600 s, the bound 300 s
        (cached(phase="Pending", created=NOW - 299), False),
        (cached(phase="Pending", created=NOW - 300), True),
        (cached(phase="Pending", created=0.0), True),  # unknown creation time: read it
        (cached(phase="Pending", deletion_timestamp=NOW), False),  # ending: judged by its Node only
        (cached(node_name="kw-1", waiting=(("slurmd", "CrashLoopBackOff"),), deletion_timestamp=NOW), False),
    ],
)
def test_the_informers_pod_says_when_a_fresh_read_is_worth_it(p: KubePod, looks_failed: bool) -> None:
    """Only a pod that may have failed is read again (a GET per powering-up pod per pass was 1,000 GETs a
    pass at 1,000 power-ups); the read then gives the reason as start_failure words it."""
    found = may_have_failed(p, NOW, unschedulable_after_s=BOUND_S, slurmd_path=SLURMD_PATH)
    assert found is looks_failed


def test_without_a_slurmd_path_every_container_counts() -> None:
    p = cached(node_name="kw-1", waiting=(("shipper", "CrashLoopBackOff"),))
    assert may_have_failed(p, NOW, unschedulable_after_s=BOUND_S)


def test_each_reason_start_failure_acts_on_is_one_the_informers_pod_flags() -> None:
    for reason in (*CANNOT_START, CRASH_LOOP):
        p = cached(node_name="kw-1", waiting=(("slurmd", reason),))
        assert may_have_failed(p, NOW, unschedulable_after_s=BOUND_S, slurmd_path=SLURMD_PATH), reason


def test_the_slurmd_path_is_slurmd_and_the_init_containers_but_native_sidecars() -> None:
    template = {
        "spec": {
            "initContainers": [{"name": "munge-key"}, {"name": "shipper", "restartPolicy": "Always"}],
            "containers": [{"name": "main"}, {"name": "slurmd"}],
        }
    }
    assert slurmd_path(template) == frozenset({"munge-key", "slurmd"})
    assert slurmd_path({"spec": {"containers": [{"name": "first"}, {"name": "other"}]}}) == {"first"}
    assert slurmd_path({}) == frozenset()


def test_unschedulable_without_a_reason_or_message_reads_unschedulable_alone() -> None:
    bare = {"type": "PodScheduled", "status": "False", "lastTransitionTime": CREATED}
    assert failure(pod(node_name="", phase="Pending", conditions=[bare])) == (
        "pod slurm/gpu-3 Unschedulable for 600s"
    )


def test_unschedulable_exactly_at_the_bound_is_reported() -> None:
    p = pod(node_name="", phase="Pending", conditions=[UNSCHEDULABLE])
    assert failure(p, now=NOW - 600 + BOUND_S) is not None


def test_only_the_schedulers_final_period_is_dropped_whatever_the_message_ends_with() -> None:
    scheduled = {**UNSCHEDULABLE, "message": "0/1 nodes are available: 1 Insufficient example.com/nicX."}
    assert failure(pod(node_name="", phase="Pending", conditions=[scheduled])) == (
        "pod slurm/gpu-3 Unschedulable for 600s: 0/1 nodes are available: 1 Insufficient example.com/nicX"
    )


def test_a_notready_node_without_a_reason_is_named_by_its_status() -> None:
    n = node("Unknown")
    del n["status"]["conditions"][1]["reason"]
    assert (
        failure(pod(containerStatuses=RUNNING), n) == "pod slurm/gpu-3 lost its Node kw-1: NotReady (Unknown)"
    )


def test_by_default_a_notready_node_is_lost_at_once() -> None:
    n = node("False", "KubeletNotReady")
    n["status"]["conditions"][1]["lastTransitionTime"] = rfc3339(NOW)  # this very second
    assert start_failure(pod(containerStatuses=RUNNING), n, NOW, unschedulable_after_s=BOUND_S) == (
        "pod slurm/gpu-3 lost its Node kw-1: NotReady (KubeletNotReady)"
    )


def test_a_failed_pod_names_the_init_container_that_ended_and_an_exit_without_a_reason() -> None:
    init = [{"name": "fetch-conf", "state": {"terminated": {"exitCode": 137}}, "restartCount": 0}]
    assert failure(pod(phase="Failed", initContainerStatuses=init), node()) == (
        "pod slurm/gpu-3 Failed: container fetch-conf exit 137"
    )


def test_a_cut_reason_never_splits_a_character_whichever_byte_the_cap_falls_on() -> None:
    for pad in ("", "x"):
        message = pad + "\u00e9" * 400
        text = failure(
            pod(phase="Pending", containerStatuses=waiting("CreateContainerConfigError", message)), node()
        )
        assert text is not None and text.endswith("\u00e9")
        assert MAX_REASON_BYTES - 1 <= len(text.encode()) <= MAX_REASON_BYTES


def test_a_pod_held_by_scheduling_gates_says_so_in_the_schedulers_words() -> None:
    gated = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates",
        "lastTransitionTime": CREATED,
    }
    assert failure(pod(node_name="", phase="Pending", conditions=[gated])) == (
        "pod slurm/gpu-3 SchedulingGated for 600s: Scheduling is blocked due to non-empty scheduling gates"
    )
