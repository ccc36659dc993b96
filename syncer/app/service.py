"""The running syncer: Slurm client and cache, Kubernetes cache, leader election, the controllers (every one
the registry names, syncer/controllers/__init__.py: each built from one ControllerContext by its registration
and run by its ControllerRunner) and the health endpoints, all under one supervised Manager (syncer/runtime):
the first loop to end unexpectedly halts every write and stops the rest, and `wait()` reports it so
`slurm-syncer run` exits 1. `run` builds one from settings; tests and the demo build one directly."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from syncer.app.job_ready import PATH as PROLOG_PATH
from syncer.app.job_ready import JobReadiness
from syncer.app.metrics import SyncerMetrics
from syncer.app.registry import registrations
from syncer.app.settings import default
from syncer.app.slurm_wait import connect_slurm
from syncer.control.context import ControllerContext
from syncer.control.gate import WriteGate
from syncer.control.slurm_writer import SlurmWriter
from syncer.controllers.attributes.controller import AttributeController
from syncer.controllers.maintenance.controller import MaintenanceController
from syncer.controllers.nodeset.controller import NodeSetController
from syncer.controllers.partitions.controller import PartitionController
from syncer.controllers.scheduler.controller import SchedulerController
from syncer.controllers.sync.controller import SyncController
from syncer.kube.cache import KubeCache
from syncer.kube.client import KubeClient
from syncer.kube.events import EventRecorder, ObjectRef
from syncer.kube.leader import LeaderElector
from syncer.kube.writer import KubeWriter
from syncer.model.keys import Keys
from syncer.model.naming import SlurmNameRule
from syncer.runtime.backoff import Backoff
from syncer.runtime.controller import Controller, ControllerRunner, ReconcileMetrics
from syncer.runtime.manager import Manager, TaskExited
from syncer.slurm.cache import NodeCache, Strategy
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmError
from syncer.slurm.metrics_hint import HintReader, MetricsReader, SlurmMetricsError
from syncer.slurm.metrics_jobs import job_counts
from syncer.slurm.metrics_locate import LocatedMetricsReader
from syncer.slurm.metrics_scheduler import PATH as SCHEDULER_PATH
from syncer.slurm.metrics_scheduler import scheduler_stats

log = structlog.get_logger("syncer.app")
# the hint reads slurmctld every poll; older than this (hint failing or slow) the exporter asks slurmrestd
JOB_COUNTS_MAX_AGE_S = 10.0
HINT_FIRST_S = 10.0  # the first job poll waits this long at most for slurmctld's metrics to answer or fail
C = TypeVar("C")
METRICS = "slurmctld_metrics"  # the exporter's figures came from slurmctld, not slurmrestd


def hint_reader(slurm: SlurmClient, url: str, port: int) -> HintReader | None:
    """--slurm-metrics-url: auto (found from slurmrestd's ping), off (or empty), or the URL given."""
    if url == "auto":
        return LocatedMetricsReader(slurm, port)
    return MetricsReader(url) if url not in ("off", "") else None


@dataclass(frozen=True)
class ServiceConfig:
    """What the service runs with. Defaults of options come from the option table (settings.OPTIONS),
    the one place each is written; the rest are internal tunables with their default here."""

    # each registered controller's options by its name (syncer/controllers/__init__.py); one not named
    # runs with its registration's defaults
    controllers: Mapping[str, Any] = field(default_factory=dict)
    owner_prefix: str = default("owner_prefix")  # drain reasons the syncer writes start with it
    slurm_poll_interval_s: float = default("slurm_poll_interval")
    slurm_probe_interval_s: float = default("slurm_probe_interval")
    slurm_poll_strategy: Strategy = default("slurm_poll_strategy")  # noqa: RUF009 - a str, read once
    slurm_stale_after_s: float = default("slurm_stale_after")
    slurm_metrics_url: str = default("slurm_metrics_url")
    slurm_metrics_port: int = default("slurm_metrics_port")
    slurm_metrics_interval_s: float = default("slurm_metrics_interval")
    slurm_metrics_floor_s: float = default("slurm_metrics_floor")
    slurm_metrics_duty: float = default("slurm_metrics_duty")
    slurm_metrics_lists_in_flight: int = default("slurm_metrics_lists_in_flight")
    namespace: str = default("namespace")  # pods' namespace; "" = all
    bind_by_node_name: bool = default("bind_by_node_name")
    node_name_labels: tuple[str, ...] = default("node_name_label")
    pod_selector: str = default("pod_selector")
    workers: int = default("workers")
    dry_run: bool = default("dry_run")
    leader_election: bool = default("leader_election")
    lease_namespace: str = "default"  # settings resolve an empty --lease-namespace to $POD_NAMESPACE or this
    lease_name: str = Keys.LEASE_NAME
    # this release's cluster identity (syncer/model/cluster.py): settings resolve an empty --cluster-name to
    # the lease name, as here
    cluster_name: str = Keys.LEASE_NAME
    adopt_unlabelled: bool = default("adopt_unlabelled")
    identity: str = field(default_factory=socket.gethostname)
    lease_duration_s: float = default("lease_duration")
    renew_deadline_s: float = default("renew_deadline")
    retry_period_s: float = default("retry_period")
    listen_host: str = default("listen_address")[0]
    listen_port: int | None = default("listen_address")[1]  # None: no HTTP server
    resync_s: float = 60.0  # full resync of every controller (level-triggered safety net)
    jobs_poll_interval_s: float = default("jobs_poll_interval")  # jobs and scheduler statistics
    backoff: Backoff = field(default_factory=Backoff)  # retries of a failed reconcile, every controller

    def replace(self, **changes: Any) -> ServiceConfig:
        """A copy with these changes: a field by its name, a registered controller's options by the
        controller's (`nodeset=NodeSetOptions(requeue_s=0.5)`)."""
        names = {r.name for r in registrations()}
        options = {key: value for key, value in changes.items() if key in names}
        own = {key: value for key, value in changes.items() if key not in names}
        return dataclasses.replace(self, controllers={**self.controllers, **options}, **own)

    def options(self, name: str) -> Any:
        """The options of the registered controller `name`: as given, else its registration's defaults."""
        if name in self.controllers:
            return self.controllers[name]
        return next(r.defaults for r in registrations() if r.name == name)


class _Running(Generic[C]):
    """The running controller of this name, as its own type (one line a controller in SyncerService)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, service: SyncerService, owner: type[SyncerService]) -> C:
        return cast(C, service.controller(self.name))


class SyncerService:
    def __init__(self, slurm: SlurmClient, kube: KubeClient, config: ServiceConfig) -> None:
        self.config = config
        self.slurm_wait_cause = ""  # why start() still waits for slurmrestd ("" once it answered)
        self.manager = Manager()  # every loop of this process, supervised together
        # closed last (the exit stack unwinds in reverse): clients outlive everything that uses them,
        # and stop() closes them even when start() never ran or failed half-way
        self.manager.on_close(kube.close)
        self.manager.on_close(slurm.close)
        self.slurm = slurm
        self.kube = kube
        self.gate = WriteGate(dry_run=config.dry_run, always_leader=not config.leader_election)
        self.slurm_cache = self._slurm_cache()
        self.kube_cache = KubeCache(
            kube,
            namespace=config.namespace,
            bind_by_node_name=config.bind_by_node_name,
            names=SlurmNameRule(config.node_name_labels),
            pod_selector=config.pod_selector,
            cluster=config.cluster_name,
        )
        # one registry: each controller registers its own reconcile metrics in it
        self.registry = CollectorRegistry(auto_describe=True)
        self.writer = KubeWriter(kube, self.gate)
        self.events = EventRecorder(
            kube, self.gate, node_event_namespace=config.lease_namespace, summary_ref=self._lease_ref()
        )
        self.context = self._context()
        # the PrologSlurmctld's question: may this job on powered-up nodes start now (issue 47)
        self.job_readiness = JobReadiness(self.slurm_cache, self.kube_cache)
        self.elector = self._elector()
        # every registered controller its options turn on, each with its runner (watches, leadership)
        self.controllers: list[Controller] = [
            controller
            for registration in registrations()
            if (controller := registration.build(self.context, config.options(registration.name))) is not None
        ]
        self.runners: list[ControllerRunner] = [self.context.runner(c) for c in self.controllers]
        self.job_counts: dict[tuple[str, str], int] = {}
        self.job_counts_source = ""  # "slurmctld_metrics" (the hint's body) or "slurmrestd" (GET /jobs)
        self.diag: dict[str, object] = {}
        self.metrics = SyncerMetrics(self, self.registry)
        self.context.actions.subscribe(self.metrics.on_action)
        self._runner: web.AppRunner | None = None
        self.http_port: int | None = None
        self._loop_heartbeat = time.monotonic()

    def _slurm_cache(self) -> NodeCache:
        config = self.config
        cache = NodeCache(
            self.slurm,
            poll_interval_s=config.slurm_poll_interval_s,
            probe_interval_s=config.slurm_probe_interval_s,
            strategy=config.slurm_poll_strategy,
            stale_after_s=config.slurm_stale_after_s,
            hint=hint_reader(self.slurm, config.slurm_metrics_url, config.slurm_metrics_port),
            hint_interval_s=config.slurm_metrics_interval_s,
            hint_floor_s=config.slurm_metrics_floor_s,
            hint_duty=config.slurm_metrics_duty,
            lists_in_flight=config.slurm_metrics_lists_in_flight,
        )
        if cache.hint is not None:
            self.manager.on_close(cache.hint.close)
        return cache

    def _context(self) -> ControllerContext:
        """What every controller is built from, once."""
        config = self.config
        return ControllerContext(
            slurm=self.slurm, kube=self.kube, slurm_cache=self.slurm_cache, kube_cache=self.kube_cache,
            gate=self.gate, writer=self.writer, events=self.events,
            slurm_writer=SlurmWriter(self.slurm, self.slurm_cache, self.gate),
            owner_prefix=config.owner_prefix, owner=f"{config.lease_namespace}/{config.lease_name}",
            cluster=config.cluster_name, adopt_unlabelled=config.adopt_unlabelled,
            workers=config.workers,
            resync_s=config.resync_s, backoff=config.backoff, metrics=ReconcileMetrics(self.registry),
        )  # fmt: skip

    def _elector(self) -> LeaderElector | None:
        config = self.config
        if not config.leader_election:
            return None
        return LeaderElector(
            self.kube,
            self.gate,
            namespace=config.lease_namespace,
            name=config.lease_name,
            identity=config.identity,
            lease_duration_s=config.lease_duration_s,
            renew_deadline_s=config.renew_deadline_s,
            retry_period_s=config.retry_period_s,
            on_reset=self._reset_valve,
        )

    def controller(self, name: str) -> Controller | None:
        """The running controller `name`, if its options turned it on."""
        return next((c for c in self.controllers if c.name == name), None)

    # the running controllers, typed (None where its options turned it off; sync is always registered and
    # always on: the safety valve and readiness are its)
    engine = _Running[SyncController]("sync")
    attributes = _Running[AttributeController | None]("attributes")
    nodesets = _Running[NodeSetController | None]("nodeset")
    maintenance = _Running[MaintenanceController]("maintenance")
    partitions = _Running[PartitionController | None]("partitions")
    scheduler = _Running[SchedulerController | None]("scheduler")

    def _waiting_for_slurm(self, why: str) -> None:
        self.slurm_wait_cause = why

    async def start(self) -> None:
        """Serves /healthz and /readyz, waits until slurmrestd answers (not ready meanwhile, saying why),
        then starts every loop under the Manager; returns once they run."""
        manager = self.manager
        if self.config.listen_port is not None:
            await self._serve_http()
        version = await connect_slurm(self.slurm, waiting=self._waiting_for_slurm)
        log.info(
            "slurm connected",
            url=self.slurm.url,
            api_version=version.name,
            release=self.slurm.release or None,
        )
        manager.on_failure(self.gate.halt)  # not one write after a failure, before anything else runs
        for name, loop in self.tasks():
            manager.add(name, loop)
        manager.on_close(self.events.flush)  # the last storm's summary is not lost on shutdown
        self._loop_heartbeat = time.monotonic()  # however long the wait for slurmrestd was
        await manager.start()

    def tasks(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        """Every loop the Manager runs for this service, by name, in order (docs/architecture.md)."""
        tasks: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("informer-pods", self.kube_cache.pods.run),
            ("informer-nodes", self.kube_cache.nodes.run),
            ("slurm-cache", self.slurm_cache.run),
        ]
        if self.elector is not None:
            tasks.append(("leader-election", self.elector.run))
        for runner in self.runners:  # each controller run by its runner: the one run loop, resync included
            tasks.append((runner.name, runner.serve))
            tasks += runner.controller.loops().items()
        tasks += [
            ("event-summaries", self.events.run_folding),
            ("heartbeat", self._heartbeat),
            ("jobs-poller", self._poll_jobs),
        ]
        return tasks

    async def stop(self) -> None:
        """Cancels every loop, then releases resources in reverse order; safe to call twice."""
        await self.manager.close()

    async def wait(self) -> TaskExited | None:
        """Until the loops end: the background task that failed first, or None once stopped."""
        return await self.manager.wait()

    async def __aenter__(self) -> SyncerService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            ready, reasons = self.readiness()
            if ready:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"syncer not ready after {timeout_s} s: {'; '.join(reasons)}")
            await asyncio.sleep(0.05)

    async def _reset_valve(self, requested: str) -> None:
        """An operator's reset, taken from the Lease by the leader: held drains go through, audited."""
        held = sorted(self.engine.valve.pending)
        was_open = self.engine.valve.is_open
        self.engine.reset_valve()
        log.warning(
            "safety valve reset by an operator", requested=requested, was_open=was_open, released=len(held)
        )
        ref = self._lease_ref()
        message = (
            f"safety valve reset on request ({Keys.VALVE_RESET}={requested!r}): "
            f"{len(held)} held drain(s) let through"
            + (f" ({', '.join(held[:10])}{' ...' if len(held) > 10 else ''})" if held else "")
        )
        await self.events.record(ref, "Normal", "SafetyValveReset", message)

    def _lease_ref(self) -> ObjectRef:
        """The syncer's own object: the leader Lease (Events about the syncer, storm summaries)."""
        return ObjectRef(
            "Lease", self.config.lease_name, self.config.lease_namespace, "", "coordination.k8s.io/v1"
        )

    # -- health -----------------------------------------------------------------------------------
    def readiness(self) -> tuple[bool, list[str]]:
        reasons = []
        if self.manager.failure is not None:
            reasons.append(f"stopping: {self.manager.failure}")
        if not self.kube_cache.synced:
            reasons.append("kubernetes caches not synced yet")
        if not self.slurm_cache.synced:
            cause = self.slurm_cache.cause or self.slurm_wait_cause or "connecting"
            reasons.append(f"no answer from slurmrestd yet ({cause})")
        elif self.slurm_cache.stale:
            reasons.append(
                f"slurm data stale: last good answer {self.slurm_cache.age_s:.0f} s ago "
                f"({self.slurm_cache.cause or 'no error recorded'})"
            )
        for controller in self.controllers:
            reasons += controller.not_ready()
        return not reasons, reasons

    async def _heartbeat(self) -> None:
        while True:
            self._loop_heartbeat = time.monotonic()
            await asyncio.sleep(1.0)

    async def _poll_jobs(self) -> None:
        """Jobs by partition and state plus scheduler statistics, at their own modest interval: from the
        slurmctld metrics the hint reads where it works, from slurmrestd where not. The first poll waits for
        the hint's first answer (or failure), at most HINT_FIRST_S: a job list read only because the hint was
        still locating slurmctld costs slurmrestd the whole queue (100,000 held jobs: past 15 GB)."""
        await self._hint_first()
        while True:
            try:
                body = self.slurm_cache.hint_body(max_age_s=JOB_COUNTS_MAX_AGE_S)  # None: no working hint
                counts = self._job_counts_from_metrics(body) if body is not None else None
                self.job_counts = counts if counts is not None else await self._job_counts_from_slurmrestd()
                self.context.jobs.read(self.job_counts)  # the controllers that watch them are told
                self._job_counts_read_from(METRICS if counts is not None else "slurmrestd")
                diag = await self._scheduler_stats_from_metrics() if body is not None else None
                self.diag = diag if diag is not None else await self.slurm.diag()
                self._exporter_read("scheduler", METRICS if diag is not None else "slurmrestd")
            except SlurmError as exc:
                log.warning("jobs and scheduler statistics not refreshed", error=str(exc))
            await asyncio.sleep(self.config.jobs_poll_interval_s)

    async def _hint_first(self) -> None:
        cache = self.slurm_cache
        deadline = time.monotonic() + HINT_FIRST_S
        while cache.hint is not None and time.monotonic() < deadline:
            if cache.stats.hint_failing or cache.hint_body(max_age_s=JOB_COUNTS_MAX_AGE_S) is not None:
                return
            await asyncio.sleep(0.1)  # the hint's own poll answers within its timeout: polled, not waited on

    def _exporter_read(self, what: str, source: str) -> None:
        self.metrics.exporter_reads.labels(what, source).inc()

    def _job_counts_read_from(self, source: str) -> None:
        """Counts the read by its source, and says so in the log when the source changes."""
        if source != self.job_counts_source:
            log.info("job_counts_source", source=source, previous=self.job_counts_source or None)
            self.job_counts_source = source
        self._exporter_read("jobs", source)

    @staticmethod
    def _job_counts_from_metrics(body: str) -> dict[tuple[str, str], int] | None:
        """From the slurmctld metrics the node cache's hint read lately; None when they cannot be read."""
        try:
            return job_counts(body)
        except SlurmMetricsError as exc:
            log.warning("job_counts_unreadable", error=str(exc), fallback="GET /jobs from slurmrestd")
            return None

    async def _scheduler_stats_from_metrics(self) -> dict[str, object] | None:
        """slurmctld's /metrics/scheduler from the slurmctld the hint reads; None: ask slurmrestd."""
        hint = self.slurm_cache.hint
        if hint is None:
            return None
        try:
            return scheduler_stats(await hint.read_page(SCHEDULER_PATH))
        except SlurmMetricsError as exc:
            log.warning("scheduler_stats_unreadable", error=str(exc), fallback="GET /diag from slurmrestd")
            return None

    async def _job_counts_from_slurmrestd(self) -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = {}
        for job in await self.slurm.list_jobs():
            for state in job.states or {"UNKNOWN"}:
                key = (job.partition or "", state)
                counts[key] = counts.get(key, 0) + 1
        return counts

    async def _serve_http(self) -> None:
        async def healthz(_request: web.Request) -> web.Response:
            if self.manager.failure is not None:
                return web.Response(status=503, text=f"{self.manager.failure}\n")
            lag = time.monotonic() - self._loop_heartbeat
            if lag > 10 and self.manager.running:  # the heartbeat loop runs once start() waits no more
                return web.Response(status=503, text=f"event loop stalled for {lag:.0f} s\n")
            return web.Response(text="ok\n")

        async def readyz(_request: web.Request) -> web.Response:
            ready, reasons = self.readiness()
            if ready:
                role = "leader" if self.gate.leading else "follower"
                return web.Response(text=f"ok ({role}{', dry-run' if self.config.dry_run else ''})\n")
            return web.Response(status=503, text="not ready: " + "; ".join(reasons) + "\n")

        async def metrics(_request: web.Request) -> web.Response:
            body = await self.metrics.exposition()
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        app.router.add_get(PROLOG_PATH, self.job_readiness.handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        self.manager.on_close(self._runner.cleanup)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.config.listen_host, self.config.listen_port or 0))
        await web.SockSite(self._runner, sock).start()
        self.http_port = sock.getsockname()[1]
        log.info(
            f"serving /metrics, /healthz, /readyz and {PROLOG_PATH}",
            address=f"{self.config.listen_host}:{self.http_port}",
        )
