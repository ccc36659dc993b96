"""The SlurmPartition CRD on the real API server: defaults, the refusals docs/partitions.md promises (schema
and CEL rules, word for word), printer columns, and status written only through the status subresource.
Also served by the project's emulator (which does not evaluate CEL: docs/emulator.md)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from syncer.kube.client import MERGE_PATCH, KubeClient
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi_real import RealKubeApi
from tests.fixtures.kube import Kubectl

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "partitions.md"
GROUP = "/apis/slurm-syncer.dev/v1alpha1/slurmpartitions"
NODES = {"hosts": ["node[001-004]"]}


@pytest.fixture
def kubectl(real_kube_api: RealKubeApi, tmp_path: Path) -> Kubectl:
    return Kubectl(real_kube_api.write_kubeconfig(tmp_path / "kubeconfig", "default"), tmp_path / "cache")


@pytest.fixture
async def kube(kubectl: Kubectl) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_config(kubectl.env["KUBECONFIG"])
    try:
        yield client
    finally:
        await client.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def partition(name: str, spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "slurm-syncer.dev/v1alpha1", "kind": "SlurmPartition",
                           "metadata": {"name": name}, "spec": spec})  # fmt: skip


async def test_defaults_and_printer_columns(kubectl: Kubectl):
    name = unique("gpu")
    await kubectl("apply", "-f", "-", stdin=partition(name, {"nodes": NODES, "maxTime": 120}))
    got = await kubectl.json("get", "spart", name)
    assert "state" not in got["spec"], "no default state: unset is not managed (an admin's stays)"
    assert got["spec"]["adopt"] is False
    assert "namespace" not in got["metadata"], "cluster-scoped"
    table = await kubectl("get", "slurmpartitions", name)
    assert table.splitlines()[0].split() == [
        "NAME",
        "PARTITION",
        "STATE",
        "NODES",
        "RUNNING",
        "PENDING",
        "READY",
        "AGE",
    ]
    wide = await kubectl("get", "spart", name, "-o", "wide")
    assert wide.splitlines()[0].split()[-2:] == ["WANTED", "NODELIST"]


# What docs/partitions.md ("What the API server refuses") promises, word for word.
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "no members": (
        {"nodes": {}},
        "spec.nodes: Invalid value: nodes needs a selector, nodeSets or hosts",
    ),
    "unknown state": (
        {"nodes": NODES, "state": "BOGUS"},
        'spec.state: Unsupported value: "BOGUS": supported values: "UP", "DOWN", "DRAIN", "INACTIVE"',
    ),
    "negative tier": (
        {"nodes": NODES, "priorityTier": -1},
        "spec.priorityTier: Invalid value: -1: spec.priorityTier in body should be greater than or equal to "
        "0",
    ),
    "maxTime 0": ({"nodes": NODES, "maxTime": 0}, "a whole number of minutes from 1, or UNLIMITED"),
    "maxTime forever": (
        {"nodes": NODES, "maxTime": "forever"},
        "a whole number of minutes from 1, or UNLIMITED",
    ),
    "defaultTime over maxTime": (
        {"nodes": NODES, "maxTime": 60, "defaultTime": 90},
        "defaultTime cannot exceed maxTime (Slurm would silently drop it)",
    ),
    "maxNodes 0": ({"nodes": NODES, "maxNodes": 0}, "a whole number of nodes from 1, or UNLIMITED"),
    "maxNodes all": ({"nodes": NODES, "maxNodes": "all"}, "a whole number of nodes from 1, or UNLIMITED"),
    "minNodes over maxNodes": (
        {"nodes": NODES, "maxNodes": 2, "minNodes": 3},
        "minNodes cannot exceed maxNodes",
    ),
    "allow and deny accounts": (
        {"nodes": NODES, "allowAccounts": ["a"], "denyAccounts": ["b"]},
        "allowAccounts and denyAccounts cannot both be set (Slurm uses one or the other)",
    ),
    "allow and deny qos": (
        {"nodes": NODES, "allowQos": ["a"], "denyQos": ["b"]},
        "allowQos and denyQos cannot both be set (Slurm uses one or the other)",
    ),
    "oversubscribe EXCLUSIVE": (
        {"nodes": NODES, "overSubscribe": {"mode": "EXCLUSIVE"}},
        'spec.overSubscribe.mode: Unsupported value: "EXCLUSIVE": supported values: "NO", "YES", "FORCE"',
    ),
    "jobs with NO": (
        {"nodes": NODES, "overSubscribe": {"mode": "NO", "jobs": 4}},
        "jobs is only for YES and FORCE",
    ),
    "account with a comma": (
        {"nodes": NODES, "allowAccounts": ["a,b"]},
        "spec.allowAccounts[0] in body should match",
    ),
    "selector without values": (
        {"nodes": {"selector": {"matchExpressions": [{"key": "pool", "operator": "In"}]}}},
        "In and NotIn need values; Exists and DoesNotExist take none",
    ),
    "empty selector": (
        {"nodes": {"selector": {}}},
        "an empty selector would take every Node: name a label (every Node on purpose: matchExpressions "
        "[{key: kubernetes.io/hostname, operator: Exists}])",
    ),
    "empty selector lists": (
        {"nodes": {"selector": {"matchLabels": {}, "matchExpressions": []}}},
        "an empty selector would take every Node",
    ),
    "10^11 hosts": (
        {"nodes": {"hosts": ["n[0-99999999999]"]}},
        "a host range's numbers have at most 9 digits",
    ),
    "65537 hosts": (
        {"nodes": {"hosts": ["a[1-65536]", "b[7-7]"]}},
        "hosts name at most 65536 hosts in all (the syncer expands them)",
    ),
    "10^8 hosts in nine digits": (
        {"nodes": {"hosts": ["n[100000000-199999999]"]}},
        "hosts name at most 65536 hosts in all (the syncer expands them)",
    ),
    "partition name with a space": (
        {"nodes": NODES, "partitionName": "a b"},
        "spec.partitionName in body should match",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_invalid_partitions_are_refused_with_the_documented_message(kubectl: Kubectl, case: str):
    spec, message = REFUSED[case]
    name = unique("bad")
    out = await kubectl("apply", "-f", "-", stdin=partition(name, spec), ok=False)
    assert f'The SlurmPartition "{name}" is invalid' in out, out
    assert message in out, out
    assert message in DOCS.read_text(), f"docs/partitions.md must promise: {message}"
    assert "NotFound" in await kubectl("get", "spart", name, ok=False)


async def test_a_long_name_needs_a_partition_name_and_the_partition_name_cannot_change(kubectl: Kubectl):
    message = "without spec.partitionName the name is the partition's, so at most 63 characters"
    changed = (
        "spec.partitionName cannot change (another name is another partition; make a new SlurmPartition)"
    )
    assert message in DOCS.read_text() and changed in DOCS.read_text()
    long = "a" * 70
    assert message in await kubectl("apply", "-f", "-", stdin=partition(long, {"nodes": NODES}), ok=False)
    await kubectl("apply", "-f", "-", stdin=partition(long, {"nodes": NODES, "partitionName": "gpu"}))
    out = await kubectl(
        "apply", "-f", "-", stdin=partition(long, {"nodes": NODES, "partitionName": "cpu"}), ok=False
    )
    assert changed in out, out
    out = await kubectl("apply", "-f", "-", stdin=partition(long, {"nodes": NODES}), ok=False)
    assert changed in out, out
    await kubectl("delete", "spart", long)


async def test_valid_edge_values_are_accepted(kubectl: Kubectl):
    for spec in (
        {"nodes": {"selector": {"matchLabels": {"pool": "gpu"}}}, "maxTime": "UNLIMITED", "defaultTime": 60},
        {"nodes": {"nodeSets": [{"namespace": "slurm", "name": "gpu"}]}, "maxTime": 60, "defaultTime": 60},
        {"nodes": {"hosts": ["a[1-65000]", "b[001-534]", "gpu-bm7", "c[999999999]"]}},  # 65,536 names
        {"nodes": {"selector": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}}},  # noqa: E501
        {
            "nodes": {"selector": {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}},
            "state": "DRAIN", "overSubscribe": {"mode": "FORCE", "jobs": 4}, "allowAccounts": ["a", "b"],
            "denyQos": ["low"], "maxNodes": "UNLIMITED", "minNodes": 2, "priorityTier": 65533, "adopt": True,
            "default": True,
        },
    ):  # fmt: skip
        await kubectl("apply", "-f", "-", stdin=partition(unique("ok"), spec))


async def test_status_is_written_through_the_status_subresource_only(kubectl: Kubectl, kube: KubeClient):
    name = unique("gpu")
    await kubectl("apply", "-f", "-", stdin=partition(name, {"nodes": NODES, "state": "UP"}))
    path = f"{GROUP}/{name}"
    status = {
        "observedGeneration": 1, "partitionName": name, "ownership": "created",
        "slurm": {"state": "UP", "nodes": "node[001-004]", "totalNodes": 4, "totalCpus": 16, "runningJobs": 2,
                  "pendingJobs": 1},
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "partition matches",
                        "lastTransitionTime": "2026-11-26T00:00:00Z", "observedGeneration": 1}],
    }  # fmt: skip
    written = await kube.patch(path + "/status", {"status": status, "spec": {"state": "DOWN"}}, MERGE_PATCH)
    assert written["status"] == status, (
        "every status field the controller writes survives the schema's pruning"
    )
    assert written["spec"]["state"] == "UP", "a /status write does not change spec"
    ignored = await kube.patch(path, {"status": {"ownership": "adopted"}}, MERGE_PATCH)
    assert ignored["status"]["ownership"] == "created", "the main resource does not change status"
    row = (await kubectl("get", "spart", name)).splitlines()[1].split()
    assert row[:7] == [name, name, "UP", "4", "2", "1", "Ready"]


async def test_the_emulator_serves_it_too(tmp_path: Path):
    async with KubeApiEmulator() as emulator:
        kubectl = Kubectl(emulator.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
        await kubectl("apply", "-f", "-", stdin=partition("gpu", {"nodes": NODES}))
        got = await kubectl.json("get", "spart", "gpu")
        assert (
            "state" not in got["spec"]
            and got["spec"]["adopt"] is False
            and "namespace" not in got["metadata"]
        )
        assert (await kubectl("get", "slurmpartitions")).splitlines()[0].split()[:3] == [
            "NAME",
            "PARTITION",
            "STATE",
        ]
