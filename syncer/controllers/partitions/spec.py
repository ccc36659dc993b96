"""A SlurmPartition custom resource, pure: its spec as typed settings, its members resolved to Slurm node
names (`Wanted` for plan/partitions.py), and the status document for what the plan decided and Slurm has.
No I/O: the controller passes the Nodes, the binding and the NodeSets' members it has cached."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from syncer.controllers.partitions.plan import Outcome, Wanted
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode
from syncer.slurm.hostlist import expand
from syncer.slurm.models import Job
from syncer.slurm.partitions import DEFAULT_SHARE, OverSubscribe, PartitionSettings, PartitionState

# spec key -> PartitionSettings field, for the fields taken as they are
_PLAIN = {
    "state": "state", "default": "default", "hidden": "hidden", "maxTime": "max_time",
    "defaultTime": "default_time", "maxNodes": "max_nodes", "minNodes": "min_nodes",
    "priorityTier": "priority_tier", "priorityJobFactor": "priority_job_factor", "graceTime": "grace_time",
    "qos": "qos", "exclusive": "exclusive", "alternate": "alternate",
}  # fmt: skip
_NAMES = {
    "allowAccounts": "allow_accounts", "denyAccounts": "deny_accounts", "allowGroups": "allow_groups",
    "allowQos": "allow_qos", "denyQos": "deny_qos",
}  # fmt: skip

BoundSlurmNode = Callable[[str], str | None]  # Kubernetes Node -> its bound Slurm node, if bound
NodeSetMembers = Callable[[str, str], Iterable[str] | None]  # (namespace, name) -> Slurm nodes; None: no such


def settings_from_spec(spec: Mapping[str, Any]) -> PartitionSettings:
    values: dict[str, Any] = {field: spec[key] for key, field in _PLAIN.items() if key in spec}
    values.update({field: tuple(sorted(spec[key])) for key, field in _NAMES.items() if key in spec})
    over = spec.get("overSubscribe")
    if over is not None:
        mode = str(over.get("mode", ""))
        # Slurm stores YES/FORCE without a count as YES:4/FORCE:4: wanting the same keeps the plan quiet
        jobs = int(over.get("jobs", DEFAULT_SHARE if mode in ("YES", "FORCE") else 0))
        values["oversubscribe"] = OverSubscribe(mode, jobs)
    return PartitionSettings(**values)


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A `metav1.LabelSelector`: each matchLabels pair and each expression holds (empty: matches all)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        holds = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(operator, False)
        if not holds:
            return False
    return True


def partition_name(cr: Mapping[str, Any]) -> str:
    return str(cr.get("spec", {}).get("partitionName") or cr["metadata"]["name"])


def wanted_from(
    cr: Mapping[str, Any], nodes: Iterable[KubeNode], bound: BoundSlurmNode, nodeset_members: NodeSetMembers
) -> Wanted:
    """The CR as the plan takes it; what cannot be resolved is a problem naming its field (no write then)."""
    meta, spec = cr["metadata"], cr.get("spec", {})
    members: set[str] = set()
    problems: list[str] = []
    membership = spec.get("nodes") or {}
    selector = membership.get("selector")
    if selector is not None:
        matched = [node.name for node in nodes if selector_matches(selector, node.labels)]
        slurm = {name for name in (bound(node) for node in matched) if name}
        if not matched:
            problems.append("spec.nodes.selector matches no Node")
        elif not slurm:
            problems.append(
                f"spec.nodes.selector matches {len(matched)} Node(s), none bound to a Slurm node yet"
            )
        members |= slurm
    for ref in membership.get("nodeSets") or []:
        found = nodeset_members(ref["namespace"], ref["name"])
        if found is None:
            problems.append(f"spec.nodes.nodeSets: NodeSet {ref['namespace']}/{ref['name']} does not exist")
        else:
            members.update(found)
    for i, hostlist in enumerate(membership.get("hosts") or []):
        try:
            members.update(expand(hostlist))
        except ValueError:
            problems.append(f"spec.nodes.hosts[{i}]: {hostlist!r} is not a Slurm hostlist (e.g. gpu[01-04])")
    return Wanted(
        cr=meta["name"],
        partition=partition_name(cr),
        nodes=frozenset(members),
        settings=settings_from_spec(spec),
        adopt=bool(spec.get("adopt", False)),
        deleting=bool(meta.get("deletionTimestamp")),
        order=(str(meta.get("creationTimestamp", "")), str(meta.get("uid", ""))),
        problems=tuple(problems),
    )


def record_of(cr: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """(CR, partition, "created"|"adopted"|None) for `plan.partitions.records`."""
    annotations = cr["metadata"].get("annotations") or {}
    how = annotations.get(Keys.PARTITION_OWNER)
    return cr["metadata"]["name"], partition_name(cr) if how else None, how


def status_of(
    outcome: Outcome,
    have: PartitionState | None,
    jobs: tuple[int, int],
    generation: int,
    ownership: str | None,
    previous: Mapping[str, Any],
    now: str,
) -> dict[str, Any]:
    """The status document: what Slurm has now, the Ready condition (its lastTransitionTime kept while its
    status does not change), observedGeneration. `jobs` is (running, pending) in the partition."""
    status = "True" if outcome.ready else "False"
    old = next((c for c in previous.get("conditions") or [] if c.get("type") == "Ready"), None)
    since = (
        old["lastTransitionTime"]
        if old and old.get("status") == status and "lastTransitionTime" in old
        else now
    )
    document: dict[str, Any] = {
        "observedGeneration": generation,
        "partitionName": outcome.partition,
        "conditions": [{
            "type": "Ready", "status": status, "reason": outcome.reason, "message": outcome.message,
            "lastTransitionTime": since, "observedGeneration": generation,
        }],
    }  # fmt: skip
    if ownership:
        document["ownership"] = ownership
    if have is not None:
        document["slurm"] = {
            "state": have.settings.state or "", "nodes": have.node_list, "totalNodes": len(have.nodes),
            "totalCpus": have.total_cpus, "runningJobs": jobs[0], "pendingJobs": jobs[1],
        }  # fmt: skip
    return document


# states after which a job no longer holds its partition (Slurm deletes it once only these remain)
ENDED = frozenset({
    "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
    "OUT_OF_MEMORY",
})  # fmt: skip


def job_counts(jobs: Iterable[Job]) -> dict[str, tuple[int, int]]:
    """Per partition (running, pending) from `GET /jobs`. A job pending in several partitions (`-p a,b`)
    counts in each; a job that ended counts nowhere."""
    counts: dict[str, list[int]] = {}
    for job in jobs:
        if job.states & ENDED or not job.states:
            continue
        slot = 1 if "PENDING" in job.states else 0
        for name in filter(None, job.partition.split(",")):
            counts.setdefault(name, [0, 0])[slot] += 1
    return {name: (running, pending) for name, (running, pending) in counts.items()}
