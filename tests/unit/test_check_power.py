"""check's power-saving items over slurmctld's configuration as slurmrestd 26.05.5 answered GET /conf
(captured from the sandbox: power saving on, off, SuspendTime=INFINITE, SuspendExc* covering nodes)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from syncer.app.check_cmd import Item, report
from syncer.app.check_power import PowerNodeSet, power_checks, power_nodesets
from syncer.slurm.models import ConfResponse, SlurmctldConf

DATA = Path(__file__).parent / "data"
GPU = PowerNodeSet("slurm", "gpu", partition="gpu", ceiling=8)


def conf(name: str) -> SlurmctldConf:
    raw = (DATA / f"slurmrestd-26.05.5-conf-{name}.json").read_bytes()
    return msgspec.json.decode(raw, type=ConfResponse).slurm_conf


def failed(lines: list[tuple[bool, str, str, bool]]) -> list[tuple[str, str]]:
    return [(what, fix) for ok, what, fix, _ in lines if not ok]


def test_the_sandboxs_power_saving_is_all_a_nodeset_needs() -> None:
    lines = power_checks(conf("power-on"), [GPU], "API v0.0.45")
    assert failed(lines) == []
    assert [what for _, what, _, _ in lines] == [
        "SuspendTime=600: slurmctld powers an idle member down after 600 s",
        "SuspendProgram=/bin/true, ResumeProgram=/bin/true (the syncer creates and deletes the pods; the "
        "programs need only exit 0)",
        "ResumeTimeout=600: a member's slurmd must register within 600 s of its power-up",
        "no SuspendExcNodes, SuspendExcParts or SuspendExcStates covers NodeSet slurm/gpu's members",
        "no PrologSlurmctld runs slurm-syncer's prolog: a job on a member Slurm powers up starts at "
        "slurmctld's periodic check, up to 30 s after the member's slurmd registered (if your own prolog "
        "calls it, ignore this)",
    ]


def test_power_saving_off_fails_with_the_lines_to_add() -> None:
    lines = power_checks(conf("power-off"), [GPU], "API v0.0.45")
    problems = failed(lines)
    assert len(problems) == 2
    (suspend_what, suspend_fix), (programs_what, programs_fix) = problems
    assert suspend_what.startswith("SuspendTime is NONE: slurmctld never powers an idle node down")
    assert "`SuspendTime=300`" in suspend_fix and "scontrol reconfigure" in suspend_fix
    assert "no SuspendProgram and no ResumeProgram" in programs_what
    assert "`SuspendProgram=/bin/true` and `ResumeProgram=/bin/true`" in programs_fix
    # the default ResumeTimeout (60 s) works but is short for a pod that waits for a machine: a warning
    timeout = next(line for line in lines if line[1].startswith("ResumeTimeout=60"))
    assert timeout[0] and timeout[3] and "`ResumeTimeout=900`" in timeout[2]


def test_suspend_time_infinite_reads_as_never() -> None:
    lines = power_checks(conf("suspend-infinite"), [GPU], "API v0.0.45")
    assert [what.split(":")[0] for what, _ in failed(lines)] == ["SuspendTime is NONE"]


def test_exclusions_that_cover_members_fail_naming_each_entry() -> None:
    # captured: SuspendExcNodes=sbx-real,gpu-[0-3],node[00001-00002]:1, SuspendExcParts=sandbox,
    # SuspendExcStates=DOWN,DRAIN,DYNAMIC_NORM
    excluded = conf("power-excluded")
    in_sandbox = PowerNodeSet("slurm", "gpu", partition="sandbox", ceiling=8)
    [(what, fix)] = failed(power_checks(excluded, [in_sandbox], "API v0.0.45"))
    assert what == (
        "SuspendExcNodes entry gpu-[0-3]; SuspendExcParts entry sandbox (the NodeSet's partition); "
        "SuspendExcStates entry DYNAMIC_NORM covers members of NodeSet slurm/gpu: slurmctld never powers "
        "them down (nor up from powered down)"
    )
    assert "spec.power.minReplicas" in fix
    # `gpu-[6-9]:2` (keep two of them up) is matched by its hostlist; members beyond the ceiling are not
    kept_up = msgspec.structs.replace(excluded, suspend_exc_nodes=["gpu-[6-9]:2"], suspend_exc_states=[])
    assert failed(power_checks(kept_up, [GPU], ""))[0][0].startswith(
        "SuspendExcNodes entry gpu-[6-9]:2 covers"
    )
    assert failed(power_checks(kept_up, [PowerNodeSet("slurm", "gpu", ceiling=6)], "")) == []
    # a NodeSet named like a prefix of another is not covered by the other's names
    assert "SuspendExcNodes" not in failed(power_checks(excluded, [PowerNodeSet("a", "gp")], ""))[0][0]


def test_floor_members_may_be_excluded_as_docs_nodeset_md_advises() -> None:
    """`SuspendExcNodes=gpu-[0-1]` for a floor of 2 keeps those always-on members up: not a failure; one
    more name, a member Slurm must power, is."""
    excluded = msgspec.structs.replace(
        conf("power-excluded"), suspend_exc_nodes=["gpu-[0-1]"], suspend_exc_parts=[], suspend_exc_states=[]
    )
    floor_of_two = PowerNodeSet("slurm", "gpu", ceiling=8, floor=2)
    assert failed(power_checks(excluded, [floor_of_two], "")) == []
    one_more = msgspec.structs.replace(excluded, suspend_exc_nodes=["gpu-[0-2]"])
    assert failed(power_checks(one_more, [floor_of_two], ""))[0][0].startswith(
        "SuspendExcNodes entry gpu-[0-2]"
    )
    listed = [{"metadata": {"name": "gpu"}, "spec": {"power": {"minReplicas": 2, "maxReplicas": 8}}}]
    assert power_nodesets(listed)[0].floor == 2


def test_no_power_nodeset_no_items_and_no_conf_a_warning() -> None:
    assert power_checks(conf("power-off"), [], "API v0.0.45") == []
    [(ok, what, fix, warn)] = power_checks(None, [GPU], "API v0.0.42 (Slurm 24.11.5)")
    assert ok and warn
    assert what.startswith(
        "power saving for NodeSet(s) slurm/gpu: not checked, API v0.0.42 (Slurm 24.11.5) has no GET /conf"
    )
    assert "scontrol show config" in fix


@pytest.mark.parametrize(
    ("power", "ceiling"),
    [({"minReplicas": 1, "maxReplicas": 8}, 8), ({}, None), ({"maxReplicas": "8"}, None), (True, None)],
)
def test_power_nodesets_reads_only_the_presence_of_spec_power(power: object, ceiling: int | None) -> None:
    listed = [
        {"metadata": {"namespace": "slurm", "name": "cpu"}, "spec": {"replicas": 2}},
        {
            "metadata": {"namespace": "slurm", "name": "gpu"},
            "spec": {"power": power, "slurm": {"partition": "gpu"}},
        },
    ]
    floor = 1 if isinstance(power, dict) and "minReplicas" in power else 0
    assert power_nodesets(listed) == [PowerNodeSet("slurm", "gpu", "gpu", ceiling, floor)]


def test_json_output_carries_the_items() -> None:
    items = [Item(*line) for line in power_checks(conf("power-off"), [GPU], "API v0.0.45")]
    out = json.loads(report(items, "json"))
    assert out["failed"] == 2 and out["warned"] == 2  # ResumeTimeout, no PrologSlurmctld
    assert {i["status"] for i in out["items"]} == {"fail", "warn", "ok"}
    assert any("`SuspendProgram=/bin/true`" in i["fix"] for i in out["items"])


def prolog_line(changed: SlurmctldConf) -> tuple[bool, str, str, bool]:
    return power_checks(changed, [GPU], "API v0.0.45")[-1]


def test_the_prolog_named_in_slurm_conf_is_ok_and_its_absence_a_warning_saying_what_it_costs() -> None:
    with_prolog = conf(
        "prolog"
    )  # the power test sandbox (26.05.5): PrologSlurmctld=/sbx/etc/slurm-syncer-prolog
    assert prolog_line(with_prolog) == (
        True,
        "PrologSlurmctld=/sbx/etc/slurm-syncer-prolog: a job on a member Slurm powers up starts once the "
        "member is ready",
        "",
        False,
    )
    ok, what, fix, warn = prolog_line(conf("power-on"))
    assert ok and warn and "up to 30 s after" in what
    assert "`slurm-syncer prolog`" in fix and "`PrologSlurmctld=<its path>`" in fix and "reconfigure" in fix
    other = msgspec.structs.replace(with_prolog, prolog_slurmctld=["/etc/slurm/site-prolog"])
    ok, what, _, warn = prolog_line(other)
    assert ok and warn and what.startswith("PrologSlurmctld=/etc/slurm/site-prolog does not name")
    several = msgspec.structs.replace(with_prolog, prolog_slurmctld="/a/site,/opt/slurm-syncer-prolog")
    assert prolog_line(several)[1].startswith("PrologSlurmctld=/opt/slurm-syncer-prolog: ")


@pytest.mark.parametrize(("timeout", "warned"), [(0, False), (60, True), (300, True), (301, False)])
def test_a_prolog_timeout_within_the_prologs_wait_is_a_warning(timeout: int, warned: bool) -> None:
    changed = msgspec.structs.replace(conf("prolog"), prolog_timeout=timeout)
    ok, what, fix, warn = prolog_line(changed)
    assert ok and warn is warned
    if warned:
        assert f"PrologTimeout={timeout} s" in what and f"below {timeout}" in fix


def test_without_conf_the_check_by_hand_names_the_prolog() -> None:
    [(_, _, fix, _)] = power_checks(None, [GPU], "API v0.0.42 (Slurm 24.11.5)")
    assert "grep PrologSlurmctld" in fix and "slurm-syncer-prolog" in fix


# Each item's whole text as an administrator reads it, and the boundaries of each rule.
CPU = PowerNodeSet("slurm", "cpu")
FIX_RECONFIGURE = "then run `scontrol reconfigure`"


def test_power_saving_off_says_what_is_missing_for_every_nodeset_named_and_how_to_add_it() -> None:
    suspend, programs = power_checks(conf("power-off"), [GPU, CPU], "API v0.0.45")[:2]
    assert suspend == (
        False,
        "SuspendTime is NONE: slurmctld never powers an idle node down, so NodeSet(s) slurm/gpu, slurm/cpu "
        "never shrink (their idle members keep their pods)",
        "add `SuspendTime=300` (idle seconds before a member's pod goes) to slurm.conf, "
        f"{FIX_RECONFIGURE} (a partition's own SuspendTime also works: check does not read it)",
        False,
    )
    assert programs == (
        False,
        "slurm.conf names no SuspendProgram and no ResumeProgram: slurmctld does not power nodes up or down "
        "without both, so NodeSet(s) slurm/gpu, slurm/cpu get no pods for pending jobs",
        "add `SuspendProgram=/bin/true` and `ResumeProgram=/bin/true` to slurm.conf (the syncer does the "
        f"work; any program that exits 0 will do), {FIX_RECONFIGURE}",
        False,
    )


def test_one_program_missing_names_only_that_one() -> None:
    only_suspend = msgspec.structs.replace(conf("power-off"), suspend_program="/bin/true")
    _, what, fix, _ = power_checks(only_suspend, [GPU], "")[1]
    assert what.startswith("slurm.conf names no ResumeProgram: ")
    assert fix.startswith("add `ResumeProgram=/bin/true` to slurm.conf")


def test_the_items_that_pass_are_ok_with_no_fix_and_no_warning() -> None:
    lines = power_checks(conf("power-on"), [GPU], "API v0.0.45")[:4]
    assert [(ok, fix, warn) for ok, _, fix, warn in lines] == [(True, "", False)] * 4


def test_suspend_time_of_one_second_is_on() -> None:
    one = msgspec.structs.replace(conf("power-on"), suspend_time=1)
    assert power_checks(one, [GPU], "")[0] == (
        True,
        "SuspendTime=1: slurmctld powers an idle member down after 1 s",
        "",
        False,
    )


@pytest.mark.parametrize(("seconds", "short"), [(299, True), (300, False), (900, False)])
def test_a_resume_timeout_under_300_s_is_a_warning_saying_why(seconds: int, short: bool) -> None:
    changed = msgspec.structs.replace(conf("power-on"), resume_timeout=seconds)
    line = power_checks(changed, [GPU], "")[2]
    what = f"ResumeTimeout={seconds}: a member's slurmd must register within {seconds} s of its power-up"
    if not short:
        assert line == (True, what, "", False)
        return
    assert line == (
        True,
        f"{what}, or slurmctld marks it DOWN and requeues its job; a pod that waits for a new machine or "
        "pulls a large image takes longer",
        "set `ResumeTimeout=900` (longer than your cluster autoscaler takes to add a machine, plus the image "
        f"pull) in slurm.conf, {FIX_RECONFIGURE}",
        True,
    )


def test_an_exclusion_fails_and_its_fix_says_which_members_may_stay_excluded() -> None:
    excluded = msgspec.structs.replace(
        conf("power-on"), suspend_exc_nodes=["gpu-[0-3]"], suspend_exc_parts=[], suspend_exc_states=[]
    )
    assert power_checks(excluded, [GPU], "")[3] == (
        False,
        "SuspendExcNodes entry gpu-[0-3] covers members of NodeSet slurm/gpu: slurmctld never powers them "
        "down (nor up from powered down)",
        "remove them from slurm.conf's SuspendExc* settings (members that must stay up: "
        f"spec.power.minReplicas, whose members SuspendExcNodes may name), {FIX_RECONFIGURE}",
        False,
    )


def test_an_exclusion_check_cannot_read_is_skipped_and_the_entries_after_it_still_count() -> None:
    excluded = msgspec.structs.replace(
        conf("power-on"), suspend_exc_nodes=["gpu-[1", "gpu-2"], suspend_exc_parts=[], suspend_exc_states=[]
    )
    assert power_checks(excluded, [GPU], "")[3][1].startswith("SuspendExcNodes entry gpu-2 covers")


@pytest.mark.parametrize(
    ("entry", "covers"),
    [
        ("gpu-1:2", True),  # a count: keep 2 of gpu-1 up
        ("gpu-1:x", False),  # no count: the name is `gpu-1:x`, no member's
        ("gpu-[1-2]:x:2", False),  # only the last `:N` is a count: the names are gpu-1:x and gpu-2:x
    ],
)
def test_only_a_trailing_colon_and_digits_is_an_exclusions_count(entry: str, covers: bool) -> None:
    excluded = msgspec.structs.replace(
        conf("power-on"), suspend_exc_nodes=[entry], suspend_exc_parts=[], suspend_exc_states=[]
    )
    assert power_checks(excluded, [GPU], "")[3][0] is not covers


def test_without_conf_the_warning_names_every_nodeset_and_what_is_not_known() -> None:
    [line] = power_checks(None, [GPU, CPU], "API v0.0.42 (Slurm 24.11.5)")
    assert line == (
        True,
        "power saving for NodeSet(s) slurm/gpu, slurm/cpu: not checked, API v0.0.42 (Slurm 24.11.5) has no "
        "GET /conf (Slurm 26.05+): SuspendTime, ResumeTimeout, SuspendProgram, ResumeProgram and SuspendExc* "
        "are unknown",
        "check by hand: `scontrol show config | grep -E '^(Suspend|Resume)'` must show SuspendTime set (not "
        "NONE), SuspendProgram and ResumeProgram named, and no SuspendExc* covering members; `scontrol show "
        "config | grep PrologSlurmctld` should name slurm-syncer-prolog (jobs on powered-up members start "
        "once they are ready, not at slurmctld's 30 s check)",
        True,
    )


def test_a_nodeset_without_a_partition_reads_as_the_empty_partition() -> None:
    listed = [{"metadata": {"namespace": "slurm", "name": "gpu"}, "spec": {"power": {}}}]
    assert power_nodesets(listed) == [PowerNodeSet("slurm", "gpu", "", None, 0)]


def test_the_prolog_is_recognised_by_its_file_name_with_or_without_a_directory() -> None:
    bare = msgspec.structs.replace(conf("prolog"), prolog_slurmctld=["slurm-syncer-prolog"])
    assert prolog_line(bare)[1].startswith("PrologSlurmctld=slurm-syncer-prolog: ")


def test_other_prologs_are_all_named_when_none_is_ours() -> None:
    others = msgspec.structs.replace(conf("prolog"), prolog_slurmctld=["/a/site", "/b/other"])
    assert prolog_line(others)[1].startswith("PrologSlurmctld=/a/site,/b/other does not name slurm-syncer's")


@pytest.mark.parametrize("timeout", [1, 300])
def test_a_prolog_timeout_of_1_to_300_s_warns_that_a_longer_wait_requeues_the_job(timeout: int) -> None:
    changed = msgspec.structs.replace(conf("prolog"), prolog_timeout=timeout)
    assert prolog_line(changed) == (
        True,
        f"PrologSlurmctld=/sbx/etc/slurm-syncer-prolog, but PrologTimeout={timeout} s: a wait for a member "
        "longer than that ends the prolog as failed and slurmctld requeues the job",
        f"set SLURM_SYNCER_PROLOG_WAIT below {timeout} in slurm-syncer-prolog.env, or raise PrologTimeout",
        True,
    )
