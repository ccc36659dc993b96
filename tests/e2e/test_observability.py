"""The exporter and health endpoints of a running syncer connected to the sandbox and the emulator."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from syncer.slurm.jwt import token_expiry
from syncer.testing.faultproxy import FaultProxy
from tests.e2e.rig import Rig, fresh_slurm_nodes, get, running_syncer, sample
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


async def test_health_and_metrics_of_a_running_syncer(rig: Rig):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    # with slurmctld's metrics as the cache's hint where the release serves them (26.05), off on 24.11
    async with running_syncer(rig, slurm_metrics_url=rig.sandbox.metrics_url) as service:
        assert await get(service, "/healthz") == (200, "ok\n")
        status, body = await get(service, "/readyz")
        assert status == 200 and body.startswith("ok (leader")
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

        async def drained_and_reported() -> bool:
            _, text = await get(service, "/metrics")
            drains = sample(
                text, "slurm_syncer_actions_total", kind="drain", direction="k8s_to_slurm", result="ok"
            )
            return bool(drains) and bool(sample(text, "slurm_node_info", node=name, drain="true"))

        await wait_for(drained_and_reported, deadline_s=10, what="drain counted and exported")
        _, text = await get(service, "/metrics")
        slurm_nodes = len(service.slurm_cache.nodes)
        assert (
            sum(
                sample(text, "slurm_nodes", state=s) or 0
                for s in ("idle", "allocated", "mixed", "down", "error", "future", "unknown")
            )
            == slurm_nodes
        )
        assert text.count("\nslurm_node_info{") == slurm_nodes
        assert (sample(text, "slurm_partition_nodes", partition="main") or 0) >= 1
        main = [s for s in service.slurm_cache.nodes.values() if "main" in s.partitions]
        for state in ("idle", "allocated", "mixed", "down"):  # each base state, zeros too
            expected = sum(1 for s in main if s.base_state.lower() == state)
            assert sample(text, "slurm_partition_node_states", partition="main", state=state) == expected
        assert (sample(text, "slurm_syncer_slurm_cache_reads_total", path="list") or 0) >= 1
        assert (sample(text, "slurm_syncer_slurm_cache_read_bytes_total", path="list") or 0) > 0
        hinted = sample(text, "slurm_syncer_slurm_cache_reads_total", path="metrics") or 0
        assert (hinted >= 1) == bool(rig.sandbox.metrics_url)
        assert sample(text, "slurm_syncer_slurm_metrics_hint_failing") == 0
        assert sample(text, "slurm_syncer_slurm_metrics_hint_total", result="error") == 0
        assert (
            sample(text, "slurm_syncer_propagation_latency_seconds_count", direction="k8s_to_slurm") or 0
        ) >= 1
        assert sample(text, "slurm_syncer_leader") == 1
        by_status = [
            float(line.rpartition(" ")[2])
            for line in text.splitlines()
            if line.startswith("slurm_syncer_kube_request_errors_total{method=")
        ]
        assert sum(by_status) == sample(text, "slurm_syncer_kube_requests_total", result="error")
        assert sample(text, "slurm_syncer_bound_nodes", mode="pod") == 1
        # what the alerts need: the token's exp as the file holds it, dry-run, the process itself
        exp = token_expiry(rig.sandbox.token_file.read_text().strip())
        assert exp and sample(text, "slurm_syncer_slurm_token_expiry_timestamp_seconds", source="file") == exp
        assert sample(text, "slurm_syncer_dry_run") == 0
        assert (sample(text, "process_resident_memory_bytes") or 0) > 0
        assert (sample(text, "process_cpu_seconds_total") or 0) > 0
        assert sample(text, "python_info", implementation="CPython") == 1
        polls = sum(
            sample(text, "slurm_syncer_slurm_fetches_total", result=r) or 0 for r in ("not_modified", "full")
        )
        assert polls >= 1
        await wait_for(lambda: service.diag != {}, what="scheduler statistics polled")
        _, text = await get(service, "/metrics")
        assert sample(text, "slurm_scheduler_server_threads") is not None
        promtool = shutil.which("promtool")
        assert promtool, "promtool missing: scripts/bootstrap installs the Debian package prometheus"
        process = await asyncio.create_subprocess_exec(
            promtool, "check", "metrics", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await process.communicate(text.encode())
        assert process.returncode == 0, f"promtool check metrics: {out.decode()}"


async def test_readyz_reports_stale_slurm_data(rig: Rig):
    async with FaultProxy(rig.sandbox.rest_url) as proxy:
        async with running_syncer(rig, slurm_url=proxy.url, slurm_stale_after_s=1.5) as service:
            proxy.fail_next(100_000, status=503)

            async def not_ready() -> bool:
                status, body = await get(service, "/readyz")
                return status == 503 and "slurm data stale" in body

            await wait_for(not_ready, deadline_s=15, what="/readyz 503 naming stale Slurm data")
            assert (await get(service, "/healthz"))[0] == 200  # alive, just not ready
            proxy.clear_faults()  # slurmrestd answers again

            async def ready() -> bool:
                return (await get(service, "/readyz"))[0] == 200

            await wait_for(ready, deadline_s=15, what="ready again after recovery")


async def test_job_counts_come_from_slurmctlds_metrics_where_it_serves_them(rig: Rig):
    """26.05: slurm_jobs is refreshed from the /metrics/partitions body the hint already read and the
    scheduler gauges from /metrics/scheduler (no GET /jobs or /diag each poll); 24.11 (no metrics): from
    slurmrestd's job list and /diag, with the same names and labels."""
    job = rig.sandbox.run(
        "sbatch", "--parsable", "--no-requeue", "-w", rig.sandbox.real_node, "--wrap", "sleep 60", check=True
    ).stdout.strip()  # fmt: skip
    try:
        async with running_syncer(
            rig, slurm_metrics_url=rig.sandbox.metrics_url, jobs_poll_interval_s=0.5
        ) as service:
            expected = "slurmctld_metrics" if rig.sandbox.metrics_url else "slurmrestd"

            async def counted_from_expected_source() -> bool:
                _, text = await get(service, "/metrics")
                running = sample(text, "slurm_jobs", partition="main", state="running") or 0
                jobs = sample(text, "slurm_syncer_exporter_reads_total", what="jobs", source=expected) or 0
                stats = sample(text, "slurm_syncer_exporter_reads_total", what="scheduler", source=expected)
                both = jobs >= 2 and (stats or 0) >= 2
                return running >= 1 and both and service.job_counts_source == expected

            await wait_for(
                counted_from_expected_source, deadline_s=20, what=f"slurm_jobs counted from {expected}"
            )
            _, text = await get(service, "/metrics")
            # slurmctld's own statistics (its job counts are a snapshot it takes now and then)
            for gauge in ("slurm_scheduler_jobs_running", "slurm_scheduler_backfill_cycle_last_seconds"):
                assert sample(text, gauge) is not None, gauge
    finally:
        rig.sandbox.run("scancel", job)
