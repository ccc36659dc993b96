"""Least privilege, proven: the syncer runs as the chart's ServiceAccount under each RBAC profile of the
chart README's table (scripts/chart-tables), against the emulator enforcing the rendered Roles and
ClusterRoles, while scenarios exercise each right once. Every (verb, resource, namespace, name) it used
is compared with what the profile grants: a refused request (a missing right) fails, and so does a
granted right the syncer never used (a superfluous one)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from syncer.app import permissions, wiring
from syncer.app.permissions import Right
from syncer.app.service import SyncerService
from syncer.model.keys import CORDONED_BY_SLURM, Keys
from syncer.testing.kubeapi.rbac import SELF_REVIEWS, Request
from syncer.testing.sandbox import SandboxError
from tests.e2e.rig import NAMESPACE, Rig, condition, fresh_slurm_nodes, node_body, running_syncer
from tests.e2e.test_nodeset import manifest
from tests.e2e.test_partitions import (
    WRITES,
    cleanup,
    cr,
    create_cr,
    delete_cr,
    keep_part_info,
    ready,
    slinky_served,
)
from tests.helpers import wait_for
from tests.integration.test_helm_chart import chart_tables, container, environment, load_settings

pytestmark = [pytest.mark.slurm, pytest.mark.kube]

RBAC = "rbac.authorization.k8s.io"
PLURALS = {
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
}
TOKEN = "the-service-account-token"
_nodesets = itertools.count(1)


def apply_rbac(rig: Rig, objects: list[dict[str, Any]]) -> None:
    """The profile's Roles, ClusterRoles and bindings, created as the admin (helm install would)."""
    for obj in objects:
        if obj["kind"] not in PLURALS:
            continue
        namespace = obj["metadata"].get("namespace", "")
        if namespace and rig.kube.get("", "v1", "namespaces", namespace) is None:
            rig.kube.create("", "v1", "namespaces", {"metadata": {"name": namespace}})
        rig.kube.create(RBAC, "v1", PLURALS[obj["kind"]], obj, namespace=namespace)


@asynccontextmanager
async def syncer_as(
    rig: Rig, objects: list[dict[str, Any]], release_namespace: str, kubeconfig: Path
) -> AsyncIterator[SyncerService]:
    """`slurm-syncer run` with the settings the profile's Deployment gives it (the Slurm connection and
    quicker polls excepted), as the ServiceAccount."""
    settings = load_settings(objects)
    config = wiring.service_config(settings, {"POD_NAMESPACE": release_namespace})
    config = config.replace(
        sync=replace(config.options("sync"), ready_grace_s=2.0),
        nodeset=replace(config.options("nodeset"), requeue_s=0.5),
        scheduler=replace(
            config.options("scheduler"), retry_after_s=1.0
        ),  # a refused submit, tried again soon
        slurm_poll_interval_s=0.2,
        slurm_metrics_url="off",
        listen_host="127.0.0.1",
        listen_port=0,
        resync_s=5.0,
        retry_period_s=0.5,
        renew_deadline_s=2.0,
        lease_duration_s=3.0,
    )
    async with running_syncer(replace(rig, kubeconfig=kubeconfig), config) as service:
        yield service


async def exercise_lease(rig: Rig, namespace: str, name: str) -> None:
    """Leader election: the Lease created, then renewed."""
    await wait_for(lambda: lease_renewed(rig, namespace, name, ""), deadline_s=30, what="the Lease created")
    first = rig.kube.get("coordination.k8s.io", "v1", "leases", name, namespace)
    assert first is not None
    renewed = first["spec"]["renewTime"]
    await wait_for(
        lambda: lease_renewed(rig, namespace, name, renewed), deadline_s=30, what="the Lease renewed"
    )


def lease_renewed(rig: Rig, namespace: str, name: str, after: str) -> bool:
    lease = rig.kube.get("coordination.k8s.io", "v1", "leases", name, namespace)
    return lease is not None and (lease.get("spec") or {}).get("renewTime", "") > after


async def exercise_bindings(rig: Rig, labels: dict[str, str]) -> None:
    """A slurmd pod on a Node the syncer once cordoned and a Node-bound host: the cordon lifted,
    annotations and conditions written on both, each
    drained twice with the same reason (its Event created, then aggregated by a patch; the host's go to
    the lease namespace), and one write on each refused with 409 Conflict, so that fresh reads happen."""
    in_pod, on_host = fresh_slurm_nodes(2)
    rig.used += [in_pod, on_host]
    node, pod = f"k8s-{in_pod}", f"slurmd-{in_pod}"
    # a cordon the syncer made while --cordon-on-slurm-drain was on: lifted with the option off too
    cordoned = node_body(node, {})
    cordoned["metadata"]["annotations"] = {Keys.CORDONED_BY: CORDONED_BY_SLURM}
    cordoned["spec"] = {"unschedulable": True}
    rig.kube.create("", "v1", "nodes", cordoned)
    body = {
        "metadata": {"name": pod, "labels": {**labels, Keys.NODE_NAME_LABEL: in_pod}},
        "spec": {"nodeName": node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
    }
    rig.kube.create("", "v1", "pods", body, namespace=NAMESPACE)
    host = rig.bind_node(on_host)

    def annotated(obj: dict[str, Any]) -> bool:
        return Keys.STATE in (obj["metadata"].get("annotations") or {})

    def drained(obj: dict[str, Any]) -> str:
        return str((condition(obj, Keys.CONDITION_DRAINED) or {}).get("status", ""))

    await wait_for(
        lambda: not rig.node_obj(node)["spec"].get("unschedulable"),
        deadline_s=30,
        what="our old cordon lifted",
    )
    await wait_for(
        lambda: (
            annotated(rig.pod_obj(in_pod))
            and annotated(rig.node_obj(host))
            and drained(rig.node_obj(node)) != ""
        ),
        deadline_s=30,
        what="the syncer's first writes on the pod, its Node and the host",
    )
    rig.kube.faults.conflict_next("PATCH", f"/nodes/{host}")
    rig.kube.faults.conflict_next("PATCH", f"/pods/{pod}")
    for _ in range(2):  # the same drain twice: its Events are created, then aggregated (patched)
        for name in (in_pod, on_host):
            rig.scontrol("update", f"nodename={name}", "state=drain", "reason=rbac-check")
        await wait_for(
            lambda: drained(rig.pod_obj(in_pod)) == "True" and drained(rig.node_obj(host)) == "True",
            deadline_s=30,
            what="the drains seen on the pod and the host",
        )
        for name in (in_pod, on_host):
            rig.scontrol("update", f"nodename={name}", "state=resume")
        await wait_for(
            lambda: drained(rig.pod_obj(in_pod)) == "False" and drained(rig.node_obj(host)) == "False",
            deadline_s=30,
            what="the resumes seen on the pod and the host",
        )

    def aggregated(name: str) -> bool:
        return any(e.get("count", 1) > 1 for e in rig.events_for(name))

    await wait_for(lambda: aggregated(pod) and aggregated(host), deadline_s=30, what="aggregated Events")
    assert not rig.kube.faults.conflicts, "an injected conflict was never met"


async def exercise_partitions(rig: Rig) -> None:
    """A SlurmPartition made (its ownership write refused once with 409, so a fresh read happens; its
    status, its Events in the lease namespace), then deleted (its finalizer released)."""
    name = "rbac-partition"
    rig.kube.faults.conflict_next("PATCH", f"/slurmpartitions/{name}")
    async with keep_part_info(rig):
        try:
            create_cr(rig, name, {"nodes": {"hosts": [rig.sandbox.real_node]}})
            await wait_for(
                lambda: ready(rig, name).get("status") == "True", 30, what="the SlurmPartition Ready"
            )
            delete_cr(rig, name)
            await wait_for(lambda: cr(rig, name) is None, 30, what="the SlurmPartition released and gone")
        finally:
            await cleanup(rig, [name], [name], [])
    assert not rig.kube.faults.conflicts, "the injected conflict was never met"


async def exercise_nodesets(rig: Rig) -> None:
    """A NodeSet scaled out (pod create, its PodDisruptionBudget, status) and back in (pod delete)."""
    name = f"rbac{next(_nodesets)}"
    nodeset = manifest(name, 1)  # its pod's Node never comes: the pod is never registered in Slurm
    rig.kube.create("slurm-syncer.dev", "v1alpha1", "nodesets", nodeset, namespace=NAMESPACE)

    def pods() -> list[dict[str, Any]]:
        return [
            p
            for p in rig.kube.api.store.objects_of(("", "pods"), NAMESPACE)
            if (p["metadata"].get("labels") or {}).get(Keys.NODESET_LABEL) == name
        ]

    await wait_for(lambda: len(pods()) == 1, deadline_s=30, what="the NodeSet's pod created")
    await wait_for(
        lambda: bool(rig.kube.api.store.objects_of(("policy", "poddisruptionbudgets"), NAMESPACE)),
        deadline_s=30,
        what="the NodeSet's PodDisruptionBudget",
    )
    rig.kube.patch(
        "slurm-syncer.dev", "v1alpha1", "nodesets", name, {"spec": {"replicas": 0}}, namespace=NAMESPACE
    )
    await wait_for(lambda: not pods(), deadline_s=60, what="the never-registered pod deleted on scale-in")


async def exercise_scheduler(rig: Rig, scheduler: str, namespace: str, index: int) -> None:
    """The one-pool scheduler in `namespace`, on a real slurmd of its own: a pod waits behind a Slurm job
    (its PodScheduled condition, once refused with 409 so that it is read fresh; Events), is bound when the
    job ends, and is deleted when its own job is
    cancelled; a batch/v1 Job's pod is bound (the Job read); a pod whose submit Slurm refuses is told so
    twice (its Event created, then aggregated)."""
    node = f"rbacsched{index}"
    await asyncio.to_thread(rig.sandbox.start_slurmd, node, cpus=2, memory_mb=1000, features=[node])
    host = node_body(f"k8s-{node}", {Keys.NODE_NAME_LABEL: node})
    host["status"]["allocatable"] = {"cpu": "2", "memory": "2Gi", "pods": "110"}
    if rig.kube.node(f"k8s-{node}") is None:
        rig.kube.create("", "v1", "nodes", host)
    rig.kube.patch("", "v1", "namespaces", namespace,
                   {"metadata": {"annotations": {"slurm-syncer.dev/constraint": node}}})  # fmt: skip

    def run(*argv: str) -> str:
        return rig.sandbox.run(*argv).stdout.strip()

    def pod(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {
                "schedulerName": scheduler, "terminationGracePeriodSeconds": 0, "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "app",
                                "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}],
            },
        }  # fmt: skip

    def get(name: str) -> dict[str, Any]:
        return rig.kube.pod(namespace, name) or {}

    def events(name: str, reason: str) -> list[dict[str, Any]]:
        return [
            e
            for e in rig.events_for(name)
            if e.get("reason") == reason and e["involvedObject"].get("namespace") == namespace
        ]

    try:
        blocker = run("sbatch", "--parsable", "-w", node, "--exclusive", "--wrap", "sleep 600").split(";")[0]
        # its first PodScheduled write refused with 409 Conflict: the scheduler reads the pod fresh
        rig.kube.faults.conflict_next("PATCH", f"/namespaces/{namespace}/pods/waits/status")
        rig.kube.create("", "v1", "pods", pod("waits"), namespace=namespace)
        await wait_for(
            lambda: (condition(get("waits"), "PodScheduled") or {}).get("reason") == "SlurmJobPending",
            deadline_s=60, what=f"{namespace}/waits pending behind Slurm job {blocker}",
        )  # fmt: skip
        assert not [c for c in rig.kube.faults.conflicts if f"/{namespace}/" in c.part], (
            "the conflict never met"
        )
        run("scancel", blocker)
        await wait_for(lambda: get("waits").get("spec", {}).get("nodeName") == f"k8s-{node}", deadline_s=60,
                       what=f"{namespace}/waits bound")  # fmt: skip
        job = get("waits")["metadata"]["annotations"][Keys.SCHEDULER_JOB_ID]
        run("scancel", job)
        await wait_for(
            lambda: not get("waits"), deadline_s=60, what=f"{namespace}/waits deleted after scancel"
        )
        template = pod("member")
        template["metadata"] = {}
        job_body = {
            "metadata": {"name": "one"},
            "spec": {"parallelism": 1, "completions": 1, "template": template},
        }
        owner = rig.kube.create("batch", "v1", "jobs", job_body, namespace=namespace)["metadata"]["uid"]

        def members() -> list[dict[str, Any]]:
            found = rig.kube.api.store.objects_of(("", "pods"), namespace)
            return [
                p
                for p in found
                if owner in {o.get("uid") for o in p["metadata"].get("ownerReferences") or []}
            ]

        await wait_for(lambda: any(p["spec"].get("nodeName") for p in members()), deadline_s=60,
                       what=f"the pod of Job {namespace}/one bound")  # fmt: skip
        rig.kube.create("", "v1", "pods", pod("refused", {"slurm-syncer.dev/constraint": "nosuchfeature"}),
                        namespace=namespace)  # fmt: skip
        await wait_for(
            lambda: any(e.get("count", 1) > 1 for e in events("refused", "SlurmSubmitFailed")),
            deadline_s=60, what=f"{namespace}/refused told twice that Slurm refused its job",
        )  # fmt: skip
    finally:
        plural = rig.kube.api.resource("batch", "v1", "jobs")
        with contextlib.suppress(Exception):
            rig.kube.api.delete(plural, namespace, "one")
        for leftover in rig.kube.api.store.objects_of(("", "pods"), namespace):
            rig.kube.api.delete(
                rig.kube.api.resource("", "v1", "pods"), namespace, leftover["metadata"]["name"]
            )
        for job in run("squeue", "-h", "-w", node, "-o", "%i").split():
            run("scancel", job)
        with contextlib.suppress(SandboxError):
            rig.sandbox.delete_node(node)


def compare(used: set[Request], denied: set[Request], granted: list[Right]) -> tuple[list[str], list[Right]]:
    """(missing rights as refused requests, granted rights never used); prints the comparison."""
    used = {r for r in used if (r.group, r.resource) not in SELF_REVIEWS}
    unused = [
        right
        for right in granted
        if not any(right.covers(r.verb, r.group, r.full_resource, r.namespace, r.name) for r in used)
    ]
    missing = [
        f"{r.verb} {r.full_resource} ns={r.namespace or '-'} name={r.name or '-'}" for r in sorted(denied)
    ]
    print("\ngranted right                                           used by the syncer")
    for right in granted:
        uses = sorted(
            {
                f"{r.namespace or 'cluster'}{'/' + r.name if r.name and r.verb != 'get' else ''}"
                for r in used
                if right.covers(r.verb, r.group, r.full_resource, r.namespace, r.name)
            }
        )
        print(f"  {right!s:<55} {', '.join(uses)[:70] if uses else 'NEVER (superfluous)'}")
    for line in missing:
        print(f"  MISSING: refused {line}")
    return missing, unused


# beyond the README's profiles: a Kueue Topology naming the tree labels (read by name; the emulator
# serves no Kueue, so the read is authorized, then answered 404, and the flags' labels stay in use)
KUEUE = ("slurm-syncer", {"config": {"topology-kueue": "gpu-fabric", "topology-tree-name": "fabric"}})


@pytest.mark.parametrize(
    "profile",
    [
        "default", "Slinky", "namespaced", "NodeSets off", "Kueue topology",
        pytest.param("SlurmPartitions", marks=pytest.mark.only_where(WRITES, "26.05+ writes partitions")),
        pytest.param("scheduler", marks=pytest.mark.only_where(WRITES, "external jobs: Slurm 25.05+")),
    ],
)  # fmt: skip
async def test_the_syncer_uses_exactly_the_rights_its_profile_grants(rig: Rig, profile: str, tmp_path: Path):
    table = chart_tables()
    release_namespace, values = table.PROFILES.get(profile, KUEUE)
    objects = table.objects(values, release_namespace)
    user = table.service_account(release_namespace)
    granted = permissions.granted(objects, user)
    apply_rbac(rig, objects)
    rig.kube.add_user(TOKEN, user)
    kubeconfig = rig.kube.write_kubeconfig(tmp_path / "service-account.kubeconfig", token=TOKEN)
    settings = load_settings(objects)
    lease_namespace = settings.lease_namespace or release_namespace
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    # labels that match the profile's pod selector: `key=value` terms, and `key` (exists) terms with any value
    # (the default selects on the binding label itself, which the pod carries anyway)
    terms = [part.split("=", 1) for part in settings.pod_selector.split(",") if part]
    selector = {term[0]: term[1] if len(term) == 2 else "present" for term in terms}

    stuck: AssertionError | None = None  # a scenario that could not finish, e.g. for a refused write
    # Slinky's CRDs served where the profile watches them (absent, its watch right would go unused)
    watched = settings.value("partitions_enabled") and settings.value("slinky_partitions")
    with slinky_served(rig) if watched else contextlib.nullcontext():
        async with syncer_as(rig, objects, release_namespace, kubeconfig):
            try:
                await exercise_lease(rig, lease_namespace, settings.lease_name)
                await exercise_bindings(rig, selector)
                if settings.value("nodeset_enabled"):
                    await exercise_nodesets(rig)
                if settings.value("partitions_enabled"):
                    await exercise_partitions(rig)
                if settings.value("scheduler_name"):
                    served = settings.controller_options("scheduler").namespaces
                    await asyncio.gather(*(
                        exercise_scheduler(rig, settings.value("scheduler_name"), ns, i)
                        for i, ns in enumerate(served)
                    ))  # fmt: skip
            except AssertionError as exc:
                stuck = exc

    missing, unused = compare(rig.kube.rbac.used(user), rig.kube.rbac.denied(user), granted)
    assert not missing, f"the syncer needed rights {profile!r} does not grant: {missing} ({stuck})"
    if stuck is not None:
        raise stuck
    assert not unused, f"{profile!r} grants rights the syncer never used: {[str(r) for r in unused]}"


@pytest.mark.parametrize("profile", ["Slinky", "namespaced"])
async def test_check_asks_only_what_the_profile_needs_in_its_scope(rig: Rig, profile: str, tmp_path: Path):
    """`slurm-syncer check` as the ServiceAccount of a namespaced profile passes: it asks about pods in
    config.namespace and the Lease by name in its namespace, never cluster-wide (which RBAC refuses)."""
    table = chart_tables()
    release_namespace, values = table.PROFILES[profile]
    objects = table.objects(values, release_namespace)
    apply_rbac(rig, objects)
    rig.kube.add_user(TOKEN, table.service_account(release_namespace))
    kubeconfig = rig.kube.write_kubeconfig(tmp_path / "service-account.kubeconfig", token=TOKEN)
    chart_env = environment(container(objects), release_namespace)  # as `kubectl exec ... check` sees it
    chart_env.pop(
        "SLURM_SYNCER_SLURM_JWT_KEY_FILE", None
    )  # the Slinky profile's; the sandbox's token instead
    env = {
        **os.environ,
        **chart_env,
        "SLURM_SYNCER_SLURM_URL": rig.sandbox.rest_url,
        "SLURM_SYNCER_SLURM_TOKEN_FILE": str(rig.sandbox.token_file),
        "SLURM_SYNCER_KUBECONFIG": str(kubeconfig),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "syncer", "check",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = (text.decode() for text in await asyncio.wait_for(process.communicate(), 120))
    print(out)
    asked = [line for line in out.splitlines() if line[6:].startswith("may ")]
    assert process.returncode == 0 and all(line.startswith("ok") for line in asked), out + err
    assert "ok    may list pods (namespace slurm): informer of slurmd pods" in asked
    assert f"ok    may update leases.coordination.k8s.io (namespace {release_namespace}, only " in out
    assert not any("cluster-wide" in line and "nodes" not in line for line in asked), asked
    assert any("create pods" in line for line in asked) is (profile != "Slinky")  # NodeSets off there
    assert len(asked) == len(permissions.needed(load_settings(objects), release_namespace))
