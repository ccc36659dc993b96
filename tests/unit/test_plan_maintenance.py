"""Maintenance windows, pure: parsing, the checks, where a condition's window comes from, grouping, the
reservation plan (simulated against a model of Slurm's reservations), job counts and hostlists."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.app.settings import SettingsError, _maintenance_condition
from syncer.model.keys import Keys
from syncer.model.kube import Condition, KubeNode
from syncer.plan.maintenance import (
    RULE_END_BEFORE_START,
    RULE_PAST,
    RULE_TOO_LONG,
    RULE_UNPARSEABLE,
    Desired,
    InvalidWindow,
    MaintenanceCondition,
    MaintenanceOptions,
    Window,
    group,
    owned,
    owner_tag,
    parse_interval,
    plan,
    reservation_name,
    running_at,
    window_of,
)
from syncer.slurm.hostlist import expand
from syncer.slurm.models import Reservation

T0 = 1_796_090_400  # 2026-12-01T02:00:00Z
NOW = T0 - 86400
TAG = owner_tag("default/slurm-syncer")
OPTS = MaintenanceOptions(
    conditions=(
        MaintenanceCondition("NebiusMaintenanceScheduled", -3600),
        MaintenanceCondition("CSPMaintenance", 1800),
    )
)


def node(annotation: str | None = None, *conditions: Condition) -> KubeNode:
    annotations = {Keys.MAINTENANCE_WINDOW: annotation} if annotation is not None else {}
    return KubeNode(name="n1", annotations=annotations, conditions=conditions)


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("2026-12-01T02:00:00Z/2026-12-01T06:00:00Z", Window(T0, T0 + 4 * 3600)),
        ("2026-12-01T02:00:00Z/PT4H", Window(T0, T0 + 4 * 3600)),
        ("2026-12-01T03:00:00+01:00/PT90M", Window(T0, T0 + 5400)),
        ("2026-12-01T02:00:00Z/P1DT2H", Window(T0, T0 + 26 * 3600)),
        (" 2026-12-01T02:00Z/PT30S ", Window(T0, T0 + 30)),
    ],
)
def test_intervals_parse(text: str, window: Window) -> None:
    assert parse_interval(text) == window


@pytest.mark.parametrize(
    "text",
    ["", "tomorrow", "2026-12-01T02:00:00/PT4H", "2026-12-01T02:00:00Z", "2026-12-01T02:00:00Z/P", "x/y",
     "2026-12-01T02:00:00Z/PT", "2026-13-01T02:00:00Z/PT1H"],
)  # fmt: skip
def test_bad_intervals_name_the_rule(text: str) -> None:
    with pytest.raises(InvalidWindow) as caught:
        parse_interval(text)
    assert caught.value.rule == RULE_UNPARSEABLE


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("2026-12-01T06:00:00Z/2026-12-01T02:00:00Z", RULE_END_BEFORE_START),
        ("2026-12-01T02:00:00Z/PT0S", RULE_END_BEFORE_START),
        ("2026-12-01T02:00:00Z/P8D", RULE_TOO_LONG),
        ("2026-11-01T02:00:00Z/PT4H", RULE_PAST),
        ("garbage", RULE_UNPARSEABLE),
    ],
)
def test_the_annotation_is_checked(value: str, rule: str) -> None:
    found = window_of(node(value), OPTS, NOW)
    assert found is not None and found.window is None and found.problem.startswith(rule)
    assert found.value == value and found.source == Keys.MAINTENANCE_WINDOW


def test_a_window_under_way_is_accepted_and_seven_days_is_the_limit() -> None:
    assert window_of(node("2026-12-01T02:00:00Z/PT4H"), OPTS, T0 + 60) is not None
    assert window_of(node("2026-12-01T02:00:00Z/P7D"), OPTS, NOW).window == Window(T0, T0 + 7 * 86400)  # type: ignore[union-attr]


def test_the_annotation_wins_and_conditions_are_read_in_order() -> None:
    nebius = Condition(
        type="NebiusMaintenanceScheduled", status="True", reason="MaintenanceScheduled",
        message="Node scheduled for urgent maintenance, SLA deadline is 2026-12-01T02:00:00Z",
    )  # fmt: skip
    nvsentinel = Condition(
        type="CSPMaintenance", status="True", reason="CSPMaintenanceIsNotHealthy",
        message="gce_instance:123 CSP maintenance scheduled Recommended Action=NONE;",
        last_transition_time=T0,
    )  # fmt: skip
    both = window_of(node(None, nvsentinel, nebius), OPTS, NOW)
    assert both is not None and both.source == "NebiusMaintenanceScheduled"
    assert both.window == Window(T0 - 3600, T0 - 3600 + 4 * 3600)  # deadline - 1 h, default duration
    only = window_of(node(None, nvsentinel), OPTS, NOW)
    assert only is not None and only.window == Window(T0 + 1800, T0 + 1800 + 4 * 3600)  # transition + 30 min
    given_interval = Condition(
        type="CSPMaintenance", status="True", message="window 2026-12-01T02:00:00Z/PT1H"
    )
    assert window_of(node(None, given_interval), OPTS, NOW).window == Window(T0 + 1800, T0 + 3600)  # type: ignore[union-attr]
    annotated = window_of(node("2026-12-02T02:00:00Z/PT1H", nebius), OPTS, NOW)
    assert annotated is not None and annotated.window == Window(T0 + 86400, T0 + 86400 + 3600)
    healthy = Condition(type="CSPMaintenance", status="False", message="No Health Failures")
    assert window_of(node(None, healthy), OPTS, NOW) is None


def test_the_condition_option_parses() -> None:
    assert _maintenance_condition("CSPMaintenance=+30m") == MaintenanceCondition("CSPMaintenance", 1800)
    assert _maintenance_condition("NebiusMaintenanceScheduled=-1h") == MaintenanceCondition(
        "NebiusMaintenanceScheduled", -3600
    )
    assert _maintenance_condition("X") == MaintenanceCondition("X", 0)
    for bad in ("=+1h", "X=1h", "X=+soon"):
        with pytest.raises((ValueError, SettingsError)):
            _maintenance_condition(bad)


def test_hostlists_expand() -> None:
    assert expand("node[00001-00003,00007],sbx-real") == [
        "node00001",
        "node00002",
        "node00003",
        "node00007",
        "sbx-real",
    ]
    assert expand("") == [] and expand("a") == ["a"]


def test_running_jobs_count_when_they_end_after_the_start() -> None:
    jobs = [(("a", "b"), T0 + 1), (("a",), T0 - 1), (("b",), 0), (("c",), T0 + 5)]
    assert running_at(jobs, {"a": T0, "b": T0}) == {"a": 1, "b": 2}


def test_names_are_ours_only_with_the_owner_tag_and_maint() -> None:
    window = Window(T0, T0 + 3600)
    name = reservation_name(TAG, window)
    assert owned(Reservation(name, ("a",), T0, T0 + 3600, frozenset({"MAINT"})), TAG)
    assert not owned(Reservation(name, ("a",), T0, T0 + 3600, frozenset()), TAG)
    assert not owned(Reservation("k8s-maint-by-hand", ("a",), T0, T0 + 3600, frozenset({"MAINT"})), TAG)
    other = reservation_name(owner_tag("other/slurm-syncer"), window)
    assert not owned(Reservation(other, ("a",), T0, T0 + 3600, frozenset({"MAINT"})), TAG)


# -- the plan, simulated against Slurm's behaviour ---------------------------------------------------


def apply(existing: dict[str, Reservation], writes: list, now: float) -> dict[str, Reservation]:  # type: ignore[type-arg]
    """Slurm as measured: create/update by name, an active reservation's start cannot move."""
    result = dict(existing)
    for write in writes:
        if write.action == "delete":
            assert write.name in result
            del result[write.name]
            continue
        before = result.get(write.name)
        if before is not None and before.start <= now:
            assert write.start is None, "Slurm refuses to move a begun reservation's start"
        start = write.start if write.start is not None else before.start  # type: ignore[union-attr]
        result[write.name] = Reservation(
            write.name, write.nodes, start, write.window.end, frozenset({"MAINT"})
        )
    return result


windows = st.builds(
    lambda s, d: Window(T0 + s * 600, T0 + s * 600 + d * 600), st.integers(-3, 6), st.integers(1, 4)
)
assignments = st.dictionaries(st.sampled_from([f"n{i}" for i in range(8)]), windows, max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(assignments, min_size=1, max_size=5), st.integers(0, 3))
def test_the_plan_converges_in_one_round_and_then_writes_nothing(
    steps: list[dict[str, Window]], tick: int
) -> None:
    slurm: dict[str, Reservation] = {}
    now = float(T0 - 1200)
    for wanted in steps:
        now += tick * 300
        live = {n: w for n, w in wanted.items() if w.end > now}  # past windows are refused before the plan
        desired = group(live)
        writes, names = plan(desired, slurm.values(), TAG, now)
        slurm = apply(slurm, writes, now)
        # each window's reservation covers its nodes and ends at its end; windows under way with the same
        # end are one window to Slurm (both start now) and share one; no reservation is left over
        for want in desired:
            have = slurm[names[want.window]]
            assert set(want.nodes) <= set(have.nodes) and have.end == want.window.end
            assert have.start == max(want.window.start, int(now)) or (
                have.start <= now and want.window.start <= now
            )
        assert set(slurm) == set(names.values())
        for name, have in slurm.items():
            assert set(have.nodes) == {n for d in desired if names[d.window] == name for n in d.nodes}
        again, _ = plan(desired, slurm.values(), TAG, now)
        assert again == []


def test_a_changed_window_updates_its_reservation_and_shared_windows_share_one() -> None:
    first, moved = Window(T0, T0 + 3600), Window(T0 + 600, T0 + 4200)
    writes, names = plan(group({"a": first, "b": first}), [], TAG, NOW)
    assert [w.action for w in writes] == ["create"] and writes[0].nodes == ("a", "b")
    slurm = apply({}, writes, NOW)
    writes, names2 = plan(group({"a": moved, "b": moved}), slurm.values(), TAG, NOW)
    assert [w.action for w in writes] == ["update"] and names2[moved] == names[first]
    assert plan([Desired(first, ("a",))], [], TAG, T0 + 10)[0][0].start == T0 + 10  # under way: starts now
