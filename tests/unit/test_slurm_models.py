"""slurmrestd's shapes read into the syncer's values (syncer/slurm/models.py), one rule at a time: Slurm's
number wrapper, a node's fields, its state flags (upper case, shared, bounded, an unknown one said once),
its feature lists, a ping's answer and what `GET /conf` says about partitions and preemption."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import msgspec
import pytest
from structlog.testing import capture_logs

from syncer.model.slurm import KNOWN_FLAGS, SlurmNode
from syncer.slurm import models
from syncer.slurm.models import NodesResponse, Number, PingEntry, RawNode, SlurmctldConf, unwrap


@pytest.fixture(autouse=True)
def fresh_flag_memory() -> Iterator[None]:
    """The flag sets and the unknown flags said are process-wide: each test starts with none."""
    sets, seen = dict(models._FLAG_SETS), set(models._UNKNOWN_SEEN)
    models._FLAG_SETS.clear()
    models._UNKNOWN_SEEN.clear()
    yield
    models._FLAG_SETS.clear()
    models._FLAG_SETS.update(sets)
    models._UNKNOWN_SEEN.clear()
    models._UNKNOWN_SEEN.update(seen)


@pytest.mark.parametrize(
    ("value", "number"),
    [
        (None, 0),
        (7, 7),
        (0, 0),
        (Number(set=True, infinite=False, number=42), 42),
        (Number(set=False, infinite=False, number=42), 0),  # unset: Slurm leaves a stale number there
        (Number(set=True, infinite=True, number=42), 0),  # infinite: no number at all
        (Number(set=False, infinite=True, number=42), 0),
    ],
)
def test_a_slurm_number_is_its_value_when_set_and_finite_else_0(
    value: models.MaybeNumber, number: int
) -> None:
    assert unwrap(value) == number


def test_every_field_of_a_node_is_read_into_the_syncers_node() -> None:
    raw = (
        b'{"nodes": [{"name": "n1", "state": ["idle", "DRAIN"], "reason": "k8s: x", '
        b'"reason_set_by_user": "slurm", '
        b'"reason_changed_at": {"set": true, "infinite": false, "number": 17}, '
        b'"comment": "c", "features": "a,b", "active_features": ["a"], "topology": "t:u", '
        b'"partitions": ["p1", "p2"], "cpus": 8, "alloc_cpus": 2, "real_memory": 1024, "alloc_memory": 512, '
        b'"gres": "gpu:1", "gres_used": "gpu:0", "boot_time": 100, '
        b'"last_busy": {"set": true, "infinite": false, "number": 200}}]}'
    )
    [node] = msgspec.json.decode(raw, type=NodesResponse).nodes
    assert node.to_node() == SlurmNode(
        name="n1", state=frozenset({"IDLE", "DRAIN"}), reason="k8s: x", reason_set_by="slurm",
        reason_changed_at=17, comment="c", features=("a", "b"), active_features=("a",), topology="t:u",
        partitions=("p1", "p2"), cpus=8, alloc_cpus=2, real_memory_mb=1024, alloc_memory_mb=512,
        gres="gpu:1", gres_used="gpu:0", boot_time=100, last_busy=200,
    )  # fmt: skip


def test_a_node_that_says_only_its_name_reads_as_empty_and_zero_fields() -> None:
    raw = b'{"name": "n1", "reason": null, "reason_set_by_user": null, "comment": null, "topology": null}'
    node = msgspec.json.decode(raw, type=RawNode).to_node()
    assert node == SlurmNode(name="n1", state=frozenset())
    assert (node.reason, node.reason_set_by, node.comment, node.topology, node.gres, node.gres_used) == (
        "", "", "", "", "", "",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("value", "names"),
    [("a,b", ("a", "b")), ("", ()), ("a,,b,", ("a", "b")), (["a", "b"], ("a", "b")), ([], ())],
)
def test_features_as_a_comma_list_or_a_json_list_read_alike_without_empty_names(
    value: list[str] | str, names: tuple[str, ...]
) -> None:
    assert RawNode(name="n", features=value, active_features=value).to_node().features == names
    assert RawNode(name="n", active_features=value).to_node().active_features == names


def test_state_flags_are_read_in_upper_case() -> None:
    assert RawNode(name="n", state=["idle", "Drain"]).to_node().state == frozenset({"IDLE", "DRAIN"})


def test_nodes_with_one_state_list_share_one_flag_set() -> None:
    first = RawNode(name="a", state=["IDLE", "DRAIN"]).to_node().state
    second = RawNode(name="b", state=["IDLE", "DRAIN"]).to_node().state
    assert first is second
    assert RawNode(name="c", state=["DRAIN", "IDLE"]).to_node().state == first  # another list, same flags


def test_the_shared_flag_sets_are_bounded_and_start_again_past_4096_lists() -> None:
    lists = itertools.product(sorted(KNOWN_FLAGS), repeat=3)
    for _ in range(4097):
        RawNode(name="n", state=list(next(lists))).to_node()
    assert len(models._FLAG_SETS) == 4097  # more than 4096 before the next new list clears them
    RawNode(name="n", state=list(next(lists))).to_node()
    assert len(models._FLAG_SETS) == 1


def test_an_unknown_flag_is_said_once_with_its_effect_and_kept_in_the_nodes_state() -> None:
    with capture_logs() as logs:
        node = RawNode(name="n", state=["IDLE", "shiny", "ALSO_NEW"]).to_node()
        RawNode(name="m", state=["SHINY"]).to_node()
    assert node.state == frozenset({"IDLE", "SHINY", "ALSO_NEW"})
    effect = "shown in the state annotation, never a cause of an action"
    assert logs == [
        {"event": "slurm_state_flag_unknown", "log_level": "warning", "flag": flag, "effect": effect}
        for flag in ("ALSO_NEW", "SHINY")  # sorted: one order whatever the set's
    ]


def test_known_flags_are_not_said() -> None:
    with capture_logs() as logs:
        RawNode(name="n", state=sorted(KNOWN_FLAGS)).to_node()
    assert logs == []


def test_at_most_256_unknown_flags_are_remembered_and_said_then_no_more() -> None:
    with capture_logs() as logs:
        RawNode(name="n", state=[f"NEW{i:03}" for i in range(255)]).to_node()
        RawNode(name="n", state=["ZZ1", "ZZ2"]).to_node()
    assert len(models._UNKNOWN_SEEN) == 256
    assert [log["flag"] for log in logs][-2:] == ["NEW254", "ZZ1"]


@pytest.mark.parametrize(
    ("entry", "up"),
    [
        (PingEntry(responding=True, pinged="DOWN"), True),  # `responding` decides where it is given
        (PingEntry(responding=False, pinged="UP"), False),
        (PingEntry(pinged="UP"), True),  # before v0.0.42: `pinged` decides
        (PingEntry(pinged="up"), True),
        (PingEntry(pinged="DOWN"), False),
        (PingEntry(), False),
    ],
)
def test_a_controller_is_up_by_responding_else_by_pinged_saying_up(entry: PingEntry, up: bool) -> None:
    assert entry.up is up


@pytest.mark.parametrize(
    ("entry", "primary"),
    [
        (PingEntry(primary=True, mode="backup"), True),  # `primary` decides where it is given
        (PingEntry(primary=False, mode="primary"), False),
        (PingEntry(mode="primary"), True),  # v0.0.42: `mode` decides
        (PingEntry(mode="backup"), False),
        (PingEntry(), False),
    ],
)
def test_a_controller_is_primary_by_primary_else_by_mode(entry: PingEntry, primary: bool) -> None:
    assert entry.is_primary is primary


@pytest.mark.parametrize(
    ("flags", "keeps"),
    [(["KeepPartInfo"], True), (["KEEPPARTINFO"], True), (["KeepPartState", "keeppartinfo"], True),
     (["KeepPartState"], False), ([], False)],
)  # fmt: skip
def test_slurmctld_keeps_partitions_when_any_reconfig_flag_is_keeppartinfo_in_any_case(
    flags: list[str], keeps: bool
) -> None:
    assert SlurmctldConf(reconfig_flags=flags).keeps_partitions is keeps


SAID = "PreemptType=preempt/partition_prio, PreemptMode="


@pytest.mark.parametrize(
    ("preempt_type", "mode", "said"),
    [
        ("preempt/partition_prio", ["REQUEUE"], SAID + "REQUEUE"),
        ("preempt/partition_prio", " suspend, gang ,", SAID + "SUSPEND,GANG"),
        ("preempt/partition_prio", [" cancel ", ""], SAID + "CANCEL"),
        ("preempt/partition_prio", ["OFF", "GANG"], SAID + "OFF,GANG"),
        ("preempt/partition_prio", ["off"], ""),  # preemption off
        ("preempt/partition_prio", [], ""),
        ("preempt/partition_prio", " , ", ""),
        ("preempt/qos", ["REQUEUE"], ""),  # by QOS, not by partition
        ("", ["REQUEUE"], ""),
    ],
)
def test_preemption_by_partition_is_said_only_for_partition_prio_with_a_mode_other_than_off(
    preempt_type: str, mode: list[str] | str, said: str
) -> None:
    assert SlurmctldConf(preempt_type=preempt_type, preempt_mode=mode).preempts_by_partition == said
