"""The emulator's RBAC, held against real kubectl: the chart's rendered Roles, ClusterRoles and bindings
applied as an admin, then requests as the ServiceAccount (its own token, or the admin's `--as`) allowed
or refused with the 403 kube-apiserver gives (KUBE-NOTES.md, "RBAC as kube-apiserver answers it")."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi.rbac import Request
from tests.fixtures.kube import Kubectl
from tests.integration.test_helm_chart import NAMESPACE, render

SA = f"system:serviceaccount:{NAMESPACE}:slurm-syncer"
TOKEN = "sa-token"
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


@pytest.fixture
def serving_pair(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    cert, key = tmp_path / "serving.crt", tmp_path / "serving.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
async def kube_tls(serving_pair: tuple[Path, Path]) -> AsyncIterator[KubeApiEmulator]:
    """The emulator over https: client-go (kubectl) sends no token and no impersonation over http."""
    emulator = KubeApiEmulator()
    await emulator.start(tls=serving_pair)
    try:
        yield emulator
    finally:
        await emulator.stop()


@pytest.fixture
def admin(kube_tls: KubeApiEmulator, tmp_path: Path) -> Kubectl:
    return Kubectl(kube_tls.write_kubeconfig(tmp_path / "admin.kubeconfig"), tmp_path / "cache-admin")


async def apply_chart_rbac(kubectl: Kubectl, tmp_path: Path, values: dict[str, object]) -> None:
    objects = [o for o in render(values) if o["kind"] in RBAC_KINDS]
    namespaces = {NAMESPACE} | {o["metadata"].get("namespace", "") for o in objects} - {""}
    manifests = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in sorted(namespaces)
    ]
    path = tmp_path / "rbac.yaml"
    path.write_text(yaml.safe_dump_all(manifests + objects))
    await kubectl("apply", "-f", str(path))


async def test_kubectl_as_the_service_account_sees_the_chart_rbac(
    kube_tls: KubeApiEmulator, admin: Kubectl, tmp_path: Path
):
    kube_api, kubectl = kube_tls, admin
    await apply_chart_rbac(kubectl, tmp_path, {"config": {"namespace": "slurm", "nodeset-enabled": False}})
    kube_api.add_user(TOKEN, SA)
    as_sa = Kubectl(kube_api.write_kubeconfig(tmp_path / "sa.kubeconfig", token=TOKEN), tmp_path / "cache-sa")

    # allowed: Nodes cluster-wide, pods in config.namespace, its own Lease by name
    assert (await as_sa("get", "nodes", "-o", "name")) == ""
    assert (await as_sa("get", "pods", "-n", "slurm", "-o", "name")) == ""

    # refused: pods elsewhere (namespaced mode), everywhere, and a Secret
    out = await as_sa("get", "pods", "-n", "default", ok=False)
    assert (
        "Error from server (Forbidden): pods is forbidden: "
        'User "system:serviceaccount:slurm-syncer:slurm-syncer" cannot list resource "pods" '
        'in API group "" in the namespace "default"'
    ) in out
    out = await as_sa("get", "pods", "-A", ok=False)
    assert f'User "{SA}" cannot list resource "pods" in API group "" at the cluster scope' in out
    out = await as_sa("get", "lease", "kube-scheduler", "-n", NAMESPACE, ok=False)
    assert (
        f'leases.coordination.k8s.io "kube-scheduler" is forbidden: User "{SA}" cannot get resource "leases" '
        f'in API group "coordination.k8s.io" in the namespace "{NAMESPACE}"'
    ) in out
    out = await as_sa("delete", "pod", "x", "-n", "slurm", ok=False)  # NodeSets off: no delete
    assert f'pods "x" is forbidden: User "{SA}" cannot delete resource "pods"' in out

    # kubectl auth can-i: a SelfSubjectAccessReview, with its own token and through the admin's --as
    for who in (as_sa, kubectl):
        extra = () if who is as_sa else ("--as", SA)
        assert (
            await who("auth", "can-i", "patch", "pods", "--subresource=status", "-n", "slurm", *extra)
        ).strip() == "yes"
        assert (await who("auth", "can-i", "delete", "pods", "-n", "slurm", *extra, ok=False)).strip() == "no"
        assert (await who("auth", "can-i", "list", "pods", "-A", *extra, ok=False)).strip() == "no"
        assert (await who("auth", "can-i", "watch", "nodes", *extra)).strip() == "yes"
        assert (
            await who("auth", "can-i", "update", "leases/slurm-syncer", "-n", NAMESPACE, *extra)
        ).strip() == "yes"
        assert (
            await who("auth", "can-i", "update", "leases/other", "-n", NAMESPACE, *extra, ok=False)
        ).strip() == "no"
        assert (await who("auth", "can-i", "create", "leases", "-n", NAMESPACE, *extra)).strip() == "yes"
    # the admin itself stays unrestricted
    assert (await kubectl("auth", "can-i", "delete", "secrets", "-A")).strip() == "yes"


async def test_the_forbidden_status_body_is_kube_apiservers(
    kube_api: KubeApiEmulator, kubectl: Kubectl, tmp_path: Path
):
    await apply_chart_rbac(kubectl, tmp_path, {})
    kube_api.add_user(TOKEN, SA)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/merge-patch+json"}
    async with aiohttp.ClientSession(headers=headers) as http:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/kube-controller-manager"
        async with http.patch(kube_api.url + path, data=json.dumps({"metadata": {}})) as answer:
            assert answer.status == 403
            assert await answer.json() == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f'leases.coordination.k8s.io "kube-controller-manager" is forbidden: User "{SA}" '
                'cannot patch resource "leases" in API group "coordination.k8s.io" '
                f'in the namespace "{NAMESPACE}"',
                "reason": "Forbidden",
                "details": {
                    "name": "kube-controller-manager",
                    "group": "coordination.k8s.io",
                    "kind": "leases",
                },
                "code": 403,
            }
        # create with no name in the path: no name in the message or details
        async with http.post(
            kube_api.url + "/api/v1/namespaces/default/secrets", json={"metadata": {"name": "s"}}
        ) as answer:
            body = await answer.json()
            assert answer.status == 403 and body["details"] == {"kind": "secrets"}
            assert body["message"] == (
                f'secrets is forbidden: User "{SA}" cannot create resource "secrets" in API group "" '
                'in the namespace "default"'
            )
        async with http.get(kube_api.url + "/version") as answer:
            assert answer.status == 200  # non-resource paths are open to every authenticated user
    seen = kube_api.rbac.seen[SA]
    assert [(r.verb, r.resource, r.namespace, allowed) for r, allowed in sorted(seen.items())] == [
        ("create", "secrets", "default", False),
        ("patch", "leases", NAMESPACE, False),
    ]


async def test_rule_matching_follows_the_rbac_authorizer(kube_api: KubeApiEmulator):
    """Wildcards, `*/status`, resourceNames (never for create; list and watch by metadata.name only), a
    ClusterRole bound by a RoleBinding (that namespace only), Group subjects."""
    rbac = "rbac.authorization.k8s.io"
    kube_api.create(rbac, "v1", "clusterroles", {
        "metadata": {"name": "reader"},
        "rules": [
            {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["*"]},
        ],
    })  # fmt: skip
    kube_api.create("", "v1", "namespaces", {"metadata": {"name": "team"}})
    kube_api.create(rbac, "v1", "rolebindings", {
        "metadata": {"name": "readers", "namespace": "team"},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "reader"},
        "subjects": [{"kind": "Group", "name": "system:serviceaccounts:team"}],
    }, namespace="team")  # fmt: skip
    user = "system:serviceaccount:team:app"
    headers = {"Authorization": "Bearer app"}
    kube_api.add_user("app", user)

    def allowed(verb: str, resource: str, namespace: str = "team", name: str = "", sub: str = "") -> bool:
        return kube_api.rbac.allowed(user, Request(verb, "", resource, sub, namespace, name))[0]

    assert allowed("get", "pods", sub="status", name="p") and allowed("get", "nodes", sub="status", name="n")
    assert not allowed("get", "pods", name="p") and not allowed("patch", "pods", sub="status", name="p")
    assert not allowed("get", "pods", namespace="default", sub="status", name="p")  # RoleBinding: team only
    assert not allowed("get", "nodes", namespace="", sub="status", name="n")  # cluster scope: not bound
    assert allowed("delete", "configmaps", name="one") and not allowed("delete", "configmaps", name="two")
    assert not allowed("create", "configmaps")  # resourceNames cannot restrict create
    assert not allowed("list", "configmaps")
    async with aiohttp.ClientSession(headers=headers) as http:
        base = f"{kube_api.url}/api/v1/namespaces/team/configmaps"
        async with http.get(base, params={"fieldSelector": "metadata.name=one"}) as answer:
            assert answer.status == 200  # a list of that one object is allowed by its name
        async with http.get(base) as answer:
            assert answer.status == 403
    assert not kube_api.rbac.allowed(
        "system:serviceaccount:other:app", Request("get", "", "pods", "status", "team", "p")
    )[0]
