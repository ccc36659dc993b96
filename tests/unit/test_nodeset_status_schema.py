"""Every field of a NodeSet's status the reconciler writes is declared in the CRD it ships: the API server
prunes an undeclared one silently, and the pass then finds its status changed every time and writes it
again (status.power.declaring was pruned so: the NodeSet was reconciled back to back, and the intent that
makes a record with no comment yet the NodeSet's was never stored). The emulator's schema check, strict, over
the shipped CRD; tests/integration/test_nodeset_crd_real.py writes the same on the real API server."""

from __future__ import annotations

from typing import Any

from syncer.controllers.nodeset.status import compute_status, invalid_status
from syncer.testing.kubeapi.emulator import bundled_crds
from syncer.testing.kubeapi.schema import strict_fields, validate_custom_resource
from tests.unit.test_nodeset_plan import NS
from tests.unit.test_nodeset_power_plan import DOWN, UP, power, rec, run

NOW = "2026-12-02T00:00:00Z"


def undeclared(status: dict[str, Any]) -> list[str]:
    crd = next(c for c in bundled_crds() if c["spec"]["names"]["kind"] == "NodeSet")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    body = {"apiVersion": "slurm-syncer.dev/v1alpha1", "kind": "NodeSet", "metadata": {"name": NS.name}}
    token = strict_fields.set(True)  # unknown fields listed, not pruned
    try:
        _, errors, unknown = validate_custom_resource({**body, "status": status}, schema)
    finally:
        strict_fields.reset(token)
    return unknown + [f"{field}: {message}" for field, message in errors if field.startswith("status")]


def test_a_power_nodesets_status_is_all_declared() -> None:
    spec = power(3)
    result = run(spec, [], [rec("gpu-0", *UP), rec("gpu-1", *DOWN)], declaring=["gpu-2"])
    status = compute_status(
        NS, spec, result, [], {}, slurm_fresh=False, slurm_error="slurmrestd away", now=NOW,
        declare_failed={"gpu-2": "MaxNodeCount reached"}, declaring=["gpu-2"],
    )  # fmt: skip
    assert status["power"]["declaring"] == ["gpu-2"]
    assert undeclared(status) == []


def test_an_invalid_nodesets_status_is_all_declared() -> None:
    assert undeclared(invalid_status(NS, "spec.replicas must be >= 0", NOW)) == []
