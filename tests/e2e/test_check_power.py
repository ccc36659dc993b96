"""The whole `slurm-syncer check` (collect(): Slurm, token, Kubernetes, RBAC, then the NodeSets) on the
shared rig reports the power-saving items once a NodeSet has `spec.power`, and none without one (issue 39:
"check reads GET /conf and reports what power saving needs"). The session sandbox has SuspendTime=600,
both programs /bin/true and SuspendExcNodes=sbx-real: on 26.05 every power item passes; before REST
v0.0.45 (24.11) one WARN says nothing could be checked."""

from __future__ import annotations

from typing import Any

import pytest

from syncer.app import settings as settings_mod
from syncer.app.check_cmd import Item, collect
from syncer.app.cli import build_parser
from tests.e2e.rig import NAMESPACE, Rig
from tests.e2e.test_nodeset import GROUP, VERSION, manifest
from tests.fixtures.slurm import SELECTED

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


async def full_check(rig: Rig) -> list[Item]:
    argv = [
        "check", "--no-write-probe", "--slurm-url", rig.sandbox.rest_url,
        "--slurm-token-file", str(rig.sandbox.token_file), "--kubeconfig", str(rig.kubeconfig),
    ]  # fmt: skip
    args = build_parser(argv).parse_args(argv)
    return await collect(settings_mod.load(args, {}), no_write_probe=True)


def power_items(items: list[Item]) -> list[Item]:
    keys = ("SuspendTime", "SuspendProgram", "ResumeTimeout", "SuspendExc", "power saving for NodeSet")
    return [i for i in items if i.what.startswith(keys) or "SuspendExcNodes" in i.what]


async def test_full_check_reports_power_saving_for_a_power_managed_nodeset(rig: Rig) -> None:
    assert power_items(await full_check(rig)) == []  # no spec.power anywhere: SuspendTime=NONE is fine then
    body: dict[str, Any] = manifest("chkpower", 0)
    body["spec"]["power"] = {"minReplicas": 0, "maxReplicas": 4}
    resource = rig.kube.api.resource(GROUP, VERSION, "nodesets")
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    rig.kube.create(GROUP, VERSION, "nodesets", body, namespace=NAMESPACE)
    try:
        items = power_items(await full_check(rig))
    finally:
        rig.kube.api.delete(resource, NAMESPACE, "chkpower")
    if SELECTED.name == "24.11":
        [item] = items
        assert item.ok and item.warn and f"NodeSet(s) {NAMESPACE}/chkpower: not checked" in item.what
        return
    assert [(i.ok, i.warn) for i in items] == [(True, False)] * 4, items
    assert items[0].what.startswith("SuspendTime=600")
    assert items[3].what == (
        "no SuspendExcNodes, SuspendExcParts or SuspendExcStates covers "
        f"NodeSet {NAMESPACE}/chkpower's members"
    )
