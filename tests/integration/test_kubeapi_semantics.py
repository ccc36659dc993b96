"""The emulator behaves as kube-apiserver does, checked through the real kubernetes_asyncio client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions
from tests.helpers import wait_for

pytestmark = pytest.mark.kube

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@pytest.fixture
async def api_client(kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
async def http(kube_api: KubeApiEmulator) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=kube_api.url) as session:
        yield session


async def raw_patch(http: aiohttp.ClientSession, path: str, body: Any, content_type: str) -> tuple[int, Any]:
    async with http.patch(path, data=json.dumps(body), headers={"Content-Type": content_type}) as response:
        return response.status, await response.json()


async def test_resource_versions_are_global_and_monotonic(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=3))
    core: Any = client.CoreV1Api(api_client)
    nodes = await core.list_node()
    before = int(nodes.metadata.resource_version)
    assert len(nodes.items) == 3
    assert all(int(n.metadata.resource_version) <= before for n in nodes.items)
    await core.patch_node("node-0000", {"metadata": {"labels": {"a": "1"}}})
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    after_node = int((await core.read_node("node-0000")).metadata.resource_version)
    assert before < after_node < int(cm.metadata.resource_version)
    assert int((await core.list_node()).metadata.resource_version) >= int(cm.metadata.resource_version)


async def test_noop_patch_keeps_the_resource_version(kube_api: KubeApiEmulator, api_client: client.ApiClient):
    kube_api.seed(SeedOptions(nodes=1))
    core: Any = client.CoreV1Api(api_client)
    first = await core.patch_node("node-0000", {"metadata": {"annotations": {"x": "1"}}})
    again = await core.patch_node("node-0000", {"metadata": {"annotations": {"x": "1"}}})
    assert first.metadata.resource_version == again.metadata.resource_version


async def test_watch_from_list_rv_replays_only_later_changes(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=3))
    core: Any = client.CoreV1Api(api_client)
    listed = await core.list_node()
    await core.patch_node("node-0001", {"spec": {"unschedulable": True}})
    events = []
    async with watch.Watch() as w:
        async for event in w.stream(
            core.list_node, resource_version=listed.metadata.resource_version, timeout_seconds=1
        ):
            events.append((event["type"], event["object"].metadata.name, event["object"].spec.unschedulable))
    assert events == [("MODIFIED", "node-0001", True)]


async def test_watch_without_rv_starts_with_current_state(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=2))
    core: Any = client.CoreV1Api(api_client)
    async with watch.Watch() as w:
        names = [e["object"].metadata.name async for e in w.stream(core.list_node, timeout_seconds=1)]
    assert names == ["node-0000", "node-0001"]


async def test_bookmarks_carry_the_latest_resource_version(
    kube_api: KubeApiEmulator, http: aiohttp.ClientSession
):
    kube_api.seed(SeedOptions(nodes=1))
    start = kube_api.api.store.rv
    kube_api.create("", "v1", "configmaps", {"metadata": {"name": "unrelated"}}, namespace="default")
    params = {
        "watch": "1",
        "resourceVersion": str(start),
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "3",  # bookmarks stop 2 s before the timeout, as in kube-apiserver
    }
    async with http.get("/api/v1/nodes", params=params) as response:
        events = [json.loads(line) async for line in response.content if line.strip()]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and all(e["object"]["kind"] == "Node" for e in bookmarks)
    assert int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) == kube_api.api.store.rv
    assert not [e for e in events if e["type"] != "BOOKMARK"]


async def test_watch_from_compacted_rv_gets_410_error_event(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=1))
    core: Any = client.CoreV1Api(api_client)
    old_rv = (await core.list_node()).metadata.resource_version
    await core.patch_node("node-0000", {"metadata": {"labels": {"a": "1"}}})
    kube_api.compact()
    with pytest.raises(ApiException) as raised:
        async with watch.Watch() as w:
            async for _ in w.stream(core.list_node, resource_version=old_rv, timeout_seconds=1):
                pass
    assert raised.value.status == 410


async def test_exact_list_and_continue_after_compaction_get_410(
    kube_api: KubeApiEmulator, http: aiohttp.ClientSession
):
    kube_api.seed(SeedOptions(nodes=5))
    async with http.get("/api/v1/nodes", params={"limit": "2"}) as response:
        page = await response.json()
    assert len(page["items"]) == 2 and page["metadata"]["remainingItemCount"] == 3
    rv = page["metadata"]["resourceVersion"]
    kube_api.patch("", "v1", "nodes", "node-0003", {"metadata": {"labels": {"x": "y"}}})
    async with http.get(
        "/api/v1/nodes", params={"limit": "2", "continue": page["metadata"]["continue"]}
    ) as response:
        second = await response.json()
    # consistent snapshot: the page after the change still shows the node as it was at `rv`
    assert [n["metadata"]["name"] for n in second["items"]] == ["node-0002", "node-0003"]
    assert "x" not in second["items"][1]["metadata"]["labels"]
    kube_api.compact()
    async with http.get(
        "/api/v1/nodes", params={"limit": "2", "continue": second["metadata"]["continue"]}
    ) as response:
        assert response.status == 410
        assert (await response.json())["reason"] == "Expired"
    async with http.get(
        "/api/v1/nodes", params={"resourceVersion": rv, "resourceVersionMatch": "Exact"}
    ) as response:
        assert response.status == 410


async def test_watch_times_out_after_timeout_seconds(kube_api: KubeApiEmulator, http: aiohttp.ClientSession):
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with http.get("/api/v1/nodes", params={"watch": "true", "timeoutSeconds": "1"}) as response:
        await response.read()
    assert 0.9 <= loop.time() - started < 5


async def test_label_selectors(kube_api: KubeApiEmulator, api_client: client.ApiClient):
    kube_api.seed(SeedOptions(nodes=4))
    core: Any = client.CoreV1Api(api_client)
    for index, zone in enumerate(["a", "b", "c"]):
        await core.patch_node(f"node-000{index}", {"metadata": {"labels": {"zone": zone}}})

    async def names(selector: str) -> list[str]:
        return [n.metadata.name for n in (await core.list_node(label_selector=selector)).items]

    assert await names("zone=a") == ["node-0000"]
    assert await names("zone!=a") == ["node-0001", "node-0002", "node-0003"]
    assert await names("zone in (a,c)") == ["node-0000", "node-0002"]
    assert await names("zone notin (a,c)") == ["node-0001", "node-0003"]
    assert await names("zone") == ["node-0000", "node-0001", "node-0002"]
    assert await names("!zone") == ["node-0003"]
    assert await names("zone,zone!=b") == ["node-0000", "node-0002"]


async def test_label_selector_changes_turn_into_added_and_deleted(
    kube_api: KubeApiEmulator, http: aiohttp.ClientSession
):
    kube_api.seed(SeedOptions(nodes=1))
    start = kube_api.api.store.rv
    kube_api.patch("", "v1", "nodes", "node-0000", {"metadata": {"labels": {"team": "hpc"}}})
    kube_api.patch("", "v1", "nodes", "node-0000", {"metadata": {"labels": {"team": None}}})
    params = {"watch": "1", "resourceVersion": str(start), "labelSelector": "team=hpc", "timeoutSeconds": "1"}
    async with http.get("/api/v1/nodes", params=params) as response:
        types = [json.loads(line)["type"] async for line in response.content if line.strip()]
    assert types == ["ADDED", "DELETED"]


async def test_field_selectors(kube_api: KubeApiEmulator, api_client: client.ApiClient):
    kube_api.seed(SeedOptions(nodes=2))
    core: Any = client.CoreV1Api(api_client)
    for name, node in (("a", "node-0000"), ("b", "node-0001"), ("c", "")):
        spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
        if node:
            spec["nodeName"] = node
        else:
            spec["nodeSelector"] = {"nowhere": "true"}
        await core.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": spec})
    on_first = await core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-0000")
    assert [p.metadata.name for p in on_first.items] == ["a"]
    by_name = await core.list_node(field_selector="metadata.name=node-0001")
    assert [n.metadata.name for n in by_name.items] == ["node-0001"]
    await wait_for(lambda: (kube_api.pod("default", "a") or {}).get("status", {}).get("phase") == "Running")
    pending = await core.list_namespaced_pod("default", field_selector="status.phase=Pending")
    assert [p.metadata.name for p in pending.items] == ["c"]
    with pytest.raises(ApiException) as raised:
        await core.list_node(field_selector="spec.bogus=1")
    assert raised.value.status == 400


async def test_put_with_stale_resource_version_conflicts(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=1))
    core: Any = client.CoreV1Api(api_client)
    node = await core.read_node("node-0000")
    await core.patch_node("node-0000", {"metadata": {"labels": {"moved": "on"}}})
    node.metadata.labels["mine"] = "x"
    with pytest.raises(ApiException) as raised:
        await core.replace_node("node-0000", node)
    assert raised.value.status == 409
    body = json.loads(raised.value.body or b"{}")
    assert body["kind"] == "Status" and body["reason"] == "Conflict" and body["code"] == 409


async def test_patch_with_stale_resource_version_conflicts(
    kube_api: KubeApiEmulator, http: aiohttp.ClientSession
):
    kube_api.seed(SeedOptions(nodes=1))
    stale = kube_api.node("node-0000")["metadata"]["resourceVersion"]  # type: ignore[index]
    kube_api.patch("", "v1", "nodes", "node-0000", {"metadata": {"labels": {"a": "b"}}})
    status, body = await raw_patch(
        http, "/api/v1/nodes/node-0000", {"metadata": {"resourceVersion": stale, "labels": {"c": "d"}}}, MERGE
    )
    assert status == 409 and body["reason"] == "Conflict"
    fresh = kube_api.node("node-0000")["metadata"]["resourceVersion"]  # type: ignore[index]
    status, body = await raw_patch(
        http, "/api/v1/nodes/node-0000", {"metadata": {"resourceVersion": fresh, "labels": {"c": "d"}}}, MERGE
    )
    assert status == 200 and body["metadata"]["labels"]["c"] == "d"


async def test_merge_patch_null_deletes_and_maps_merge(
    kube_api: KubeApiEmulator, http: aiohttp.ClientSession
):
    kube_api.seed(SeedOptions(nodes=1))
    await raw_patch(
        http, "/api/v1/nodes/node-0000", {"metadata": {"annotations": {"a": "1", "b": "2"}}}, MERGE
    )
    status, body = await raw_patch(
        http, "/api/v1/nodes/node-0000", {"metadata": {"annotations": {"a": None}}}, MERGE
    )
    assert status == 200 and body["metadata"]["annotations"] == {"b": "2"}
    assert body["metadata"]["labels"]["kubernetes.io/hostname"] == "node-0000"


async def test_strategic_merge_patch_merges_conditions_by_type(
    kube_api: KubeApiEmulator, http: aiohttp.ClientSession
):
    kube_api.seed(SeedOptions(nodes=1))
    condition = {"type": "GpuUnhealthy", "status": "True", "reason": "XidError", "message": "xid 79"}
    status, body = await raw_patch(
        http, "/api/v1/nodes/node-0000/status", {"status": {"conditions": [condition]}}, STRATEGIC
    )
    assert status == 200
    types = {c["type"]: c["status"] for c in body["status"]["conditions"]}
    assert types == {"Ready": "True", "GpuUnhealthy": "True"}
    # the same patch as a merge patch replaces the whole list, as in Kubernetes
    status, body = await raw_patch(
        http, "/api/v1/nodes/node-0000/status", {"status": {"conditions": [condition]}}, MERGE
    )
    assert [c["type"] for c in body["status"]["conditions"]] == ["GpuUnhealthy"]


async def test_strategic_merge_is_refused_for_custom_resources(
    kube_api: KubeApiEmulator, http: aiohttp.ClientSession
):
    kube_api.seed(SeedOptions(nodes=1, nodeset="gpu"))
    status, body = await raw_patch(
        http,
        "/apis/slurm-syncer.dev/v1alpha1/namespaces/slurm/nodesets/gpu",
        {"spec": {"replicas": 2}},
        STRATEGIC,
    )
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


async def test_json_patch_with_failing_test_is_422(kube_api: KubeApiEmulator, http: aiohttp.ClientSession):
    kube_api.seed(SeedOptions(nodes=1))
    rv = kube_api.node("node-0000")["metadata"]["resourceVersion"]  # type: ignore[index]
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/labels/x", "value": "y"},
    ]
    status, body = await raw_patch(http, "/api/v1/nodes/node-0000", ops, JSON_PATCH)
    assert status == 422 and body["kind"] == "Status"
    ops[0]["value"] = rv
    status, body = await raw_patch(http, "/api/v1/nodes/node-0000", ops, JSON_PATCH)
    assert status == 200 and body["metadata"]["labels"]["x"] == "y"


async def test_generation_and_status_subresource_of_the_crd(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=1, nodeset="gpu"))
    custom: Any = client.CustomObjectsApi(api_client)
    args = ("slurm-syncer.dev", "v1alpha1", "slurm", "nodesets", "gpu")
    before = await custom.get_namespaced_custom_object(*args)
    assert before["metadata"]["generation"] == 1
    assert before["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1  # nested defaults
    # status sent to the main resource is ignored; spec changes bump generation
    changed = await custom.patch_namespaced_custom_object(
        *args, {"spec": {"replicas": 7}, "status": {"replicas": 99}}, _content_type=MERGE
    )
    assert changed["metadata"]["generation"] == 2 and "status" not in changed
    with_status = await custom.patch_namespaced_custom_object_status(
        *args, {"status": {"replicas": 3}, "spec": {"replicas": 1}}, _content_type=MERGE
    )
    assert with_status["status"]["replicas"] == 3 and with_status["spec"]["replicas"] == 7
    assert with_status["metadata"]["generation"] == 2


async def test_crd_schema_rejects_invalid_nodesets(kube_api: KubeApiEmulator, api_client: client.ApiClient):
    custom: Any = client.CustomObjectsApi(api_client)
    kube_api.create("", "v1", "namespaces", {"metadata": {"name": "slurm"}})
    bad = {
        "apiVersion": "slurm-syncer.dev/v1alpha1",
        "kind": "NodeSet",
        "metadata": {"name": "bad"},
        "spec": {"replicas": -1, "mode": "Sometimes", "template": {}},
    }
    with pytest.raises(ApiException) as raised:
        await custom.create_namespaced_custom_object("slurm-syncer.dev", "v1alpha1", "slurm", "nodesets", bad)
    body = json.loads(raised.value.body or b"{}")
    assert raised.value.status == 422 and body["reason"] == "Invalid"
    assert "spec.replicas" in body["message"] and "spec.mode" in body["message"]


async def test_finalizers_hold_deletion(kube_api: KubeApiEmulator, api_client: client.ApiClient):
    core: Any = client.CoreV1Api(api_client)
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "held", "finalizers": ["example.com/x"]}}
    )
    await core.delete_namespaced_config_map("held", "default")
    still = await core.read_namespaced_config_map("held", "default")
    assert still.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as raised:
        await core.read_namespaced_config_map("held", "default")
    assert raised.value.status == 404 and json.loads(raised.value.body or b"{}")["reason"] == "NotFound"


async def test_fake_kubelet_runs_pods_and_follows_node_health(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=2))
    core: Any = client.CoreV1Api(api_client)
    pod = {"metadata": {"name": "slurmd-0"}, "spec": {"containers": [{"name": "slurmd", "image": "slurmd"}]}}
    await core.create_namespaced_pod("default", pod)

    def ready() -> str:
        found = kube_api.pod("default", "slurmd-0") or {}
        conditions = (found.get("status") or {}).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == "Ready"), "")

    await wait_for(lambda: ready() == "True", what="pod Running and Ready")
    node_name = kube_api.pod("default", "slurmd-0")["spec"]["nodeName"]  # type: ignore[index]
    kube_api.set_node_condition(node_name, "Ready", "False", "KubeletNotReady", "PLEG is not healthy")
    await wait_for(lambda: ready() == "False", what="pod NotReady with its Node")
    kube_api.set_node_condition(node_name, "Ready", "True", "KubeletReady")
    await wait_for(lambda: ready() == "True", what="pod Ready again")
    # a cordoned Node keeps its pods but takes no new ones
    await core.patch_node(node_name, {"spec": {"unschedulable": True}})
    await core.create_namespaced_pod("default", {**pod, "metadata": {"name": "slurmd-1"}})
    await wait_for(
        lambda: (kube_api.pod("default", "slurmd-1") or {}).get("spec", {}).get("nodeName") is not None
    )
    assert kube_api.pod("default", "slurmd-1")["spec"]["nodeName"] != node_name  # type: ignore[index]
    assert ready() == "True"


async def test_fake_kubelet_tracks_which_pods_each_node_runs(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=2))
    core: Any = client.CoreV1Api(api_client)
    for node in ("node-0000", "node-0001"):
        await core.patch_node(node, {"spec": {"unschedulable": True}})
    pod = {"metadata": {"name": "waiting"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    await core.create_namespaced_pod("default", pod)

    def placed(name: str) -> str | None:
        return ((kube_api.pod("default", name) or {}).get("spec") or {}).get("nodeName")

    def ready(name: str) -> str:
        conditions = ((kube_api.pod("default", name) or {}).get("status") or {}).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == "Ready"), "")

    await wait_for(
        lambda: any(
            c.get("reason") == "Unschedulable"
            for c in ((kube_api.pod("default", "waiting") or {}).get("status") or {}).get("conditions") or []
        ),
        what="pod Unschedulable while every Node is cordoned",
    )
    await core.patch_node("node-0001", {"spec": {"unschedulable": None}})  # a waiting pod follows any Node
    await wait_for(lambda: placed("waiting") == "node-0001" and ready("waiting") == "True", what="pod placed")
    # the pod leaves; one of that name comes back on the other Node: the first Node's health is no longer its
    await core.delete_namespaced_pod("waiting", "default", grace_period_seconds=0)
    await wait_for(lambda: kube_api.pod("default", "waiting") is None, what="pod gone")
    spec = {"nodeName": "node-0000", "containers": [{"name": "c", "image": "i"}]}
    await core.create_namespaced_pod("default", {"metadata": {"name": "waiting"}, "spec": spec})
    await wait_for(lambda: ready("waiting") == "True", what="pod Ready on node-0000")
    kube_api.set_node_condition("node-0001", "Ready", "False", "KubeletNotReady", "PLEG is not healthy")
    kube_api.set_node_condition("node-0000", "Ready", "False", "KubeletNotReady", "PLEG is not healthy")
    await wait_for(lambda: ready("waiting") == "False", what="pod NotReady with its own Node")
    kube_api.set_node_condition("node-0000", "Ready", "True", "KubeletReady")
    await wait_for(lambda: ready("waiting") == "True", what="pod Ready again with its own Node")
    assert placed("waiting") == "node-0000"


async def test_graceful_pod_deletion_shows_deletion_timestamp(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
):
    kube_api.seed(SeedOptions(nodes=1))
    core: Any = client.CoreV1Api(api_client)
    spec = {"nodeName": "node-0000", "containers": [{"name": "c", "image": "i"}]}
    await core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": spec})
    await core.delete_namespaced_pod("p", "default")
    terminating = await core.read_namespaced_pod("p", "default")
    assert terminating.metadata.deletion_timestamp is not None
    await wait_for(lambda: kube_api.pod("default", "p") is None, what="kubelet to finish terminating the pod")


async def test_eviction_respects_pod_disruption_budgets(
    kube_api: KubeApiEmulator, http: aiohttp.ClientSession
):
    kube_api.seed(SeedOptions(nodes=2))
    for index in range(2):
        spec = {"nodeName": f"node-000{index}", "containers": [{"name": "c", "image": "i"}]}
        kube_api.create(
            "",
            "v1",
            "pods",
            {"metadata": {"name": f"p{index}", "labels": {"app": "x"}}, "spec": spec},
            "default",
        )
    pdb = {
        "metadata": {"name": "keep"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "x"}}},
    }
    kube_api.create("policy", "v1", "poddisruptionbudgets", pdb, "default")
    await wait_for(
        lambda: all(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (kube_api.pod("default", f"p{i}") or {}).get("status", {}).get("conditions", [])
            )
            for i in range(2)
        ),
        what="both pods Ready",
    )
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p0", "namespace": "default"},
    }
    async with http.post("/api/v1/namespaces/default/pods/p0/eviction", json=eviction) as response:
        body = await response.json()
        assert response.status == 429 and body["reason"] == "TooManyRequests"
        assert "disruption budget" in body["message"]
    kube_api.patch(
        "policy", "v1", "poddisruptionbudgets", "keep", {"spec": {"minAvailable": 1}}, namespace="default"
    )
    async with http.post("/api/v1/namespaces/default/pods/p0/eviction", json=eviction) as response:
        assert response.status == 201
    assert kube_api.pod("default", "p0")["metadata"]["deletionTimestamp"]  # type: ignore[index]


async def test_scale_subresource(kube_api: KubeApiEmulator, api_client: client.ApiClient):
    kube_api.seed(SeedOptions(nodes=1, nodeset="gpu"))
    custom: Any = client.CustomObjectsApi(api_client)
    args = ("slurm-syncer.dev", "v1alpha1", "slurm", "nodesets", "gpu")
    scale = await custom.get_namespaced_custom_object_scale(*args)
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    await custom.patch_namespaced_custom_object_scale(*args, {"spec": {"replicas": 4}}, _content_type=MERGE)
    assert (await custom.get_namespaced_custom_object(*args))["spec"]["replicas"] == 4


async def test_leases_use_optimistic_concurrency(kube_api: KubeApiEmulator, api_client: client.ApiClient):
    coordination: Any = client.CoordinationV1Api(api_client)
    lease = {
        "metadata": {"name": "slurm-syncer"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    created = await coordination.create_namespaced_lease("default", lease)
    created.spec.holder_identity = "b"
    await coordination.replace_namespaced_lease("slurm-syncer", "default", created)
    created.spec.holder_identity = "c"
    with pytest.raises(ApiException) as raised:
        await coordination.replace_namespaced_lease("slurm-syncer", "default", created)
    assert raised.value.status == 409
    with pytest.raises(ApiException) as raised:
        await coordination.create_namespaced_lease("default", lease)
    assert raised.value.status == 409 and json.loads(raised.value.body or b"{}")["reason"] == "AlreadyExists"


async def test_self_subject_access_review(kube_api: KubeApiEmulator, api_client: client.ApiClient):
    authz: Any = client.AuthorizationV1Api(api_client)

    async def allowed(verb: str, resource: str, group: str = "") -> bool:
        review = {"spec": {"resourceAttributes": {"verb": verb, "resource": resource, "group": group}}}
        return bool((await authz.create_self_subject_access_review(review)).status.allowed)

    assert await allowed("patch", "nodes")
    kube_api.api.denied_access.add(("patch", "", "nodes"))
    assert not await allowed("patch", "nodes")


async def test_annotations_over_256k_are_invalid(kube_api: KubeApiEmulator, http: aiohttp.ClientSession):
    kube_api.seed(SeedOptions(nodes=1))
    status, body = await raw_patch(
        http, "/api/v1/nodes/node-0000", {"metadata": {"annotations": {"big": "x" * (300 * 1024)}}}, MERGE
    )
    assert status == 422 and body["reason"] == "Invalid" and "metadata.annotations" in body["message"]


async def test_fault_injection(kube_api: KubeApiEmulator, http: aiohttp.ClientSession):
    kube_api.seed(SeedOptions(nodes=1))
    kube_api.faults.fail_next(2, 429, retry_after_s=3)
    for _ in range(2):
        async with http.get("/api/v1/nodes") as response:
            assert response.status == 429 and response.headers["Retry-After"] == "3"
    async with http.get("/api/v1/nodes") as response:
        assert response.status == 200
    # dropping watches ends open streams
    async with http.get("/api/v1/nodes", params={"watch": "1", "timeoutSeconds": "30"}) as response:
        await response.content.readline()  # the initial ADDED
        kube_api.drop_watches()
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(response.read(), 5)
    # paused: requests hang until resumed
    kube_api.faults.pause()
    pending = asyncio.create_task(http.get("/version"))
    await asyncio.sleep(0)  # let the request start; the assertion below is the real check
    assert not pending.done()
    kube_api.faults.resume()
    response = await asyncio.wait_for(pending, 5)
    assert response.status == 200
    response.release()
    # control endpoint, for processes that share no Python objects with the emulator
    async with http.post("/_emulator/faults", json={"fail_next": 1, "status": 500}) as control:
        assert control.status == 200
    async with http.get("/api/v1/nodes") as response:
        assert response.status == 500 and (await response.json())["reason"] == "InternalError"


async def test_errors_are_status_objects(http: aiohttp.ClientSession):
    async with http.get("/api/v1/nodes/missing") as response:
        body = await response.json()
    assert response.status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "missing" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "missing", "group": "", "kind": "nodes"},
    }


async def test_bearer_token_is_required_when_configured(tmp_path: Path):
    async with KubeApiEmulator(token="s3cret") as kube:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{kube.url}/api/v1/nodes") as response:
                assert response.status == 401
            async with session.get(
                f"{kube.url}/api/v1/nodes", headers={"Authorization": "Bearer s3cret"}
            ) as response:
                assert response.status == 200
