"""The Kubernetes API emulator as one object: start it, seed it, break it, stop it."""

from __future__ import annotations

import base64
import copy
import json
import socket
import ssl
from dataclasses import dataclass
from importlib import resources as package_files
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from syncer.model.keys import Keys
from syncer.testing.kubeapi.api import Api, rfc3339
from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.kubeapi.faults import Faults
from syncer.testing.kubeapi.jobs import JobController
from syncer.testing.kubeapi.kubelet import DEFAULT_SCHEDULER, FakeKubelet
from syncer.testing.kubeapi.rbac import Authorizer
from syncer.testing.kubeapi.server import USER, KubeApiServer
from syncer.testing.kubeapi.store import Store

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def bundled_crds() -> list[dict[str, Any]]:
    """The project's CRDs as shipped in the package (deploy/crds holds the same files)."""
    folder = package_files.files("syncer.model") / "crds"
    return [
        yaml.safe_load(entry.read_text())
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yaml")
    ]


@dataclass
class SeedOptions:
    nodes: int = 0
    node_prefix: str = "node-"
    namespace: str = "slurm"
    nodeset: str = ""  # create a NodeSet of this name with `nodes` replicas
    slurmd_pods: bool = False  # one slurmd pod per Node, labelled with a Slurm node name `<slurm_prefix><n>`
    slurm_prefix: str = "sbx-"
    gpus_per_node: int = 8


class KubeApiEmulator:
    def __init__(
        self,
        *,
        token: str | None = None,  # the admin's bearer token; None: requests without one are the admin
        users: dict[str, str] | None = None,  # bearer token -> user name whose requests RBAC judges
        bookmark_interval_s: float = 60.0,  # as kube-apiserver; tests may ask for quicker ones
        min_request_timeout_s: float = 1800.0,  # a watch without timeoutSeconds: 1-2 times this
        history_limit: int = 200_000,
        kubelet_termination_s: float = 0.5,
        with_crds: bool = True,
        scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER,),  # the pods the fake kube-scheduler places
    ) -> None:
        self.api = Api(Store(history_limit=history_limit))
        self.faults = Faults()
        self.server = KubeApiServer(
            self.api,
            self.faults,
            bookmark_interval_s=bookmark_interval_s,
            min_request_timeout_s=min_request_timeout_s,
        )
        self.kubelet = FakeKubelet(
            self.api, termination_s=kubelet_termination_s, scheduler_names=scheduler_names
        )
        self.jobs = JobController(self.api)
        self.token = token
        self.rbac = Authorizer(self.api.store, dict(users or {}))
        self.server.authorizer = self.rbac
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._ca = b""  # the serving certificate (self-signed: its own CA) when over https
        for namespace in SYSTEM_NAMESPACES:
            self.create("", "v1", "namespaces", {"metadata": {"name": namespace}})
        if with_crds:
            for crd in bundled_crds():
                self.create("apiextensions.k8s.io", "v1", "customresourcedefinitions", crd)

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(
        self, host: str = "127.0.0.1", port: int = 0, tls: tuple[Path, Path] | None = None
    ) -> str:
        """Serves on host:port (0: a free one); with `tls` (certificate file, key file) over https, which
        kubectl needs to send a token or impersonate at all (client-go sends no credentials over http)."""
        app = self.server.app((self._auth_middleware,), self._add_control_routes)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))  # bound here so the port is known even when 0 was asked for
        context = None
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*tls)
            self._ca = tls[0].read_bytes()
        await web.SockSite(self._runner, sock, ssl_context=context).start()
        bound = sock.getsockname()[1]
        self.url = f"{'https' if context else 'http'}://{host}:{bound}"
        self.server.address = f"{host}:{bound}"
        self.kubelet.start()
        self.jobs.start()
        return self.url

    async def stop(self) -> None:
        await self.jobs.stop()
        await self.kubelet.stop()
        self.api.store.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> KubeApiEmulator:
        if not self.url:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @web.middleware
    async def _auth_middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/_emulator"):
            response: web.StreamResponse = await handler(request)
            return response
        bearer = request.headers.get("Authorization", "")
        user = self.rbac.users.get(bearer.removeprefix("Bearer ")) if bearer.startswith("Bearer ") else None
        if user is None:
            if self.token is not None and bearer != f"Bearer {self.token}":
                error = ApiError(401, "Unauthorized", "Unauthorized")
                return web.Response(
                    body=json.dumps(error.status()), status=401, content_type="application/json"
                )
            user = request.headers.get("Impersonate-User")  # the admin acting as someone (kubectl --as)
        if user:
            request[USER] = user
        response = await handler(request)
        return response

    def add_user(self, token: str, user: str) -> None:
        """Requests with this bearer token are `user`'s, judged by the RBAC objects stored here
        (a ServiceAccount's user is system:serviceaccount:NAMESPACE:NAME)."""
        self.rbac.users[token] = user

    def write_kubeconfig(
        self, path: Path | str, namespace: str = "default", token: str | None = None
    ) -> Path:
        """A kubeconfig that kubectl, kubernetes_asyncio and the syncer all accept: the admin's, or
        with `token` one of the users' (add_user)."""
        user: dict[str, Any] = (
            {"token": token or self.token}
            if (token or self.token) is not None
            else {"username": "emulator", "password": "emulator"}
        )
        cluster: dict[str, Any] = {"server": self.url}
        if self._ca:
            cluster["certificate-authority-data"] = base64.b64encode(self._ca).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": cluster}],
            "users": [{"name": "emulator", "user": user}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace},
                }
            ],
            "current-context": "emulator",
        }
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(config, sort_keys=False))
        tmp.replace(target)
        return target

    # -- direct access (tests, seeding) -----------------------------------------------------------
    def create(
        self, group: str, version: str, plural: str, body: dict[str, Any], namespace: str = ""
    ) -> dict[str, Any]:
        return self.api.create(self.api.resource(group, version, plural), namespace, body)

    def get(
        self, group: str, version: str, plural: str, name: str, namespace: str = ""
    ) -> dict[str, Any] | None:
        resource = self.api.resource(group, version, plural)
        return self.api.store.get(resource.key, namespace if resource.namespaced else "", name)

    def node(self, name: str) -> dict[str, Any] | None:
        return self.get("", "v1", "nodes", name)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get("", "v1", "pods", name, namespace)

    def patch(
        self,
        group: str,
        version: str,
        plural: str,
        name: str,
        body: Any,
        *,
        namespace: str = "",
        subresource: str = "",
        patch_type: str = "application/merge-patch+json",
    ) -> dict[str, Any]:
        resource = self.api.resource(group, version, plural)
        return self.api.patch(resource, namespace, name, json.dumps(body).encode(), patch_type, subresource)

    def set_node_condition(
        self, name: str, type_: str, status: str, reason: str = "", message: str = ""
    ) -> dict[str, Any]:
        """What a kubelet or node-problem-detector does: set one condition on a Node's status."""
        condition = {
            "type": type_,
            "status": status,
            "reason": reason or type_,
            "message": message,
            "lastTransitionTime": rfc3339(self.api.clock()),
            "lastHeartbeatTime": rfc3339(self.api.clock()),
        }
        node = self.node(name)
        if node is not None:
            for old in (node.get("status") or {}).get("conditions") or []:
                if old.get("type") == type_ and old.get("status") == status:
                    condition["lastTransitionTime"] = old.get(
                        "lastTransitionTime", condition["lastTransitionTime"]
                    )
        return self.patch(
            "",
            "v1",
            "nodes",
            name,
            {"status": {"conditions": [condition]}},
            subresource="status",
            patch_type="application/strategic-merge-patch+json",
        )

    def seed(self, options: SeedOptions) -> None:
        if options.nodes and self.get("", "v1", "namespaces", options.namespace) is None:
            self.create("", "v1", "namespaces", {"metadata": {"name": options.namespace}})
        width = max(4, len(str(options.nodes)))
        for index in range(options.nodes):
            self.create(
                "",
                "v1",
                "nodes",
                node_manifest(f"{options.node_prefix}{index:0{width}d}", index, options.gpus_per_node),
            )
        if options.slurmd_pods:
            for index in range(options.nodes):
                node_name = f"{options.node_prefix}{index:0{width}d}"
                slurm_name = f"{options.slurm_prefix}{index:0{width}d}"
                pod = {
                    "metadata": {
                        "name": f"slurmd-{slurm_name}",
                        "labels": {"app": "slurmd", Keys.NODE_NAME_LABEL: slurm_name},
                    },
                    "spec": {
                        "nodeName": node_name,
                        "containers": [{"name": "slurmd", "image": "slurmd:24.11"}],
                    },
                }
                self.create("", "v1", "pods", pod, namespace=options.namespace)
        if options.nodeset:
            self.create(
                "slurm-syncer.dev",
                "v1alpha1",
                "nodesets",
                nodeset_manifest(options.nodeset, options.nodes),
                namespace=options.namespace,
            )

    # -- faults -----------------------------------------------------------------------------------
    def drop_watches(self) -> int:
        return self.api.store.drop_watches()

    def compact(self) -> None:
        self.api.store.compact()

    def _add_control_routes(self, app: web.Application) -> None:
        async def faults(request: web.Request) -> web.Response:
            body = await request.json() if request.can_read_body else {}
            if "fail_next" in body:
                self.faults.fail_next(
                    int(body["fail_next"]), int(body.get("status", 500)), int(body.get("retry_after_s", 1))
                )
            if "latency_s" in body:
                self.faults.latency_s = float(body["latency_s"])
            if body.get("pause"):
                self.faults.pause()
            if body.get("resume"):
                self.faults.resume()
            if body.get("drop_watches"):
                self.drop_watches()
            if body.get("compact"):
                self.compact()
            return web.json_response(
                {"ok": True, "requests_total": self.faults.requests_total, "rv": self.api.store.rv}
            )

        app.router.add_post("/_emulator/faults", faults)


def node_manifest(name: str, index: int, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "gpu-8x",
                "slurm-syncer.dev/pool": "gpu",
            },
        },
        "spec": {"podCIDR": f"10.244.{index % 250}.0/24"},
        "status": {
            "capacity": {"cpu": "96", "memory": "1056000Mi", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "allocatable": {"cpu": "95", "memory": "1048000Mi", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 250 % 250}.{index % 250 + 1}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"00000000-0000-0000-0000-{index:012x}",
                "bootID": f"b0000000-0000-0000-0000-{index:012x}",
                "kernelVersion": "6.1.0-28-amd64",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeProxyVersion": "v1.33.0",
                "operatingSystem": "linux",
                "kubeletVersion": "v1.33.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "architecture": "amd64",
            },
        },
    }


def nodeset_manifest(name: str, replicas: int) -> dict[str, Any]:
    return copy.deepcopy(
        {
            "apiVersion": "slurm-syncer.dev/v1alpha1",
            "kind": "NodeSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "slurm": {"partition": "main", "features": ["gpu"]},
                "template": {
                    "spec": {
                        "containers": [{"name": "slurmd", "image": "ghcr.io/example/slurmd:24.11"}],
                        "nodeSelector": {"slurm-syncer.dev/pool": "gpu"},
                    }
                },
            },
        }
    )
