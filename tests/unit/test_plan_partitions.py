"""SlurmPartitions, pure: the plan against a model of Slurm's partitions (what one POST/DELETE does, as
measured on 26.05.5: only the fields sent change, `+a,-b` node changes, a DELETE with jobs is refused),
for any mix of CRs, present partitions, ownership records, jobs and the KeepPartInfo precondition."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.controllers.partitions.plan import (
    CONFLICT,
    DRAINING,
    INVALID,
    PRECONDITION,
    UNSUPPORTED,
    Action,
    Plan,
    Wanted,
    World,
    diff,
    plan,
    records,
)
from syncer.slurm.partitions import UNLIMITED, PartitionSettings, PartitionState

SLURM_NODES = frozenset(f"n{i}" for i in range(6))
# what a v0.0.45 read of a partition made with no settings shows
BASE = PartitionSettings(
    state="UP", default=False, hidden=False, max_time=UNLIMITED, default_time=None, max_nodes=UNLIMITED,
    min_nodes=0, priority_tier=1, priority_job_factor=1, grace_time=0, allow_accounts=(), deny_accounts=(),
    allow_groups=(), allow_qos=(), deny_qos=(), qos="", exclusive="NO", alternate="",
)  # fmt: skip
WORLD = World(present={}, owned={}, jobs={}, slurm_nodes=SLURM_NODES, keeps_partitions=True, writes=True)


def overlay(base: PartitionSettings, changes: PartitionSettings) -> PartitionSettings:
    return replace(base, **changes.managed())


def apply(world: World, wanted: list[Wanted], result: Plan) -> tuple[World, list[Wanted]]:
    """What Slurm and the API server look like after the controller carried out `result` in order."""
    present, owned, released = dict(world.present), dict(world.owned), set()
    for action in result.actions:
        name = action.partition
        if action.kind == "claim":
            assert action.ownership is not None
            owned[name] = (action.cr, action.ownership)
        elif action.kind == "create":
            assert name not in present, "a POST on an existing name would silently update it"
            made = frozenset(filter(None, (action.nodes or "").split(",")))
            present[name] = PartitionState(name, made, ",".join(sorted(made)), overlay(BASE, action.settings))
        elif action.kind in ("update", "drain"):
            have = present[name]
            nodes = set(have.nodes)
            for change in filter(None, (action.nodes or "").split(",")):
                (nodes.add if change[0] == "+" else nodes.discard)(change[1:])
            present[name] = replace(
                have, nodes=frozenset(nodes), settings=overlay(have.settings, action.settings)
            )
        elif action.kind == "delete":
            assert not world.jobs.get(name), "Slurm refuses to delete a partition with jobs (error 2075)"
            del present[name]
        else:  # release: the record goes, the finalizer goes, the CR is gone
            if owned.get(name, ("",))[0] == action.cr:
                del owned[name]
            released.add(action.cr)
    after = replace(world, present=present, owned=owned)
    return after, [w for w in wanted if w.cr not in released]


names = st.sampled_from(["a", "b", "c", "main"])
node_sets = st.frozensets(st.sampled_from([*sorted(SLURM_NODES), "ghost"]), max_size=4)
setting_values = st.fixed_dictionaries(
    {},
    optional={
        "state": st.sampled_from(["UP", "DOWN", "DRAIN", "INACTIVE", "BOGUS"]),
        "default": st.booleans(),
        "max_time": st.sampled_from([UNLIMITED, 60, 120, -5]),
        "default_time": st.sampled_from([30, 90]),
        "priority_tier": st.sampled_from([0, 5, -1]),
        "allow_accounts": st.sampled_from([("a", "b"), ("b", "a"), ("x",)]),
    },
)
wanted_crs = st.lists(
    st.builds(
        lambda cr, partition, nodes, values, adopt, deleting, age: Wanted(
            cr, partition, nodes, PartitionSettings(**values), adopt, deleting, (str(age), cr)
        ),
        st.sampled_from(["cr1", "cr2", "cr3", "cr4"]),
        names,
        node_sets,
        setting_values,
        st.booleans(),
        st.booleans(),
        st.integers(0, 3),
    ),
    max_size=4,
    unique_by=lambda w: w.cr,
)
present_parts = st.dictionaries(
    names,
    st.tuples(st.frozensets(st.sampled_from(sorted(SLURM_NODES))), setting_values, st.booleans()),
    max_size=4,
)
worlds = st.builds(
    lambda present, owners, jobs, keeps, writes, slinky: (present, owners, jobs, keeps, writes, slinky),
    present_parts,
    st.dictionaries(
        names,
        st.tuples(st.sampled_from(["cr1", "cr2", "cr3", "cr4"]), st.sampled_from(["created", "adopted"])),
        max_size=3,
    ),
    st.dictionaries(names, st.integers(0, 2)),
    st.sampled_from([True, False, None]),
    st.booleans(),
    st.frozensets(names, max_size=1),
)


def build(parts: tuple[Any, ...], wanted: list[Wanted]) -> World:
    present_raw, owners, jobs, keeps, writes, slinky = parts
    present = {}
    for name, (nodes, values, default) in present_raw.items():
        values = {k: v for k, v in values.items() if k not in ("default", "state") or v != "BOGUS"}
        state = PartitionSettings(**values)
        if state.state == "BOGUS":
            state = replace(state, state="UP")
        present[name] = PartitionState(
            name, nodes, ",".join(sorted(nodes)), overlay(replace(BASE, default=default), state)
        )
    # a record names a CR only if that CR exists (a CR gone has no record: the record is on it)
    by_cr = {w.cr: w for w in wanted}
    owned = {p: o for p, o in owners.items() if o[0] in by_cr and by_cr[o[0]].partition == p}
    return World(present, owned, jobs, SLURM_NODES, keeps, writes, dict.fromkeys(slinky, "NodeSet slurm/x"))


def writes_of(result: Plan) -> list[Action]:
    return [a for a in result.actions if a.kind != "release"]


@settings(max_examples=400, deadline=None)
@given(wanted_crs, worlds)
def test_every_cr_gets_one_outcome_and_the_plan_keeps_every_rule(wanted, parts):
    world = build(parts, wanted)
    result = plan(wanted, world)
    assert set(result.outcomes) == {w.cr for w in wanted}
    by_cr = {w.cr: w for w in wanted}
    claimed: set[str] = set()
    for action in result.actions:
        want = by_cr[action.cr]
        assert action.partition == want.partition
        if action.kind == "release":
            continue
        assert world.writes, "nothing is written where REST cannot write partitions (24.11, 25.11)"
        assert action.partition not in world.slinky, "Slinky-managed partitions are never touched"
        record = world.owned.get(action.partition)
        if action.kind == "claim":
            claimed.add(action.partition)
            continue
        ours = (record is not None and record[0] == action.cr) or action.partition in claimed
        assert ours, "a partition is changed only once it is recorded as this CR's (claim comes first)"
        if action.kind in ("create", "update"):
            assert world.keeps_partitions is True, "no create or update unless slurmctld keeps partitions"
            assert not want.deleting
            assert result.outcomes[want.cr].reason not in (CONFLICT, INVALID, PRECONDITION, UNSUPPORTED)
            assert set(action.settings.managed()) <= set(want.settings.managed())
        if action.kind == "create":
            assert action.partition not in world.present
            assert (
                action.settings == want.settings
                and set((action.nodes or "").split(",")) - {""} <= SLURM_NODES
            )
        if action.kind == "update":
            have = world.present[action.partition]
            assert all(getattr(have.settings, k) != v for k, v in action.settings.managed().items()), (
                "only changed fields are sent"
            )
        if action.kind in ("drain", "delete"):
            assert want.deleting and record is not None and record == (want.cr, "created")
        if action.kind == "delete":
            assert not world.jobs.get(action.partition), "a partition with jobs is drained, never deleted"
    for want in wanted:
        outcome = result.outcomes[want.cr]
        if outcome.reason in (CONFLICT, INVALID, PRECONDITION, UNSUPPORTED):
            assert not [a for a in writes_of(result) if a.cr == want.cr]
        if (
            not want.deleting and want.partition in world.present and want.partition not in world.owned
            and not want.adopt
        ):  # fmt: skip
            assert not [a for a in writes_of(result) if a.cr == want.cr], "foreign, not adopted: no write"


@settings(max_examples=400, deadline=None)
@given(wanted_crs, worlds)
def test_carried_out_the_plan_converges_and_then_writes_nothing(wanted, parts):
    """Each round carries out a plan; a CR released (its finalizer gone) can let an younger CR for the same
    name go ahead in the next round, so a few rounds, never more than the CRs plus one."""
    world = build(parts, wanted)
    remaining = wanted
    for _round in range(len(wanted) + 2):
        result = plan(remaining, world)
        if not result.actions:
            break
        world, remaining = apply(world, remaining, result)
    else:
        raise AssertionError(f"still writing after {len(wanted) + 2} rounds: {result.actions}")
    for want in remaining:
        outcome = result.outcomes[want.cr]
        if outcome.ready:
            have = world.present[want.partition]
            assert have.nodes == want.nodes and not diff(want.settings, have.settings).managed()
        if want.deleting and world.owned.get(want.partition) == (want.cr, "created"):
            assert outcome.reason == DRAINING and world.present[want.partition].settings.state == "DRAIN"


def test_without_keep_part_info_nothing_is_created_and_the_condition_says_the_line_to_add():
    want = Wanted("gpu", "gpu", frozenset({"n1"}), PartitionSettings(state="UP"))
    for keeps in (False, None):
        result = plan([want], replace(WORLD, keeps_partitions=keeps))
        assert not result.actions
        assert result.outcomes["gpu"].reason == PRECONDITION
        assert "ReconfigFlags=KeepPartInfo" in result.outcomes["gpu"].message


def test_a_new_partition_is_claimed_before_it_is_created():
    want = Wanted("gpu", "gpu", frozenset({"n1", "n2"}), PartitionSettings(state="UP", max_time=60))
    result = plan([want], WORLD)
    assert [(a.kind, a.ownership) for a in result.actions] == [("claim", "created"), ("create", None)]
    assert result.actions[1].nodes == "n1,n2"


def test_a_partition_changed_behind_our_back_is_put_back_with_what_it_was():
    want = Wanted("gpu", "gpu", frozenset({"n1"}), PartitionSettings(state="UP", priority_tier=5))
    have = PartitionState(
        "gpu", frozenset({"n1", "n2"}), "n[1-2]", replace(BASE, state="DRAIN", priority_tier=5)
    )
    result = plan([want], replace(WORLD, present={"gpu": have}, owned={"gpu": ("gpu", "created")}))
    [update] = result.actions
    assert (update.kind, update.nodes, update.settings) == ("update", "-n2", PartitionSettings(state="UP"))
    assert update.before is not None and update.before.state == "DRAIN"


def test_a_foreign_partition_is_a_conflict_unless_adopted_and_slinky_ones_even_then():
    main = PartitionState("main", SLURM_NODES, "n[0-5]", replace(BASE, default=True))
    want = Wanted("main", "main", SLURM_NODES, PartitionSettings(max_time=60))
    world = replace(WORLD, present={"main": main})
    assert plan([want], world).outcomes["main"].reason == CONFLICT
    adopted = plan([replace(want, adopt=True)], world)
    assert [(a.kind, a.ownership) for a in adopted.actions] == [("claim", "adopted"), ("update", None)]
    slinky = plan([replace(want, adopt=True)], replace(world, slinky={"main": "NodeSet slurm/main"}))
    assert not slinky.actions and "Slinky" in slinky.outcomes["main"].message


def test_deleting_drains_waits_for_jobs_then_deletes_and_an_adopted_one_is_only_released():
    have = PartitionState("gpu", frozenset({"n1"}), "n1", BASE)
    want = Wanted("gpu", "gpu", frozenset({"n1"}), PartitionSettings(), deleting=True)
    world = replace(WORLD, present={"gpu": have}, owned={"gpu": ("gpu", "created")}, jobs={"gpu": 2})
    draining = plan([want], world)
    assert [a.kind for a in draining.actions] == ["drain"]
    assert draining.outcomes["gpu"].jobs == 2 and "2 job(s) remain" in draining.outcomes["gpu"].message
    done = plan([want], replace(world, jobs={}))
    assert [a.kind for a in done.actions] == ["delete", "release"]
    adopted = plan([want], replace(world, owned={"gpu": ("gpu", "adopted")}, jobs={}))
    assert [a.kind for a in adopted.actions] == ["release"]


def test_bad_input_names_the_field_and_writes_nothing():
    cases = {
        "spec.nodes: ghost unknown to Slurm": Wanted("p", "p", frozenset({"ghost"}), PartitionSettings()),
        "spec.priorityTier": Wanted("p", "p", frozenset(), PartitionSettings(priority_tier=-1)),
        "spec.defaultTime": Wanted("p", "p", frozenset(), PartitionSettings(max_time=10, default_time=20)),
        "spec.nodes.selector matches no Node": Wanted(
            "p", "p", frozenset(), PartitionSettings(), problems=("spec.nodes.selector matches no Node",)
        ),
    }
    for text, want in cases.items():
        result = plan([want], WORLD)
        assert not result.actions and result.outcomes["p"].reason == INVALID
        assert text in result.outcomes["p"].message, result.outcomes["p"].message


def test_two_crs_for_one_partition_or_one_default_the_older_wins():
    old = Wanted("old", "gpu", frozenset(), PartitionSettings(default=True), order=("2026-01-01", "u1"))
    new = Wanted("new", "gpu", frozenset(), PartitionSettings(), order=("2026-02-01", "u2"))
    other = Wanted("other", "cpu", frozenset(), PartitionSettings(default=True), order=("2026-03-01", "u3"))
    result = plan([new, other, old], WORLD)
    assert (
        result.outcomes["new"].reason == CONFLICT and "SlurmPartition old" in result.outcomes["new"].message
    )
    assert result.outcomes["other"].reason == CONFLICT and "spec.default" in result.outcomes["other"].message
    assert {a.cr for a in result.actions} == {"old"}


def test_records_are_read_from_the_crs_annotations_only_with_a_known_value():
    found = records([("a", "gpu", "created"), ("b", "cpu", "adopted"), ("c", "x", "mine"), ("d", None, None)])
    assert found == {"gpu": ("a", "created"), "cpu": ("b", "adopted")}


def test_diff_ignores_the_order_of_names():
    want = PartitionSettings(allow_accounts=("b", "a"), max_time=60)
    assert diff(want, replace(BASE, allow_accounts=("a", "b"), max_time=60)) == PartitionSettings()
