"""Read Kubernetes credentials: kubeconfig files (merged as kubectl merges $KUBECONFIG) or the in-cluster
service account, into a server URL, a TLS context, fixed headers and a token source.

Written here rather than taken from kubernetes_asyncio: importing that package loads its ~700 generated
model modules, 40 MB of resident memory in a daemon that uses none of them.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncer.kube.errors import config_error
from syncer.kube.kubeconfig import CredentialSource
from syncer.kube.tokens import ExecPlugin, StaticToken, TokenFile, TokenSource
from syncer.runtime.yaml_file import YamlFileError, load_mapping

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
UNSUPPORTED_USER_FIELDS = {
    "auth-provider": "legacy auth providers were removed from kubectl; use an exec plugin "
    "(kubelogin, gke-gcloud-auth-plugin, aws eks get-token)",
    "as": "impersonation is not supported; give the syncer's own identity",
    "as-groups": "impersonation is not supported; give the syncer's own identity",
}


class RotatingClientTls:
    """The TLS context for a client certificate that an exec plugin gives: asked before each request, it
    answers the context for the plugin's current certificate, a new one when the plugin (run again on
    expiry or after a 401) hands out another, so a rotated certificate is taken without a restart."""

    def __init__(self, plugin: ExecPlugin, base: Callable[[], ssl.SSLContext]) -> None:
        self.plugin = plugin
        self._base = base  # the server-side checks (CA, or none), without a client certificate
        self._pair: tuple[str, str] | None = None
        self._context: ssl.SSLContext | None = None

    async def context(self) -> ssl.SSLContext | None:
        """None while the plugin gives no certificate (tokens only)."""
        given = await self.plugin.credential()
        if not (given.client_certificate and given.client_key):
            return self._context
        pair = (given.client_certificate, given.client_key)
        if pair != self._pair:
            context = self._base()
            _load_client_pair(context, *pair)
            self._pair, self._context = pair, context
        return self._context


@dataclass
class Credentials:
    server: str
    ssl_context: ssl.SSLContext | bool | None  # None: plain HTTP; False: TLS without verification
    headers: dict[str, str] = field(default_factory=dict)
    token: TokenSource | None = None
    tls_server_name: str | None = None
    proxy_url: str | None = None  # the cluster's proxy-url; else HTTP(S)_PROXY / NO_PROXY
    client_tls: RotatingClientTls | None = None  # an exec plugin's certificate, followed as it rotates


@dataclass(frozen=True)
class _Entry:
    """One named cluster, user or context, and the directory its relative paths are relative to."""

    body: Mapping[str, Any]
    base_dir: Path


async def load(source: CredentialSource, env: Mapping[str, str] | None = None,
               service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> Credentials:  # fmt: skip
    if source.in_cluster:
        return in_cluster(os.environ if env is None else env, service_account_dir)
    return await from_kubeconfig(source.files)


def in_cluster(env: Mapping[str, str], service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> Credentials:
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise config_error(
            "no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a pod "
            "(KUBERNETES_SERVICE_HOST/PORT unset): give --kubeconfig or set KUBECONFIG"
        )
    token, ca = service_account_dir / "token", service_account_dir / "ca.crt"
    for needed in (token, ca):
        if not needed.is_file():
            raise config_error(
                f"in a pod but {needed} is missing: mount the service account token "
                "(automountServiceAccountToken: true)"
            )
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return Credentials(server, _tls(ca_file=str(ca)), token=TokenFile(token))


async def from_kubeconfig(files: tuple[str, ...]) -> Credentials:
    clusters, users, contexts, current = _merge(files)
    where = " + ".join(files)
    if not current:
        raise config_error(f"{where} sets no current-context; run `kubectl config use-context NAME`")
    context = contexts.get(current)
    if context is None:
        raise config_error(f"{where}: current-context {current!r} is not among its contexts")
    cluster_name, user_name = str(context.body.get("cluster") or ""), str(context.body.get("user") or "")
    cluster = clusters.get(cluster_name)
    if cluster is None:
        raise config_error(f"{where}: context {current!r} names cluster {cluster_name!r}, not defined there")
    server = str(cluster.body.get("server") or "").rstrip("/")
    if not server.startswith(("http://", "https://")):
        raise config_error(f"{where}: cluster {cluster_name!r} has no http(s) server URL ({server!r})")
    proxy_url = str(cluster.body.get("proxy-url") or "") or None
    if proxy_url and not proxy_url.startswith(("http://", "https://")):
        raise config_error(
            f"{where}: cluster {cluster_name!r} sets proxy-url {proxy_url!r}: only http:// and https:// "
            "proxies are supported (not socks5)"
        )
    user = users.get(user_name) if user_name else None
    if user_name and user is None:
        raise config_error(f"{where}: context {current!r} names user {user_name!r}, which is not defined")
    body: Mapping[str, Any] = user.body if user is not None else {}
    for unsupported, what_to_do in UNSUPPORTED_USER_FIELDS.items():
        if body.get(unsupported):
            raise config_error(f"{where}: user {user_name!r} sets {unsupported}: {what_to_do}")

    headers: dict[str, str] = {}
    token: TokenSource | None = None
    cert = key = None
    plugin: ExecPlugin | None = None
    if user is not None:
        cert = _pem(body, "client-certificate", user.base_dir, where)
        key = _pem(body, "client-key", user.base_dir, where)
        if body.get("tokenFile"):
            token = TokenFile(_path(str(body["tokenFile"]), user.base_dir))
        elif body.get("token"):
            token = StaticToken(str(body["token"]))
        elif body.get("username") and body.get("password"):
            basic = base64.b64encode(f"{body['username']}:{body['password']}".encode()).decode()
            headers["Authorization"] = f"Basic {basic}"
        if isinstance(body.get("exec"), dict):
            plugin = ExecPlugin(body["exec"], user.base_dir, _cluster_info(cluster.body))
            given = await plugin.credential()
            cert, key = given.client_certificate or cert, given.client_key or key
            token = plugin
    if bool(cert) != bool(key):
        raise config_error(f"{where}: user {user_name!r} has a client certificate or key without the other")
    context_tls: ssl.SSLContext | bool | None = None
    client_tls: RotatingClientTls | None = None
    if server.startswith("https://"):
        ca = _pem(cluster.body, "certificate-authority", cluster.base_dir, where)
        insecure = bool(cluster.body.get("insecure-skip-tls-verify"))

        def server_checks() -> ssl.SSLContext:
            return _unverified() if insecure else _tls(ca_data=ca)

        context_tls = server_checks() if cert or not insecure else False
        if cert and key and isinstance(context_tls, ssl.SSLContext):
            _load_client_pair(context_tls, cert, key)
        if plugin is not None and cert:
            client_tls = RotatingClientTls(plugin, server_checks)
            context_tls = await client_tls.context() or context_tls
    if isinstance(token, TokenFile):
        await token.token()  # a missing token file is a start-up error, not a failure of the first request
    server_name = str(cluster.body.get("tls-server-name") or "") or None
    return Credentials(server, context_tls, headers, token, server_name, proxy_url, client_tls)


def _merge(
    files: tuple[str, ...],
) -> tuple[dict[str, _Entry], dict[str, _Entry], dict[str, _Entry], str]:
    """kubectl's merge: the first file to define a name (or current-context) wins."""
    merged: dict[str, dict[str, _Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
    current = ""
    for name in files:
        path = Path(name)
        try:
            loaded = load_mapping(path, f"kubeconfig {path}", "a mapping (kind: Config)")
        except YamlFileError as exc:
            raise config_error(str(exc)) from None
        current = current or str(loaded.get("current-context") or "")
        for section, entries in merged.items():
            singular = section[:-1]
            for item in loaded.get(section) or []:
                if not isinstance(item, dict) or not item.get("name"):
                    raise config_error(f"kubeconfig {path}: an entry of {section} has no name")
                item_body = item.get(singular) or {}
                if not isinstance(item_body, dict):
                    raise config_error(f"kubeconfig {path}: {singular} {item['name']!r} is not a mapping")
                entries.setdefault(str(item["name"]), _Entry(item_body, path.resolve().parent))
    return merged["clusters"], merged["users"], merged["contexts"], current


def _path(value: str, base_dir: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base_dir / path


def _pem(body: Mapping[str, Any], key: str, base_dir: Path, where: str) -> str | None:
    """`key-data` (base64 PEM) or the file `key` names, as PEM text."""
    data = body.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise config_error(f"{where}: {key}-data is not base64 of a PEM file") from None
    if body.get(key):
        path = _path(str(body[key]), base_dir)
        try:
            return path.read_text()
        except OSError as exc:
            raise config_error(f"{where}: cannot read {key} {path}: {exc.strerror}") from None
    return None


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The ExecCredential's spec.cluster for plugins that ask for it (provideClusterInfo)."""
    info: dict[str, Any] = {"server": cluster.get("server", "")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data"):
        if cluster.get(key):
            info[key] = cluster[key]
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = extension.get("extension")
    return info


def _tls(ca_file: str | None = None, ca_data: str | None = None) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=ca_file, cadata=ca_data)
    except (ssl.SSLError, ValueError) as exc:
        raise config_error(f"the API server's certificate authority cannot be used: {exc}") from None


def _unverified() -> ssl.SSLContext:
    """insecure-skip-tls-verify with a client certificate: the server is not checked, but we are."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _load_client_pair(context: ssl.SSLContext, cert: str, key: str) -> None:
    """ssl loads a key pair only from files: written to a private directory and removed at once."""
    with tempfile.TemporaryDirectory(prefix="slurm-syncer-tls-") as directory:
        cert_path, key_path = Path(directory) / "client.crt", Path(directory) / "client.key"
        cert_path.write_text(cert)
        key_path.touch(mode=0o600)
        key_path.write_text(key)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise config_error(f"the client certificate and key cannot be used together: {exc}") from None
