"""Decision details mutation testing found unchecked: which condition changes are kept, what counts as
acting, and the exact Event names, types and texts (operators filter and alert on them)."""

from __future__ import annotations

from syncer.model import Condition
from syncer.model.keys import Keys
from syncer.sync.decide import Decision, EventSpec, SlurmAction, condition_changes, decide
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
        EventSpec("DrainingSlurmNode", "draining Slurm node n1: k8s: Node k1 cordoned", "Normal", "pod")
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
            "updating drain reason of Slurm node n1: k8s: Node k1 cordoned",
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
