"""NodeSet ownership by identity, end to end: a NodeSet `X` beside a NodeSet `X-a`, and two NodeSets
`X` in two namespaces, never touch each other's pods or Slurm records through scale-in or deletion,
whatever their names and drain reasons have in common (real slurmctld, emulator, slurmd stand-ins)."""

from __future__ import annotations

from typing import Any

import pytest

from syncer.model.keys import Keys
from syncer.slurm.errors import SlurmNotFound
from tests.e2e.rig import NAMESPACE, Rig, fresh_slurm_nodes
from tests.e2e.test_nodeset import GROUP, VERSION, Set, manifest, nodeset_rig, ready
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
TWIN_NAMESPACE = "team-b"


def members(nodeset: Set) -> dict[str, dict[str, Any]]:
    """The NodeSet's own pods, by its label (another NodeSet's pods may share the name prefix)."""
    return nodeset.pods()


async def registered(rig: Rig, names: set[str]) -> bool:
    for name in names:
        try:
            node = await rig.reader.get_node(name)
        except SlurmNotFound:
            return False
        if node.base_state not in ("IDLE", "ALLOCATED", "MIXED"):
            return False
    return True


async def test_nodesets_sharing_a_name_prefix_or_a_name_never_touch_each_other(rig: Rig):
    async with nodeset_rig(rig) as (gpu, service, _standin):  # `X`, nodeOnScaleIn Delete, 0 replicas
        gpu_a = Set(rig, f"{gpu.name}-a")
        rig.kube.create(
            GROUP, VERSION, "nodesets",
            manifest(gpu_a.name, 2, slurm={"features": ["nsfeat"], "nodeOnScaleIn": "Keep"}),
            namespace=NAMESPACE,
        )  # fmt: skip
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": TWIN_NAMESPACE}})
        twin = manifest(gpu.name, 0)
        twin["metadata"]["namespace"] = TWIN_NAMESPACE
        rig.kube.create(GROUP, VERSION, "nodesets", twin, namespace=TWIN_NAMESPACE)
        names_a = {gpu_a.member(0), gpu_a.member(1)}

        async def a_running() -> bool:
            pods = members(gpu_a)
            return (
                set(pods) == names_a
                and all(ready(p) for p in pods.values())
                and await registered(rig, names_a)
            )

        await wait_for(a_running, deadline_s=90, what=f"{gpu_a.name} running two registered members")
        # X-a scales in by one: its member X-a-1 is drained "k8s: scale-in of NodeSet X-a" (which
        # contains "scale-in of NodeSet X" and starts with "X-"), its pod goes, its record stays (Keep)
        gpu_a.patch_spec({"replicas": 1})
        kept = gpu_a.member(1)

        async def scaled_in_and_kept() -> bool:
            if kept in members(gpu_a):
                return False
            node = await rig.slurm(kept)
            return node.drain_flag and f"scale-in of NodeSet {gpu_a.name}" in node.reason

        await wait_for(scaled_in_and_kept, deadline_s=60, what=f"{kept} scaled in, record kept")
        # X now works beside it: scale-out, then every NodeSet reconciled again and again
        gpu.patch_spec({"replicas": 1})
        await wait_for(
            lambda: set(members(gpu)) == {gpu.member(0)} and all(ready(p) for p in members(gpu).values()),
            deadline_s=90,
            what=f"{gpu.name} running its member",
        )
        for _ in range(3):
            assert service.nodesets is not None
            await service.nodesets.runner.resync()
            await service.nodesets.queue.wait_idle()
        node = await rig.slurm(kept)  # never deleted by X, whose Delete policy would have matched it
        assert f"scale-in of NodeSet {gpu_a.name}" in node.reason
        assert node.comment.startswith(f"{Keys.NODESET_LABEL}={NAMESPACE}/{gpu_a.name} uid=")
        assert set(members(gpu_a)) == {gpu_a.member(0)}  # X-a's remaining pod untouched
        # X scales in with a job on its member: the removal waits, the engine drains for X
        member = gpu.member(0)
        await wait_for(lambda: registered(rig, {member}), deadline_s=60, what=f"{member} registered")
        gpu.submit(member, 300)
        await wait_for(lambda: gpu.status().get("slurm", {}).get("allocated") == 1, what="job running")
        gpu.patch_spec({"replicas": 0})

        async def draining() -> bool:
            return (await rig.slurm(member)).drain_flag

        await wait_for(draining, deadline_s=30, what=f"{member} draining for the scale-in of {gpu.name}")
        undrains = service.engine.stats.actions.get(("undrain", "k8s_to_slurm", "ok"), 0)
        # the twin of the same name in another namespace is deleted: X's removal is not forgotten
        rig.kube.api.delete(rig.kube.api.resource(GROUP, VERSION, "nodesets"), TWIN_NAMESPACE, gpu.name)
        assert service.nodesets is not None
        await wait_for(
            lambda: f"{TWIN_NAMESPACE}/{gpu.name}" not in service.nodesets.informer.items,  # type: ignore[union-attr]
            what="the twin's deletion seen",
        )
        await service.nodesets.queue.wait_idle()
        await service.engine.queue.wait_idle()
        owner = service.engine.scale_in.get(member)
        assert owner is not None and (owner.namespace, owner.name) == (NAMESPACE, gpu.name)
        assert service.engine.stats.actions.get(("undrain", "k8s_to_slurm", "ok"), 0) == undrains
        assert (await rig.slurm(member)).drain_flag
        assert member in members(gpu)  # still waiting for its job, as it should


async def test_the_removal_stamp_is_written_and_cleared_through_slurmrestd(rig: Rig):
    """What the reconciler relies on: the comment it writes is read back as written, and an empty
    comment clears it (a cancelled removal), on this Slurm release."""
    (name,) = fresh_slurm_nodes(1)
    stamp = f"{Keys.NODESET_LABEL}={NAMESPACE}/gpu uid=5f0c"
    try:
        await rig.reader.update_node(name, comment=stamp)
        assert (await rig.slurm(name)).comment == stamp
        await rig.reader.update_node(name, comment="")
        assert (await rig.slurm(name)).comment == ""
    finally:
        rig.scontrol("update", f"nodename={name}", "comment=")
