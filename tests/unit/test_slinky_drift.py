"""What the syncer says when KeepPartInfo keeps one of Slinky's partitions unlike its slurm.conf line: each
rule of the comparison (syncer/controllers/partitions/slinky_drift.py) and of reading the line as slurmctld
reads slurm.conf (slinky_conf.py)."""

from __future__ import annotations

from dataclasses import replace

from syncer.controllers.partitions.slinky_conf import controller_lines, nodeset_lines, partition_lines
from syncer.controllers.partitions.slinky_drift import (
    Difference,
    differences,
    frozen,
    frozen_message,
    removed_message,
    update_command,
)
from syncer.slurm.partitions import Limit, OverSubscribe, PartitionSettings

# a partition as slurmctld shows slurm.conf's `PartitionName=p Nodes=...` with nothing else set
LIVE = PartitionSettings(
    state="UP", default=False, hidden=False, max_time="UNLIMITED", default_time=None, max_nodes="UNLIMITED",
    min_nodes=0, priority_tier=1, priority_job_factor=1, grace_time=0, allow_accounts=(), deny_accounts=(),
    allow_groups=(), allow_qos=(), deny_qos=(), qos="", oversubscribe=OverSubscribe("NO"), exclusive="NO",
    alternate="",
)  # fmt: skip


def keys(declared: dict[str, str], live: PartitionSettings = LIVE) -> list[str]:
    return [d.key for d in differences(declared, live)]


# -- reading the lines --------------------------------------------------------------------------------------


def test_a_line_gives_its_pairs_with_keys_in_any_case_and_the_name_left_out() -> None:
    text = "partitionname=gpu nodes=gpu MAXTIME=60 state=down  # MaxTime=5 # State=UP: comments\n"
    assert partition_lines(text) == {"gpu": {"nodes": "gpu", "maxtime": "60", "state": "down"}}
    # a value may hold `=`: the first one splits the pair
    weights = partition_lines("PartitionName=a TRESBillingWeights=CPU=1.0,Mem=0.25G")
    assert weights == {"a": {"tresbillingweights": "CPU=1.0,Mem=0.25G"}}


def test_only_a_line_whose_first_key_is_partitionname_declares_and_a_word_without_equals_is_skipped() -> None:
    text = "NodeName=x PartitionName=notreally\nPartitionName=a junk MaxTime=5\n# PartitionName=old\n\n"
    assert partition_lines(text) == {"a": {"maxtime": "5"}}


def test_default_lines_apply_to_the_lines_after_them_merged_and_a_line_of_its_own_wins() -> None:
    text = (
        "PartitionName=before MaxTime=1\n"
        "PartitionName=DEFAULT MaxTime=60 State=UP\n"
        "PartitionName=a\n"
        "partitionname=default state=DOWN\n"  # merged: MaxTime=60 stays, State replaced
        "PartitionName=b MaxTime=30\n"
    )
    assert partition_lines(text) == {
        "before": {"maxtime": "1"},
        "a": {"maxtime": "60", "state": "UP"},
        "b": {"maxtime": "30", "state": "DOWN"},
    }


def test_a_partition_declared_twice_keeps_its_first_line() -> None:
    assert partition_lines("PartitionName=a MaxTime=1\nPartitionName=a MaxTime=2") == {"a": {"maxtime": "1"}}


def test_a_backslash_at_a_lines_end_continues_it_even_on_the_last_line() -> None:
    assert partition_lines("PartitionName=a \\\nMaxTime=5 \\\n State=UP") == {
        "a": {"maxtime": "5", "state": "UP"}
    }
    assert partition_lines("PartitionName=a MaxTime=5\\") == {"a": {"maxtime": "5"}}
    assert partition_lines("PartitionName=a # note \\\nMaxTime=5") == {"a": {}}  # a comment ends the line


def test_a_nodesets_line_is_rendered_as_the_operator_does_and_extra_confs_defaults_do_not_reach_it() -> None:
    nodeset = {"metadata": {"name": "gpu"}, "spec": {"partition": {"config": "MaxTime=60 State=UP"}}}
    assert nodeset_lines(nodeset) == {"gpu": {"nodes": "gpu", "maxtime": "60", "state": "UP"}}
    assert nodeset_lines({"metadata": {"name": "gpu"}, "spec": {}}) == {"gpu": {"nodes": "gpu"}}
    # a NodeSet named `default` renders slurm.conf's DEFAULT line: no partition of its own
    assert nodeset_lines({"metadata": {"name": "default"}, "spec": {}}) == {}
    off = {"metadata": {"name": "gpu"}, "spec": {"partition": {"enabled": False, "config": "MaxTime=5"}}}
    assert nodeset_lines(off) == {}


def test_a_controllers_lines_are_those_of_its_extra_conf() -> None:
    controller = {
        "spec": {"extraConf": "ReconfigFlags=KeepPartInfo\nPartitionName=debug Nodes=ALL MaxTime=5"}
    }
    assert controller_lines(controller) == {"debug": {"nodes": "ALL", "maxtime": "5"}}
    assert controller_lines({}) == {} and controller_lines({"spec": {"extraConf": ""}}) == {}


# -- comparing ----------------------------------------------------------------------------------------------


def test_agreeing_lines_have_no_difference_whatever_the_case_or_form_of_their_values() -> None:
    live = replace(LIVE, state="DRAIN", default=True, hidden=True, max_time=90, default_time=30, max_nodes=4,
                   min_nodes=1, priority_tier=5, priority_job_factor=7, grace_time=35,
                   allow_accounts=("a", "b"), allow_groups=("Wheel",), deny_qos=("low",), qos="high",
                   oversubscribe=OverSubscribe("FORCE", 4), alternate="main")  # fmt: skip
    declared = {
        "state": "drain", "default": "yes", "hidden": "TRUE", "maxtime": "1:30:00", "defaulttime": "30",
        "maxnodes": "4", "minnodes": "1", "prioritytier": "5", "priorityjobfactor": "7", "gracetime": "35",
        "allowaccounts": "B,a", "allowgroups": "Wheel", "denyqos": "LOW", "qos": "HIGH",
        "oversubscribe": "force", "alternate": "main",
    }  # fmt: skip
    assert differences(declared, live) == []


def test_each_compared_key_that_differs_is_named_with_both_values_sorted_by_key() -> None:
    declared = {"maxtime": "60", "state": "DOWN", "prioritytier": "3", "default": "YES", "hidden": "no"}
    assert differences(declared, LIVE) == [
        Difference("Default", "YES", "NO"),
        Difference("MaxTime", "60", "UNLIMITED"),
        Difference("PriorityTier", "3", "1"),
        Difference("State", "DOWN", "UP"),
    ]
    # an agreeing key before a differing one does not hide it
    assert keys({"state": "UP", "maxtime": "60"}) == ["MaxTime"]


def test_uncomparable_keys_and_values_are_ignored() -> None:
    # Nodes (a NodeSet's name, ALL) and keys the syncer does not manage are not compared
    assert (
        keys({"nodes": "gpu", "preemptmode": "CANCEL", "defmempercpu": "100", "exclusiveuser": "YES"}) == []
    )
    # a value slurmctld would refuse (or one not compared: OverSubscribe=EXCLUSIVE) is not a difference
    bad = {"state": "SIDEWAYS", "default": "maybe", "maxtime": "soon", "minnodes": "-1", "maxnodes": "many",
           "oversubscribe": "EXCLUSIVE"}  # fmt: skip
    assert keys(bad) == []
    # a value slurmctld does not show (None: an older REST version) is not compared
    assert keys({"default": "YES", "defaulttime": "5"}, replace(LIVE, default=None)) == []
    assert keys({"default": "maybe", "hidden": "2"}, replace(LIVE, default=True, hidden=True)) == []


def test_slurmctlds_shown_values_name_yes_no_lists_and_empty_values_as_scontrol_takes_them() -> None:
    live = replace(LIVE, default=True, allow_accounts=("a", "b"), qos="", deny_accounts=())
    found = differences({"default": "NO", "allowaccounts": "c", "qos": "x", "denyaccounts": "d"}, live)
    assert [(d.key, d.live) for d in found] == [
        ("AllowAccounts", "a,b"), ("Default", "YES"), ("DenyAccounts", "(none)"), ("QOS", "(none)"),
    ]  # fmt: skip
    assert differences({"allowgroups": "wheel"}, LIVE) == [Difference("AllowGroups", "wheel", "ALL")]
    assert differences({"oversubscribe": "NO"}, replace(LIVE, oversubscribe=OverSubscribe("YES", 4))) == [
        Difference("OverSubscribe", "NO", "YES:4")
    ]


def test_time_limits_are_read_in_every_slurm_form_seconds_rounding_up() -> None:
    forms: tuple[tuple[str, Limit], ...] = (
        ("90", 90), ("1:30", 2), ("2:00", 2), ("0:90", 2), ("2:00:00", 120), ("0:0:90", 2), ("1-0", 1440),
        ("1-1:1", 1501), ("0-0:0:59", 1), ("0", 0),
        ("UNLIMITED", "UNLIMITED"), ("infinite", "UNLIMITED"), ("-1", "UNLIMITED"),
    )  # fmt: skip
    for text, minutes in forms:
        assert keys({"maxtime": text}, replace(LIVE, max_time=minutes)) == [], text
        assert keys({"maxtime": text}, replace(LIVE, max_time=12345)) == ["MaxTime"], text
    for text in ("1:2:3:4", "a", "1-", "", "1.5"):
        assert keys({"maxtime": text}, replace(LIVE, max_time=12345)) == [], text


def test_node_counts_take_unlimited_and_names_take_all_as_no_restriction() -> None:
    assert keys({"maxnodes": "infinite"}) == [] and keys({"maxnodes": "UNLIMITED"}) == []
    assert keys({"maxnodes": "4"}) == ["MaxNodes"]
    assert keys({"maxnodes": "unlimited"}, replace(LIVE, max_nodes=4)) == ["MaxNodes"]
    assert keys({"allowaccounts": "all", "allowqos": "ALL", "allowgroups": "All"}) == []
    assert keys({"allowaccounts": "a,,b"}, replace(LIVE, allow_accounts=("a", "b"))) == []


def test_oversubscribe_is_read_as_slurmctld_stores_it() -> None:
    for text, stored in (("YES", ("YES", 4)), ("yes:8", ("YES", 8)), ("FORCE", ("FORCE", 4)),
                         ("FORCE:1", ("FORCE", 1)), ("YES:1", ("NO", 0)), ("FORCE:0", ("NO", 0)),
                         ("YES:x", ("NO", 0)), ("FORCE:x", ("NO", 0)), ("YES:2", ("YES", 2)),
                         ("no", ("NO", 0))):  # fmt: skip
        live = replace(LIVE, oversubscribe=OverSubscribe(*stored))
        assert keys({"oversubscribe": text}, live) == [], text
        assert keys({"oversubscribe": text}, replace(LIVE, oversubscribe=OverSubscribe("YES", 3))) == [
            "OverSubscribe"
        ], text
    assert keys({"oversubscribe": "NO:2"}) == []  # not a value slurmctld takes


def test_aliases_priority_sets_both_and_shared_is_oversubscribe_which_wins() -> None:
    assert keys({"priority": "5"}) == ["PriorityJobFactor", "PriorityTier"]
    assert keys({"priority": "5"}, replace(LIVE, priority_tier=5, priority_job_factor=5)) == []
    assert keys({"shared": "YES"}) == ["OverSubscribe"]
    assert keys({"shared": "YES", "oversubscribe": "NO"}) == []


def test_the_command_and_the_message_name_the_partition_each_key_both_values_and_the_object() -> None:
    found = [Difference("MaxTime", "60", "30"), Difference("State", "DOWN", "UP")]
    assert update_command("gpu", found) == "scontrol update partitionname=gpu MaxTime=60 State=DOWN"
    message = frozen_message("gpu", "NodeSet slurm/gpu", found)
    assert message == (
        "partition gpu: slurm.conf (NodeSet slurm/gpu) says MaxTime=60 (slurmctld has MaxTime=30), "
        "State=DOWN (slurmctld has State=UP); KeepPartInfo keeps slurmctld's through a reconfigure and a "
        "restart: apply it with `scontrol update partitionname=gpu MaxTime=60 State=DOWN`"
    )
    removed = removed_message("old", "Controller slurm/slurm")
    assert "partition old is no longer in slurm.conf (Controller slurm/slurm dropped its line)" in removed
    assert "`scontrol delete partitionname=old`" in removed


def test_frozen_tells_differing_present_partitions_and_removed_ones_slurmctld_keeps() -> None:
    declared = {
        "gpu": ("NodeSet slurm/gpu", {"maxtime": "60"}),
        "same": ("NodeSet slurm/same", {"maxtime": "UNLIMITED"}),
        "new": ("Controller slurm/slurm", {"maxtime": "5"}),  # not in slurmctld yet: added at a reconfigure
    }
    removed = {"old": "Controller slurm/slurm", "gone": "NodeSet slurm/x", "gpu": "Controller slurm/slurm"}
    present = {"gpu": replace(LIVE, max_time=30), "same": LIVE, "old": LIVE}
    told = frozen(declared, removed, present)
    assert sorted(told) == [("gpu", "NodeSet slurm/gpu"), ("old", "Controller slurm/slurm")]
    assert told["gpu", "NodeSet slurm/gpu"] == frozen_message(
        "gpu", "NodeSet slurm/gpu", [Difference("MaxTime", "60", "30")]
    )
    assert told["old", "Controller slurm/slurm"] == removed_message("old", "Controller slurm/slurm")
    assert frozen({}, {}, present) == {}


def test_a_qos_name_is_compared_in_any_case() -> None:
    assert keys({"qos": "high"}, replace(LIVE, qos="High")) == []
    assert differences({"qos": "low"}, replace(LIVE, qos="High")) == [Difference("QOS", "low", "High")]
