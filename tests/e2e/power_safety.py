"""Power-managed NodeSets under blips, neighbours and bad input (issue 45): scenarios that run side by side
with tests/e2e/test_nodeset_power.py's under its one syncer (their waits for slurmctld's 30 s check overlap),
each with NodeSets, features, Nodes and zones of its own (NodeSets `pws<n>`). Each lost a job, or took what
was not its own, on the code before issue 45."""

from __future__ import annotations

import asyncio
import itertools
import re
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from syncer.app.service import SyncerService
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.model.keys import Keys
from syncer.testing.sandbox import up
from syncer.testing.sandbox.config import free_port_block
from syncer.testing.slurmd_standin import HANGS, SlurmdStandIn
from tests.e2e.rig import NAMESPACE, Rig, condition, get, node_body, running_syncer, sample, sync
from tests.e2e.test_nodeset import GROUP, VERSION, Set
from tests.e2e.test_nodeset_power import SLOW_S, Ports, declared, power_body, state_of, wait_slurm
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

ZONE = "topology.kubernetes.io/zone"
_names = itertools.count(1)


def new_set(rig: Rig) -> Set:
    return Set(rig, f"pws{next(_names)}")


async def run(rig: Rig, *argv: str) -> str:
    """A Slurm command in the sandbox, off the event loop (the syncer under test shares it)."""
    return (await asyncio.to_thread(rig.sandbox.run, *argv, check=True)).stdout


async def submit(rig: Rig, *args: str) -> str:
    out = await run(rig, "sbatch", "--parsable", *args)
    return out.strip().split(";")[0]


async def job_state(rig: Rig, job: str) -> str:
    out = (await asyncio.to_thread(rig.sandbox.run, "scontrol", "show", "job", job)).stdout
    found = re.search(r"JobState=(\S+)", out)
    return found.group(1) if found else "GONE"


async def job_reaches(rig: Rig, job: str, states: tuple[str, ...], deadline_s: float) -> str:
    """Until the job is in one of `states`, or has ended (the state it ended in is returned)."""
    seen = ""

    async def reached() -> bool:
        nonlocal seen
        seen = await job_state(rig, job)
        return seen in states or seen not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING")

    await wait_slurm(reached, deadline_s=deadline_s, what=f"job {job} {' or '.join(states)}")
    return seen


def until_told(rig: Rig, name: str) -> tuple[str, Callable[[], None]]:
    """(the `--wrap` of a job that ends when told, the call that tells it): a file in the jobs' working
    directory, not a time: on a busy machine a timed job could end before the test saw what must happen."""
    done = rig.sandbox.directory / "work" / f"{name}.done"
    done.unlink(missing_ok=True)
    return f"while [ ! -e {name}.done ]; do sleep 0.2; done", done.touch


async def passes_after(service: SyncerService, nodeset: str, since: float, count: int = 2) -> None:
    """Until `count` reconciles of the NodeSet that began after `since` (the controller's clock) are done:
    an assertion that nothing was done is then about a syncer that had its chance."""
    assert service.nodesets is not None
    stats, key = service.nodesets.stats, f"{NAMESPACE}/{nodeset}"
    # a pass waits for fresh Slurm data, which a loaded machine holds back 10 s and more at times
    await wait_for(
        lambda: stats.pass_began.get(key, 0.0) > since,
        deadline_s=SLOW_S,
        what=f"a pass of {key} after the change",
    )
    first = stats.passes.get(key, 0)
    await wait_for(
        lambda: stats.passes.get(key, 0) >= first + count - 1,
        deadline_s=SLOW_S,
        what=f"{count} passes of {key}",
    )


def now(service: SyncerService) -> float:
    assert service.nodesets is not None
    return service.nodesets.clock()


def not_ready(rig: Rig, node: str) -> None:
    """The kubelet stops posting status (certificates expired, the API server lost the Node's lease)."""
    rig.kube.set_node_condition(
        node, "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
    )


def ready_again(rig: Rig, node: str) -> None:
    rig.kube.set_node_condition(node, "Ready", "True", "KubeletReady", "kubelet is posting ready status")


def create(rig: Rig, body: dict[str, Any]) -> None:
    rig.kube.create(GROUP, VERSION, "nodesets", body, namespace=NAMESPACE)


def add_nodes(rig: Rig, prefix: str, count: int, labels: dict[str, str]) -> list[str]:
    hosts = [f"{prefix}-h{i}" for i in range(count)]
    for host in hosts:
        rig.kube.create("", "v1", "nodes", node_body(host, labels))
    return hosts


def forced(reason: str) -> bool:
    """A reason of the syncer's POWER_DOWN_FORCE for a member that could not run."""
    return reason.startswith("k8s: pod ") and any(
        why in reason for why in ("lost its Node", "CrashLoopBackOff", "Unschedulable", "Failed")
    )


async def a_not_ready_node_under_a_busy_member_costs_no_job(rig: Rig, service: SyncerService) -> None:
    """Item 1: the member's Node turns Ready=Unknown for longer than startTimeout while its slurmd keeps
    answering Slurm: the --no-requeue job on it runs to its end (it ended NODE_FAIL 2 s in before)."""
    nodeset = new_set(rig)
    (host,) = add_nodes(rig, nodeset.name, 1, {"pool": nodeset.name, ZONE: nodeset.name})
    create(rig, power_body(nodeset.name, 1, (nodeset.name,), pool=nodeset.name, startTimeout="2s"))
    await declared(nodeset, 1)
    wrap, release = until_told(rig, nodeset.name)
    try:
        job = await submit(rig, "--no-requeue", "-N", "1", f"--constraint={nodeset.name}", "--wrap", wrap)
        assert await job_reaches(rig, job, ("RUNNING",), SLOW_S) == "RUNNING"
        lost_at = now(service)
        not_ready(rig, host)
        # past startTimeout, and a few passes more: the old code forced the member down here
        await passes_after(service, nodeset.name, lost_at + 2.5, count=3)
        node = await rig.slurm(nodeset.member(0))
        assert not forced(node.reason), node.reason
        assert not node.state & {"POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN"}, node.state
        assert await job_state(rig, job) == "RUNNING"
        release()
        assert await job_reaches(rig, job, ("COMPLETED",), SLOW_S) == "COMPLETED"
        assert not nodeset.events("PowerUpFailed")
    finally:
        release()
        ready_again(rig, host)


async def a_zone_gone_not_ready_holds_power_downs_and_says_so(rig: Rig, service: SyncerService) -> None:
    """Item 1: every Node of a zone turns Ready=Unknown at once (an API server that lost them, a network
    partition): a member Slurm powers up there is not forced down after startTimeout, as Kubernetes' node
    lifecycle controller stops evicting in a full disruption; an Event and a metric say so, and the metric
    clears when the Nodes return."""
    nodeset = new_set(rig)
    zone = nodeset.name
    hosts = add_nodes(rig, zone, 3, {"pool": zone, ZONE: zone})
    body = power_body(nodeset.name, 1, (zone,), pool=zone, startTimeout="2s")
    body["spec"]["template"]["spec"]["containers"][0]["image"] = f"{HANGS}slurmd"  # stays POWERING_UP
    create(rig, body)
    await declared(nodeset, 1)
    member = nodeset.member(0)
    job = await submit(rig, "--requeue", "-N", "1", f"--constraint={zone}", "--wrap", "true")
    try:
        await wait_for(
            lambda: any(
                (condition(p, "Ready") or {}).get("status") == "True" for p in nodeset.pods().values()
            ),
            deadline_s=SLOW_S,
            what="the member's pod Running and Ready",
        )
        lost_at = now(service)
        for host in hosts:
            not_ready(rig, host)
        await wait_for(
            lambda: bool(nodeset.events("NodeDisruption")), deadline_s=SLOW_S, what="a NodeDisruption Event"
        )
        message = nodeset.events("NodeDisruption")[0]["message"]
        assert zone in message and "3 of 3" in message, message

        async def disrupted(value: float) -> bool:
            _status, text = await get(service, "/metrics")
            return sample(text, "slurm_syncer_nodeset_power_disruption", zone=zone) == value

        # the metric holds at 1 while the Nodes stay NotReady and at 0 once they are back: each a state
        # that lasts, set at the NodeSet's next pass (a loaded machine delays it)
        await wait_slurm(lambda: disrupted(1.0), deadline_s=SLOW_S, what="the disruption metric at 1")
        await passes_after(service, nodeset.name, lost_at + 2.5, count=3)
        node = await rig.slurm(member)
        assert not forced(node.reason), node.reason
        assert "POWERING_UP" in node.state, node.state
        assert not nodeset.events("PowerUpFailed")
        for host in hosts:
            ready_again(rig, host)
        await wait_slurm(lambda: disrupted(0.0), deadline_s=SLOW_S, what="the disruption metric back at 0")
    finally:
        for host in hosts:
            ready_again(rig, host)
        await run(rig, "scancel", job)


async def one_refused_declare_stops_no_power_up(rig: Rig, service: SyncerService) -> None:
    """Item 2: a ceiling above slurm.conf's MaxNodeCount: Slurm refuses the last members' declares on every
    pass, and the member Slurm powers up for a job still gets its pod and runs the job (before, the refused
    declare ended each pass before any pod was created). A Slurm of its own (MaxNodeCount reached at once
    without taking room from the other scenarios) and a syncer of its own in a namespace of its own, beside
    the main one (which watches only its own namespace)."""
    namespace = "pw-own"
    if rig.kube.get("", "v1", "namespaces", namespace) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": namespace}})
    with tempfile.TemporaryDirectory(prefix="pw-own-") as tmp:
        # room for 2 dynamic nodes: MaxNodeCount = the real node + 2
        own = await asyncio.to_thread(up, Path(tmp) / "slurm", nodes=0, slurm=SELECTED.name, max_dynamic=2)
        ports = Ports()
        try:
            own_rig = Rig(own, rig.kube, rig.kubeconfig, rig.reader)
            async with (
                SlurmdStandIn(rig.kube, own, boot=True, port_of=ports, namespace=namespace) as standin,
                running_syncer(
                    own_rig, namespace=namespace, sync=sync(max_drain_fraction=1.0),
                    nodeset=NodeSetOptions(requeue_s=0.5, power_ports=ports),
                ),
            ):  # fmt: skip
                body = power_body("pwdecl", 4, ("pwdecl",))
                body["metadata"]["namespace"] = namespace
                rig.kube.create(GROUP, VERSION, "nodesets", body, namespace=namespace)

                def events(reason: str) -> list[dict[str, Any]]:
                    return [
                        e for e in rig.kube.api.store.objects_of(("", "events"), namespace)
                        if e["involvedObject"].get("name") == "pwdecl" and e["reason"] == reason
                    ]  # fmt: skip

                members = ("pwdecl-0", "pwdecl-1")  # the room there is; pwdecl-2 and -3 are refused

                async def room_taken() -> bool:
                    found = [await asyncio.to_thread(own.node_state, m) for m in members]
                    return all("POWERED_DOWN" in flags for flags in found)

                await wait_slurm(
                    room_taken, deadline_s=SLOW_S, what="the members Slurm has room for declared"
                )
                job = await submit(
                    own_rig, "--no-requeue", "-N", "1", "--constraint=pwdecl", "--wrap", "true"
                )
                assert await job_reaches(own_rig, job, ("COMPLETED",), SLOW_S) == "COMPLETED"
                messages = [e["message"] for e in events("DeclareFailed")]
                assert messages and "pwdecl-2" in messages[0], messages
                obj = rig.kube.get(GROUP, VERSION, "nodesets", "pwdecl", namespace=namespace) or {}
                cond = condition(obj, "DeclareFailed") or {}
                assert cond.get("status") == "True" and "pwdecl-2" in cond.get("message", ""), cond
                assert not standin.failures, standin.failures
        finally:
            await asyncio.to_thread(own.down)


async def a_slurmd_z_node_under_a_member_name_is_refused(rig: Rig, service: SyncerService) -> None:
    """Item 4: a `slurmd -Z` node (DYNAMIC_NORM, empty comment, as Slinky's pods register) already carries a
    member's name: the NodeSet says Valid=False naming it, never stamps it, and lowering the ceiling does
    not delete it; the other member is declared as usual."""
    nodeset = new_set(rig)
    foreign = nodeset.member(1)
    port = free_port_block(1)
    await asyncio.to_thread(rig.sandbox.start_slurmd, foreign, 1, 400, (), False, port)
    try:
        assert "DYNAMIC_NORM" in (await rig.slurm(foreign)).state
        create(rig, power_body(nodeset.name, 2, (nodeset.name,)))

        def refused() -> bool:
            cond = condition(nodeset.obj(), "Valid") or {}
            return cond.get("status") == "False" and cond.get("reason") == "NameCollision"

        await wait_for(refused, deadline_s=SLOW_S, what="Valid=False (NameCollision)")
        assert foreign in (condition(nodeset.obj(), "Valid") or {}).get("message", "")
        assert nodeset.events("NameCollision")

        async def other_declared() -> bool:
            return "POWERED_DOWN" in await state_of(rig, nodeset.member(0))

        await wait_slurm(other_declared, deadline_s=SLOW_S, what="the other member declared")
        await passes_after(service, nodeset.name, now(service), count=3)
        assert (await rig.slurm(foreign)).comment == "", "never stamped"
        nodeset.patch_spec(
            {"power": {"minReplicas": 0, "maxReplicas": 1, "node": {"cpus": 1, "realMemory": 400}}}
        )
        await passes_after(service, nodeset.name, now(service), count=3)
        node = await rig.slurm(foreign)
        assert node.comment == "" and "DYNAMIC_NORM" in node.state, "never deleted"
        assert not [e for e in nodeset.events("DeletedSlurmNode") if foreign in e["message"]]
    finally:
        await asyncio.to_thread(rig.sandbox.stop_slurmd, foreign)


async def a_partition_of_a_power_nodeset_holds_every_declared_member(
    rig: Rig, service: SyncerService
) -> None:
    """Item 7: a SlurmPartition naming a power NodeSet has all its declared members, powered down as they
    are, so a job submitted to the partition makes Slurm power one up and runs (before, members without
    pods were left out: the partition was empty and the job refused)."""
    nodeset = new_set(rig)
    create(rig, power_body(nodeset.name, 2, (nodeset.name,)))
    await declared(nodeset, 2)
    part = f"{nodeset.name}-part"
    spec = {"nodes": {"nodeSets": [{"namespace": NAMESPACE, "name": nodeset.name}]}}
    rig.kube.create(GROUP, VERSION, "slurmpartitions", {"metadata": {"name": part}, "spec": spec})
    try:

        async def holds_both() -> bool:
            found = next((p for p in await rig.reader.partition_states() if p.name == part), None)
            return found is not None and found.nodes == {nodeset.member(0), nodeset.member(1)}

        await wait_slurm(
            holds_both, deadline_s=SLOW_S, what="the partition holding both powered-down members"
        )
        job = await submit(rig, "--no-requeue", "-p", part, "-N", "1", "--wrap", "true")
        assert await job_reaches(rig, job, ("COMPLETED",), SLOW_S) == "COMPLETED"
    finally:
        rig.kube.api.delete(rig.kube.api.resource(GROUP, VERSION, "slurmpartitions"), "", part)

        async def gone() -> bool:
            return all(p.name != part for p in await rig.reader.partition_states())

        await wait_slurm(gone, deadline_s=SLOW_S, what="the partition removed with its CR")


async def a_crash_looping_sidecar_is_not_the_slurmd_failing(rig: Rig, service: SyncerService) -> None:
    """Item 10: the pod of a member Slurm powers up has a sidecar in CrashLoopBackOff beside a slurmd that
    runs: the member is not forced down and the --no-requeue job runs (before: NODE_FAIL)."""
    nodeset = new_set(rig)
    body = power_body(nodeset.name, 1, (nodeset.name,))
    body["spec"]["template"]["spec"]["containers"].append(
        {"name": "log-shipper", "image": "crashloop.example/shipper"}
    )
    create(rig, body)
    await declared(nodeset, 1)
    job = await submit(rig, "--no-requeue", "-N", "1", f"--constraint={nodeset.name}", "--wrap", "true")
    assert await job_reaches(rig, job, ("COMPLETED",), SLOW_S) == "COMPLETED"
    assert not nodeset.events("PowerUpFailed")
    assert not forced((await rig.slurm(nodeset.member(0))).reason)


async def powering_up_pods_are_read_from_the_informer(rig: Rig, service: SyncerService) -> None:
    """Item 9: members Slurm powers up whose pods wait (unschedulable, well within startTimeout) are judged
    from the informer's pods: no GET of each such pod on every pass (1,000 power-ups were 1,000 GETs a pass
    from the shared QPS)."""
    nodeset = new_set(rig)
    create(rig, power_body(nodeset.name, 3, (nodeset.name,), pool=f"{nodeset.name}-none", startTimeout="10m"))
    await declared(nodeset, 3)
    await run(rig, "scontrol", "update", f"nodename={nodeset.name}-[0-2]", "state=POWER_UP")

    def mirrored() -> bool:  # the sync engine's first write to each pod (it may read the pod for it) is done
        pods = nodeset.pods().values()
        return len(pods) == 3 and all(
            "POWERING_UP" in (p["metadata"].get("annotations") or {}).get(Keys.STATE, "") for p in pods
        )

    await wait_for(mirrored, deadline_s=SLOW_S, what="three pods waiting for a Node, Slurm's state on each")
    server = rig.kube.server
    server.record_requests = True
    assert service.nodesets is not None
    reads, key = service.nodesets.power.stats.pod_reads, f"{NAMESPACE}/{nodeset.name}"
    since, path, before = (
        now(service),
        f"/api/v1/namespaces/{NAMESPACE}/pods/{nodeset.name}-",
        reads.get(key, 0),
    )
    await passes_after(service, nodeset.name, since, count=4)
    assert reads.get(key, 0) == before, "the power step read pods it could judge from the informer"
    # on the wire: below the one GET per pod and pass of the old code. A GET right after a write of the same
    # pod is a writer's fresh read after a 409 (the scheduler rewrites these pods' status as Nodes come and
    # go, more often the busier the machine): not a read of the power step, not counted
    gets: list[str] = []
    wrote: set[str] = set()
    for _t, method, p in server.requests:
        if not p.startswith(path):
            continue
        pod = p.removeprefix(path).split("/")[0].split("?")[0]
        if method == "GET" and pod not in wrote:
            gets.append(p)
        (wrote.add if method in ("PATCH", "PUT") else wrote.discard)(pod)
    assert len(gets) < 3 * 4, gets
    # the members stay POWERING_UP, their pods Pending: the module's end deletes them (a forced power-down
    # here left them POWERING_DOWN, and deleting those timed out once)


Scenario = Callable[[Rig, SyncerService], Awaitable[None]]
# each joins once the syncer passes it (issue 45's items, one commit each)
SCENARIOS: tuple[Scenario, ...] = (
    a_partition_of_a_power_nodeset_holds_every_declared_member,
    a_slurmd_z_node_under_a_member_name_is_refused,
    powering_up_pods_are_read_from_the_informer,
    a_not_ready_node_under_a_busy_member_costs_no_job,
    a_zone_gone_not_ready_holds_power_downs_and_says_so,
    one_refused_declare_stops_no_power_up,
    a_crash_looping_sidecar_is_not_the_slurmd_failing,
)
