"""The families the state collector (metrics.py) builds at scrape time, each declared once: its name, kind
(the table it is in), help and label names. The collector reads the values; what a figure means is said
here, beside every other (the DIAG_FIELDS gauges are declared in metrics.py, from slurmctld's diag)."""

from __future__ import annotations

from typing import Final, NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class Family(NamedTuple):
    help: str
    labels: tuple[str, ...] = ()


def gauge(name: str) -> GaugeMetricFamily:
    """A fresh, empty gauge family `name` as GAUGES declares it."""
    family = GAUGES[name]
    return GaugeMetricFamily(name, family.help, labels=list(family.labels))


def counter(name: str) -> CounterMetricFamily:
    """A fresh, empty counter family `name` as COUNTERS declares it."""
    family = COUNTERS[name]
    return CounterMetricFamily(name, family.help, labels=list(family.labels))


GAUGES: Final[dict[str, Family]] = {
    "slurm_nodes": Family(
        "Slurm nodes by base state.",
        ("state",),
    ),
    "slurm_node_flags": Family(
        "Slurm nodes carrying each state flag (DRAIN, NOT_RESPONDING ...).",
        ("flag",),
    ),
    "slurm_node_info": Family(
        "One series per Slurm node: its base state and whether it is drained.",
        ("node", "state", "drain"),
    ),
    "slurm_partition_nodes": Family(
        "Nodes in the partition.",
        ("partition",),
    ),
    "slurm_partition_cpus": Family(
        "CPUs in the partition.",
        ("partition",),
    ),
    "slurm_partition_cpus_allocated": Family(
        "CPUs allocated to jobs in the partition.",
        ("partition",),
    ),
    "slurm_partition_memory_bytes": Family(
        "Memory in the partition.",
        ("partition",),
    ),
    "slurm_partition_memory_allocated_bytes": Family(
        "Memory allocated to jobs in the partition.",
        ("partition",),
    ),
    "slurm_partition_gpus": Family(
        "GPUs (gres gpu) in the partition.",
        ("partition",),
    ),
    "slurm_partition_gpus_allocated": Family(
        "GPUs allocated to jobs in the partition.",
        ("partition",),
    ),
    "slurm_partition_node_states": Family(
        "Nodes in the partition by base state.",
        ("partition", "state"),
    ),
    "slurm_jobs": Family(
        "Jobs by partition and state (every --jobs-poll-interval: slurmctld's metrics, else slurmrestd).",
        ("partition", "state"),
    ),
    "slurm_syncer_build_info": Family(
        "Version of the running syncer.",
        ("version", "slurm_api"),
    ),
    "slurm_syncer_slurm_metrics_hint_failing": Family(
        "1 while the last slurmctld metrics read failed (the cache polls without the hint).",
    ),
    "slurm_syncer_slurm_snapshot_bytes": Family(
        "Size of the last full node list.",
    ),
    "slurm_syncer_slurm_token_expiry_timestamp_seconds": Family(
        "When the Slurm token in use expires (its `exp`), by source: file (--slurm-token-file, re-read "
        "when it changes), static (given in code), jwt_key (minted from the key, renewed early).",
        ("source",),
    ),
    "slurm_syncer_slurm_snapshot_age_seconds": Family(
        "Seconds since slurmrestd last answered the node cache.",
    ),
    "slurm_syncer_queue_depth": Family(
        "Slurm nodes waiting to be reconciled.",
    ),
    "slurm_syncer_queue_in_flight": Family(
        "Slurm nodes being reconciled now.",
    ),
    "slurm_syncer_leader": Family(
        "1 while this process holds the lease and may write.",
    ),
    "slurm_syncer_safety_valve_open": Family(
        "1 while the drain safety valve holds Kubernetes-side drains back.",
    ),
    "slurm_syncer_drift_nodes": Family(
        "Bound Slurm nodes whose two sides disagree right now.",
    ),
    "slurm_syncer_conflicting_nodes": Family(
        "Slurm nodes claimed by more than one pod or Node.",
    ),
    "slurm_syncer_missing_slurm_nodes": Family(
        "Slurm node names a running pod or a Node is labelled with that Slurm does not know.",
    ),
    "slurm_syncer_ready": Family(
        "1 when /readyz answers ok.",
    ),
    "slurm_syncer_dry_run": Family(
        "1 while --dry-run holds every write back.",
    ),
    "slurm_syncer_bound_nodes": Family(
        "Slurm nodes bound to Kubernetes objects, by binding mode.",
        ("mode",),
    ),
    "slurm_syncer_unbound_nodes": Family(
        "Slurm nodes no pod or Node claims (exported only).",
    ),
    "slurm_syncer_partition_ready": Family(
        "SlurmPartition CRs the leader reconciles: 1 while the Ready condition is True, by CR, its Slurm "
        "partition and the condition's reason.",
        ("cr", "partition", "reason"),
    ),
    "slurm_syncer_partition_state": Family(
        "SlurmPartition CRs the leader reconciles: 1, by CR, its Slurm partition and the partition's state"
        " in Slurm (UP, DOWN, DRAIN, INACTIVE; ABSENT when Slurm has no such partition).",
        ("cr", "partition", "state"),
    ),
    "slurm_syncer_partition_held": Family(
        "SlurmPartition CRs whose partition's state set in Slurm stops what the CR's state allows (an "
        "admin's DOWN under a CR saying UP): 1, by CR, partition and the state kept until the CR changes.",
        ("cr", "partition", "state"),
    ),
    "slurm_syncer_slinky_partition_drift": Family(
        "With --slinky-partitions: 1 while slurmctld keeps a partition of Slinky's unlike the slurm.conf "
        "line a NodeSet or Controller declares (ReconfigFlags=KeepPartInfo; a SlinkyPartitionFrozen Event "
        "names the keys and the scontrol update to run), 0 once they agree; by partition and Slinky object.",
        ("partition", "object"),
    ),
    "slurm_syncer_scheduler_pods": Family(
        "Pods with the scheduler's name, by state: pending (no Node yet), bound, terminating.",
        ("state",),
    ),
    "slurm_syncer_scheduler_pending_pods": Family(
        "Pending scheduler pods by their PodScheduled reason (SlurmJobPending, SlurmGangWaiting, "
        "SlurmRequestRefused, SlurmPlacementFailed, SlurmJobStarting, NoCondition) and Slurm's pending "
        "reason (Priority, Resources, ...; empty when Slurm gives none).",
        ("reason", "slurm_reason"),
    ),
    "slurm_syncer_scheduler_pending_oldest_seconds": Family(
        "Age of the oldest pending scheduler pod, by PodScheduled reason (an alert's input).",
        ("reason",),
    ),
    "slurm_syncer_scheduler_held_nodes": Family(
        "Slurm nodes the scheduler holds (drained) while a pod whose job ended still terminates there.",
    ),
    "slurm_syncer_scheduler_unshown_binds": Family(
        "Binds the scheduler made that its pod informer does not show yet (counted as binds meanwhile; a "
        "lasting count means the informer lags: a held watch, a slow relist).",
    ),
    "slurm_syncer_scheduler_unshown_bind_oldest_seconds": Family(
        "Age of the oldest bind the scheduler's pod informer does not show yet (0 when none).",
    ),
    "slurm_syncer_topology_unsupported": Family(
        "1 when topology from labels is configured but Slurm's REST API has no topology_str (needs Slurm "
        "25.05+, REST v0.0.43+): nothing is written.",
    ),
    "slurm_syncer_maintenance_windows": Family(
        "Nodes with a maintenance window, by state: reserved (its Slurm reservation exists), invalid "
        "(input refused, Event on the Node), unsupported (Slurm before 25.05 cannot create reservations).",
        ("state",),
    ),
    "slurm_syncer_maintenance_reservations": Family(
        "Slurm MAINT reservations the syncer owns (k8s-maint-...), as of its last look.",
    ),
    "slurm_syncer_nodeset_desired_members": Family(
        "Members a NodeSet wants.",
        ("nodeset",),
    ),
    "slurm_syncer_nodeset_drain_timeouts": Family(
        "Members of a NodeSet being removed that still run jobs after drainTimeout (never forced).",
        ("nodeset",),
    ),
    "slurm_syncer_nodeset_power_members": Family(
        "Members of a power-managed NodeSet by Slurm power state (declared counts every record).",
        ("nodeset", "state"),
    ),
    "slurm_syncer_nodeset_power_disruption": Family(
        "1 while most Nodes of a zone (topology.kubernetes.io/zone; empty: Nodes without one) are NotReady"
        " at once (more than 2, at least 55 %): members there are not forced down for a lost Node.",
        ("zone",),
    ),
    "slurm_syncer_nodeset_power_held_members": Family(
        "Members of a power-managed NodeSet whose lost-Node power-down waits: their Node's zone is "
        "disrupted.",
        ("nodeset",),
    ),
    "slurm_syncer_prolog_waiting": Family(
        "PrologSlurmctld questions held now (jobs waiting for their nodes).",
    ),
}
COUNTERS: Final[dict[str, Family]] = {
    "slurm_syncer_slurm_requests": Family(
        "Requests to slurmrestd by endpoint and HTTP status.",
        ("endpoint", "status"),
    ),
    "slurm_syncer_slurm_request_seconds": Family(
        "Time spent in slurmrestd requests by endpoint.",
        ("endpoint",),
    ),
    "slurm_syncer_slurm_response_bytes": Family(
        "Bytes received from slurmrestd by endpoint.",
        ("endpoint",),
    ),
    "slurm_syncer_slurm_fetches": Family(
        "Node cache polls: answered 304/unchanged, full lists, errors.",
        ("result",),
    ),
    "slurm_syncer_slurm_cache_reads": Family(
        "Node cache reads by path: probe (update_time), list (full list), metrics (slurmctld hint).",
        ("path",),
    ),
    "slurm_syncer_slurm_cache_read_bytes": Family(
        "Bytes the node cache received by read path (probe: 200 answers that carried every node).",
        ("path",),
    ),
    "slurm_syncer_slurm_metrics_hint": Family(
        "slurmctld metrics hint reads: changed (list now), unchanged (slurmrestd spared), floor (full "
        "check due), trailing (a list once a burst of moving counts ended), error (fell back to probes).",
        ("result",),
    ),
    "slurm_syncer_slurm_early_lists": Family(
        "Full node lists started while another was in flight, because slurmctld's counts moved again.",
    ),
    "slurm_syncer_slurm_own_work_waits": Family(
        "Full node lists the counts asked for that first waited for the syncer's own drains and undrains "
        "in flight at slurmrestd (at most 2 s each).",
    ),
    "slurm_syncer_kube_watch_restarts": Family(
        "Kubernetes watch streams ended and reopened.",
        ("resource",),
    ),
    "slurm_syncer_kube_relists": Family(
        "Kubernetes full lists (the first, and after 410 Gone or errors).",
        ("resource",),
    ),
    "slurm_syncer_kube_watch_errors": Family(
        "Kubernetes list/watch errors.",
        ("resource",),
    ),
    "slurm_syncer_kube_watch_events": Family(
        "Kubernetes watch events received.",
        ("resource",),
    ),
    "slurm_syncer_kube_requests": Family(
        "Requests to the Kubernetes API.",
        ("result",),
    ),
    "slurm_syncer_kube_request_errors": Family(
        "Kubernetes API requests answered with an error, by HTTP method and status (409: a write raced "
        "another and is retried on the fresh object; 0: no answer).",
        ("method", "status"),
    ),
    "slurm_syncer_kube_throttled_seconds": Family(
        "Wall time Kubernetes API requests were held back by the client-side rate limit (--kube-qps).",
    ),
    "slurm_syncer_queue_retries": Family(
        "Reconciles retried after an error.",
    ),
    "slurm_syncer_safety_valve_refusals": Family(
        "Drains held back by the safety valve.",
    ),
    "slurm_syncer_events": Family(
        "Kubernetes Events: created, aggregated into an existing one, dropped by the per-object limit, "
        "folded into a storm summary on the Lease.",
        ("result",),
    ),
    "slurm_syncer_scheduler_jobs": Family(
        "Slurm jobs standing for scheduler pods: submitted, allocated (at once), allocate-refused (a refused "
        "try, then submitted), cancelled (ended by the scheduler), adopted (found by their marker at the "
        "start: made before a restart or by another leader).",
        ("action",),
    ),
    "slurm_syncer_scheduler_job_errors": Family(
        "Submits, allocations and cancels Slurm refused or did not answer, by call (submit, allocate, "
        "cancel).",
        ("call",),
    ),
    "slurm_syncer_scheduler_teardowns": Family(
        "Scheduler pods' jobs torn down (the pods deleted or the job ended), once per job, by cause: "
        "Slurm's side (cancelled, time-limit, preempted, suspended, requeued, node-failure, job-ended, "
        "job-gone), Kubernetes' (pod-deleted, pod-failed, pod-succeeded, node-deleted) and the scheduler's"
        " own (duplicate, placement).",
        ("cause",),
    ),
    "slurm_syncer_node_attribute_writes": Family(
        "Slurm node updates from Node labels, by kind (features, topology) and result (ok, error, refused "
        "by Slurm, dry_run: what --dry-run held back, as in slurm_syncer_actions_total).",
        ("kind", "result"),
    ),
    "slurm_syncer_feature_labels_refused": Family(
        "Label values Slurm cannot take as a feature (one Event each).",
    ),
    "slurm_syncer_slurm_update_requests": Family(
        "Node update requests sent to Slurm (drain, undrain, features, topology): for one node, or one "
        "bulk POST for many.",
        ("kind",),
    ),
    "slurm_syncer_slurm_updated_nodes": Family(
        "Node updates those requests carried (nodes per request: the ratio of the two).",
    ),
    "slurm_syncer_slurm_bulk_refused": Family(
        "Bulk updates Slurm refused part-way (a node it does not know): it failed, the rest went again.",
    ),
    "slurm_syncer_nodeset_actions": Family(
        "NodeSet actions: pods created and deleted, removals started, Slurm nodes deleted.",
        ("action",),
    ),
    "slurm_syncer_nodeset_power_actions": Family(
        "Power-managed NodeSets: power_up (pod created for a member Slurm powers up), power_down (pod "
        "deleted for a member Slurm powered down), failure (POWER_DOWN_FORCE: a member that could not come"
        " up), declare and undeclare (Slurm records created, and deleted above a lowered ceiling).",
        ("action",),
    ),
    "slurm_syncer_prolog_answers": Family(
        "Answers to the PrologSlurmctld's question (may the job start): none (no node was powering up), "
        "ready (what was powering up registered, its pods Ready), failed (a node failed), waiting (the "
        "wait ran out; it asks again), unusable (caches not synced or Slurm data stale), bad (a bad "
        "request).",
        ("outcome",),
    ),
}
