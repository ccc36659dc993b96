"""check's preemption line for the scheduler's pods (docs/scheduler.md "Preemption", docs/operations.md):
with PreemptType=preempt/partition_prio, a partition the pods may use that a higher tier can preempt
without GraceTime lets the preemptor start beside the stopping pod; check names it and the fix."""

from __future__ import annotations

from syncer.app.check_scheduler import Landing, landing, longest_grace, preemptible, preemption
from syncer.model.keys import Keys
from syncer.slurm.models import SlurmctldConf
from syncer.slurm.partitions import PartitionSettings, PartitionState

PRIO = SlurmctldConf(preempt_type="preempt/partition_prio", preempt_mode=["CANCEL"])


def part(
    name: str, tier: int = 1, grace: int = 0, nodes: str = "a,b", mode: str = "CANCEL", default: bool = False
) -> PartitionState:
    settings = PartitionSettings(priority_tier=tier, grace_time=grace, default=default)
    return PartitionState(name, frozenset(nodes.split(",")), nodes, settings, 0, (mode,))


LOW, GRACE, HIGH = part("low"), part("grace", grace=30), part("high", tier=10, mode="OFF")
MAIN = part("main", default=True)
ALL = [MAIN, LOW, GRACE, HIGH]
ANY = Landing(any=True)


def test_a_partition_without_grace_that_a_higher_tier_preempts_is_named_with_the_fix() -> None:
    ok, what, fix, warn = preemption(PRIO, ALL, ANY, 20, "API v0.0.45")
    assert ok and warn
    assert "main (GraceTime 0 s, PreemptMode=CANCEL)" in what and "low (GraceTime 0 s" in what
    assert "grace (" not in what and "high (" not in what, what
    assert "GraceTime=25 or more" in fix and "terminationGracePeriodSeconds 20 s + 5 s" in fix
    assert "PreemptMode=CANCEL on main, low" in fix and Keys.JOB_PARTITION in fix


def test_enough_grace_where_the_pods_run_passes() -> None:
    only_grace = Landing(named=frozenset({"grace"}))
    ok, what, fix, warn = preemption(PRIO, ALL, only_grace, 25, "API v0.0.45")
    assert (ok, warn, fix) == (True, False, "")
    assert "partition(s) grace its pods may use can be preempted" in what and "GraceTime >= 30 s" in what


def test_grace_shorter_than_the_longest_pod_grace_plus_the_read_warns() -> None:
    only_grace = Landing(named=frozenset({"grace"}))
    ok, what, fix, warn = preemption(PRIO, ALL, only_grace, 26, "API v0.0.45")  # needs 31 s
    assert ok and warn and "grace (GraceTime 30 s" in what and "less than 31 s" in what
    assert "GraceTime=31 or more" in fix


def test_without_pods_kubernetes_default_grace_is_the_bound() -> None:
    only_grace = Landing(named=frozenset({"grace"}))
    _, what, fix, warn = preemption(PRIO, ALL, only_grace, None, "API v0.0.45")
    assert warn and "less than 35 s" in what and "Kubernetes' default (no pod now)" in fix


def test_a_pause_cannot_hold_a_pod_whatever_the_grace() -> None:
    suspending = part("susp", grace=100, mode="SUSPEND")
    _, what, _, warn = preemption(PRIO, [suspending, HIGH], ANY, 5, "API v0.0.45")
    assert warn and "susp (GraceTime 100 s, PreemptMode=SUSPEND)" in what


def test_no_preemption_no_conf_and_qos_say_so() -> None:
    off = preemption(SlurmctldConf(), ALL, ANY, 5, "API v0.0.45")
    assert off == (True, "scheduler: Slurm preempts no job (PreemptType=preempt/none)", "", False)
    none = SlurmctldConf(preempt_type="preempt/none")
    assert preemption(none, ALL, ANY, 5, "API v0.0.45") == off
    ok, what, fix, warn = preemption(None, ALL, ANY, 5, "API v0.0.42")
    assert ok and warn and "not checked, API v0.0.42 has no GET /conf" in what and "GraceTime" in fix
    qos = SlurmctldConf(preempt_type="preempt/qos")
    ok, what, fix, warn = preemption(qos, ALL, ANY, 5, "API v0.0.45")
    assert ok and warn and "PreemptType=preempt/qos" in what and "QOS" in what
    assert "GraceTime=10 or more" in fix


def test_partitions_no_higher_tier_can_reach_are_fine() -> None:
    elsewhere = part("high", tier=10, nodes="c")
    ok, what, fix, warn = preemption(PRIO, [MAIN, LOW, elsewhere], ANY, 5, "API v0.0.45")
    assert (ok, warn, fix) == (True, False, "")
    assert "no partition its pods may use (main, low, high) can be preempted" in what


def test_preemptible_needs_a_strictly_higher_tier_over_a_shared_node_and_a_mode() -> None:
    assert preemptible(LOW, [LOW, HIGH])
    assert not preemptible(LOW, [LOW, part("same", tier=1)])
    assert not preemptible(LOW, [LOW, part("far", tier=10, nodes="z")])
    assert not preemptible(part("off", mode="OFF"), [HIGH])
    assert not preemptible(HIGH, [LOW, HIGH, part("high", tier=20)])  # itself, by name
    unset = PartitionState("u", frozenset({"a"}), "a", PartitionSettings(), 0, ("CANCEL",))
    assert preemptible(unset, [unset, part("two", tier=2)])  # no tier read: Slurm's default 1
    assert not preemptible(part("top", tier=2), [part("two", tier=2), unset])


def test_landing_follows_the_namespaces() -> None:
    assert landing({}) == Landing()
    assert landing({"a": {}}) == Landing(default=True)
    assert landing({"a": {Keys.JOB_PARTITION: "x, y"}}) == Landing(named=frozenset({"x", "y"}))
    assert landing({"a": {Keys.POD_OVERRIDES: "partition"}}) == Landing(default=True, any=True)
    assert landing({"a": {Keys.POD_OVERRIDES: "*", Keys.JOB_PARTITION: "x"}}) == Landing(
        named=frozenset({"x"}), any=True
    )
    assert landing({"a": None}) == Landing(any=True)  # not readable: anywhere
    assert landing({"a": {Keys.POD_OVERRIDES: "bogus"}}) == Landing()  # its pods are refused
    assert landing({"a": {}}, frozenset({"partition"})) == Landing(default=True, any=True)


def test_landing_picks_the_partitions() -> None:
    assert [p.name for p in Landing(default=True).of(ALL)] == ["main"]
    assert [p.name for p in Landing(named=frozenset({"low"})).of(ALL)] == ["low"]
    assert [p.name for p in ANY.of(ALL)] == ["main", "low", "grace", "high"]
    unknown = PartitionState("old", frozenset(), "", PartitionSettings(default=None))
    assert Landing(default=True).of([unknown]) == [unknown]  # before v0.0.45 no flag: any may be


def test_longest_grace_reads_the_pods() -> None:
    assert longest_grace([]) is None
    assert longest_grace([{"spec": {"terminationGracePeriodSeconds": 3}}, {"spec": {}}]) == 30
    assert longest_grace([{"spec": {"terminationGracePeriodSeconds": 3}}, {}]) == 30
    assert longest_grace([{"spec": {"terminationGracePeriodSeconds": 45}}, {"spec": {}}]) == 45
