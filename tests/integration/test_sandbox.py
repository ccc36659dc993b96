"""The real-Slurm sandbox: the CLI, idempotence, jobs, dynamic nodes, stale pids, failed starts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from syncer.testing.sandbox import REAL_NODE, Sandbox, SandboxError, load, up

pytestmark = pytest.mark.slurm


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syncer", *args], capture_output=True, text=True, timeout=180, check=False
    )


def wait_for(check, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_rest_ping_with_the_token_file(slurm_sandbox: Sandbox) -> None:
    token = slurm_sandbox.token_file.read_text().strip()
    request = urllib.request.Request(
        f"{slurm_sandbox.rest_url}/slurm/v0.0.42/ping", headers={"X-SLURM-USER-TOKEN": token}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        body = json.load(response)
    assert body["pings"][0]["responding"] is True


def test_lists_the_simulated_cloud_nodes_and_the_real_node(slurm_sandbox: Sandbox) -> None:
    out = slurm_sandbox.run("sinfo", "-h", "-N", "-o", "%N %T", check=True).stdout.split("\n")
    states = dict(line.split() for line in out if line.strip())
    assert states[REAL_NODE] == "idle"
    assert states["node00001"].startswith("idle")
    assert len([n for n in states if n.startswith("node")]) == slurm_sandbox.nodes


def test_a_real_job_runs_on_the_real_node(slurm_sandbox: Sandbox) -> None:
    result = slurm_sandbox.run("srun", "-w", REAL_NODE, "-t", "1", "echo", "hello-from-slurm", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "hello-from-slurm" in result.stdout


def test_dynamic_node_registers_runs_a_job_and_can_be_removed(slurm_sandbox: Sandbox) -> None:
    slurm_sandbox.start_slurmd("dyntest1")
    assert "DYNAMIC_NORM" in slurm_sandbox.scontrol("show", "node", "dyntest1")
    result = slurm_sandbox.run("srun", "-w", "dyntest1", "-t", "1", "true", timeout=60)
    assert result.returncode == 0, result.stderr
    slurm_sandbox.stop_slurmd("dyntest1")
    slurm_sandbox.scontrol("delete", "nodename=dyntest1")
    assert slurm_sandbox.run("scontrol", "show", "node", "dyntest1").returncode != 0


def test_second_up_reuses_the_running_sandbox(slurm_sandbox: Sandbox) -> None:
    again = up(slurm_sandbox.directory, nodes=slurm_sandbox.nodes)
    assert again.pids == slurm_sandbox.pids
    with pytest.raises(SandboxError, match="already runs"):
        up(slurm_sandbox.directory, nodes=slurm_sandbox.nodes + 1)


def test_stale_pid_is_detected(tmp_path: Path, slurm_sandbox: Sandbox) -> None:
    state = json.loads((slurm_sandbox.directory / "sandbox.json").read_text())
    state["pids"]["slurmrestd"] = os.getpid()  # a live pid that is not slurmrestd
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "sandbox.json").write_text(json.dumps(state))
    loaded = load(copy)
    assert loaded is not None
    assert "slurmrestd" not in loaded.pids
    assert "slurmctld" in loaded.pids  # the real one is still alive


def test_cli_up_env_scontrol_down(tmp_path: Path) -> None:
    directory = tmp_path / "sbx"
    started = cli("sandbox", "up", "--nodes", "5", "--dir", str(directory))
    assert started.returncode == 0, started.stderr
    assert "export SLURM_SYNCER_SLURM_URL=http://127.0.0.1:" in started.stdout
    try:
        env = cli("sandbox", "env", "--dir", str(directory))
        assert env.stdout == started.stdout
        shown = cli("sandbox", "scontrol", "--dir", str(directory), "show", "node", "node00005")
        assert "NodeName=node00005" in shown.stdout
        sandbox = load(directory)
        assert sandbox is not None
        pids = dict(sandbox.pids)
    finally:
        stopped = cli("sandbox", "down", "--dir", str(directory))
    assert stopped.returncode == 0, stopped.stderr
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or b"slurm" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert cli("sandbox", "env", "--dir", str(directory)).returncode == 1


def test_failed_start_tears_down_and_names_the_busy_port(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(SandboxError, match=f"127.0.0.1:{port} is already in use"):
            up(tmp_path / "sbx", nodes=2, rest_port=port)
    state = load(tmp_path / "sbx")
    assert state is not None and state.pids == {}, "slurmctld and slurmd must be stopped again"
