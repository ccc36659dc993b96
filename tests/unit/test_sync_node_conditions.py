"""A Kubernetes Node hosting several slurmd pods: its conditions come from all their Slurm nodes together."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.plan import decide, desired_conditions, shared_node_conditions
from syncer.controllers.sync.shown import shown, shown_of
from syncer.model import Condition, KubeNode, KubePod, SlurmNode
from syncer.model.keys import Keys

NOW = 1_700_000_000.0
OPTS = SyncOptions()
READY = Condition(type="Ready", status="True", reason="KubeletReady", last_transition_time=NOW - 3600)
OURS = "k8s: Node cordoned"
ADMIN = "bad DIMM, ticket 4711"


def snode(name: str, *flags: str, reason: str = "") -> SlurmNode:
    return SlurmNode(name=name, state=frozenset(flags or ("IDLE",)), reason=reason)


def kpod(slurm_name: str) -> KubePod:
    return KubePod(namespace="hpc", name=f"slurmd-{slurm_name}", node_name="k1")


def knode(conditions: tuple[Condition, ...] = (READY,)) -> KubeNode:
    return KubeNode(name="k1", conditions=conditions)


def summary(conditions: tuple[Condition, ...] | None) -> dict[str, tuple[str, str, str]] | None:
    if conditions is None:
        return None
    return {c.type: (c.status, c.reason, c.message) for c in conditions}


def shared(*nodes: SlurmNode | None, names: tuple[str, ...] = ()) -> dict[str, tuple[str, str, str]] | None:
    members = [(node.name if node else names[i], node) for i, node in enumerate(nodes)]
    return summary(shared_node_conditions(members, shown(None, members), slurm_fresh=True))


SINGLES = [
    snode("a"),
    snode("a", "IDLE", "DRAIN", reason=ADMIN),
    snode("a", "MIXED", "DRAIN", reason=OURS),
    snode("a", "IDLE", "DRAIN", "COMPLETING", reason=OURS),
    snode("a", "IDLE", "DRAIN"),
    snode("a", "DOWN", reason="Not responding"),
    snode("a", "IDLE", "NOT_RESPONDING"),
    snode("a", "IDLE", "FAIL", "DRAIN", reason="failing"),
]


@pytest.mark.parametrize("slurm", SINGLES, ids=lambda s: s.state_text)
def test_one_pod_gives_todays_conditions(slurm: SlurmNode) -> None:
    assert shared_node_conditions([("a", slurm)], shown(slurm), slurm_fresh=True) == desired_conditions(
        slurm, shown_of(slurm)
    )
    pod = kpod("a")
    alone = decide(slurm, pod, knode(), now=NOW, opts=OPTS, slurm_fresh=True)
    listed = decide(slurm, pod, knode(), now=NOW, opts=OPTS, slurm_fresh=True, node_slurm=[("a", slurm)])
    assert listed == alone


def test_two_pods_one_drained() -> None:
    got = shared(snode("node-b"), snode("node-a", "IDLE", "DRAIN", reason=OURS))
    assert got == {
        "SlurmNodeDrained": ("True", "Drained", f"node-a: {OURS}"),
        "SlurmNodeHealthy": ("True", "Healthy", ""),
    }


def test_both_drained_without_jobs() -> None:
    got = shared(
        snode("node-a", "IDLE", "DRAIN", reason=OURS), snode("node-b", "IDLE", "DRAIN", reason=ADMIN)
    )
    assert got is not None
    assert got["SlurmNodeDrained"] == ("True", "Drained", f"node-a: {OURS}; node-b: {ADMIN}")


@pytest.mark.parametrize(
    "busy", [("MIXED", "DRAIN"), ("ALLOCATED", "DRAIN"), ("IDLE", "DRAIN", "COMPLETING")]
)
def test_both_drained_one_still_running_jobs_is_draining(busy: tuple[str, ...]) -> None:
    got = shared(snode("node-a", "IDLE", "DRAIN", reason=OURS), snode("node-b", *busy, reason=ADMIN))
    assert got is not None
    assert got["SlurmNodeDrained"] == ("True", "Draining", f"node-a: {OURS}; node-b: {ADMIN}")


def test_a_busy_node_that_is_not_drained_does_not_make_it_draining() -> None:
    got = shared(snode("node-a", "IDLE", "DRAIN", reason=OURS), snode("node-b", "ALLOCATED"))
    assert got is not None
    assert got["SlurmNodeDrained"] == ("True", "Drained", f"node-a: {OURS}")


def test_drained_without_reason_is_named_alone() -> None:
    got = shared(snode("node-a", "IDLE", "DRAIN"), snode("node-b", "IDLE", "DRAIN", reason=ADMIN))
    assert got is not None
    assert got["SlurmNodeDrained"] == ("True", "Drained", f"node-a; node-b: {ADMIN}")


def test_none_drained_none_down() -> None:
    assert shared(snode("node-a", "ALLOCATED"), snode("node-b")) == {
        "SlurmNodeDrained": ("False", "NotDrained", ""),
        "SlurmNodeHealthy": ("True", "Healthy", ""),
    }


def test_one_down() -> None:
    got = shared(snode("node-a"), snode("node-b", "DOWN", reason="Not responding"))
    assert got == {
        "SlurmNodeDrained": ("False", "NotDrained", ""),
        "SlurmNodeHealthy": ("False", "SlurmNodeDown", "node-b: Not responding"),
    }


def test_unhealthy_reason_by_precedence_over_all_and_each_named() -> None:
    got = shared(
        snode("node-a", "IDLE", "NOT_RESPONDING"),
        snode("node-b", "IDLE", "FAIL", "DRAIN", reason="failing"),
        snode("node-c"),
    )
    assert got is not None
    assert got["SlurmNodeHealthy"] == (
        "False",
        "SlurmNodeFailed",
        "node-a: Slurm reports NOT_RESPONDING; node-b: failing",
    )
    assert got["SlurmNodeDrained"] == ("True", "Drained", "node-b: failing")
    down = shared(snode("node-a", "IDLE", "FAIL"), snode("node-b", "DOWN", "NOT_RESPONDING"))
    assert down is not None
    assert down["SlurmNodeHealthy"] == (
        "False",
        "SlurmNodeDown",
        "node-a: Slurm reports FAIL; node-b: Slurm reports DOWN+NOT_RESPONDING",
    )


def test_missing_or_stale_data_for_any_writes_nothing() -> None:
    drained = snode("node-a", "IDLE", "DRAIN", reason=OURS)
    assert shared(drained, None, names=("", "node-b")) is None
    assert (
        shared_node_conditions([("node-a", drained), ("node-b", snode("node-b"))], {}, slurm_fresh=False)
        is None
    )
    assert shared_node_conditions([], {}, slurm_fresh=True) is None
    # in decide(): the pod's own conditions and annotations are still written, the Node's are not
    decision = decide(
        drained, kpod("node-a"), knode(), now=NOW, opts=OPTS, slurm_fresh=True,
        node_slurm=[("node-a", drained), ("node-b", None)],
    )  # fmt: skip
    assert decision.node_conditions == ()
    assert summary(decision.pod_conditions) == summary(desired_conditions(drained, shown_of(drained)))
    assert decision.annotations


def test_messages_are_clean_and_capped() -> None:
    hostile = "line one\nline\ttwo\u202e" + "x" * 2000
    members = [(n, snode(n, "DOWN", "DRAIN", reason=hostile)) for n in ("node-a", "node-b")]
    got = shared_node_conditions(members, shown(None, members), slurm_fresh=True)
    assert got is not None
    for cond in got:
        assert len(cond.message.encode()) <= 1024
        assert cond.message.startswith("node-a: line one line two ")
        assert not any(ch in cond.message for ch in "\n\t\u202e")


def test_every_sibling_decides_the_same_node_conditions_and_they_settle() -> None:
    """The flapping this fixes: two reconciles, one per Slurm node, writing different Node conditions."""
    a = snode("node-a", "IDLE", "DRAIN", reason=OURS)
    b = snode("node-b", "ALLOCATED")
    members = [("node-a", a), ("node-b", b)]
    node = knode()
    first = decide(a, kpod("node-a"), node, now=NOW, opts=OPTS, slurm_fresh=True, node_slurm=members)
    second = decide(
        b, kpod("node-b"), node, now=NOW, opts=OPTS, slurm_fresh=True, node_slurm=list(reversed(members))
    )
    assert first.node_conditions == second.node_conditions
    assert summary(first.node_conditions) == {
        "SlurmNodeDrained": ("True", "Drained", f"node-a: {OURS}"),
        "SlurmNodeHealthy": ("True", "Healthy", ""),
    }
    # the pods keep their own Slurm node's conditions
    assert summary(second.pod_conditions) == summary(desired_conditions(b, shown_of(b)))
    written = knode((READY, *first.node_conditions))
    for slurm in (a, b):
        again = decide(
            slurm, kpod(slurm.name), written, now=NOW + 5, opts=OPTS, slurm_fresh=True, node_slurm=members
        )
        assert again.node_conditions == ()
    # without the siblings (as before), node-b's reconcile would undo node-a's Node condition
    assert decide(b, kpod("node-b"), written, now=NOW, opts=OPTS, slurm_fresh=True).node_conditions


NAMES = ("node-a", "node-b", "node-c")
STATES = st.sampled_from(
    [
        ("IDLE",),
        ("ALLOCATED",),
        ("IDLE", "DRAIN"),
        ("MIXED", "DRAIN"),
        ("DOWN",),
        ("IDLE", "FAIL"),
        ("IDLE", "NOT_RESPONDING", "DRAIN"),
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(STATES, st.sampled_from(["", OURS, ADMIN, "x\ny"])), min_size=2, max_size=3).map(
        lambda rows: [snode(NAMES[i], *state, reason=reason) for i, (state, reason) in enumerate(rows)]
    )
)
def test_any_order_same_answer_and_no_drift_once_written(nodes: list[SlurmNode]) -> None:
    members = [(n.name, n) for n in nodes]
    want = shared_node_conditions(members, shown(None, members), slurm_fresh=True)
    assert want is not None
    for order in itertools.permutations(members):
        assert shared_node_conditions(list(order), shown(None, members), slurm_fresh=True) == want
    drained, healthy = want
    assert (drained.status == "True") == any(n.drain_flag for n in nodes)
    assert (healthy.status == "False") == any(n.unhealthy for n in nodes)
    node = knode((READY, *want))
    for n in nodes:
        decision = decide(n, kpod(n.name), node, now=NOW, opts=OPTS, slurm_fresh=True, node_slurm=members)
        assert decision.node_conditions == ()


# --- cordon on Slurm drain with several slurmd pods on one Node ---------------------------------------------

CORDON = SyncOptions(cordon_on_slurm_drain=True)


def cordoned_by_slurm() -> KubeNode:
    return KubeNode(
        name="k1", unschedulable=True, annotations={Keys.CORDONED_BY: "slurm"}, conditions=(READY,)
    )


def test_cordon_holds_while_any_sibling_has_a_foreign_drain() -> None:
    admin_drained, idle = snode("a", "IDLE", "DRAIN", reason=ADMIN), snode("b")
    members = [("a", admin_drained), ("b", idle)]
    # reconciling either Slurm node gives the same answer: cordon an uncordoned Node, keep the cordon
    for slurm in (admin_drained, idle):
        first = decide(
            slurm, kpod(slurm.name), knode(), now=NOW, opts=CORDON, slurm_fresh=True, node_slurm=members
        )
        assert first.cordon == "cordon"
        cordon_events = [e.message for e in first.events if e.reason == "CordoningForSlurmDrain"]
        assert cordon_events == [f"cordoning Node k1: Slurm node a drained: {ADMIN}"]
        kept = decide(
            slurm, kpod(slurm.name), cordoned_by_slurm(), now=NOW, opts=CORDON, slurm_fresh=True,
            node_slurm=members,
        )  # fmt: skip
        assert kept.cordon is None  # the idle sibling does not lift it (that flapped)


def test_cordon_lifted_only_when_no_sibling_is_drained_and_none_is_unknown() -> None:
    members = [("a", snode("a")), ("b", snode("b", "IDLE", "DRAIN", reason=OURS))]  # ours is not foreign
    lifted = decide(
        snode("a"), kpod("a"), cordoned_by_slurm(), now=NOW, opts=CORDON, slurm_fresh=True, node_slurm=members
    )
    assert lifted.cordon == "uncordon"
    unknown = [("a", snode("a")), ("b", None)]
    held = decide(
        snode("a"), kpod("a"), cordoned_by_slurm(), now=NOW, opts=CORDON, slurm_fresh=True, node_slurm=unknown
    )
    assert held.cordon is None  # half the picture: neither cordon nor lift
