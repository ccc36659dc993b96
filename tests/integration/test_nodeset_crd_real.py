"""The NodeSet CRD from deploy/crds on the real API server: defaults, the refusals docs/nodeset.md
promises (schema and CEL rules), printer columns, `kubectl scale`, and status written only through the
status subresource, as the reconciler writes it."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from syncer.controllers.nodeset import manifests
from syncer.controllers.nodeset.status import invalid_status
from syncer.kube.client import MERGE_PATCH, KubeClient
from syncer.kube.decode import Codec
from syncer.testing.kubeapi_real import RealKubeApi
from tests.fixtures.kube import Kubectl

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = {"spec": {"containers": [{"name": "slurmd", "image": "ghcr.io/example/slurmd:24.11"}]}}


@pytest.fixture
def namespace() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def kubectl(real_kube_api: RealKubeApi, namespace: str, tmp_path: Path) -> Kubectl:
    return Kubectl(real_kube_api.write_kubeconfig(tmp_path / "kubeconfig", namespace), tmp_path / "cache")


@pytest.fixture
async def kube(real_kube_api: RealKubeApi, kubectl: Kubectl) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_config(kubectl.env["KUBECONFIG"])
    try:
        yield client
    finally:
        await client.close()


def nodeset(name: str, spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "slurm-syncer.dev/v1alpha1", "kind": "NodeSet",
                           "metadata": {"name": name}, "spec": spec})  # fmt: skip


async def test_the_deployed_crd_is_the_one_installed(real_kube_api: RealKubeApi, kubectl: Kubectl):
    out = await kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "deploy" / "crds"))
    assert "nodesets.slurm-syncer.dev serverside-applied" in out
    crd = await kubectl.json("get", "crd", "nodesets.slurm-syncer.dev")
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    assert crd["status"]["acceptedNames"]["shortNames"] == ["nds"]


async def test_defaults_printer_columns_and_scale(kubectl: Kubectl):
    await kubectl("apply", "-f", "-", stdin=nodeset("gpu", {"replicas": 2, "template": TEMPLATE}))
    got = await kubectl.json("get", "nds", "gpu")
    assert got["spec"]["mode"] == "Replicas" and got["spec"]["drainTimeout"] == "1h"
    assert got["spec"]["slurm"] == {"nodeOnScaleIn": "Delete"}
    assert got["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    table = await kubectl("get", "nodesets")
    assert table.splitlines()[0].split() == [
        "NAME",
        "REPLICAS",
        "READY",
        "UPDATED",
        "IDLE",
        "ALLOCATED",
        "DRAINED",
    ]
    assert table.splitlines()[1].split() == ["gpu", "2"]
    assert (await kubectl("get", "nds", "-o", "wide")).splitlines()[0].split()[-1] == "MODE"
    assert "nodeset.slurm-syncer.dev/gpu scaled" in await kubectl("scale", "nodeset/gpu", "--replicas=5")
    assert (await kubectl.json("get", "nds", "gpu"))["spec"]["replicas"] == 5


# What docs/nodeset.md ("What the API server refuses") promises, word for word.
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "negative replicas": (
        {"replicas": -1, "template": TEMPLATE},
        "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
    ),
    "maxUnavailable 0": (
        {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0}}, "template": TEMPLATE},
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: maxUnavailable must be a count "
        "of at least 1 or a percentage from 1% to 100%",
    ),
    "maxUnavailable 150%": (
        {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "150%"}}, "template": TEMPLATE},
        'spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "150%": maxUnavailable must be a '
        "count of at least 1 or a percentage from 1% to 100%",
    ),
    "unknown updateStrategy": (
        {"updateStrategy": {"type": "Recreate"}, "template": TEMPLATE},
        'spec.updateStrategy.type: Unsupported value: "Recreate": '
        'supported values: "RollingUpdate", "OnDelete"',
    ),
    "unknown mode": (
        {"mode": "Static", "template": TEMPLATE},
        'spec.mode: Unsupported value: "Static": supported values: "Replicas", "DaemonSet"',
    ),
    "missing template": ({"replicas": 1}, "spec.template: Required value"),
    "template without containers": (
        {"template": {"spec": {}}},
        "spec.template.spec.containers: Required value",
    ),
    "empty containers": (
        {"template": {"spec": {"containers": []}}},
        "spec.template.spec.containers: Invalid value: 0: spec.template.spec.containers in body should have "
        "at least 1 items",
    ),
    "replicas in DaemonSet mode": (
        {"mode": "DaemonSet", "replicas": 3, "template": TEMPLATE},
        "spec: Invalid value: replicas must be 0 in DaemonSet mode (one pod per Node matching nodeSelector)",
    ),
    "feature with a comma": (
        {"slurm": {"features": ["a,b"]}, "template": TEMPLATE},
        'spec.slurm.features[0]: Invalid value: "a,b": '
        "spec.slurm.features[0] in body should match '^[^,]+$'",
    ),
    "power floor above ceiling": (
        {"power": {"minReplicas": 3, "maxReplicas": 2}, "template": TEMPLATE},
        "spec.power: Invalid value: minReplicas must not exceed maxReplicas",
    ),
    "power in DaemonSet mode": (
        {"mode": "DaemonSet", "power": {"maxReplicas": 2}, "template": TEMPLATE},
        "spec: Invalid value: power works in Replicas mode only",
    ),
    "power without a ceiling": (
        {"power": {"minReplicas": 1}, "template": TEMPLATE},
        "spec.power.maxReplicas: Required value",
    ),
    "power ceiling above the bound": (
        {"power": {"maxReplicas": 100000}, "template": TEMPLATE},
        "spec.power.maxReplicas: Invalid value: 100000: spec.power.maxReplicas in body should be less than "
        "or equal to 10000",
    ),
    "power node with no cpus": (
        {"power": {"maxReplicas": 2, "node": {"cpus": 0}}, "template": TEMPLATE},
        "spec.power.node.cpus: Invalid value: 0: spec.power.node.cpus in body should be greater than or "
        "equal to 1",
    ),
    "bad drainTimeout": (
        {"drainTimeout": "soon", "template": TEMPLATE},
        'spec.drainTimeout: Invalid value: "soon": spec.drainTimeout in body should match '
        "'^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$'",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_invalid_nodesets_are_refused_with_the_documented_message(kubectl: Kubectl, case: str):
    spec, message = REFUSED[case]
    out = await kubectl("apply", "-f", "-", stdin=nodeset("bad", spec), ok=False)
    assert 'The NodeSet "bad" is invalid' in out, out
    assert message in out, out
    assert message in (REPO / "docs" / "nodeset.md").read_text(), f"docs/nodeset.md must promise: {message}"
    assert "NotFound" in await kubectl("get", "nds", "bad", ok=False)


async def test_a_long_or_dotted_name_is_refused(kubectl: Kubectl):
    message = "a NodeSet name must be a DNS label of at most 40 characters (pods are <name>-<n>)"
    assert message in (REPO / "docs" / "nodeset.md").read_text()
    for name in ("a" * 41, "gpu.a100"):
        out = await kubectl("apply", "-f", "-", stdin=nodeset(name, {"template": TEMPLATE}), ok=False)
        assert message in out, out
    await kubectl("apply", "-f", "-", stdin=nodeset("a" * 40, {"template": TEMPLATE}))


async def test_valid_edge_values_are_accepted(kubectl: Kubectl):
    for name, spec in {
        "pct": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "100%"}}, "template": TEMPLATE},
        "ds": {"mode": "DaemonSet", "nodeSelector": {"pool": "gpu"}, "template": TEMPLATE},
        "keep": {"slurm": {"nodeOnScaleIn": "Keep", "features": ["a100"]}, "drainTimeout": "1h30m",
                 "template": TEMPLATE},
        "power": {"power": {"minReplicas": 2, "maxReplicas": 2, "node": {"cpus": 4, "realMemory": 1000,
                  "gres": "gpu:a100:8"}}, "template": TEMPLATE},
        "power-edge": {"power": {"maxReplicas": 10000}, "template": TEMPLATE},
    }.items():  # fmt: skip
        await kubectl("apply", "-f", "-", stdin=nodeset(name, spec))


async def test_status_is_written_through_the_status_subresource_only(
    kubectl: Kubectl, kube: KubeClient, namespace: str
):
    await kubectl("apply", "-f", "-", stdin=nodeset("gpu", {"replicas": 2, "template": TEMPLATE}))
    path = manifests.nodeset_path(namespace, "gpu")
    raw = json.dumps(await kube.get(path)).encode()
    current = Codec("NodeSet").decode_object(raw)
    # the reconciler's own status documents, written the way it writes them (merge patch on /status)
    status = invalid_status(current, "spec.replicas -1 must be a whole number >= 0", "2026-11-23T00:00:00Z")
    full = {
        **status, "replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1,
        "selector": manifests.selector("gpu"), "templateHash": "abc123",
        "slurm": {"idle": 1, "allocated": 0, "mixed": 0, "drained": 1, "down": 0},
        # declaring: the intent that makes a record with no comment yet ours (pruned before: not in schema)
        "power": {"declared": 4, "poweredDown": 1, "poweringUp": 1, "poweredUp": 1, "poweringDown": 1,
                  "heldByAdmin": 0, "declaring": ["gpu-3"]},
    }  # fmt: skip
    written = await kube.patch(path + "/status", {"status": full, "spec": {"replicas": 9}}, MERGE_PATCH)
    assert written["status"] == full, "every status field the reconciler writes survives the schema's pruning"
    assert written["spec"]["replicas"] == 2, "a /status write does not change spec"
    ignored = await kube.patch(path, {"status": {"replicas": 7}}, MERGE_PATCH)
    assert ignored["status"]["replicas"] == 2, "the main resource does not change status"
    table = await kubectl("get", "nds", "gpu")
    assert table.splitlines()[1].split() == ["gpu", "2", "1", "2", "1", "0", "1"]
    scale = await kube.get(path + "/scale")
    assert scale["status"] == {"replicas": 2, "selector": manifests.selector("gpu")}
