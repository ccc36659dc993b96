"""`check`'s power-saving items: what slurmctld's configuration must say for NodeSets whose members Slurm
powers up and down (`spec.power`, issue 39). Pure: slurmctld's configuration (`GET /conf`, Slurm 26.05)
and the NodeSets in, `(ok, what, fix, warn)` lines out (check_cmd makes them items).

Only where a NodeSet has `spec.power`: without one, `SuspendTime=NONE` is the normal, right setting and an
item about it would be noise. Slurm does nothing for such members unless `SuspendTime` is set and both
programs are named (slurmctld disables power saving without them); the syncer does the real work, so
`/bin/true` is enough. `SuspendExc*` settings that cover members keep them powered up for good.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from syncer.slurm.hostlist import expand
from syncer.slurm.models import SlurmctldConf, unwrap

Line = tuple[bool, str, str, bool]  # ok, what, fix, warn: the fields of check_cmd.Item
RECONFIGURE = "then run `scontrol reconfigure`"
# Members are created over REST (POST /new/node/: DYNAMIC_NORM) as CLOUD nodes: excluding either state
# excludes every member.
MEMBER_STATES = ("CLOUD", "DYNAMIC_NORM")
# Below this a member whose pod waits for a new machine (a cluster autoscaler takes minutes) or pulls a
# large image is marked DOWN by slurmctld before its slurmd registers.
SHORT_RESUME_TIMEOUT_S = 300


@dataclass(frozen=True)
class PowerNodeSet:
    namespace: str
    name: str
    partition: str = ""  # spec.slurm.partition
    ceiling: int | None = None  # spec.power.maxReplicas when it is a count: members <name>-0 .. -(ceiling-1)
    floor: int = 0  # spec.power.minReplicas when it is a count: members below it always have a pod

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def powered_by_slurm(self, node: str) -> bool:
        """A member Slurm powers up and down: at or above the floor (floor members may be excluded from
        power saving, docs/nodeset.md) and below the ceiling."""
        match = re.fullmatch(re.escape(self.name) + r"-(\d+)", node)
        if match is None:
            return False
        index = int(match.group(1))
        return index >= self.floor and (self.ceiling is None or index < self.ceiling)


def power_nodesets(listed: list[dict[str, Any]]) -> list[PowerNodeSet]:
    """The NodeSets with `spec.power` (its presence counts here; its shape is the reconciler's to judge)."""
    found = []
    for item in listed:
        spec = item.get("spec") or {}
        power = spec.get("power")
        if power is None:
            continue
        ceiling = power.get("maxReplicas") if isinstance(power, dict) else None
        floor = power.get("minReplicas") if isinstance(power, dict) else None
        meta = item.get("metadata") or {}
        found.append(
            PowerNodeSet(
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                partition=str((spec.get("slurm") or {}).get("partition") or ""),
                ceiling=ceiling if _count(ceiling) else None,
                floor=floor if _count(floor) else 0,
            )
        )
    return found


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def power_checks(conf: SlurmctldConf | None, nodesets: list[PowerNodeSet], api: str) -> list[Line]:
    """The power-saving items for `nodesets` (none when the list is empty); `api` names the REST version."""
    if not nodesets:
        return []
    names = ", ".join(map(str, nodesets))
    if conf is None:
        return [
            (
                True,
                f"power saving for NodeSet(s) {names}: not checked, {api} has no GET /conf (Slurm 26.05+): "
                "SuspendTime, ResumeTimeout, SuspendProgram, ResumeProgram and SuspendExc* are unknown",
                "check by hand: `scontrol show config | grep -E '^(Suspend|Resume)'` must show SuspendTime "
                "set (not NONE), SuspendProgram and ResumeProgram named, and no SuspendExc* covering "
                f"members; `scontrol show config | grep PrologSlurmctld` should name {PROLOG} (jobs on "
                "powered-up members start once they are ready, not at slurmctld's 30 s check)",
                True,
            )
        ]
    return [
        _suspend_time(conf, names),
        _programs(conf, names),
        _resume_timeout(conf),
        *(_exclusions(conf, nodeset) for nodeset in nodesets),
        _prolog(conf),
    ]


PROLOG = "slurm-syncer-prolog"  # the script's name as `slurm-syncer prolog` ships it (syncer/app/files)
PROLOG_WAIT_S = 300  # its default SLURM_SYNCER_PROLOG_WAIT
PROLOG_FIX = (
    f"install the script `slurm-syncer prolog` prints where slurmctld runs (with {PROLOG}.env beside it "
    "naming SLURM_SYNCER_URL, the syncer's Service), add `PrologSlurmctld=<its path>` to slurm.conf, "
    f"{RECONFIGURE} (docs/operations.md)"
)


def _prolog(conf: SlurmctldConf) -> Line:
    """slurm-syncer's PrologSlurmctld (issue 47): without it a job on a member Slurm powers up starts at
    slurmctld's 30 s check, up to 30 s after the member is ready. Recognised by its file name: a site's own
    PrologSlurmctld that calls it is not seen (the warning says so)."""
    named = conf.prolog_slurmctld
    programs = [p for p in (named.split(",") if isinstance(named, str) else named) if p.strip()]
    ours = [p for p in programs if p.strip().rsplit("/", 1)[-1].startswith(PROLOG)]
    if not ours:
        shown = (
            f"PrologSlurmctld={','.join(programs)} does not name" if programs else "no PrologSlurmctld runs"
        )
        return (
            True,
            f"{shown} slurm-syncer's prolog: a job on a member Slurm powers up starts at slurmctld's "
            "periodic check, up to 30 s after the member's slurmd registered (if your own prolog calls it, "
            "ignore this)",
            PROLOG_FIX,
            True,
        )
    timeout = unwrap(conf.prolog_timeout)
    if 0 < timeout <= PROLOG_WAIT_S:
        return (
            True,
            f"PrologSlurmctld={ours[0]}, but PrologTimeout={timeout} s: a wait for a member longer than that "
            "ends the prolog as failed and slurmctld requeues the job",
            f"set SLURM_SYNCER_PROLOG_WAIT below {timeout} in {PROLOG}.env, or raise PrologTimeout",
            True,
        )
    return (
        True,
        f"PrologSlurmctld={ours[0]}: a job on a member Slurm powers up starts once the member is ready",
        "",
        False,
    )


def _suspend_time(conf: SlurmctldConf, names: str) -> Line:
    seconds = unwrap(conf.suspend_time)
    if seconds > 0:
        return (
            True,
            f"SuspendTime={seconds}: slurmctld powers an idle member down after {seconds} s",
            "",
            False,
        )
    return (
        False,
        f"SuspendTime is NONE: slurmctld never powers an idle node down, so NodeSet(s) {names} never "
        "shrink (their idle members keep their pods)",
        f"add `SuspendTime=300` (idle seconds before a member's pod goes) to slurm.conf, {RECONFIGURE} "
        "(a partition's own SuspendTime also works: check does not read it)",
        False,
    )


def _programs(conf: SlurmctldConf, names: str) -> Line:
    missing = [
        k
        for k, v in (("SuspendProgram", conf.suspend_program), ("ResumeProgram", conf.resume_program))
        if not v
    ]
    if not missing:
        return (
            True,
            f"SuspendProgram={conf.suspend_program}, ResumeProgram={conf.resume_program} "
            "(the syncer creates and deletes the pods; the programs need only exit 0)",
            "",
            False,
        )
    return (
        False,
        f"slurm.conf names no {' and no '.join(missing)}: slurmctld does not power nodes up or down "
        f"without both, so NodeSet(s) {names} get no pods for pending jobs",
        f"add {' and '.join(f'`{k}=/bin/true`' for k in missing)} to slurm.conf (the syncer does the work; "
        f"any program that exits 0 will do), {RECONFIGURE}",
        False,
    )


def _resume_timeout(conf: SlurmctldConf) -> Line:
    seconds = conf.resume_timeout
    what = f"ResumeTimeout={seconds}: a member's slurmd must register within {seconds} s of its power-up"
    if seconds >= SHORT_RESUME_TIMEOUT_S:
        return (True, what, "", False)
    return (
        True,
        f"{what}, or slurmctld marks it DOWN and requeues its job; a pod that waits for a new machine or "
        "pulls a large image takes longer",
        f"set `ResumeTimeout=900` (longer than your cluster autoscaler takes to add a machine, plus the "
        f"image pull) in slurm.conf, {RECONFIGURE}",
        True,
    )


def _exclusions(conf: SlurmctldConf, nodeset: PowerNodeSet) -> Line:
    covering = []
    for entry in conf.suspend_exc_nodes:
        hostlist = entry.rsplit(":", 1)[0] if re.search(r":\d+$", entry) else entry  # `:N`: keep N of them up
        try:
            names = expand(hostlist)
        except ValueError:
            continue
        if any(nodeset.powered_by_slurm(name) for name in names):
            covering.append(f"SuspendExcNodes entry {entry}")
    if nodeset.partition and nodeset.partition in conf.suspend_exc_parts:
        covering.append(f"SuspendExcParts entry {nodeset.partition} (the NodeSet's partition)")
    covering += [f"SuspendExcStates entry {s}" for s in conf.suspend_exc_states if s.upper() in MEMBER_STATES]
    if not covering:
        return (
            True,
            f"no SuspendExcNodes, SuspendExcParts or SuspendExcStates covers NodeSet {nodeset}'s members",
            "",
            False,
        )
    return (
        False,
        f"{'; '.join(covering)} covers members of NodeSet {nodeset}: slurmctld never powers them down "
        "(nor up from powered down)",
        "remove them from slurm.conf's SuspendExc* settings (members that must stay up: "
        f"spec.power.minReplicas, whose members SuspendExcNodes may name), {RECONFIGURE}",
        False,
    )
