"""Grafana dashboards and Prometheus alert rules, generated from code so every query is known to the
tests (a real Prometheus evaluates each one).

    python -m syncer.app.dashboards [--out deploy]   # writes grafana/*.json and prometheus/rules.yaml
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

RATE = "$__rate_interval"  # Grafana's rate window; tests substitute a fixed one
# Dashboards: the variables pick the scrape job, namespaces and releases (namespace and release are the
# labels the chart's ServiceMonitor/PodMonitor put on every series; "All" also matches a missing label).
BOARD = 'job="$job", namespace=~"$namespace", release=~"$release"'
# Alerts: every rule selects with this; the chart narrows it to its own namespace and release, so that
# absent() fires per release (docs/operations.md).
SEL = 'job="slurm-syncer"'
RELEASE = "namespace, release"  # one syncer deployment: alerts and Slurm figures are per release
AUTH_REFUSED = 'status=~"401|403|511"'  # 511: slurmrestd's answer to a bad token (24.11 and 26.05)
NOT_MINTED = 'source!="jwt_key"'  # a token minted from the key is renewed before it runs out
FAILED_WRITE = 'method!="GET", status!~"404|409"'  # 404, 409: raced another writer, retried or moot
LATENCY = "slurm_syncer_propagation_latency_seconds_bucket"
PROLOG_DEGRADED = 'outcome=~"waiting|unusable|bad"'  # none, ready and failed are answers that helped
K8S_TO_SLURM, SLURM_TO_K8S = 'direction="k8s_to_slurm"', 'direction="slurm_to_k8s"'
DRAINED, DOWN = 'flag="drain"', 'state="down"'
RUNBOOKS = "https://slurm-syncer.invalid/docs/operations.md"  # placeholder: the chart's runbookBaseUrl


@dataclass(frozen=True)
class Panel:
    title: str
    queries: tuple[tuple[str, str], ...]  # (PromQL, legend)
    kind: str = "timeseries"  # timeseries | stat
    unit: str = "short"
    description: str = ""


@dataclass(frozen=True)
class Alert:
    name: str
    signal: str  # the measured quantity: the tests check it returns data
    condition: str  # appended to the signal, e.g. "> 0"
    for_: str
    severity: str
    summary: str
    description: str
    absent: str = ""  # a selector whose absence fires the alert too (no scrape, Deployment at 0)

    @property
    def expr(self) -> str:
        if not self.signal:
            return f"absent({self.absent})"
        if self.absent:
            return f"({self.signal} {self.condition}) or absent({self.absent})"
        return f"{self.signal} {self.condition}"


def _sel(metric: str, where: str, selector: str) -> str:
    return f"{metric}{{{selector}{', ' + where if where else ''}}}"


def slurm(metric: str, by: str = "", where: str = "", of: str = "") -> str:
    """A figure every replica exports alike (Slurm's state as its caches see it, the bindings): one
    replica's figure per release (`max by`), summed over the releases shown. `of` wraps the series
    (e.g. `sum without (state) ({})`) before the replicas are folded."""
    series = _sel(metric, where, BOARD)
    if of:
        series = of.format(series)
    folded = ", ".join(dict.fromkeys([*RELEASE.split(", "), *filter(None, by.split(", "))]))
    inner = f"max by ({folded}) ({series})"
    return f"sum by ({by}) ({inner})" if by else f"sum({inner})"


def worked(metric: str, by: str = "", where: str = "") -> str:
    """A counter only the leader moves (actions, writes, Events): the standby's zeros add nothing, and a
    hand-over in the window counts each side's share once."""
    series = f"rate({_sel(metric, where, BOARD)}[{RATE}])"
    return f"sum by ({by}) ({series})" if by else f"sum({series})"


def per_replica(metric: str, by: str = "", where: str = "", counter: bool = True) -> str:
    """Each process's own load or health, one line per replica (both poll Slurm and watch Kubernetes)."""
    series = _sel(metric, where, BOARD)
    if counter:
        series = f"rate({series}[{RATE}])"
    return f"sum by (instance{', ' + by if by else ''}) ({series})"


CLUSTER = (
    Panel("Nodes by state", ((slurm("slurm_nodes", "state"), "{{state}}"),), description="Base states."),
    Panel("Nodes by flag", ((slurm("slurm_node_flags", "flag"), "{{flag}}"),)),
    Panel(
        "Drained or down share",
        (
            (
                f"({slurm('slurm_node_flags', where=DRAINED)} + {slurm('slurm_nodes', where=DOWN)})"
                f" / clamp_min({slurm('slurm_nodes', of='sum without (state) ({})')}, 1)",
                "drained or down",
            ),
        ),
        kind="stat",
        unit="percentunit",
    ),
    Panel(
        "CPU allocation by partition",
        (
            (
                f"{slurm('slurm_partition_cpus_allocated', 'partition')} / clamp_min({slurm('slurm_partition_cpus', 'partition')}, 1)",
                "{{partition}}",
            ),
        ),
        unit="percentunit",
    ),
    Panel(
        "GPUs allocated / total",
        (
            (slurm("slurm_partition_gpus_allocated", "partition"), "{{partition}} allocated"),
            (slurm("slurm_partition_gpus", "partition"), "{{partition}} total"),
        ),
    ),
    Panel(
        "Memory allocated by partition",
        ((slurm("slurm_partition_memory_allocated_bytes", "partition"), "{{partition}}"),),
        unit="bytes",
    ),
    Panel("Jobs by state", ((slurm("slurm_jobs", "state"), "{{state}}"),)),
    Panel(
        "Scheduler cycle",
        (
            (slurm("slurm_scheduler_schedule_cycle_last_seconds", "release"), "{{release}} main, last"),
            (slurm("slurm_scheduler_schedule_cycle_mean_seconds", "release"), "{{release}} main, mean"),
        ),
        unit="s",
        description="Per release: each is its own Slurm cluster.",
    ),
    Panel(
        "NodeSet members",
        (
            (slurm("slurm_syncer_nodeset_desired_members", "nodeset"), "{{nodeset}} desired"),
            (slurm("slurm_syncer_nodeset_drain_timeouts", "nodeset"), "{{nodeset}} past drainTimeout"),
        ),
    ),
    # the partitions row
    Panel(
        "Nodes by partition and state",
        ((slurm("slurm_partition_node_states", "partition, state"), "{{partition}} {{state}}"),),
        description="Base states per partition (a node in two partitions counts in each).",
    ),
    Panel(
        "Running and pending jobs by partition",
        ((slurm("slurm_jobs", "partition, state", 'state=~"running|pending"'), "{{partition}} {{state}}"),),
    ),
    Panel(
        "SlurmPartitions state in Slurm",
        (
            (
                slurm("slurm_syncer_partition_state", "cr, partition, state"),
                "{{cr}} ({{partition}}): {{state}}",
            ),
        ),
        kind="stat",
        description="Each managed partition's state as Slurm has it (UP, DOWN, DRAIN, INACTIVE; ABSENT: Slurm "
        "has no such partition): an emergency DRAIN shows here while its CR stays Ready.",
    ),
    Panel(
        "SlurmPartitions Ready",
        (
            (
                slurm("slurm_syncer_partition_ready", "cr, partition, reason"),
                "{{cr}} ({{partition}}): {{reason}}",
            ),
        ),
        kind="stat",
        description="Partitions the syncer manages (SlurmPartition CRs, --partitions-enabled): 1 Ready, 0 not, "
        "and the Ready condition's reason (docs/partitions.md).",
    ),
)

# The power row (power-managed NodeSets, spec.power; metrics of syncer/controllers/nodeset/power_actions.py): only the
# leader reconciles NodeSets, so its figures alone move. Checked by promtool over synthetic series
# (tests/integration/test_dashboards_power.py); on 26.05 the e2e rig (tests/e2e/test_prometheus.py) declares
# one member, which gives the members and actions panels data, not the power-up latency (no power-up there).
POWER_UP = "slurm_syncer_nodeset_power_up_seconds_bucket"
POWER = (
    Panel(
        "Power-managed members by state",
        (
            (slurm("slurm_syncer_nodeset_power_members", "nodeset, state", 'state!="declared"'), "{{nodeset}} {{state}}"),
            (slurm("slurm_syncer_nodeset_power_members", "nodeset", 'state="declared"'), "{{nodeset}} declared"),
        ),
        description="Members of NodeSets with spec.power by Slurm power state (poweredDown, poweringUp, "
        "poweredUp, poweringDown, heldByAdmin); declared: every member record in Slurm.",
    ),
    Panel(
        "Power-up to slurmd registered p50 / p99",
        (
            (f"histogram_quantile(0.5, {worked(POWER_UP, 'le')})", "p50"),
            (f"histogram_quantile(0.99, {worked(POWER_UP, 'le')})", "p99"),
        ),
        unit="s",
        description="From the pod created for a member Slurm powers up to Slurm showing its slurmd registered.",
    ),
    Panel(
        "Power actions and failures",
        (
            (worked("slurm_syncer_nodeset_power_actions_total", "action", 'action!="failure"'), "{{action}}"),
            (worked("slurm_syncer_nodeset_power_actions_total", where='action="failure"'), "failures"),
        ),
        unit="ops",
        description="power_up: pod created; power_down: pod deleted; failures: members powered down because "
        "their pod could not start or lost its Node (the Slurm reason names the pod); declare/undeclare: "
        "member records created, and deleted above a lowered ceiling.",
    ),
    Panel(
        "PrologSlurmctld answers and jobs held",
        (
            (worked("slurm_syncer_prolog_answers_total", "outcome"), "{{outcome}}"),
            (f"sum({_sel('slurm_syncer_prolog_waiting', '', BOARD)})", "jobs held now"),
        ),
        description="slurm-syncer's PrologSlurmctld (docs/operations.md): answers per second by outcome, from "
        "every replica (any one answers): ready (its powering-up nodes registered, pods Ready), none (an "
        "ordinary job), failed, waiting (a job held a whole round), unusable (caches stale: Slurm's 30 s "
        "way), bad; and the jobs held now (alert: SlurmSyncerPrologDegraded).",
    ),
)  # fmt: skip

# The scheduler row (the one-pool scheduler, --scheduler-name; docs/scheduler.md): only the leader schedules,
# so its gauges are the leader's (a standby exports none) and its counters move on the leader alone. Checked
# by promtool over synthetic series (tests/integration/test_dashboards_scheduler.py).
BIND_LATENCY = "slurm_syncer_scheduler_bind_latency_seconds_bucket"
SCHEDULER = (
    Panel(
        "Scheduler pods by state",
        ((slurm("slurm_syncer_scheduler_pods", "state"), "{{state}}"),
         (slurm("slurm_syncer_scheduler_held_nodes"), "Slurm nodes held for a terminating pod")),
        description="Pods with the scheduler's schedulerName: pending (waiting for their Slurm job), bound, "
        "terminating. Held: Slurm nodes drained while a pod whose job ended still runs there.",
    ),
    Panel(
        "Pending pods by reason",
        ((slurm("slurm_syncer_scheduler_pending_pods", "reason, slurm_reason"), "{{reason}} {{slurm_reason}}"),),
        description="The PodScheduled reason (SlurmJobPending, SlurmRequestRefused, SlurmGangWaiting, ...) and, "
        "for a waiting job, Slurm's own reason (Priority, Resources, QOS limits).",
    ),
    Panel(
        "Oldest pending pod by reason",
        ((f"max by (reason) ({_sel('slurm_syncer_scheduler_pending_oldest_seconds', '', BOARD)})", "{{reason}}"),),
        unit="s",
        description="Age of the oldest pod waiting for each reason (alert: SlurmSyncerSchedulerPodsPending).",
    ),
    Panel(
        "Pod created to bound p50 / p99",
        (
            (f"histogram_quantile(0.5, {worked(BIND_LATENCY, 'le')})", "p50"),
            (f"histogram_quantile(0.99, {worked(BIND_LATENCY, 'le')})", "p99"),
        ),
        unit="s",
        description="From the pod's creation to its binding on the Node of the Slurm node its job was "
        "allocated: Slurm's queue wait included.",
    ),
    Panel(
        "Tear-downs by cause",
        ((worked("slurm_syncer_scheduler_teardowns_total", "cause"), "{{cause}}"),),
        unit="ops",
        description="Pods deleted because their job ended (cancelled, time-limit, preempted, node-failure, ...) "
        "and jobs cancelled because their pods ended (pod-deleted, pod-failed, pod-succeeded).",
    ),
    Panel(
        "Slurm jobs for pods, and errors",
        (
            (worked("slurm_syncer_scheduler_jobs_total", "action"), "{{action}}"),
            (worked("slurm_syncer_scheduler_job_errors_total", "call"), "{{call}} failed"),
        ),
        unit="ops",
        description="Jobs submitted, cancelled and adopted (after a restart or failover); submits and "
        "cancels Slurm refused or that failed.",
    ),
)  # fmt: skip

SYNCER = (
    Panel(
        "Propagation latency p50 / p99",
        (
            (
                f"histogram_quantile(0.5, {worked('slurm_syncer_propagation_latency_seconds_bucket', 'le, direction')})",
                "p50 {{direction}}",
            ),
            (
                f"histogram_quantile(0.99, {worked('slurm_syncer_propagation_latency_seconds_bucket', 'le, direction')})",
                "p99 {{direction}}",
            ),
        ),
        unit="s",
        description="From a change being observed to the write on the other side being acknowledged.",
    ),
    Panel(
        "Actions",
        ((worked("slurm_syncer_actions_total", "kind, direction, result"), "{{kind}} {{direction}} {{result}}"),),
        unit="ops",
    ),
    Panel(
        "Slurm requests by status",
        ((per_replica("slurm_syncer_slurm_requests_total", "endpoint, status"), "{{instance}} {{endpoint}} {{status}}"),),
        unit="reqps",
        description="Per replica: the standby polls Slurm too. 401, 403, 511: the token is refused.",
    ),
    Panel(
        "Slurm fetches: 304 probes vs full lists",
        ((per_replica("slurm_syncer_slurm_fetches_total", "result"), "{{instance}} {{result}}"),),
        unit="ops",
    ),
    Panel(
        "Slurm data age",
        ((per_replica("slurm_syncer_slurm_snapshot_age_seconds", counter=False), "{{instance}}"),),
        kind="stat",
        unit="s",
    ),
    Panel(
        "Kubernetes watches",
        (
            (per_replica("slurm_syncer_kube_watch_restarts_total", "resource"), "{{instance}} restarts {{resource}}"),
            (per_replica("slurm_syncer_kube_relists_total", "resource"), "{{instance}} relists {{resource}}"),
        ),
        unit="ops",
    ),
    Panel(
        "Kubernetes request errors",
        ((per_replica("slurm_syncer_kube_request_errors_total", "method, status"), "{{instance}} {{method}} {{status}}"),),
        unit="ops",
        description="409 on a write: it raced another and is retried on the fresh object; 0: no answer.",
    ),
    Panel(
        "Work queue",
        (
            (per_replica("slurm_syncer_queue_depth", counter=False), "{{instance}} depth"),
            (per_replica("slurm_syncer_queue_retries_total"), "{{instance}} retries/s"),
        ),
    ),
    Panel(
        "Leaders",
        ((f"sum by ({RELEASE}) ({_sel('slurm_syncer_leader', '', BOARD)})", "{{namespace}}/{{release}}"),),
        kind="stat",
        description="Replicas holding the lease, per release: 1 is right, 0 or 2 alert.",
    ),
    Panel("Safety valve open", ((slurm("slurm_syncer_safety_valve_open", "release"), "{{release}}"),), kind="stat"),
    Panel("Dry run", ((slurm("slurm_syncer_dry_run", "release"), "{{release}}"),), kind="stat",
          description="1: --dry-run holds every write back."),
    Panel(
        "Slurm token expires in",
        (
            (
                f"min by ({RELEASE}, source) ({_sel('slurm_syncer_slurm_token_expiry_timestamp_seconds', '', BOARD)}) - time()",
                "{{release}} {{source}}",
            ),
        ),
        kind="stat",
        unit="s",
        description="jwt_key: minted from the key and renewed early, never runs out.",
    ),
    Panel(
        "Bindings",
        (
            (slurm("slurm_syncer_bound_nodes", "mode"), "bound {{mode}}"),
            (slurm("slurm_syncer_unbound_nodes"), "unbound"),
            (slurm("slurm_syncer_conflicting_nodes"), "conflicting"),
            (slurm("slurm_syncer_missing_slurm_nodes"), "missing in Slurm"),
        ),
    ),
    Panel("Drift", ((slurm("slurm_syncer_drift_nodes"), "nodes whose two sides disagree"),)),
    Panel(
        "Maintenance windows",
        (
            (slurm("slurm_syncer_maintenance_windows", "state"), "Nodes {{state}}"),
            (slurm("slurm_syncer_maintenance_reservations"), "k8s-maint reservations in Slurm"),
        ),
        description="Nodes whose window is reserved in Slurm, refused (Event on the Node), or waiting for "
        "Slurm 25.05+; and the MAINT reservations the syncer owns.",
    ),
    Panel("Events", ((worked("slurm_syncer_events_total", "result"), "{{result}}"),), unit="ops"),
    Panel(
        "Slurm updates (drain, undrain, features, topology)",
        (
            (worked("slurm_syncer_slurm_update_requests_total", "kind"), "requests {{kind}}"),
            (
                f"{worked('slurm_syncer_slurm_updated_nodes_total')} / {worked('slurm_syncer_slurm_update_requests_total')}",
                "nodes per request",
            ),
            (worked("slurm_syncer_slurm_bulk_refused_total"), "bulk refused part-way/s"),
        ),
    ),
    Panel(
        "Node labels to Slurm (features, topology)",
        (
            (worked("slurm_syncer_node_attribute_writes_total", "kind, result"), "{{kind}} {{result}}"),
            (worked("slurm_syncer_feature_labels_refused_total"), "label values refused/s"),
            (slurm("slurm_syncer_topology_unsupported"), "topology configured, Slurm before 25.05"),
        ),
        description="Features and topology written from Node labels (docs/contract.md); refused: an Event "
        "on the Node says why.",
    ),
    Panel(
        "Process CPU and memory",
        (
            (per_replica("process_cpu_seconds_total"), "{{instance}} CPU s/s"),
            (per_replica("process_resident_memory_bytes", counter=False), "{{instance}} RSS bytes"),
        ),
    ),
)  # fmt: skip


def _in(metric: str, where: str = "") -> str:
    return _sel(metric, where, SEL)


def _release(how: str, metric: str, where: str = "", by: str = "") -> str:
    return f"{how} by ({RELEASE}{', ' + by if by else ''}) ({_in(metric, where)})"


ALERTS = (
    Alert(
        "SlurmSyncerAbsent", "", "", "5m", "critical",
        "no slurm-syncer is scraped",
        "Prometheus has no target of slurm-syncer {{ $labels.namespace }}/{{ $labels.release }}: the Deployment "
        "is at 0 replicas, or the ServiceMonitor/PodMonitor is not picked up (its labels, the namespace).",
        absent=_in("up"),
    ),
    Alert(
        "SlurmSyncerDown", _release("max", "up"), "== 0", "2m", "critical",
        "slurm-syncer is not being scraped",
        "Prometheus cannot scrape any replica of {{ $labels.namespace }}/{{ $labels.release }}: Kubernetes "
        "cordons no longer reach Slurm.",
    ),
    Alert(
        "SlurmSyncerNoLeader", _release("sum", "slurm_syncer_leader"), "< 1", "2m", "critical",
        "no slurm-syncer replica holds the lease",
        "No replica of {{ $labels.namespace }}/{{ $labels.release }} writes: check its Lease and the pods' "
        "logs (docs/operations.md).",
        absent=_in("slurm_syncer_leader"),
    ),
    Alert(
        "SlurmSyncerNotReady", _in("slurm_syncer_ready"), "== 0", "5m", "warning",
        "slurm-syncer is not ready",
        "{{ $labels.instance }} answers /readyz with an error: stale data, unsynced caches or an open valve.",
    ),
    Alert(
        "SlurmSyncerTwoLeaders", _release("sum", "slurm_syncer_leader"), "> 1", "2m", "critical",
        "two slurm-syncer replicas both lead",
        "{{ $value }} replicas of {{ $labels.namespace }}/{{ $labels.release }} hold the lease and write: "
        "clock skew beyond the lease's margin, or two releases sharing one Lease.",
    ),
    Alert(
        "SlurmSyncerSlurmDataStale", _in("slurm_syncer_slurm_snapshot_age_seconds"), "> 60", "2m", "critical",
        "Slurm data is stale",
        "slurmrestd has not answered {{ $labels.instance }} for {{ $value | humanizeDuration }}: the syncer "
        "fails closed (no undrain, no delete) until it does.",
    ),
    Alert(
        "SlurmSyncerSlurmAuthFailing",
        f"sum by ({RELEASE}, status) (increase({_in('slurm_syncer_slurm_requests_total', AUTH_REFUSED)}[5m]))",
        "> 0", "5m", "critical",
        "slurmrestd refuses the syncer's token",
        "slurmrestd answered {{ $labels.namespace }}/{{ $labels.release }} with HTTP {{ $labels.status }} "
        "for 5 minutes: the token expired, was signed with another key, or its user lacks rights.",
    ),
    Alert(
        "SlurmSyncerSlurmTokenExpiring",
        f"min by ({RELEASE}) ({_in('slurm_syncer_slurm_token_expiry_timestamp_seconds', NOT_MINTED)}) - time()",
        "< 7 * 86400", "10m", "warning",
        "the Slurm token expires within 7 days",
        "The Slurm token of {{ $labels.namespace }}/{{ $labels.release }} expires in {{ $value | "
        "humanizeDuration }} (negative: already expired): put a fresh one in its Secret, or use the JWT key.",
    ),
    Alert(
        "SlurmSyncerKubeWriteErrors",
        f"sum by ({RELEASE}, method, status) (increase({_in('slurm_syncer_kube_request_errors_total', FAILED_WRITE)}[10m]))",
        "> 0", "10m", "warning",
        "Kubernetes refuses the syncer's writes",
        "{{ $labels.method }} requests of {{ $labels.namespace }}/{{ $labels.release }} answered "
        "{{ $labels.status }} (0: no answer) for 10 minutes: 403 is a missing RBAC right, 422 a refused "
        "object.",
    ),
    Alert(
        "SlurmSyncerMetricsHintFailing", _release("max", "slurm_syncer_slurm_metrics_hint_failing"), "== 1",
        "1h", "warning",
        "slurmctld's metrics hint has failed for an hour",
        "{{ $labels.namespace }}/{{ $labels.release }} polls Slurm without the hint: every job start or end "
        "costs a full node list. Check slurmctld's MetricsType and the NetworkPolicy's metrics port.",
    ),
    Alert(
        "SlurmSyncerDryRun", _release("max", "slurm_syncer_dry_run"), "== 1", "1h", "warning",
        "slurm-syncer has run in dry-run for an hour",
        "{{ $labels.namespace }}/{{ $labels.release }} writes nothing (--dry-run): switch it off once the "
        "dry-run log reads right.",
    ),
    Alert(
        "SlurmSyncerSafetyValveOpen", _release("max", "slurm_syncer_safety_valve_open"), "== 1", "0m",
        "warning",
        "safety valve open: automatic Kubernetes-side drains are held back",
        "More than --max-drain-fraction (at least --safety-valve-min-nodes) of bound nodes wanted to drain "
        "within a minute for automatic causes (NotReady, problem conditions). Investigate the cause (Node "
        "health, network partition), then let it close or reset it.",
    ),
    Alert(
        "SlurmSyncerDriftPersisting", _release("max", "slurm_syncer_drift_nodes"), "> 0", "10m", "warning",
        "Slurm and Kubernetes disagree for 10 minutes",
        "{{ $value }} Slurm node(s) differ from what Kubernetes says: see `slurm-syncer status`.",
    ),
    Alert(
        "SlurmSyncerBindingConflicts", _release("max", "slurm_syncer_conflicting_nodes"), "> 0", "10m",
        "warning",
        "conflicting bindings",
        "{{ $value }} Slurm node name(s) are claimed by more than one pod or Node and left alone.",
    ),
    Alert(
        "SlurmSyncerMissingSlurmNodes", _release("max", "slurm_syncer_missing_slurm_nodes"), "> 0", "10m",
        "warning",
        "pods or Nodes name Slurm nodes that Slurm does not know",
        "{{ $value }} running pod(s) or Node(s) carry a slurm-syncer.dev/node-name label for which Slurm has no "
        "node: nothing is synced for them.",
    ),
    Alert(
        "SlurmSyncerK8sToSlurmLatencyHigh",
        f"histogram_quantile(0.99, sum by ({RELEASE}, le) (rate({_in(LATENCY, K8S_TO_SLURM)}[10m])))",
        "> 1", "10m", "warning",
        "Kubernetes-to-Slurm propagation p99 above 1 s",
        "p99 is {{ $value | humanizeDuration }}: check slurmrestd request times and the client rate limit.",
    ),
    Alert(
        "SlurmSyncerSlurmToK8sLatencyHigh",
        f"histogram_quantile(0.99, sum by ({RELEASE}, le) (rate({_in(LATENCY, SLURM_TO_K8S)}[10m])))",
        "> 5", "10m", "warning",
        "Slurm-to-Kubernetes propagation p99 above 5 s",
        "p99 is {{ $value | humanizeDuration }}: check the full-list time of slurmrestd and the Kubernetes "
        "client rate limit.",
    ),
    Alert(
        "SlurmManyNodesDrainedOrDown",
        f"({_release('max', 'slurm_node_flags', DRAINED)} + {_release('max', 'slurm_nodes', DOWN)})"
        f" / clamp_min(max by ({RELEASE}) (sum without (state) ({_in('slurm_nodes')})), 1)",
        "> 0.1", "15m", "warning",
        "more than 10 % of Slurm nodes drained or down",
        "{{ $value | humanizePercentage }} of the Slurm nodes of {{ $labels.namespace }}/{{ $labels.release }} "
        "are drained or down.",
    ),
    Alert(
        "SlurmSyncerSchedulerPodsPending",
        _release("max", "slurm_syncer_scheduler_pending_oldest_seconds", by="reason"), "> 3600", "5m",
        "warning",
        "scheduler pods pending for more than an hour",
        "The oldest pod of {{ $labels.namespace }}/{{ $labels.release }} pending with reason {{ $labels.reason }} "
        "has waited {{ $value | humanizeDuration }}: SlurmJobPending is Slurm's queue (the pod's PodScheduled "
        "message gives Slurm's reason and job id); SlurmRequestRefused, SlurmGangWaiting and "
        "SlurmPlacementFailed need the pod or its gang fixed.",
    ),
    Alert(
        "SlurmSyncerPrologDegraded",
        f"sum by ({RELEASE}, outcome) (increase({_in('slurm_syncer_prolog_answers_total', PROLOG_DEGRADED)}[10m]))",
        "> 0", "10m", "warning",
        "the PrologSlurmctld's questions are answered without the nodes' readiness",
        "slurm-syncer {{ $labels.namespace }}/{{ $labels.release }} has answered the PrologSlurmctld "
        "{{ $labels.outcome }} for 10 minutes: waiting, a job held a whole round for a node that does not "
        "come up; unusable, its caches are stale (jobs on powered-up nodes wait for slurmctld's 30 s check); "
        "bad, the prolog's requests are malformed.",
    ),
    Alert(
        "SlurmNodeSetDrainTimeout", _release("max", "slurm_syncer_nodeset_drain_timeouts", by="nodeset"), "> 0",
        "0m", "warning",
        "NodeSet removal waiting past drainTimeout",
        "NodeSet {{ $labels.nodeset }}: {{ $value }} node(s) still run jobs after drainTimeout; nothing is "
        "forced.",
    ),
    Alert(
        "SlurmNodeSetPowerDisruption",
        _release("max", "slurm_syncer_nodeset_power_disruption", by="zone"), "== 1", "0m", "warning",
        "most Nodes of a zone NotReady at once: lost-Node power-downs held",
        "Zone {{ $labels.zone }}: more than 2 and at least 55 % of its Nodes are NotReady at once (a control "
        "plane that lost them, expired kubelet certificates, a network partition). Power-managed members "
        "there are not forced down for a lost Node until it recovers; jobs run on where slurmd answers.",
    ),
)  # fmt: skip


def _panel(panel: Panel, index: int) -> dict[str, Any]:
    width = 8
    return {
        "id": index + 1,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": width, "x": (index % 3) * width, "y": (index // 3) * 8},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": {"type": "prometheus", "uid": "${datasource}"}}
            for i, (expr, legend) in enumerate(panel.queries)
        ],
    }  # fmt: skip


_DATASOURCE = {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}
_JOB = {
    "name": "job",
    "type": "custom",
    "label": "Scrape job",
    "query": "slurm-syncer",
    "current": {"text": "slurm-syncer", "value": "slurm-syncer"},
    "description": "The job label of the syncer's series (the chart's monitors set slurm-syncer).",
}


def _labels(name: str, label: str) -> dict[str, Any]:
    """A multi-value variable of the label's values; All is `.*`, which also matches series without it
    (a plain scrape config has no namespace or release label)."""
    return {
        "name": name,
        "type": "query",
        "label": label,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": f'label_values(slurm_syncer_build_info{{job="$job"}}, {name})', "refId": name},
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "sort": 1,
    }


def dashboard(uid: str, title: str, panels: tuple[Panel, ...]) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["slurm", "slurm-syncer"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [_DATASOURCE, _JOB, _labels("namespace", "Namespace"), _labels("release", "Release")]
        },
        "panels": [_panel(p, i) for i, p in enumerate(panels)],
    }


def dashboards() -> dict[str, dict[str, Any]]:
    return {
        "slurm-cluster.json": dashboard("slurm-cluster", "Slurm cluster", CLUSTER + SCHEDULER + POWER),
        "slurm-syncer.json": dashboard("slurm-syncer", "slurm-syncer health", SYNCER),
    }


def rules() -> dict[str, Any]:
    """The rule groups, as both `promtool` and a PrometheusRule's `spec` take them."""
    return {
        "groups": [
            {
                "name": "slurm-syncer",
                "rules": [
                    {
                        "alert": a.name,
                        "expr": a.expr,
                        "for": a.for_,
                        "labels": {"severity": a.severity},
                        "annotations": {
                            "summary": a.summary,
                            "description": a.description,
                            "runbook_url": f"{RUNBOOKS}#{a.name.lower()}",
                        },
                    }
                    for a in ALERTS
                ],
            }
        ]
    }


def render() -> dict[str, str]:
    """Relative path -> file content, for everything under deploy/ this module owns."""
    files = {f"grafana/{name}": json.dumps(body, indent=2) + "\n" for name, body in dashboards().items()}
    header = "# Generated by `python -m syncer.app.dashboards`; edit syncer/app/dashboards.py instead.\n"
    files["prometheus/rules.yaml"] = header + yaml.safe_dump(rules(), sort_keys=False, width=200)
    files["prometheus/prometheusrule.yaml"] = header + yaml.safe_dump(
        prometheus_rule(), sort_keys=False, width=200
    )
    # the Helm chart packages its own copies (a chart cannot read files outside its folder)
    for relative in ("grafana/slurm-cluster.json", "grafana/slurm-syncer.json", "prometheus/rules.yaml"):
        files[f"helm/slurm-syncer/files/{relative}"] = files[relative]
    return files


def rules_for_release(job: str, namespace: str, release: str, runbooks: str) -> dict[str, Any]:
    """The rules as the chart renders them for one release (templates/prometheusrule.yaml)."""
    scope = f'job="{job}", namespace="{namespace}", release="{release}"'
    text = yaml.safe_dump(rules(), sort_keys=False, width=200).replace(SEL, scope).replace(RUNBOOKS, runbooks)
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def board_for_release(board: dict[str, Any], namespace: str, release: str, fullname: str) -> dict[str, Any]:
    """A dashboard as the chart renders it (templates/dashboards.yaml): UID and title of its release,
    opened on it."""
    scope = f"{namespace}/{fullname}"
    suffix = hashlib.sha256(scope.encode()).hexdigest()[:10]
    chosen = {"namespace": namespace, "release": release}
    variables = [
        {**v, "current": {"text": [chosen[v["name"]]], "value": [chosen[v["name"]]]}}
        if v["name"] in chosen
        else v
        for v in board["templating"]["list"]
    ]
    return {
        **board,
        "uid": f"{board['uid']}-{suffix}",
        "title": f"{board['title']} ({scope})",
        "templating": {**board["templating"], "list": variables},
    }


def prometheus_rule(namespace: str = "slurm-syncer") -> dict[str, Any]:
    """The same rules as a Prometheus Operator PrometheusRule (kubectl apply -f)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "slurm-syncer",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "slurm-syncer"},
        },
        "spec": rules(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m syncer.app.dashboards", description=__doc__)
    parser.add_argument("--out", default="deploy", help="folder to write into (default: deploy)")
    args = parser.parse_args(argv)
    for relative, content in render().items():
        path = Path(args.out) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
