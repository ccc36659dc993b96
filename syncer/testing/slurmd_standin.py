"""Stands in for the slurmd container of NodeSet pods in the emulator: when the fake kubelet runs a
pod, a real slurmd registers the dynamic Slurm node it names (with the pod's SLURM_FEATURES); when
the pod is deleted or ends (phase Failed or Succeeded), that slurmd stops. The Slurm record itself is
left to whoever deletes it (the syncer), as in a real cluster."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import structlog

from syncer.model.keys import Keys
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi.store import Change
from syncer.testing.sandbox import Sandbox, SandboxError

log = structlog.get_logger("syncer.testing.slurmd")
# A test convention beside the emulator's (docs/emulator.md): a pod with a container image under this prefix
# runs and turns Ready, but its slurmd never starts (Slurm keeps a member it powers up POWERING_UP)
HANGS = "hangs.example/"


def _image(container: dict[str, Any]) -> str:
    return str(container.get("image") or "")


def _env(pod: dict[str, Any], name: str) -> str:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for entry in container.get("env") or []:
            if entry.get("name") == name:
                return str(entry.get("value") or "")
    return ""


class SlurmdStandIn:
    def __init__(
        self, kube: KubeApiEmulator, sandbox: Sandbox, *, cpus: int = 1, memory_mb: int = 400,
        boot: bool = False, port_base: int = 0, nodesets: tuple[str, ...] = (),
        port_of: Callable[[str], int] | None = None, namespace: str = "",
    ) -> None:  # fmt: skip
        self.kube = kube
        self.sandbox = sandbox
        self.boot = boot  # slurmd -b, as the pods of a power-managed NodeSet start it
        self.port_base = port_base  # the syncer's nodeset_power_port_base: member <n> listens on base + n
        self.port_of = port_of  # the syncer's nodeset_power_ports
        self.cpus = cpus
        self.nodesets = nodesets  # the pods of these NodeSets only (empty: every NodeSet's)
        self.namespace = namespace  # the pods of this namespace only (empty: every namespace's)
        self.memory_mb = memory_mb
        self.running: set[str] = set()  # Slurm node names whose slurmd runs
        self.failures: list[str] = []
        self._pending: asyncio.Queue[tuple[str, str, tuple[str, ...]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> SlurmdStandIn:
        self.kube.api.store.listeners.append(self._on_change)
        self._task = asyncio.create_task(self._run(), name="slurmd-standin")
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(ValueError):
            self.kube.api.store.listeners.remove(self._on_change)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for name in sorted(self.running):
            await asyncio.to_thread(self.sandbox.stop_slurmd, name)
        self.running.clear()

    def _on_change(self, change: Change) -> None:
        if change.resource != ("", "pods"):
            return
        pod = change.obj
        labels = pod["metadata"].get("labels") or {}
        name = labels.get(Keys.NODE_NAME_LABEL)
        if not name or Keys.NODESET_LABEL not in labels:
            return
        if self.nodesets and labels[Keys.NODESET_LABEL] not in self.nodesets:
            return
        if self.namespace and pod["metadata"].get("namespace") != self.namespace:
            return
        if any(_image(c).startswith(HANGS) for c in (pod.get("spec") or {}).get("containers") or []):
            return  # its entrypoint hangs before slurmd starts: the pod runs, Slurm hears nothing
        # a pod that ended (Failed: evicted; Succeeded) has no container left running: its slurmd is gone
        ended = (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")
        gone = change.type == "DELETED" or bool(pod["metadata"].get("deletionTimestamp")) or ended
        if gone:
            self._pending.put_nowait(("stop", name, ()))
        elif (pod.get("status") or {}).get("phase") == "Running":
            features = tuple(f for f in _env(pod, "SLURM_FEATURES").split(",") if f)
            self._pending.put_nowait(("start", name, features))

    def _port(self, name: str) -> int:
        if self.port_of is not None:
            return self.port_of(name)
        ordinal = name.rsplit("-", 1)[-1]
        return self.port_base + int(ordinal) if self.port_base and ordinal.isdigit() else 0

    async def _run(self) -> None:
        while True:
            action, name, features = await self._pending.get()
            try:
                if action == "start" and name not in self.running:
                    await asyncio.to_thread(
                        self.sandbox.start_slurmd, name, self.cpus, self.memory_mb, features, self.boot,
                        self._port(name),
                    )  # fmt: skip
                    self.running.add(name)
                elif action == "stop" and name in self.running:
                    await asyncio.to_thread(self.sandbox.stop_slurmd, name)
                    self.running.discard(name)
            except SandboxError as exc:
                self.failures.append(f"{action} {name}: {exc}")
                log.warning("slurmd stand-in failed", action=action, node=name, error=str(exc))
