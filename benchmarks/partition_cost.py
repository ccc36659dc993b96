"""SlurmPartition reconcile cost beside the old code, in one run (issue 45 item 9; issue 47's CR change ->
Slurm latency): what one CR change costs in requests and bytes to slurmrestd and how soon Slurm shows it, at
growing queues of held jobs, for this tree and for an older commit on the same sandbox and emulator.

    python benchmarks/partition_cost.py --nodes 1000 --queued 0,10000,100000 --baseline main \\
        --out benchmarks/results/partition-cost-26.05

From a clean checkout after `scripts/bootstrap` (needs root, as the sandbox does). One real Slurm 26.05
sandbox (N CLOUD nodes, `ReconfigFlags=KeepPartInfo`, `MaxJobCount` above the largest queue, slurmctld's
metrics on as 26.05 has them), the Kubernetes API emulator in this process with N node-bound Nodes, one
SlurmPartition `bench-cost` whose selector matches all of them. For each queue size (held jobs in the
sandbox's `main` partition, submitted over REST until slurmctld holds that many), each side in turn -- never
both at once, both would write -- runs the syncer's service with `--partitions-enabled` and the defaults
of the benchmark harness (`slurm-metrics-url auto`, so the service's job poll reads slurmctld's metrics):

1. started, until the CR is Ready and the controller is quiet (its queue empty, nothing delayed, the
   informer showing the CR's latest resourceVersion: its own status write has come back and been looked at);
2. `--changes` times (`--changes-queued` at a queue above 0): the CR's `maxTime` patched, until
   `GET /partitions/` shows it (polled raw every 10 ms from the benchmark: each figure includes up to one
   poll) and the controller is quiet again; each change's syncer requests and response bytes by endpoint
   (the client's own counters, `SlurmClient.stats`), so the reconcile of the status write is counted too;
3. unless `--no-drain`: a second CR over the real node with a held job in its partition, deleted (the
   partition stays, closed, while the job is queued): `--drain-s` seconds of its requests and bytes.

The old side runs in a child process from `git archive BASELINE syncer` on the same sandbox and emulator
(its cwd elsewhere, so that its `syncer` is the archived one). Also recorded: the machine reference, load
and memory before and after, slurmrestd's RSS around each side, and how long the queue took to fill.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
GROUP, VERSION, PLURAL = "slurm-syncer.dev", "v1alpha1", "slurmpartitions"
CRS = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
CR, DRAINING_CR = "bench-cost", "bench-drain"
POLL_S = 0.01
SHOWN_WITHIN_S = 900.0  # an old reconcile at 100,000 jobs reads minutes of job lists
SUBMIT_IN_FLIGHT = 16
GUARD_EVERY_S = 0.5


# -- what both sides run: `syncer` is imported inside, so the child's comes from the archived tree ----------


def _partitions_on() -> Any:
    try:
        from syncer.controllers.partitions.options import PartitionOptions
    except ImportError:  # before issue 46's registration
        from syncer.controllers.partitions.controller import PartitionOptions  # type: ignore[attr-defined]
    return PartitionOptions(enabled=True)


def _config() -> Any:
    from dataclasses import replace

    from syncer.app.service import ServiceConfig

    base = ServiceConfig(slurm_poll_interval_s=1.0, leader_election=False, listen_host="127.0.0.1",
                         listen_port=None)  # fmt: skip
    changed: Any = getattr(base, "replace", None)  # issue 46: controllers' options by name
    before_46: Any = replace  # dataclasses.replace of the old ServiceConfig, which had a `partitions` field
    return changed(partitions=_partitions_on()) if changed else before_46(base, partitions=_partitions_on())


class Side:
    """One syncer service on the shared sandbox and emulator, and the benchmark's own reads and writes."""

    def __init__(self, sandbox_dir: Path, kubeconfig: Path) -> None:
        from syncer.testing.sandbox.sandbox import load

        sandbox = load(sandbox_dir)
        assert sandbox is not None, f"no sandbox in {sandbox_dir}"
        self.sandbox = sandbox
        self.kubeconfig = kubeconfig
        self.url = f"{sandbox.rest_url}/slurm/v0.0.45/partitions/"

    async def __aenter__(self) -> Side:
        from syncer.app.service import SyncerService
        from syncer.kube.client import KubeClient
        from syncer.slurm.auth import TokenFile
        from syncer.slurm.client import SlurmClient

        token = TokenFile(self.sandbox.token_file)
        self.http = aiohttp.ClientSession(headers=token.headers())
        self.kube = await KubeClient.from_config(str(self.kubeconfig))
        slurm = SlurmClient(self.sandbox.rest_url, token)
        client = await KubeClient.from_config(str(self.kubeconfig), qps=500, burst=1000)
        self.service = SyncerService(slurm, client, _config())
        await self.service.start()
        await self.service.wait_ready(600)

        self.marks: dict[str, float] = {}  # the last change's moments: seen by the informer, write sent/done
        self._instrument()
        return self

    def _instrument(self) -> None:
        """Timestamps of the CR's watch event reaching the controller and of its partition write, so that
        the time from patch to Slurm can be split (both trees have these attributes)."""
        controller, marks = self.controller, self.marks
        controller.informer.subscribe(lambda _old, _new: marks.setdefault("event", time.monotonic()))
        writer = controller.context.slurm_writer
        put = writer.put_partition

        async def timed_put(*args: Any, **kwargs: Any) -> Any:
            marks.setdefault("write_sent", time.monotonic())
            try:
                return await put(*args, **kwargs)
            finally:
                marks.setdefault("write_done", time.monotonic())

        writer.put_partition = timed_put

    async def __aexit__(self, *_exc: object) -> None:
        await self.service.stop()
        await self.kube.close()
        await self.http.close()

    @property
    def controller(self) -> Any:
        return self.service.partitions

    def counters(self) -> tuple[dict[str, int], dict[str, int]]:
        stats = self.service.slurm.stats
        requests: dict[str, int] = {}
        for (endpoint, _status), count in stats.requests.items():
            requests[endpoint] = requests.get(endpoint, 0) + count
        return requests, dict(stats.body_bytes)

    async def max_time(self, name: str) -> Any:
        async with self.http.get(self.url) as response:
            response.raise_for_status()
            listed = (await response.json())["partitions"]
        found = [p for p in listed if p.get("name") == name]
        return found[0].get("maximums", {}).get("time", {}).get("number") if found else None

    async def shown(self, name: str, minutes: int) -> bool:
        deadline = time.monotonic() + SHOWN_WITHIN_S
        while time.monotonic() < deadline:
            try:
                if await self.max_time(name) == minutes:
                    return True
            except (aiohttp.ClientError, KeyError):
                pass  # slurmrestd busy with a job list: polled again
            await asyncio.sleep(POLL_S)
        return False

    async def cr(self, name: str) -> dict[str, Any] | None:
        from syncer.kube.errors import KubeError

        try:
            return dict(await self.kube.get(f"{CRS}/{name}"))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def reason(self, name: str) -> str:
        obj = await self.cr(name) or {}
        ready = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        return str(ready[0].get("reason", "")) if ready else ""

    async def quiet(self, name: str, within_s: float = SHOWN_WITHIN_S) -> None:
        """Until the controller has nothing queued or delayed and its informer shows the CR as stored."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            queue = self.controller.runner.queue
            seen = self.controller.informer.items.get(name)
            latest = ((await self.cr(name)) or {}).get("metadata", {}).get("resourceVersion")
            idle = queue.depth == queue.in_flight == queue.delayed == 0
            if seen is not None and seen.resource_version == latest and idle:
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the partition controller not quiet within {within_s} s")

    async def patch(self, name: str, spec: dict[str, Any]) -> None:
        from syncer.kube.client import MERGE_PATCH

        await self.kube.patch(f"{CRS}/{name}", {"spec": spec}, MERGE_PATCH)


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


async def changes(side: Side, count: int) -> dict[str, Any]:
    """`count` maxTime changes of the CR, each until Slurm shows it and the controller is quiet again."""
    seconds: list[float] = []
    requests: dict[str, int] = {}
    body: dict[str, int] = {}
    per_change_bytes: list[int] = []
    reconcile_s: list[float] = []
    parts: dict[str, list[float]] = {"to_event": [], "event_to_write": [], "write": [], "write_to_shown": []}
    for i in range(count):
        minutes = 61 + i % 2 if (await side.max_time(CR)) != 61 + i % 2 else 62 + i % 2
        before = side.counters()
        side.marks.clear()
        started = time.monotonic()
        await side.patch(CR, {"maxTime": minutes})
        assert await side.shown(CR, minutes), f"maxTime {minutes} not shown within {SHOWN_WITHIN_S} s"
        shown = time.monotonic()
        seconds.append(shown - started)
        marks = dict(side.marks)
        if {"event", "write_sent", "write_done"} <= marks.keys():
            parts["to_event"].append(marks["event"] - started)
            parts["event_to_write"].append(marks["write_sent"] - marks["event"])
            parts["write"].append(marks["write_done"] - marks["write_sent"])
            parts["write_to_shown"].append(shown - marks["write_done"])
        await side.quiet(CR)
        reconcile_s.append(time.monotonic() - started)
        after = side.counters()
        _add(requests, _delta(before[0], after[0]))
        moved = _delta(before[1], after[1])
        _add(body, moved)
        per_change_bytes.append(sum(moved.values()))
    from benchmarks.run import percentiles  # n, p50, max, p95/p99 from enough samples (the harness's rule)

    figures = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in percentiles(seconds).items()}
    return {
        "n": count,
        "to_slurm_s": {**figures, "samples": [round(s, 4) for s in seconds]},
        "until_quiet_s_p50": round(statistics.median(reconcile_s), 4),
        # patch -> the controller's informer sees it -> its POST sent -> answered -> GET /partitions shows it
        # (the last includes up to one 10 ms poll of the benchmark's)
        "parts_s": {
            k: {q: (round(v, 4) if isinstance(v, float) else v) for q, v in percentiles(vs).items()}
            for k, vs in parts.items()
        },
        "requests_per_change": {k: round(v / count, 2) for k, v in sorted(requests.items())},
        "bytes_per_change": {k: round(v / count) for k, v in sorted(body.items())},
        "bytes_per_change_all": round(statistics.mean(per_change_bytes)),
    }


async def draining(side: Side, seconds: float) -> dict[str, Any]:
    """A CR over the real node deleted with a held job in its partition: `seconds` of what it costs while
    it stays closed; then the job cancelled and the CR gone (its partition deleted after the job)."""
    spec = {"nodes": {"hosts": [side.sandbox.real_node]}}
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SlurmPartition", "metadata": {"name": DRAINING_CR},
            "spec": spec}  # fmt: skip
    await side.kube.create(CRS, body)
    await _until(lambda: _is(side.reason(DRAINING_CR), "Ready"), 120, "the draining CR Ready")
    job = side.sandbox.run("sbatch", "--parsable", "-H", "-p", DRAINING_CR, "--wrap", "true", check=True)
    await side.kube.delete(f"{CRS}/{DRAINING_CR}")
    await _until(lambda: _is(side.reason(DRAINING_CR), "Draining"), 120, "the deleted CR Draining")
    await asyncio.sleep(2.0)  # what the delete itself started has settled: a measured interval follows
    before = side.counters()
    await asyncio.sleep(seconds)  # a measured interval, not synchronisation
    after = side.counters()
    started = time.monotonic()
    side.sandbox.run("scancel", job.stdout.strip().split(";")[0], check=True)
    await _until(lambda: _gone(side), 300, "the drained CR gone after its job")
    return {
        "seconds": seconds,
        "requests": _delta(before[0], after[0]),
        "bytes": _delta(before[1], after[1]),
        "job_cancelled_to_cr_gone_s": round(time.monotonic() - started, 2),
    }


async def _is(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


async def _gone(side: Side) -> bool:
    return await side.cr(DRAINING_CR) is None


async def _until(check: Any, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {within_s} s")
        await asyncio.sleep(0.05)


async def measure(sandbox_dir: Path, kubeconfig: Path, count: int, drain_s: float) -> dict[str, Any]:
    """One side: its service started, the CR Ready and quiet, then the changes and the drain."""
    import syncer

    started = time.monotonic()
    async with Side(sandbox_dir, kubeconfig) as side:
        await _until(lambda: _is(side.reason(CR), "Ready"), SHOWN_WITHIN_S, "the CR Ready")
        await side.quiet(CR)
        result: dict[str, Any] = {"syncer": str(Path(syncer.__file__).parent), "ready_s": 0.0}
        result["ready_s"] = round(time.monotonic() - started, 2)
        result["changes"] = await changes(side, count)
        if drain_s:
            result["draining"] = await draining(side, drain_s)
    return result


def child(arguments: list[str]) -> None:
    """The old side's entry point (python -c, cwd elsewhere, the archived tree first on PYTHONPATH)."""
    sandbox_dir, kubeconfig, count, drain_s = arguments
    result = asyncio.run(measure(Path(sandbox_dir), Path(kubeconfig), int(count), float(drain_s)))
    print("RESULT " + json.dumps(result), flush=True)


# -- the run: sandbox, emulator, queue, both sides -----------------------------------------------------------


def archive(baseline: str, into: Path) -> str:
    """`git archive BASELINE syncer` unpacked under `into`; the commit it names."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", baseline], capture_output=True, text=True,
                            check=True).stdout.strip()  # fmt: skip
    into.mkdir(parents=True, exist_ok=True)
    tar = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "syncer"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar.stdout, check=True)
    return commit


async def old_side(
    tree: Path, sandbox_dir: Path, kubeconfig: Path, count: int, drain_s: float
) -> dict[str, Any]:
    code = "import sys; from benchmarks.partition_cost import child; child(sys.argv[1:])"
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{REPO}"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, str(sandbox_dir), str(kubeconfig), str(count), str(drain_s),
        cwd=tree, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out, _ = await process.communicate()
    except asyncio.CancelledError:  # stopped by the memory guard: the child goes with it
        process.kill()
        await process.wait()
        raise
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("RESULT ")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"the old side failed ({process.returncode}): {out.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    assert str(tree) in result["syncer"], f"the old side ran {result['syncer']}, not the archived tree"
    return result


async def fill_queue(sandbox: Any, wanted: int) -> dict[str, Any]:
    """Held jobs in `main` submitted over REST until slurmctld holds `wanted` (what squeue counts)."""
    from syncer.slurm.auth import TokenFile

    have = len(sandbox.run("squeue", "-h", "-o", "%i").stdout.split())
    missing = wanted - have
    started = time.monotonic()
    body = {"job": {"script": "#!/bin/sh\ntrue\n", "partition": "main", "hold": True, "name": "queued",
                    "current_working_directory": "/tmp", "environment": ["PATH=/bin:/usr/bin"]}}  # fmt: skip
    gate = asyncio.Semaphore(SUBMIT_IN_FLIGHT)
    failed: list[Any] = []
    async with aiohttp.ClientSession(headers=TokenFile(sandbox.token_file).headers()) as http:

        async def one() -> None:
            async with gate, http.post(f"{sandbox.rest_url}/slurm/v0.0.45/job/submit", json=body) as response:
                answer = await response.json(content_type=None)
                if answer.get("errors"):
                    failed.append(answer["errors"][0])

        await asyncio.gather(*(one() for _ in range(max(0, missing))))
    held = len(sandbox.run("squeue", "-h", "-o", "%i").stdout.split())
    return {"held": held, "submitted": max(0, missing), "errors": len(failed), "first_error": failed[:1],
            "seconds": round(time.monotonic() - started, 1)}  # fmt: skip


async def restart_slurmrestd(sandbox: Any) -> None:
    """slurmrestd stopped (what it holds freed) and started again once its port is free."""
    from syncer.testing.sandbox.config import port_is_free

    await asyncio.to_thread(sandbox.stop_slurmrestd)
    await _until(lambda: _true(port_is_free(sandbox.ports.rest)), 120, "slurmrestd's port free")
    await asyncio.to_thread(sandbox.start_slurmrestd)


async def _true(value: bool) -> bool:
    return value


async def guarded(work: Any, sandbox: Any, limit_mb: float, floor_mb: float) -> dict[str, Any]:
    """`work` run while slurmrestd's RSS and the machine's MemAvailable are watched: stopped (and slurmrestd
    restarted, which frees what it holds) when slurmrestd passes `limit_mb` or less than `floor_mb` is left,
    so that one side's job lists cannot take the memory of a machine others share. Its peak either way."""
    from benchmarks.slurmctld_load import machine_memory, rss_mb

    task = asyncio.ensure_future(work)
    peak, stopped = 0.0, None
    started = time.monotonic()
    while not task.done():
        rss = rss_mb(sandbox.pids["slurmrestd"]) or 0.0
        peak = max(peak, rss)
        available = machine_memory()["MemAvailable"]
        if rss > limit_mb or available < floor_mb:
            stopped = {"after_s": round(time.monotonic() - started, 1), "slurmrestd_rss_mb": rss,
                       "mem_available_mb": available}  # fmt: skip
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            await restart_slurmrestd(sandbox)
            break
        await asyncio.wait({task}, timeout=GUARD_EVERY_S)
    result: dict[str, Any] = {"stopped": stopped} if stopped else dict(task.result())
    result["slurmrestd_rss_peak_mb"] = peak
    return result


async def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    from benchmarks.run import machine_reference_s, progress
    from benchmarks.slurmctld_load import machine_load, machine_memory, rss_mb
    from syncer.model.keys import Keys
    from syncer.testing.kubeapi import KubeApiEmulator
    from syncer.testing.sandbox import up
    from syncer.testing.sandbox.config import sim_node_names

    queued = [int(q) for q in args.queued.split(",")]
    tree = directory / "old"
    head = await asyncio.to_thread(
        subprocess.run, ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    results: dict[str, Any] = {
        "nodes": args.nodes, "queued": queued, "changes": args.changes, "changes_queued": args.changes_queued,
        "this_tree": head.stdout.strip(), "baseline": await asyncio.to_thread(archive, args.baseline, tree),
        "load_before": machine_load(), "memory_before": machine_memory(),
        "machine_reference_s": round(machine_reference_s(), 3),
    }  # fmt: skip
    progress(f"sandbox: Slurm 26.05 with {args.nodes} CLOUD nodes, KeepPartInfo, MaxJobCount")
    sandbox = up(directory / "slurm", nodes=args.nodes, slurm="26.05")
    kube = KubeApiEmulator()
    try:
        with sandbox.slurm_conf.open("a") as conf:
            conf.write(f"ReconfigFlags=KeepPartInfo\nMaxJobCount={max(queued) + 10_000}\n")
        await asyncio.to_thread(sandbox.restart_slurmctld)
        await kube.start()
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}
        for name in sim_node_names(args.nodes):
            labels = {Keys.NODE_NAME_LABEL: name, "bench-pool": "a"}
            node = {"metadata": {"name": f"host-{name}", "labels": labels}, "status": {"conditions": [ready]}}
            kube.create("", "v1", "nodes", node)
        kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
        spec = {"nodes": {"selector": {"matchLabels": {"bench-pool": "a"}}}, "maxTime": 60}
        kube.create(GROUP, VERSION, PLURAL, {"metadata": {"name": CR}, "spec": spec})
        for size in queued:
            progress(f"queue: {size} held jobs")
            level: dict[str, Any] = {"fill": await fill_queue(sandbox, size)}
            count = args.changes if size == 0 else args.changes_queued
            drain_s = args.drain_s if args.drain and size <= args.drain_up_to else 0.0
            for name in args.sides.split(","):
                progress(
                    f"queue {size}: the {name} side, {count} CR changes" + (", a drain" if drain_s else "")
                )
                rss_before = rss_mb(sandbox.pids["slurmrestd"])
                began = time.monotonic()
                work = (
                    old_side(tree, sandbox.directory, kubeconfig, count, drain_s)
                    if name == "old"
                    else measure(sandbox.directory, kubeconfig, count, drain_s)
                )
                side = await guarded(work, sandbox, args.rss_limit_mb, args.mem_floor_mb)
                side["wall_s"] = round(time.monotonic() - began, 1)
                side["slurmrestd_rss_mb"] = {
                    "before": rss_before,
                    "after": rss_mb(sandbox.pids["slurmrestd"]),
                }
                level[name] = side
                results[f"queued_{size}"] = level
                save(results, args.out)  # a run stopped later keeps what it measured
            results[f"memory_after_{size}"] = machine_memory()
    finally:
        await kube.stop()
        sandbox.down()
    results["load_after"] = machine_load()
    return results


def save(results: dict[str, Any], out: Path | None) -> None:
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queued", default="0,10000,100000", help="held jobs in the queue, one run each")
    parser.add_argument("--changes", type=int, default=200, help="CR changes per side at an empty queue")
    parser.add_argument("--changes-queued", type=int, default=3, help="CR changes per side at a queue")
    parser.add_argument("--baseline", default="main", help="the commit the old side runs")
    parser.add_argument("--sides", default="old,new", help="which sides run, in this order")
    parser.add_argument("--drain", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--drain-s", type=float, default=20.0, help="seconds of a draining CR measured")
    parser.add_argument("--drain-up-to", type=int, default=10_000, help="no drain phase above this queue")
    parser.add_argument(
        "--rss-limit-mb",
        type=float,
        default=6000.0,
        help="a side is stopped when slurmrestd's RSS passes this (the machine is shared)",
    )
    parser.add_argument("--mem-floor-mb", type=float, default=5000.0,
                        help="a side is stopped when less memory than this is available")  # fmt: skip


def main() -> int:
    sys.path.insert(0, str(REPO))
    from benchmarks.service_bench import report

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None)
    arguments(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-partition-cost-") as tmp:
        results = asyncio.run(run(args, Path(tmp)))
    return report(results, args.out)


if __name__ == "__main__":
    sys.exit(main())
