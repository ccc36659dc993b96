"""The sync decision: one table row per contract rule, then properties over generated inputs."""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.controllers.sync.causes import is_automatic
from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.plan import Decision, EventSpec, SlurmAction, decide, drift, is_ours
from syncer.model import Condition, KubeNode, KubePod, SlurmNode
from syncer.model.keys import Keys
from syncer.model.reason import UNSAFE_CHARS
from syncer.model.slurm import BASE_STATES, DRAIN_FLAGS, UNHEALTHY_FLAGS

NOW = 1_700_000_000.0
OPTS = SyncOptions(drain_on_conditions=(("GpuUnhealthy", "True"),))
CORDON_OPTS = replace(OPTS, cordon_on_slurm_drain=True)
READY = Condition(type="Ready", status="True", reason="KubeletReady", last_transition_time=NOW - 3600)
OURS = "k8s: Node cordoned"
ADMIN = "bad DIMM, ticket 4711"


def snode(*flags: str, reason: str = "", by: str = "", at: int = 0) -> SlurmNode:
    return SlurmNode(
        name="n1", state=frozenset(flags or ("IDLE",)), reason=reason, reason_set_by=by, reason_changed_at=at
    )


def knode(
    *,
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
    conditions: tuple[Condition, ...] = (READY,),
) -> KubeNode:
    return KubeNode(
        name="k1", unschedulable=unschedulable, annotations=annotations or {}, conditions=conditions
    )


def kpod(*, annotations: dict[str, str] | None = None, deletion_timestamp: float | None = None) -> KubePod:
    return KubePod(
        namespace="hpc",
        name="slurmd-0",
        node_name="k1",
        annotations=annotations or {},
        deletion_timestamp=deletion_timestamp,
    )


def run(
    slurm: SlurmNode | None,
    pod: KubePod | None,
    node: KubeNode | None,
    *,
    fresh: bool = True,
    opts: SyncOptions = OPTS,
    scale_in_of: str | None = None,
    now: float = NOW,
    held: str | None = None,
) -> Decision:
    return decide(slurm, pod, node, now=now, opts=opts, slurm_fresh=fresh, scale_in_of=scale_in_of, held=held)


def not_ready(since: float) -> Condition:
    return Condition(
        type="Ready",
        status="False",
        reason="KubeletNotReady",
        message="PLEG is not healthy",
        last_transition_time=since,
    )


GPU_BAD = Condition(type="GpuUnhealthy", status="True", reason="XidError", message="Xid 79")
DRAIN = SlurmAction("drain", OURS)


# --- Kubernetes -> Slurm ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slurm", "pod", "node", "fresh", "expected"),
    [
        pytest.param(snode("IDLE"), None, knode(unschedulable=True), True, DRAIN, id="cordon drains"),
        pytest.param(
            snode("ALLOCATED"), None, knode(unschedulable=True), True, DRAIN, id="cordon drains busy"
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=OURS),
            None,
            knode(),
            True,
            SlurmAction("undrain", OURS),
            id="uncordon",
        ),
        pytest.param(
            snode("MIXED", "DRAIN", reason=OURS),
            None,
            knode(),
            True,
            SlurmAction("undrain", OURS),
            id="uncordon while jobs still run",
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=OURS), None, knode(), False, None, id="stale data: no undrain"
        ),
        pytest.param(
            snode("IDLE"), None, knode(unschedulable=True), False, DRAIN, id="stale data: drain still allowed"
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=OURS),
            None,
            knode(unschedulable=True),
            True,
            None,
            id="drained: converged",
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=ADMIN),
            None,
            knode(unschedulable=True),
            True,
            None,
            id="admin drain with a cause: left alone",
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=ADMIN),
            None,
            knode(),
            True,
            None,
            id="admin drain without cause: kept",
        ),
        pytest.param(
            snode("IDLE", "DRAIN"), None, knode(), True, None, id="drain without reason is not ours"
        ),
        pytest.param(
            snode("IDLE"),
            None,
            knode(unschedulable=True),
            True,
            DRAIN,
            id="admin undrained ours: drain again",
        ),
        pytest.param(
            snode("IDLE", "CLOUD", "NOT_RESPONDING", "POWERED_DOWN", reason=OURS),
            None,
            knode(unschedulable=True),
            True,
            DRAIN,
            id="undrained, our reason kept (24.11 does): ours still, drained again",
        ),
        pytest.param(
            snode("DOWN", reason=ADMIN),
            None,
            knode(unschedulable=True),
            True,
            None,
            id="admin DOWN reason is never overwritten",
        ),
        pytest.param(
            snode("DOWN", "NOT_RESPONDING"),
            None,
            knode(unschedulable=True),
            True,
            DRAIN,
            id="DOWN without reason",
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason="k8s: old cause"),
            None,
            knode(unschedulable=True),
            True,
            SlurmAction("drain", OURS, redrain=True),
            id="our drain with a changed cause: new reason",
        ),
        pytest.param(
            snode("IDLE"),
            kpod(annotations={Keys.DRAIN_REQUEST: "bad IB cable"}),
            knode(),
            True,
            SlurmAction("drain", "k8s: bad IB cable"),
            id="drain annotation on the pod",
        ),
        pytest.param(
            snode("IDLE"),
            None,
            knode(annotations={Keys.DRAIN_REQUEST: ""}),
            True,
            SlurmAction("drain", "k8s: drain requested via annotation"),
            id="drain annotation on the Node",
        ),
        pytest.param(
            snode("IDLE"),
            None,
            knode(conditions=(not_ready(NOW - 30),)),
            True,
            None,
            id="NotReady within grace",
        ),
        pytest.param(
            snode("IDLE"),
            None,
            knode(conditions=(not_ready(NOW - 90),)),
            True,
            SlurmAction("drain", "k8s: (Ready: KubeletNotReady: PLEG is not healthy)"),
            id="NotReady after grace",
        ),
        pytest.param(
            snode("IDLE"),
            None,
            knode(conditions=(READY, GPU_BAD)),
            True,
            SlurmAction("drain", "k8s: (GpuUnhealthy: XidError: Xid 79)"),
            id="configured NPD condition",
        ),
        pytest.param(
            snode("ALLOCATED"),
            kpod(deletion_timestamp=NOW),
            knode(),
            True,
            SlurmAction("drain", "k8s: pod hpc/slurmd-0 terminating"),
            id="terminating pod",
        ),
        pytest.param(
            snode("IDLE"),
            None,
            knode(unschedulable=True, annotations={Keys.CORDONED_BY: "slurm"}),
            True,
            None,
            id="our own cordon is no cause",
        ),
        pytest.param(None, kpod(), knode(unschedulable=True), True, None, id="no Slurm node"),
        pytest.param(snode("IDLE", "DRAIN", reason=OURS), None, None, True, None, id="unbound: left alone"),
    ],
)
def test_kubernetes_to_slurm(
    slurm: SlurmNode | None,
    pod: KubePod | None,
    node: KubeNode | None,
    fresh: bool,
    expected: SlurmAction | None,
) -> None:
    assert run(slurm, pod, node, fresh=fresh).slurm_action == expected


def test_scale_in_reason_matches_the_contract() -> None:
    action = run(snode("IDLE"), kpod(), knode(), scale_in_of="gpu-a").slurm_action
    assert action == SlurmAction("drain", "k8s: scale-in of NodeSet gpu-a")


def test_a_scheduler_hold_drains_and_keeps_its_drain_until_released() -> None:
    held = "scheduler hold: pod a/b still runs: Slurm job 7 was cancelled in Slurm"
    assert run(snode("IDLE"), kpod(), knode(), held=held).slurm_action == SlurmAction("drain", f"k8s: {held}")
    drained = snode("IDLE", "DRAIN", reason=f"k8s: {held}")
    assert run(drained, kpod(), knode(), held=held).slurm_action is None
    assert run(drained, kpod(), knode()).slurm_action == SlurmAction("undrain", f"k8s: {held}")


def test_a_held_node_has_no_drift_while_held() -> None:
    held = "scheduler hold: pod a/b still runs: Slurm job 7 was cancelled in Slurm"
    drained = snode("IDLE", "DRAIN", reason=f"k8s: {held}")
    first = run(drained, kpod(), knode(), held=held)  # Kubernetes shown the drain: then only the hold differs
    annotations = {k: v for k, v in first.annotations.items() if v is not None}
    pod = msgspec.structs.replace(kpod(annotations=annotations), conditions=first.pod_conditions)
    node = msgspec.structs.replace(knode(), conditions=(*knode().conditions, *first.node_conditions))
    assert not drift(drained, pod, node, OPTS, NOW, held=held)
    assert drift(drained, pod, node, OPTS, NOW)


def test_several_causes_join_in_one_reason() -> None:
    pod = kpod(annotations={Keys.DRAIN_REQUEST: "IB"}, deletion_timestamp=NOW)
    action = run(snode("IDLE"), pod, knode(unschedulable=True))
    assert action.slurm_action == SlurmAction("drain", "k8s: Node cordoned; IB; pod hpc/slurmd-0 terminating")
    assert [c.kind for c in action.causes] == ["cordon", "drain-annotation", "terminating"]


def test_ready_grace_gives_recheck_time_then_drains() -> None:
    node = knode(conditions=(not_ready(NOW - 30),))
    early = run(snode("IDLE"), None, node)
    assert early.slurm_action is None
    assert early.recheck_at == NOW + 30
    assert run(snode("IDLE"), None, node, now=NOW + 30).slurm_action == SlurmAction(
        "drain", "k8s: (Ready: KubeletNotReady: PLEG is not healthy)"
    )


def test_custom_owner_prefix() -> None:
    opts = SyncOptions(owner_prefix="kube> ")
    assert run(snode("IDLE"), None, knode(unschedulable=True), opts=opts).slurm_action == SlurmAction(
        "drain", "kube> Node cordoned"
    )
    # With another prefix, a "k8s: " reason belongs to someone else.
    assert run(snode("IDLE", "DRAIN", reason=OURS), None, knode(), opts=opts).slurm_action is None


def test_admin_takes_over_our_drain_then_we_never_undrain() -> None:
    node = knode(unschedulable=True)
    assert run(snode("IDLE"), None, node).slurm_action == DRAIN
    taken = snode("IDLE", "DRAIN", reason=ADMIN)  # admin re-drains with their reason
    assert run(taken, None, node).slurm_action is None
    assert run(taken, None, knode()).slurm_action is None  # cordon lifted: still the admin's


def test_hostile_texts_end_in_a_clean_capped_reason() -> None:
    hostile = "\x00evil\n\r\t\x1b[31m" + "🚀" * 300_000 + "\ud800"
    pod = kpod(annotations={Keys.DRAIN_REQUEST: hostile})
    node = knode(unschedulable=True, annotations={Keys.CORDON_REASON: hostile})
    action = run(snode("IDLE"), pod, node).slurm_action
    assert action is not None
    assert action.reason.startswith("k8s: evil [31m🚀")
    assert len(action.reason.encode("utf-8")) <= 256
    assert not UNSAFE_CHARS.search(action.reason)


# --- Slurm -> Kubernetes -----------------------------------------------------------------------------------


def test_annotations_go_on_the_pod_when_pod_bound() -> None:
    slurm = snode("IDLE", "DRAIN", reason=ADMIN, by="root", at=1_714_564_800)
    decision = run(slurm, kpod(), knode())
    assert decision.annotations_on == "pod"
    assert decision.annotations == {
        Keys.STATE: "IDLE+DRAIN",
        Keys.REASON: ADMIN,
        Keys.REASON_BY: "root",
        Keys.REASON_AT: "2024-05-01T12:00:00Z",
    }


def test_annotations_go_on_the_node_when_node_bound() -> None:
    decision = run(snode("ALLOCATED"), None, knode())
    assert decision.annotations_on == "node"
    assert decision.annotations == {Keys.STATE: "ALLOCATED"}


def test_only_changed_annotations_and_none_deletes() -> None:
    current = {
        Keys.STATE: "IDLE+DRAIN",
        Keys.REASON: ADMIN,
        Keys.REASON_BY: "root",
        Keys.REASON_AT: "2024-05-01T12:00:00Z",
        "other": "kept",
    }
    decision = run(snode("IDLE"), kpod(annotations=current), knode())
    assert decision.annotations == {
        Keys.STATE: "IDLE",
        Keys.REASON: None,
        Keys.REASON_BY: None,
        Keys.REASON_AT: None,
    }
    same = run(
        snode("IDLE", "DRAIN", reason=ADMIN, by="root", at=1_714_564_800), kpod(annotations=current), knode()
    )
    assert same.annotations == {}


def test_reason_without_time_or_author_leaves_those_out() -> None:
    decision = run(snode("DOWN", reason="Not responding"), None, knode())
    assert decision.annotations == {Keys.STATE: "DOWN", Keys.REASON: "Not responding"}


@pytest.mark.parametrize(
    ("slurm", "drained", "healthy"),
    [
        (snode("IDLE"), ("False", "NotDrained", ""), ("True", "Healthy", "")),
        (snode("IDLE", "DRAIN", reason=ADMIN), ("True", "Drained", ADMIN), ("True", "Healthy", "")),
        (snode("MIXED", "DRAIN", reason=OURS), ("True", "Draining", OURS), ("True", "Healthy", "")),
        (
            snode("IDLE", "DRAIN", "COMPLETING", reason=OURS),
            ("True", "Draining", OURS),
            ("True", "Healthy", ""),
        ),
        (
            snode("DOWN", reason="Not responding"),
            ("False", "NotDrained", ""),
            ("False", "SlurmNodeDown", "Not responding"),
        ),
        (
            snode("IDLE", "NOT_RESPONDING"),
            ("False", "NotDrained", ""),
            ("False", "SlurmNodeNotResponding", "Slurm reports NOT_RESPONDING"),
        ),
        (
            snode("IDLE", "FAIL", "DRAIN", reason="failing"),
            ("True", "Drained", "failing"),
            ("False", "SlurmNodeFailed", "failing"),
        ),
    ],
)
def test_conditions_on_pod_and_node(
    slurm: SlurmNode, drained: tuple[str, str, str], healthy: tuple[str, str, str]
) -> None:
    decision = run(slurm, kpod(), knode())
    for conditions in (decision.pod_conditions, decision.node_conditions):
        got = {c.type: (c.status, c.reason, c.message) for c in conditions}
        assert got == {"SlurmNodeDrained": drained, "SlurmNodeHealthy": healthy}
        assert all(c.last_transition_time == NOW for c in conditions)


def test_conditions_only_when_changed_and_transition_time_kept_while_status_holds() -> None:
    old = NOW - 500
    current = (
        Condition(
            type="SlurmNodeDrained", status="True", reason="Draining", message=OURS, last_transition_time=old
        ),
        Condition(type="SlurmNodeHealthy", status="True", reason="Healthy", last_transition_time=old),
    )
    decision = run(snode("IDLE", "DRAIN", reason=OURS), None, knode(conditions=(READY, *current)))
    assert decision.node_conditions == (
        Condition(
            type="SlurmNodeDrained", status="True", reason="Drained", message=OURS, last_transition_time=old
        ),
    )
    flipped = run(snode("DOWN", reason="x"), None, knode(conditions=(READY, *current)))
    assert {c.type: c.last_transition_time for c in flipped.node_conditions} == {
        "SlurmNodeDrained": NOW,
        "SlurmNodeHealthy": NOW,
    }


@pytest.mark.parametrize("slurm", [None, snode("IDLE", "DRAIN", reason=ADMIN)])
def test_stale_or_missing_slurm_writes_nothing_to_kubernetes(slurm: SlurmNode | None) -> None:
    decision = run(slurm, kpod(), knode(), fresh=False, opts=CORDON_OPTS)
    assert decision == Decision(annotations_on="pod")
    assert not decision.acts


# --- events ---------------------------------------------------------------------------------------------


def events_of(decision: Decision) -> list[tuple[str, str, str]]:
    return [(e.reason, e.type, e.on) for e in decision.events]


@pytest.mark.parametrize(
    ("before", "slurm", "expected"),
    [
        (None, snode("IDLE", "DRAIN", reason=ADMIN), []),  # first sight: recorded, no event
        ("IDLE", snode("IDLE"), []),
        ("IDLE", snode("IDLE", "DRAIN", reason=ADMIN), [("SlurmNodeDrained", "Warning", "pod")]),
        ("MIXED+DRAIN", snode("MIXED"), [("SlurmNodeUndrained", "Normal", "pod")]),
        (
            "IDLE",
            snode("DOWN", "NOT_RESPONDING", reason="Not responding"),
            [("SlurmNodeUnhealthy", "Warning", "pod")],
        ),
        ("DOWN+NOT_RESPONDING", snode("IDLE"), [("SlurmNodeRecovered", "Normal", "pod")]),
        (
            "IDLE",
            snode("DOWN", "DRAIN", reason=ADMIN),
            [("SlurmNodeDrained", "Warning", "pod"), ("SlurmNodeUnhealthy", "Warning", "pod")],
        ),
        ("IDLE", snode("ALLOCATED"), [("SlurmStateChanged", "Normal", "pod")]),
    ],
)
def test_observed_transition_events(
    before: str | None, slurm: SlurmNode, expected: list[tuple[str, str, str]]
) -> None:
    annotations = {} if before is None else {Keys.STATE: before}
    assert events_of(run(slurm, kpod(annotations=annotations), knode())) == expected


def test_admin_replacing_a_drain_reason_is_an_event() -> None:
    pod = kpod(annotations={Keys.STATE: "IDLE+DRAIN", Keys.REASON: OURS})
    decision = run(snode("IDLE", "DRAIN", reason=ADMIN), pod, knode(unschedulable=True))
    assert events_of(decision) == [("SlurmDrainReasonChanged", "Normal", "pod")]
    assert ADMIN in decision.events[0].message


def test_action_events() -> None:
    drained = run(snode("IDLE"), None, knode(unschedulable=True, annotations={Keys.STATE: "IDLE"}))
    assert drained.events == (
        EventSpec("DrainingSlurmNode", f"draining Slurm node n1: {OURS}", "Normal", "node"),
    )
    undrained = run(
        snode("IDLE", "DRAIN", reason=OURS), kpod(annotations={Keys.STATE: "IDLE+DRAIN"}), knode()
    )
    assert events_of(undrained) == [("UndrainingSlurmNode", "Normal", "pod")]
    renewed = run(snode("IDLE", "DRAIN", reason="k8s: old"), None, knode(unschedulable=True))
    assert events_of(renewed) == [("UpdatingSlurmDrainReason", "Normal", "node")]


def test_event_messages_are_clean_and_bounded() -> None:
    slurm = snode("IDLE", "DRAIN", reason="x\n" * 100_000)
    for event in run(slurm, kpod(annotations={Keys.STATE: "IDLE"}), knode()).events:
        assert not UNSAFE_CHARS.search(event.message)
        assert len(event.message.encode()) <= 1024


# --- cordon on Slurm drain --------------------------------------------------------------------------------


def apply_cordon(node: KubeNode, action: str | None) -> KubeNode:
    annotations = dict(node.annotations)
    if action == "cordon":
        annotations[Keys.CORDONED_BY] = "slurm"
        return msgspec.structs.replace(node, unschedulable=True, annotations=annotations)
    if action == "uncordon":
        annotations.pop(Keys.CORDONED_BY, None)
        return msgspec.structs.replace(node, unschedulable=False, annotations=annotations)
    return node


def test_cordon_on_slurm_drain_round_trip_without_echo() -> None:
    node = knode()
    admin_drain = snode("IDLE", "DRAIN", reason=ADMIN)
    first = run(admin_drain, None, node, opts=CORDON_OPTS)
    assert first.cordon == "cordon"
    assert ("CordoningForSlurmDrain", "Normal", "node") in events_of(first)
    node = apply_cordon(node, first.cordon)
    second = run(admin_drain, None, node, opts=CORDON_OPTS)
    assert second.cordon is None
    assert second.causes == ()  # our cordon is not fed back as a drain cause
    assert second.slurm_action is None
    lifted = run(snode("IDLE"), None, node, opts=CORDON_OPTS)  # admin undrains in Slurm
    assert lifted.cordon == "uncordon"
    assert lifted.slurm_action is None
    node = apply_cordon(node, lifted.cordon)
    assert run(snode("IDLE"), None, node, opts=CORDON_OPTS).cordon is None


@pytest.mark.parametrize(
    ("slurm", "node", "opts", "fresh", "expected"),
    [
        pytest.param(
            snode("IDLE", "DRAIN", reason=ADMIN), knode(), OPTS, True, None, id="option off: no cordon"
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=ADMIN), knode(), CORDON_OPTS, False, None, id="stale: no cordon"
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=OURS), knode(), CORDON_OPTS, True, None, id="our drain: no cordon"
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=ADMIN),
            knode(unschedulable=True),
            CORDON_OPTS,
            True,
            None,
            id="already cordoned by someone: nothing",
        ),
        pytest.param(
            snode("IDLE"),
            knode(unschedulable=True),
            CORDON_OPTS,
            True,
            None,
            id="never lift a foreign cordon",
        ),
        pytest.param(
            snode("IDLE"),
            knode(unschedulable=True, annotations={Keys.CORDONED_BY: "slurm"}),
            CORDON_OPTS,
            False,
            None,
            id="stale: never uncordon",
        ),
        pytest.param(
            snode("IDLE"),
            knode(unschedulable=True, annotations={Keys.CORDONED_BY: "slurm"}),
            OPTS,
            True,
            "uncordon",
            id="our cordon is lifted even with the option off",
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=ADMIN),
            knode(annotations={Keys.CORDONED_BY: "slurm"}),
            CORDON_OPTS,
            True,
            "cordon",
            id="uncordoned by hand while Slurm still drains: cordon again",
        ),
        pytest.param(
            snode("IDLE", "DRAIN", reason=ADMIN),
            knode(unschedulable=True, annotations={Keys.CORDONED_BY: "slurm"}),
            OPTS,
            True,
            None,
            id="option off keeps our cordon while the Slurm drain holds",
        ),
    ],
)
def test_cordon_rules(
    slurm: SlurmNode, node: KubeNode, opts: SyncOptions, fresh: bool, expected: str | None
) -> None:
    assert run(slurm, None, node, opts=opts, fresh=fresh).cordon == expected


def test_drift() -> None:
    assert drift(snode("IDLE"), None, knode(unschedulable=True), OPTS, NOW)
    settled = knode(annotations={Keys.STATE: "IDLE"})
    assert run(snode("IDLE"), None, settled).node_conditions  # conditions not written yet
    conditions = (READY, *run(snode("IDLE"), None, settled).node_conditions)
    assert not drift(
        snode("IDLE"), None, knode(annotations={Keys.STATE: "IDLE"}, conditions=conditions), OPTS, NOW
    )
    assert not drift(snode("IDLE", "DRAIN", reason=OURS), None, knode(), OPTS, NOW, slurm_fresh=False)


# --- properties -------------------------------------------------------------------------------------------

TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=40)
FLAGS = st.frozensets(
    st.sampled_from(
        ["DRAIN", "DRAINED", "DRAINING", "COMPLETING", "NOT_RESPONDING", "FAIL", "CLOUD", "REBOOT_REQUESTED"]
    ),
    max_size=4,
)
BASES = st.sampled_from(["IDLE", "ALLOCATED", "MIXED", "DOWN", "FUTURE", "UNKNOWN"])
REASONS = st.one_of(
    st.just(""),
    st.just(OURS),
    st.builds(lambda t: "k8s: " + t, TEXT),
    st.just(ADMIN),
    TEXT,
)
STATE_TEXTS = st.sampled_from(["IDLE", "IDLE+DRAIN", "DOWN+NOT_RESPONDING", "ALLOCATED", "MIXED+DRAIN"])


@st.composite
def slurm_nodes(draw: st.DrawFn) -> SlurmNode:
    return SlurmNode(
        name="n1",
        state=draw(FLAGS) | {draw(BASES)},
        reason=draw(REASONS),
        reason_set_by=draw(st.sampled_from(["", "root", "slurm"])),
        reason_changed_at=draw(st.integers(min_value=-(2**40), max_value=2**62)),
    )


def maybe(key: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.one_of(st.just({}), values.map(lambda v: {key: v}))


@st.composite
def annotation_sets(draw: st.DrawFn, node: bool) -> dict[str, str]:
    found: dict[str, str] = {}
    found |= draw(maybe(Keys.DRAIN_REQUEST, TEXT))
    found |= draw(maybe(Keys.STATE, STATE_TEXTS))
    found |= draw(maybe(Keys.REASON, REASONS))
    if node:
        found |= draw(maybe(Keys.CORDON_REASON, TEXT))
        found |= draw(maybe(Keys.CORDONED_BY, st.sampled_from(["slurm", "someone"])))
    return found


CONDITIONS = st.lists(
    st.builds(
        Condition,
        type=st.sampled_from(["Ready", "GpuUnhealthy", "SlurmNodeDrained", "SlurmNodeHealthy"]),
        status=st.sampled_from(["True", "False", "Unknown"]),
        reason=st.sampled_from(["", "KubeletNotReady", "Drained", "Healthy"]),
        message=TEXT,
        last_transition_time=st.floats(allow_nan=True, allow_infinity=True),
    ),
    max_size=4,
    unique_by=lambda c: c.type,
).map(tuple)
PODS = st.one_of(
    st.none(),
    st.builds(
        KubePod,
        namespace=st.just("hpc"),
        name=st.just("slurmd-0"),
        annotations=annotation_sets(node=False),
        deletion_timestamp=st.one_of(st.none(), st.just(NOW)),
        conditions=CONDITIONS,
    ),
)
NODES = st.one_of(
    st.none(),
    st.builds(
        KubeNode,
        name=st.just("k1"),
        unschedulable=st.booleans(),
        annotations=annotation_sets(node=True),
        conditions=CONDITIONS,
    ),
)
OPTIONS = st.builds(
    SyncOptions,
    cordon_on_slurm_drain=st.booleans(),
    drain_on_conditions=st.just((("GpuUnhealthy", "True"),)),
    max_reason_bytes=st.sampled_from([16, 64, 256]),
)
SCALE_IN = st.one_of(st.none(), st.just("gpu-a"))


def apply_slurm(slurm: SlurmNode, action: SlurmAction | None) -> SlurmNode:
    if action is None:
        return slurm
    if action.kind == "drain":
        return msgspec.structs.replace(slurm, state=slurm.state | {"DRAIN"}, reason=action.reason)
    return msgspec.structs.replace(slurm, state=slurm.state - DRAIN_FLAGS, reason="")


T = TypeVar("T", KubePod, KubeNode)


def apply_kube(obj: T, annotations: dict[str, str | None], conditions: tuple[Condition, ...]) -> T:
    merged = dict(obj.annotations)
    for key, value in annotations.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    changed = {c.type for c in conditions}
    kept = tuple(c for c in obj.conditions if c.type not in changed)
    return msgspec.structs.replace(obj, annotations=merged, conditions=kept + conditions)


@settings(max_examples=400)
@given(slurm_nodes(), PODS, NODES, OPTIONS, st.booleans(), SCALE_IN)
def test_decide_respects_ownership_and_freshness(
    slurm: SlurmNode,
    pod: KubePod | None,
    node: KubeNode | None,
    opts: SyncOptions,
    fresh: bool,
    scale_in: str | None,
) -> None:
    decision = run(slurm, pod, node, fresh=fresh, opts=opts, scale_in_of=scale_in)
    action = decision.slurm_action
    if slurm.reason and not is_ours(slurm.reason, opts):
        assert action is None  # someone else's reason is never changed or cleared
    if not fresh:
        assert action is None or action.kind == "drain"
        assert decision.cordon is None
        assert not decision.annotations and not decision.pod_conditions and not decision.node_conditions
    if action is not None and action.kind == "drain":
        assert is_ours(action.reason, opts)
        assert len(action.reason.encode("utf-8")) <= opts.max_reason_bytes
        assert not UNSAFE_CHARS.search(action.reason)
    if decision.cordon == "uncordon":
        assert node is not None and node.annotations.get(Keys.CORDONED_BY) == "slurm"


@settings(max_examples=400)
@given(slurm_nodes(), PODS, NODES, OPTIONS, st.booleans(), SCALE_IN)
def test_applying_a_decision_converges(
    slurm: SlurmNode,
    pod: KubePod | None,
    node: KubeNode | None,
    opts: SyncOptions,
    fresh: bool,
    scale_in: str | None,
) -> None:
    first = run(slurm, pod, node, fresh=fresh, opts=opts, scale_in_of=scale_in)
    slurm = apply_slurm(slurm, first.slurm_action)
    assert run(slurm, pod, node, fresh=fresh, opts=opts, scale_in_of=scale_in).slurm_action is None
    # Applying every write, a few rounds at most reach a state where nothing is left to write.
    for _ in range(4):
        decision = run(slurm, pod, node, fresh=True, opts=opts, scale_in_of=scale_in)
        if not decision.acts:
            break
        slurm = apply_slurm(slurm, decision.slurm_action)
        if pod is not None:
            pod = apply_kube(
                pod, decision.annotations if decision.annotations_on == "pod" else {}, decision.pod_conditions
            )
        if node is not None:
            node_annotations = decision.annotations if decision.annotations_on == "node" else {}
            node = apply_cordon(apply_kube(node, node_annotations, decision.node_conditions), decision.cordon)
    else:
        pytest.fail(f"no fixpoint: last decision {decision}")


UNKNOWN_FLAGS = st.frozensets(
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=3, max_size=20).filter(
        lambda f: f not in DRAIN_FLAGS | UNHEALTHY_FLAGS | BASE_STATES | {"COMPLETING"}
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=300)
@given(slurm_nodes(), UNKNOWN_FLAGS, PODS, NODES, OPTIONS, st.booleans())
def test_unknown_slurm_state_flags_change_no_slurm_action(
    slurm: SlurmNode,
    unknown: frozenset[str],
    pod: KubePod | None,
    node: KubeNode | None,
    opts: SyncOptions,
    fresh: bool,
) -> None:
    """A flag a newer Slurm adds (not one the syncer knows) never causes nor prevents a drain or undrain;
    it is shown in the state annotation as it came."""
    known = run(slurm, pod, node, fresh=fresh, opts=opts)
    with_unknown = replace_state(slurm, slurm.state | unknown)
    decision = run(with_unknown, pod, node, fresh=fresh, opts=opts)
    assert decision.slurm_action == known.slurm_action
    state = decision.annotations.get(Keys.STATE)
    if state:
        assert unknown <= set(state.split("+"))


def replace_state(slurm: SlurmNode, state: frozenset[str]) -> SlurmNode:
    return msgspec.structs.replace(slurm, state=state)


@pytest.mark.parametrize(
    ("pod", "node", "scale_in_of", "automatic"),
    [
        (kpod(), knode(conditions=(not_ready(NOW - 3600),)), None, True),  # NotReady past the grace
        (kpod(), knode(conditions=(READY, GPU_BAD)), None, True),  # a listed problem condition
        (kpod(), knode(conditions=(not_ready(NOW - 3600), GPU_BAD)), None, True),  # both: still a storm
        (kpod(), knode(unschedulable=True), None, False),  # an admin's cordon
        (kpod(annotations={Keys.DRAIN_REQUEST: "fans"}), knode(), None, False),
        (kpod(), knode(annotations={Keys.DRAIN_REQUEST: "fans"}), None, False),
        (kpod(deletion_timestamp=NOW), knode(), None, False),  # terminating pod
        (kpod(), knode(), "hpc/gpu", False),  # NodeSet scale-in
        (kpod(), knode(unschedulable=True, conditions=(not_ready(NOW - 3600),)), None, False),  # mixed
    ],
)
def test_a_new_drain_is_automatic_only_when_every_cause_is(
    pod: KubePod, node: KubeNode, scale_in_of: str | None, automatic: bool
) -> None:
    """What the safety valve may hold back is read from the Decision's causes."""
    decision = run(snode(), pod, node, scale_in_of=scale_in_of)
    assert decision.slurm_action is not None and decision.slurm_action.kind == "drain"
    assert is_automatic(decision.causes) is automatic
    assert decision.automatic is automatic  # what the admission (admit.py) asks


def test_no_causes_is_not_an_automatic_drain() -> None:
    assert not is_automatic(())
