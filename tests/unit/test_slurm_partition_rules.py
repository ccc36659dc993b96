"""The partition module's rules one by one (scripts/mutation's survivors): each refusal's field, value and
rule, the bounds themselves accepted, every managed field's place in the body, every field of Slurm's answer
read (case as Slurm may send it), and which errors name a refused entry or a partition still in use."""

from __future__ import annotations

import msgspec
import pytest

from syncer.slurm.errors import SlurmApiError, SlurmMessage
from syncer.slurm.partitions import (
    U16_MAX,
    U32_MAX,
    UNLIMITED,
    InvalidPartition,
    OverSubscribe,
    PartitionSettings,
    PartitionState,
    RawPartition,
    body,
    check,
    partition_in_use,
    refused_entries,
)

S = PartitionSettings


@pytest.mark.parametrize(
    ("settings", "field", "value", "rule"),
    [
        (S(state="BOGUS"), "state", "BOGUS", "must be one of UP, DOWN, DRAIN, INACTIVE"),
        (S(max_time=0), "maxTime", 0, f"must be a whole number from 1 to {U32_MAX}, or UNLIMITED"),
        (S(default_time=0), "defaultTime", 0, f"must be a whole number from 1 to {U32_MAX}, or UNLIMITED"),
        (S(max_nodes=0), "maxNodes", 0, f"must be a whole number from 1 to {U32_MAX}, or UNLIMITED"),
        (S(min_nodes=-1), "minNodes", -1, f"must be a whole number from 0 to {U32_MAX}, or UNLIMITED"),
        (S(priority_job_factor=U16_MAX + 1), "priorityJobFactor", U16_MAX + 1,
         f"must be a whole number from 0 to {U16_MAX}, or UNLIMITED"),
        (S(grace_time=U32_MAX + 1), "graceTime", U32_MAX + 1,
         f"must be a whole number from 0 to {U32_MAX}, or UNLIMITED"),
        (S(max_time=10, default_time=11), "defaultTime", 11, "must not exceed maxTime"),
        (S(max_nodes=2, min_nodes=3), "minNodes", 3, "must not exceed maxNodes"),
        (S(allow_accounts=("a",), deny_accounts=("b",)), "denyAccounts", ("b",),
         "cannot be set with allowAccounts"),
        (S(allow_qos=("a",), deny_qos=("b",)), "denyQos", ("b",), "cannot be set with allowQos"),
        (S(oversubscribe=OverSubscribe("SOMETIMES")), "overSubscribe", "SOMETIMES", "one of NO, YES, FORCE"),
        (S(exclusive="YES"), "exclusive", "YES", "one of NO, USER, TOPO"),
        (S(alternate="a b"), "alternate", "a b", "must be a partition name"),
    ],
)  # fmt: skip
def test_each_refusal_names_the_field_the_value_and_the_rule(settings, field, value, rule):
    with pytest.raises(InvalidPartition) as refused:
        check("p", settings)
    got = refused.value
    assert (got.field, got.value, got.rule) == (field, value, rule)
    assert str(got) == f"{field} {value!r}: {rule}"


@pytest.mark.parametrize("settings", [S(priority_tier=True), S(max_time=True), S(min_nodes=False)])
def test_a_boolean_is_not_taken_for_a_number(settings):
    with pytest.raises(InvalidPartition):
        check("p", settings)


@pytest.mark.parametrize(
    "settings",
    [
        S(max_time=1, default_time=1, max_nodes=1, min_nodes=1),  # equal default/max and min/max: allowed
        S(max_time=U32_MAX, default_time=U32_MAX, max_nodes=U32_MAX, min_nodes=U32_MAX, grace_time=U32_MAX),
        S(min_nodes=0, priority_tier=0, priority_job_factor=0, grace_time=0),
        S(priority_tier=U16_MAX, priority_job_factor=U16_MAX),
        S(max_time=UNLIMITED, default_time=UNLIMITED, max_nodes=UNLIMITED, min_nodes=5),
    ],
)
def test_the_bounds_themselves_are_accepted(settings):
    check("p", settings)


def test_every_managed_list_and_priority_goes_to_its_own_key():
    sent = body(
        "p", S(allow_groups=("g",), deny_accounts=("b", "c"), allow_qos=("q",), priority_job_factor=7)
    )
    assert sent == {
        "name": "p",
        "priority": {"job_factor": 7},
        "accounts": {"deny": "b,c"},
        "groups": {"allowed": "g"},
        "qos": {"allowed": "q"},
    }


def test_the_default_qos_alone_is_sent_without_a_list():
    assert body("p", S(qos="normal")) == {"name": "p", "qos": {"assigned": "normal"}}


def test_every_field_of_slurms_answer_is_read_whatever_its_case():
    answer = {
        "name": "p", "nodes": {"configured": "n[1-2]"}, "flags": ["hidden"],
        "partition": {"state": ["drain"], "oversubscribe": "force:2", "exclusive": "user"},
        "maximums": {"time": {"set": True, "infinite": False, "number": 60},
                     "nodes": {"set": True, "infinite": False, "number": 8}},
        "defaults": {"time": {"set": True, "infinite": False, "number": 30}},
        "minimums": {"nodes": 2}, "priority": {"tier": 3, "job_factor": 4}, "grace_time": 5,
        "alternate": "main", "accounts": {"allowed": "", "deny": "y,x"}, "groups": {"allowed": "g"},
        "qos": {"allowed": "b,a", "deny": "c", "assigned": "normal"}, "cpus": {"total": 16},
        "preempt_mode": ["gang", "suspend"],
    }  # fmt: skip
    state = msgspec.json.decode(msgspec.json.encode(answer), type=RawPartition).to_state()
    settings = S(
        state="DRAIN", default=False, hidden=True, max_time=60, default_time=30, max_nodes=8, min_nodes=2,
        priority_tier=3, priority_job_factor=4, grace_time=5, allow_accounts=(), deny_accounts=("x", "y"),
        allow_groups=("g",), allow_qos=("a", "b"), deny_qos=("c",), qos="normal",
        oversubscribe=OverSubscribe("FORCE", 2), exclusive="USER", alternate="main",
    )  # fmt: skip
    assert state == PartitionState("p", frozenset({"n1", "n2"}), "n[1-2]", settings, 16, ("GANG", "SUSPEND"))


def test_a_limit_slurm_shows_unset_reads_as_none_and_no_flags_as_neither():
    answer = {"name": "p", "flags": [], "maximums": {"nodes": {"set": False, "infinite": False, "number": 3}}}
    got = msgspec.json.decode(msgspec.json.encode(answer), type=RawPartition).to_state().settings
    assert (got.max_nodes, got.default, got.hidden, got.state) == (None, False, False, None)


def test_preempt_mode_disabled_reads_as_off():
    raw = RawPartition(name="p", preempt_mode=["disabled"])
    assert raw.to_state().preempt_mode == ("OFF",)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("NO", OverSubscribe("NO", 0)),
        ("force", OverSubscribe("FORCE", 0)),
        ("yes:4", OverSubscribe("YES", 4)),
    ],
)
def test_oversubscribe_without_a_count_reads_as_zero_jobs(text, parsed):
    assert OverSubscribe.parse(text) == parsed


@pytest.mark.parametrize(
    ("over", "text"),
    [(OverSubscribe("YES"), "YES"), (OverSubscribe("YES", 2), "YES:2"),
     (OverSubscribe("FORCE", 4), "FORCE:4"), (OverSubscribe("NO", 3), "NO")],
)  # fmt: skip
def test_oversubscribe_is_sent_with_its_count_only_for_yes_and_force(over, text):
    assert over.text == text
    assert body("p", S(oversubscribe=over))["partition"] == {"oversubscribe": text}


def test_a_refused_entry_keeps_its_errors_and_the_index_past_the_last_is_unknown():
    error = SlurmMessage("Failed to create partition x with description at index 1", 2018, "Invalid node")
    assert refused_entries(SlurmApiError("partition_update", status=422, errors=(error,)), 2) == {1: [error]}
    assert refused_entries(SlurmApiError("partition_update", status=422, errors=(error,)), 1) is None
    assert refused_entries(OSError("connection reset"), 2) is None  # no Slurm errors at all


@pytest.mark.parametrize(
    ("errors", "in_use"),
    [
        ((SlurmMessage("", 2075, "other wording"),), True),
        ((SlurmMessage("", 9999, "Partition is in use"),), True),
        ((SlurmMessage("", 2076, "Invalid partition name specified"),), False),
        ((), False),
    ],
)
def test_a_partition_is_in_use_by_slurms_error_number_or_its_words(errors, in_use):
    assert partition_in_use(SlurmApiError("partition_delete", status=500, errors=errors)) is in_use


def test_an_error_without_slurms_errors_is_not_in_use():
    assert partition_in_use(OSError("connection reset")) is False
