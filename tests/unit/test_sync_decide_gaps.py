"""Decision details mutation testing found unchecked: which condition changes are kept, what counts as
acting, and the exact Event names, types and texts (operators filter and alert on them)."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import msgspec

from syncer.controllers.sync.plan import (
    Decision,
    EventSpec,
    SlurmAction,
    condition_changes,
    decide,
    desired_annotations,
    drift,
)
from syncer.controllers.sync.shown import shown_of
from syncer.model import Condition, KubeNode, KubePod, SlurmNode
from syncer.model.keys import Keys
from syncer.model.times import rfc3339
from tests.unit.test_sync_decide import NOW, OPTS, OURS, knode, kpod, snode

DRAINED = Condition(
    type="SlurmNodeDrained", status="False", reason="NotDrained", last_transition_time=NOW - 60
)
HEALTHY = Condition(type="SlurmNodeHealthy", status="True", reason="Healthy", last_transition_time=NOW - 60)


def test_a_changed_condition_is_kept_when_another_is_unchanged() -> None:
    unhealthy = Condition(type="SlurmNodeHealthy", status="False", reason="SlurmNodeDown", message="dead")
    changes = condition_changes([DRAINED, unhealthy], [DRAINED, HEALTHY], NOW)
    assert changes == (
        Condition(
            type="SlurmNodeHealthy",
            status="False",
            reason="SlurmNodeDown",
            message="dead",
            last_transition_time=NOW,
        ),
    )


def test_transition_time_kept_while_the_status_holds() -> None:
    reworded = Condition(type="SlurmNodeHealthy", status="True", reason="Healthy", message="now with words")
    (change,) = condition_changes([reworded], [HEALTHY], NOW)
    assert change.last_transition_time == NOW - 60 and change.message == "now with words"
    never = Condition(type="SlurmNodeHealthy", status="True", reason="Healthy", message="x")
    (fresh,) = condition_changes(
        [never], [Condition(type="SlurmNodeHealthy", status="True", reason="Old")], NOW
    )
    assert fresh.last_transition_time == NOW  # the old one had no time: now
    assert condition_changes([HEALTHY], [HEALTHY], NOW) == ()
    (new,) = condition_changes([HEALTHY], [], NOW)
    assert new.last_transition_time == NOW


def test_every_kind_of_write_counts_as_acting_events_alone_do_not() -> None:
    cond = (Condition(type="SlurmNodeDrained", status="True"),)
    assert Decision(slurm_action=SlurmAction("drain", OURS)).acts
    assert Decision(cordon="cordon").acts
    assert Decision(annotations={Keys.STATE: "IDLE"}).acts
    assert Decision(annotations={Keys.REASON: None}).acts  # a removal is a write too
    assert Decision(pod_conditions=cond).acts
    assert Decision(node_conditions=cond).acts
    assert not Decision(events=(EventSpec("SlurmNodeDrained", "m", "Warning", "pod"),)).acts
    assert not Decision().acts


def test_drain_undrain_and_redrain_events_name_the_action() -> None:
    cordoned = knode(unschedulable=True)
    drain = decide(snode(), kpod(), cordoned, now=NOW, opts=OPTS, slurm_fresh=True)
    assert [e for e in drain.events if e.reason == "DrainingSlurmNode"] == [
        EventSpec("DrainingSlurmNode", "draining Slurm node n1: k8s: Node cordoned", "Normal", "pod")
    ]
    undrain = decide(
        snode("IDLE", "DRAIN", reason=OURS), kpod(), knode(), now=NOW, opts=OPTS, slurm_fresh=True
    )
    assert [e for e in undrain.events if e.reason == "UndrainingSlurmNode"] == [
        EventSpec("UndrainingSlurmNode", "undraining Slurm node n1: no drain cause left", "Normal", "pod")
    ]
    old = snode("IDLE", "DRAIN", reason="k8s: something else")
    redrain = decide(old, kpod(), cordoned, now=NOW, opts=OPTS, slurm_fresh=True)
    assert [e for e in redrain.events if e.reason == "UpdatingSlurmDrainReason"] == [
        EventSpec(
            "UpdatingSlurmDrainReason",
            "updating drain reason of Slurm node n1: k8s: Node cordoned",
            "Normal",
            "pod",
        )
    ]


def test_transition_events_name_what_changed_in_slurm() -> None:
    seen_idle = kpod(annotations={Keys.STATE: "IDLE"})
    drained = decide(
        snode("IDLE", "DRAIN", reason="bad fan"), seen_idle, knode(), now=NOW, opts=OPTS, slurm_fresh=True
    )
    assert [(e.reason, e.type, e.on) for e in drained.events] == [("SlurmNodeDrained", "Warning", "pod")]
    assert "bad fan" in drained.events[0].message and "n1" in drained.events[0].message
    seen_drained = kpod(annotations={Keys.STATE: "IDLE+DRAIN", Keys.REASON: "bad fan"})
    back = decide(snode(), seen_drained, knode(), now=NOW, opts=OPTS, slurm_fresh=True)
    assert [(e.reason, e.type) for e in back.events] == [("SlurmNodeUndrained", "Normal")]
    reworded = decide(
        snode("IDLE", "DRAIN", reason="bad fan, ticket 7"),
        seen_drained,
        knode(),
        now=NOW,
        opts=OPTS,
        slurm_fresh=True,
    )
    assert [e.reason for e in reworded.events] == ["SlurmDrainReasonChanged"]
    assert reworded.events[0].message == "Slurm node n1 drain reason now: bad fan, ticket 7 (was: bad fan)"
    down = decide(snode("DOWN", reason="dead"), seen_idle, knode(), now=NOW, opts=OPTS, slurm_fresh=True)
    assert [(e.reason, e.type) for e in down.events] == [("SlurmNodeUnhealthy", "Warning")]
    first_sight = decide(
        snode("IDLE", "DRAIN", reason="x"), kpod(), knode(), now=NOW, opts=OPTS, slurm_fresh=True
    )
    assert not [e for e in first_sight.events if e.reason.startswith("SlurmNode")]


def settled(
    slurm: SlurmNode, *, node_slurm: list[tuple[str, SlurmNode | None]] | None = None
) -> tuple[KubePod, KubeNode]:
    """A pod and Node that already show everything the decision for `slurm` would write."""
    pod, node = kpod(), knode()
    decision = decide(slurm, pod, node, now=NOW, opts=OPTS, slurm_fresh=True, node_slurm=node_slurm)
    annotations = {k: v for k, v in decision.annotations.items() if v is not None}
    pod = msgspec.structs.replace(pod, annotations=annotations, conditions=decision.pod_conditions)
    node = msgspec.structs.replace(node, conditions=(*node.conditions, *decision.node_conditions))
    return pod, node


def test_drift_passes_every_input_to_the_decision() -> None:
    idle = snode()
    pod, node = settled(idle)
    assert not drift(idle, pod, node, OPTS, NOW)
    assert drift(idle, pod, node, OPTS, NOW, scale_in_of="gpu")  # the scale-in is a drain cause
    assert drift(idle, None, node, OPTS, NOW)  # node-bound: the Node lacks the annotations
    ours = snode("IDLE", "DRAIN", reason=OURS)
    pod, node = settled(ours)
    assert drift(ours, pod, node, OPTS, NOW)  # fresh by default: the undrain is due
    assert not drift(ours, pod, node, OPTS, NOW, slurm_fresh=False)  # never on stale data
    other = snode("IDLE", "DRAIN", reason="bad fan")
    shared: list[tuple[str, SlurmNode | None]] = [("n1", idle), ("n2", other)]
    pod, node = settled(idle, node_slurm=shared)
    assert not drift(idle, pod, node, OPTS, NOW, node_slurm=shared)
    assert drift(idle, pod, node, OPTS, NOW)  # alone, n1 would want the Node shown not drained
    not_ready = Condition(
        type="Ready", status="False", reason="KubeletNotReady", last_transition_time=NOW - 10
    )
    pod, node = settled(idle)
    late = msgspec.structs.replace(node, conditions=(not_ready, *node.conditions[1:]))
    assert not drift(idle, pod, late, OPTS, NOW)  # within the 60 s grace
    assert drift(idle, pod, late, OPTS, NOW + 100)  # past it: now counts


def test_an_unbound_node_decides_nothing_but_reports_its_causes() -> None:
    decision = decide(snode(), None, None, now=NOW, opts=OPTS, slurm_fresh=True)
    assert decision == Decision() and decision.causes == ()


def test_reason_by_and_at_only_with_a_reason() -> None:
    no_reason = snode("IDLE", by="root", at=1_700_000_000)
    assert desired_annotations(no_reason, shown_of(no_reason))[Keys.REASON_BY] is None
    assert desired_annotations(no_reason, shown_of(no_reason))[Keys.REASON_AT] is None
    early = snode("IDLE", "DRAIN", reason="x", by="root", at=1)
    assert desired_annotations(early, shown_of(early))[Keys.REASON_AT] == "1970-01-01T00:00:01Z"
    assert desired_annotations(early, shown_of(early))[Keys.REASON_BY] == "root"


def test_rfc3339_is_utc_whatever_the_local_zone() -> None:
    zone = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        assert rfc3339(0) == "1970-01-01T00:00:00Z"
    finally:
        if zone is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = zone
        time.tzset()


def test_a_transition_time_of_one_second_is_kept() -> None:
    old = Condition(type="SlurmNodeHealthy", status="True", reason="Healthy", last_transition_time=1.0)
    want = Condition(type="SlurmNodeHealthy", status="True", reason="Healthy", message="new words")
    (change,) = condition_changes([want], [old], NOW)
    assert change.last_transition_time == 1.0


def test_cordon_and_uncordon_events_for_slurm_drains() -> None:
    opts = replace(OPTS, cordon_on_slurm_drain=True)
    a = SlurmNode(name="a", state=frozenset({"IDLE", "DRAIN"}), reason="bad fan")
    b = SlurmNode(name="b", state=frozenset({"IDLE", "DRAIN"}), reason="bad DIMM")
    members: list[tuple[str, SlurmNode | None]] = [("a", a), ("b", b)]
    cordon = decide(a, kpod(), knode(), now=NOW, opts=opts, slurm_fresh=True, node_slurm=members)
    assert cordon.cordon == "cordon"
    assert [e for e in cordon.events if e.reason == "CordoningForSlurmDrain"] == [
        EventSpec(
            "CordoningForSlurmDrain",
            "cordoning Node k1: Slurm node a drained: bad fan; Slurm node b drained: bad DIMM",
            "Normal",
            "node",
        )
    ]
    ours = knode(unschedulable=True, annotations={Keys.CORDONED_BY: "slurm"})
    uncordon = decide(snode(), kpod(), ours, now=NOW, opts=opts, slurm_fresh=True)
    assert uncordon.cordon == "uncordon"
    assert [e for e in uncordon.events if e.reason == "UncordoningAfterSlurmUndrain"] == [
        EventSpec(
            "UncordoningAfterSlurmUndrain",
            "uncordoning Node k1: Slurm node n1 no longer drained by Slurm",
            "Normal",
            "node",
        )
    ]


def test_transition_event_messages() -> None:
    seen_drained = kpod(annotations={Keys.STATE: "IDLE+DRAIN", Keys.REASON: "bad fan"})
    back = decide(snode(), seen_drained, knode(), now=NOW, opts=OPTS, slurm_fresh=True)
    seen_idle = kpod(annotations={Keys.STATE: "IDLE"})
    down = decide(snode("DOWN", reason="dead"), seen_idle, knode(), now=NOW, opts=OPTS, slurm_fresh=True)
    seen_down = kpod(annotations={Keys.STATE: "DOWN", Keys.REASON: "dead"})
    up = decide(snode(), seen_down, knode(), now=NOW, opts=OPTS, slurm_fresh=True)
    busy = decide(snode("ALLOCATED"), seen_idle, knode(), now=NOW, opts=OPTS, slurm_fresh=True)
    for decision in (back, down, up, busy):
        for event in decision.events:
            assert isinstance(event.message, str) and "n1" in event.message, event
    assert {e.reason for e in back.events} == {"SlurmNodeUndrained"}
    assert {e.reason for e in down.events} >= {"SlurmNodeUnhealthy"}
    assert {e.reason for e in up.events} >= {"SlurmNodeRecovered"}
