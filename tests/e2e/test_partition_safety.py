"""SlurmPartitions lose no job nobody decided to lose (issue 45, items 5-10), against the real Slurm sandbox
with its real slurmd and real jobs, the CRs on the Kubernetes API emulator (docs/partitions.md). Scenarios
that only wait run side by side under one syncer; each names itself when it fails."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from collections.abc import AsyncIterator, Awaitable
from functools import partial
from typing import Any

import pytest

from syncer.app.service import SyncerService
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.controllers.partitions.plan import CONFLICT, INVALID, READY
from syncer.model.keys import Keys
from tests.e2e.rig import NAMESPACE, Rig, fresh_slurm_nodes, get, running_syncer, sample
from tests.e2e.test_nodeset import GROUP as NODESET_GROUP
from tests.e2e.test_nodeset import VERSION as NODESET_VERSION
from tests.e2e.test_nodeset import delete_slurm_nodes, ensure_pool, manifest
from tests.e2e.test_nodeset_power import power_manifest
from tests.e2e.test_partitions import (
    GROUP,
    ON,
    PLURAL,
    VERSION,
    cleanup,
    cr,
    create_cr,
    delete_cr,
    end_state,
    job_state,
    keep_part_info,
    label,
    partition,
    patch_cr,
    ready,
    reason_is,
    reasons,
    slurm_writes,
    submit,
    until_told,
)
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
WRITES = "v0.0.45" in SELECTED.api_versions
needs_writes = pytest.mark.only_where(WRITES, "Slurm 26.05+ writes partitions over REST")
HELD = "HeldInSlurm"  # the CR's Ready reason while an admin's stop in Slurm is kept
NODES_HELD = "NodesHeld"  # busy nodes kept out of a partition whose jobs would preempt theirs
DRAINING = "Draining"
QUICK_JOBS_S = 0.3  # the service's job poll, which counts each partition's jobs: a job's end seen at once


async def scenarios(**named: Awaitable[None]) -> None:
    """Run scenarios side by side, each to its end; then fail naming every scenario that failed."""
    results = await asyncio.gather(*named.values(), return_exceptions=True)
    failed = [f"scenario {name}: {type(r).__name__}: {r}" for name, r in zip(named, results, strict=True)
              if isinstance(r, BaseException)]  # fmt: skip
    assert not failed, "\n".join(failed)


async def slurm_state(rig: Rig, name: str) -> str | None:
    p = await partition(rig, name)
    return p.settings.state if p is not None else None


def pending(rig: Rig, job: str) -> bool:
    return job_state(rig, job).startswith("PENDING")


def queued(rig: Rig, name: str) -> str:
    """A job queued in partition `name` on the real node (the partition holds it: DOWN)."""
    job, err = submit(rig, name, 0, wrap="true")
    assert job, err
    return job


async def resynced(service: SyncerService) -> None:
    """Every key looked at again, as the periodic resync does, and the queue idle after it."""
    controller = service.partitions
    assert controller is not None
    await controller.runner.resync()
    await controller.runner.queue.wait_idle()


# -- items 5 and 6: an admin's stop in Slurm is never undone ----------------------------------------------


async def deleted_while_down(rig: Rig, jobs: list[str]) -> None:
    """Item 5: a CR with state DOWN holds a queued job; deleting the CR must not let it start (DRAIN would:
    in Slurm DRAIN refuses new jobs but runs queued ones). DOWN goes to INACTIVE: both refused and held."""
    name = "e2e-s-down"
    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "state": "DOWN"})
    await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
    job = queued(rig, name)
    jobs.append(job)
    await wait_for(lambda: "PartitionDown" in job_state(rig, job), 15, what="the job held by DOWN")
    delete_cr(rig, name)
    await wait_for(reason_is(rig, name, DRAINING), 15, what="the deleted CR draining")
    assert await slurm_state(rig, name) == "INACTIVE", "a DOWN partition must go INACTIVE, not DRAIN"
    assert pending(rig, job), f"the held job left the queue: {job_state(rig, job)}"
    message = ready(rig, name)["message"]
    assert "INACTIVE" in message and "scancel" in message, message
    # the admin decides: the job cancelled, the partition goes and the CR with it
    rig.sandbox.run("scancel", job, check=True)
    await wait_for(lambda: cr(rig, name) is None, 20, what="the CR gone once its held job was cancelled")
    assert await partition(rig, name) is None


async def deleted_while_inactive(rig: Rig, jobs: list[str]) -> None:
    """Item 5: an INACTIVE partition stays INACTIVE while its CR is deleted (its queued job stays held)."""
    name = "e2e-s-inactive"
    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "state": "DOWN"})
    await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
    job = queued(rig, name)
    jobs.append(job)
    patch_cr(rig, name, {"state": "INACTIVE"})
    await wait_for(lambda: _is(slurm_state(rig, name), "INACTIVE"), 15, what="the partition INACTIVE")
    delete_cr(rig, name)
    await wait_for(reason_is(rig, name, DRAINING), 15, what="the deleted CR draining")
    assert await slurm_state(rig, name) == "INACTIVE", "an INACTIVE partition must stay INACTIVE"
    assert pending(rig, job), f"the held job left the queue: {job_state(rig, job)}"


async def _is(value: Awaitable[Any], expected: Any) -> bool:
    return bool(await value == expected)


async def admin_down_is_kept(rig: Rig, service: SyncerService, jobs: list[str]) -> None:
    """Item 6: `scontrol update partition ... state=DOWN` on a CR that says UP is kept (the CR shows it:
    condition, Event, metric) through resyncs, until the CR changes."""
    name = "e2e-s-admin"
    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "state": "UP", "maxTime": 30})
    await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
    rig.scontrol("update", f"partitionname={name}", "state=DOWN")
    job = queued(rig, name)
    jobs.append(job)
    await resynced(service)
    await wait_for(
        lambda: ready(rig, name).get("reason") == HELD or _is(slurm_state(rig, name), "UP"),
        15, what="the syncer to see the admin's DOWN",
    )  # fmt: skip
    assert await slurm_state(rig, name) == "DOWN", "the admin's DOWN was undone"
    assert ready(rig, name).get("reason") == HELD, ready(rig, name)
    message = ready(rig, name)["message"]
    assert "DOWN" in message and "UP" in message, message
    assert HELD in reasons(rig, name), reasons(rig, name)
    _status, text = await get(service, "/metrics")
    assert sample(text, "slurm_syncer_partition_held", cr=name, partition=name, state="DOWN") == 1, text
    assert sample(text, "slurm_syncer_partition_ready", cr=name, partition=name, reason=HELD) == 0
    await resynced(service)  # the resync changes nothing
    await resynced(service)
    assert await slurm_state(rig, name) == "DOWN"
    assert pending(rig, job), job_state(rig, job)
    # the CR changes: its state is what it says again, and the job runs
    patch_cr(rig, name, {"maxTime": 31})
    await wait_for(lambda: _is(slurm_state(rig, name), "UP"), 15, what="UP once the CR changed")
    await wait_for(lambda: end_state(rig, job) != "", 60, what="the job to run and end")
    assert end_state(rig, job) == "COMPLETED"
    await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready again")


async def admin_stop_after_a_write_is_kept(rig: Rig, service: SyncerService) -> None:
    """Issue 47: a CR change that arrives while a reconcile writes leaves that reconcile's re-read and
    statuses to the next one. An admin's DOWN made right after the write of the CR's change (before any
    status says that change was seen) is kept all the same: the change counts as seen once written, and
    the state is lifted once per author's change, not again by the reconcile that follows."""
    name = "e2e-s-after-write"
    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "state": "UP", "maxTime": 30})
    await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
    controller = service.partitions
    assert controller is not None
    writer = controller.context.slurm_writer
    put_one, put_many = writer.put_partition, writer.put_partitions
    hooked: list[str] = []

    async def then_admin_and_author() -> None:
        """Right after Slurm took the write of maxTime 31: the admin stops the partition, and its CR changes
        (an annotation: the same generation) while the reconcile that wrote is still running."""
        hooked.append(name)
        rig.scontrol("update", f"partitionname={name}", "state=DOWN")
        rig.kube.patch(GROUP, VERSION, PLURAL, name, {"metadata": {"annotations": {"e2e/touched": "1"}}})

        def shown() -> bool:
            seen = [o.body for o in controller.informer.items.values() if o.name == name]
            return bool(seen) and "e2e/touched" in (seen[0]["metadata"].get("annotations") or {})

        await wait_for(shown, 10, what="the CR's change seen by the controller")

    def ours(partition: str, settings: Any) -> bool:
        return partition == name and settings.max_time == 31 and not hooked

    async def one(partition: str, settings: Any, *, nodes: str | None) -> bool:
        written = await put_one(partition, settings, nodes=nodes)
        if ours(partition, settings):
            await then_admin_and_author()
        return written

    async def many(writes: Any) -> bool:
        written = await put_many(writes)
        if any(ours(w.name, w.settings) for w in writes):
            await then_admin_and_author()
        return written

    writer.put_partition, writer.put_partitions = one, many  # type: ignore[method-assign,assignment]
    try:
        patch_cr(rig, name, {"maxTime": 31})
        generation = int((cr(rig, name) or {})["metadata"]["generation"])
        await wait_for(lambda: bool(hooked), 15, what="the write of maxTime 31")
        # that reconcile stopped after its write: no status of it says the change was seen
        await wait_for(lambda: name in controller._looked_at, 15, what="its statuses left to the next")
        await wait_for(
            lambda: ready(rig, name).get("reason") == HELD or _is(slurm_state(rig, name), "UP"),
            15, what="the next reconcile to decide on the admin's DOWN",
        )  # fmt: skip
        assert await slurm_state(rig, name) == "DOWN", "the admin's DOWN made after the write was undone"
        status = (cr(rig, name) or {}).get("status") or {}
        assert status.get("observedGeneration") == generation, status
        await resynced(service)
        assert await slurm_state(rig, name) == "DOWN"
        found = await partition(rig, name)
        assert found is not None and found.settings.max_time == 31
    finally:
        writer.put_partition, writer.put_partitions = put_one, put_many  # type: ignore[method-assign]


async def unmanaged_state_is_left_alone(rig: Rig, service: SyncerService) -> None:
    """Item 6: a CR without `state` does not manage it (no default UP): an admin's DOWN stays, Ready."""
    name = "e2e-s-nostate"
    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "maxTime": 30})
    await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
    assert "state" not in (cr(rig, name) or {}).get("spec", {}), "state defaulted: it is always managed"
    rig.scontrol("update", f"partitionname={name}", "state=DOWN")
    await resynced(service)
    await resynced(service)
    assert await slurm_state(rig, name) == "DOWN", "an unmanaged state was put back"
    assert ready(rig, name).get("reason") == READY, ready(rig, name)


@needs_writes
async def test_what_stops_jobs_in_slurm_is_never_undone_by_a_delete_or_a_resync(rig: Rig):
    jobs: list[str] = []
    names = ["e2e-s-down", "e2e-s-inactive", "e2e-s-admin", "e2e-s-nostate"]
    try:
        async with (
            keep_part_info(rig),
            running_syncer(rig, partitions=ON, jobs_poll_interval_s=QUICK_JOBS_S) as service,
        ):
            await scenarios(
                deleted_while_down=deleted_while_down(rig, jobs),
                deleted_while_inactive=deleted_while_inactive(rig, jobs),
                admin_down_is_kept=admin_down_is_kept(rig, service, jobs),
                unmanaged_state_is_left_alone=unmanaged_state_is_left_alone(rig, service),
            )
    finally:
        await cleanup(rig, names, names, jobs)


@needs_writes
async def test_an_admins_stop_right_after_a_write_is_kept_when_a_cr_change_leaves_the_status_to_the_next(
    rig: Rig,
):
    """A syncer of its own: a change of another CR in the same reconcile (a delete Slurm refuses) would make
    that reconcile re-read and write the statuses itself, and the rule would go untested."""
    name = "e2e-s-after-write"
    try:
        async with keep_part_info(rig), running_syncer(rig, partitions=ON) as service:
            await admin_stop_after_a_write_is_kept(rig, service)
    finally:
        await cleanup(rig, [name], [name], [])


# -- item 6: a relabelled busy node does not get its jobs preempted ----------------------------------------

PREEMPT = "PreemptType=preempt/partition_prio\nPreemptMode=CANCEL\n"


@contextlib.asynccontextmanager
async def preemption(rig: Rig) -> AsyncIterator[None]:
    """slurmctld preempting by partition priority (a higher tier's job cancels a lower tier's); put back."""
    path = rig.sandbox.slurm_conf
    original = path.read_text()
    path.write_text(original + PREEMPT)
    rig.scontrol("reconfigure")
    try:
        yield
    finally:
        path.write_text(original)
        rig.scontrol("reconfigure")


@needs_writes
async def test_a_relabelled_busy_node_joins_a_higher_tier_partition_only_once_its_jobs_end(rig: Rig):
    """Measured first on 26.05 (PreemptType=preempt/partition_prio, PreemptMode=CANCEL): a node running a
    tier-1 job added to a tier-10 partition with a job pending for it: the running job is PREEMPTED within
    2 s. Relabelling the node must not do that: it joins once its job has ended, with an Event."""
    real = rig.sandbox.real_node
    [spare] = fresh_slurm_nodes(1)
    node, spare_node = rig.bind_node(real), rig.bind_node(spare)
    label(rig, spare_node, {"pool": "e2e-high"})
    # the spare cannot run the high partition's job: it waits for the real node
    rig.scontrol("update", f"nodename={spare}", "state=drain", "reason=e2e-spare")
    names, jobs = ["e2e-low", "e2e-high"], []
    try:
        async with keep_part_info(rig), preemption(rig), running_syncer(rig, partitions=ON) as service:
            create_cr(rig, "e2e-low", {"nodes": {"hosts": [real]}, "priorityTier": 1})
            create_cr(rig, "e2e-high", {"nodes": {"selector": {"matchLabels": {"pool": "e2e-high"}}},
                                        "priorityTier": 10})  # fmt: skip
            for name in names:
                await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
            with until_told(rig, "e2e-low-job") as (wrap, end_the_job):
                out = rig.sandbox.run("sbatch", "--parsable", "--no-requeue", "-p", "e2e-low", "-w", real,
                                      "-c", "2", "--time=5", "--wrap", wrap)  # fmt: skip
                low = out.stdout.strip()
                assert low, out.stderr
                jobs.append(low)
                await wait_for(
                    lambda: job_state(rig, low).startswith("RUNNING"), 30, what="the low job running"
                )
                await wait_for(lambda: _busy(service, real), 15, what="the syncer to see the real node busy")
                out = rig.sandbox.run("sbatch", "--parsable", "-p", "e2e-high", "-c", "2", "--time=5",
                                      "--wrap", "true")  # fmt: skip
                high = out.stdout.strip()
                assert high, out.stderr
                jobs.append(high)
                label(rig, node, {"pool": "e2e-high"})  # the relabel
                held_or_preempted = lambda: (  # noqa: E731
                    NODES_HELD in reasons(rig, "e2e-high") or not job_state(rig, low).startswith("RUN")
                )
                await wait_for(held_or_preempted, 15, what="the syncer to hold the busy node out")
                assert job_state(rig, low).startswith("RUNNING"), f"preempted: {end_state(rig, low)}"
                held = await partition(rig, "e2e-high")
                assert held is not None and real not in held.nodes
                told = [m for r, m in zip(reasons(rig, "e2e-high"), _messages(rig, "e2e-high"), strict=True)
                        if r == NODES_HELD]  # fmt: skip
                assert real in told[0] and "preempt" in told[0], told
                await resynced(service)
                assert job_state(rig, low).startswith("RUNNING"), "a resync let the node in under its job"
                end_the_job()
                await wait_for(lambda: end_state(rig, low) != "", 30, what="the low job to end")
                assert end_state(rig, low) == "COMPLETED"
            await wait_for(
                lambda: _has(rig, "e2e-high", real), 15, what="the idle node in the high partition"
            )
            await wait_for(lambda: end_state(rig, high) != "", 60, what="the high job to run")
            assert end_state(rig, high) == "COMPLETED"
    finally:
        await cleanup(rig, names, names, jobs)


def _busy(service: SyncerService, name: str) -> bool:
    node = service.slurm_cache.nodes.get(name)
    return node is not None and node.base_state in ("ALLOCATED", "MIXED")


def _messages(rig: Rig, name: str) -> list[str]:
    return [e["message"] for e in rig.events_for(name) if e["involvedObject"]["kind"] == "SlurmPartition"]


async def _has(rig: Rig, name: str, node: str) -> bool:
    p = await partition(rig, name)
    return p is not None and node in p.nodes


# -- items 6, 7 and 8: membership, bounded ---------------------------------------------------------------


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def empty_selector_is_refused(rig: Rig) -> None:
    """Item 6: `selector: {}` would take every Node: refused, nothing written."""
    name = "e2e-s-all"
    create_cr(rig, name, {"nodes": {"selector": {}}})
    await wait_for(lambda: ready(rig, name).get("reason") in (INVALID, READY, "Creating"), 15,
                   what="the empty selector decided")  # fmt: skip
    assert ready(rig, name).get("reason") == INVALID, ready(rig, name)
    assert "spec.nodes.selector" in ready(rig, name)["message"]
    assert await partition(rig, name) is None


async def huge_hostlist_costs_nothing(rig: Rig) -> None:
    """Item 8: a hostlist of 10^7 names (10^11 took 24 GB) is refused before it is expanded: Invalid at
    once, naming the field and the limit, and the process does not grow."""
    grown_from = rss_mb()
    started = time.monotonic()
    for name, hosts in (("e2e-s-huge", "n[0-9999999]"), ("e2e-s-huger", "n[0-99999999999]")):
        create_cr(rig, name, {"nodes": {"hosts": [hosts]}})
        await wait_for(reason_is(rig, name, INVALID), 15, what=f"{name} Invalid")
        message = ready(rig, name)["message"]
        assert "spec.nodes.hosts[0]" in message and "at most" in message, message
        assert time.monotonic() - started < 5, f"{name}: {time.monotonic() - started:.1f} s"
        assert rss_mb() - grown_from < 100, f"{name}: the process grew {rss_mb() - grown_from:.0f} MB"
        assert await partition(rig, name) is None


async def two_slurmd_pods_on_a_node_both_join(rig: Rig) -> None:
    """Item 7: a Node hosting two slurmd pods contributes both Slurm nodes, every time."""
    name = "e2e-s-twopods"
    first, second = fresh_slurm_nodes(2)
    node, _pod = rig.bind_pod(first, node_labels={"pool": "e2e-twopods"})
    rig.used.append(second)
    rig.kube.create("", "v1", "pods", {
        "metadata": {"name": f"slurmd-{second}", "labels": {Keys.NODE_NAME_LABEL: second}},
        "spec": {"nodeName": node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
    }, namespace=NAMESPACE)  # fmt: skip
    create_cr(rig, name, {"nodes": {"selector": {"matchLabels": {"pool": "e2e-twopods"}}}})
    await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
    p = await partition(rig, name)
    assert p is not None and set(p.nodes) == {first, second}, p


@needs_writes
async def test_membership_is_bounded_refused_when_it_would_take_every_node_and_counts_every_pod(rig: Rig):
    names = ["e2e-s-all", "e2e-s-huge", "e2e-s-huger", "e2e-s-twopods"]
    try:
        async with keep_part_info(rig), running_syncer(rig, partitions=ON):
            await scenarios(
                empty_selector_is_refused=empty_selector_is_refused(rig),
                huge_hostlist_costs_nothing=huge_hostlist_costs_nothing(rig),
                two_slurmd_pods_on_a_node_both_join=two_slurmd_pods_on_a_node_both_join(rig),
            )
    finally:
        await cleanup(rig, names, names, [])


# -- item 10: refusals, claims and failovers --------------------------------------------------------------


async def refused_is_not_retried_until_the_cr_changes(rig: Rig, service: SyncerService) -> None:
    """Item 10: a value Slurm refuses is not sent again by resyncs or other CRs' changes, only once the CR
    changes; and a create Slurm refused leaves no `created` claim: a same-named partition an admin makes
    later is foreign (Conflict), and stays when the CR goes."""
    name = "e2e-s-refused"
    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "qos": "nosuchqos"})
    await wait_for(reason_is(rig, name, INVALID), 15, what=f"{name} Invalid")
    sent = sum(n for (kind, _status), n in slurm_writes(service).items() if kind == "partition_update")
    await resynced(service)
    await resynced(service)
    again = sum(n for (kind, _status), n in slurm_writes(service).items() if kind == "partition_update")
    assert again == sent, f"a refused write was sent again {again - sent} time(s) without a change"
    owner = ((cr(rig, name) or {})["metadata"].get("annotations") or {}).get(Keys.PARTITION_OWNER)
    assert owner != "created", "a create Slurm refused left a `created` claim"
    # an admin makes a partition of that name; the CR's author then fixes the CR
    rig.scontrol("create", f"partitionname={name}", f"nodes={rig.sandbox.real_node}", "maxtime=7")
    patch_cr(rig, name, {"qos": None, "maxTime": 30})
    await wait_for(reason_is(rig, name, CONFLICT), 15, what="the admin's partition foreign")
    delete_cr(rig, name)
    await wait_for(lambda: cr(rig, name) is None, 15, what="the CR gone")
    kept = await partition(rig, name)
    assert kept is not None and kept.settings.max_time == 7, "the admin's partition was taken or deleted"


async def adopt_after_failover_keeps_created(rig: Rig, service: SyncerService) -> None:
    """Item 10: a replica whose informer has not shown the `created` claim yet (after a failover) plans an
    adopting claim for the partition it finds; the claim must not rewrite `created` to `adopted`, or the
    partition would never be removed with its CR."""
    name = "e2e-s-adopt"
    create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "adopt": True})
    await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
    obj = cr(rig, name)
    assert obj is not None and obj["metadata"]["annotations"][Keys.PARTITION_OWNER] == "created"
    stale = {**obj, "metadata": {**obj["metadata"], "annotations": {}}}  # the lagging replica's view
    stale["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) - 1)
    controller = service.partitions
    assert controller is not None
    from syncer.controllers.partitions.plan import Action

    await controller._carry_out(Action("claim", name, name, ownership="adopted"), stale)
    owner = ((cr(rig, name) or {})["metadata"].get("annotations") or {}).get(Keys.PARTITION_OWNER)
    assert owner == "created", f"the claim became {owner!r}"
    delete_cr(rig, name)
    await wait_for(lambda: cr(rig, name) is None, 15, what="the CR gone")
    assert await partition(rig, name) is None, "the partition it created outlived its CR"


@needs_writes
async def test_a_refusal_is_told_once_and_leaves_no_claim_and_a_failover_keeps_what_was_created(rig: Rig):
    names = ["e2e-s-refused", "e2e-s-adopt"]
    try:
        async with keep_part_info(rig), running_syncer(rig, partitions=ON) as service:
            await scenarios(
                refused_is_not_retried_until_the_cr_changes=refused_is_not_retried_until_the_cr_changes(
                    rig, service
                ),
                adopt_after_failover_keeps_created=adopt_after_failover_keeps_created(rig, service),
            )
    finally:
        await cleanup(rig, names, names, [])


# -- item 9: reads grow with changes, not with the queue ---------------------------------------------------


def requests(service: SyncerService, endpoint: str) -> int:
    return sum(n for (kind, _status), n in service.slurm.stats.requests.items() if kind == endpoint)


@needs_writes
async def test_a_reconcile_reads_no_job_list_and_a_draining_cr_waits_for_its_jobs_to_move(rig: Rig):
    """Item 9: a partition reconcile lists no job (the job counts are the service's one job poll), reads
    /conf once, not per reconcile, and a CR draining behind a running job is not looked at every second:
    the job poll that sees its jobs move starts the reconcile that deletes it."""
    name, jobs = "e2e-s-reads", []
    try:
        async with (
            keep_part_info(rig),
            running_syncer(rig, partitions=ON, resync_s=600.0, jobs_poll_interval_s=QUICK_JOBS_S) as service,
        ):
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

            create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}, "maxTime": 30})
            await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
            await wait_for(quiet, 15, what="the controller quiet")
            conf, listed = requests(service, "conf"), requests(service, "jobs")
            polls, reloads = controller_jobs_polls(service), service.slurm_cache.stats.reloads
            for minutes in (31, 32, 33):
                patch_cr(rig, name, {"maxTime": minutes})
                await wait_for(partial(_max_time, rig, name, minutes), 15, what=f"maxTime {minutes}")
                await wait_for(quiet, 15, what="the controller quiet")
            # read again after a reload only (keep_part_info's reconfigure may be seen late)
            reread = service.slurm_cache.stats.reloads - reloads
            assert requests(service, "conf") <= conf + reread, "/conf read again per reconcile"
            # the service's poll lists jobs where slurmctld's metrics are off: those are not the controller's
            assert requests(service, "jobs") - listed <= controller_jobs_polls(service) - polls
            with until_told(rig, name) as (wrap, end_the_job):
                job, err = submit(rig, name, 0, wrap=wrap)
                assert job, err
                jobs.append(job)
                await wait_for(lambda: job_state(rig, job).startswith("RUNNING"), 30, what="the job running")
                delete_cr(rig, name)
                await wait_for(reason_is(rig, name, DRAINING), 15, what="draining behind the job")
                await wait_for(quiet, 15, what="the draining CR left alone until its jobs move")
                end_the_job()
                await wait_for(lambda: end_state(rig, job) != "", 30, what="the job to end")
            await wait_for(lambda: cr(rig, name) is None, 15, what="deleted once the poll saw the job end")
            assert await partition(rig, name) is None
    finally:
        await cleanup(rig, [name], [name], jobs)


def controller_jobs_polls(service: SyncerService) -> int:
    """How many times the service's job poll has read slurmrestd's job list (not slurmctld's metrics)."""
    return int(service.metrics.exporter_reads.labels("jobs", "slurmrestd")._value.get())


async def _max_time(rig: Rig, name: str, minutes: int) -> bool:
    p = await partition(rig, name)
    return p is not None and p.settings.max_time == minutes


# -- item 7: a NodeSet's members, powered down or not ------------------------------------------------------


async def power_members_all_count(rig: Rig) -> None:
    """Item 7 (the partition's side; the NodeSet's side gives the names): a power NodeSet's members are
    declared to Slurm powered down, without pods. A partition naming the NodeSet has every one of them, so
    that Slurm can power them up for its jobs (the old code counted members with pods only: none)."""
    name, cr_name = "e2e-s-pw", "e2e-s-burst"
    body = power_manifest(name, 3)
    body["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "nodeset"}
    rig.kube.create(NODESET_GROUP, NODESET_VERSION, "nodesets", body, namespace=NAMESPACE)
    members = {f"{name}-{i}" for i in range(3)}
    await wait_for(
        lambda: members <= set(rig.sandbox.run("sinfo", "-h", "-N", "-o", "%N").stdout.split()), 30,
        what="3 members declared to Slurm",
    )  # fmt: skip
    create_cr(rig, cr_name, {"nodes": {"nodeSets": [{"namespace": NAMESPACE, "name": name}]}})

    async def all_members() -> bool:  # each joins once Slurm shows it as the NodeSet's own (its stamp)
        p = await partition(rig, cr_name)
        return p is not None and set(p.nodes) == members

    await wait_for(all_members, 20, what="the partition over all 3 members, powered down, without pods")
    await wait_for(reason_is(rig, cr_name, READY), 15, what=f"{cr_name} Ready")


async def empty_nodeset_is_refused(rig: Rig) -> None:
    """Item 7: a NodeSet with no pods and no power members does not empty the partition without a word."""
    name, cr_name = "e2e-s-none", "e2e-s-empty"
    rig.kube.create(NODESET_GROUP, NODESET_VERSION, "nodesets", manifest(name, 0), namespace=NAMESPACE)
    create_cr(rig, cr_name, {"nodes": {"nodeSets": [{"namespace": NAMESPACE, "name": name}]}})
    await wait_for(lambda: bool(ready(rig, cr_name).get("reason")), 15, what=f"{cr_name} decided")
    assert ready(rig, cr_name).get("reason") == INVALID, ready(rig, cr_name)
    assert f"NodeSet {NAMESPACE}/{name} has no members" in ready(rig, cr_name)["message"]
    assert await partition(rig, cr_name) is None


@needs_writes
async def test_a_nodeset_named_counts_every_member_it_declares_and_one_without_members_is_refused(rig: Rig):
    names = ["e2e-s-burst", "e2e-s-empty"]
    ensure_pool(rig)
    try:
        async with (
            keep_part_info(rig),
            running_syncer(rig, partitions=ON, nodeset=NodeSetOptions(requeue_s=0.5)),
        ):
            await scenarios(
                power_members_all_count=power_members_all_count(rig),
                empty_nodeset_is_refused=empty_nodeset_is_refused(rig),
            )
    finally:
        await cleanup(rig, names, names, [])
        for nodeset in ("e2e-s-pw", "e2e-s-none"):
            with contextlib.suppress(Exception):
                rig.kube.api.delete(
                    rig.kube.api.resource(NODESET_GROUP, NODESET_VERSION, "nodesets"), NAMESPACE, nodeset
                )
        delete_slurm_nodes(rig, "e2e-s-pw-")


@needs_writes
@pytest.mark.only_where(SELECTED.openmetrics, "the job counts from slurmctld's metrics need them")
async def test_with_slurmctlds_metrics_the_partitions_and_the_job_counts_read_no_job_list(rig: Rig):
    """Item 9: where slurmctld's metrics work, the job counts (the partition controller's and the
    exporter's) come from them: not one `GET /jobs`, also while the hint is still locating slurmctld at
    start (the service's first job poll listed every job then: at 100,000 held jobs one such list made
    slurmrestd grow past 15 GB)."""
    name = "e2e-s-metrics"
    try:
        async with (
            keep_part_info(rig),
            running_syncer(rig, partitions=ON, slurm_metrics_url="auto", jobs_poll_interval_s=0.3) as service,
        ):
            create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}})
            await wait_for(reason_is(rig, name, READY), 15, what=f"{name} Ready")
            await wait_for(lambda: service.job_counts_source == "slurmctld_metrics", 15,
                           what="the job counts read from slurmctld's metrics")  # fmt: skip
            assert requests(service, "jobs") == 0, "a job list was read"
    finally:
        await cleanup(rig, [name], [name], [])
