"""SlurmPartitions plan, the exact writes and conditions where the property tests of test_plan_partitions.py
leave room (found by `scripts/mutation`): a CR's deletion step by step, the one-default rule against
partitions ours and not ours, an adopted partition gone from Slurm, and lists a REST version does not show."""

from __future__ import annotations

from dataclasses import replace

from syncer.controllers.partitions.plan import (
    ADD_KEEP,
    CONFLICT,
    CREATING,
    DELETING,
    DRAINING,
    HELD,
    INVALID,
    NODES_HELD,
    READY,
    UNSUPPORTED,
    UPDATING,
    Action,
    Outcome,
    Wanted,
    diff,
    plan,
)
from syncer.slurm.partitions import PartitionSettings, PartitionState
from tests.unit.test_plan_partitions import BASE, WORLD

GPU = PartitionState("gpu", frozenset({"n1"}), "n1", BASE)
GOING = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(), deleting=True)
OURS = replace(WORLD, present={"gpu": GPU}, owned={"gpu": ("gpu-cr", "created")})


def test_a_created_partition_with_jobs_is_set_drain_once_and_waits_then_is_deleted_and_released():
    draining = plan([GOING], replace(OURS, jobs={"gpu": 2}))
    assert draining.actions == [
        Action("drain", "gpu-cr", "gpu", settings=PartitionSettings(state="DRAIN"), before=BASE)
    ]
    waiting = Outcome(
        "gpu-cr",
        "gpu",
        False,
        DRAINING,
        "partition gpu drains: 2 job(s) remain; deleted once they have ended",
        2,
    )
    assert draining.outcomes == {"gpu-cr": waiting}
    # already DRAIN (our drain carried out, or set by hand): nothing to write while the jobs run
    drained = replace(
        OURS, present={"gpu": replace(GPU, settings=replace(BASE, state="DRAIN"))}, jobs={"gpu": 2}
    )
    again = plan([GOING], drained)
    assert again.actions == [] and again.outcomes == {"gpu-cr": waiting}
    done = plan([GOING], replace(drained, jobs={"gpu": 0}))
    assert done.actions == [Action("delete", "gpu-cr", "gpu"), Action("release", "gpu-cr", "gpu")]
    assert done.outcomes == {"gpu-cr": Outcome("gpu-cr", "gpu", False, DELETING, "deleting partition gpu")}


def test_a_partition_not_created_by_the_cr_being_deleted_or_not_ours_to_write_is_only_released():
    released = Outcome("gpu-cr", "gpu", False, DELETING, "releasing partition gpu")
    for world in (
        replace(OURS, owned={"gpu": ("gpu-cr", "adopted")}),  # adopted: Slurm keeps it
        replace(OURS, owned={}),  # never ours
        replace(OURS, present={}),  # gone already
        # created, since put in Slinky's extraConf: never touched
        replace(OURS, slinky={"gpu": "Controller slurm/slurm"}),
        replace(OURS, writes=False),  # REST that cannot write partitions (before v0.0.45)
    ):
        result = plan([GOING], world)
        assert result.actions == [Action("release", "gpu-cr", "gpu")]
        assert result.outcomes == {"gpu-cr": released}


def test_a_refused_cr_is_not_ready_and_says_why():
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(state="UP"))
    result = plan([want], replace(WORLD, writes=False))
    assert result.actions == []
    assert result.outcomes["gpu-cr"] == Outcome(
        "gpu-cr", "gpu", False, UNSUPPORTED, result.outcomes["gpu-cr"].message
    )
    assert "26.05" in result.outcomes["gpu-cr"].message


def foreign_default(name: str = "main") -> PartitionState:
    return PartitionState(name, frozenset({"n2"}), "n2", replace(BASE, default=True))


def test_the_default_is_refused_while_a_partition_not_ours_or_slinkys_is_slurms_default():
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(default=True))
    result = plan([want], replace(WORLD, present={"main": foreign_default()}))
    assert result.actions == []
    assert result.outcomes["gpu-cr"] == Outcome(
        "gpu-cr", "gpu", False, CONFLICT,
        "spec.default: partition main is Slurm's default and not ours; Slurm has one default, so setting it "
        "here would change that partition",
    )  # fmt: skip
    # recorded as ours but managed by Slinky: still not ours to change
    slinky = replace(WORLD, present={"main": foreign_default()}, owned={"main": ("main-cr", "adopted")},
                     slinky={"main": "NodeSet slurm/main"})  # fmt: skip
    assert plan([want], slinky).outcomes["gpu-cr"].reason == CONFLICT


def test_the_default_moves_from_a_partition_of_ours_and_other_partitions_do_not_matter():
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(default=True))
    other_ours = replace(WORLD, present={"main": foreign_default()}, owned={"main": ("main-cr", "created")})
    assert [a.kind for a in plan([want], other_ours).actions] == ["claim", "create"]
    not_default = replace(WORLD, present={"cpu": replace(foreign_default("cpu"), settings=BASE)})
    assert [a.kind for a in plan([want], not_default).actions] == ["claim", "create"]


def test_a_cr_without_the_default_is_not_held_up_by_slurms_default_elsewhere():
    for default in (None, False):
        want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(default=default))
        result = plan([want], replace(WORLD, present={"main": foreign_default()}))
        assert result.outcomes["gpu-cr"].reason == CREATING


def test_adopting_the_partition_that_is_already_slurms_default_keeps_it_the_default():
    have = replace(foreign_default("gpu"), nodes=frozenset({"n1"}), node_list="n1")
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(default=True), adopt=True)
    result = plan([want], replace(WORLD, present={"gpu": have}))
    assert result.actions == [Action("claim", "gpu-cr", "gpu", ownership="adopted")]
    assert result.outcomes["gpu-cr"] == Outcome("gpu-cr", "gpu", True, READY, "partition gpu matches")


def test_an_adopted_partition_gone_from_slurm_is_made_anew_and_recorded_as_created():
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(state="UP"), adopt=True)
    adopted = replace(WORLD, owned={"gpu": ("gpu-cr", "adopted")})
    assert plan([want], adopted).actions == [
        # ours once made: deleted with the CR (`created` once Slurm shows it)
        Action("claim", "gpu-cr", "gpu", ownership="creating", replaces="adopted"),
        Action("create", "gpu-cr", "gpu", "n1", PartitionSettings(state="UP")),
    ]
    # still there: the record stays adopted; created and gone: made again under an unconfirmed claim
    have = PartitionState("gpu", frozenset({"n1"}), "n1", BASE)
    assert plan([want], replace(adopted, present={"gpu": have})).actions == []
    created = replace(WORLD, owned={"gpu": ("gpu-cr", "created")})
    assert [(a.kind, a.ownership, a.replaces) for a in plan([want], created).actions] == [
        ("claim", "creating", "created"), ("create", None, None),
    ]  # fmt: skip
    creating = replace(WORLD, owned={"gpu": ("gpu-cr", "creating")})
    assert [a.kind for a in plan([want], creating).actions] == ["create"], "claimed already"


def test_a_list_the_rest_version_does_not_show_is_sent():
    want = PartitionSettings(allow_accounts=("b", "a"))
    assert diff(want, PartitionSettings()) == PartitionSettings(allow_accounts=("a", "b"))


def test_the_outcome_counts_the_partitions_jobs_and_a_new_one_is_not_ready_yet():
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(state="UP"))
    created = plan([want], WORLD)
    assert created.outcomes == {"gpu-cr": Outcome("gpu-cr", "gpu", False, CREATING, "creating partition gpu")}
    ours = replace(WORLD, present={"gpu": GPU}, owned={"gpu": ("gpu-cr", "created")})
    matches = Outcome("gpu-cr", "gpu", True, READY, "partition gpu matches")
    assert plan([want], ours).outcomes["gpu-cr"] == matches  # no jobs listed: 0
    assert plan([want], replace(ours, jobs={"gpu": 3, "cpu": 5})).outcomes["gpu-cr"] == replace(
        matches, jobs=3
    )
    down = replace(want, settings=PartitionSettings(state="DOWN"))
    updating = plan([down], replace(ours, jobs={"gpu": 3})).outcomes["gpu-cr"]
    assert updating == Outcome("gpu-cr", "gpu", False, UPDATING, "updating partition gpu", 3)


def test_each_refusal_says_what_holds_the_partition_and_what_to_do():
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(state="UP"))
    present = replace(WORLD, present={"gpu": GPU})
    foreign = "partition gpu exists in Slurm and was not created by slurm-syncer; set spec.adopt: true to"
    slinky = (
        "partition gpu is Slinky's (its NodeSet slurm/gpu declares it in slurm.conf): slurm-syncer never "
        "changes it, adopt or not (slurm.conf is its source of truth); name another partition"
    )
    unread = " (slurmrestd's /conf could not be read)"
    cases = {
        "partition gpu is owned by SlurmPartition other-cr": replace(
            WORLD, owned={"gpu": ("other-cr", "created")}
        ),
        f"{foreign} manage it": present,
        slinky: replace(present, slinky={"gpu": "NodeSet slurm/gpu"}),
        f"slurmctld does not keep partitions: {ADD_KEEP}": replace(WORLD, keeps_partitions=False),
        f"slurmctld does not keep partitions{unread}: {ADD_KEEP}": replace(WORLD, keeps_partitions=None),
    }
    for message, world in cases.items():
        result = plan([want], world)
        assert result.actions == [] and result.outcomes["gpu-cr"].message == message


def invalid(want: Wanted) -> str:
    result = plan([want], WORLD)
    assert result.actions == [] and result.outcomes[want.cr].reason == INVALID
    return result.outcomes[want.cr].message


def test_an_invalid_cr_names_every_problem_the_bad_name_and_at_most_five_unknown_nodes():
    two = Wanted(
        "p", "p", frozenset(), PartitionSettings(), problems=("spec.nodes.hosts[0]: x", "spec.nodes: y")
    )
    assert invalid(two) == "spec.nodes.hosts[0]: x; spec.nodes: y"
    long = "p" * 64  # a CR's name, taken when spec.partitionName is unset, may be longer than Slurm allows
    assert invalid(Wanted("p", long, frozenset(), PartitionSettings())) == (
        f"partition name {long!r}: letters, digits, '_', '.', '-' (at most 63, not starting with -)"
    )
    assert invalid(Wanted("p", "p", frozenset(), PartitionSettings(state="BOGUS"))).startswith("spec.state: ")
    ghosts = [f"g{i}" for i in range(7)]
    tail = "unknown to Slurm (Slurm refuses the whole write: error 2018)"
    for count, shown in (
        (5, "g0, g1, g2, g3, g4"),
        (6, "g0, g1, g2, g3, g4 and 1 more"),
        (7, "g0, g1, g2, g3, g4 and 2 more"),
    ):
        want = Wanted("p", "p", frozenset(ghosts[:count]) | {"n1"}, PartitionSettings())
        assert invalid(want) == f"spec.nodes: {shown} {tail}"


def test_the_younger_of_two_crs_for_one_partition_is_a_conflict_and_is_released_when_deleted():
    old = Wanted("old", "gpu", frozenset({"n1"}), PartitionSettings(), order=("2026-01-01", "u1"))
    new = Wanted("new", "gpu", frozenset({"n2"}), PartitionSettings(), order=("2026-02-01", "u2"))
    lost = Outcome(
        "new", "gpu", False, CONFLICT, "partition gpu is declared by SlurmPartition old (older); rename one"
    )
    result = plan([new, old], WORLD)
    assert result.outcomes["new"] == lost and {a.cr for a in result.actions} == {"old"}
    going = plan([replace(new, deleting=True), old], WORLD)
    assert going.outcomes["new"] == lost and Action("release", "new", "gpu") in going.actions


def test_of_several_crs_asking_for_the_default_the_oldest_gets_it_and_the_others_name_it():
    def cr(name: str, month: int, default: bool | None, deleting: bool = False) -> Wanted:
        settings = PartitionSettings(default=default)
        return Wanted(
            name, name, frozenset({"n1"}), settings, deleting=deleting, order=(f"2026-0{month}", name)
        )

    result = plan([cr("c", 4, True), cr("b", 3, True), cr("a", 2, True), cr("z", 1, None)], WORLD)
    for younger in ("b", "c"):
        assert result.outcomes[younger] == Outcome(
            younger, younger, False, CONFLICT,
            "spec.default: SlurmPartition a (older) makes its partition the default already; Slurm has one",
        )  # fmt: skip
    assert result.outcomes["a"].reason == CREATING and result.outcomes["z"].reason == CREATING
    # an older CR being deleted gives the default up
    handed_over = plan([cr("a", 2, True, deleting=True), cr("b", 3, True)], WORLD)
    assert handed_over.outcomes["b"].reason == CREATING


PREEMPTS = "PreemptType=preempt/partition_prio, PreemptMode=REQUEUE"


def test_the_outcomes_of_a_held_state_and_of_nodes_held_out_in_full():
    held_world = replace(OURS, present={"gpu": replace(GPU, settings=replace(BASE, state="DOWN"))},
                         jobs={"gpu": 3})  # fmt: skip
    up = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings(state="UP"), generation=2, observed=2)
    assert plan([up], held_world).outcomes == {"gpu-cr": Outcome(
        "gpu-cr", "gpu", False, HELD,
        "partition gpu is DOWN in Slurm, set there, not by this CR (spec.state UP): kept, since UP would "
        "let jobs in or start jobs it stops; the CR's state is written again once the CR changes (any edit "
        "of its spec), or lift it in Slurm: scontrol update partitionname=gpu state=UP", 3,
    )}  # fmt: skip
    low = PartitionState("low", frozenset(f"n{i}" for i in range(8)), "n[0-7]", BASE)  # tier 1
    high = replace(GPU, settings=replace(BASE, priority_tier=10))  # the CR sets no tier: Slurm's counts
    busy = frozenset(f"n{i}" for i in range(2, 8))
    world = replace(OURS, present={"gpu": high, "low": low}, busy=busy, preempts=PREEMPTS, jobs={"gpu": 1},
                    slurm_nodes=low.nodes)  # fmt: skip
    want = Wanted("gpu-cr", "gpu", frozenset(f"n{i}" for i in range(1, 8)), PartitionSettings())
    result = plan([want], world)
    assert result.held_out == set(busy)
    assert [a.nodes for a in result.actions] == []
    assert result.outcomes == {"gpu-cr": Outcome(
        "gpu-cr", "gpu", False, NODES_HELD,
        "node(s) n2 (in low, tier 1), n3 (in low, tier 1), n4 (in low, tier 1), n5 (in low, tier 1), n6 "
        "(in low, tier 1) and 1 more run jobs that partition gpu (tier 10) would preempt (" + PREEMPTS +
        "): they join once idle; to move them sooner, drain them (annotation slurm-syncer.dev/drain on "
        "their Node)", 1,
    )}  # fmt: skip
    five = plan(
        [replace(want, nodes=frozenset(f"n{i}" for i in range(1, 7)))], replace(world, busy=busy - {"n7"})
    )
    assert five.outcomes["gpu-cr"].message.startswith(
        "node(s) n2 (in low, tier 1), n3 (in low, tier 1), n4 (in low, tier 1), n5 (in low, tier 1), n6 (in "
        "low, tier 1) run jobs"
    ), "five are all named, no 'and 0 more'"


def test_a_busy_member_already_in_the_partition_is_never_held_out():
    low = PartitionState("low", frozenset({"n1", "n2"}), "n[1-2]", BASE)
    high = PartitionState("gpu", frozenset({"n1"}), "n1", replace(BASE, priority_tier=10))
    world = replace(OURS, present={"gpu": high, "low": low}, busy=frozenset({"n1", "n2"}), preempts=PREEMPTS)
    want = Wanted("gpu-cr", "gpu", frozenset({"n1", "n2"}), PartitionSettings(priority_tier=10))
    result = plan([want], world)
    assert result.held_out == {"n2"} and result.actions == [], "n1 stays, n2 waits"


def test_a_partition_made_under_our_claim_is_confirmed_for_its_own_cr_and_closed_and_deleted_as_ours():
    made = replace(OURS, owned={"gpu": ("gpu-cr", "creating")}, made=frozenset({"gpu"}))
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings())
    assert plan([want], made).actions == [
        Action("claim", "gpu-cr", "gpu", ownership="created", replaces="creating")
    ]
    assert plan([GOING], replace(made, jobs={"gpu": 1})).actions == [
        Action("drain", "gpu-cr", "gpu", settings=PartitionSettings(state="DRAIN"), before=BASE)
    ]
    assert [a.kind for a in plan([GOING], replace(made, jobs={})).actions] == ["delete", "release"]
    assert [a.kind for a in plan([GOING], replace(made, made=frozenset(), jobs={})).actions] == ["release"]


def test_the_draining_messages_in_full():
    held = replace(OURS, present={"gpu": replace(GPU, settings=replace(BASE, state="DOWN"))})
    result = plan([GOING], replace(held, jobs=None))
    assert result.outcomes == {"gpu-cr": Outcome(
        "gpu-cr", "gpu", False, DRAINING,
        "partition gpu is INACTIVE: job(s) remain (not counted yet), held there (none starts, none is "
        "refused or ended); it is deleted once none remain: cancel them (scancel --partition=gpu) or let "
        "them run (scontrol update partitionname=gpu state=DRAIN)", 0,
    )}  # fmt: skip
    assert result.actions == [
        Action(
            "drain",
            "gpu-cr",
            "gpu",
            settings=PartitionSettings(state="INACTIVE"),
            before=held.present["gpu"].settings,
        )
    ]


def test_an_unconfirmed_claim_under_a_partition_that_appeared_says_so_in_full():
    want = Wanted("gpu-cr", "gpu", frozenset({"n1"}), PartitionSettings())
    result = plan([want], replace(OURS, owned={"gpu": ("gpu-cr", "creating")}))
    assert result.outcomes["gpu-cr"].message == (
        "partition gpu appeared in Slurm while this CR's create of it was not confirmed (a create Slurm "
        "refused, or a restart between the create and its record): it may be someone else's; set "
        "spec.adopt: true to manage it"
    )
