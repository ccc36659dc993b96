"""Grafana dashboards and Prometheus alert rules, generated from code so every query is known to the
tests (a real Prometheus evaluates each one).

    python -m syncer.app.dashboards [--out deploy]   # writes grafana/*.json and prometheus/rules.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

RATE = "$__rate_interval"  # Grafana's rate window; tests substitute a fixed one


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

    @property
    def expr(self) -> str:
        return f"{self.signal} {self.condition}"


CLUSTER = (
    Panel("Nodes by state", (("sum by (state) (slurm_nodes)", "{{state}}"),), description="Base states."),
    Panel("Nodes by flag", (("sum by (flag) (slurm_node_flags)", "{{flag}}"),)),
    Panel(
        "Drained or down share",
        (
            (
                '(sum(slurm_node_flags{flag="drain"}) + sum(slurm_nodes{state="down"})) / clamp_min(sum(slurm_nodes), 1)',
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
                "sum by (partition) (slurm_partition_cpus_allocated) / clamp_min(sum by (partition) (slurm_partition_cpus), 1)",
                "{{partition}}",
            ),
        ),
        unit="percentunit",
    ),
    Panel(
        "GPUs allocated / total",
        (
            ("sum by (partition) (slurm_partition_gpus_allocated)", "{{partition}} allocated"),
            ("sum by (partition) (slurm_partition_gpus)", "{{partition}} total"),
        ),
    ),
    Panel(
        "Memory allocated by partition",
        (("sum by (partition) (slurm_partition_memory_allocated_bytes)", "{{partition}}"),),
        unit="bytes",
    ),
    Panel("Jobs by state", (("sum by (state) (slurm_jobs)", "{{state}}"),)),
    Panel(
        "Scheduler cycle",
        (
            ("slurm_scheduler_schedule_cycle_last_seconds", "main, last"),
            ("slurm_scheduler_schedule_cycle_mean_seconds", "main, mean"),
        ),
        unit="s",
    ),
    Panel(
        "NodeSet members",
        (
            ("sum by (nodeset) (slurm_syncer_nodeset_desired_members)", "{{nodeset}} desired"),
            ("sum by (nodeset) (slurm_syncer_nodeset_drain_timeouts)", "{{nodeset}} past drainTimeout"),
        ),
    ),
)

SYNCER = (
    Panel(
        "Propagation latency p50 / p99",
        (
            (
                f"histogram_quantile(0.5, sum by (le, direction) (rate(slurm_syncer_propagation_latency_seconds_bucket[{RATE}])))",
                "p50 {{direction}}",
            ),
            (
                f"histogram_quantile(0.99, sum by (le, direction) (rate(slurm_syncer_propagation_latency_seconds_bucket[{RATE}])))",
                "p99 {{direction}}",
            ),
        ),
        unit="s",
        description="From a change being observed to the write on the other side being acknowledged.",
    ),
    Panel(
        "Actions",
        (
            (
                f"sum by (kind, direction, result) (rate(slurm_syncer_actions_total[{RATE}]))",
                "{{kind}} {{direction}} {{result}}",
            ),
        ),
        unit="ops",
    ),
    Panel(
        "Slurm requests by status",
        (
            (
                f"sum by (endpoint, status) (rate(slurm_syncer_slurm_requests_total[{RATE}]))",
                "{{endpoint}} {{status}}",
            ),
        ),
        unit="reqps",
    ),
    Panel(
        "Slurm fetches: 304 probes vs full lists",
        ((f"sum by (result) (rate(slurm_syncer_slurm_fetches_total[{RATE}]))", "{{result}}"),),
        unit="ops",
    ),
    Panel(
        "Slurm data age", (("max(slurm_syncer_slurm_snapshot_age_seconds)", "age"),), kind="stat", unit="s"
    ),
    Panel(
        "Kubernetes watches",
        (
            (
                f"sum by (resource) (rate(slurm_syncer_kube_watch_restarts_total[{RATE}]))",
                "restarts {{resource}}",
            ),
            (f"sum by (resource) (rate(slurm_syncer_kube_relists_total[{RATE}]))", "relists {{resource}}"),
        ),
        unit="ops",
    ),
    Panel(
        "Work queue",
        (
            ("sum(slurm_syncer_queue_depth)", "depth"),
            (f"sum(rate(slurm_syncer_queue_retries_total[{RATE}]))", "retries/s"),
        ),
    ),
    Panel("Leader", (("sum(slurm_syncer_leader)", "leaders"),), kind="stat"),
    Panel("Safety valve open", (("max(slurm_syncer_safety_valve_open)", "open"),), kind="stat"),
    Panel(
        "Bindings",
        (
            ("sum by (mode) (slurm_syncer_bound_nodes)", "bound {{mode}}"),
            ("sum(slurm_syncer_unbound_nodes)", "unbound"),
            ("sum(slurm_syncer_conflicting_nodes)", "conflicting"),
            ("sum(slurm_syncer_missing_slurm_nodes)", "missing in Slurm"),
        ),
    ),
    Panel("Drift", (("sum(slurm_syncer_drift_nodes)", "nodes whose two sides disagree"),)),
    Panel(
        "Maintenance windows",
        (
            ("sum by (state) (slurm_syncer_maintenance_windows)", "Nodes {{state}}"),
            ("max(slurm_syncer_maintenance_reservations)", "k8s-maint reservations in Slurm"),
        ),
        description="Nodes whose window is reserved in Slurm, refused (Event on the Node), or waiting for "
        "Slurm 25.05+; and the MAINT reservations the syncer owns.",
    ),
    Panel(
        "Events", ((f"sum by (result) (rate(slurm_syncer_events_total[{RATE}]))", "{{result}}"),), unit="ops"
    ),
    Panel(
        "Slurm updates (drain, undrain, features, topology)",
        (
            (f"sum by (kind) (rate(slurm_syncer_slurm_update_requests_total[{RATE}]))", "requests {{kind}}"),
            (
                f"sum(rate(slurm_syncer_slurm_updated_nodes_total[{RATE}])) / "
                f"sum(rate(slurm_syncer_slurm_update_requests_total[{RATE}]))",
                "nodes per request",
            ),
            (f"sum(rate(slurm_syncer_slurm_bulk_refused_total[{RATE}]))", "bulk refused part-way/s"),
        ),
    ),
    Panel(
        "Node labels to Slurm (features, topology)",
        (
            (
                f"sum by (kind, result) (rate(slurm_syncer_node_attribute_writes_total[{RATE}]))",
                "{{kind}} {{result}}",
            ),
            (f"sum(rate(slurm_syncer_feature_labels_refused_total[{RATE}]))", "label values refused/s"),
            ("max(slurm_syncer_topology_unsupported)", "topology configured, Slurm before 25.05"),
        ),
        description="Features and topology written from Node labels (docs/contract.md); refused: an Event "
        "on the Node says why.",
    ),
)

ALERTS = (
    Alert(
        "SlurmSyncerDown", 'up{job="slurm-syncer"}', "== 0", "2m", "critical",
        "slurm-syncer is not being scraped",
        "Prometheus cannot scrape {{ $labels.instance }}: Kubernetes cordons no longer reach Slurm.",
    ),
    Alert(
        "SlurmSyncerNoLeader", "sum(slurm_syncer_leader)", "< 1", "2m", "critical",
        "no slurm-syncer replica holds the lease",
        "No replica writes: check the Lease slurm-syncer and the pods' logs (docs/operations.md).",
    ),
    Alert(
        "SlurmSyncerNotReady", "slurm_syncer_ready", "== 0", "5m", "warning",
        "slurm-syncer is not ready",
        "{{ $labels.instance }} answers /readyz with an error: stale data, unsynced caches or an open valve.",
    ),
    Alert(
        "SlurmSyncerSlurmDataStale", "slurm_syncer_slurm_snapshot_age_seconds", "> 60", "2m", "critical",
        "Slurm data is stale",
        "slurmrestd has not answered for {{ $value | humanizeDuration }}: the syncer fails closed "
        "(no undrain, no delete) until it does.",
    ),
    Alert(
        "SlurmSyncerSafetyValveOpen", "slurm_syncer_safety_valve_open", "== 1", "0m", "warning",
        "safety valve open: automatic Kubernetes-side drains are held back",
        "More than --max-drain-fraction (at least --safety-valve-min-nodes) of bound nodes wanted to drain "
        "within a minute for automatic causes (NotReady, problem conditions). Investigate the cause (Node "
        "health, network partition), then let it close or reset it.",
    ),
    Alert(
        "SlurmSyncerDriftPersisting", "slurm_syncer_drift_nodes", "> 0", "10m", "warning",
        "Slurm and Kubernetes disagree for 10 minutes",
        "{{ $value }} Slurm node(s) differ from what Kubernetes says: see `slurm-syncer status`.",
    ),
    Alert(
        "SlurmSyncerBindingConflicts", "slurm_syncer_conflicting_nodes", "> 0", "10m", "warning",
        "conflicting bindings",
        "{{ $value }} Slurm node name(s) are claimed by more than one pod or Node and left alone.",
    ),
    Alert(
        "SlurmSyncerMissingSlurmNodes", "slurm_syncer_missing_slurm_nodes", "> 0", "10m", "warning",
        "pods or Nodes name Slurm nodes that Slurm does not know",
        "{{ $value }} running pod(s) or Node(s) carry a slurm-syncer.dev/node-name label for which Slurm has no "
        "node: nothing is synced for them.",
    ),
    Alert(
        "SlurmSyncerK8sToSlurmLatencyHigh",
        'histogram_quantile(0.99, sum by (le) (rate(slurm_syncer_propagation_latency_seconds_bucket{direction="k8s_to_slurm"}[10m])))',
        "> 1", "10m", "warning",
        "Kubernetes-to-Slurm propagation p99 above 1 s",
        "p99 is {{ $value | humanizeDuration }}: check slurmrestd request times and the client rate limit.",
    ),
    Alert(
        "SlurmSyncerSlurmToK8sLatencyHigh",
        'histogram_quantile(0.99, sum by (le) (rate(slurm_syncer_propagation_latency_seconds_bucket{direction="slurm_to_k8s"}[10m])))',
        "> 5", "10m", "warning",
        "Slurm-to-Kubernetes propagation p99 above 5 s",
        "p99 is {{ $value | humanizeDuration }}: check the full-list time of slurmrestd and the Kubernetes "
        "client rate limit.",
    ),
    Alert(
        "SlurmManyNodesDrainedOrDown",
        '(sum(slurm_node_flags{flag="drain"}) + sum(slurm_nodes{state="down"})) / clamp_min(sum(slurm_nodes), 1)',
        "> 0.1", "15m", "warning",
        "more than 10 % of Slurm nodes drained or down",
        "{{ $value | humanizePercentage }} of Slurm nodes are drained or down.",
    ),
    Alert(
        "SlurmNodeSetDrainTimeout", "slurm_syncer_nodeset_drain_timeouts", "> 0", "0m", "warning",
        "NodeSet removal waiting past drainTimeout",
        "NodeSet {{ $labels.nodeset }}: {{ $value }} node(s) still run jobs after drainTimeout; nothing is "
        "forced.",
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
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}
            ]
        },
        "panels": [_panel(p, i) for i, p in enumerate(panels)],
    }


def dashboards() -> dict[str, dict[str, Any]]:
    return {
        "slurm-cluster.json": dashboard("slurm-cluster", "Slurm cluster", CLUSTER),
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
                            "runbook_url": f"docs/operations.md#{a.name.lower()}",
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
