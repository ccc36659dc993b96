"""Maintenance windows, pure: parsing, the checks, where a condition's window comes from, grouping, the
reservation plan (simulated against a model of Slurm's reservations), job counts and hostlists."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.app.settings import SettingsError
from syncer.controllers.maintenance.options import maintenance_condition as _maintenance_condition
from syncer.controllers.maintenance.plan import (
    RULE_END_BEFORE_START,
    RULE_PAST,
    RULE_TOO_LONG,
    RULE_UNPARSEABLE,
    Desired,
    InvalidWindow,
    MaintenanceCondition,
    MaintenanceOptions,
    NodeWindow,
    Window,
    Write,
    check,
    group,
    owned,
    owner_tag,
    parse_interval,
    plan,
    reservation_name,
    running_at,
    window_of,
)
from syncer.model.keys import Keys
from syncer.model.kube import Condition, KubeNode
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


# -- exact values (each kills mutants the behaviour tests above let live) ----------------------------


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Another local time zone: names and texts are UTC whatever the machine's zone."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("new_york")
def test_names_and_texts_are_utc_whatever_the_local_zone() -> None:
    window = Window(T0, T0 + 3600)
    assert window.text == "2026-12-01T02:00:00Z/2026-12-01T03:00:00Z"
    assert reservation_name("abc123", window) == "k8s-maint-abc123-20261201T020000Z-20261201T030000Z"
    assert owner_tag("a/b") == hashlib.sha256(b"a/b").hexdigest()[:6]  # six hex digits in every name


def test_a_node_window_says_where_it_came_from_and_what_it_said() -> None:
    value = "2026-12-01T02:00:00Z/PT4H"
    assert window_of(node(value), OPTS, NOW) == NodeWindow(
        "n1", Keys.MAINTENANCE_WINDOW, value, Window(T0, T0 + 14400)
    )
    assert window_of(node(value), OPTS, T0 + 5 * 3600) == NodeWindow(
        "n1", Keys.MAINTENANCE_WINDOW, value, None, RULE_PAST
    )
    cond = Condition(
        type="CSPMaintenance", status="True", reason="Scheduled", message="at 2026-12-01T02:00:00Z"
    )
    assert window_of(node(None, cond), OPTS, NOW) == NodeWindow(
        "n1", "CSPMaintenance", "Scheduled: at 2026-12-01T02:00:00Z", Window(T0 + 1800, T0 + 1800 + 14400)
    )
    bare = Condition(type="CSPMaintenance", status="True", message="at 2026-12-01T02:00:00Z")
    assert window_of(node(None, bare), OPTS, NOW).value == "at 2026-12-01T02:00:00Z"  # type: ignore[union-attr]
    past = Condition(type="CSPMaintenance", status="True", reason="Done", message="2026-11-01T02:00:00Z/PT1H")
    assert window_of(node(None, past), OPTS, NOW) == NodeWindow(
        "n1", "CSPMaintenance", "Done: 2026-11-01T02:00:00Z/PT1H", None, RULE_PAST
    )
    assert str(InvalidWindow(RULE_PAST)) == RULE_PAST


def test_a_condition_gives_its_first_good_interval_or_its_two_timestamps() -> None:
    spec = MaintenanceCondition("X")
    opts = MaintenanceOptions(conditions=(spec,))
    later = Condition(type="X", status="True", message="see a/b, then 2026-12-01T02:00:00Z/PT1H")
    assert window_of(node(None, later), opts, NOW).window == Window(T0, T0 + 3600)  # type: ignore[union-attr]
    two = Condition(type="X", status="True", message="from 2026-12-01T02:00:00Z to 2026-12-01T05:00:00Z")
    assert window_of(node(None, two), opts, NOW).window == Window(T0, T0 + 3 * 3600)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("max_s", "shown"), [(7 * 86400, "7 days"), (86400, "1 days"), (36 * 3600, "36 h"), (12 * 3600, "12 h")]
)
def test_the_limit_is_named_in_days_or_hours(max_s: float, shown: str) -> None:
    with pytest.raises(InvalidWindow) as caught:
        check(Window(T0, T0 + 10**7), NOW, max_s)
    assert caught.value.rule == f"{RULE_TOO_LONG} ({shown})"


def test_durations_in_weeks_and_a_dangling_t_and_an_end_at_now() -> None:
    assert parse_interval("2026-12-01T02:00:00Z/P1W") == Window(T0, T0 + 7 * 86400)
    with pytest.raises(InvalidWindow):
        parse_interval("2026-12-01T02:00:00Z/P1DT")
    with pytest.raises(InvalidWindow) as caught:
        check(Window(T0 - 3600, T0), T0, 86400)  # ends now: past
    assert caught.value.rule == RULE_PAST


def test_a_job_ending_at_the_start_does_not_count() -> None:
    assert running_at([(("a",), T0)], {"a": T0}) == {"a": 0}


def reservation(name: str, nodes: tuple[str, ...], start: int, end: int) -> Reservation:
    return Reservation(name, nodes, start, end, frozenset({"MAINT"}))


def test_each_write_carries_the_reservation_it_changes() -> None:
    now = T0 - 600
    gone = reservation(reservation_name(TAG, Window(T0, T0 + 60)), ("x",), T0, T0 + 60)
    window = Window(T0, T0 + 3600)
    writes, _ = plan([Desired(window, ("a",))], [gone], TAG, now)
    assert writes == [
        Write("delete", gone.name, before=gone),
        Write("create", reservation_name(TAG, window), window, ("a",), T0),
    ]
    # a changed window: its reservation is updated, and the write says what it was
    have = reservation(reservation_name(TAG, window), ("a",), T0, T0 + 3600)
    moved = Window(T0, T0 + 7200)
    writes, _ = plan([Desired(moved, ("a", "b"))], [have], TAG, now)
    assert writes == [Write("update", have.name, moved, ("a", "b"), T0, have)]
    # begun, and the window moved into the future: Slurm cannot move its start, so it is replaced
    begun = reservation(reservation_name(TAG, Window(now - 60, T0 + 3600)), ("a",), int(now) - 60, T0 + 3600)
    writes, _ = plan([Desired(window, ("a",))], [begun], TAG, now)
    assert writes == [
        Write("delete", begun.name, before=begun),
        Write("create", reservation_name(TAG, window), window, ("a",), T0),
    ]


def test_the_reservation_named_for_a_window_is_its_own_even_when_changed_by_hand() -> None:
    window = Window(T0, T0 + 3600)
    extended = reservation(reservation_name(TAG, window), ("z",), T0, T0 + 4200)  # someone extended it
    writes, names = plan([Desired(window, ("a",))], [extended], TAG, NOW)
    assert writes == [Write("update", extended.name, window, ("a",), T0, extended)]
    assert names[window] == extended.name


def test_a_reservation_sharing_no_node_and_no_window_is_not_taken_over() -> None:
    other = reservation(reservation_name(TAG, Window(T0 + 60, T0 + 120)), ("x",), T0 + 60, T0 + 120)
    window = Window(T0, T0 + 3600)
    writes, _ = plan([Desired(window, ("a",))], [other], TAG, NOW)
    assert [(w.action, w.name) for w in writes] == [
        ("delete", other.name),
        ("create", reservation_name(TAG, window)),
    ]


def test_a_reservation_not_begun_whose_window_is_under_way_starts_now() -> None:
    now = T0
    window = Window(T0 - 600, T0 + 3600)
    later = reservation("k8s-maint-" + TAG + "-by-an-older-syncer", ("a",), T0 + 600, T0 + 3600)
    writes, _ = plan([Desired(window, ("a",))], [later], TAG, now)
    assert writes == [Write("update", later.name, window, ("a",), T0, later)]


def test_a_window_starting_this_second_joins_one_under_way_with_the_same_end() -> None:
    now = T0
    under_way, starting = Window(T0 - 600, T0 + 3600), Window(T0, T0 + 3600)
    writes, names = plan([Desired(under_way, ("a",)), Desired(starting, ("b",))], [], TAG, now)
    assert [(w.action, w.nodes) for w in writes] == [("create", ("a", "b"))]
    assert names[under_way] == names[starting]


def test_a_begun_reservation_is_the_window_starting_this_second_with_its_end_and_nodes() -> None:
    """A window starting this very second is under way: a reservation of ours that has begun, with the
    window's end and nodes, already is it (nothing to write, whatever it is named)."""
    now, window = T0, Window(T0, T0 + 3600)
    begun = reservation("k8s-maint-" + TAG + "-begun-earlier", ("a",), T0 - 600, T0 + 3600)
    writes, names = plan([Desired(window, ("a",))], [begun], TAG, now)
    assert writes == []
    assert names[window] == begun.name


def test_a_second_reservation_of_the_same_window_is_deleted_and_the_one_named_for_it_kept() -> None:
    """Each window takes one reservation: the one named for it first; another of ours with the same window
    (left by an earlier update) is one too many and goes."""
    window = Window(T0, T0 + 3600)
    named = reservation(reservation_name(TAG, window), ("a",), T0, T0 + 3600)
    other = reservation("k8s-maint-" + TAG + "-moved-here", ("a",), T0, T0 + 3600)
    writes, names = plan([Desired(window, ("a",))], [named, other], TAG, NOW)
    assert writes == [Write("delete", other.name, before=other)]
    assert names[window] == named.name


def test_a_reservation_with_the_window_is_taken_before_one_sharing_its_nodes() -> None:
    """A window whose reservation has another name takes the one with its window (its nodes updated), not
    the one sharing most of its nodes, which goes."""
    window = Window(T0, T0 + 3600)
    same_window = reservation("k8s-maint-" + TAG + "-moved-here", ("b",), T0, T0 + 3600)
    same_nodes = reservation("k8s-maint-" + TAG + "-elsewhen", ("a",), T0 + 7200, T0 + 9000)
    writes, names = plan([Desired(window, ("a",))], [same_window, same_nodes], TAG, NOW)
    assert writes == [
        Write("delete", same_nodes.name, before=same_nodes),
        Write("update", same_window.name, window, ("a",), T0, same_window),
    ]
    assert names[window] == same_window.name
