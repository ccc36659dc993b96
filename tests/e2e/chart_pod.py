"""`slurm-syncer run` started exactly as the Helm chart's Deployment starts it (its environment and
arguments, rendered by the real Helm engine), with only what must point at this machine replaced: the
kubeconfig, the listen address, and where the Secret is "mounted"."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from syncer.testing.sandbox.config import free_port
from tests.e2e.rig import Rig
from tests.integration.test_helm_chart import NAMESPACE, container, environment, render

CLI = str(Path(sys.executable).parent / "slurm-syncer")


@dataclass
class ChartPod:
    process: asyncio.subprocess.Process
    port: int
    log: Path
    objects: list[dict[str, Any]]  # what the chart rendered

    def alive(self) -> None:
        """Raises, with the log's tail, once the syncer has exited."""
        if self.process.returncode is not None:
            raise AssertionError(
                f"the syncer exited {self.process.returncode}: {self.log.read_text()[-2000:]}"
            )

    async def get(self, path: str) -> tuple[int, str]:
        """GET an endpoint: (status, body), (0, "") while nothing answers."""
        try:
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{self.port}{path}") as response:
                    return response.status, await response.text()
        except aiohttp.ClientError:
            return 0, ""

    async def ready(self) -> bool:
        self.alive()
        status, body = await self.get("/readyz")
        return status == 200 and "leader" in body


@contextlib.asynccontextmanager
async def chart_pod(
    rig: Rig, tmp_path: Path, auth: dict[str, Any], more: dict[str, Any] | None = None
) -> AsyncIterator[ChartPod]:
    """The syncer as the chart runs it with `slurm.auth` = `auth` and the values in `more` (its
    `extraArgs` after the ones this machine needs); stopped with SIGTERM at the end (exit 0 asserted)."""
    more = dict(more or {})
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    port = free_port()
    values = {
        "slurm": {"url": rig.sandbox.rest_url, "auth": auth},
        # what differs outside a cluster: credentials from a kubeconfig, and metrics on loopback only
        "extraArgs": [f"--kubeconfig={rig.kubeconfig}", f"--listen-address=127.0.0.1:{port}",
                      *more.pop("extraArgs", [])],
        **more,
    }  # fmt: skip
    objects = render(values)
    main = container(objects)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **environment(main)}
    log = tmp_path / "syncer.log"
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            CLI, "run", *main["args"], env=env, stdout=out, stderr=out
        )
    try:
        yield ChartPod(process, port, log, objects)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 30) == 0


def token_auth(rig: Rig) -> dict[str, Any]:
    """`slurm.auth` for the sandbox's token file, "mounted" where it is."""
    token = rig.sandbox.token_file
    return {"type": "token", "secretKey": token.name, "mountPath": str(token.parent)}
