"""The real-Slurm sandbox: CLI, idempotence, REST, real jobs, dynamic nodes, stale PIDs, failed starts."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from syncer.testing.sandbox import (
    API_VERSION,
    REAL_NODE,
    RELEASE_ENV,
    RELEASES,
    Sandbox,
    SandboxError,
    load,
    release,
    up,
)
from syncer.testing.sandbox.processes import ProcessId, processes_in, start_time, wait_until
from syncer.testing.sandbox.rootfs import check_release, ensure_rootfs, in_use, replace_tree
from tests.fixtures.slurm import SELECTED

pytestmark = pytest.mark.slurm


def rest_get(sandbox: Sandbox, path: str, token: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(f"{sandbox.rest_url}{path}", headers={"X-SLURM-USER-TOKEN": token})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as error:
        body = error.read()
        return error.code, json.loads(body) if body.startswith(b"{") else {}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syncer", "sandbox", *args], capture_output=True, text=True, timeout=300
    )


def exports(text: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(.*)$", text, flags=re.MULTILINE))


def started_pids(directory: Path) -> list[ProcessId]:
    """Every daemon the sandbox in `directory` ever started, from its events log."""
    text = (directory / "log" / "events.log").read_text()
    return [ProcessId(int(p), int(s)) for p, s in re.findall(r"started \S+ pid=(\d+) start=(\d+)", text)]


def test_rest_answers_with_the_token_and_lists_all_nodes(slurm_sandbox: Sandbox) -> None:
    token = slurm_sandbox.token_file.read_text().strip()
    status, ping = rest_get(slurm_sandbox, f"/slurm/{API_VERSION}/ping", token)
    assert status == 200, ping
    status, body = rest_get(slurm_sandbox, f"/slurm/{API_VERSION}/nodes/", token)
    assert status == 200, body.get("errors")
    names = {node["name"] for node in body["nodes"]}  # type: ignore[attr-defined]
    assert set(slurm_sandbox.node_names) <= names
    assert len(slurm_sandbox.node_names) > 1000


def test_rest_rejects_a_token_not_signed_with_the_key(slurm_sandbox: Sandbox) -> None:
    good = slurm_sandbox.token_file.read_text().strip()
    forged = good[: good.rindex(".") + 1] + "AAAA"
    status, _ = rest_get(slurm_sandbox, f"/slurm/{API_VERSION}/node/{REAL_NODE}", forged)
    assert status != 200


def test_token_issued_by_slurmctld_works_for_another_user(slurm_sandbox: Sandbox) -> None:
    token = slurm_sandbox.token(user="root", lifespan=120)
    status, body = rest_get(slurm_sandbox, f"/slurm/{API_VERSION}/node/{REAL_NODE}", token)
    assert status == 200, body.get("errors")


def test_cloud_nodes_are_idle_and_powered_down(slurm_sandbox: Sandbox) -> None:
    assert slurm_sandbox.node_state("node00001") >= {"IDLE", "CLOUD", "POWERED_DOWN"}
    assert "IDLE" in slurm_sandbox.node_state(REAL_NODE)


def real_node_story(sandbox: Sandbox) -> str:
    """What slurmctld and the real node's slurmd say, for a failure message: a CI run once found this slurmd
    alive but silent (no launch logged) for ten minutes, with no cause on record."""
    pid = sandbox.pids.get(f"slurmd:{REAL_NODE}")
    wchan = ""
    if pid is not None:
        with contextlib.suppress(OSError):
            wchan = Path(f"/proc/{pid}/wchan").read_text()
    log = sandbox.directory / "log" / f"slurmd-{REAL_NODE}.log"
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.exists() else "(no log)"
    return (
        f"{sandbox.scontrol('show', 'node', REAL_NODE)}\n{sandbox.run('squeue', '-a').stdout}\n"
        f"slurmd pid {pid} waits in {wchan or '?'}; its log ends:\n{tail}"
    )


def test_a_real_job_runs_on_the_real_node(slurm_sandbox: Sandbox) -> None:
    try:
        step = slurm_sandbox.run("srun", "-w", REAL_NODE, "echo", "hello-from-srun", timeout=60)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"srun on {REAL_NODE} timed out:\n{real_node_story(slurm_sandbox)}") from exc
    assert step.returncode == 0, step.stderr
    assert "hello-from-srun" in step.stdout
    batch = slurm_sandbox.run(
        "sbatch", "--wait", "-w", REAL_NODE, "--wrap", "echo batch-ran-on $SLURMD_NODENAME", timeout=120
    )  # fmt: skip
    assert batch.returncode == 0, batch.stderr
    job_id = re.search(r"Submitted batch job (\d+)", batch.stdout)
    assert job_id, batch.stdout
    # The default output file lands in the instance's work directory, not in the shared rootfs.
    text = (slurm_sandbox.directory / "work" / f"slurm-{job_id.group(1)}.out").read_text()
    assert text.strip() == f"batch-ran-on {REAL_NODE}"


def test_dynamic_node_registers_runs_a_job_and_is_removed(slurm_sandbox: Sandbox) -> None:
    slurm_sandbox.start_slurmd("dyn-test1", cpus=1, memory_mb=400)
    try:
        assert {"IDLE", "DYNAMIC_NORM"} <= slurm_sandbox.node_state("dyn-test1")
        assert "dyn-test1" in slurm_sandbox.dynamic_nodes
        token = slurm_sandbox.token_file.read_text().strip()
        status, body = rest_get(slurm_sandbox, f"/slurm/{API_VERSION}/node/dyn-test1", token)
        assert status == 200, body.get("errors")
        step = slurm_sandbox.run("srun", "-w", "dyn-test1", "printenv", "SLURMD_NODENAME", timeout=60)
        assert (step.returncode, step.stdout.strip()) == (0, "dyn-test1"), step.stderr
    finally:
        slurm_sandbox.delete_node("dyn-test1")
    assert slurm_sandbox.node_state("dyn-test1") == set()
    assert "dyn-test1" not in slurm_sandbox.dynamic_nodes


def test_stopping_a_slurmd_kills_its_running_job_processes(slurm_sandbox: Sandbox) -> None:
    slurm_sandbox.start_slurmd("dyn-test2")
    try:
        submitted = slurm_sandbox.run(
            "sbatch", "--no-requeue", "-w", "dyn-test2", "--wrap", "sleep 600", check=True
        ).stdout
        job_id = submitted.split()[-1]
        wait_until(
            lambda: slurm_sandbox.run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() == "RUNNING",
            60, "job running",
        )  # fmt: skip
        daemon = slurm_sandbox.daemons["slurmd:dyn-test2"]
        namespace = os.readlink(f"/proc/{daemon.pid}/ns/mnt")
        slurm_sandbox.stop_slurmd("dyn-test2")
        assert processes_in(namespace) == []
        # Slurm learns of the lost node only after SlurmdTimeout; marking it DOWN ends the job now.
        slurm_sandbox.scontrol("update", "nodename=dyn-test2", "state=down", "reason=test")
        wait_until(
            lambda: slurm_sandbox.run("squeue", "-h", "-j", job_id).stdout.strip() == "", 60, "job gone"
        )
    finally:  # the shared sandbox's node count is other tests' expectation: never leave the node behind
        slurm_sandbox.scontrol("update", "nodename=dyn-test2", "state=down", "reason=test")
        slurm_sandbox.delete_node("dyn-test2")


def test_a_killed_daemon_is_seen_as_stale_and_dropped(slurm_sandbox: Sandbox) -> None:
    slurm_sandbox.start_slurmd("dyn-test3")
    victim = slurm_sandbox.daemons["slurmd:dyn-test3"]
    os.kill(victim.pid, signal.SIGKILL)
    wait_until(lambda: not victim.alive(), 10, "slurmd killed")
    reloaded = load(slurm_sandbox.directory)
    assert reloaded is not None
    assert "slurmd:dyn-test3" not in reloaded.daemons
    assert reloaded.healthy()
    slurm_sandbox.delete_node("dyn-test3")


def test_stale_pid_entries_are_dropped_when_the_pid_belongs_to_someone_else(tmp_path: Path) -> None:
    me = os.getpid()
    my_start = start_time(me)
    assert my_start is not None
    gone = subprocess.Popen(["true"])
    gone.wait()
    state = {
        "rootfs": "/nonexistent", "nodes": 1, "ports": {"slurmctld": 1, "slurmd": 2, "rest": 3},
        "daemons": {
            "slurmctld": [me, my_start],  # a live PID, but running python, not slurmctld
            "slurmrestd": [me, my_start + 1],  # a live PID with another start time: reused
            "slurmd:sbx-real": [gone.pid, 1],  # no such process any more
        },
    }  # fmt: skip
    (tmp_path / "sandbox.json").write_text(json.dumps(state))
    sandbox = load(tmp_path)
    assert sandbox is not None
    assert sandbox.daemons == {}
    assert json.loads((tmp_path / "sandbox.json").read_text())["daemons"] == {}


def test_slurmrestd_and_slurmctld_restart(slurm_sandbox: Sandbox) -> None:
    token = slurm_sandbox.token_file.read_text().strip()
    slurm_sandbox.stop_slurmrestd()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{slurm_sandbox.rest_url}/slurm/{API_VERSION}/ping", timeout=5)
    slurm_sandbox.start_slurmrestd()
    assert rest_get(slurm_sandbox, f"/slurm/{API_VERSION}/ping", token)[0] == 200
    slurm_sandbox.restart_slurmctld()
    assert "UP" in slurm_sandbox.scontrol("ping")
    wait_until(
        lambda: "IDLE" in slurm_sandbox.node_state(REAL_NODE), 60, "real node back",
        explain=lambda: real_node_story(slurm_sandbox),
    )  # fmt: skip
    assert rest_get(slurm_sandbox, f"/slurm/{API_VERSION}/node/node00001", token)[0] == 200
    assert slurm_sandbox.healthy()


def test_unix_socket_slurmrestd_serves_without_a_token(slurm_sandbox: Sandbox) -> None:
    path = slurm_sandbox.start_slurmrestd_unix()
    try:
        assert path == slurm_sandbox.rest_socket and path.is_socket()
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30)
            sock.connect(str(path))
            # 26.05 keeps even an HTTP/1.0 connection open unless told otherwise
            request = f"GET /slurm/{API_VERSION}/node/node00001 HTTP/1.0\r\nConnection: close\r\n\r\n"
            sock.sendall(request.encode())
            answer = b"".join(iter(lambda: sock.recv(65536), b""))
        assert answer.split(b" ", 2)[1] == b"200", answer[:200]
        assert b'"name": "node00001"' in answer
    finally:
        slurm_sandbox.stop_slurmrestd_unix()
    assert not path.exists()
    assert slurm_sandbox.healthy()


def test_cli_up_is_idempotent_and_down_stops_what_it_started(tmp_path: Path, slurm_sandbox: Sandbox) -> None:
    directory = tmp_path / "cli"
    first = cli("up", "--nodes", "5", "--dir", str(directory))
    assert first.returncode == 0, first.stderr
    env = exports(first.stdout)
    assert env["SLURM_SYNCER_SLURM_URL"].startswith("http://127.0.0.1:")
    assert env["SLURM_SYNCER_SLURM_URL"] != slurm_sandbox.rest_url  # runs beside the session sandbox
    assert Path(env["SLURM_SYNCER_SLURM_TOKEN_FILE"]).read_text().count(".") == 2
    assert Path(env["SLURM_SYNCER_SLURM_JWT_KEY"]).stat().st_size == 32
    pids = started_pids(directory)
    assert len(pids) == 3 and all(p.alive() for p in pids)

    again = cli("up", "--nodes", "5", "--dir", str(directory))
    assert (again.returncode, again.stdout) == (0, first.stdout)
    assert started_pids(directory) == pids  # reused, nothing new started

    other = cli("up", "--nodes", "6", "--dir", str(directory))
    assert other.returncode == 1
    assert "already runs" in other.stderr and "sandbox down" in other.stderr
    other_release = "24.11" if SELECTED.name == "26.05" else "26.05"
    switched = cli("up", "--nodes", "5", "--slurm", other_release, "--dir", str(directory))
    assert switched.returncode == 1 and f"a Slurm {SELECTED.name} sandbox" in switched.stderr

    assert cli("env", "--dir", str(directory)).stdout == first.stdout
    scontrol = cli("scontrol", "--dir", str(directory), "show", "node", "node00005")
    assert scontrol.returncode == 0 and "State=IDLE+CLOUD+POWERED_DOWN" in scontrol.stdout, scontrol.stderr

    # A partly running sandbox is reported, and the next `up` starts a fresh cluster on the same ports.
    drained = cli(
        "scontrol", "--dir", str(directory), "update", "nodename=node00001", "state=drain", "reason=x"
    )
    assert drained.returncode == 0, drained.stderr
    rest = next(p for p in pids if p.runs("slurmrestd"))
    os.kill(rest.pid, signal.SIGKILL)
    wait_until(lambda: not rest.alive(), 10, "slurmrestd killed")
    partly = cli("env", "--dir", str(directory))
    assert partly.returncode == 1 and "only partly running" in partly.stderr
    restarted = cli("up", "--nodes", "5", "--dir", str(directory))
    assert (restarted.returncode, restarted.stdout) == (0, first.stdout), restarted.stderr
    assert not any(p.alive() for p in pids)
    shown = cli("scontrol", "--dir", str(directory), "show", "node", "node00001").stdout
    assert "DRAIN" not in shown, "a fresh up must not restore the earlier run's node states"
    pids = started_pids(directory)[3:]

    stopped = cli("down", "--dir", str(directory))
    assert stopped.returncode == 0, stopped.stderr
    assert len(pids) == 3 and not any(p.alive() for p in pids)
    after = cli("env", "--dir", str(directory))
    assert after.returncode == 1 and "no sandbox runs" in after.stderr
    assert slurm_sandbox.healthy()  # the other sandbox was left alone


def test_failed_start_tears_down_and_shows_the_daemon_log(tmp_path: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(SandboxError) as failure:
            up(tmp_path / "busy", nodes=2, rest_port=port)
    message = str(failure.value)
    assert f"port {port} is in use" in message
    assert "slurmrestd" in message and "last lines of" in message
    pids = started_pids(tmp_path / "busy")
    assert len(pids) == 3  # slurmctld, slurmd, slurmrestd were started ...
    assert not any(p.alive() for p in pids)  # ... and all stopped again
    recorded = load(tmp_path / "busy")
    assert recorded is not None and recorded.daemons == {}


def test_bad_arguments_are_rejected_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="--nodes must be between"):
        up(tmp_path, nodes=-1)
    with pytest.raises(SandboxError, match="--port must be between"):
        up(tmp_path, nodes=1, rest_port=80)
    with pytest.raises(SandboxError, match=r"unknown Slurm release '23\.02'.*24\.11, 26\.05"):
        up(tmp_path, nodes=1, slurm="23.02")


def test_the_release_comes_from_the_environment_and_unknown_ones_say_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(RELEASE_ENV, raising=False)
    assert release().name == "26.05"  # the default: what current clusters run
    monkeypatch.setenv(RELEASE_ENV, "24.11")
    assert release().suite == "trixie" and release("26.05").suite == "sid"
    monkeypatch.setenv(RELEASE_ENV, "25.11")
    with pytest.raises(SandboxError, match=r"'25\.11' in \$SLURM_SYNCER_SLURM_RELEASE"):
        release()


def test_an_archive_offering_another_release_is_refused_with_what_it_offers() -> None:
    check_release(RELEASES["26.05"], "26.05.5-1")
    with pytest.raises(
        SandboxError, match=r"Slurm 26\.05 was asked for, but Debian sid offers Slurm 26\.11\.0-1"
    ):
        check_release(RELEASES["26.05"], "26.11.0-1")
    with pytest.raises(SandboxError, match="no slurmctld package"):
        check_release(RELEASES["24.11"], "")


def test_the_sandbox_runs_the_release_asked_for(slurm_sandbox: Sandbox) -> None:
    assert slurm_sandbox.release == SELECTED
    assert slurm_sandbox.slurm_version.startswith(SELECTED.name + "."), slurm_sandbox.slurm_version
    version = slurm_sandbox.run("scontrol", "--version", check=True).stdout
    assert version.split()[-1] == slurm_sandbox.slurm_version.split("-")[0]  # "slurm-wlm 26.05.5"
    loaded = load(slurm_sandbox.directory)
    assert loaded is not None and loaded.release == SELECTED


def test_not_root_is_told_to_run_as_root(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    result = subprocess.run(
        [*as_nobody, sys.executable, "-m", "syncer", "sandbox", "up", "--dir", str(tmp_path / "x")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(Path(__file__).parents[2])},
    )  # fmt: skip
    assert result.returncode == 1
    assert "needs root" in result.stderr and "Traceback" not in result.stderr


def test_missing_debootstrap_is_reported_when_the_rootfs_must_be_built(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("unshare", "chroot", "mount"):
        found = shutil.which(tool)
        assert found is not None
        (tools / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(tools), "SLURM_SYNCER_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "syncer", "sandbox", "up", "--dir", str(tmp_path / "x")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert result.returncode == 1
    assert "'debootstrap' is missing" in result.stderr and "scripts/bootstrap" in result.stderr


def test_an_early_state_file_with_bare_pids_is_adopted(tmp_path: Path, slurm_sandbox: Sandbox) -> None:
    ctld = slurm_sandbox.daemons["slurmctld"]
    state = {
        "rootfs": str(slurm_sandbox.rootfs), "nodes": 1, "ports": {"slurmctld": 1, "slurmd": 2, "rest": 3},
        "pids": {"slurmctld": ctld.pid, "slurmrestd": os.getpid()},  # the second runs python: stale
    }  # fmt: skip
    (tmp_path / "sandbox.json").write_text(json.dumps(state))
    sandbox = load(tmp_path)
    assert sandbox is not None
    assert sandbox.daemons == {"slurmctld": ctld}


def test_a_root_file_system_in_use_is_never_removed(tmp_path: Path) -> None:
    """A newer checkout rebuilds the cached tree while a sandbox of an older one still runs from it: the
    running sandbox keeps its tree until it ends; the next rebuild then removes it."""
    base = tmp_path / "cache"
    base.mkdir()
    target = base / "rootfs-test"
    subprocess.run(["cp", "-al", str(ensure_rootfs()), str(target)], check=True)  # hard links: no copy
    daemon = subprocess.Popen(["chroot", str(target), "sleep", "120"])  # a sandbox's daemon, bounded
    try:
        wait_until(lambda: daemon.pid in in_use(target), 10, "the chrooted process seen in the tree")
        newer = base / "rootfs-test-build-1"
        (newer / "etc").mkdir(parents=True)
        replace_tree(target, newer)
        assert (target / "etc").is_dir() and not (target / "bin").exists()  # the new tree is in place
        kept = list(base.glob("rootfs-test-old-*"))
        assert len(kept) == 1 and (kept[0] / "bin" / "sleep").exists(), kept
        assert daemon.poll() is None and in_use(kept[0]) == [daemon.pid]
        daemon.kill()
        daemon.wait()
        newest = base / "rootfs-test-build-2"
        newest.mkdir()
        replace_tree(target, newest)
        assert list(base.glob("rootfs-test-old-*")) == []  # no longer in use: removed
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
