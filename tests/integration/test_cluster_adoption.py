"""Two releases both adopting unlabelled objects (syncer/control/scope.py) against the Kubernetes API
emulator: each object ends up labelled by exactly one of them, the other's write finds the label and does
nothing, and neither release's informer ever lists the other's objects."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from syncer.control.context import ControllerContext
from syncer.control.gate import WriteGate
from syncer.control.scope import Scope
from syncer.kube.client import KubeClient
from syncer.kube.writer import KubeWriter
from syncer.model.cluster import LABEL
from syncer.model.kube import KubeCustomObject
from syncer.runtime.tasks import cancel_and_wait
from syncer.testing.kubeapi import KubeApiEmulator
from tests.helpers import wait_for

pytestmark = pytest.mark.kube
GROUP, VERSION, PLURAL = "slurm-syncer.dev", "v1alpha1", "slurmpartitions"
PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
OBJECTS = 20


async def scope_of(stack: AsyncExitStack, kubeconfig: Path, cluster: str) -> Scope[KubeCustomObject]:
    kube = await KubeClient.from_config(str(kubeconfig))
    stack.push_async_callback(kube.close)
    context = SimpleNamespace(
        kube=kube,
        writer=KubeWriter(kube, WriteGate(always_leader=True)),
        cluster=cluster,
        adopt_unlabelled=True,
    )
    scope: Scope[KubeCustomObject] = Scope(
        cast(ControllerContext, context), PATH, "SlurmPartition", lambda o: o.name, "slurmpartitions"
    )
    tasks = [asyncio.ensure_future(loop()) for loop in scope.loops().values()]
    stack.push_async_callback(cancel_and_wait, tasks)
    await asyncio.wait_for(scope.synced(), 30)
    return scope


@pytest.fixture
async def releases(
    kube_api: KubeApiEmulator, kubeconfig: Path
) -> AsyncIterator[list[Scope[KubeCustomObject]]]:
    async with AsyncExitStack() as stack:
        yield [await scope_of(stack, kubeconfig, name) for name in ("gpu-a", "gpu-b")]


def partition(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"nodes": {"hosts": ["n1"]}}}


def labels(kube_api: KubeApiEmulator, name: str) -> dict[str, Any]:
    obj = kube_api.get(GROUP, VERSION, PLURAL, name) or {}
    return dict(obj.get("metadata", {}).get("labels") or {})


async def test_each_unlabelled_object_is_taken_by_exactly_one_release(
    kube_api: KubeApiEmulator, releases: list[Scope[KubeCustomObject]]
) -> None:
    a, b = releases
    kube_api.create(GROUP, VERSION, PLURAL, partition("a-own", {LABEL: "gpu-a"}))
    kube_api.create(GROUP, VERSION, PLURAL, partition("other", {LABEL: "hpc-c"}))
    names = [f"u{i}" for i in range(OBJECTS)]
    for name in names:
        kube_api.create(GROUP, VERSION, PLURAL, partition(name, {"team": "ml"}))
    await wait_for(
        lambda: all(set(names) <= set(s.waiting()) for s in releases), deadline_s=20, what="both see them"
    )
    assert "a-own" not in b.informer.items and "a-own" not in b.waiting(), "B never lists A's object"
    assert "a-own" in a.informer.items and "other" not in a.informer.items and "other" not in a.waiting()
    # both at once, each object by both: the resourceVersion precondition lets one write through
    taken = await asyncio.gather(*(s.adopt(f"{PATH}/{n}", n) for n in names for s in releases))
    by_a, by_b = taken[0::2], taken[1::2]
    assert all(x != y for x, y in zip(by_a, by_b, strict=True)), "exactly one release took each"
    for name, took_a in zip(names, by_a, strict=True):
        assert labels(kube_api, name) == {"team": "ml", LABEL: "gpu-a" if took_a else "gpu-b"}
    assert a.adopted + b.adopted == OBJECTS
    # from then on each lists only its own: none is left waiting, none is in both
    await wait_for(
        lambda: not a.waiting() and not b.waiting()
        and len(a.informer.items) + len(b.informer.items) == OBJECTS + 1,
        deadline_s=20, what="each object in one release's informer",
    )  # fmt: skip
    assert not set(a.informer.items) & set(b.informer.items)
    # an object taken already is not taken again, nor one labelled by someone (even empty)
    kube_api.create(GROUP, VERSION, PLURAL, partition("empty", {LABEL: ""}))
    owner = labels(kube_api, "u0")[LABEL]
    assert not await a.adopt(f"{PATH}/u0", "u0") and not await b.adopt(f"{PATH}/u0", "u0")
    assert labels(kube_api, "u0")[LABEL] == owner
    assert not await a.adopt(f"{PATH}/empty", "empty") and labels(kube_api, "empty") == {LABEL: ""}
    assert not await a.adopt(f"{PATH}/gone", "gone"), "a deleted object: nothing taken"
