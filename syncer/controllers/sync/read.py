"""The read step of a sync reconcile: all that `decide` is given about one Slurm node, read once.

The Kubernetes side is the node's binding (its pod and Node) from the cache with our own recent annotation
writes laid over (written.py); the Slurm side is the node from the Slurm cache, or, while our own write's
echo is owed, the node as read from slurmrestd once since that write; then what other controllers say of
it (the NodeSet scaling it in, the scheduler's hold) and, for a Node several slurmd pods share, the Slurm
nodes of the others."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace

from syncer.control.binding import Binding, claim
from syncer.control.context import ControllerContext
from syncer.controllers.sync.written import WrittenAnnotations, WrittenSlurm
from syncer.kube.cache import KubeCache
from syncer.model.kube import KubeNode, KubePod
from syncer.model.slurm import SlurmNode
from syncer.slurm.errors import SlurmError


@dataclass(frozen=True)
class Reading:
    """One Slurm node as one reconcile sees it. Past the binding nothing is read for a conflicting or
    unbound name (the rest keeps its defaults)."""

    binding: Binding
    now: float = 0.0  # the clock when the binding was read: what `decide` measures graces from
    slurm_node: SlurmNode | None = None
    fresh: bool = False  # the Slurm cache is not stale
    echo_owed: bool = False  # we wrote this node and the Slurm cache has not caught up (`fresh` only)
    read_now: SlurmNode | None = None  # read from slurmrestd in this very reconcile
    node_slurm: list[tuple[str, SlurmNode | None]] | None = None
    scale_in: str | None = None  # the NodeSet scaling it in, by name
    held: str | None = None  # the scheduler's hold, as the drain cause's text
    # every pod and Node claiming the name, as read with the binding: a conflict's Warnings go on each
    claimants: tuple[KubePod | KubeNode, ...] = ()
    # False: a Kubernetes watch was reconnecting (a change made meanwhile may be missing): not read (`again`)
    kube_current: bool = True


class Reader:
    def __init__(
        self,
        context: ControllerContext,
        *,
        written: WrittenAnnotations,
        slurm_writes: WrittenSlurm,
        fresh_reads: int,
    ) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.written = written
        self.slurm_writes = slurm_writes
        # the reads of single nodes in flight at once, at most `fresh_reads` (workers outnumber it)
        self.fresh_reads = asyncio.Semaphore(fresh_reads)

    async def fresh(self, name: str) -> SlurmNode:
        """The node as slurmrestd shows it now (`GET /node/{name}`), once a read slot is free."""
        async with self.fresh_reads:
            return await self.context.slurm.get_node(name)

    async def read_node(self, name: str, *, after: Reading | None = None) -> Reading:
        """One ordered pass: the binding (our own recent writes laid over it), the Slurm side (read once from
        slurmrestd since our own write while its echo is owed), what other controllers say of the node, and
        the Slurm nodes of the others on a Node several slurmd pods share.

        `after`: the reading a drain or undrain was decided on. The node is read again from slurmrestd first
        (unless that reading just did), then Kubernetes as the cache shows it now (not at all in a watch gap),
        for the action to be decided again before it is sent (the Node's other Slurm nodes are not read: they
        decide its conditions only)."""
        slurm_node: SlurmNode | None = None
        if after is not None:
            slurm_node = after.read_now if after.read_now is not None else await self.fresh(name)
            if not self.context.kube_cache.current:
                return Reading(Binding(name), slurm_node=slurm_node, fresh=True, kube_current=False)
        binding, sharing, claimants = self._kube_side(name)
        if not binding.bound:
            return Reading(binding, slurm_node=slurm_node, fresh=after is not None, claimants=claimants)
        now = self.context.clock()
        cache = self.context.slurm_cache
        fresh, owed, read_now = True, False, None
        if after is None:
            slurm_node = cache.nodes.get(name)
            fresh = not cache.stale
            owed = fresh and self.slurm_writes.owed(name, cache.listed_at)
        if owed:
            # we wrote this node and the cache has not caught up (a full list of a big cluster takes
            # seconds): read this one node rather than decide on what it was before our write, once per
            # write (our own Kubernetes writes bring this node back here several times meanwhile)
            read_after = self.slurm_writes.read_after_write.get(name)
            if read_after is not None:
                slurm_node = read_after
            else:
                with contextlib.suppress(SlurmError):
                    async with self.fresh_reads:
                        slurm_node = read_now = await self.context.slurm.get_node(name)
                    self.slurm_writes.read_after_write[name] = slurm_node
        # what other controllers say of it: the NodeSet scaling it in, the scheduler's hold (drain causes)
        scale_in = self.context.scale_in.get(name)
        held = self.context.holds.cause_of(name, slurm_node, self.context.owner_prefix)
        # the Node's conditions are decided from all its Slurm nodes, so that each of their reconciles writes
        # the same: this node's own data as read above, the others' from the Slurm cache
        node_slurm = (
            None
            if sharing is None or after is not None
            else [(n, slurm_node if n == name else cache.nodes.get(n)) for n in sharing]
        )
        return Reading(
            binding, now, slurm_node, fresh, owed, read_now, node_slurm,
            scale_in.name if scale_in is not None else None, held, claimants,
        )  # fmt: skip

    def again(self, name: str, slurm_node: SlurmNode | None) -> Reading:
        """Kubernetes as the cache shows it now, beside `slurm_node` as read from slurmrestd (not read in a
        watch gap): as `read_node(after=...)` reads it, for the Slurm action decided again when its turn to
        be sent comes (the controller's `_still_wanted`, the writer asks it)."""
        if not self.context.kube_cache.current:
            return Reading(Binding(name), slurm_node=slurm_node, fresh=True, kube_current=False)
        binding, _sharing, _claimants = self._kube_side(name)
        if not binding.bound:
            return Reading(binding, slurm_node=slurm_node, fresh=True)
        scale_in = self.context.scale_in.get(name)
        held = self.context.holds.cause_of(name, slurm_node, self.context.owner_prefix)
        return Reading(
            binding, self.context.clock(), slurm_node, fresh=True,
            scale_in=scale_in.name if scale_in is not None else None, held=held,
        )  # fmt: skip

    def _kube_side(self, name: str) -> tuple[Binding, tuple[str, ...] | None, tuple[KubePod | KubeNode, ...]]:
        """The node's Kubernetes objects as the cache shows them now, with our own recent writes laid over,
        the Slurm nodes sharing its Node, and every claimant: the claimants read here, once, then judged
        (`claim`)."""
        cache: KubeCache = self.context.kube_cache
        pods, nodes = cache.pods_for(name), cache.nodes_for(name)
        found, sharing = claim(name, pods, nodes, cache)
        claimants: tuple[KubePod | KubeNode, ...] = (*pods, *nodes)
        if not found.bound:
            return found, sharing, claimants
        bound = replace(found, pod=self.written.overlay(found.pod), node=self.written.overlay(found.node))
        return bound, sharing, claimants
