"""Credentials: a rotated token file is picked up without a restart, an expired token gives one clear
error and the syncer recovers when it is replaced, and no token or key ever shows in what the syncer
emits (its logs at debug level, /metrics, /readyz, Kubernetes objects and Events, Slurm reasons)."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from syncer.testing.sandbox.config import free_port
from tests.e2e.rig import NAMESPACE, Rig, fresh_slurm_nodes
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
CLI = str(Path(sys.executable).parent / "slurm-syncer")


def expiry(token: str) -> float:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return float(claims["exp"])


def secrets_of(token: str) -> list[str]:
    """The whole token and its payload and signature segments: none may appear anywhere."""
    _, payload, signature = token.split(".")
    return [token, payload, signature]


async def get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}{path}") as response:
            return response.status, await response.text()


async def test_token_rotation_expiry_and_no_secret_leaks(rig: Rig, tmp_path: Path):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    token_file = tmp_path / "token"
    first = rig.sandbox.token(lifespan=900)
    token_file.write_text(first + "\n")
    port = free_port()
    log_path = tmp_path / "syncer.log"
    argv = [
        CLI, "--log-level", "debug", "--log-format", "json", "run",
        "--slurm-url", rig.sandbox.rest_url, "--slurm-token-file", str(token_file),
        "--kubeconfig", str(rig.kubeconfig), "--namespace", NAMESPACE, "--no-leader-election",
        "--listen-address", f"127.0.0.1:{port}", "--slurm-poll-interval", "200ms",
        "--slurm-stale-after", "3s", "--no-nodeset-enabled",
        # probes every poll: with slurmctld's metrics (which `auto` now finds here) slurmrestd is asked, and
        # a rejected token seen, only every --slurm-metrics-floor
        "--slurm-metrics-url", "off",
    ]  # fmt: skip
    seen: list[str] = []
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log)
    try:

        async def ready() -> bool:
            try:
                return (await get(port, "/readyz"))[0] == 200
            except aiohttp.ClientError:
                return False

        await wait_for(ready, deadline_s=60, what="syncer ready")
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return (await rig.slurm(name)).drain_flag

        await wait_for(drained, deadline_s=10, what="drain with the first token")
        # an expired token: one clear error, data goes stale, nothing crashes
        expired = rig.sandbox.token(lifespan=1)
        await wait_for(
            lambda: time.time() > expiry(expired) + 1, deadline_s=10, what="the short token to expire"
        )
        token_file.write_text(expired + "\n")

        async def stale() -> bool:
            status, body = await get(port, "/readyz")
            seen.append(body)
            return status == 503 and "stale" in body

        await wait_for(stale, deadline_s=20, what="/readyz to report stale data")
        text = log_path.read_text()
        rejected = [line for line in text.splitlines() if "rejected the token" in line]
        assert rejected, text[-3000:]
        assert len(rejected) <= 3, f"the same error repeated {len(rejected)} times"
        # rotation: a new valid token in the file is used without a restart
        rotated = rig.sandbox.token(lifespan=900)
        token_file.write_text(rotated + "\n")
        await wait_for(ready, deadline_s=20, what="recovery after the token was replaced")
        assert process.returncode is None, "the syncer restarted or died"
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": None}})

        async def undrained() -> bool:
            return not (await rig.slurm(name)).drain_flag

        await wait_for(undrained, deadline_s=10, what="undrain with the rotated token")
        seen.append((await get(port, "/metrics"))[1])
        seen.append((await get(port, "/healthz"))[1])
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 30)
    seen.append(log_path.read_text())
    seen.append(json.dumps([rig.kube.api.store.objects_of(key) for key in rig.kube.api.store.objects]))
    seen.append(rig.sandbox.run("sinfo", "-h", "-N", "-o", "%N %E").stdout)
    key = rig.sandbox.jwt_key_path.read_bytes()
    forbidden = [
        *secrets_of(first), *secrets_of(expired), *secrets_of(rotated),
        base64.b64encode(key).decode(), key.hex(),
    ]  # fmt: skip
    emitted = "\n".join(seen)
    assert "rejected the token" in emitted and "slurm node drained" in emitted  # the scan covers the logs
    for secret in forbidden:
        assert secret not in emitted, "a credential leaked into the syncer's output"
