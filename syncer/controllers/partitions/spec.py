"""A SlurmPartition custom resource, pure: its spec as typed settings, its members resolved to Slurm node
names (`Wanted` for plan/partitions.py), and the status document for what the plan decided and Slurm has.
No I/O: the controller passes the Nodes, the binding and the NodeSets' members it has cached."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from syncer.controllers.partitions.plan import Outcome, Wanted
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode
from syncer.slurm.hostlist import TooManyHosts, expand
from syncer.slurm.partitions import DEFAULT_SHARE, OverSubscribe, PartitionSettings, PartitionState

# spec.nodes.hosts: names per CR (the CRD's CEL rule says the same); a hostlist naming more is refused before
# it is expanded (n[0-99999999999] expanded took 24 GB: issue 45)
MAX_HOSTS = 65_536
EMPTY_SELECTOR = (
    "it would take every Node; name a label (every Node on purpose: matchExpressions "
    "[{key: kubernetes.io/hostname, operator: Exists}])"
)

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

BoundSlurmNodes = Callable[[str], Iterable[str]]  # Kubernetes Node -> the Slurm nodes bound to it
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


def empty_selector(selector: Mapping[str, Any]) -> bool:
    """No matchLabels and no matchExpressions: Kubernetes reads it as every Node."""
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def wanted_from(
    cr: Mapping[str, Any],
    nodes: Iterable[KubeNode],
    bound: BoundSlurmNodes,
    nodeset_members: NodeSetMembers,
    observed: int | None = None,
) -> Wanted:
    """The CR as the plan takes it; what cannot be resolved is a problem naming its field (no write then).
    `nodes` are the Nodes to match the selector against (the controller's index passes those it matches);
    `observed` is the generation the CR's last status was written for (None: no status yet)."""
    meta, spec = cr["metadata"], cr.get("spec", {})
    problems: list[str] = []
    membership = spec.get("nodes") or {}
    selected = _selected(membership.get("selector"), nodes, bound, problems)
    joining = _nodeset_members(membership.get("nodeSets") or [], nodeset_members, problems)
    hosts = _hosts(membership.get("hosts") or [], problems)
    return Wanted(
        cr=meta["name"],
        partition=partition_name(cr),
        nodes=frozenset(selected | joining | hosts),
        settings=settings_from_spec(spec),
        adopt=bool(spec.get("adopt", False)),
        deleting=bool(meta.get("deletionTimestamp")),
        order=(str(meta.get("creationTimestamp", "")), str(meta.get("uid", ""))),
        problems=tuple(problems),
        joining=frozenset(joining - selected - hosts),
        generation=int(meta.get("generation", 0)),
        observed=observed,
    )


def _selected(
    selector: Mapping[str, Any] | None, nodes: Iterable[KubeNode], bound: BoundSlurmNodes, problems: list[str]
) -> set[str]:
    """The Slurm nodes bound to the Nodes the selector matches: every one of a Node's (two slurmd pods on
    one Node: both)."""
    if selector is None:
        return set()
    if empty_selector(selector):
        problems.append(f"spec.nodes.selector is empty: {EMPTY_SELECTOR}")
        return set()
    matched = [node.name for node in nodes if selector_matches(selector, node.labels)]
    slurm = {name for node in matched for name in bound(node)}
    if not matched:
        problems.append("spec.nodes.selector matches no Node")
    elif not slurm:
        problems.append(f"spec.nodes.selector matches {len(matched)} Node(s), none bound to a Slurm node yet")
    return slurm


def _nodeset_members(
    refs: Iterable[Mapping[str, Any]], nodeset_members: NodeSetMembers, problems: list[str]
) -> set[str]:
    """Every Slurm node a named NodeSet declares (powered down or not); one that declares none is a
    problem, never a partition emptied without a word."""
    members: set[str] = set()
    for ref in refs:
        named = f"NodeSet {ref['namespace']}/{ref['name']}"
        found = nodeset_members(ref["namespace"], ref["name"])
        if found is None:
            problems.append(f"spec.nodes.nodeSets: {named} does not exist")
            continue
        names = set(found)
        if not names:
            problems.append(
                f"spec.nodes.nodeSets: {named} has no members now (no pod, no member declared to Slurm yet)"
            )
        members |= names
    return members


def _hosts(hostlists: Iterable[str], problems: list[str]) -> set[str]:
    """The hostlists' names, counted before any is made: at most MAX_HOSTS in all."""
    members: set[str] = set()
    left = MAX_HOSTS
    for i, hostlist in enumerate(hostlists):
        try:
            names = expand(hostlist, limit=left)
        except TooManyHosts as exc:
            problems.append(
                f"spec.nodes.hosts[{i}]: {hostlist!r} names {exc.count:,} hosts: at most {MAX_HOSTS:,} in all"
            )
            return set()
        except ValueError:
            problems.append(f"spec.nodes.hosts[{i}]: {hostlist!r} is not a Slurm hostlist (e.g. gpu[01-04])")
            continue
        left -= len(names)
        members.update(names)
    return members


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


RUNNING_STATES = frozenset({"RUNNING", "SUSPENDED"})  # base states of a job holding nodes in the partition


def partition_jobs(counts: Mapping[tuple[str, str], int]) -> dict[str, tuple[int, int]]:
    """Per partition (running, pending) from the service's job poll ({(partition, state): jobs}, from
    slurmctld's metrics or slurmrestd's job list). A job pending in several partitions (`a,b`) counts in
    each; flags (CONFIGURING, COMPLETING, ...) and ended states count nowhere."""
    found: dict[str, list[int]] = {}
    for (partitions, state), jobs in counts.items():
        slot = 1 if state == "PENDING" else 0 if state in RUNNING_STATES else None
        if slot is None or jobs <= 0:
            continue
        for name in filter(None, partitions.split(",")):
            found.setdefault(name, [0, 0])[slot] += jobs
    return {name: (running, pending) for name, (running, pending) in found.items()}
