"""The container image, built by scripts/image from the Dockerfile and run as the Helm chart's container
runs it, against the real Slurm sandbox and the Kubernetes API emulator.

No container runtime runs it (`podman run` does not work on the CI machines): the image's file system
(`podman image mount`) is started by tests/e2e/pod_exec.py, read-only, as UID/GID 65532 with the
chart's fsGroup, no_new_privs and no capabilities, in its own mount and UTS namespace (the pod's name as
host name, hence as the syncer's identity), sharing the host's network. Everything else comes from the
chart rendered by the real Helm engine and from the image's own configuration: the entrypoint (the image's)
with the container's args, the image's environment under the container's env, the emptyDir /tmp as a
tmpfs of its sizeLimit, the Slurm token Secret and the service account's token, CA and namespace as
read-only directories laid out as the kubelet lays them out, and KUBERNETES_SERVICE_HOST/PORT as the
kubelet sets them: the syncer finds the API by its in-cluster configuration, through a TLS front of the
emulator with a CA of this test's. Not reproduced: seccomp, cgroup limits, a PID namespace.

The build costs about 80 s the first time on a machine, plus about 5 min once for the local base image
(debootstrap, mostly downloads); scripts/test starts it in the background before the lint steps, and
scripts/image skips it while the image's inputs are unchanged (a source-hash label): under 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from benchmarks import faults
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.sandbox.config import free_port
from tests.e2e.rig import Rig, fresh_slurm_nodes
from tests.e2e.test_chart_runs import SLINKY, bind_one_slinky_labelled_one_not, merged
from tests.helpers import wait_for
from tests.integration.test_helm_chart import NAMESPACE, one, render

pytestmark = [pytest.mark.slurm, pytest.mark.kube, pytest.mark.one_release, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
POD_EXEC = Path(__file__).with_name("pod_exec.py")
TAG = os.environ.get("SLURM_SYNCER_TEST_IMAGE", "localhost/slurm-syncer:e2e")
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SA_TOKEN = "image-test-service-account-token"
# the failover test's lease timing (chart values). A standby cannot act within the lease duration of the
# leader's death exactly: it sees the last renewal up to one retry period late and takes the lease at its
# next try after a full lease duration (client-go's rules), then reconciles; docs/reliability.md promises
# this bound, and tests/e2e/test_failover.py holds the bare processes to it
LEASE_S, RETRY_S = 4.0, 0.5
TAKEOVER_S = LEASE_S + 2 * RETRY_S + 1.0


@dataclass
class Image:
    tag: str
    root: Path  # the image's file system, mounted by podman (read-only use only)
    config: dict[str, Any]  # the OCI config: Entrypoint, Env, User, WorkingDir
    size: int
    build_s: float


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    if os.geteuid() != 0:
        pytest.fail("the image tests need root (podman image mount, mount namespaces, chroot): run as root")
    started = time.monotonic()
    built = subprocess.run(
        [str(ROOT / "scripts" / "image"), TAG], capture_output=True, text=True, check=False
    )
    build_s = time.monotonic() - started
    assert built.returncode == 0, f"scripts/image failed:\n{built.stderr[-4000:]}"
    sys.stderr.write(f"\n{built.stderr}")
    (inspected,) = json.loads(_podman("image", "inspect", TAG))
    image_id = inspected["Id"]  # mounted and unmounted by ID: another build may move the tag meanwhile
    root = Path(_podman("image", "mount", image_id).strip())
    try:
        yield Image(TAG, root, inspected["Config"], int(inspected["Size"]), build_s)
    finally:
        _podman("image", "unmount", image_id)


def _podman(*args: str) -> str:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=True).stdout


@dataclass
class ApiFront:
    """The emulator behind TLS on 127.0.0.1, as the in-cluster API server is reached."""

    port: int
    ca: bytes
    connections: int = 0
    bearer_token_seen: int = 0  # connections whose first request carried the service account's token


def api_certificates(certs: Path) -> Path:
    """A CA of the test's and a server certificate for 127.0.0.1 signed by it (openssl)."""
    certs.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    (certs / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n")
    for argv in (
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca"],
        ["req", *ec, "-keyout", "api.key", "-out", "api.csr", "-subj", "/CN=kubernetes"],
        ["x509", "-req", "-in", "api.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "api.crt", "-days", "2", "-extfile", "ext.cnf"],
    ):  # fmt: skip
        subprocess.run(["openssl", *argv], cwd=certs, check=True, capture_output=True)
    return certs


@contextlib.asynccontextmanager
async def tls_front(rig: Rig, tmp_path: Path) -> AsyncIterator[ApiFront]:
    certs = api_certificates(tmp_path / "api-tls")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs / "api.crt", certs / "api.key")
    upstream = rig.kube.url.removeprefix("http://")
    host, port = upstream.rsplit(":", 1)
    front = ApiFront(0, (certs / "ca.crt").read_bytes())
    tasks: set[asyncio.Task[None]] = set()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(ConnectionError, OSError, ssl.SSLError, RuntimeError):
            writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        front.connections += 1
        try:
            up_r, up_w = await asyncio.open_connection(host, int(port))
            first = await client_r.read(65536)  # the first request's head: the service account's token?
        except (OSError, ssl.SSLError):
            client_w.close()
            return
        front.bearer_token_seen += f"Authorization: Bearer {SA_TOKEN}".encode().lower() in first.lower()
        up_w.write(first)
        await asyncio.gather(pipe(client_r, up_w), pipe(up_r, client_w))

    def start(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(handle(r, w))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(start, "127.0.0.1", 0, ssl=context)
    front.port = server.sockets[0].getsockname()[1]
    try:
        yield front
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def kubelet_volume(path: Path, files: dict[str, bytes], mode: int, gid: int) -> Path:
    """A Secret (or projected) volume as the kubelet writes it: the files in a timestamped directory,
    `..data` linking to it, and each name a link through `..data` (how a rotation swaps them at once)."""
    stamp = path / "..2026_01_01_00_00_00.000000001"
    stamp.mkdir(parents=True)
    for name, data in files.items():
        (stamp / name).write_bytes(data)
        os.chown(stamp / name, 0, gid)
        (stamp / name).chmod(mode)
        (path / name).symlink_to(f"..data/{name}")
    (path / "..data").symlink_to(stamp.name)
    for directory in (path, stamp):
        os.chown(directory, 0, gid)
        directory.chmod(0o1777 if directory == path else 0o755)
    path.chmod(0o755)
    return path


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity (64Mi, 1G, 512) in bytes."""
    number, suffix = re.fullmatch(r"([0-9.]+)([KMGT]i?)?", quantity).groups()  # type: ignore[union-attr]
    power = {"K": 1, "M": 2, "G": 3, "T": 4}
    scale = 1 if not suffix else (1024 if suffix.endswith("i") else 1000) ** power[suffix[0]]
    return int(float(number) * scale)


@dataclass
class Pod:
    name: str
    process: asyncio.subprocess.Process
    port: int
    log: Path
    started: float
    lines: list[str] = field(default_factory=list)

    async def get(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            async with http.get(f"http://127.0.0.1:{self.port}{path}") as response:
                return response.status, await response.text()

    def status(self) -> dict[str, str]:
        """/proc/PID/status of the syncer (the chrooted process itself: pod_exec.py execs it)."""
        text = Path(f"/proc/{self.process.pid}/status").read_text()
        return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)

    def mounts(self) -> dict[str, tuple[str, set[str]]]:
        """The syncer's mounts as it sees them: mount point -> (file system type, options)."""
        found = {}
        for line in Path(f"/proc/{self.process.pid}/mountinfo").read_text().splitlines():
            fields = line.split()
            fs_type = fields[fields.index("-") + 1]
            found[fields[4]] = (fs_type, set(fields[5].split(",")))
        return found

    def rss_mb(self) -> float:
        return int(self.status()["VmRSS"].split()[0]) / 1024


def chart_values(
    rig: Rig, port: int, config: dict[str, Any] | None = None, slurm_url: str = ""
) -> dict[str, Any]:
    """The chart's defaults but for what differs on this machine: slurmrestd's URL, the HTTP port (pods
    share the host's network here) and the given config keys."""
    return {"slurm": {"url": slurm_url or rig.sandbox.rest_url}, "port": port, "config": config or {}}


def pod_spec(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    template = one(objects, "Deployment")["spec"]["template"]
    (main,) = template["spec"]["containers"]
    return template["spec"], main, template


@contextlib.asynccontextmanager
async def run_pod(
    rig: Rig, image: Image, front: ApiFront, tmp_path: Path, name: str, values: dict[str, Any],
    argv: list[str] | None = None,
) -> AsyncIterator[Pod]:  # fmt: skip
    """The chart's Deployment (rendered with `values`) as one pod named `name`, from `image`."""
    spec, main, _ = pod_spec(render(values))
    stage = tmp_path / f"pod-{name}"
    stage.mkdir()
    pod_ctx, ctx = spec.get("securityContext") or {}, main.get("securityContext") or {}
    uid = int(ctx.get("runAsUser", pod_ctx.get("runAsUser", 0)))
    gid = int(ctx.get("runAsGroup", pod_ctx.get("runAsGroup", 0)))
    fs_group = pod_ctx.get("fsGroup")
    assert ctx.get("readOnlyRootFilesystem") is True  # what pod_exec.py always does
    assert ctx.get("allowPrivilegeEscalation") is False and ctx["capabilities"]["drop"] == ["ALL"]
    assert uid == 65532 and gid == 65532 and (ctx.get("runAsNonRoot") or pod_ctx.get("runAsNonRoot"))
    assert "command" not in main, "the chart leaves the image's entrypoint"
    assert spec.get("automountServiceAccountToken") is True

    # the volumes the container mounts, as the kubelet makes them
    secrets = {
        "slurm-syncer-slurm-auth": {"token": rig.sandbox.token_file.read_bytes()},
        # the Slinky profile's: Slinky's JWT key Secret, as its chart makes it (the sandbox's key)
        "slurm-auth-jwt": {"jwt.key": rig.sandbox.jwt_key_path.read_bytes()},
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    tmpfs: list[dict[str, Any]] = []
    binds: list[dict[str, str]] = []
    for mount in main["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            size = quantity_bytes(volume["emptyDir"].get("sizeLimit") or "64Mi")
            tmpfs.append({"path": mount["mountPath"], "size": str(size)})
        elif "secret" in volume:
            assert mount.get("readOnly") is True and "subPath" not in mount
            secret = volume["secret"]
            data = secrets[secret["secretName"]]
            items = {item["path"]: data[item["key"]] for item in secret.get("items") or []} or data
            mode = int(secret.get("defaultMode", 0o644))
            source = kubelet_volume(stage / "volumes" / mount["name"], items, mode, int(fs_group or 0))
            binds.append({"source": str(source), "path": mount["mountPath"]})
        else:
            raise AssertionError(f"volume {mount['name']}: a kind this harness does not make: {volume}")
    service_account = {"token": SA_TOKEN.encode(), "ca.crt": front.ca, "namespace": NAMESPACE.encode()}
    source = kubelet_volume(stage / "volumes" / "kube-api-access", service_account, 0o644, int(fs_group or 0))
    binds.append({"source": str(source), "path": SA_DIR})

    # the environment: the image's, then the kubelet's service variables, then the container's
    env = dict(item.split("=", 1) for item in image.config.get("Env") or [])
    env.update(HOSTNAME=name, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=str(front.port))
    for var in main["env"]:
        if "valueFrom" in var:
            field_path = var["valueFrom"]["fieldRef"]["fieldPath"]
            env[var["name"]] = {"metadata.namespace": NAMESPACE, "metadata.name": name}[field_path]
        else:
            env[var["name"]] = var["value"]
    command = argv or [*(image.config.get("Entrypoint") or []), *(main.get("args") or [])]
    port = int(main["ports"][0]["containerPort"])
    pod = {
        "image_root": str(image.root), "stage": str(stage), "hostname": name, "uid": uid, "gid": gid,
        "groups": [int(fs_group)] if fs_group is not None else [], "workdir": image.config.get("WorkingDir"),
        "argv": command, "env": env, "tmpfs": tmpfs, "binds": binds,
    }  # fmt: skip
    (stage / "spec.json").write_text(json.dumps(pod))
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(POD_EXEC), str(stage / "spec.json"), stdout=out, stderr=out
        )
    try:
        yield Pod(name, process, port, log, started)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def lease(rig: Rig) -> dict[str, Any]:
    found = rig.kube.get("coordination.k8s.io", "v1", "leases", "slurm-syncer", namespace=NAMESPACE)
    return dict((found or {}).get("spec") or {})


async def until_ready(pod: Pod, deadline_s: float = 60) -> float:
    """Seconds from the pod's start until /readyz answers 200 as the leader."""

    async def ready() -> bool:
        if pod.process.returncode is not None:
            raise AssertionError(f"{pod.name} exited {pod.process.returncode}: {pod.log.read_text()[-3000:]}")
        try:
            status, body = await pod.get("/readyz")
        except (aiohttp.ClientError, TimeoutError):
            return False
        return status == 200 and "leader" in body

    await wait_for(ready, deadline_s=deadline_s, what=f"{pod.name} ready as the leader")
    return time.monotonic() - pod.started


@pytest.fixture
def namespace(rig: Rig) -> None:
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})


def test_the_image_ships_the_daemon_only(image: Image) -> None:
    site = next((image.root / "opt" / "slurm-syncer" / "lib").glob("python3*/site-packages"))
    assert (site / "syncer" / "app" / "run_cmd.py").exists()
    assert not (site / "syncer" / "testing").exists(), "syncer/testing is in the image"
    assert image.config.get("Entrypoint") == ["slurm-syncer", "run"]
    assert image.config.get("User") == "65532:65532"


async def test_a_local_tool_in_the_image_says_where_to_get_it(
    rig: Rig, image: Image, tmp_path: Path, namespace: None
) -> None:
    async with tls_front(rig, tmp_path) as front:
        values = chart_values(rig, free_port())
        async with run_pod(rig, image, front, tmp_path, "tools", values, ["slurm-syncer", "sandbox"]) as pod:
            code = await asyncio.wait_for(pod.process.wait(), 60)
    text = pod.log.read_text()
    assert code == 2, text
    assert "not in this installation" in text and "Traceback" not in text, text


async def test_the_image_runs_as_the_chart_runs_it(
    rig: Rig, image: Image, tmp_path: Path, namespace: None
) -> None:
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    values = chart_values(rig, free_port())
    spec, _, _ = pod_spec(render(values))
    grace_s = float(spec["terminationGracePeriodSeconds"])
    async with (
        tls_front(rig, tmp_path) as front,
        run_pod(rig, image, front, tmp_path, "slurm-syncer-5d8c7b9f4-x2k4q", values) as pod,
    ):
        ready_s = await until_ready(pod)
        status = pod.status()
        assert status["Uid"].split()[:2] == ["65532", "65532"] and status["Gid"].split()[:2] == ["65532"] * 2
        assert status["Groups"].split() == ["65532"] and status["NoNewPrivs"].strip() == "1"
        assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
        mounts = pod.mounts()  # in its own mount namespace, chrooted: "/" is the image, read-only
        assert mounts["/"][0] == "overlay" and "ro" in mounts["/"][1], mounts["/"]
        assert mounts["/tmp"][0] == "tmpfs" and "rw" in mounts["/tmp"][1]
        for secret_dir in ("/run/secrets/slurm-syncer", "/run/secrets/kubernetes.io/serviceaccount"):
            assert "ro" in mounts[secret_dir][1], (secret_dir, mounts)  # /var/run links to /run
        exe = os.readlink(f"/proc/{pod.process.pid}/exe")  # the image's Python, seen from the host
        assert f"/pod-{pod.name}/root/usr/bin/python3" in exe, exe
        # in-cluster configuration: through the TLS front (the service account's CA) with its token
        assert front.connections > 0 and front.bearer_token_seen > 0
        assert lease(rig).get("holderIdentity") == pod.name  # the host name is the identity
        rss_ready = pod.rss_mb()

        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
        cordoned = time.monotonic()

        async def drained() -> bool:
            return (await rig.slurm(name)).drain_flag

        await wait_for(drained, deadline_s=15, what="the cordon drained in Slurm")
        drain_s = time.monotonic() - cordoned
        rss_after = pod.rss_mb()
        code, metrics = await pod.get("/metrics")
        assert code == 200 and "slurm_syncer" in metrics

        pod.process.send_signal(signal.SIGTERM)
        termed = time.monotonic()
        code = await asyncio.wait_for(pod.process.wait(), grace_s + 5)
        stop_s = time.monotonic() - termed
    log = pod.log.read_text()
    assert code == 0, log[-3000:]
    assert stop_s <= grace_s, f"stopped after {stop_s:.1f} s, terminationGracePeriodSeconds {grace_s:.0f}"
    assert lease(rig).get("holderIdentity") in ("", None), lease(rig)  # released on the way out
    assert "Traceback" not in log, log[-3000:]
    measured = {
        "image_size_mb": round(image.size / 1e6, 1), "image_build_s": round(image.build_s, 1),
        "start_to_ready_s": round(ready_s, 2), "rss_ready_mb": round(rss_ready, 1),
        "rss_after_drain_mb": round(rss_after, 1), "cordon_to_drain_s": round(drain_s, 2),
        "sigterm_to_exit_s": round(stop_s, 2),
    }  # fmt: skip
    sys.stderr.write(f"\nimage measurements: {json.dumps(measured)}\n")


async def test_two_image_replicas_fail_over_within_the_lease(
    rig: Rig, image: Image, tmp_path: Path, namespace: None
) -> None:
    names = fresh_slurm_nodes(8)
    kube_nodes = [rig.bind_pod(name)[0] for name in names]
    config = {
        "lease-duration": f"{LEASE_S:.0f}s",
        "renew-deadline": "3s",
        "retry-period": f"{RETRY_S * 1000:.0f}ms",
        "max-drain-fraction": 1.0,  # the test cordons most of its handful of nodes
    }

    async def drained(name: str) -> bool:
        return (await rig.slurm(name)).drain_flag

    async def all_drained(batch: list[str]) -> bool:
        return all([await drained(n) for n in batch])

    def cordon(nodes: list[str]) -> None:
        for node in nodes:
            rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})

    async with contextlib.AsyncExitStack() as stack:
        front = await stack.enter_async_context(tls_front(rig, tmp_path))
        # slurmrestd through a recording proxy: when each Slurm write arrived (test_failover's reading)
        proxy = await stack.enter_async_context(FaultProxy(rig.sandbox.rest_url))
        pods = {}
        for suffix in ("a1b2c", "d3e4f"):
            name = f"slurm-syncer-5d8c7b9f4-{suffix}"
            values = chart_values(rig, free_port(), config, proxy.url)
            pods[name] = await stack.enter_async_context(run_pod(rig, image, front, tmp_path, name, values))
        await wait_for(lambda: lease(rig).get("holderIdentity") in pods, deadline_s=60, what="a leader")
        leader = pods[lease(rig)["holderIdentity"]]
        (standby,) = [pod for pod in pods.values() if pod is not leader]
        await until_ready(leader)

        async def standby_up() -> bool:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                return (await standby.get("/healthz"))[0] == 200
            return False

        await wait_for(standby_up, deadline_s=60, what="the standby up")
        cordon(kube_nodes[:3])
        await wait_for(lambda: all_drained(names[:3]), deadline_s=15, what="the leader's drains")
        cordon(kube_nodes[3:5])  # sent as the leader dies: whoever leads next must not lose them
        leader.process.kill()
        killed = time.monotonic()
        await leader.process.wait()
        cordon(kube_nodes[5:6])
        await wait_for(lambda: all_drained(names[:6]), deadline_s=30, what="the standby's drains")
        assert lease(rig).get("holderIdentity") == standby.name
        # the first Slurm write after the kill is the standby's (the leader is dead)
        takeover_s = min(at for at, *_ in faults.node_writes(proxy.writes) if at > killed) - killed
        assert takeover_s <= TAKEOVER_S, f"takeover took {takeover_s:.1f} s, lease {LEASE_S:.0f} s"
        sys.stderr.write(f"\nimage failover: kill to the standby's first Slurm write {takeover_s:.2f} s\n")
        assert standby.process.returncode is None
    for name in names[6:]:  # never cordoned, never drained
        assert not await drained(name)
    for name in names[:6]:
        assert (await rig.slurm(name)).reason.startswith("k8s: ")
    assert not re.search(r"Traceback", standby.log.read_text())


@pytest.mark.parametrize("profile", ["default", "slinky"])
async def test_check_and_status_through_kubectl_exec_in_the_image(
    rig: Rig, image: Image, tmp_path: Path, namespace: None, profile: str
) -> None:
    """`kubectl exec deploy/slurm-syncer -- slurm-syncer check` (and `status`): the command in the
    container's file system, user, environment and mounts, without `run`'s arguments (exec passes
    none): the Slurm token, the service account and every option reach it through the environment."""
    names = bind_one_slinky_labelled_one_not(rig)
    profile_values = yaml.safe_load(SLINKY.read_text()) if profile == "slinky" else {}
    values = merged(profile_values, chart_values(rig, free_port()))
    outputs = {}
    async with tls_front(rig, tmp_path) as front:
        for command in ("check", "status"):
            argv = ["slurm-syncer", command, *(["--no-headers"] if command == "status" else [])]
            async with run_pod(rig, image, front, tmp_path, f"exec-{command}", values, argv) as pod:
                code = await asyncio.wait_for(pod.process.wait(), 120)
            text = pod.log.read_text()  # stdout and stderr (JSON log lines, if any)
            outputs[command] = (code, [line for line in text.splitlines() if not line.startswith("{")])
            assert "Traceback" not in text, text
    code, lines = outputs["check"]
    assert code == 0, lines
    assert any("token may update nodes" in line for line in lines), lines
    assert any("credentials from the in-cluster service account" in line for line in lines), lines
    code, lines = outputs["status"]
    rows = {line.split()[0]: line.split() for line in lines}
    assert code in (0, 3) and names[0] in rows, lines
    assert (names[1] in rows) is (profile == "default"), lines  # the Slinky profile's selector reached it
