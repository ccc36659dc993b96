"""SlurmPartition CRs -> Slurm partitions (docs/partitions.md), against the real Slurm sandbox with its real
slurmd and real jobs, the CRs on the Kubernetes API emulator (the CRD's schema and CEL rules on the real API
server: tests/integration/test_partition_crd_real.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, MutableMapping
from typing import Any

import pytest

from syncer.app.check_cmd import check_partitions, listed
from syncer.app.service import SyncerService
from syncer.controllers.partitions.controller import (
    DELETE_REFUSED,
    EVENT_CREATED,
    EVENT_DELETED,
    EVENT_UPDATED,
    PATH,
)
from syncer.controllers.partitions.options import PartitionOptions
from syncer.controllers.partitions.plan import CONFLICT, INVALID, PRECONDITION, READY, UNSUPPORTED
from syncer.controllers.partitions.recheck import TELL_EVERY_S, UNREACHABLE_RETRY_S
from syncer.kube.client import KubeClient
from syncer.model.cluster import partition_finalizer
from syncer.model.keys import Keys
from syncer.slurm.partitions import PartitionState
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.kubeapi.api import rfc3339
from syncer.testing.sandbox import SandboxError
from tests.e2e.rig import FAST, NAMESPACE, Rig, condition, fresh_slurm_nodes, get, running_syncer, sample
from tests.fixtures.slurm import API_VERSIONS, SELECTED, served_only
from tests.helpers import captured_logs, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
WRITES = "v0.0.45" in SELECTED.api_versions  # Slurm 26.05+: partitions are written over REST
needs_writes = pytest.mark.only_where(WRITES, "Slurm 26.05+ writes partitions over REST")
needs_old = pytest.mark.only_where(not WRITES, "before 26.05 partitions are read-only over REST")
GROUP, VERSION, PLURAL = "slurm-syncer.dev", "v1alpha1", "slurmpartitions"
ON = PartitionOptions(enabled=True)
KEEP = "ReconfigFlags=KeepPartInfo\n"


def create_cr(rig: Rig, name: str, spec: dict[str, Any]) -> None:
    rig.kube.create(GROUP, VERSION, PLURAL, {"metadata": {"name": name}, "spec": spec})


def cr(rig: Rig, name: str) -> dict[str, Any] | None:
    return rig.kube.get(GROUP, VERSION, PLURAL, name)


def patch_cr(rig: Rig, name: str, spec: dict[str, Any]) -> None:
    rig.kube.patch(GROUP, VERSION, PLURAL, name, {"spec": spec})


def delete_cr(rig: Rig, name: str) -> None:
    rig.kube.api.delete(rig.kube.api.resource(GROUP, VERSION, PLURAL), "", name)


def ready(rig: Rig, name: str) -> dict[str, Any]:
    obj = cr(rig, name)
    return (condition(obj, "Ready") or {}) if obj else {}


def reason_is(rig: Rig, name: str, reason: str) -> Callable[[], bool]:
    return lambda: ready(rig, name).get("reason") == reason


def reasons(rig: Rig, name: str) -> list[str]:
    return [e["reason"] for e in rig.events_for(name) if e["involvedObject"]["kind"] == "SlurmPartition"]


def messages(rig: Rig, name: str) -> list[str]:
    return [e["message"] for e in rig.events_for(name) if e["involvedObject"]["kind"] == "SlurmPartition"]


async def partition(rig: Rig, name: str) -> PartitionState | None:
    return next((p for p in await rig.reader.partition_states() if p.name == name), None)


def job_state(rig: Rig, job: str) -> str:
    return rig.sandbox.run("squeue", "-h", "-j", job, "-o", "%T %r").stdout.strip()


def end_state(rig: Rig, job: str) -> str:
    """COMPLETED, NODE_FAIL, ...: how the job ended, while slurmctld still holds it (MinJobAge=30), else ""
    (the sandbox has no accounting: sacct prints nothing)."""
    shown = rig.sandbox.run("scontrol", "show", "job", job).stdout
    state = next((w.split("=", 1)[1] for w in shown.split() if w.startswith("JobState=")), "")
    return "" if state in ("", "RUNNING", "PENDING", "CONFIGURING", "COMPLETING") else state


def ended(rig: Rig, job: str) -> Callable[[], bool]:
    return lambda: end_state(rig, job) != ""


def submit(rig: Rig, partition_name: str, seconds: int, *, wrap: str | None = None) -> tuple[str, str]:
    """(job id, stderr): sbatch into the partition on the real node; `wrap` replaces `sleep seconds`."""
    out = rig.sandbox.run(
        "sbatch", "--parsable", "--no-requeue", "-p", partition_name, "-w", rig.sandbox.real_node,
        "--time=5", "--wrap", wrap or f"sleep {seconds}",
    )  # fmt: skip
    return out.stdout.strip().split(";")[0], out.stderr


@contextlib.contextmanager
def until_told(rig: Rig, name: str) -> Iterator[tuple[str, Callable[[], None]]]:
    """(the `--wrap` of a job that ends when told, the call that tells it): a file in the sandbox's work
    directory (the jobs' working directory), not a time: on a busy machine a timed job could end before
    the test has seen what must happen while it runs."""
    done = rig.sandbox.directory / "work" / f"{name}.done"
    done.unlink(missing_ok=True)
    try:
        yield f"while [ ! -e {name}.done ]; do sleep 0.2; done", done.touch
    finally:
        done.touch()  # a test that failed halfway leaves no job behind


def label(rig: Rig, node: str, labels: dict[str, str | None]) -> None:
    rig.kube.patch("", "v1", "nodes", node, {"metadata": {"labels": labels}})


async def keeps(rig: Rig) -> bool:
    conf = await rig.reader.slurmctld_conf()
    return conf is not None and conf.keeps_partitions


@contextlib.asynccontextmanager
async def keep_part_info(rig: Rig) -> AsyncIterator[None]:
    """The sandbox's slurmctld with ReconfigFlags=KeepPartInfo, as the controller requires; put back after."""
    path = rig.sandbox.slurm_conf
    original = path.read_text()
    path.write_text(original + KEEP)
    rig.scontrol("reconfigure")
    await wait_for(lambda: keeps(rig), 30, what="/conf to show KeepPartInfo")
    try:
        yield
    finally:
        path.write_text(original)
        rig.scontrol("reconfigure")
        await wait_for(lambda: _not(keeps(rig)), 30, what="/conf without KeepPartInfo again")


async def _not(value: Any) -> bool:
    return not await value


async def cleanup(rig: Rig, names: list[str], partitions: list[str], jobs: list[str]) -> None:
    for job in jobs:
        rig.sandbox.run("scancel", job)
    for name in names:
        obj = cr(rig, name)
        if obj is not None:
            rig.kube.patch(GROUP, VERSION, PLURAL, name, {"metadata": {"finalizers": None}})
            with contextlib.suppress(Exception):
                delete_cr(rig, name)
    for name in partitions:
        with contextlib.suppress(SandboxError):
            rig.scontrol("delete", f"partitionname={name}")


def slurm_writes(service: SyncerService) -> dict[Any, Any]:
    return {k: v for k, v in service.slurm.stats.requests.items() if str(k[0]).startswith("partition_")}


@needs_writes
async def test_a_partition_from_a_label_runs_jobs_follows_labels_drains_is_put_back_and_goes_with_its_cr(
    rig: Rig,
):
    real = rig.sandbox.real_node
    [extra] = fresh_slurm_nodes(1)
    node, other = rig.bind_node(real), rig.bind_node(extra)
    label(rig, node, {"pool": "e2e-part"})
    name, jobs = "e2e-part", []
    spec = {"nodes": {"selector": {"matchLabels": {"pool": "e2e-part"}}}, "state": "UP", "maxTime": 60}
    try:
        # the job counts (status columns, the delete after the last job) come from the service's job poll
        async with (
            keep_part_info(rig),
            running_syncer(rig, partitions=ON, jobs_poll_interval_s=0.3) as service,
        ):
            create_cr(rig, name, spec)

            async def has(nodes: set[str], **settings: Any) -> bool:
                p = await partition(rig, name)
                return (
                    p is not None
                    and set(p.nodes) == nodes
                    and all(getattr(p.settings, k) == v for k, v in settings.items())
                )

            await wait_for(lambda: has({real}, max_time=60), 10, what="the partition over the labelled node")
            await wait_for(lambda: ready(rig, name).get("status") == "True", 10, what="Ready on the CR")
            _status, text = await get(service, "/metrics")
            assert sample(text, "slurm_syncer_partition_ready", cr=name, partition=name, reason=READY) == 1
            assert sample(text, "slurm_syncer_partition_state", cr=name, partition=name, state="UP") == 1
            obj = cr(rig, name)
            assert obj is not None
            assert obj["metadata"]["annotations"][Keys.PARTITION_OWNER] == "created"
            assert partition_finalizer(FAST.cluster_name) in obj["metadata"]["finalizers"]
            assert obj["status"]["slurm"]["nodes"] == real
            assert EVENT_CREATED in reasons(rig, name)

            # a job runs in the partition
            job, err = submit(rig, name, 1)
            assert job, err
            jobs.append(job)
            await wait_for(lambda: job_state(rig, job) == "", 60, what="the job in the partition to complete")

            # changed behind its back: put back, and the Event says what
            rig.scontrol("update", f"partitionname={name}", "maxtime=5")
            await wait_for(lambda: has({real}, max_time=60), 20, what="MaxTime put back (resync)")
            # the Event follows the write Slurm shows: on a busy machine the test may look in between
            await wait_for(
                lambda: any("max_time: 5 -> 60" in m for m in messages(rig, name)), 10, what="the Event"
            )
            assert EVENT_UPDATED in reasons(rig, name)

            with until_told(rig, "e2e-part-running") as (wrap, end_the_job):
                running, err = submit(rig, name, 0, wrap=wrap)
                assert running, err
                jobs.append(running)
                await wait_for(
                    lambda: job_state(rig, running).startswith("RUNNING"), 60, what="the job running"
                )
                # the printer columns Running and Pending: a held job pends beside the running one
                held = rig.sandbox.run(
                    "sbatch", "--parsable", "-H", "-p", name, "--wrap", "true"
                ).stdout.strip()
                assert held
                jobs.append(held)
                await wait_for(
                    lambda: columns(rig, name) == (1, 1), 15, what="1 running, 1 pending job in status"
                )
                rig.sandbox.run("scancel", held, check=True)

                # a node leaves the partition (its label goes) while the partition's job runs on it: the job
                # goes on (measured: Slurm leaves it alone), and the node comes back with its label
                label(rig, other, {"pool": "e2e-part"})
                await wait_for(lambda: has({real, extra}), 10, what="a second node in the partition")
                label(rig, node, {"pool": None})
                await wait_for(lambda: has({extra}), 10, what="the busy node out of the partition")
                assert job_state(rig, running).startswith("RUNNING"), "a node leaving ended its job"
                label(rig, node, {"pool": "e2e-part"})
                label(rig, other, {"pool": None})
                await wait_for(lambda: has({real}), 10, what="the busy node back, the other out")

                # a reconfigure and a slurmctld restart: partition and job as they were (KeepPartInfo)
                await asyncio.to_thread(rig.sandbox.scontrol, "reconfigure")
                await asyncio.to_thread(rig.sandbox.restart_slurmctld)
                await wait_for(lambda: has({real}, max_time=60, state="UP"), 30, what="the partition kept")
                assert job_state(rig, running).startswith("RUNNING"), "a reload ended the partition's job"

                # DRAIN: the running job goes on, a new one is refused
                patch_cr(rig, name, {"state": "DRAIN"})
                await wait_for(lambda: has({real}, state="DRAIN"), 10, what="the partition DRAIN")

                async def drain_exported() -> bool:  # the dashboard's state panel (the CR stays Ready)
                    _status, text = await get(service, "/metrics")
                    return (
                        sample(text, "slurm_syncer_partition_state", cr=name, partition=name, state="DRAIN")
                        == 1
                    )

                await wait_for(drain_exported, 10, what="DRAIN in slurm_syncer_partition_state")
                refused, err = submit(rig, name, 1)
                assert not refused and "not available" in err, (refused, err)
                assert job_state(rig, running).startswith("RUNNING")

                # the CR deleted while its job runs: kept DRAIN until the job ends, then removed with the CR
                patch_cr(rig, name, {"state": "UP"})
                await wait_for(lambda: has({real}, state="UP"), 10, what="the partition UP again")
                delete_cr(rig, name)
                await wait_for(
                    lambda: has({real}, state="DRAIN"), 10, what="the deleted CR's partition draining"
                )
                await wait_for(
                    lambda: "job(s) remain" in ready(rig, name).get("message", ""),
                    10,
                    what="Draining in status",
                )
                assert job_state(rig, running).startswith("RUNNING")
                assert await partition(rig, name) is not None, "deleted under its running job"
                end_the_job()
                await wait_for(lambda: end_state(rig, running) != "", 60, what="the running job to end")
                assert end_state(rig, running) == "COMPLETED"
            await wait_for(lambda: _not(partition(rig, name)), 10, what="the partition deleted")
            await wait_for(lambda: cr(rig, name) is None, 10, what="the CR gone (finalizer released)")
            assert f"partition {name} deleted" in messages(rig, name) and EVENT_DELETED in reasons(rig, name)
            _status, text = await get(service, "/metrics")
            for kind in ("partition_create", "partition_update", "partition_drain", "partition_delete"):
                labels = {"kind": kind, "direction": "k8s_to_slurm", "result": "ok"}
                assert (sample(text, "slurm_syncer_actions_total", **labels) or 0) >= 1, kind
    finally:
        await cleanup(rig, [name], [name], jobs)


@needs_writes
@pytest.mark.only_where(SELECTED.openmetrics, "the metrics hint needs slurmctld's metrics")
async def test_after_a_reconfigure_and_a_restart_with_the_hint_on_what_a_user_does_next_works_at_once(
    rig: Rig,
):
    """With KeepPartInfo a reload loses no partition of ours; the syncer reading slurmctld's metrics (the
    hint: a reload moves none of its counts) goes on as before: a job submitted right after runs to its end,
    and a change of the CR is in Slurm at once. Hint off: the first test of this file, with a job running."""
    name, jobs = "e2e-reload", []
    try:
        async with (
            keep_part_info(rig),
            running_syncer(rig, partitions=ON, slurm_metrics_url=rig.sandbox.metrics_url),
        ):
            create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "maxTime": 30})
            await wait_for(reason_is(rig, name, READY), 10, what="the partition made")
            for step, how in enumerate(("reconfigure", "restart"), start=1):
                if how == "reconfigure":
                    await asyncio.to_thread(rig.sandbox.scontrol, "reconfigure")
                else:
                    await asyncio.to_thread(rig.sandbox.restart_slurmctld)
                job, err = submit(rig, name, 0, wrap="true")
                assert job, f"refused after the {how}: {err}"
                jobs.append(job)
                await wait_for(ended(rig, job), 30, what=f"the job after the {how} to end")
                assert end_state(rig, job) == "COMPLETED"
                patch_cr(rig, name, {"maxTime": 30 + step})

                async def changed(minutes: int = 30 + step) -> bool:
                    p = await partition(rig, name)
                    return p is not None and p.settings.max_time == minutes

                await wait_for(changed, 10, what=f"the CR's change in Slurm after the {how}")
    finally:
        await cleanup(rig, [name], [name], jobs)


def columns(rig: Rig, name: str) -> tuple[Any, Any]:
    """The CR's Running and Pending printer columns (status.slurm)."""
    slurm = ((cr(rig, name) or {}).get("status") or {}).get("slurm") or {}
    return slurm.get("runningJobs"), slurm.get("pendingJobs")


@needs_writes
async def test_the_running_and_pending_columns_follow_the_jobs_poll_not_the_resync(rig: Rig):
    """No job start or end starts a reconcile; the service's job poll (every --jobs-poll-interval) that sees
    a managed partition's jobs move does, so the columns lag by the poll, not by the resync (10 min here).
    Each job change waits until the controller is quiet (its own status write seen and reconciled), so no
    reconcile of its own can be what counts the job."""
    name, jobs = "e2e-columns", []
    try:
        async with keep_part_info(rig):
            async with running_syncer(
                rig, partitions=ON, resync_s=600.0, jobs_poll_interval_s=0.2
            ) as service:
                controller = service.partitions
                assert controller is not None
                queue = controller.runner.queue

                def quiet() -> bool:
                    seen = controller.informer.items.get(name)
                    latest = (cr(rig, name) or {}).get("metadata", {}).get("resourceVersion")
                    return (
                        seen is not None and seen.resource_version == latest
                        and queue.depth == queue.in_flight == queue.delayed == 0
                    )  # fmt: skip

                create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}})
                await wait_for(reason_is(rig, name, READY), 10, what="the partition made")
                await wait_for(quiet, 10, what="the controller quiet")
                assert columns(rig, name) == (0, 0)
                held = rig.sandbox.run("sbatch", "--parsable", "-H", "-p", name, "--wrap", "true").stdout
                jobs.append(held.strip())
                await wait_for(lambda: columns(rig, name) == (0, 1), 10, what="1 pending job in status")
                await wait_for(quiet, 10, what="the controller quiet")
                rig.sandbox.run("scancel", jobs[0], check=True)
                await wait_for(lambda: columns(rig, name) == (0, 0), 10, what="no job in status")
    finally:
        await cleanup(rig, [name], [name], jobs)


@needs_writes
async def test_refusals_name_the_field_and_write_nothing_and_a_restart_over_agreeing_objects_writes_nothing(
    rig: Rig,
):
    real = rig.sandbox.real_node
    foreign, names = "e2e-foreign", ["e2e-unknown", "e2e-nomatch", "e2e-taken", "e2e-twin-a", "e2e-twin-b"]
    rig.scontrol("create", f"partitionname={foreign}", f"nodes={real}", "maxtime=7")
    try:
        async with running_syncer(rig, partitions=ON) as service:
            # without KeepPartInfo: refused, nothing created
            create_cr(rig, "e2e-nokeep", {"nodes": {"hosts": [real]}})
            await wait_for(lambda: ready(rig, "e2e-nokeep").get("reason") == PRECONDITION, 10,
                           what="KeepPartInfoMissing")  # fmt: skip
            assert "ReconfigFlags=KeepPartInfo" in ready(rig, "e2e-nokeep")["message"]
            assert PRECONDITION in reasons(rig, "e2e-nokeep")
            assert await partition(rig, "e2e-nokeep") is None
            _status, text = await get(service, "/metrics")
            labels = {"kind": "partition_refused", "result": PRECONDITION}
            assert (sample(text, "slurm_syncer_actions_total", **labels) or 0) >= 1
            refused = {"cr": "e2e-nokeep", "partition": "e2e-nokeep", "reason": PRECONDITION}
            assert sample(text, "slurm_syncer_partition_ready", **refused) == 0
        async with keep_part_info(rig):
            async with running_syncer(rig, partitions=ON):
                create_cr(rig, "e2e-unknown", {"nodes": {"hosts": ["nosuch[1-2]"]}})
                create_cr(rig, "e2e-nomatch", {"nodes": {"selector": {"matchLabels": {"pool": "nowhere"}}}})
                create_cr(
                    rig, "e2e-taken", {"partitionName": foreign, "nodes": {"hosts": [real]}, "maxTime": 60}
                )
                create_cr(rig, "e2e-twin-a", {"partitionName": "e2e-twin", "nodes": {"hosts": [real]}})
                await wait_for(
                    lambda: ready(rig, "e2e-twin-a").get("status") == "True", 10, what="the first twin"
                )
                # the older CR wins a name both declare: the younger is made in a later second for sure
                born = (cr(rig, "e2e-twin-a") or {})["metadata"]["creationTimestamp"]
                await wait_for(lambda: rfc3339(time.time()) > born, 3, what="the next second")
                create_cr(rig, "e2e-twin-b", {"partitionName": "e2e-twin", "nodes": {"hosts": [real]}})
                expected = {
                    "e2e-unknown": (INVALID, "spec.nodes"), "e2e-nomatch": (INVALID, "spec.nodes.selector"),
                    "e2e-taken": (CONFLICT, "spec.adopt"), "e2e-twin-b": (CONFLICT, "e2e-twin-a"),
                    "e2e-nokeep": (READY, "matches"),
                }  # fmt: skip
                for name, (reason, field) in expected.items():
                    await wait_for(reason_is(rig, name, reason), 10, what=f"{name}: {reason}")
                    assert field in ready(rig, name)["message"], ready(rig, name)
                    if reason != READY:
                        assert reason in reasons(rig, name)
                for name in ("e2e-unknown", "e2e-nomatch"):
                    assert await partition(rig, name) is None
                kept = await partition(rig, foreign)
                assert kept is not None and kept.settings.max_time == 7, (
                    "a foreign partition is never touched"
                )
                # ... unless its CR adopts it: claimed as adopted, then managed as the CR says
                patch_cr(rig, "e2e-taken", {"adopt": True})
                await wait_for(reason_is(rig, "e2e-taken", READY), 10, what="the foreign partition adopted")
                owner = (cr(rig, "e2e-taken") or {})["metadata"]["annotations"][Keys.PARTITION_OWNER]
                assert owner == "adopted"
                kept = await partition(rig, foreign)
                assert kept is not None and kept.settings.max_time == 60
            # a restart over agreeing objects: not one partition write, not one CR status write
            before = {n: (cr(rig, n) or {})["metadata"]["resourceVersion"] for n in expected}
            async with running_syncer(rig, partitions=ON) as again:
                controller = again.partitions
                assert controller is not None
                await wait_for(lambda: len(controller.outcomes) == len(expected) + 1, 10,
                               what="a reconcile after the restart")  # fmt: skip
                await controller.runner.queue.wait_idle()
                assert slurm_writes(again) == {}
                assert {n: (cr(rig, n) or {})["metadata"]["resourceVersion"] for n in before} == before
                # an adopted partition's CR deleted: released, the partition left in Slurm
                delete_cr(rig, "e2e-taken")
                await wait_for(lambda: cr(rig, "e2e-taken") is None, 10, what="the adopting CR gone")
                assert await partition(rig, foreign) is not None, "an adopted partition was deleted"
                assert not [k for k in slurm_writes(again) if k[0] == "partition_delete"]
    finally:
        await cleanup(rig, [*names, "e2e-nokeep"], ["e2e-twin", "e2e-nokeep", foreign], [])


@needs_old
async def test_before_26_05_nothing_is_written_and_the_condition_says_it_needs_26_05(rig: Rig):
    name = "e2e-old"
    try:
        async with running_syncer(rig, partitions=ON) as service:
            create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}})
            await wait_for(lambda: ready(rig, name).get("reason") == UNSUPPORTED, 10, what="Unsupported")
            assert "26.05" in ready(rig, name)["message"]
            assert UNSUPPORTED in reasons(rig, name)
            assert await partition(rig, name) is None
            assert slurm_writes(service) == {}
    finally:
        await cleanup(rig, [name], [], [])


@needs_writes
async def test_an_upgrade_that_brings_partition_writes_is_followed_without_restarting_the_syncer(rig: Rig):
    """slurmrestd serving v0.0.42-44 (as 25.05/25.11 do: no partition writes), then replaced by one that
    serves v0.0.45 too. The syncer saw it away, chose the version again once it answered, and the controller,
    told of the change, writes the partition; no resync comes within the test (an hour away)."""
    name = "e2e-upgrade"
    try:
        async with keep_part_info(rig), served_only(rig.sandbox, API_VERSIONS[:-1]):
            async with running_syncer(rig, partitions=ON, resync_s=3600.0) as service:
                create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}})
                await wait_for(reason_is(rig, name, UNSUPPORTED), 10, what="Unsupported")
                assert service.slurm.version is not None and service.slurm.version.name == "v0.0.44"
                await asyncio.to_thread(rig.sandbox.stop_slurmrestd)
                await wait_for(lambda: bool(service.slurm.follow.why), 10, what="slurmrestd seen away")
                await asyncio.to_thread(rig.sandbox.start_slurmrestd)  # every version: v0.0.45 too
                await wait_for(reason_is(rig, name, READY), 20, what="Ready once v0.0.45 is in use")
                assert service.slurm.version.name == "v0.0.45"
                assert await partition(rig, name) is not None
                assert EVENT_CREATED in reasons(rig, name)
    finally:
        await cleanup(rig, [name], [name], [])


@needs_writes
async def test_a_conf_read_refused_leaves_the_cr_waiting_and_it_is_made_by_itself_once_conf_answers(rig: Rig):
    """/conf refused (KeepPartInfo unknown): the CR is `KeepPartInfoMissing` "(could not be read)" and nothing
    is written; the controller reads /conf again by itself within 2 s, as no other change may come to start
    a reconcile (no Slinky partition here, resyncs an hour apart), and makes the partition once it answers.
    The log says so once when the failures start (at most once a minute while they last, not at each read)
    and once when /conf answers again, with how many reads failed."""
    name, conf_read = "e2e-conf-retry", ("GET", "/conf")
    conf_lines = (
        "slurmctld's /conf not read: no partition created or changed",
        "slurmctld's /conf read again",
    )
    try:
        with captured_logs() as logs:
            async with keep_part_info(rig), FaultProxy(rig.sandbox.rest_url) as proxy:
                proxy.failing[conf_read] = 500  # an answer the client does not retry: one per look
                started = time.monotonic()  # before the first failed read
                async with running_syncer(
                    rig, slurm_url=proxy.url, partitions=ON, resync_s=3600.0
                ) as service:
                    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}})
                    await wait_for(reason_is(rig, name, PRECONDITION), 10, what="KeepPartInfoMissing")
                    assert "could not be read" in ready(rig, name)["message"], ready(rig, name)
                    # more looks than the CR's arrival makes: the controller comes back by itself
                    asked = proxy.failed.get(conf_read, 0)
                    await wait_for(
                        lambda: proxy.failed.get(conf_read, 0) >= asked + 2, 30, what="/conf asked again"
                    )
                    assert await partition(rig, name) is None and slurm_writes(service) == {}
                    del proxy.failing[conf_read]
                    failed, lasted = proxy.failed[conf_read], time.monotonic() - started
                    await wait_for(reason_is(rig, name, READY), 30, what="Ready once /conf answers")
                    assert await partition(rig, name) is not None
                    assert EVENT_CREATED in reasons(rig, name)
        told = [e for e in logs.entries if e["event"] in conf_lines]
        warned = [e for e in told if e["log_level"] == "warning"]
        # one when the failures start, then one a minute at most: fewer than the failed reads
        assert 1 <= len(warned) <= 1 + lasted // TELL_EVERY_S < failed, (failed, lasted, told)
        assert warned[0]["failures"] == 1 and "500" in warned[0]["error"], told
        [again] = [e for e in told if e["log_level"] == "info"]
        assert again["event"] == conf_lines[1] and again["failures"] == failed, (failed, told)
    finally:
        await cleanup(rig, [name], [name], [])


def refused_oversubscribe(body: bytes) -> bytes:
    """A partition write with an oversubscribe Slurm refuses (error 9001, nothing changed: measured,
    docs/slurm-releases.md): Slurm's own refusal of a drain, which it never refuses for its own sake."""
    sent = json.loads(body)
    for entry in sent["partitions"]:
        entry.setdefault("partition", {})["oversubscribe"] = "EXCLUSIVE"
    return json.dumps(sent).encode()


@needs_writes
async def test_a_reconcile_that_stops_a_cr_while_conf_is_refused_comes_back_and_makes_the_waiting_cr(
    rig: Rig,
):
    """A reconcile whose /conf read fails and that stops a CR (Slurm refused its partition's drain: the CR is
    `Invalid`, which was `Terminal` for the reconcile) comes back by itself within 2 s all the same, sends the
    refused drain no more, and makes the CR that waited for /conf once it answers. With /conf read, a
    reconcile that stopped a CR is not retried (no retry counted, the controller quiet). Slurm refuses for
    real: the proxy puts a value it refuses into each partition write. A reload (it forgets what Slurm
    refused) makes the failed /conf read and the refused drain meet in one reconcile, with nothing else to
    start another."""
    real = rig.sandbox.real_node
    draining, waiting, jobs = "e2e-conf-stop", "e2e-conf-wait", []
    conf_read, post = ("GET", "/conf"), ("POST", "/partitions/")
    try:
        async with keep_part_info(rig), FaultProxy(rig.sandbox.rest_url) as proxy:
            async with running_syncer(
                rig, slurm_url=proxy.url, partitions=ON, resync_s=3600.0, jobs_poll_interval_s=0.3
            ) as service:
                controller = service.partitions
                assert controller is not None
                queue = controller.runner.queue

                def quiet() -> bool:  # no reconcile queued, running or due later; every CR change seen
                    latest = {n: (cr(rig, n) or {}).get("metadata", {}).get("resourceVersion") for n in names}
                    seen = {n: o.resource_version for n, o in controller.informer.items.items()}
                    return seen == latest and queue.depth == queue.in_flight == queue.delayed == 0

                names = [draining]
                create_cr(rig, draining, {"nodes": {"hosts": [real]}})
                await wait_for(reason_is(rig, draining, READY), 10, what="the partition made")
                with until_told(rig, draining) as (wrap, end_the_job):
                    job, err = submit(rig, draining, 0, wrap=wrap)
                    assert job, err
                    jobs.append(job)
                    counted = controller.context.jobs
                    await wait_for(lambda: counted.counts.get((draining, "RUNNING")) == 1, 60,
                                   what="its job running, as the job poll counts it")  # fmt: skip
                    await wait_for(quiet, 10, what="the controller quiet")

                    # /conf read: the deleted CR's drain and the new CR's create refused, and not retried
                    retries = controller.runner.retries_total
                    proxy.rewriting[post] = refused_oversubscribe
                    names.append(waiting)
                    create_cr(rig, waiting, {"nodes": {"hosts": [real]}})
                    delete_cr(rig, draining)
                    for name in names:
                        await wait_for(reason_is(rig, name, INVALID), 10, what=f"{name} refused by Slurm")
                        assert "error 9001" in ready(rig, name)["message"], ready(rig, name)
                    await wait_for(quiet, 10, what="quiet after a stop with /conf read")
                    assert controller.runner.retries_total == retries, "a stop with /conf read was retried"

                    # /conf refused, then a reload: the drain is sent again and refused again in the
                    # reconcile whose /conf read fails, the other CR waits for /conf (slurmctld's reconfigure
                    # may be told as one reload or two: each lets the drain be sent once more)
                    refused, reloads = proxy.rewritten[post], service.slurm_cache.stats.reloads
                    proxy.failing[conf_read] = 500
                    await asyncio.to_thread(rig.sandbox.scontrol, "reconfigure")
                    await wait_for(
                        lambda: "could not be read" in ready(rig, waiting).get("message", ""), 30,
                        what=f"{waiting} waiting for /conf",
                    )  # fmt: skip
                    assert proxy.rewritten[post] > refused, "the drain not sent again after the reload"
                    assert reason_is(rig, draining, INVALID)()
                    asked = proxy.failed[conf_read]
                    await wait_for(lambda: proxy.failed[conf_read] >= asked + 3, 30,
                                   what="/conf asked again after the stop")  # fmt: skip
                    resent, told = (
                        proxy.rewritten[post] - refused,
                        service.slurm_cache.stats.reloads - reloads,
                    )
                    assert resent <= told, (
                        f"the refused drain sent {resent} times again over {told} reload(s)"
                    )
                    del proxy.rewriting[post]
                    del proxy.failing[conf_read]
                    await wait_for(
                        reason_is(rig, waiting, READY), 30, what=f"{waiting} made once /conf answers"
                    )
                    assert await partition(rig, waiting) is not None
                    assert reason_is(rig, draining, INVALID)(), (
                        "the refusal stands until the CR or Slurm changes"
                    )
                    kept = await partition(rig, draining)
                    assert kept is not None and kept.settings.state == "UP"
                    assert job_state(rig, job).startswith("RUNNING")
                    end_the_job()
    finally:
        await cleanup(rig, [draining, waiting], [draining, waiting], jobs)


async def test_check_fails_without_keep_part_info_naming_the_line_and_before_26_05_says_it_needs_26_05(
    rig: Rig,
):
    kube = await KubeClient.from_config(str(rig.kubeconfig))
    try:
        assert await listed(kube, PATH) == []
        create_cr(rig, "e2e-check", {"nodes": {"hosts": [rig.sandbox.real_node]}})
        assert len(await listed(kube, PATH) or []) == 1
    finally:
        await kube.close()
        await cleanup(rig, ["e2e-check"], [], [])
    [item] = await check_partitions(rig.reader, "1 SlurmPartition(s) exist")
    assert not item.ok
    if not WRITES:
        assert "26.05" in item.what, item
        return
    assert (
        "KeepPartInfo" in item.what and "ReconfigFlags=KeepPartInfo" in item.fix and "extraConf" in item.fix
    )
    async with keep_part_info(rig):
        [item] = await check_partitions(rig.reader, "--partitions-enabled")
        assert item.ok, item


SLINKY = PartitionOptions(enabled=True, slinky=True)
CRDS = "customresourcedefinitions"
KEEP_ONLY = "ReconfigFlags=KeepPartInfo"


def slinky_crd(plural: str, kind: str) -> dict[str, Any]:
    """A minimal CRD of Slinky's shape (slinky.slurm.net/v1beta1, namespaced; its schema left open)."""
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "metadata": {"name": f"{plural}.slinky.slurm.net"},
        "spec": {
            "group": "slinky.slurm.net", "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [{"name": "v1beta1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": schema}}],
        },
    }  # fmt: skip


@contextlib.contextmanager
def slinky_served(rig: Rig) -> Iterator[None]:
    """Slinky's NodeSet and Controller CRDs served by the emulator, removed after."""
    for plural, kind in (("nodesets", "NodeSet"), ("controllers", "Controller")):
        rig.kube.create("apiextensions.k8s.io", "v1", CRDS, slinky_crd(plural, kind))
    try:
        yield
    finally:
        for plural in ("nodesets", "controllers"):
            resource = rig.kube.api.resource("apiextensions.k8s.io", "v1", CRDS)
            rig.kube.api.delete(resource, "", f"{plural}.slinky.slurm.net")


def slinky_object(rig: Rig, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    if rig.kube.get("", "v1", "namespaces", "slurm") is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": "slurm"}})
    body = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    rig.kube.create("slinky.slurm.net", "v1beta1", plural, body, namespace="slurm")


@needs_writes
async def test_slinky_partitions_are_never_written_from_a_live_watch_and_an_absent_crd_is_one_info_line(
    rig: Rig,
):
    real = rig.sandbox.real_node
    names = ["e2e-sl-nodeset", "e2e-sl-later"]
    try:
        async with keep_part_info(rig):
            # no Slinky CRD served: one INFO line per kind, no watch, no error; partitions go on as before
            with captured_logs() as logs:
                async with running_syncer(rig, partitions=SLINKY) as service:
                    create_cr(rig, "e2e-sl-later", {"nodes": {"hosts": [real]}, "maxTime": 30})
                    await wait_for(reason_is(rig, "e2e-sl-later", READY), 10, what="Ready without Slinky")
                    controller = service.partitions
                    assert controller is not None and controller.slinky is not None
                    assert all(s.absent for s in controller.slinky.sources)
            said = [(e["log_level"], e["event"]) for e in logs.entries if "Slinky" in e["event"]]
            assert sorted(said) == [
                ("info", "Slinky Controllers are not served here: no partition of theirs to protect"),
                ("info", "Slinky NodeSets are not served here: no partition of theirs to protect"),
            ], said
            assert not [e for e in logs.entries if e["log_level"] in ("warning", "error")], logs.entries

            # Slinky installed: its NodeSet's partition is refused even with adopt, and nothing is written
            with slinky_served(rig):
                await slinky_plays(rig)
    finally:
        await cleanup(rig, names, ["e2e-sl-later", "e2e-sl-nodeset"], [])


async def slinky_plays(rig: Rig) -> None:
    """A NodeSet (hostname override: its partition is named after it, as Slinky's operator names it) and a
    Controller's extraConf, shaped as slinky.slurm.net/v1beta1 has them."""
    real = rig.sandbox.real_node
    slinky_object(rig, "nodesets", "NodeSet", "gpu", {
        "replicas": 1, "partition": {"enabled": True},
        "template": {"spec": {"hostname": "e2e-sl-nodeset-"}},
    })  # fmt: skip
    async with running_syncer(rig, partitions=SLINKY) as service:
        create_cr(rig, "e2e-sl-nodeset", {"nodes": {"hosts": [real]}, "adopt": True})
        await wait_for(reason_is(rig, "e2e-sl-nodeset", CONFLICT), 10, what="Slinky's NodeSet partition")
        message = ready(rig, "e2e-sl-nodeset")["message"]
        assert "Slinky's (its NodeSet slurm/gpu declares it" in message, message
        assert CONFLICT in reasons(rig, "e2e-sl-nodeset")
        assert await partition(rig, "e2e-sl-nodeset") is None

        # live: a Controller's extraConf starts declaring a partition a CR of ours made
        slinky_object(
            rig,
            "controllers",
            "Controller",
            "slurm",
            {"extraConf": f"{KEEP_ONLY}\nPartitionName=e2e-sl-later Nodes=ALL"},
        )
        await wait_for(reason_is(rig, "e2e-sl-later", CONFLICT), 10, what="the extraConf seen live")
        assert "Controller slurm/slurm" in ready(rig, "e2e-sl-later")["message"]
        writes = slurm_writes(service)
        patch_cr(rig, "e2e-sl-later", {"maxTime": 45})

        def planned() -> bool:  # the change was planned: its status says it saw the generation
            obj = cr(rig, "e2e-sl-later") or {}
            status = obj.get("status") or {}
            return bool(status.get("observedGeneration") == obj["metadata"]["generation"] > 1)

        await wait_for(planned, 10, what="the CR's change planned")
        kept = await partition(rig, "e2e-sl-later")
        assert kept is not None and kept.settings.max_time == 30, "Slinky's partition was written"
        assert slurm_writes(service) == writes
        # and released again: the change goes through
        rig.kube.patch("slinky.slurm.net", "v1beta1", "controllers", "slurm",
                       {"spec": {"extraConf": KEEP_ONLY}}, namespace="slurm")  # fmt: skip
        await wait_for(reason_is(rig, "e2e-sl-later", READY), 10, what="Ready once Slinky let it go")
        kept = await partition(rig, "e2e-sl-later")
        assert kept is not None and kept.settings.max_time == 45


@needs_writes
async def test_several_partitions_go_in_one_post_and_one_slurm_refuses_is_told_on_its_own_cr(rig: Rig):
    """Measured on 26.05.5: a POST of several partitions applies each entry it can, not atomically, and
    names the index of each it refuses. Three CRs waiting at start: one POST. Then three more, one with a
    QOS Slurm does not know: the two others are applied by the same POST, the third is sent again alone
    and its CR says Slurm's error."""
    real = rig.sandbox.real_node
    good, more = ["e2e-b1", "e2e-b2", "e2e-b3"], ["e2e-b4", "e2e-b6"]
    bad = "e2e-b5"
    try:
        async with keep_part_info(rig):
            for name in good:
                create_cr(rig, name, {"nodes": {"hosts": [real]}, "maxTime": 20})
            async with running_syncer(rig, partitions=ON) as service:
                for name in good:
                    await wait_for(reason_is(rig, name, READY), 10, what=f"{name} Ready")
                assert slurm_writes(service) == {("partition_update", "200"): 1}, slurm_writes(service)
            for name in more:
                create_cr(rig, name, {"nodes": {"hosts": [real]}})
            create_cr(rig, bad, {"nodes": {"hosts": [real]}, "qos": "nosuchqos"})
            with captured_logs() as logs:
                async with running_syncer(rig, partitions=ON):
                    await wait_for(reason_is(rig, bad, INVALID), 10, what="the refused one Invalid")
                    for name in more:
                        await wait_for(reason_is(rig, name, READY), 10, what=f"{name} Ready")
            message = ready(rig, bad)["message"]
            assert "(spec.qos): Invalid qos specification" in message, message
            told = zip(reasons(rig, bad), messages(rig, bad), strict=True)
            assert [m for r, m in told if r == INVALID and "spec.qos" in m], "no Event naming the field"
            assert await partition(rig, bad) is None
            [again] = [e for e in logs.entries if e["event"].startswith("partitions refused in a batch")]
            assert again["partitions"] == [bad], again
    finally:
        names = [*good, *more, bad]
        await cleanup(rig, names, names, [])


@needs_writes
async def test_a_delete_slurm_refuses_for_a_job_that_came_in_meanwhile_keeps_the_cr_says_why_and_drains(
    rig: Rig,
):
    """Slurm refuses to delete a partition while any job, running or pending, names it (error 2075
    "Partition is in use": delete_partition() in slurmctld's partition_mgr.c, its only refusal besides an
    unknown name). Produced for real: the proxy holds the syncer's DELETE of an empty partition while a job
    is submitted into it, then lets slurmrestd answer. The CR keeps its finalizer, an Event names Slurm's
    error, and the next reconcile drains the partition and deletes it after the job."""
    name, jobs = "e2e-inuse", []
    try:
        async with keep_part_info(rig), FaultProxy(rig.sandbox.rest_url) as proxy:
            async with running_syncer(rig, slurm_url=proxy.url, partitions=ON, jobs_poll_interval_s=0.3):
                create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}})
                await wait_for(reason_is(rig, name, READY), 10, what="the partition made")
                hold = proxy.hold_next("DELETE", f"/partition/{name}")
                delete_cr(rig, name)
                await wait_for(hold.arrived.is_set, 10, what="the syncer's DELETE of the empty partition")
                with until_told(rig, name) as (wrap, end_the_job):
                    job, err = submit(rig, name, 0, wrap=wrap)
                    assert job, err
                    jobs.append(job)
                    hold.release.set()

                    def refused() -> list[str]:
                        return [m for e, m in zip(reasons(rig, name), messages(rig, name), strict=True)
                                if e == DELETE_REFUSED]  # fmt: skip

                    await wait_for(lambda: bool(refused()), 10, what="the refused DELETE told in an Event")
                    assert "Partition is in use (error 2075)" in refused()[0], refused()
                    obj = cr(rig, name)
                    assert (
                        obj is not None
                        and partition_finalizer(FAST.cluster_name) in obj["metadata"]["finalizers"]
                    )
                    assert await partition(rig, name) is not None
                    await wait_for(reason_is(rig, name, "Draining"), 10, what="drained while its job runs")
                    assert job_state(rig, job) != "", "the job must still be there while the partition drains"
                    end_the_job()
                    await wait_for(lambda: end_state(rig, job) != "", 60, what="the job to end")
                    assert end_state(rig, job) == "COMPLETED"
                await wait_for(lambda: cr(rig, name) is None, 20, what="the CR gone after its partition")
                assert await partition(rig, name) is None
    finally:
        await cleanup(rig, [name], [name], jobs)


@needs_writes
async def test_a_delete_refused_while_conf_is_refused_comes_back_within_the_conf_retry_and_drains(rig: Rig):
    """A delete Slurm refuses (2075, a job came in) in a reconcile whose /conf read failed: the reconcile
    comes back within 2 s, as every reconcile with /conf unread does, not after the 5 s a refused delete
    alone waits (the soonest of the waits that apply, recheck.py; it was 5 s: the refused delete's branch
    decided alone). Its retry sends the DELETE no more: it drains the partition (closing needs no
    KeepPartInfo), and deletes it after the job, /conf refused all along. The race produced for real as in
    the test above; a reload makes the syncer read /conf again, and the proxy refuses it."""
    name, jobs = "e2e-inuse-conf", []
    conf_read, delete = ("GET", "/conf"), ("DELETE", f"/partition/{name}")
    try:
        with captured_logs() as logs:
            async with keep_part_info(rig), FaultProxy(rig.sandbox.rest_url) as proxy:
                async with running_syncer(
                    rig, slurm_url=proxy.url, partitions=ON, resync_s=3600.0, jobs_poll_interval_s=0.3
                ):
                    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}})
                    await wait_for(reason_is(rig, name, READY), 10, what="the partition made")
                    proxy.failing[conf_read] = 500  # an answer the client does not retry: one per look
                    await asyncio.to_thread(rig.sandbox.scontrol, "reconfigure")
                    await wait_for(lambda: proxy.failed.get(conf_read, 0) >= 1, 30,
                                   what="/conf read again after the reload, and refused")  # fmt: skip
                    hold = proxy.hold_next(*delete)
                    delete_cr(rig, name)
                    await wait_for(hold.arrived.is_set, 10, what="the syncer's DELETE of the empty partition")
                    with until_told(rig, name) as (wrap, end_the_job):
                        job, err = submit(rig, name, 0, wrap=wrap)
                        assert job, err
                        jobs.append(job)
                        hold.release.set()

                        def retried() -> list[MutableMapping[str, Any]]:
                            return [e for e in logs.entries if e["event"] == "reconcile failed, retrying"
                                    and e.get("controller") == "partitions"
                                    and f"{name} in use" in e["error"]]  # fmt: skip

                        await wait_for(lambda: bool(retried()), 10, what="the refused delete's retry")
                        assert retried()[0]["retry_in_s"] == UNREACHABLE_RETRY_S, retried()[0]
                        await wait_for(reason_is(rig, name, "Draining"), 10, what="drained, its job running")
                        sent = [w for w in proxy.writes if w[1] == delete[0] and w[2].endswith(delete[1])]
                        assert len(sent) == 1, "the refused DELETE sent again while its job runs"
                        end_the_job()
                        await wait_for(lambda: end_state(rig, job) != "", 60, what="the job to end")
                    await wait_for(lambda: cr(rig, name) is None, 20, what="the CR gone after its partition")
                    assert await partition(rig, name) is None
                    assert proxy.failed[conf_read] >= 3, "/conf answered meanwhile"
    finally:
        await cleanup(rig, [name], [name], jobs)


@needs_writes
async def test_a_claim_the_api_server_refuses_is_tried_again_by_itself(rig: Rig):
    """A claim (the ownership record written on the CR before anything of it in Slurm) the API server
    refuses (each of the writer's attempts a 409 here; a 5xx or a lost connection alike, which the client
    does not retry for a PATCH) is the API server's failure, not the CR's: the reconcile is retried with the
    runtime's back-off and the CR goes on once a claim goes through. It was `Terminal`: `ClaimFailed` until
    the CR changed or the resync (an hour apart here), and a `created` claim left so makes a syncer started
    meanwhile find its CR `Conflict`. The claim here adopts a foreign partition: the CR's own change starts
    the reconcile, and no write of ours goes through to start another."""
    name, real = "e2e-claim-retry", rig.sandbox.real_node
    try:
        async with keep_part_info(rig):
            rig.scontrol("create", f"partitionname={name}", f"nodes={real}", "state=up")
            async with running_syncer(rig, partitions=ON, resync_s=3600.0) as service:
                controller = service.partitions
                assert controller is not None
                queue = controller.runner.queue
                create_cr(rig, name, {"nodes": {"hosts": [real]}})
                await wait_for(reason_is(rig, name, CONFLICT), 10, what="a foreign partition: Conflict")
                await wait_for(lambda: queue.depth == queue.in_flight == queue.delayed == 0, 10,
                               what="the controller quiet")  # fmt: skip
                attempts = service.context.writer.max_attempts  # every one of them refused
                rig.kube.faults.conflict_next("PATCH", f"/slurmpartitions/{name}", count=attempts)
                patch_cr(rig, name, {"adopt": True})
                await wait_for(lambda: not rig.kube.faults.conflicts, 10, what="the adopting claim refused")
                await wait_for(reason_is(rig, name, READY), 10, what="adopted once a claim goes through")
                meta = (cr(rig, name) or {}).get("metadata") or {}
                assert (meta.get("annotations") or {}).get(Keys.PARTITION_OWNER) == "adopted", meta
    finally:
        await cleanup(rig, [name], [name], [])


@needs_writes
async def test_a_slurmd_pod_arriving_on_a_selected_node_joins_its_partition(rig: Rig):
    """The Slurm nodes bound to each selected Node are kept between plans (issue 47: resolving them per Node
    and plan was most of a reconcile at 1,000 nodes): a second slurmd pod arriving on a selected Node binds
    another Slurm node to it, and the partition takes it in (the kept bindings go with any pod change)."""
    first, second = fresh_slurm_nodes(2)
    node, _ = rig.bind_pod(first, node_labels={"pool": "e2e-bound"})
    name = "e2e-bound"

    async def has(nodes: set[str]) -> bool:
        found = await partition(rig, name)
        return found is not None and set(found.nodes) == nodes

    try:
        async with keep_part_info(rig), running_syncer(rig, partitions=ON):
            create_cr(rig, name, {"nodes": {"selector": {"matchLabels": {"pool": "e2e-bound"}}}})
            await wait_for(lambda: has({first}), 20, what="the partition over the first pod's Slurm node")
            patch_cr(rig, name, {"maxTime": 30})  # another plan with the bindings kept
            await wait_for(lambda: ready(rig, name).get("status") == "True", 20, what="Ready after the patch")
            rig.used.append(second)
            pod = {
                "metadata": {"name": f"slurmd-{second}", "labels": {Keys.NODE_NAME_LABEL: second}},
                "spec": {"nodeName": node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
            }
            rig.kube.create("", "v1", "pods", pod, namespace=NAMESPACE)
            await wait_for(
                lambda: has({first, second}), 20, what="the second pod's Slurm node in the partition"
            )
    finally:
        await cleanup(rig, [name], [name], [])
