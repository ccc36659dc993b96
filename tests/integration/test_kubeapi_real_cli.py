"""`slurm-syncer kubeapi --real`: serves the real API server with the NodeSet CRD on 127.0.0.1, writes a
kubeconfig kubectl uses, and stops what it started on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import pytest

from syncer.testing.kubeapi_real import ensure_built
from syncer.testing.kubeapi_real.server import free_port
from syncer.testing.processes import stop_process
from tests.fixtures.kube import Kubectl

pytestmark = pytest.mark.kube

CLI = [sys.executable, "-m", "syncer"]


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_kubeapi_real_serves_nodesets_and_stops_what_it_started(tmp_path: Path):
    ensure_built()  # normally done by scripts/test; a cold build prints its progress
    port = free_port()
    kubeconfig = tmp_path / "kubeconfig.real"
    process = await asyncio.create_subprocess_exec(
        *CLI, "kubeapi", "--real", "--port", str(port), "--kubeconfig-out", str(kubeconfig),
        "--nodeset", "gpu", "--nodes", "3",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        lines: list[str] = []
        async with asyncio.timeout(90):
            while not any("kubeconfig written" in line for line in lines):
                line = (await process.stdout.readline()).decode()
                assert line, f"kubeapi --real ended early: {lines} {(await process.stderr.read()).decode()}"  # type: ignore[union-attr]
                lines.append(line)
        assert f"https://127.0.0.1:{port}" in lines[0] and "v1.36.4" in lines[0]
        kubectl = Kubectl(kubeconfig, tmp_path / "cache")
        table = await kubectl("get", "nodesets")
        assert table.splitlines()[1].split()[:2] == ["gpu", "3"]
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await process.wait() == 0
        assert "kubeapi: stopped" in (await process.stdout.read()).decode()
        assert not listening(port), "the API server it started is gone"
    finally:
        await stop_process(process)


async def test_kubeapi_real_refuses_what_it_cannot_serve(tmp_path: Path):
    process = await asyncio.create_subprocess_exec(
        *CLI, "kubeapi", "--real", "--slurmd-pods", "--kubeconfig-out", str(tmp_path / "k"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert "serves only CRDs and custom resources (no Pods)" in err.decode()
