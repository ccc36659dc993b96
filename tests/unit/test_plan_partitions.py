"""SlurmPartitions, pure: the plan against a model of Slurm's partitions (what one POST/DELETE does, as
measured on 26.05.5: only the fields sent change, `+a,-b` node changes, a DELETE with jobs is refused),
for any mix of CRs, present partitions, ownership records, jobs and the KeepPartInfo precondition."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.controllers.partitions.guards import STOPS, closing_state, lifts, preempting
from syncer.controllers.partitions.plan import (
    CONFLICT,
    DRAINING,
    HELD,
    INVALID,
    NODES_HELD,
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
    present, owned, released, made = dict(world.present), dict(world.owned), set(), set(world.made)
    for action in result.actions:
        name = action.partition
        if action.kind == "claim":
            assert action.ownership is not None
            assert owned.get(name, (None, None))[1] == action.replaces, "a claim replaces what the plan saw"
            owned[name] = (action.cr, action.ownership)
            if action.ownership == "created":
                made.discard(name)
        elif action.kind == "create":
            assert name not in present, "a POST on an existing name would silently update it"
            members = frozenset(filter(None, (action.nodes or "").split(",")))
            present[name] = PartitionState(
                name, members, ",".join(sorted(members)), overlay(BASE, action.settings)
            )
            made.add(name)
        elif action.kind in ("update", "drain"):
            have = present[name]
            nodes = set(have.nodes)
            for change in filter(None, (action.nodes or "").split(",")):
                (nodes.add if change[0] == "+" else nodes.discard)(change[1:])
            present[name] = replace(
                have, nodes=frozenset(nodes), settings=overlay(have.settings, action.settings)
            )
        elif action.kind == "delete":
            assert not (world.jobs or {}).get(name), "Slurm refuses to delete a partition with jobs (2075)"
            del present[name]
        else:  # release: the record goes, the finalizer goes, the CR is gone
            if owned.get(name, ("",))[0] == action.cr:
                del owned[name]
            released.add(action.cr)
    after = replace(world, present=present, owned=owned, made=frozenset(made))
    # the controller writes each CR's status: what it planned with is the generation seen
    return after, [replace(w, observed=w.generation) for w in wanted if w.cr not in released]


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
        lambda cr, partition, nodes, values, adopt, deleting, age, observed, joining: Wanted(
            cr,
            partition,
            nodes,
            PartitionSettings(**values),
            adopt,
            deleting,
            (str(age), cr),
            joining=nodes & joining,
            generation=2,
            observed=observed,
        ),
        st.sampled_from(["cr1", "cr2", "cr3", "cr4"]),
        names,
        node_sets,
        setting_values,
        st.booleans(),
        st.booleans(),
        st.integers(0, 3),
        st.sampled_from([None, 1, 2]),
        st.frozensets(st.sampled_from(["n4", "ghost"])),
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
    lambda *parts: parts,
    present_parts,
    st.dictionaries(
        names,
        st.tuples(
            st.sampled_from(["cr1", "cr2", "cr3", "cr4"]), st.sampled_from(["creating", "created", "adopted"])
        ),
        max_size=3,
    ),
    st.one_of(st.none(), st.dictionaries(names, st.integers(0, 2))),
    st.sampled_from([True, False, None]),
    st.booleans(),
    st.frozensets(names, max_size=1),
    st.frozensets(names, max_size=2),  # made by this process
    st.frozensets(st.sampled_from(sorted(SLURM_NODES)), max_size=3),  # busy
    st.sampled_from(["", "PreemptType=preempt/partition_prio, PreemptMode=CANCEL"]),
)


def build(parts: tuple[Any, ...], wanted: list[Wanted]) -> World:
    present_raw, owners, jobs, keeps, writes, slinky, made, busy, preempts = parts
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
    slinky_names = dict.fromkeys(slinky, "NodeSet slurm/x")
    return World(present, owned, jobs, SLURM_NODES, keeps, writes, slinky_names, made, busy, preempts)


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
            assert action.replaces == (record[1] if record is not None else None)
            if action.ownership == "created":
                assert action.partition in world.made and action.partition in world.present
            if action.partition in world.present and action.ownership == "adopted":
                assert want.adopt, "an existing partition becomes ours only where the CR adopts it"
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
            if lifts(have.settings.state, action.settings.state):
                assert want.observed is not None and want.generation > want.observed, (
                    "a stop set in Slurm is lifted only once the CR changed after it was seen"
                )
        if action.kind in ("create", "update"):
            check_no_preemption(action, want, world)
        if action.kind in ("drain", "delete"):
            assert want.deleting and record is not None and record[0] == want.cr
            assert record[1] == "created" or (record[1] == "creating" and action.partition in world.made)
        if action.kind == "drain":
            have = world.present[action.partition]
            assert action.settings == PartitionSettings(state=closing_state(have.settings.state))
            assert not lifts(have.settings.state, action.settings.state), "a deleted CR starts no held job"
        if action.kind == "delete":
            assert world.jobs is not None and not world.jobs.get(action.partition), (
                "a partition with jobs (or jobs not counted yet) is closed, never deleted"
            )
    for want in wanted:
        outcome = result.outcomes[want.cr]
        if outcome.reason in (CONFLICT, INVALID, PRECONDITION, UNSUPPORTED):
            assert not [a for a in writes_of(result) if a.cr == want.cr]
        record = world.owned.get(want.partition)
        unconfirmed = record is not None and record[1] == "creating" and want.partition not in world.made
        if (
            not want.deleting and want.partition in world.present and (record is None or unconfirmed)
            and not want.adopt
        ):  # fmt: skip
            assert not [a for a in writes_of(result) if a.cr == want.cr], "foreign, not adopted: no write"


def check_no_preemption(action: Action, want: Wanted, world: World) -> None:
    """No busy node joins a partition of a higher tier than one whose jobs it runs, where Slurm preempts."""
    have = world.present.get(action.partition)
    added = [
        n.removeprefix("+") for n in (action.nodes or "").split(",") if n and (have is None or n[0] == "+")
    ]
    if not world.preempts:
        return
    tiers = (want.settings.priority_tier, have.settings.priority_tier if have is not None else None)
    tier = next((t for t in tiers if t is not None), 1)
    assert not preempting(added, tier, action.partition, world.present, world.busy)


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
            assert have.nodes == want.nodes - (want.joining - world.slurm_nodes)
            assert not diff(want.settings, have.settings).managed()
        if want.deleting and world.owned.get(want.partition) == (want.cr, "created"):
            assert outcome.reason == DRAINING
            assert world.present[want.partition].settings.state in ("DRAIN", "INACTIVE")


def test_without_keep_part_info_nothing_is_created_and_the_condition_says_the_line_to_add():
    want = Wanted("gpu", "gpu", frozenset({"n1"}), PartitionSettings(state="UP"))
    for keeps in (False, None):
        result = plan([want], replace(WORLD, keeps_partitions=keeps))
        assert not result.actions
        assert result.outcomes["gpu"].reason == PRECONDITION
        assert "ReconfigFlags=KeepPartInfo" in result.outcomes["gpu"].message


def test_a_new_partition_is_claimed_before_it_is_created_and_confirmed_once_slurm_shows_it():
    want = Wanted("gpu", "gpu", frozenset({"n1", "n2"}), PartitionSettings(state="UP", max_time=60))
    result = plan([want], WORLD)
    assert [(a.kind, a.ownership) for a in result.actions] == [("claim", "creating"), ("create", None)]
    assert result.actions[1].nodes == "n1,n2"
    made = PartitionState("gpu", frozenset({"n1", "n2"}), "n[1-2]", overlay(BASE, want.settings))
    world = replace(WORLD, present={"gpu": made}, owned={"gpu": ("gpu", "creating")}, made=frozenset({"gpu"}))
    [confirm] = plan([want], world).actions
    assert (confirm.kind, confirm.ownership, confirm.replaces) == ("claim", "created", "creating")


def test_a_partition_that_appears_under_an_unconfirmed_claim_is_foreign_and_a_deleted_cr_only_releases_it():
    """A create Slurm refused (or a restart between create and record) leaves `creating`: a same-named
    partition an admin makes later is not taken, and never deleted with the CR."""
    want = Wanted("gpu", "gpu", frozenset({"n1"}), PartitionSettings(max_time=60))
    theirs = PartitionState("gpu", frozenset({"n1"}), "n1", replace(BASE, max_time=7))
    world = replace(WORLD, present={"gpu": theirs}, owned={"gpu": ("gpu", "creating")}, jobs={})
    result = plan([want], world)
    assert not result.actions and result.outcomes["gpu"].reason == CONFLICT
    assert "not confirmed" in result.outcomes["gpu"].message
    adopted = plan([replace(want, adopt=True)], world)
    claim = adopted.actions[0]
    assert (claim.kind, claim.ownership, claim.replaces) == ("claim", "adopted", "creating")
    assert [a.kind for a in plan([replace(want, deleting=True)], world).actions] == ["release"]
    gone = plan([want], replace(world, present={}))
    assert [(a.kind, a.ownership) for a in gone.actions] == [("create", None)], "claimed already: created"


def test_a_partition_changed_behind_our_back_is_put_back_with_what_it_was():
    """(A state that stops more than Slurm's is put back too; one that stops less waits: the next test.)"""
    want = Wanted("gpu", "gpu", frozenset({"n1"}), PartitionSettings(state="DRAIN", priority_tier=5))
    have = PartitionState(
        "gpu", frozenset({"n1", "n2"}), "n[1-2]", replace(BASE, state="UP", priority_tier=5)
    )
    result = plan([want], replace(WORLD, present={"gpu": have}, owned={"gpu": ("gpu", "created")}))
    [update] = result.actions
    assert (update.kind, update.nodes, update.settings) == ("update", "-n2", PartitionSettings(state="DRAIN"))
    assert update.before is not None and update.before.state == "UP"


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
    assert [(a.kind, a.settings.state) for a in draining.actions] == [("drain", "DRAIN")]
    assert draining.outcomes["gpu"].jobs == 2 and "2 job(s) remain" in draining.outcomes["gpu"].message
    done = plan([want], replace(world, jobs={}))
    assert [a.kind for a in done.actions] == ["delete", "release"]
    adopted = plan([want], replace(world, owned={"gpu": ("gpu", "adopted")}, jobs={}))
    assert [a.kind for a in adopted.actions] == ["release"]
    uncounted = plan([want], replace(world, jobs=None))
    assert [a.kind for a in uncounted.actions] == ["drain"], "jobs not counted yet: closed, not deleted"
    assert "not counted yet" in uncounted.outcomes["gpu"].message


def test_a_deleted_crs_partition_that_holds_its_jobs_keeps_holding_them():
    """Measured: DRAIN lets queued jobs start. A DOWN partition goes INACTIVE (no submission, no start), an
    INACTIVE or DRAIN one stays; the condition says how an admin lets the held jobs go."""
    want = Wanted("gpu", "gpu", frozenset({"n1"}), PartitionSettings(), deleting=True)
    for state, written in (("DOWN", "INACTIVE"), ("INACTIVE", None), ("DRAIN", None), ("UP", "DRAIN")):
        have = PartitionState("gpu", frozenset({"n1"}), "n1", replace(BASE, state=state))
        world = replace(WORLD, present={"gpu": have}, owned={"gpu": ("gpu", "created")}, jobs={"gpu": 1})
        result = plan([want], world)
        assert [a.settings.state for a in result.actions] == ([written] if written else []), state
        message = result.outcomes["gpu"].message
        assert result.outcomes["gpu"].reason == DRAINING and "1 job(s) remain" in message
        held = state in ("DOWN", "INACTIVE")
        assert ("scancel --partition=gpu" in message) == held and ("held there" in message) == held, message
    assert [closing_state(s) for s in ("UP", None, "DRAIN", "DOWN", "INACTIVE", "BOGUS")] == [
        "DRAIN", "DRAIN", None, "INACTIVE", None, None,
    ]  # fmt: skip


def test_a_stop_set_in_slurm_is_kept_until_the_cr_changes_and_told():
    have = PartitionState("gpu", frozenset({"n1"}), "n1", replace(BASE, state="DOWN", max_time=5))
    want = Wanted("gpu", "gpu", frozenset({"n1"}), PartitionSettings(state="UP", max_time=60), generation=3,
                  observed=3)  # fmt: skip
    world = replace(WORLD, present={"gpu": have}, owned={"gpu": ("gpu", "created")})
    [update] = plan([want], world).actions
    assert update.settings == PartitionSettings(max_time=60), "the other fields are still put back"
    held = plan(
        [want], replace(world, present={"gpu": replace(have, settings=replace(have.settings, max_time=60))})
    )
    assert not held.actions and held.outcomes["gpu"].reason == HELD and not held.outcomes["gpu"].ready
    assert "DOWN in Slurm" in held.outcomes["gpu"].message and "state=UP" in held.outcomes["gpu"].message
    assert not plan([replace(want, observed=None)], world).actions[0].settings.state, "no status yet: kept"
    changed = plan([replace(want, generation=4)], world)
    assert changed.actions[0].settings == PartitionSettings(state="UP", max_time=60), "the CR changed"
    # a stop the CR asks for is written over a state that stops less, changed or not
    drain = plan([replace(want, settings=PartitionSettings(state="INACTIVE"))], world)
    assert drain.actions[0].settings == PartitionSettings(state="INACTIVE")


def test_what_each_state_stops_and_which_writes_would_lift_a_stop():
    assert (
        STOPS["DRAIN"] == {"submit"}
        and STOPS["DOWN"] == {"start"}
        and STOPS["INACTIVE"] == {"submit", "start"}
    )
    lifting = {(h, w) for h in STOPS for w in STOPS if lifts(h, w)}
    assert lifting == {
        ("DRAIN", "UP"), ("DRAIN", "DOWN"), ("DOWN", "UP"), ("DOWN", "DRAIN"), ("INACTIVE", "UP"),
        ("INACTIVE", "DRAIN"), ("INACTIVE", "DOWN"),
    }  # fmt: skip
    assert not lifts(None, "UP") and not lifts("DOWN", None) and not lifts("BOGUS", "UP")


def test_a_busy_node_joins_a_higher_tier_partition_once_idle_where_slurm_preempts_by_partition_priority():
    low = PartitionState("low", frozenset({"n1", "n2", "n3"}), "n[1-3]", replace(BASE, priority_tier=1))
    high_have = PartitionState("high", frozenset({"n0"}), "n0", replace(BASE, priority_tier=10))
    want = Wanted("high", "high", frozenset({"n0", "n1", "n2"}), PartitionSettings(priority_tier=10))
    preempts = "PreemptType=preempt/partition_prio, PreemptMode=CANCEL"
    world = replace(WORLD, present={"low": low, "high": high_have}, owned={"high": ("high", "created")},
                    busy=frozenset({"n1", "n3"}), preempts=preempts)  # fmt: skip
    result = plan([want], world)
    [update] = result.actions
    assert update.nodes == "+n2" and result.held_out == {"n1"}
    joined = replace(high_have, nodes=frozenset({"n0", "n2"}))
    held = plan([want], replace(world, present={"low": low, "high": joined}))
    outcome = held.outcomes["high"]
    assert not held.actions and outcome.reason == NODES_HELD and not outcome.ready
    assert (
        "n1 (in low, tier 1)" in outcome.message
        and "preempt" in outcome.message
        and preempts in outcome.message
    )
    idle = plan([want], replace(world, present={"low": low, "high": joined}, busy=frozenset({"n3"})))
    assert [a.nodes for a in idle.actions] == ["+n1"]
    assert plan([want], replace(world, preempts="")).actions[0].nodes == "+n1,+n2", "no preemption: no guard"
    same = plan([replace(want, settings=PartitionSettings(priority_tier=1))], world)
    assert same.actions[0].nodes == "+n1,+n2", "a tier not above theirs preempts nothing"
    created = plan([replace(want, cr="new", partition="new")], replace(world, owned={}))
    assert [a.nodes for a in created.actions if a.kind == "create"] == ["n0,n2"], "also when created"
    assert preempting(["n1"], 10, "high", {"high": high_have}, frozenset({"n1"})) == {}, (
        "in no other partition"
    )


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
