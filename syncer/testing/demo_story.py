"""How the demo tells its story: a step, a detail, what the syncer did, and waiting for a claim to hold.
Shared by the demo's scenes (syncer/testing/demo*.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from syncer.app.service import SyncerService
from syncer.slurm.client import SlurmClient
from syncer.testing.demo_log import ActionTap
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox


class DemoError(RuntimeError):
    pass


class Stage(Protocol):
    """What a scene plays on (demo.World): a scene module needs no import of demo.py."""

    sandbox: Sandbox
    kube: KubeApiEmulator
    service: SyncerService
    reader: SlurmClient
    tap: ActionTap

    def told(self, *subjects: str, kinds: tuple[str, ...] = ()) -> None: ...


def ready_node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A Ready Kubernetes Node (the emulator's kubelet runs pods only on Ready ones)."""
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}
    return {"metadata": meta, "status": {"conditions": [ready]}}


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def detail(text: str) -> None:
    print(f"    {text}", flush=True)


def syncer_did(lines: list[str]) -> None:
    """What the syncer logged it did (lines from the tap, so printed after it happened)."""
    for line in lines:
        print(f"      syncer: {line}", flush=True)


async def wait(check: Callable[[], Awaitable[bool] | bool], what: str, deadline_s: float = 60) -> float:
    """Seconds until `check` holds; a clear error after `deadline_s`."""
    started = time.monotonic()
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return time.monotonic() - started
        if time.monotonic() - started > deadline_s:
            raise DemoError(f"gave up after {deadline_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.05)  # poll interval of the condition
