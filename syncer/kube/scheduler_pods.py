"""The pods one scheduler name owns, in the namespaces it serves, kept current: one informer per namespace
(all namespaces in one when none is named), each listed and watched with the field selector
`spec.schedulerName=NAME`, which kube-apiserver supports for pods, so it sends no other pod. Decoded into
`SchedulerPod` (syncer/model/kube.py): only what the scheduler reads. Ended pods stay until they are
deleted: their Slurm jobs end on them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from syncer.kube.client import KubeClient
from syncer.kube.informer import Handler, Informer
from syncer.model.kube import SchedulerPod


def _key(pod: SchedulerPod) -> str:
    return pod.key


class _Merged(Mapping[str, SchedulerPod]):
    """The informers' stores as one read-only mapping (namespaces never overlap): nothing is copied."""

    def __init__(self, informers: list[Informer[SchedulerPod]]) -> None:
        self._informers = informers

    def __getitem__(self, key: str) -> SchedulerPod:
        for informer in self._informers:
            if key in informer.items:
                return informer.items[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        for informer in self._informers:
            yield from informer.items

    def __len__(self) -> int:
        return sum(len(informer.items) for informer in self._informers)


class SchedulerPods:
    def __init__(
        self,
        client: KubeClient,
        scheduler_name: str,
        namespaces: tuple[str, ...] = (),
        *,
        watch_timeout_s: float = 300.0,
        inactivity_timeout_s: float = 90.0,
    ) -> None:
        if not scheduler_name:
            raise ValueError("a scheduler name is needed: pods are selected by spec.schedulerName")
        self.scheduler_name = scheduler_name
        self.namespaces = tuple(sorted(set(namespaces)))
        selector = f"spec.schedulerName={scheduler_name}"
        self.informers: dict[str, Informer[SchedulerPod]] = {
            namespace: Informer(
                client,
                f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods",
                "SchedulerPod",
                _key,
                field_selector=selector,
                watch_timeout_s=watch_timeout_s,
                inactivity_timeout_s=inactivity_timeout_s,
            )
            for namespace in self.namespaces or ("",)
        }
        self.items: Mapping[str, SchedulerPod] = _Merged(list(self.informers.values()))

    def subscribe(self, handler: Handler) -> None:
        """`handler(old, new)` on every change of any of these pods (None: added or deleted)."""
        for informer in self.informers.values():
            informer.subscribe(handler)

    def get(self, namespace: str, name: str) -> SchedulerPod | None:
        return self.items.get(f"{namespace}/{name}")

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers.values())

    async def wait_synced(self) -> None:
        for informer in self.informers.values():
            await informer.synced.wait()

    def loops(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """One list-and-watch loop per namespace, for the Manager (a controller's `loops()`)."""
        return {
            f"informer-scheduler-pods{'-' + namespace if namespace else ''}": informer.run
            for namespace, informer in self.informers.items()
        }

    def stats(self) -> dict[str, Any]:
        return {namespace or "*": informer.stats for namespace, informer in self.informers.items()}
