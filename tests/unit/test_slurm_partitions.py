"""The partition body and checks, pure: only managed fields are sent, and values Slurm would store as
something else (docs/slurm-releases.md, "Partitions") are refused naming the field."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncer.slurm.partitions import (
    UNLIMITED,
    InvalidPartition,
    OverSubscribe,
    PartitionSettings,
    RawPartition,
    body,
    check,
    node_changes,
)


def test_only_the_managed_fields_are_sent():
    assert body("gpu", PartitionSettings()) == {"name": "gpu"}
    assert body("gpu", PartitionSettings(state="DRAIN"), nodes="+a,-b") == {
        "name": "gpu", "nodes": {"configured": "+a,-b"}, "partition": {"state": ["DRAIN"]},
    }  # fmt: skip
    sent = body(
        "gpu",
        PartitionSettings(
            default=True, hidden=False, max_time=UNLIMITED, default_time=30, max_nodes=4, min_nodes=1,
            priority_tier=3, allow_accounts=("a", "b"), deny_qos=("low",), qos="gpu",
            oversubscribe=OverSubscribe("FORCE", 2), exclusive="USER", grace_time=0, alternate="main",
        ),
    )  # fmt: skip
    assert sent == {
        "name": "gpu",
        "flags": ["DEFAULT", "HIDDEN_CLEAR"],
        "maximums": {"time": {"set": True, "infinite": True, "number": 0},
                     "nodes": {"set": True, "infinite": False, "number": 4}},
        "defaults": {"time": {"set": True, "infinite": False, "number": 30}},
        "minimums": {"nodes": 1},
        "priority": {"tier": 3},
        "grace_time": 0,
        "alternate": "main",
        "accounts": {"allowed": "a,b"},
        "qos": {"deny": "low", "assigned": "gpu"},
        "partition": {"oversubscribe": "FORCE:2", "exclusive": "USER"},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("name", "settings", "field"),
    [
        ("bad name", PartitionSettings(), "name"),
        ("-x", PartitionSettings(), "name"),
        ("p", PartitionSettings(state="BOGUS"), "state"),  # Slurm would leave it INACTIVE
        ("p", PartitionSettings(priority_tier=-1), "priorityTier"),  # Slurm stores 65535
        ("p", PartitionSettings(priority_tier=65534), "priorityTier"),
        ("p", PartitionSettings(max_time=-5), "maxTime"),  # Slurm stores UNLIMITED
        ("p", PartitionSettings(max_time=0), "maxTime"),
        ("p", PartitionSettings(max_time=10, default_time=20), "defaultTime"),  # Slurm drops it silently
        ("p", PartitionSettings(max_nodes=2, min_nodes=3), "minNodes"),
        ("p", PartitionSettings(allow_accounts=("a",), deny_accounts=("b",)), "denyAccounts"),
        ("p", PartitionSettings(allow_qos=("a",), deny_qos=("b",)), "denyQos"),
        ("p", PartitionSettings(oversubscribe=OverSubscribe("SOMETIMES")), "overSubscribe"),
        ("p", PartitionSettings(alternate="a b"), "alternate"),
        (
            "p",
            PartitionSettings(oversubscribe=OverSubscribe("EXCLUSIVE")),
            "overSubscribe",
        ),  # v0.0.45 refuses
        ("p", PartitionSettings(exclusive="YES"), "exclusive"),
    ],
)
def test_values_slurm_would_mangle_are_refused_naming_the_field(name, settings, field):
    with pytest.raises(InvalidPartition) as refused:
        check(name, settings)
    assert refused.value.field == field and field in str(refused.value)


def test_what_slurm_answers_reads_back_as_the_settings_sent():
    raw = RawPartition(name="p")
    assert raw.to_state().settings.default is None, "no flags before v0.0.45: unknown, not False"
    sent = PartitionSettings(default=True, max_time=UNLIMITED, allow_accounts=("x",))
    answer = {
        "name": "p", "nodes": {"configured": "n[1-2],m"}, "flags": ["DEFAULT"],
        "partition": {"state": ["UP"], "oversubscribe": "YES:4", "exclusive": "NO"},
        "maximums": {"time": {"set": False, "infinite": True, "number": 0}},
        "accounts": {"allowed": "x", "deny": ""}, "groups": {"allowed": "ALL"},
    }  # fmt: skip
    state = msgspec.json.decode(msgspec.json.encode(answer), type=RawPartition).to_state()
    assert state.nodes == {"n1", "n2", "m"}
    got = state.settings
    assert (got.default, got.max_time, got.allow_accounts) == (
        sent.default,
        sent.max_time,
        sent.allow_accounts,
    )
    assert got.allow_groups == () and got.oversubscribe == OverSubscribe("YES", 4) and got.exclusive == "NO"


names = st.sets(st.sampled_from([f"n{i}" for i in range(8)]))


@given(names, names)
def test_node_changes_turn_one_set_into_the_other(have, want):
    changes = node_changes(have, want)
    result = set(have)
    for part in filter(None, changes.split(",")):
        (result.add if part[0] == "+" else result.discard)(part[1:])
    assert result == want and (changes == "") == (have == want)
