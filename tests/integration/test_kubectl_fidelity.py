"""The real kubectl binary against the emulator: what an operator types must work as on a cluster."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions
from tests.fixtures.kube import Kubectl
from tests.helpers import wait_for

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]


async def test_get_with_table_json_and_wide_output(kube_api: KubeApiEmulator, kubectl: Kubectl):
    kube_api.seed(SeedOptions(nodes=3))
    table = await kubectl("get", "nodes")
    assert table.splitlines()[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert "node-0002   Ready" in table
    wide = await kubectl("get", "nodes", "-o", "wide")
    assert "INTERNAL-IP" in wide.splitlines()[0] and "10.0.0.1" in wide
    listed = await kubectl.json("get", "nodes")
    assert listed["kind"] == "List" and [n["metadata"]["name"] for n in listed["items"]] == [
        "node-0000",
        "node-0001",
        "node-0002",
    ]
    one = await kubectl.json("get", "node", "node-0001")
    assert one["kind"] == "Node" and one["status"]["conditions"][0]["type"] == "Ready"
    missing = await kubectl("get", "node", "nope", ok=False)
    assert 'nodes "nope" not found' in missing


async def test_describe_shows_conditions_pods_and_events(kube_api: KubeApiEmulator, kubectl: Kubectl):
    kube_api.seed(SeedOptions(nodes=1))
    spec = {"nodeName": "node-0000", "containers": [{"name": "slurmd", "image": "slurmd"}]}
    kube_api.create("", "v1", "pods", {"metadata": {"name": "slurmd-0"}, "spec": spec}, "default")
    event = {
        "metadata": {"name": "node-0000.drained", "namespace": "default"},
        # kubelet and kubectl use the Node's name as the uid of a Node event reference
        "involvedObject": {"kind": "Node", "name": "node-0000", "uid": "node-0000", "apiVersion": "v1"},
        "reason": "SlurmNodeDrained",
        "message": "Slurm drained node-0000",
        "type": "Normal",
        "count": 1,
        "firstTimestamp": "2026-11-22T10:00:00Z",
        "lastTimestamp": "2026-11-22T10:00:00Z",
        "source": {"component": "slurm-syncer"},
    }
    kube_api.create("", "v1", "events", event, "default")
    described = await kubectl("describe", "node", "node-0000")
    assert "KubeletReady" in described
    assert "slurmd-0" in described
    assert "SlurmNodeDrained" in described


async def test_label_and_field_selectors(kube_api: KubeApiEmulator, kubectl: Kubectl):
    kube_api.seed(SeedOptions(nodes=3))
    await kubectl("label", "node", "node-0001", "zone=b")
    assert (await kubectl("get", "nodes", "-l", "zone=b", "-o", "name")).split() == ["node/node-0001"]
    assert (await kubectl("get", "nodes", "-l", "zone notin (b)", "-o", "name")).split() == [
        "node/node-0000",
        "node/node-0002",
    ]
    named = await kubectl("get", "nodes", "--field-selector", "metadata.name=node-0002", "-o", "name")
    assert named.split() == ["node/node-0002"]


async def test_cordon_and_uncordon(kube_api: KubeApiEmulator, kubectl: Kubectl):
    kube_api.seed(SeedOptions(nodes=1))
    await kubectl("cordon", "node-0000")
    assert kube_api.node("node-0000")["spec"]["unschedulable"] is True  # type: ignore[index]
    assert "SchedulingDisabled" in await kubectl("get", "node", "node-0000")
    await kubectl("uncordon", "node-0000")
    assert not kube_api.node("node-0000")["spec"].get("unschedulable")  # type: ignore[index]


async def test_annotate_and_label_add_overwrite_remove(kube_api: KubeApiEmulator, kubectl: Kubectl):
    kube_api.seed(SeedOptions(nodes=1))
    await kubectl("annotate", "node", "node-0000", "slurm-syncer.dev/drain=bad DIMM")
    assert kube_api.node("node-0000")["metadata"]["annotations"]["slurm-syncer.dev/drain"] == "bad DIMM"  # type: ignore[index]
    refused = await kubectl("annotate", "node", "node-0000", "slurm-syncer.dev/drain=other", ok=False)
    assert "already has a value" in refused
    await kubectl("annotate", "--overwrite", "node", "node-0000", "slurm-syncer.dev/drain=other")
    await kubectl("annotate", "node", "node-0000", "slurm-syncer.dev/drain-")
    assert "slurm-syncer.dev/drain" not in (kube_api.node("node-0000")["metadata"].get("annotations") or {})  # type: ignore[index]
    await kubectl("label", "node", "node-0000", "team=hpc")
    await kubectl("label", "node", "node-0000", "team-")
    assert "team" not in kube_api.node("node-0000")["metadata"]["labels"]  # type: ignore[index]


async def test_patch_of_each_type(kube_api: KubeApiEmulator, kubectl: Kubectl):
    kube_api.seed(SeedOptions(nodes=1))
    await kubectl("patch", "node", "node-0000", "--type", "merge", "-p", '{"metadata":{"labels":{"m":"1"}}}')
    condition = '{"type":"GpuUnhealthy","status":"True","reason":"Xid","message":"79"}'
    status_patch = '{"status":{"conditions":[' + condition + "]}}"
    await kubectl(
        "patch", "node", "node-0000", "--subresource", "status", "--type", "strategic", "-p", status_patch
    )
    await kubectl(
        "patch",
        "node",
        "node-0000",
        "--type",
        "json",
        "-p",
        '[{"op":"add","path":"/metadata/labels/j","value":"2"}]',
    )
    node = kube_api.node("node-0000")
    assert node is not None
    assert node["metadata"]["labels"]["m"] == "1" and node["metadata"]["labels"]["j"] == "2"
    assert {c["type"] for c in node["status"]["conditions"]} == {"Ready", "GpuUnhealthy"}
    failed = await kubectl(
        "patch",
        "node",
        "node-0000",
        "--type",
        "json",
        "-p",
        '[{"op":"test","path":"/metadata/name","value":"x"}]',
        ok=False,
    )
    assert "the server rejected our request due to an error in our request" in failed  # as kube-apiserver


async def test_delete(kube_api: KubeApiEmulator, kubectl: Kubectl):
    kube_api.seed(SeedOptions(nodes=1))
    kube_api.create("", "v1", "configmaps", {"metadata": {"name": "gone"}}, "default")
    assert 'configmap "gone" deleted' in await kubectl("delete", "configmap", "gone")
    assert kube_api.get("", "v1", "configmaps", "gone", "default") is None


async def test_apply_the_crd_and_a_nodeset(tmp_path: Path):
    async with KubeApiEmulator(with_crds=False) as kube:
        kubectl = Kubectl(kube.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
        crd = REPO / "deploy" / "crds" / "nodesets.slurm-syncer.dev.yaml"
        assert "created" in await kubectl("apply", "-f", str(crd))
        assert "unchanged" in await kubectl("apply", "-f", str(crd))
        await kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: slurm}\n")
        manifest = (
            "apiVersion: slurm-syncer.dev/v1alpha1\nkind: NodeSet\nmetadata: {name: gpu, namespace: slurm}\n"
            "spec:\n  replicas: 2\n  template: {spec: {containers: [{name: slurmd, image: slurmd}]}}\n"
        )
        assert "nodeset.slurm-syncer.dev/gpu created" in await kubectl("apply", "-f", "-", stdin=manifest)
        assert "configured" in await kubectl(
            "apply", "-f", "-", stdin=manifest.replace("replicas: 2", "replicas: 3")
        )
        nodeset = kube.get("slurm-syncer.dev", "v1alpha1", "nodesets", "gpu", "slurm")
        assert (
            nodeset is not None
            and nodeset["spec"]["replicas"] == 3
            and nodeset["metadata"]["generation"] == 2
        )
        printed = await kubectl("get", "nds", "-n", "slurm")
        assert printed.split()[:4] == ["NAME", "REPLICAS", "READY", "UPDATED"]
        await kubectl("scale", "nodeset", "gpu", "-n", "slurm", "--replicas=5")
        assert (
            await kubectl("get", "nodeset", "gpu", "-n", "slurm", "-o", "jsonpath={.spec.replicas}")
        ) == "5"
        invalid = await kubectl(
            "apply", "-f", "-", stdin=manifest.replace("replicas: 2", "replicas: -3"), ok=False
        )
        assert "spec.replicas" in invalid


async def test_get_watch_sees_changes(kube_api: KubeApiEmulator, kubectl: Kubectl):
    kube_api.seed(SeedOptions(nodes=2))
    process = await asyncio.create_subprocess_exec(
        *kubectl.argv(
            "get", "nodes", "--watch", "-o", "custom-columns=NAME:.metadata.name,UNSCHED:.spec.unschedulable"
        ),
        env=kubectl.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    lines: list[str] = []

    async def pump() -> None:
        assert process.stdout is not None
        async for raw in process.stdout:
            lines.append(raw.decode().strip())

    reader = asyncio.create_task(pump())
    try:
        await wait_for(
            lambda: any(line.startswith("node-0001") for line in lines), what="initial watch lines"
        )
        kube_api.patch("", "v1", "nodes", "node-0001", {"spec": {"unschedulable": True}})
        await wait_for(
            lambda: any(line.split() == ["node-0001", "true"] for line in lines), what="watched cordon"
        )
    finally:
        process.terminate()
        await process.wait()
        reader.cancel()
