"""A partition of Slinky's that KeepPartInfo keeps unlike its slurm.conf line (docs/interop.md): the real
slurmctld keeps the partition through the reconfigure Slinky runs, the syncer says so on the Slinky
Controller (one Warning Event naming the key, both values and the command) and in
`slurm_syncer_slinky_partition_drift`, writes nothing, and clears the gauge once the command it named has
been run. The same for a line the Controller drops. Slinky's side is played as in test_partitions.py:
slurm.conf written and reconfigured as its operator does, its Controller's extraConf carrying the line."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, MutableMapping
from typing import Any

import pytest

from syncer.app.service import SyncerService
from syncer.controllers.partitions.plan import INVALID
from syncer.controllers.partitions.recheck import SLINKY_RECHECK_S
from syncer.controllers.partitions.slinky_frozen import REASON
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.sandbox import SandboxError
from tests.e2e.rig import Rig, get, running_syncer, sample
from tests.e2e.test_partitions import (
    KEEP_ONLY,
    SLINKY,
    cleanup,
    create_cr,
    keep_part_info,
    needs_writes,
    partition,
    ready,
    reason_is,
    refused_oversubscribe,
    slinky_object,
    slinky_served,
    slurm_writes,
)
from tests.helpers import captured_logs, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
NAME = "e2e-sl-frozen"
CONTROLLER = "Controller slurm/slurm"


def told(rig: Rig) -> list[dict[str, Any]]:
    return [
        e for e in rig.events_for("slurm")
        if e["involvedObject"]["kind"] == "Controller" and e["reason"] == REASON
    ]  # fmt: skip


async def drift(service: SyncerService) -> float | None:
    _status, text = await get(service, "/metrics")
    return sample(text, "slurm_syncer_slinky_partition_drift", partition=NAME, object=CONTROLLER)


def drift_is(service: SyncerService, value: float) -> Callable[[], Any]:
    async def check() -> bool:
        return await drift(service) == value

    return check


def max_time_is(rig: Rig, minutes: int) -> Callable[[], Any]:
    async def check() -> bool:
        found = await partition(rig, NAME)
        return found is not None and found.settings.max_time == minutes

    return check


@needs_writes
async def test_a_changed_line_kept_by_keep_part_info_is_told_once_and_cleared_by_the_command_it_names(
    rig: Rig,
):
    real, conf = rig.sandbox.real_node, rig.sandbox.slurm_conf
    try:
        async with keep_part_info(rig):
            with_keep = conf.read_text()

            def slinky_writes(extra: str) -> None:
                """Slinky's operator: the Controller's extraConf into slurm.conf, then a reconfigure."""
                conf.write_text(with_keep + extra + "\n")
                rig.scontrol("reconfigure")
                spec = {"spec": {"extraConf": f"{KEEP_ONLY}\n{extra}"}}
                rig.kube.patch("slinky.slurm.net", "v1beta1", "controllers", "slurm", spec, namespace="slurm")

            line = f"PartitionName={NAME} Nodes={real} MaxTime=30 State=UP"
            conf.write_text(with_keep + line + "\n")
            rig.scontrol("reconfigure")  # a new line is added, KeepPartInfo or not
            await wait_for(max_time_is(rig, 30), 30, what="slurm.conf's partition in slurmctld")
            with slinky_served(rig):
                declared = {"extraConf": f"{KEEP_ONLY}\n{line}"}
                slinky_object(rig, "controllers", "Controller", "slurm", declared)
                # resyncs far apart: only the syncer's own look again sees the `scontrol update`
                async with running_syncer(rig, partitions=SLINKY, resync_s=600.0) as service:
                    # the line changes: slurmctld keeps MaxTime=30 through the reconfigure
                    slinky_writes(f"partitionname={NAME} nodes={real} maxtime=60 state=UP")
                    await wait_for(drift_is(service, 1), 30, what="the drift gauge at 1")
                    await wait_for(lambda: bool(told(rig)), 10, what="the SlinkyPartitionFrozen Event")
                    (event,) = told(rig)
                    message = event["message"]
                    assert event["type"] == "Warning", event
                    assert "MaxTime=60 (slurmctld has MaxTime=30)" in message, message
                    assert "State" not in message.split("`")[0], message  # an agreeing key is not named
                    command = message.split("`")[1]
                    assert command == f"scontrol update partitionname={NAME} MaxTime=60", message
                    assert await max_time_is(rig, 30)(), "KeepPartInfo did not keep the partition"
                    rig.scontrol(*command.split()[1:])  # as the Event says
                    await wait_for(drift_is(service, 0), 30, what="the drift gauge back at 0")
                    assert len(told(rig)) == 1 and told(rig)[0].get("count", 1) == 1, told(rig)

                    # the line is dropped: slurmctld keeps the partition
                    slinky_writes("")
                    await wait_for(drift_is(service, 1), 30, what="the dropped line told")
                    await wait_for(lambda: len(told(rig)) == 2, 10, what="a second Event for the drop")
                    dropped = [e["message"] for e in told(rig) if "no longer in slurm.conf" in e["message"]]
                    assert dropped and f"scontrol delete partitionname={NAME}" in dropped[0], told(rig)
                    assert await partition(rig, NAME) is not None
                    rig.scontrol("delete", f"partitionname={NAME}")
                    await wait_for(drift_is(service, 0), 30, what="the drift gauge at 0 once deleted")
                    assert slurm_writes(service) == {}, "the syncer wrote a partition"
    finally:
        with contextlib.suppress(SandboxError):
            rig.scontrol("delete", f"partitionname={NAME}")


@needs_writes
async def test_a_conf_read_refused_is_tried_again_by_itself_and_the_kept_line_told_then(rig: Rig):
    """/conf refused (KeepPartInfo unknown): nothing is compared, and the controller looks again by itself,
    as no change of Slinky's or Slurm's may come to start a reconcile (resyncs 600 s apart here)."""
    real = rig.sandbox.real_node
    conf_read = ("GET", "/conf")
    try:
        async with keep_part_info(rig), FaultProxy(rig.sandbox.rest_url) as proxy:
            # where the first test ends up after Slinky's change (slurmctld kept MaxTime=30), without its two
            # reconfigures: the syncer reads the Controller's line, not the file
            rig.scontrol("create", f"partitionname={NAME}", f"nodes={real}", "maxtime=30", "state=up")
            changed = f"PartitionName={NAME} Nodes={real} MaxTime=60 State=UP"
            with slinky_served(rig):
                slinky_object(
                    rig, "controllers", "Controller", "slurm", {"extraConf": f"{KEEP_ONLY}\n{changed}"}
                )
                proxy.failing[conf_read] = 500  # an answer the client does not retry: one per look
                async with running_syncer(
                    rig, slurm_url=proxy.url, partitions=SLINKY, resync_s=600.0
                ) as service:
                    # more looks than the start's own reconciles make
                    await wait_for(lambda: proxy.failed.get(conf_read, 0) >= 3, 30, what="/conf asked again")
                    assert await drift(service) is None and told(rig) == [], "compared without /conf"
                    del proxy.failing[conf_read]
                    await wait_for(drift_is(service, 1), 30, what="the drift gauge at 1 once /conf answers")
                    (event,) = told(rig)
                    assert "MaxTime=60 (slurmctld has MaxTime=30)" in event["message"], event
                    assert slurm_writes(service) == {}, "the syncer wrote a partition"
    finally:
        with contextlib.suppress(SandboxError):
            rig.scontrol("delete", f"partitionname={NAME}")


@needs_writes
async def test_a_reconcile_that_stops_a_cr_as_a_difference_is_told_still_reads_it_again(rig: Rig):
    """A reconcile that tells a difference (gauge 1) and stops a CR with /conf read (Slurm refused its
    partition's create again, the reload having let it be sent once more: `Invalid`) still comes back within
    10 s, as every reconcile does while a difference stands, so the `scontrol update` the Event names clears
    the gauge (it starts no reconcile; resyncs 600 s apart). It was `Terminal`, and with no recheck pending
    (no difference stood before) the gauge stayed at 1. The rechecks send the refused create no more (Slurm's
    refusal is remembered). Slurm refuses for real: the proxy puts a value it refuses into each partition
    write. The reconfigure is Slinky's (slurm.conf changed): KeepPartInfo keeps what `scontrol update` set."""
    real, ours = rig.sandbox.real_node, "e2e-sl-stopped"
    post = ("POST", "/partitions/")
    try:
        async with keep_part_info(rig), FaultProxy(rig.sandbox.rest_url) as proxy:
            rig.scontrol("create", f"partitionname={NAME}", f"nodes={real}", "maxtime=60", "state=up")
            line = f"PartitionName={NAME} Nodes={real} MaxTime=60 State=UP"
            with slinky_served(rig), captured_logs() as logs:
                declared = {"extraConf": f"{KEEP_ONLY}\n{line}"}
                slinky_object(rig, "controllers", "Controller", "slurm", declared)
                async with running_syncer(
                    rig, slurm_url=proxy.url, partitions=SLINKY, resync_s=600.0
                ) as service:
                    controller = service.partitions
                    assert controller is not None
                    queue = controller.runner.queue
                    proxy.rewriting[post] = refused_oversubscribe
                    create_cr(rig, ours, {"nodes": {"hosts": [real]}})
                    await wait_for(reason_is(rig, ours, INVALID), 10, what=f"{ours} refused by Slurm")
                    assert "error 9001" in ready(rig, ours)["message"], ready(rig, ours)
                    await wait_for(lambda: queue.depth == queue.in_flight == queue.delayed == 0, 10,
                                   what="the controller quiet: no difference, the refusal told")  # fmt: skip
                    assert await drift(service) is None

                    # kept unlike the Controller's line, told by the reconcile the reload starts, which sends
                    # the refused create again (a reload may let Slurm take it) and stops the CR
                    rig.scontrol("update", f"partitionname={NAME}", "maxtime=30")
                    sent, reloads = proxy.rewritten[post], service.slurm_cache.stats.reloads
                    rig.scontrol("reconfigure")
                    await wait_for(drift_is(service, 1), 30, what="the drift gauge at 1")
                    await wait_for(lambda: proxy.rewritten[post] > sent, 10, what="the create sent again")

                    def retried() -> list[MutableMapping[str, Any]]:
                        return [e for e in logs.entries if e["event"] == "reconcile failed, retrying"
                                and e.get("controller") == "partitions" and ours in e["error"]]  # fmt: skip

                    await wait_for(lambda: bool(retried()), 10, what="the stopped reconcile retried")
                    assert retried()[0]["retry_in_s"] == SLINKY_RECHECK_S, retried()[0]
                    rig.scontrol("update", f"partitionname={NAME}", "MaxTime=60")  # as the Event says
                    await wait_for(drift_is(service, 0), 30, what="the drift gauge back at 0")
                    resent = proxy.rewritten[post] - sent
                    told = service.slurm_cache.stats.reloads - reloads  # a reconfigure: one reload or two
                    assert resent <= told, f"the refused create sent {resent} times over {told} reload(s)"
                    assert reason_is(rig, ours, INVALID)(), "the refusal stands until the CR or Slurm changes"
    finally:
        with contextlib.suppress(SandboxError):
            rig.scontrol("delete", f"partitionname={NAME}")
        await cleanup(rig, [ours], [ours], [])
