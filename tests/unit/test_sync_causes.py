"""Kubernetes -> Slurm drain causes: one table row per contract rule."""

from __future__ import annotations

import pytest

from syncer.controllers.sync.causes import Cause, drain_causes, is_automatic
from syncer.controllers.sync.options import SyncOptions
from syncer.model import Condition, KubeNode, KubePod
from syncer.model.keys import Keys, NVSentinel
from syncer.model.reason import UNSAFE_CHARS

NOW = 1_000_000.0
OPTS = SyncOptions(drain_on_conditions=(("GpuUnhealthy", "True"),))
READY = Condition(type="Ready", status="True", reason="KubeletReady", last_transition_time=NOW - 3600)


def knode(
    *,
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    conditions: tuple[Condition, ...] = (READY,),
) -> KubeNode:
    return KubeNode(
        name="k1",
        unschedulable=unschedulable,
        annotations=annotations or {},
        labels=labels or {},
        conditions=conditions,
    )


def kpod(*, annotations: dict[str, str] | None = None, deletion_timestamp: float | None = None) -> KubePod:
    return KubePod(
        namespace="hpc",
        name="slurmd-0",
        node_name="k1",
        annotations=annotations or {},
        deletion_timestamp=deletion_timestamp,
    )


def not_ready(since: float, status: str = "False") -> Condition:
    return Condition(
        type="Ready",
        status=status,
        reason="KubeletNotReady",
        message="container runtime is down",
        last_transition_time=since,
    )


def causes_of(
    pod: KubePod | None,
    node: KubeNode | None,
    scale_in_of: str | None = None,
    opts: SyncOptions = OPTS,
    held: str | None = None,
) -> tuple[Cause, ...]:
    return drain_causes(pod, node, now=NOW, opts=opts, scale_in_of=scale_in_of, held=held).causes


GPU_BAD = Condition(type="GpuUnhealthy", status="True", reason="XidError", message="Xid 79 on GPU 3")


@pytest.mark.parametrize(
    ("pod", "node", "expected"),
    [
        pytest.param(kpod(), knode(), (), id="healthy: nothing"),
        pytest.param(None, None, (), id="nothing bound"),
        pytest.param(None, knode(unschedulable=True), (Cause("cordon", "Node cordoned"),), id="cordon"),
        pytest.param(
            None,
            knode(unschedulable=True, annotations={Keys.CORDON_REASON: "kernel upgrade\nCHG-42"}),
            (Cause("cordon", "kernel upgrade CHG-42"),),
            id="cordon with reason annotation",
        ),
        pytest.param(
            None,
            knode(unschedulable=True, annotations={Keys.CORDON_REASON: " \t"}),
            (Cause("cordon", "Node cordoned"),),
            id="cordon with blank reason annotation",
        ),
        pytest.param(
            None,
            knode(unschedulable=True, labels={NVSentinel.CORDON_REASON_LABEL: "GPU-fatal-error-ruleset"}),
            (Cause("cordon", "GPU-fatal-error-ruleset"),),
            id="cordon with NVSentinel's reason label",
        ),
        pytest.param(
            None,
            knode(
                unschedulable=True,
                annotations={Keys.CORDON_REASON: "kernel upgrade"},
                labels={NVSentinel.CORDON_REASON_LABEL: "GPU-fatal-error-ruleset"},
            ),
            (Cause("cordon", "kernel upgrade"),),
            id="a reason annotation before a reason label",
        ),
        pytest.param(
            None,
            knode(labels={NVSentinel.CORDON_REASON_LABEL: "GPU-fatal-error-ruleset"}),
            (),
            id="a reason label without a cordon is no cause",
        ),
        pytest.param(
            None,
            knode(unschedulable=True, annotations={Keys.CORDONED_BY: "slurm"}),
            (),
            id="our own echo of a Slurm drain is no cause",
        ),
        pytest.param(
            None,
            knode(unschedulable=True, annotations={Keys.CORDONED_BY: "someone"}),
            (Cause("cordon", "Node cordoned"),),
            id="a cordon marked by someone else is a cause",
        ),
        pytest.param(
            None,
            knode(conditions=(not_ready(NOW - 61),)),
            (Cause("not-ready", "(Ready: KubeletNotReady: container runtime is down)"),),
            id="Ready False after the grace period",
        ),
        pytest.param(None, knode(conditions=(not_ready(NOW - 59),)), (), id="Ready False within grace"),
        pytest.param(
            None,
            knode(conditions=(Condition(type="Ready", status="Unknown", last_transition_time=NOW - 600),)),
            (Cause("not-ready", "(Ready: Unknown)"),),
            id="Ready Unknown without reason shows the status",
        ),
        pytest.param(
            None,
            knode(conditions=()),
            (Cause("not-ready", "(Ready: NoReadyCondition: Node reports no Ready condition)"),),
            id="missing Ready condition counts as not ready since forever",
        ),
        pytest.param(
            None,
            knode(conditions=(READY, GPU_BAD)),
            (Cause("condition", "(GpuUnhealthy: XidError: Xid 79 on GPU 3)"),),
            id="configured NPD condition",
        ),
        pytest.param(
            None,
            knode(conditions=(READY, Condition(type="GpuUnhealthy", status="False"))),
            (),
            id="configured condition with another status",
        ),
        pytest.param(
            kpod(annotations={Keys.DRAIN_REQUEST: "bad IB port\r\n"}),
            knode(),
            (Cause("drain-annotation", "bad IB port"),),
            id="drain annotation on the pod",
        ),
        pytest.param(
            None,
            knode(annotations={Keys.DRAIN_REQUEST: "rack 12 power work"}),
            (Cause("drain-annotation", "rack 12 power work"),),
            id="drain annotation on the Node",
        ),
        pytest.param(
            kpod(annotations={Keys.DRAIN_REQUEST: ""}),
            knode(),
            (Cause("drain-annotation", "drain requested via annotation"),),
            id="empty drain annotation",
        ),
        pytest.param(
            kpod(annotations={Keys.DRAIN_REQUEST: "same"}),
            knode(annotations={Keys.DRAIN_REQUEST: "same"}),
            (Cause("drain-annotation", "same"),),
            id="identical causes appear once",
        ),
        pytest.param(
            kpod(deletion_timestamp=NOW - 1),
            knode(),
            (Cause("terminating", "pod hpc/slurmd-0 terminating"),),
            id="terminating pod",
        ),
    ],
)
def test_causes(pod: KubePod | None, node: KubeNode | None, expected: tuple[Cause, ...]) -> None:
    assert causes_of(pod, node) == expected


def test_scale_in() -> None:
    assert causes_of(kpod(), knode(), scale_in_of="gpu-a") == (
        Cause("scale-in", "scale-in of NodeSet gpu-a"),
    )


def test_scheduler_hold_is_an_explicit_cause_after_scale_in() -> None:
    """The scheduler holds a node while a pod whose job ended still runs there: never held back by the
    valve (someone's intent, not a health signal), and last in the reason."""
    held = "scheduler hold: pod a/b still runs: Slurm job 7 was cancelled in Slurm"
    found = causes_of(kpod(), knode(), scale_in_of="gpu-a", held=held)
    assert found == (Cause("scale-in", "scale-in of NodeSet gpu-a"), Cause("scheduler-hold", held))
    assert not is_automatic(found[1:])
    assert causes_of(kpod(), knode(), held=None) == ()


def test_all_causes_in_stable_order() -> None:
    node = knode(
        unschedulable=True,
        annotations={Keys.DRAIN_REQUEST: "on node"},
        conditions=(not_ready(0.0), GPU_BAD),
    )
    pod = kpod(annotations={Keys.DRAIN_REQUEST: "on pod"}, deletion_timestamp=NOW)
    kinds = [c.kind for c in causes_of(pod, node, scale_in_of="gpu-a")]
    assert kinds == [
        "cordon",
        "not-ready",
        "condition",
        "drain-annotation",
        "drain-annotation",
        "terminating",
        "scale-in",
    ]
    texts = [c.text for c in causes_of(pod, node, scale_in_of="gpu-a")]
    assert texts[3:5] == ["on pod", "on node"]


def test_unconfigured_condition_is_no_cause() -> None:
    assert causes_of(None, knode(conditions=(READY, GPU_BAD)), opts=SyncOptions()) == ()


def test_configured_ready_condition_does_not_duplicate_not_ready() -> None:
    opts = SyncOptions(drain_on_conditions=(("Ready", "False"),))
    found = causes_of(None, knode(conditions=(not_ready(NOW - 3600),)), opts=opts)
    assert [c.text for c in found] == ["(Ready: KubeletNotReady: container runtime is down)"]


@pytest.mark.parametrize(
    ("since", "expected_recheck"),
    [
        (NOW - 10, NOW + 50),  # grace running: re-evaluate when it ends
        (NOW - 60, None),  # exactly the grace period: a cause now, nothing pending
        (NOW - 3600, None),
        (NOW + 5, NOW + 65),  # transition time ahead of our clock (skew): still pending
    ],
)
def test_recheck_at_when_ready_grace_is_pending(since: float, expected_recheck: float | None) -> None:
    drain = drain_causes(None, knode(conditions=(not_ready(since),)), now=NOW, opts=OPTS)
    assert drain.recheck_at == expected_recheck
    assert bool(drain.causes) == (expected_recheck is None)


def test_recheck_at_is_the_moment_the_cause_appears() -> None:
    node = knode(conditions=(not_ready(NOW - 10),))
    recheck_at = drain_causes(None, node, now=NOW, opts=OPTS).recheck_at
    assert recheck_at is not None
    later = drain_causes(None, node, now=recheck_at, opts=OPTS)
    assert [c.kind for c in later.causes] == ["not-ready"]
    assert later.recheck_at is None


def test_ready_true_never_pending() -> None:
    drain = drain_causes(kpod(), knode(), now=NOW, opts=OPTS)
    assert (drain.causes, drain.recheck_at, drain.reason) == ((), None, "")  # no cause composes no reason


def test_grace_is_configurable() -> None:
    node = knode(conditions=(not_ready(NOW - 10),))
    assert causes_of(None, node, opts=SyncOptions(ready_grace_s=0)) != ()
    assert causes_of(None, node, opts=SyncOptions(ready_grace_s=300)) == ()


@pytest.mark.parametrize(
    "hostile",
    [
        "\x00\x01\x02\n\r\t\x1b[2J\x7f\x9b",
        "multi\nline\nreason\n" * 1000,
        "x" * 1_048_576,
        "日本語🚀ä" * 100_000,
        "\ud83d\ude80 lone \udfff surrogate",
        "\u202eevil reversed",
    ],
)
def test_hostile_annotation_texts_are_clean_and_bounded(hostile: str) -> None:
    pod = kpod(annotations={Keys.DRAIN_REQUEST: hostile})
    node = knode(unschedulable=True, annotations={Keys.CORDON_REASON: hostile, Keys.DRAIN_REQUEST: hostile})
    for found in causes_of(pod, node):
        assert not UNSAFE_CHARS.search(found.text)
        assert 0 < len(found.text.encode("utf-8")) <= OPTS.max_reason_bytes


def test_cordon_reason_labels_are_configurable():
    node = knode(
        unschedulable=True, labels={"example.com/why": "rack-7-power", NVSentinel.CORDON_REASON_LABEL: "x"}
    )
    opts = SyncOptions(cordon_reason_labels=("example.com/why",))
    assert drain_causes(None, node, now=NOW, opts=opts).causes == (Cause("cordon", "rack-7-power"),)
    none = SyncOptions(cordon_reason_labels=())
    assert drain_causes(None, node, now=NOW, opts=none).causes == (Cause("cordon", "Node cordoned"),)
