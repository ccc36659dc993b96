"""A second scheduler's view of the emulator, through the real clients: pods of another `schedulerName` are
left alone by the fake kube-scheduler, `pods/binding` answers as kube-apiserver's BindingREST does (facts in
syncer/testing/kubeapi/binding.py), the fake kubelet runs what was bound, and RBAC judges `pods/binding`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config

from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions
from tests.fixtures.kube import Kubectl
from tests.helpers import wait_for
from tests.integration.test_kubeapi_rbac import kube_tls, serving_pair

__all__ = ["kube_tls", "serving_pair"]  # fixtures: the emulator over https, which kubectl's --as needs

pytestmark = pytest.mark.kube

NS = "jobs"
OURS = "slurm-syncer"


@pytest.fixture
async def core(kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield client.CoreV1Api(api)


@pytest.fixture
async def http(kube_api: KubeApiEmulator) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=kube_api.url) as session:
        yield session


def pod(name: str, scheduler: str | None = OURS, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "inference:1"}], **spec},
    }
    if scheduler is not None:
        body["spec"]["schedulerName"] = scheduler
    return body


def binding(name: str, node: str, uid: str = "", **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if uid:
        metadata["uid"] = uid
    target = {"kind": "Node", "name": node}
    return {"apiVersion": "v1", "kind": "Binding", "metadata": metadata, "target": target}


def stored(kube: KubeApiEmulator, name: str) -> dict[str, Any]:
    found = kube.pod(NS, name)
    assert found is not None, f"pod {name} not found"
    return found


async def post(http: aiohttp.ClientSession, path: str, body: Any) -> tuple[int, Any]:
    async with http.post(path, data=json.dumps(body), headers={"Content-Type": "application/json"}) as answer:
        return answer.status, await answer.json()


@pytest.fixture
def seeded(kube_api: KubeApiEmulator) -> KubeApiEmulator:
    kube_api.seed(SeedOptions(nodes=2, namespace=NS))  # creates the namespace too
    return kube_api


async def test_pods_of_another_scheduler_wait_untouched(seeded: KubeApiEmulator, core: Any):
    await core.create_namespaced_pod(NS, pod("theirs"))
    await core.create_namespaced_pod(NS, pod("default", scheduler=None))
    await wait_for(lambda: bool(stored(seeded, "default")["spec"].get("nodeName")), what="default bound")
    await seeded.kubelet.settled()
    theirs = await core.read_namespaced_pod("theirs", NS)
    assert theirs.spec.scheduler_name == OURS and theirs.spec.node_name is None
    assert theirs.status.phase == "Pending" and not theirs.status.conditions  # no PodScheduled written
    default = await core.read_namespaced_pod("default", NS)
    assert default.spec.scheduler_name == "default-scheduler"  # defaulted by the API server
    # a Node change looks again at pods waiting for kube-scheduler only, never at another's
    seeded.patch("", "v1", "nodes", "node-0001", {"metadata": {"labels": {"x": "1"}}})
    await seeded.kubelet.settled()
    assert not stored(seeded, "theirs")["spec"].get("nodeName")


async def test_a_binding_places_the_pod_and_the_kubelet_runs_it(seeded: KubeApiEmulator, core: Any):
    created = await core.create_namespaced_pod(NS, pod("infer"))
    # the Binding kube-scheduler's DefaultBinder sends: name, namespace, the pod's uid as a precondition
    body = binding("infer", "node-0001", created.metadata.uid, namespace=NS)
    answer = await core.create_namespaced_pod_binding("infer", NS, body, _preload_content=False)
    assert answer.status == 201
    assert json.loads(await answer.read()) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201,
    }  # fmt: skip
    bound = stored(seeded, "infer")
    assert bound["spec"]["nodeName"] == "node-0001"
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled == [
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
         "lastTransitionTime": scheduled[0]["lastTransitionTime"]},
    ]  # fmt: skip
    assert bound["metadata"]["generation"] == created.metadata.generation  # written to storage directly

    async def running() -> bool:
        read = await core.read_namespaced_pod("infer", NS)
        return bool(read.status.phase == "Running" and read.status.pod_ip)

    await wait_for(running, what="the bound pod running on its Node")


async def test_kubernetes_asyncio_cannot_read_the_status_as_a_binding(seeded: KubeApiEmulator, core: Any):
    """The answer is a Status, as kube-apiserver's; the generated client's V1Binding needs a target, so a
    caller must not let it deserialise (kubernetes-client/python#825): the syncer reads raw JSON."""
    await core.create_namespaced_pod(NS, pod("strict"))
    with pytest.raises(ValueError, match="target"):
        await core.create_namespaced_pod_binding("strict", NS, binding("strict", "node-0000"))
    assert stored(seeded, "strict")["spec"]["nodeName"] == "node-0000"  # the bind itself was done


async def test_the_legacy_bindings_collection(seeded: KubeApiEmulator, core: Any):
    await core.create_namespaced_pod(NS, pod("old"))
    answer = await core.create_namespaced_binding(NS, binding("old", "node-0000"), _preload_content=False)
    assert answer.status == 201 and stored(seeded, "old")["spec"]["nodeName"] == "node-0000"


async def test_binding_refusals_as_kube_apiserver_words_them(
    seeded: KubeApiEmulator, http: aiohttp.ClientSession
):
    seeded.create("", "v1", "pods", pod("p"), NS)
    uid = stored(seeded, "p")["metadata"]["uid"]
    path = f"/api/v1/namespaces/{NS}/pods/p/binding"

    status, body = await post(http, f"/api/v1/namespaces/{NS}/pods/missing/binding", binding("missing", "n"))
    assert (status, body["reason"], body["message"]) == (404, "NotFound", 'pods "missing" not found')

    status, body = await post(http, path, binding("other", "node-0000"))
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"] == "name in URL does not match name in Binding object"

    status, body = await post(http, path, {"metadata": {"name": "p"}, "target": {"kind": "Pod"}})
    assert status == 500 and "reason" not in body  # a field error list, not an API status
    assert body["message"] == (
        '[target.kind: Unsupported value: "Pod": supported values: "Node", "<empty>", '
        "target.name: Required value]"
    )

    status, body = await post(http, path, binding("p", "node-0000", "not-the-uid"))
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        f'Operation cannot be fulfilled on pods "p": StorageError: invalid object, Code: 4, '
        f"Key: /registry/pods/{NS}/p, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
        f"UID in precondition: not-the-uid, UID in object meta: {uid}"
    )
    assert body["details"] == {"name": "p", "kind": "pods"}

    # dry run: answered as a success, nothing written
    status, body = await post(http, path + "?dryRun=All", binding("p", "node-0000", uid))
    assert (status, body["status"]) == (201, "Success") and not stored(seeded, "p")["spec"].get("nodeName")

    # the Node is not looked up: a name no Node has is accepted
    status, _ = await post(http, path, binding("p", "no-such-node", uid))
    assert status == 201 and stored(seeded, "p")["spec"]["nodeName"] == "no-such-node"

    status, body = await post(http, path, binding("p", "node-0000", uid))
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "no-such-node"'
    )
    assert body["details"] == {"name": "p", "kind": "pods/binding"}


async def test_a_terminating_or_gated_pod_is_not_bound(seeded: KubeApiEmulator, http: aiohttp.ClientSession):
    seeded.create("", "v1", "pods", {**pod("held"), "metadata": {"name": "held", "finalizers": ["x/y"]}}, NS)
    seeded.api.delete(seeded.api.resource("", "v1", "pods"), NS, "held")
    path = f"/api/v1/namespaces/{NS}/pods/held/binding"
    status, body = await post(http, path, binding("held", "node-0000"))
    assert status == 409
    assert body["message"].endswith("pod held is being deleted, cannot be assigned to a host")

    seeded.create("", "v1", "pods", pod("gated", schedulingGates=[{"name": "example.com/wait"}]), NS)
    status, body = await post(http, f"/api/v1/namespaces/{NS}/pods/gated/binding", binding("gated", "n"))
    assert status == 409 and body["message"].endswith("pod gated has non-empty .spec.schedulingGates")


async def test_binding_annotations_merge_and_conditions_keep_their_place(
    seeded: KubeApiEmulator, http: aiohttp.ClientSession
):
    body = pod("annotated")
    body["metadata"]["annotations"] = {"keep": "me", "over": "old"}
    seeded.create("", "v1", "pods", body, NS)
    waiting = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "Slurm job 7"}
    seeded.patch(
        "", "v1", "pods", "annotated",
        {"status": {"conditions": [waiting, {"type": "Custom", "status": "True"}]}},
        namespace=NS, subresource="status",
    )  # fmt: skip
    status, _ = await post(
        http,
        f"/api/v1/namespaces/{NS}/pods/annotated/binding",
        binding("annotated", "node-0000", annotations={"over": "new"}),
    )
    assert status == 201
    bound = stored(seeded, "annotated")
    assert bound["metadata"]["annotations"] == {"keep": "me", "over": "new"}
    conditions = {c["type"]: c for c in bound["status"]["conditions"]}
    assert conditions["Custom"]["status"] == "True"  # another writer's condition stays
    # False -> True: the transition time moves, reason and message are dropped
    assert conditions["PodScheduled"]["status"] == "True" and "reason" not in conditions["PodScheduled"]
    assert "message" not in conditions["PodScheduled"]


async def test_field_selector_on_the_scheduler_name(seeded: KubeApiEmulator, core: Any):
    await core.create_namespaced_pod(NS, pod("a"))
    await core.create_namespaced_pod(NS, pod("b", scheduler="volcano"))
    listed = await core.list_pod_for_all_namespaces(field_selector=f"spec.schedulerName={OURS}")
    assert [p.metadata.name for p in listed.items] == ["a"]
    unbound = await core.list_namespaced_pod(NS, field_selector=f"spec.schedulerName={OURS},spec.nodeName=")
    assert [p.metadata.name for p in unbound.items] == ["a"]
    # every field kube-apiserver selects pods by is accepted; hostNetwork is false when absent
    fields = "spec.restartPolicy=Always,spec.hostNetwork=false,status.nominatedNodeName="
    assert len((await core.list_namespaced_pod(NS, field_selector=fields)).items) == 2


async def test_kubectl_shows_the_bound_node_and_rbac_judges_pods_binding(
    seeded: KubeApiEmulator, kubectl: Kubectl, http: aiohttp.ClientSession
):
    seeded.create("", "v1", "pods", pod("shown"), NS)
    await post(http, f"/api/v1/namespaces/{NS}/pods/shown/binding", binding("shown", "node-0001"))
    wide = await kubectl("get", "pods", "-n", NS, "-o", "wide")
    header, row = wide.splitlines()[0].split(), wide.splitlines()[1].split()
    assert row[0] == "shown" and row[header.index("NODE")] == "node-0001"
    resources = await kubectl("api-resources", "--api-group=", "-o", "name")
    assert "bindings" in resources.split()

    # RBAC: a Role granting pods/binding create lets the user bind, nothing else
    user = "system:serviceaccount:slurm:slurm-syncer"
    seeded.add_user("sa-token", user)
    role = {"metadata": {"name": "binder"}, "rules": [
        {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    ]}  # fmt: skip
    seeded.create("rbac.authorization.k8s.io", "v1", "roles", role, NS)
    bound_role = {
        "metadata": {"name": "binder"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "binder"},
        "subjects": [{"kind": "ServiceAccount", "name": "slurm-syncer", "namespace": "slurm"}],
    }
    seeded.create("rbac.authorization.k8s.io", "v1", "rolebindings", bound_role, NS)
    seeded.create("", "v1", "pods", pod("guarded"), NS)
    seeded.create("", "v1", "pods", pod("guarded"), "default")
    headers = {"Authorization": "Bearer sa-token", "Content-Type": "application/json"}
    async with http.post(
        f"/api/v1/namespaces/{NS}/pods/guarded/binding", data=json.dumps(binding("guarded", "node-0000")),
        headers=headers,
    ) as answer:  # fmt: skip
        assert answer.status == 201
    async with http.post(
        "/api/v1/namespaces/default/pods/guarded/binding", data=json.dumps(binding("guarded", "node-0000")),
        headers=headers,
    ) as answer:  # fmt: skip
        refused = await answer.json()
    assert answer.status == 403 and refused["message"] == (
        f'pods "guarded" is forbidden: User "{user}" cannot create resource "pods/binding" in API group "" '
        'in the namespace "default"'
    )
    assert refused["details"] == {"name": "guarded", "kind": "pods"}


async def test_kubectl_auth_can_i_create_pods_binding(kube_tls: KubeApiEmulator, tmp_path: Path):
    admin = Kubectl(kube_tls.write_kubeconfig(tmp_path / "admin.kubeconfig"), tmp_path / "cache")
    kube_tls.create("", "v1", "namespaces", {"metadata": {"name": NS}})
    role = {"metadata": {"name": "binder"}, "rules": [
        {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    ]}  # fmt: skip
    kube_tls.create("rbac.authorization.k8s.io", "v1", "roles", role, NS)
    kube_tls.create(
        "rbac.authorization.k8s.io", "v1", "rolebindings",
        {"metadata": {"name": "binder"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "binder"},
         "subjects": [{"kind": "ServiceAccount", "name": "sched", "namespace": NS}]},
        NS,
    )  # fmt: skip
    who = f"--as=system:serviceaccount:{NS}:sched"
    can_i = ("auth", "can-i", "-n", NS, who)
    assert (await admin(*can_i, "create", "pods", "--subresource=binding")).strip() == "yes"
    assert (await admin(*can_i, "patch", "pods", "--subresource=status")).strip() == "yes"
    # `pods/binding` is TYPE/NAME to kubectl: the pod named "binding", which the Role does not grant
    assert (await admin(*can_i, "create", "pods/binding", ok=False)).strip().startswith("no")
    for denied in (("create", "pods", "--subresource=binding", "-n", "default"), ("delete", "pods")):
        assert (await admin("auth", "can-i", *denied, who, ok=False)).strip().startswith("no")


def gpus(name: str, count: int, scheduler: str | None = OURS, **spec: Any) -> dict[str, Any]:
    body = pod(name, scheduler, **spec)
    body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(count)}}
    return body


async def test_the_kubelet_rejects_a_bound_pod_its_node_has_no_room_for(
    seeded: KubeApiEmulator, http: aiohttp.ClientSession, kubectl: Kubectl
):
    """What a bind check exists for: kube-apiserver binds anywhere, the kubelet's admission refuses a pod
    that does not fit beside the pods it admitted (pkg/kubelet/lifecycle/predicate.go), and it never runs."""
    seeded.create("", "v1", "pods", gpus("whole", 8, scheduler=None, nodeName="node-0000"), NS)
    await wait_for(
        lambda: bool(stored(seeded, "whole")["status"].get("startTime")), what="the first admitted"
    )
    seeded.create("", "v1", "pods", gpus("late", 1), NS)
    status, _ = await post(http, f"/api/v1/namespaces/{NS}/pods/late/binding", binding("late", "node-0000"))
    assert status == 201
    await wait_for(lambda: stored(seeded, "late")["status"].get("phase") == "Failed", what="the rejection")
    rejected = stored(seeded, "late")["status"]
    assert rejected["reason"] == "OutOfnvidia.com/gpu" and not rejected.get("podIP")
    assert rejected["message"] == (
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, "
        "capacity: 8"
    )
    rows = (await kubectl("get", "pods", "-n", NS)).splitlines()
    assert next(r for r in rows if r.startswith("late ")).split()[2] == "OutOfnvidia.com/gpu"
    # on the other Node it fits
    seeded.create("", "v1", "pods", gpus("fits", 1), NS)
    status, _ = await post(http, f"/api/v1/namespaces/{NS}/pods/fits/binding", binding("fits", "node-0001"))
    await wait_for(lambda: stored(seeded, "fits")["status"].get("phase") == "Running", what="admitted")


async def test_the_default_scheduler_counts_room_as_kube_scheduler_does(seeded: KubeApiEmulator):
    seeded.create("", "v1", "pods", gpus("huge", 9, scheduler=None), NS)
    await seeded.kubelet.settled()
    scheduled = next(c for c in stored(seeded, "huge")["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["message"] == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: "
        "2 No preemption victims found for incoming pod."
    )
    # room held by a pod of another scheduler, bound to node-0000, counts too
    seeded.create("", "v1", "pods", gpus("ours", 8, nodeName="node-0000"), NS)
    seeded.create("", "v1", "pods", gpus("next", 1, scheduler=None), NS)
    await wait_for(lambda: stored(seeded, "next")["spec"].get("nodeName") == "node-0001", what="placed")
    seeded.patch("", "v1", "nodes", "node-0001", {"spec": {"unschedulable": True}})
    seeded.create("", "v1", "pods", gpus("none", 1, scheduler=None), NS)
    await seeded.kubelet.settled()
    waiting = next(c for c in stored(seeded, "none")["status"]["conditions"] if c["type"] == "PodScheduled")
    assert waiting["message"] == (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable. preemption: "
        "0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not "
        "helpful for scheduling."
    )
