"""Kubernetes credentials read by the syncer itself: TLS with a certificate authority and a client
certificate (files and data), tls-server-name, insecure-skip-tls-verify, token files, exec plugins
(cached, re-run when expired or refused), kubectl's merge of several files, the in-cluster service
account, and a clear error for each thing a kubeconfig can get wrong. The server is a real TLS server
on 127.0.0.1 that demands nothing but reports what it was shown."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from syncer.kube import credentials
from syncer.kube.client import KubeClient
from syncer.kube.errors import KubeError
from syncer.kube.kubeconfig import CredentialSource
from syncer.kube.tokens import TokenFile
from tests.fixtures.http_proxy import http_proxy

pytestmark = pytest.mark.kube


@dataclass(frozen=True)
class Pki:
    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def data(self, name: str) -> str:
        return base64.b64encode(self.path(name).read_bytes()).decode()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate for kube.test and 127.0.0.1, a client certificate, and a stranger CA."""
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for ca in ("ca", "stranger"):
        _openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2",
                 "-subj", f"/CN={ca}", cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=DNS:kube.test,IP:127.0.0.1\n")
    for name, ext in (("server", ["-extfile", "server.ext"]), ("client", []), ("client2", [])):
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", *ext, cwd=d)  # fmt: skip
    return Pki(d)


@dataclass
class Echo:
    """What the server was shown; `accept` (when set) is the only Authorization it lets through."""

    url: str
    accept: set[str] | None = None
    seen: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
async def echo(pki: Pki) -> AsyncIterator[Echo]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.path("server.crt"), pki.path("server.key"))
    context.load_verify_locations(pki.path("ca.crt"))
    context.verify_mode = ssl.CERT_OPTIONAL
    state = Echo("")

    async def whoami(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(pair[0] for pair in (peer or {}).get("subject", ()))
        shown = {"authorization": request.headers.get("Authorization", ""), "cn": subject.get("commonName")}
        state.seen.append(shown)
        if state.accept is not None and shown["authorization"] not in state.accept:
            return web.json_response(
                {"kind": "Status", "reason": "Unauthorized", "message": "no"}, status=401
            )
        return web.json_response(shown)

    app = web.Application()
    app.router.add_get("/whoami", whoami)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    state.url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    yield state
    await runner.cleanup()


def kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any] | None, **extra: Any) -> Path:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "contexts": [
            {"name": "x", "context": {"cluster": "c", **({"user": "u"} if user is not None else {})}}
        ],
        "current-context": "x",
        **extra,
    }
    if user is not None:
        config["users"] = [{"name": "u", "user": user}]
    path.write_text(yaml.safe_dump(config))
    return path


async def whoami(config: Path) -> dict[str, Any]:
    client = await KubeClient.from_config(str(config))
    try:
        return await client.get("/whoami")
    finally:
        await client.close()


async def test_ca_and_client_certificate_as_data_and_as_relative_files(echo: Echo, pki: Pki, tmp_path: Path):
    as_data = kubeconfig(
        tmp_path / "data",
        {"server": echo.url, "certificate-authority-data": pki.data("ca.crt")},
        {"client-certificate-data": pki.data("client.crt"), "client-key-data": pki.data("client.key"),
         "token": "t0"},
    )  # fmt: skip
    assert await whoami(as_data) == {"authorization": "Bearer t0", "cn": "client"}
    # paths in a kubeconfig are relative to the file, not to the working directory
    nested = tmp_path / "kube"
    nested.mkdir()
    for name in ("ca.crt", "client.crt", "client.key"):
        (nested / name).write_bytes(pki.path(name).read_bytes())
    as_files = kubeconfig(
        nested / "config",
        {"server": echo.url, "certificate-authority": "ca.crt"},
        {"client-certificate": "client.crt", "client-key": "client.key"},
    )
    assert await whoami(as_files) == {"authorization": "", "cn": "client"}


async def test_the_server_certificate_is_checked_against_the_named_ca_and_name(
    echo: Echo, pki: Pki, tmp_path: Path
):
    untrusted = {"server": echo.url, "certificate-authority-data": pki.data("stranger.crt")}
    stranger = kubeconfig(tmp_path / "s", untrusted, None)
    with pytest.raises(KubeError, match="CERTIFICATE_VERIFY_FAILED"):
        await whoami(stranger)
    trusted = {"server": echo.url, "certificate-authority-data": pki.data("ca.crt")}
    wrong_name = kubeconfig(tmp_path / "w", {**trusted, "tls-server-name": "other.test"}, None)
    with pytest.raises(KubeError, match=r"other\.test"):
        await whoami(wrong_name)
    right_name = kubeconfig(tmp_path / "r", {**trusted, "tls-server-name": "kube.test"}, None)
    assert (await whoami(right_name))["cn"] is None
    unchecked = kubeconfig(tmp_path / "i", {"server": echo.url, "insecure-skip-tls-verify": True},
                           {"username": "admin", "password": "pw"})  # fmt: skip
    basic = "Basic " + base64.b64encode(b"admin:pw").decode()
    assert await whoami(unchecked) == {"authorization": basic, "cn": None}
    pair = {"client-certificate-data": pki.data("client.crt"), "client-key-data": pki.data("client.key")}
    unchecked_with_pair = kubeconfig(
        tmp_path / "ip", {"server": echo.url, "insecure-skip-tls-verify": True}, pair
    )
    assert await whoami(unchecked_with_pair) == {"authorization": "", "cn": "client"}


async def test_a_token_file_is_read_again_when_the_server_refuses_the_old_token(
    echo: Echo, pki: Pki, tmp_path: Path
):
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    cluster = {"server": echo.url, "certificate-authority-data": pki.data("ca.crt")}
    config = kubeconfig(tmp_path / "k", cluster, {"tokenFile": "token"})
    client = await KubeClient.from_config(str(config))
    try:
        assert (await client.get("/whoami"))["authorization"] == "Bearer first"
        token_file.write_text("second\n")  # rotated in place, as the kubelet rotates projected tokens
        echo.accept = {"Bearer second"}
        assert (await client.get("/whoami"))["authorization"] == "Bearer second"
        assert [s["authorization"] for s in echo.seen] == ["Bearer first", "Bearer first", "Bearer second"]
    finally:
        await client.close()


PLUGIN = """
import json, os, sys, pathlib
runs = pathlib.Path(sys.argv[1])
count = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(count))
pathlib.Path(sys.argv[1] + ".info").write_text(os.environ["KUBERNETES_EXEC_INFO"])
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": f"exec-{count}-{os.environ['GREETING']}",
                             "expirationTimestamp": sys.argv[2]}}))
"""


def exec_user(tmp_path: Path, expires: str, **extra: Any) -> dict[str, Any]:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(script), str(tmp_path / "runs"), expires],
                     "env": [{"name": "GREETING", "value": "hi"}], **extra}}  # fmt: skip


async def test_an_exec_plugin_is_run_once_while_its_token_is_valid_and_again_when_refused(
    echo: Echo, pki: Pki, tmp_path: Path
):
    cluster = {"server": echo.url, "certificate-authority-data": pki.data("ca.crt")}
    config = kubeconfig(
        tmp_path / "k", cluster, exec_user(tmp_path, "2999-01-01T00:00:00Z", provideClusterInfo=True)
    )
    client = await KubeClient.from_config(str(config))
    try:
        for _ in range(3):
            assert (await client.get("/whoami"))["authorization"] == "Bearer exec-1-hi"
        assert (tmp_path / "runs").read_text() == "1"
        info = json.loads((tmp_path / "runs.info").read_text())
        assert info["spec"]["interactive"] is False and info["spec"]["cluster"]["server"] == echo.url
        echo.accept = {"Bearer exec-2-hi"}  # the server stops taking the cached token
        assert (await client.get("/whoami"))["authorization"] == "Bearer exec-2-hi"
        assert (tmp_path / "runs").read_text() == "2"
    finally:
        await client.close()


async def test_an_expired_exec_token_is_replaced_before_the_request(echo: Echo, pki: Pki, tmp_path: Path):
    cluster = {"server": echo.url, "certificate-authority-data": pki.data("ca.crt")}
    config = kubeconfig(tmp_path / "k", cluster, exec_user(tmp_path, "2000-01-01T00:00:00Z"))
    client = await KubeClient.from_config(str(config))  # runs the plugin once: exec-1
    try:
        assert (await client.get("/whoami"))["authorization"] == "Bearer exec-2-hi"
        assert (await client.get("/whoami"))["authorization"] == "Bearer exec-3-hi"
        assert "spec" in json.loads((tmp_path / "runs.info").read_text())
        assert "cluster" not in json.loads((tmp_path / "runs.info").read_text())["spec"]
    finally:
        await client.close()


def bad_plugin(tmp_path: Path, body: str) -> dict[str, Any]:
    script = tmp_path / "bad.py"
    script.write_text(body)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
                     "args": [str(script)], "installHint": "install kubelogin"}}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("import sys; print('login needed', file=sys.stderr); sys.exit(3)", "exited with 3: login needed"),
        ("print('not json')", "printed no JSON ExecCredential"),
        ("print('{\"kind\": \"ExecCredential\", \"apiVersion\": \"client.authentication.k8s.io/v1\"}')",
         "answered with apiVersion client.authentication.k8s.io/v1"),
        ("print('{\"kind\": \"ExecCredential\", \"apiVersion\": \"client.authentication.k8s.io/v1beta1\", "
         "\"status\": {}}')", "gave neither a token nor a client certificate"),
        ("print('{\"kind\": \"ExecCredential\", \"apiVersion\": \"client.authentication.k8s.io/v1beta1\", "
         "\"status\": {\"token\": \"t\", \"expirationTimestamp\": \"soon\"}}')",
         "'soon', not an RFC 3339 time"),
    ],
)  # fmt: skip
async def test_a_failing_exec_plugin_gives_an_error_that_says_what_it_did(
    tmp_path: Path, body: str, said: str
):
    config = kubeconfig(tmp_path / "k", {"server": "https://127.0.0.1:1"}, bad_plugin(tmp_path, body))
    with pytest.raises(KubeError, match="ConfigError") as caught:
        await KubeClient.from_config(str(config))
    assert said in caught.value.message and str(config) in caught.value.message


async def test_a_missing_exec_plugin_names_the_install_hint(tmp_path: Path):
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/kubelogin",
                     "installHint": "install kubelogin"}}  # fmt: skip
    config = kubeconfig(tmp_path / "k", {"server": "https://127.0.0.1:1"}, user)
    with pytest.raises(KubeError, match=rf"{tmp_path}/bin/kubelogin cannot run: .*\(install kubelogin\)"):
        await KubeClient.from_config(str(config))


async def test_files_merge_as_kubectl_merges_them_the_first_definition_wins(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "token").write_text("from-a")
    (tmp_path / "b" / "token").write_text("from-b")
    first = {"apiVersion": "v1", "kind": "Config",
             "users": [{"name": "u", "user": {"tokenFile": "token"}}],
             "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1111"}}]}  # fmt: skip
    second = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
              "users": [{"name": "u", "user": {"tokenFile": "token"}}],
              "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:2222"}}],
              "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}  # fmt: skip
    (tmp_path / "a" / "config").write_text(yaml.safe_dump(first))
    (tmp_path / "b" / "config").write_text(yaml.safe_dump(second))
    found = await credentials.load(
        CredentialSource((str(tmp_path / "a/config"), str(tmp_path / "b/config")), "")
    )
    assert found.server == "http://127.0.0.1:1111" and found.ssl_context is None
    # the token file is relative to a/, where u was defined
    assert found.token is not None and await found.token.token() == "from-a"


def test_in_cluster_credentials_come_from_the_service_account_and_the_service_env(pki: Pki, tmp_path: Path):
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "ca.crt").write_bytes(pki.path("ca.crt").read_bytes())
    v4 = credentials.in_cluster(
        {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}, tmp_path
    )
    v6 = credentials.in_cluster(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}, tmp_path
    )
    assert (v4.server, v6.server) == ("https://10.0.0.1:443", "https://[fd00::1]:6443")
    assert isinstance(v4.ssl_context, ssl.SSLContext) and v4.ssl_context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(KubeError, match="KUBERNETES_SERVICE_HOST/PORT unset"):
        credentials.in_cluster({}, tmp_path)
    (tmp_path / "token").unlink()
    with pytest.raises(KubeError, match="token is missing: mount the service account token"):
        credentials.in_cluster({"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}, tmp_path)


async def test_an_in_cluster_token_reaches_the_server_and_follows_rotation(
    echo: Echo, pki: Pki, tmp_path: Path
):
    (tmp_path / "token").write_text("sa-1\n")
    (tmp_path / "ca.crt").write_bytes(pki.path("ca.crt").read_bytes())
    found = credentials.in_cluster(
        {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": echo.url.rsplit(":", 1)[1]},
        tmp_path,
    )
    client = KubeClient(found)
    try:
        assert (await client.get("/whoami"))["authorization"] == "Bearer sa-1"
        (tmp_path / "token").write_text("sa-2\n")
        echo.accept = {"Bearer sa-2"}
        assert (await client.get("/whoami"))["authorization"] == "Bearer sa-2"
    finally:
        await client.close()


CONTEXT = "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
CONTEXT_U = "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
CLUSTER = "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"


def cluster_with(fields: str) -> str:
    return f"clusters: [{{name: c, cluster: {{server: 'https://h', {fields}}}}}]\n"


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("- just a list", "must be a mapping (kind: Config)"),
        ("clusters: [", "is not valid YAML"),
        ("apiVersion: v1\nkind: Config\n", "sets no current-context; run `kubectl config use-context NAME`"),
        ("current-context: x\n", "current-context 'x' is not among its contexts"),
        (CONTEXT, "names cluster 'c', not defined"),
        (CONTEXT_U + CLUSTER, "names user 'u', which is not defined"),
        (CONTEXT + "clusters: [{name: c, cluster: {server: 'h:443'}}]\n",
         "has no http(s) server URL ('h:443')"),
        (CONTEXT + cluster_with("proxy-url: 'socks5://p:1080'"),
         "only http:// and https:// proxies are supported"),
        (CONTEXT_U + CLUSTER + "users: [{name: u, user: {auth-provider: {name: oidc}}}]\n",
         "sets auth-provider: legacy auth providers"),
        (CONTEXT + cluster_with("certificate-authority-data: 'not base64!'"),
         "certificate-authority-data is not base64 of a PEM file"),
        (CONTEXT + cluster_with("certificate-authority: ca.pem"), "cannot read certificate-authority"),
        (CONTEXT_U + CLUSTER + "users: [{name: u, user: {tokenFile: gone}}]\n",
         "cannot use the token file"),
        (CONTEXT_U + CLUSTER + "users: [{name: u, user: {client-key-data: 'a2V5'}}]\n",
         "has a client certificate or key without the other"),
        (CONTEXT_U + CLUSTER + "users: [{name: u, user: {exec: {command: k, apiVersion: "
         "client.authentication.k8s.io/v1alpha1}}}]\n",
         "apiVersion client.authentication.k8s.io/v1alpha1 is not supported"),
    ],
)  # fmt: skip
async def test_each_kubeconfig_mistake_names_the_file_and_what_to_fix(tmp_path: Path, config: str, said: str):
    path = tmp_path / "kubeconfig"
    path.write_text(config)
    with pytest.raises(KubeError) as caught:
        await KubeClient.from_config(str(path))
    message = caught.value.message
    assert said in message and f"--kubeconfig {path}" in message, message


async def test_a_token_file_that_goes_empty_or_missing_keeps_the_last_token(tmp_path: Path):
    path = tmp_path / "token"
    source = TokenFile(path, period_s=0)
    with pytest.raises(KubeError, match=r"cannot use the token file .*: No such file or directory"):
        await source.token()
    path.write_text("t1\n")
    assert await source.token() == "t1"
    path.write_text("")
    assert await source.token() == "t1"
    path.unlink()
    assert await source.token() == "t1"
    path.write_text("t2\n")
    assert await source.token() == "t2"


CERT_PLUGIN = """
import json, pathlib, sys
runs = pathlib.Path(sys.argv[1])
count = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(count))
pki = pathlib.Path(sys.argv[2])
name = "client" if count == 1 else "client2"  # the certificate rotates after the first run
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"clientCertificateData": (pki / f"{name}.crt").read_text(),
                             "clientKeyData": (pki / f"{name}.key").read_text(),
                             "expirationTimestamp": sys.argv[3]}}))
"""


def cert_user(tmp_path: Path, pki: Pki, expires: str) -> dict[str, Any]:
    script = tmp_path / "cert-plugin.py"
    script.write_text(CERT_PLUGIN)
    args = [str(script), str(tmp_path / "runs"), str(pki.directory), expires]
    return {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": args}
    }


async def test_a_client_certificate_rotated_by_its_exec_plugin_is_taken_without_a_restart(
    echo: Echo, pki: Pki, tmp_path: Path
):
    runs = tmp_path / "runs"
    user = cert_user(tmp_path, pki, "2999-01-01T00:00:00Z")
    cluster = {"server": echo.url, "certificate-authority-data": pki.data("ca.crt")}
    client = await KubeClient.from_config(str(kubeconfig(tmp_path / "k", cluster, user)))
    try:
        assert (await client.get("/whoami"))["cn"] == "client"
        assert (await client.get("/whoami"))["cn"] == "client"  # valid: the plugin is not run again
        assert runs.read_text() == "1"
        echo.accept = {""}  # stays open for certificates; the plugin's next run is what changes them
        client._client_tls.plugin.forget()  # type: ignore[union-attr]  # as after a 401 or at expiry
        assert (await client.get("/whoami"))["cn"] == "client2"
        assert runs.read_text() == "2"
    finally:
        await client.close()


async def test_an_expired_client_certificate_is_replaced_before_the_request(
    echo: Echo, pki: Pki, tmp_path: Path
):
    user = cert_user(tmp_path, pki, "2000-01-01T00:00:00Z")
    cluster = {"server": echo.url, "certificate-authority-data": pki.data("ca.crt")}
    client = await KubeClient.from_config(str(kubeconfig(tmp_path / "k", cluster, user)))  # run 1: client
    try:
        assert (await client.get("/whoami"))["cn"] == "client2"  # expired: run again before the request
    finally:
        await client.close()


async def test_https_goes_through_the_proxy_the_environment_names_unless_no_proxy_says_not(
    echo: Echo, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    port = echo.url.rsplit(":", 1)[1]
    cluster = {"server": f"https://kube.test:{port}", "certificate-authority-data": pki.data("ca.crt")}
    config = kubeconfig(tmp_path / "k", cluster, {"token": "t"})
    async with http_proxy() as proxy:
        proxy.names.add("kube.test")
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "10.96.0.0/12,.cluster.local")
        assert (await whoami(config))["authorization"] == "Bearer t"
        assert proxy.seen == [("CONNECT", f"kube.test:{port}")]  # a tunnel: TLS still ends at the server
        monkeypatch.setenv("NO_PROXY", "kube.test")
        with pytest.raises(KubeError):  # straight to kube.test, a name only the proxy knows
            await whoami(config)
        assert len(proxy.seen) == 1


async def test_a_kubeconfig_proxy_url_wins_over_the_environment(
    echo: Echo, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    port = echo.url.rsplit(":", 1)[1]
    async with http_proxy() as proxy:
        proxy.names.add("kube.test")
        cluster = {"server": f"https://kube.test:{port}", "certificate-authority-data": pki.data("ca.crt"),
                   "proxy-url": proxy.url}  # fmt: skip
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
        assert (await whoami(kubeconfig(tmp_path / "k", cluster, {"token": "t"})))[
            "authorization"
        ] == "Bearer t"
        assert proxy.seen == [("CONNECT", f"kube.test:{port}")]
