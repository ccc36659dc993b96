"""Maintenance windows -> Slurm MAINT reservations (docs/contract.md "Maintenance windows"), against the
real Slurm sandbox with its real slurmd and real jobs. Node annotations and conditions are core objects:
these run on the Kubernetes API emulator only."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from datetime import UTC, datetime

import pytest

from syncer.app.check_cmd import check_slurm
from syncer.controllers.maintenance.plan import (
    PREFIX,
    RULE_END_BEFORE_START,
    RULE_PAST,
    RULE_TOO_LONG,
    RULE_UNPARSEABLE,
    MaintenanceCondition,
    MaintenanceOptions,
)
from syncer.model.keys import Keys
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.models import Reservation
from syncer.testing.sandbox import SandboxError
from tests.e2e.rig import NAMESPACE, Rig, condition, fresh_slurm_nodes, get, running_syncer, sample, settled
from tests.fixtures.slurm import SELECTED, served_only
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
WRITES = "v0.0.43" in SELECTED.api_versions  # Slurm 25.05+: reservations can be created over REST
needs_writes = pytest.mark.only_where(WRITES, "Slurm 25.05+ creates reservations over REST")
needs_old = pytest.mark.only_where(not WRITES, "Slurm 24.11 cannot create reservations over REST")


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def annotate(rig: Rig, node: str, value: str | None) -> None:
    rig.kube.patch("", "v1", "nodes", node, {"metadata": {"annotations": {Keys.MAINTENANCE_WINDOW: value}}})


async def ours(rig: Rig) -> list[Reservation]:
    return [r for r in await rig.reader.list_reservations() if r.name.startswith(PREFIX)]


def reasons(rig: Rig, node: str) -> list[str]:
    return [e["reason"] for e in rig.events_for(node)]


def job_state(rig: Rig, job: str) -> str:
    """`STATE REASON` of one job as squeue shows it."""
    return rig.sandbox.run("squeue", "-h", "-j", job, "-o", "%T %r").stdout.strip()


def submit(rig: Rig, minutes: int, seconds: int) -> str:
    out = rig.sandbox.run(
        "sbatch", "--parsable", "--no-requeue", "-w", rig.sandbox.real_node, f"--time={minutes}",
        "--wrap", f"sleep {seconds}", check=True,
    ).stdout  # fmt: skip
    return out.strip().split(";")[0]


@needs_writes
async def test_a_window_keeps_long_jobs_off_and_short_ones_on_and_its_removal_frees_the_node(rig: Rig):
    real = rig.sandbox.real_node
    node = rig.bind_node(real)
    # foreign reservations: an admin's, and one that only looks like ours (no owner tag): both survive
    foreign = ("admin-maint", f"{PREFIX}by-hand")
    for name in foreign:
        rig.scontrol(
            "create", "reservation", f"reservationname={name}", "starttime=now+2hours", "duration=60",
            f"nodes={fresh_slurm_nodes(1)[0]}", "flags=maint", "users=root",
        )  # fmt: skip
    jobs: list[str] = []
    try:
        async with running_syncer(rig) as service:
            start = time.time() + 240  # a few minutes ahead: a 10-minute job would run into it
            window = f"{iso(start)}/PT1H"
            annotate(rig, node, window)

            async def reserved() -> bool:
                return any(r.nodes == (real,) for r in await ours(rig))

            await wait_for(reserved, 20, what="the reservation over the real node")
            [mine] = [r for r in await ours(rig) if r.nodes == (real,)]
            assert {"MAINT", "IGNORE_JOBS"} <= mine.flags
            assert (mine.start, mine.end) == (int(start), int(start) + 3600)
            await wait_for(
                lambda: (c := condition(rig.node_obj(node), Keys.CONDITION_MAINTENANCE)) is not None
                and c["status"] == "True" and mine.name in c["message"],
                10, what="SlurmMaintenanceReserved on the Node",
            )  # fmt: skip
            assert "MaintenanceReservationCreated" in reasons(rig, node)

            jobs.append(long := submit(rig, minutes=10, seconds=600))
            jobs.append(short := submit(rig, minutes=1, seconds=20))
            # backfill places the short job (bf_interval=5 in the sandbox); the long one would overlap
            await wait_for(
                lambda: job_state(rig, short).startswith("RUNNING"), 60, what="the 1-minute job runs"
            )
            # its reason names the nodes' availability (Slurm: "ReqNodeNotAvail, May be reserved for ...")
            await wait_for(
                lambda: any(word in job_state(rig, long) for word in ("ReqNodeNotAvail", "Reserv")),
                30, what="the 10-minute job's pending reason",
            )  # fmt: skip
            assert job_state(rig, long).startswith("PENDING"), job_state(rig, long)

            # the condition counts the short job: it runs, and ends before the window starts
            def counted() -> bool:
                cond = condition(rig.node_obj(node), Keys.CONDITION_MAINTENANCE) or {}
                return "0 running job(s)" in cond.get("message", "")

            await wait_for(counted, 10, what="the job count in the condition")

            annotate(rig, node, None)  # the window is withdrawn

            async def gone() -> bool:
                return not any(r.nodes == (real,) for r in await ours(rig))

            await wait_for(gone, 20, what="the reservation removed")
            await wait_for(
                lambda: job_state(rig, long).startswith("RUNNING"), 120, what="the long job starts"
            )
            await wait_for(
                lambda: "MaintenanceReservationRemoved" in reasons(rig, node), 10, what="the removal's Event"
            )
            assert (condition(rig.node_obj(node), Keys.CONDITION_MAINTENANCE) or {}).get("status") == "False"
            _status, text = await get(service, "/metrics")
            for kind in ("reservation_create", "reservation_delete"):
                assert (sample(text, "slurm_syncer_actions_total", kind=kind, result="ok") or 0) >= 1, kind
        names = {r.name for r in await rig.reader.list_reservations()}
        assert set(foreign) <= names, names
    finally:
        for job in jobs:
            rig.sandbox.run("scancel", job)
        for name in foreign:
            with contextlib.suppress(SandboxError):
                rig.scontrol("delete", f"reservationname={name}")


@needs_writes
async def test_shared_window_one_reservation_changed_window_updates_it_restart_writes_nothing(rig: Rig):
    names = fresh_slurm_nodes(3)
    nodes = [rig.bind_node(n) for n in names]
    first = f"{iso(time.time() + 3600)}/PT2H"
    moved = f"{iso(time.time() + 7200)}/{iso(time.time() + 9000)}"
    try:
        async with running_syncer(rig):
            for node in nodes:
                annotate(rig, node, first)

            async def one_over_all() -> bool:
                found = [r for r in await ours(rig) if set(r.nodes) & set(names)]
                return len(found) == 1 and found[0].nodes == tuple(sorted(names))

            await wait_for(one_over_all, 20, what="one reservation for the shared window")
            [before] = [r for r in await ours(rig) if set(r.nodes) & set(names)]
            for node in nodes:
                annotate(rig, node, moved)

            async def moved_all() -> bool:
                found = [r for r in await ours(rig) if set(r.nodes) & set(names)]
                return (
                    len(found) == 1
                    and found[0].nodes == tuple(sorted(names))
                    and found[0].start > before.start
                )

            await wait_for(moved_all, 20, what="the reservation following the changed window")
            assert "MaintenanceReservationUpdated" in reasons(
                rig, nodes[-1]
            ) or "MaintenanceReservationCreated" in reasons(rig, nodes[-1])
        # a restart while Slurm agrees: not one reservation write
        async with running_syncer(rig) as again:
            await settled(again, lambda: again.maintenance.summary.reserved >= 3, "the windows")
            await again.maintenance.runner.queue.wait_idle()
            writes = {k: v for k, v in again.slurm.stats.requests.items() if k[0].startswith("reservation_")}
            assert writes == {}, writes
    finally:
        for node in nodes:
            annotate(rig, node, None)
        for r in await ours(rig):
            if set(r.nodes) & set(names):
                await rig.reader.delete_reservation(r.name)


async def test_bad_windows_get_an_event_naming_the_value_and_the_rule_and_no_write(rig: Rig):
    now = time.time()
    cases = {
        "tomorrow morning": RULE_UNPARSEABLE,
        f"{iso(now + 7200)}/{iso(now + 3600)}": RULE_END_BEFORE_START,
        f"{iso(now + 3600)}/P8D": RULE_TOO_LONG,
        f"{iso(now - 7200)}/{iso(now - 3600)}": RULE_PAST,
    }
    names = fresh_slurm_nodes(len(cases))
    nodes = [rig.bind_node(n) for n in names]
    async with running_syncer(rig) as service:
        for node, value in zip(nodes, cases, strict=True):
            annotate(rig, node, value)
        for node, (value, rule) in zip(nodes, cases.items(), strict=True):

            def told(node: str = node, value: str = value, rule: str = rule) -> bool:
                return any(
                    e["reason"] == "MaintenanceWindowInvalid"
                    and repr(value) in e["message"]
                    and rule in e["message"]
                    for e in rig.events_for(node)
                )

            def shown(node: str = node) -> bool:
                cond = condition(rig.node_obj(node), Keys.CONDITION_MAINTENANCE) or {}
                return (cond.get("status"), cond.get("reason")) == ("False", "InvalidWindow")

            await wait_for(told, 20, what=f"the Event for {value!r}")
            await wait_for(shown, 10, what=f"the condition for {value!r}")
        await service.maintenance.runner.queue.wait_idle()
        assert service.maintenance.summary.invalid >= len(cases)
        assert not [r for r in await rig.reader.list_reservations() if set(r.nodes) & set(names)]
        assert not any(k[0] == "reservation_update" for k in service.slurm.stats.requests)
    for node in nodes:
        annotate(rig, node, None)


@needs_old
async def test_on_slurm_24_11_a_window_is_reported_as_needing_25_05(rig: Rig):
    name = fresh_slurm_nodes(1)[0]
    node = rig.bind_node(name)
    async with running_syncer(rig) as service:
        annotate(rig, node, f"{iso(time.time() + 3600)}/PT1H")

        def told() -> bool:
            return any(
                e["reason"] == "MaintenanceWindowUnsupported" and "Slurm 25.05+" in e["message"]
                for e in rig.events_for(node)
            )

        def shown() -> bool:
            cond = condition(rig.node_obj(node), Keys.CONDITION_MAINTENANCE) or {}
            return (cond.get("status"), cond.get("reason")) == ("False", "SlurmTooOld")

        await wait_for(told, 20, what="the 'needs 25.05+' Event")
        await wait_for(shown, 10, what="the condition saying why")
        _status, text = await get(service, "/metrics")
        assert sample(text, "slurm_syncer_maintenance_windows", state="unsupported") == 1
        assert (
            sample(text, "slurm_syncer_actions_total", kind="reservation_create", result="unsupported") == 1
        )
    annotate(rig, node, None)


@needs_writes
async def test_a_window_too_old_for_slurmrestd_is_reserved_once_it_serves_a_version_that_can(rig: Rig):
    """slurmrestd serving v0.0.42 only (24.11's REST: no reservation writes), then replaced by one serving
    v0.0.43+ too (an upgrade): the syncer, not restarted, reserves the window; no resync comes within the test
    (an hour away)."""
    node = rig.bind_node(fresh_slurm_nodes(1)[0])

    def reason() -> str:
        return str((condition(rig.node_obj(node), Keys.CONDITION_MAINTENANCE) or {}).get("reason", ""))

    async def reserved() -> int:
        return len(await ours(rig))

    try:
        async with served_only(rig.sandbox, ["v0.0.42"]), running_syncer(rig, resync_s=3600.0) as service:
            annotate(rig, node, f"{iso(time.time() + 3600)}/PT1H")
            await wait_for(lambda: reason() == "SlurmTooOld", 20, what="the window refused as too old")
            await asyncio.to_thread(rig.sandbox.stop_slurmrestd)
            await wait_for(lambda: bool(service.slurm.follow.why), 10, what="slurmrestd seen away")
            await asyncio.to_thread(rig.sandbox.start_slurmrestd)  # every version: reservations from v0.0.43
            await wait_for(lambda: reason() == "Reserved", 20, what="the window reserved")
            assert await reserved() == 1
            annotate(rig, node, None)
            await wait_for(lambda: _zero(reserved()), 20, what="its reservation removed with the window")
    finally:
        annotate(rig, node, None)


async def _zero(count: Awaitable[int]) -> bool:
    return await count == 0


@needs_writes
async def test_a_condition_announces_a_window_one_under_way_starts_now_and_dry_run_writes_nothing(rig: Rig):
    name = fresh_slurm_nodes(1)[0]
    node = rig.bind_node(name)
    deadline = time.time() + 1800  # Nebius: "SLA deadline is ..."; with -1h the window is under way

    def announce(status: str) -> None:
        conditions = [
            c for c in rig.node_obj(node)["status"]["conditions"] if c["type"] != "NebiusMaintenanceScheduled"
        ]
        conditions.append(
            {
                "type": "NebiusMaintenanceScheduled", "status": status, "reason": "MaintenanceScheduled",
                "message": f"Node scheduled for urgent maintenance, SLA deadline is {iso(deadline)}",
                "lastTransitionTime": iso(time.time()),
            }
        )  # fmt: skip
        rig.kube.patch("", "v1", "nodes", node, {"status": {"conditions": conditions}}, subresource="status")

    condition_option = MaintenanceCondition("NebiusMaintenanceScheduled", -3600)
    options = MaintenanceOptions(conditions=(condition_option,), default_duration_s=7200)
    announce("True")
    async with running_syncer(rig, maintenance=options, dry_run=True) as dry:

        async def would_create() -> bool:
            _status, text = await get(dry, "/metrics")
            return (
                sample(text, "slurm_syncer_actions_total", kind="reservation_create", result="dry_run") or 0
            ) >= 1

        await wait_for(would_create, 20, what="the dry-run's would-be reservation")
        assert not [r for r in await ours(rig) if name in r.nodes]
        assert not any(k[0] == "reservation_update" for k in dry.slurm.stats.requests)
    try:
        async with running_syncer(rig, maintenance=options):
            before = time.time()

            async def reserved_now() -> bool:
                return any(name in r.nodes for r in await ours(rig))

            await wait_for(reserved_now, 20, what="the reservation from the condition")
            [mine] = [r for r in await ours(rig) if name in r.nodes]
            # under way (deadline - 1 h is past): it starts now, and ends the default duration after
            assert before - 5 <= mine.start <= time.time() + 1
            assert mine.end == int(deadline) - 3600 + 7200
            announce("False")

            async def gone() -> bool:
                return not any(name in r.nodes for r in await ours(rig))

            await wait_for(gone, 20, what="the reservation removed when the condition turns False")
    finally:
        for r in await ours(rig):
            if name in r.nodes:
                await rig.reader.delete_reservation(r.name)


async def test_check_says_whether_maintenance_windows_can_work(rig: Rig):
    client = SlurmClient(rig.sandbox.rest_url, TokenFile(rig.sandbox.token_file))
    try:
        items = await check_slurm(client)
    finally:
        await client.close()
    warned = [i for i in items if i.warn and "maintenance windows need Slurm 25.05+" in i.what]
    assert len(warned) == (0 if WRITES else 1), items
    assert all(i.ok for i in warned)  # a note, not a failure: everything else still works


@needs_writes
async def test_a_window_that_ends_removes_its_reservation_without_a_warning(rig: Rig):
    name = fresh_slurm_nodes(1)[0]
    node = rig.bind_node(name)
    ends = time.time() + 8
    async with running_syncer(rig):
        annotate(rig, node, f"{iso(ends - 3600)}/{iso(ends)}")  # under way: reserved from now

        def state() -> tuple[str | None, str | None]:
            cond = condition(rig.node_obj(node), Keys.CONDITION_MAINTENANCE) or {}
            return cond.get("status"), cond.get("reason")

        await wait_for(lambda: state() == ("True", "Reserved"), 20, what="the window reserved")
        await wait_for(lambda: state() == ("False", "WindowEnded"), 30, what="the window ended")

        async def gone() -> bool:
            return not any(name in r.nodes for r in await ours(rig))

        await wait_for(gone, 10, what="no reservation left")
        assert "MaintenanceWindowInvalid" not in reasons(rig, node)
    annotate(rig, node, None)


@needs_writes
async def test_a_running_job_does_not_block_the_reservation_and_is_counted(rig: Rig):
    real = rig.sandbox.real_node
    node = rig.bind_node(real)
    job = submit(rig, minutes=10, seconds=600)  # runs now, and would still run 4 minutes from now
    try:
        await wait_for(lambda: job_state(rig, job).startswith("RUNNING"), 60, what="the job running")
        async with running_syncer(rig):
            annotate(rig, node, f"{iso(time.time() + 240)}/PT1H")

            def counted() -> bool:
                cond = condition(rig.node_obj(node), Keys.CONDITION_MAINTENANCE) or {}
                return cond.get("status") == "True" and "1 running job(s)" in cond.get("message", "")

            # IGNORE_JOBS: Slurm takes the reservation over a node with a running job
            await wait_for(counted, 30, what="the reservation, counting the job that runs into it")
            assert job_state(rig, job).startswith("RUNNING")  # a reservation drains nothing
            annotate(rig, node, None)

            async def gone() -> bool:
                return not any(r.nodes == (real,) for r in await ours(rig))

            await wait_for(gone, 20, what="the reservation removed")
    finally:
        rig.sandbox.run("scancel", job)


@needs_writes
async def test_a_pod_bound_slurm_node_follows_its_pods_node(rig: Rig):
    name = fresh_slurm_nodes(1)[0]
    node, _pod = rig.bind_pod(name)  # slurmd in a pod on that Node
    try:
        async with running_syncer(rig):
            annotate(rig, node, f"{iso(time.time() + 3600)}/PT1H")

            async def reserved() -> bool:
                return any(r.nodes == (name,) for r in await ours(rig))

            await wait_for(reserved, 20, what="the reservation over the pod's Slurm node")
            unlabel = {"metadata": {"labels": {Keys.NODE_NAME_LABEL: None}}}
            rig.kube.patch("", "v1", "pods", f"slurmd-{name}", unlabel, namespace=NAMESPACE)  # unbound now

            async def gone() -> bool:
                return not any(name in r.nodes for r in await ours(rig))

            await wait_for(gone, 20, what="the reservation gone with the binding")
    finally:
        annotate(rig, node, None)
