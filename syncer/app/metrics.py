"""Prometheus metrics: Slurm as the caches see it (no extra polling of slurmctld) and the syncer's
own health. Gauges are read from live state at scrape time; latencies and actions are observed as
they happen. Cardinality: per-node series (`slurm_node_info`) are one per Slurm node; everything
else is bounded by partitions, states, endpoints and fixed label sets (docs/operations.md).

/metrics is written by `SyncerMetrics.exposition()`: the node cache's figures first, a chunk of nodes per
event-loop turn, each node's `slurm_node_info` line kept while its object is (metrics_nodes.py), then the
text a few families per turn, as prometheus_client's `generate_latest` writes it (issue 47)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Histogram, PlatformCollector, ProcessCollector
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from syncer import __version__
from syncer.app.job_ready import JobReadiness
from syncer.app.metric_families import counter, gauge
from syncer.app.metrics_nodes import NodeExposition, NodeFigures, NodeInfo, exposition
from syncer.control.gate import WriteGate
from syncer.controllers.attributes.controller import AttributeController, AttributeStats
from syncer.controllers.maintenance.controller import MaintenanceController
from syncer.controllers.nodeset.controller import NodeSetController
from syncer.controllers.nodeset.power_actions import PowerActions
from syncer.controllers.partitions.controller import PartitionController
from syncer.controllers.scheduler.controller import SchedulerController
from syncer.controllers.sync.controller import SyncController
from syncer.kube.cache import KubeCache
from syncer.kube.client import KubeClient
from syncer.kube.events import EventRecorder
from syncer.model.slurm import BASE_STATES
from syncer.slurm.cache import NodeCache
from syncer.slurm.client import SlurmClient


class Observed(Protocol):
    """What the exporter reads at scrape time (the running service provides it; no import of it)."""

    slurm: SlurmClient
    slurm_cache: NodeCache
    kube: KubeClient
    kube_cache: KubeCache
    gate: WriteGate
    events: EventRecorder
    job_counts: dict[tuple[str, str], int]
    diag: dict[str, object]
    job_readiness: JobReadiness

    @property
    def engine(self) -> SyncController: ...

    @property
    def nodesets(self) -> NodeSetController | None: ...

    @property
    def maintenance(self) -> MaintenanceController: ...

    @property
    def attributes(self) -> AttributeController | None: ...

    @property
    def partitions(self) -> PartitionController | None: ...

    @property
    def scheduler(self) -> SchedulerController | None: ...

    def readiness(self) -> tuple[bool, list[str]]: ...


LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
ALWAYS_EXPORTED_FLAGS = ("DRAIN", "NOT_RESPONDING", "COMPLETING", "FAIL")
# diag fields exported as gauges: name in diag -> (metric suffix, unit divisor, help)
DIAG_FIELDS: dict[str, tuple[str, float, str]] = {
    "server_thread_count": ("server_threads", 1, "slurmctld server threads in use"),
    "agent_queue_size": ("agent_queue_size", 1, "RPCs queued for the slurmctld agent"),
    "dbd_agent_queue_size": ("dbd_agent_queue_size", 1, "messages queued for slurmdbd"),
    "schedule_cycle_last": ("schedule_cycle_last_seconds", 1e6, "duration of the last main scheduling cycle"),
    "schedule_cycle_mean": ("schedule_cycle_mean_seconds", 1e6, "mean main scheduling cycle"),
    "schedule_queue_length": ("schedule_queue_length", 1, "jobs in the main scheduler queue"),
    "bf_cycle_last": ("backfill_cycle_last_seconds", 1e6, "duration of the last backfill cycle"),
    "bf_queue_len": ("backfill_queue_length", 1, "jobs in the backfill queue"),
    "jobs_pending": ("jobs_pending", 1, "pending jobs (slurmctld statistics)"),
    "jobs_running": ("jobs_running", 1, "running jobs (slurmctld statistics)"),
}


class SyncerMetrics:
    """Owns the registry; the engine reports actions through `on_action`."""

    def __init__(self, service: Observed, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.latency = Histogram(
            "slurm_syncer_propagation_latency_seconds",
            "From observing a change on one side to the write on the other side being acknowledged.",
            ["direction"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.actions = PromCounter(
            "slurm_syncer_actions",
            "Actions by kind (drain, undrain, annotate, cordon, uncordon, reservation_create, "
            "reservation_update, reservation_delete, maintenance_window, maintenance_condition), direction "
            "and result.",
            ["kind", "direction", "result"],
            registry=self.registry,
        )
        self.exporter_reads = PromCounter(
            "slurm_syncer_exporter_reads",
            "Refreshes of slurm_jobs (what=jobs) and slurm_scheduler_* (what=scheduler) by source: "
            "slurmctld_metrics (its /metrics pages, no slurmrestd request) or slurmrestd (GET /jobs, /diag).",
            ["what", "source"],
            registry=self.registry,
        )
        for direction in ("k8s_to_slurm", "slurm_to_k8s"):
            self.latency.labels(direction)  # present from the start, so dashboards never see gaps
        self._service = service
        self._state = _StateCollector(service)
        self.registry.register(self._state)
        # process_* (CPU, RSS, open fds, start time) and python_info, as the default registry has them
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    async def exposition(self) -> bytes:
        """The registry in Prometheus' text format, as generate_latest() writes it, without holding the
        event loop: the node figures are worked out a chunk of nodes at a time first (the node cache as the
        scrape began), then the text is written a few families at a time (issue 47)."""
        pinned = _PINNED.set(await self._state.nodes.refresh(self._service.slurm_cache.nodes))
        try:
            return await exposition(self.registry)
        finally:
            _PINNED.reset(pinned)

    def on_action(self, kind: str, direction: str, _slurm_node: str, details: dict[str, Any]) -> None:
        result = str(details.get("result", "ok"))
        self.actions.labels(kind, direction, result).inc()
        latency = details.get("latency_s")
        if isinstance(latency, (int, float)):
            self.latency.labels(direction).observe(float(latency))


_Family = TypeVar("_Family", GaugeMetricFamily, CounterMetricFamily)


def _rows(family: _Family, rows: Iterable[tuple[Sequence[str], float]]) -> _Family:
    """`family` with one sample per (label values, value) row, in the rows' order."""
    for labels, value in rows:
        family.add_metric(list(labels), value)
    return family


def _keyed(counts: Mapping[str, float]) -> Iterator[tuple[tuple[str], float]]:
    """One row per key of `counts`, labelled by the key, in key order."""
    return _labelled(dict(sorted(counts.items())))


def _labelled(counts: Mapping[str, float]) -> Iterator[tuple[tuple[str], float]]:
    """One row per key of `counts`, labelled by the key, in the mapping's order (a fixed label set)."""
    return (((key,), value) for key, value in counts.items())


def _one(value: float) -> tuple[tuple[tuple[()], float]]:
    """The one row of a family without labels."""
    return (((), value),)


# the node figures SyncerMetrics.exposition() worked out, while it writes (its own: scrapes run side by side)
_PINNED: ContextVar[NodeFigures | None] = ContextVar("pinned_node_figures", default=None)


class _StateCollector(Collector):
    def __init__(self, service: Observed) -> None:
        self.service = service
        self.nodes = NodeExposition()

    def collect(self) -> Iterator[Metric]:
        yield from self._slurm()
        yield from self._syncer()
        yield from _prolog(self.service.job_readiness)

    # -- Slurm, from the caches --------------------------------------------------------------------
    def _slurm(self) -> Iterator[Metric]:
        service = self.service
        # worked out beside the loop by exposition(); anything else reading the registry, in one go
        figures = _PINNED.get() or self.nodes.figures(service.slurm_cache.nodes)
        by_state = figures.by_state
        states = gauge("slurm_nodes")
        for state in sorted(BASE_STATES):
            states.add_metric([state.lower()], by_state.get(state, 0))
        yield states
        flags = figures.flags
        flag_gauge = gauge("slurm_node_flags")
        # the usual flags are exported at 0 too: an alert adding `flag="drain"` to the DOWN count needs it
        for flag in sorted({*flags, *ALWAYS_EXPORTED_FLAGS}):
            flag_gauge.add_metric([flag.lower()], flags.get(flag, 0))
        yield flag_gauge
        yield NodeInfo(figures)
        totals = figures.totals
        names = (
            "slurm_partition_nodes",
            "slurm_partition_cpus",
            "slurm_partition_cpus_allocated",
            "slurm_partition_memory_bytes",
            "slurm_partition_memory_allocated_bytes",
            "slurm_partition_gpus",
            "slurm_partition_gpus_allocated",
        )  # the columns of `totals`' rows
        for index, name in enumerate(names):
            family = gauge(name)
            for partition, row in sorted(totals.items()):
                family.add_metric([partition], row[index])
            yield family
        by_partition = figures.by_partition
        partition_states = gauge("slurm_partition_node_states")
        for partition in sorted(totals):
            for state in sorted(BASE_STATES):  # every state, zeros too: a panel's lines stay whole
                partition_states.add_metric(
                    [partition, state.lower()], by_partition.get((partition, state), 0)
                )
        yield partition_states
        jobs = gauge("slurm_jobs")
        for (partition, state), count in sorted(service.job_counts.items()):
            jobs.add_metric([partition, state.lower()], count)
        yield jobs
        for key, (suffix, divisor, doc) in DIAG_FIELDS.items():
            value = service.diag.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                family = GaugeMetricFamily(f"slurm_scheduler_{suffix}", doc.capitalize() + ".")
                family.add_metric([], value / divisor)
                yield family

    # -- the syncer ------------------------------------------------------------------------------
    def _syncer(self) -> Iterator[Metric]:
        service = self.service
        build = gauge("slurm_syncer_build_info")
        build.add_metric([__version__, service.slurm.version.name if service.slurm.version else ""], 1)
        yield build
        yield from self._slurm_requests()
        yield from self._slurm_cache()
        yield from self._kube()
        yield from self._engine()
        yield from self._slurm_updates()
        yield from self._bindings()
        yield from self._nodesets()
        yield from self._maintenance()
        yield from self._attributes()
        yield from self._partitions()
        yield from self._scheduler()

    def _slurm_requests(self) -> Iterator[Metric]:
        """What the Slurm client asked slurmrestd: requests, seconds and bytes by endpoint."""
        stats = self.service.slurm.stats
        yield _rows(
            counter("slurm_syncer_slurm_requests"),
            (
                ((endpoint, str(status)), count)
                for (endpoint, status), count in sorted(stats.requests.items())
            ),
        )
        for name, totals in (
            ("slurm_syncer_slurm_request_seconds", stats.seconds),
            ("slurm_syncer_slurm_response_bytes", stats.body_bytes),
        ):
            yield _rows(counter(name), _keyed(totals))

    def _slurm_cache(self) -> Iterator[Metric]:
        """The node cache: its polls, read paths and slurmctld hints."""
        service = self.service
        cache = service.slurm_cache.stats
        fetches = {"not_modified": cache.not_modified, "full": cache.full_fetches, "error": cache.errors}
        yield _rows(counter("slurm_syncer_slurm_fetches"), _labelled(fetches))
        paths = sorted(cache.reads)
        yield _rows(
            counter("slurm_syncer_slurm_cache_reads"),
            (((path,), cache.reads[path]) for path in paths),
        )
        yield _rows(
            counter("slurm_syncer_slurm_cache_read_bytes"),
            (((path,), cache.read_bytes[path]) for path in paths),
        )
        hints = {
            "changed": cache.hint_changed, "unchanged": cache.hint_unchanged, "floor": cache.hint_floor,
            "trailing": cache.hint_trailing, "error": cache.hint_errors,
        }  # fmt: skip
        yield _rows(counter("slurm_syncer_slurm_metrics_hint"), _labelled(hints))
        yield from self._slurm_cache_state()

    def _slurm_cache_state(self) -> Iterator[Metric]:
        """The node cache's own state: whether the hint fails, its early lists and waits, what it holds."""
        service = self.service
        cache = service.slurm_cache.stats
        failing = gauge("slurm_syncer_slurm_metrics_hint_failing")
        yield _rows(failing, (((), int(cache.hint_failing)),))
        early = counter("slurm_syncer_slurm_early_lists")
        yield _rows(early, (((), cache.early_lists),))
        waits = counter("slurm_syncer_slurm_own_work_waits")
        yield _rows(waits, (((), cache.own_work_waits),))
        snapshot = gauge("slurm_syncer_slurm_snapshot_bytes")
        yield _rows(snapshot, (((), cache.last_snapshot_bytes),))
        expiry = service.slurm.token.expiry()
        if expiry is not None:  # no series without a token or an `exp` claim: nothing to count down
            token = gauge("slurm_syncer_slurm_token_expiry_timestamp_seconds")
            yield _rows(token, (((expiry[1],), expiry[0]),))
        age = gauge("slurm_syncer_slurm_snapshot_age_seconds")
        yield _rows(age, (((), min(service.slurm_cache.age_s, 1e9)),))

    def _kube(self) -> Iterator[Metric]:
        """The Kubernetes side: the pod and Node informers' streams, the client's requests and waits."""
        service = self.service
        informers = (("pods", service.kube_cache.pods), ("nodes", service.kube_cache.nodes))
        for name, attr in (
            ("slurm_syncer_kube_watch_restarts", "watch_restarts"),
            ("slurm_syncer_kube_relists", "lists"),
            ("slurm_syncer_kube_watch_errors", "errors"),
            ("slurm_syncer_kube_watch_events", "events"),
        ):
            yield _rows(counter(name), (((resource,), getattr(i.stats, attr)) for resource, i in informers))
        kube = service.kube
        kube_requests = counter("slurm_syncer_kube_requests")
        yield _rows(kube_requests, _labelled({"all": kube.requests_total, "error": kube.errors_total}))
        kube_errors = counter("slurm_syncer_kube_request_errors")
        yield _rows(
            kube_errors, (((m, str(code)), count) for (m, code), count in sorted(kube.errors.items()))
        )
        throttled = counter("slurm_syncer_kube_throttled_seconds")
        yield _rows(throttled, (((), kube.limiter.waited_s),))

    def _engine(self) -> Iterator[Metric]:
        """The sync engine: its queue, the valve, drift, leadership and readiness."""
        service = self.service
        queue = service.engine.queue
        values = {
            "slurm_syncer_queue_depth": queue.depth,
            "slurm_syncer_queue_in_flight": queue.in_flight,
            "slurm_syncer_leader": int(service.gate.leading),
            "slurm_syncer_safety_valve_open": int(service.engine.valve.is_open),
            "slurm_syncer_drift_nodes": len(service.engine.stats.drifted),
            "slurm_syncer_conflicting_nodes": len(service.engine.stats.conflicts),
            "slurm_syncer_missing_slurm_nodes": len(service.engine.stats.missing),
            "slurm_syncer_ready": int(service.readiness()[0]),
            "slurm_syncer_dry_run": int(service.gate.dry_run),
        }
        for name, value in values.items():
            yield _rows(gauge(name), _one(value))
        retries = counter("slurm_syncer_queue_retries")
        yield _rows(retries, (((), service.engine.runner.retries_total),))
        refusals = counter("slurm_syncer_safety_valve_refusals")
        yield _rows(refusals, (((), service.engine.stats.valve_refusals),))

    def _bindings(self) -> Iterator[Metric]:
        """Slurm nodes bound to pods or Nodes, those no one claims, and the Events written."""
        service = self.service
        bound_pod = len(service.kube_cache.pods_by_slurm_node)
        bound_names = service.kube_cache.slurm_names()
        bound = gauge("slurm_syncer_bound_nodes")
        yield _rows(bound, _labelled({"pod": bound_pod, "node": max(0, len(bound_names) - bound_pod)}))
        unbound = gauge("slurm_syncer_unbound_nodes")
        yield _rows(unbound, (((), len(set(service.slurm_cache.nodes) - bound_names)),))
        recorder = service.events
        events = {
            "created": recorder.created, "aggregated": recorder.aggregated, "dropped": recorder.dropped,
            "folded": recorder.folded,
        }  # fmt: skip
        yield _rows(counter("slurm_syncer_events"), _labelled(events))

    def _partitions(self) -> Iterator[Metric]:
        """SlurmPartition CRs and their Ready condition as the leader's last reconcile left them (a
        standby does not reconcile: its figure would be stale, so it exports none)."""
        controller, service = self.service.partitions, self.service
        if controller is None:
            return
        ready = gauge("slurm_syncer_partition_ready")
        state = gauge("slurm_syncer_partition_state")
        held = gauge("slurm_syncer_partition_held")
        slinky = gauge("slurm_syncer_slinky_partition_drift")
        if service.gate.leading:
            for name, outcome in sorted(controller.outcomes.items()):
                ready.add_metric([name, outcome.partition, outcome.reason], int(outcome.ready))
            for name, slurm_state in sorted(controller.slurm_states.items()):
                state.add_metric([name, controller.outcomes[name].partition, slurm_state], 1)
            for name, kept in sorted(controller.held.items()):
                held.add_metric([name, controller.outcomes[name].partition, kept], 1)
            drift = controller.frozen.drift if controller.frozen is not None else {}
            for (partition, where), value in sorted(drift.items()):
                slinky.add_metric([partition, where], value)
        yield ready
        yield state
        yield held
        yield slinky

    def _scheduler(self) -> Iterator[Metric]:
        """The one-pool scheduler (docs/scheduler.md): its pods by state, pending ones by why, its Slurm jobs,
        tear-downs, errors and held nodes. Absent while it is off; a standby exports no pod figures (it
        plans nothing: its view would be stale)."""
        controller = self.service.scheduler
        if controller is None:
            return
        pods = gauge("slurm_syncer_scheduler_pods")
        pending = gauge("slurm_syncer_scheduler_pending_pods")
        oldest = gauge("slurm_syncer_scheduler_pending_oldest_seconds")
        if self.service.gate.leading:
            states = controller.pod_states()
            counts = Counter(state.state for state in states)
            for state in ("pending", "bound", "terminating"):
                pods.add_metric([state], counts.get(state, 0))
            by_reason = Counter((s.reason, s.slurm_reason) for s in states if s.state == "pending")
            for (reason, slurm_reason), count in sorted(by_reason.items()):
                pending.add_metric([reason, slurm_reason], count)
            ages: dict[str, float] = {}
            for s in states:
                if s.state == "pending":
                    ages[s.reason] = max(ages.get(s.reason, 0.0), s.age_s)
            for reason, age in sorted(ages.items()):
                oldest.add_metric([reason], age)
        yield pods
        yield pending
        yield oldest
        stats = controller.stats
        jobs = counter("slurm_syncer_scheduler_jobs")
        yield _rows(jobs, _keyed(stats.jobs))
        errors = counter("slurm_syncer_scheduler_job_errors")
        yield _rows(errors, _keyed(stats.errors))
        teardowns = counter("slurm_syncer_scheduler_teardowns")
        yield _rows(teardowns, _keyed(stats.teardowns))
        held = gauge("slurm_syncer_scheduler_held_nodes")
        yield _rows(held, _one(len(controller.holds)))
        bind_ages = controller.unshown_binds()
        unshown = gauge("slurm_syncer_scheduler_unshown_binds")
        yield _rows(unshown, _one(len(bind_ages)))
        oldest_bind = gauge("slurm_syncer_scheduler_unshown_bind_oldest_seconds")
        yield _rows(oldest_bind, _one(max(bind_ages, default=0.0)))
        yield from controller.bind_latency.collect()

    def _attributes(self) -> Iterator[Metric]:
        """Node labels carried to Slurm as features and topology (issue 29)."""
        controller = self.service.attributes
        stats = controller.stats if controller is not None else AttributeStats()  # zeros: panels stay whole
        writes = counter("slurm_syncer_node_attribute_writes")
        kinds, results = ("features", "topology"), ("ok", "error", "refused", "dry_run")
        yield _rows(writes, (((k, r), stats.writes[k, r]) for k in kinds for r in results))
        refused = counter("slurm_syncer_feature_labels_refused")
        yield _rows(refused, _one(stats.refused_labels))
        unsupported = gauge("slurm_syncer_topology_unsupported")
        yield _rows(unsupported, _one(int(stats.topology_unsupported)))

    def _slurm_updates(self) -> Iterator[Metric]:
        """Drains and undrains sent to Slurm: how well identical ones were batched (issue 18)."""
        bulk = self.service.engine.context.slurm_writer.bulk.stats
        requests = counter("slurm_syncer_slurm_update_requests")
        yield _rows(
            requests, _labelled({"single": bulk.requests - bulk.bulk_requests, "bulk": bulk.bulk_requests})
        )
        nodes = counter("slurm_syncer_slurm_updated_nodes")
        yield _rows(nodes, _one(bulk.nodes))
        partial = counter("slurm_syncer_slurm_bulk_refused")
        yield _rows(partial, _one(bulk.partial))

    def _maintenance(self) -> Iterator[Metric]:
        summary = self.service.maintenance.summary
        windows = gauge("slurm_syncer_maintenance_windows")
        counts = {
            "reserved": summary.reserved,
            "invalid": summary.invalid,
            "unsupported": summary.unsupported,
        }
        yield _rows(windows, _labelled(counts))
        yield _rows(gauge("slurm_syncer_maintenance_reservations"), _one(summary.reservations))

    def _nodesets(self) -> Iterator[Metric]:
        reconciler = self.service.nodesets
        if reconciler is None:
            return
        desired = gauge("slurm_syncer_nodeset_desired_members")
        yield _rows(desired, _keyed(reconciler.stats.desired))
        overdue = gauge("slurm_syncer_nodeset_drain_timeouts")
        yield _rows(overdue, _keyed(reconciler.stats.timed_out))
        actions = counter("slurm_syncer_nodeset_actions")
        stats = reconciler.stats
        done = {
            "pod_created": stats.pods_created, "pod_deleted": stats.pods_deleted,
            "removal_started": stats.removals_started, "slurm_node_deleted": stats.slurm_nodes_deleted,
            "ended_pod_deleted": stats.ended_pods,
        }  # fmt: skip
        yield _rows(actions, _labelled(done))
        yield from _nodeset_power(reconciler.power)


def _nodeset_power(power: PowerActions) -> Iterator[Metric]:
    """Power-managed NodeSets (spec.power): members by Slurm power state, what the syncer did, how long a
    member takes from POWERING_UP to its slurmd registered, and the zones where lost-Node power-downs wait."""
    stats = power.stats
    members = gauge("slurm_syncer_nodeset_power_members")
    by_state = sorted(stats.by_state.items())
    yield _rows(
        members, (((key, state), n) for key, counts in by_state for state, n in sorted(counts.items()))
    )
    actions = counter("slurm_syncer_nodeset_power_actions")
    done = {
        "power_up": stats.power_ups, "power_down": stats.power_downs, "failure": stats.failures,
        "declare": stats.declared, "undeclare": stats.undeclared, "held": stats.held,
    }  # fmt: skip
    yield _rows(actions, _labelled(done))
    disruption = gauge("slurm_syncer_nodeset_power_disruption")
    yield _rows(
        disruption, (((zone,), 1 if nodes.disrupted else 0) for zone, nodes in power.zones.zones().items())
    )
    held = gauge("slurm_syncer_nodeset_power_held_members")
    yield _rows(held, _keyed(power.held))
    registered = HistogramMetricFamily(
        "slurm_syncer_nodeset_power_up_seconds",
        "From creating the pod of a member Slurm powers up to Slurm showing its slurmd registered.",
    )
    registered.add_metric([], stats.register_buckets(), sum_value=stats.register_sum)
    yield registered


def _prolog(readiness: JobReadiness) -> Iterator[Metric]:
    """slurm-syncer's PrologSlurmctld (issue 47): its questions by answer, and those held now."""
    stats = readiness.stats
    answers = counter("slurm_syncer_prolog_answers")
    yield _rows(answers, _keyed(stats.answers))
    yield _rows(gauge("slurm_syncer_prolog_waiting"), _one(stats.waiting))  # fmt: skip
