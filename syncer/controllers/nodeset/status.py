"""A NodeSet's status from what the reconciler sees: pod counts, Slurm state counts, conditions."""

from __future__ import annotations

from typing import Any

from syncer.controllers.nodeset.manifests import selector
from syncer.controllers.nodeset.plan import Plan, ready, removal_of, slurm_name
from syncer.controllers.nodeset.power import declare_failed_message, name_collision_message
from syncer.controllers.nodeset.spec import NodeSetSpec
from syncer.model.keys import Keys
from syncer.model.kube import KubeNodeSet, KubePod
from syncer.model.slurm import SlurmNode


def slurm_counts(nodes: list[SlurmNode]) -> dict[str, int]:
    counts = {"idle": 0, "allocated": 0, "mixed": 0, "drained": 0, "down": 0}
    for node in nodes:
        if node.unhealthy:
            counts["down"] += 1
        elif node.drain_flag:
            counts["drained"] += 1
        elif node.base_state == "ALLOCATED":
            counts["allocated"] += 1
        elif node.base_state == "MIXED":
            counts["mixed"] += 1
        elif node.base_state == "IDLE":
            counts["idle"] += 1
    return counts


def merge_patched(stored: Any, patch: Any) -> Any:
    """`stored` with the JSON merge patch `patch` applied (RFC 7386), as the API server stores it: what a
    status write leaves, keys it does not name included."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(stored) if isinstance(stored, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patched(merged.get(key), value)
    return merged


def _condition(
    previous: list[Any], type_: str, status: str, reason: str, message: str, now: str, generation: int
) -> dict[str, Any]:
    old = next((c for c in previous if isinstance(c, dict) and c.get("type") == type_), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == status else now
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or now,
        "observedGeneration": generation,
    }


def invalid_status(nodeset: KubeNodeSet, error: str, now: str) -> dict[str, Any]:
    previous = list(nodeset.status.get("conditions") or [])  # type: ignore[call-overload]
    status = {k: v for k, v in nodeset.status.items() if k != "conditions"}
    status["observedGeneration"] = nodeset.generation
    status["selector"] = selector(nodeset.name)
    status["conditions"] = [
        _condition(previous, "Valid", "False", "InvalidSpec", error, now, nodeset.generation)
    ]
    return status


def compute_status(
    nodeset: KubeNodeSet,
    spec: NodeSetSpec,
    result: Plan,
    pods: list[KubePod],
    slurm_nodes: dict[str, SlurmNode],
    *,
    slurm_fresh: bool,
    slurm_error: str,
    now: str,
    power_unsupported: str = "",
    declare_failed: dict[str, str] | None = None,
    declaring: list[str] | None = None,
) -> dict[str, Any]:
    """The status of what `result` (this pass's plan) leaves: counts, Slurm states and conditions."""
    current_hash = spec.template_hash()
    live = [p for p in pods if not p.terminating]
    members = [slurm_nodes[slurm_name(p)] for p in live if slurm_name(p) in slurm_nodes]
    previous = list(nodeset.status.get("conditions") or [])  # type: ignore[call-overload]
    gen = nodeset.generation
    foreign = result.power.foreign if result.power is not None else []
    if foreign:  # the spec is fine, but names it claims are someone else's: rename it, or clear those
        message = name_collision_message(foreign)
        conditions = [_condition(previous, "Valid", "False", "NameCollision", message, now, gen)]
    else:
        conditions = [_condition(previous, "Valid", "True", "SpecAccepted", "", now, gen)]
    if slurm_fresh:
        conditions.append(_condition(previous, "SlurmAvailable", "True", "Fresh", "", now, gen))
    else:
        message = f"Slurm data is stale or missing ({slurm_error or 'no answer yet'}): removals wait"
        conditions.append(_condition(previous, "SlurmAvailable", "False", "Stale", message, now, gen))
    if result.timed_out:
        message = (
            f"{len(result.timed_out)} node(s) still running jobs after drainTimeout "
            f"{spec.drain_timeout_s:.0f} s: {', '.join(sorted(result.timed_out)[:10])}; "
            "they are not forced: finish or cancel their jobs"
        )
        conditions.append(_condition(previous, "DrainTimeout", "True", "JobsStillRunning", message, now, gen))
    else:
        conditions.append(_condition(previous, "DrainTimeout", "False", "NoneOverdue", "", now, gen))
    if result.idle:
        conditions.append(_condition(previous, "Progressing", "False", "Steady", "", now, gen))
    else:
        message = _progress_message(result)
        conditions.append(_condition(previous, "Progressing", "True", "Reconciling", message, now, gen))
    extra: dict[str, Any] = {}
    if spec.power is not None and result.power is not None:
        # the intent survives until each record carries its comment (power.py `ours`): [] replaces it
        extra["power"] = {**result.power.counts, "declaring": list(declaring or [])}
        conditions.append(_power_condition(nodeset, spec, result, power_unsupported, previous, now))
        conditions.extend(_power_failures(result, declare_failed or {}, previous, now, gen))
    elif "power" in nodeset.status:
        extra["power"] = None  # spec.power removed: the merge patch deletes the counts it would leave stale
    return {
        **extra,
        "observedGeneration": gen,
        "replicas": len(live),
        "readyReplicas": sum(1 for p in live if ready(p)),
        "updatedReplicas": sum(1 for p in live if p.labels.get(Keys.TEMPLATE_HASH_LABEL) == current_hash),
        "availableReplicas": sum(1 for p in live if ready(p) and not removal_of(p)),
        "selector": selector(nodeset.name),
        "templateHash": current_hash,
        "slurm": slurm_counts(members),
        "conditions": conditions,
    }


def _progress_message(result: Plan) -> str:
    """`Progressing`'s message: what this round does, and what blocks it."""
    parts = []
    if result.create:
        parts.append(f"creating {len(result.create)}")
    if result.draining:
        parts.append(f"draining {len(result.draining)}: {', '.join(sorted(result.draining)[:10])}")
    removing = [n for n in result.delete_pods if n not in result.ended]
    if removing:
        parts.append(f"removing {len(removing)} pod(s)")
    if result.ended:
        parts.append(f"{len(result.ended)} pod(s) ended, deleted: {', '.join(sorted(result.ended)[:10])}")
    if result.delete_slurm_nodes:
        parts.append(f"deleting {len(result.delete_slurm_nodes)} Slurm node(s)")
    if result.blocked:
        parts.append(result.blocked)
    return "; ".join(parts) or "converging"


def _power_failures(
    result: Plan, declare_failed: dict[str, str], previous: list[Any], now: str, gen: int
) -> list[dict[str, Any]]:
    """`PowerUpFailed` and `DeclareFailed`: the members Slurm failed to power up or refused to declare."""
    assert result.power is not None
    failed = result.power.failed
    if failed:
        message = "; ".join(f"{name}: {why}" for name, why in sorted(failed.items())[:5])
        power_up = _condition(previous, "PowerUpFailed", "True", "PoweredDown", message, now, gen)
    else:
        power_up = _condition(previous, "PowerUpFailed", "False", "NoFailures", "", now, gen)
    if declare_failed:
        message = declare_failed_message(declare_failed)
        declare = _condition(previous, "DeclareFailed", "True", "SlurmRefused", message, now, gen)
    else:
        declare = _condition(previous, "DeclareFailed", "False", "AllDeclared", "", now, gen)
    return [power_up, declare]


def _power_condition(
    nodeset: KubeNodeSet, spec: NodeSetSpec, result: Plan, unsupported: str, previous: list[Any], now: str
) -> dict[str, Any]:
    """`PowerSaving`: True while Slurm's power states drive the members; False says what is missing."""
    assert spec.power is not None and result.power is not None
    gen = nodeset.generation
    if unsupported:
        ceiling = spec.power.max_replicas
        line = spec.power.node.node_conf(
            f"{nodeset.name}-[0-{ceiling - 1}]" if ceiling > 1 else f"{nodeset.name}-0"
        )
        message = f"{unsupported}; name the members in slurm.conf instead: {line}"
        return _condition(previous, "PowerSaving", "False", "SlurmCannotCreateNodes", message, now, gen)
    counts = result.power.counts
    message = (
        f"{counts['poweredUp']} up, {counts['poweringUp']} powering up, "
        f"{counts['poweredDown']} powered down, {counts['poweringDown']} powering down, "
        f"{counts['heldByAdmin']} held (DOWN/DRAIN not ours)"
    )
    return _condition(previous, "PowerSaving", "True", "Active", message, now, gen)
