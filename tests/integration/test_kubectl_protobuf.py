"""kubectl's typed commands send protobuf bodies; the emulator reads the kinds they use (as kube-apiserver
does) and refuses any other with a 415 naming the kind."""

from __future__ import annotations

import aiohttp
import pytest

from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi.protobuf import MAGIC, ProtobufError, decode
from tests.fixtures.kube import Kubectl

pytestmark = pytest.mark.kube


async def test_kubectl_create_namespace_configmap_and_secret(
    kube_api: KubeApiEmulator, kubectl: Kubectl
) -> None:
    assert "namespace/team-a created" in await kubectl("create", "namespace", "team-a")
    await kubectl(
        "create", "configmap", "cfg", "-n", "team-a", "--from-literal=mode=fast", "--from-literal=n=2"
    )
    await kubectl("create", "secret", "generic", "tok", "-n", "team-a", "--from-literal=token=s3cr3t")
    namespace = kube_api.get("", "v1", "namespaces", "team-a")
    assert namespace is not None and namespace["status"]["phase"] == "Active"
    assert (
        await kubectl("get", "configmap", "cfg", "-n", "team-a", "-o", "jsonpath={.data}")
        == '{"mode":"fast","n":"2"}'
    )
    secret = await kubectl("get", "secret", "tok", "-n", "team-a", "-o", "jsonpath={.data.token}")
    assert secret == "czNjcjN0"  # base64 of s3cr3t, as the API stores Secret data
    again = await kubectl("create", "namespace", "team-a", ok=False)
    assert 'namespaces "team-a" already exists' in again


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


async def test_a_protobuf_body_of_another_kind_is_refused_with_its_name(kube_api: KubeApiEmulator) -> None:
    type_meta = _field(1, b"v1") + _field(2, b"Pod")
    body = MAGIC + _field(1, type_meta) + _field(2, _field(1, _field(1, b"p1")))
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{kube_api.url}/api/v1/namespaces/default/pods",
            data=body,
            headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
        ) as response:
            assert response.status == 415
            message = (await response.json())["message"]
    assert "protobuf bodies of v1/Pod are not supported" in message and "send JSON" in message


def test_malformed_bodies_say_what_is_wrong() -> None:
    with pytest.raises(ProtobufError, match="envelope"):
        decode(b'{"kind": "Namespace"}')
    with pytest.raises(ProtobufError, match="past the end"):
        decode(MAGIC + bytes([1 << 3 | 2, 50]) + b"short")
    namespace = decode(
        MAGIC
        + _field(1, _field(1, b"v1") + _field(2, b"Namespace"))
        + _field(2, _field(1, _field(1, b"ns1")))
    )
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}
