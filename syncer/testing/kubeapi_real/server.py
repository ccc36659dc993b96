"""Running the real API server: etcd and our apiextensions-apiserver main, on 127.0.0.1, stopped by PID.

with RealKubeApi(directory) as real:          # builds on first use (ensure_built), then ~2 s
    real.install_crds(bundled_crds())
    real.write_kubeconfig(path)
    real.compact()              # etcd compaction now (410 for older RVs without the watch cache)
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from syncer.testing.kubeapi_real.build import Binaries, ensure_built
from syncer.testing.kubeapi_real.errors import RealKubeApiError

START_TIMEOUT_S = 60.0
CRD_TIMEOUT_S = 30.0
_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE  # the server's certificate is self-signed, made at start


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class RealKubeApi:
    """One etcd plus one API server, their data and logs in `directory`.

    `watch_cache=False` serves watches straight from etcd, so `compact()` makes older resourceVersions
    410 at once (with the watch cache, only versions older than the cache's window are 410).
    """

    def __init__(
        self,
        directory: Path,
        *,
        port: int = 0,
        watch_cache: bool = True,
        min_request_timeout_s: int = 1800,  # a watch without timeoutSeconds ends after 1-2 times this
        binaries: Binaries | None = None,
    ) -> None:
        self.directory = directory
        self.port = port
        self.watch_cache = watch_cache
        self.min_request_timeout_s = min_request_timeout_s
        self.binaries = binaries
        self.etcd_url = ""
        self.url = ""
        self._processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> RealKubeApi:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def version(self) -> str:
        return self.binaries.version if self.binaries else ""

    def start(self) -> str:
        """Start etcd and the API server; returns the server's URL once it lists CRDs."""
        self.binaries = self.binaries or ensure_built()
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._start_etcd()
            self._start_apiserver()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._processes.append(process)
        return process

    def _start_etcd(self) -> None:
        assert self.binaries is not None
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        log = self.directory / "etcd.log"
        process = self._spawn(
            [
                str(self.binaries.etcd), "--name", "default", "--data-dir", str(self.directory / "etcd"),
                "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",  # test data: durability is not needed, speed is
            ],
            log,
        )  # fmt: skip
        self._wait("etcd", process, log, lambda: self._etcd_post("/v3/kv/range", {"key": "Lw=="}) is not None)

    def _start_apiserver(self) -> None:
        assert self.binaries is not None
        port = self.port or free_port()
        self.url = f"https://127.0.0.1:{port}"
        log = self.directory / "apiserver.log"
        process = self._spawn(
            [
                str(self.binaries.apiserver), "--etcd-servers", self.etcd_url,
                "--bind-address", "127.0.0.1", "--secure-port", str(port),
                "--cert-dir", str(self.directory / "certs"),
                f"--watch-cache={str(self.watch_cache).lower()}",
                f"--min-request-timeout={self.min_request_timeout_s}",
            ],
            log,
        )  # fmt: skip

        def ready() -> bool:
            # /readyz can pass a moment before lists work ("storage is (re)initializing")
            return self._get("/readyz") and self._get(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            )

        self._wait("the API server", process, log, ready)

    def _wait(self, what: str, process: subprocess.Popen[bytes], log: Path, ready: Any) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RealKubeApiError(
                    f"{what} exited with {process.returncode} at start; its log ({log}):\n{_tail(log)}"
                )
            if ready():
                return
            time.sleep(0.1)  # polling a starting process; bounded by the deadline
        raise RealKubeApiError(
            f"{what} was not ready within {START_TIMEOUT_S:.0f} s; its log ({log}):\n{_tail(log)}"
        )

    def _get(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(self.url + path, context=_INSECURE, timeout=5) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One JSON request to the API server: (status, decoded body)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, context=_INSECURE, timeout=20) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def _etcd_post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        request = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                decoded: dict[str, Any] = json.loads(answer.read())
                return decoded
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def compact(self) -> int:
        """Compact etcd at its current revision (as kube-apiserver's compactor does every 5 min)."""
        found = self._etcd_post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        if found is None:
            raise RealKubeApiError(f"etcd at {self.etcd_url} did not answer a range request")
        revision = int(found["header"]["revision"])
        if self._etcd_post("/v3/kv/compaction", {"revision": revision, "physical": True}) is None:
            raise RealKubeApiError(f"etcd at {self.etcd_url} refused compaction at revision {revision}")
        return revision

    def install_crds(self, crds: list[dict[str, Any]]) -> None:
        """Create the CRDs (or leave them if present) and wait until each is Established and its watch
        cache has filled (until then watches are 429, Retry-After: 1)."""
        for crd in crds:
            status, body = self.request(
                "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd
            )
            if status not in (201, 409):
                raise RealKubeApiError(f"the CRD {crd['metadata']['name']} was refused ({status}): {body}")
        deadline = time.monotonic() + CRD_TIMEOUT_S
        for crd in crds:
            name = crd["metadata"]["name"]
            while not (self._established(name) and self._watchable(crd)):
                if time.monotonic() > deadline:
                    raise RealKubeApiError(f"the CRD {name} was not Established within {CRD_TIMEOUT_S:.0f} s")
                time.sleep(0.05)  # polling the server's CRD controllers; bounded by the deadline

    def _watchable(self, crd: dict[str, Any]) -> bool:
        spec = crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("storage"))
        path = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}?watch=1&timeoutSeconds=1"
        try:  # only the answer's status: the stream is closed unread
            with urllib.request.urlopen(self.url + path, context=_INSECURE, timeout=5) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _established(self, name: str) -> bool:
        status, body = self.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = ((body or {}).get("status") or {}).get("conditions") or [] if status == 200 else []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig for kubectl and the syncer (self-signed certificate, any token is accepted)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "real", "cluster": {"server": self.url, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "real", "user": {"token": "slurm-syncer"}}],
            "contexts": [
                {"name": "real", "context": {"cluster": "real", "user": "real", "namespace": namespace}}
            ],
            "current-context": "real",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def stop(self) -> None:
        """Stop what this object started (API server first, then etcd), by PID."""
        for process in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    process.wait()
        self._processes.clear()
