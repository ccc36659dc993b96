"""The Slurm node cache's figures for /metrics (`slurm_nodes`, `slurm_node_flags`, `slurm_node_info`,
`slurm_partition_*`), worked out a chunk of nodes at a time with the event loop running in between.

At 10,000 nodes a scrape built 10,000 `slurm_node_info` samples and had prometheus_client render them, with
the partitions' sums, in one go: the loop was held 0.1 s of CPU (0.17-0.3 s at load 6, 0.5-0.85 s seen in a
benchmark run; no cordon or drain reconciled meanwhile, issue 47). Here each node's `slurm_node_info` line
is rendered once per node object, in prometheus_client's text (labels sorted, values escaped as it does):
the node cache replaces its dict on every list it applies but keeps an unchanged node's object
(`NodeDecoder`), so most lines are reused; the figures of one dict are kept until the cache holds another.
`exposition()` writes those lines as they are and every other family through prometheus_client, letting the
loop run every millisecond.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import msgspec
from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from syncer.app.metric_families import GAUGES
from syncer.model.slurm import BASE_STATES, SlurmNode

CHUNK = 250  # nodes per loop turn: ~1 ms of work when every node is new, less when most are known
TURN_S = 0.001  # the longest the text is written before the loop runs again
INFO = "slurm_node_info"  # declared in metric_families.GAUGES (labels node, state, drain)
_GPU = re.compile(r"gpu(?::[^:,()]+)?:(\d+)")


def gpu_count(gres: str) -> int:
    """GPUs in a gres string such as `gpu:8`, `gpu:a100:4(S:0-1)` or `gpu:a100:4(IDX:0-3)`."""
    return sum(int(m.group(1)) for m in _GPU.finditer(gres or ""))


def _escape(value: str) -> str:
    """A label value as prometheus_client's text format escapes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class _Entry(msgspec.Struct, frozen=True, gc=False):
    """What one node object adds to the figures, worked out once per object."""

    node: SlurmNode
    line: str  # its slurm_node_info sample line
    base: str
    flags: frozenset[str]  # its state flags other than the base state
    gpus: int
    gpus_used: int


@functools.lru_cache(maxsize=4096)
def _beyond_base(state: frozenset[str]) -> frozenset[str]:
    """A state's flags other than base states: one set per distinct state (few in a cluster), not per node."""
    return state - BASE_STATES


def _entry(node: SlurmNode) -> _Entry:
    base, drain = node.base_state, "true" if node.drain_flag else "false"
    line = f'{INFO}{{drain="{drain}",node="{_escape(node.name)}",state="{_escape(base.lower())}"}} 1.0\n'
    return _Entry(node, line, base, _beyond_base(node.state), gpu_count(node.gres), gpu_count(node.gres_used))


@dataclass(frozen=True)
class NodeFigures:
    """The figures of one node cache dict (`source`), whose nodes never change (a list replaces the dict)."""

    source: Mapping[str, SlurmNode]
    by_state: Counter[str]  # base state -> nodes
    flags: Counter[str]  # flag -> nodes carrying it
    # partition -> nodes, CPUs, CPUs allocated, memory bytes, memory allocated, GPUs, GPUs allocated
    totals: dict[str, list[int]]
    by_partition: Counter[tuple[str, str]]  # (partition, base state) -> nodes
    info: str  # slurm_node_info's sample lines, in the cache's order


class NodeInfo(Metric):
    """`slurm_node_info` with its sample lines rendered already: `exposition()` writes them as they are.
    Anything else reading `samples` (generate_latest, a parser's caller) gets them built from the nodes."""

    def __init__(self, figures: NodeFigures) -> None:
        super().__init__(INFO, GAUGES[INFO].help, "gauge")
        self.figures = figures

    @property
    def samples(self) -> list[Sample]:
        return [
            Sample(
                INFO,
                {"node": n.name, "state": n.base_state.lower(), "drain": "true" if n.drain_flag else "false"},
                1,
            )
            for n in self.figures.source.values()
        ]

    @samples.setter
    def samples(self, _value: list[Sample]) -> None:
        """Metric's constructor sets an empty list: the samples are the nodes'."""


class NodeExposition:
    """Node figures for /metrics, each node's line kept while the cache keeps its object."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._figures: NodeFigures | None = None

    async def refresh(self, nodes: Mapping[str, SlurmNode]) -> NodeFigures:
        """The figures of `nodes`, `CHUNK` nodes a loop turn (kept: the same dict again costs nothing)."""
        for _ in self._walk(nodes):
            await asyncio.sleep(0)
        return self.figures(nodes)

    def figures(self, nodes: Mapping[str, SlurmNode]) -> NodeFigures:
        """The figures of `nodes`: those kept if they are of this dict, else worked out now, in one go."""
        for _ in self._walk(nodes):
            pass
        assert self._figures is not None and self._figures.source is nodes
        return self._figures

    def _walk(self, nodes: Mapping[str, SlurmNode]) -> Iterator[None]:
        """Works the figures of `nodes` out into `_figures`, pausing (yielding) every `CHUNK` nodes."""
        if self._figures is not None and self._figures.source is nodes:
            return
        known, entries = self._entries, {}
        by_state: Counter[str] = Counter()
        flags: Counter[str] = Counter()
        by_partition: Counter[tuple[str, str]] = Counter()
        totals: dict[str, list[int]] = {}
        lines: list[str] = []
        for count, node in enumerate(list(nodes.values()), 1):  # a list: the walk outlives no dict change
            entry = known.get(node.name)
            if entry is None or (entry.node is not node and entry.node != node):
                entry = _entry(node)
            entries[node.name] = entry
            lines.append(entry.line)
            by_state[entry.base] += 1
            flags.update(entry.flags)
            for partition in node.partitions:
                row = totals.get(partition)
                if row is None:
                    row = totals[partition] = [0, 0, 0, 0, 0, 0, 0]
                row[0] += 1
                row[1] += node.cpus
                row[2] += node.alloc_cpus
                row[3] += node.real_memory_mb * 1024 * 1024
                row[4] += node.alloc_memory_mb * 1024 * 1024
                row[5] += entry.gpus
                row[6] += entry.gpus_used
                by_partition[partition, entry.base] += 1
            if count % CHUNK == 0:
                yield
        self._entries = entries
        self._figures = NodeFigures(nodes, by_state, flags, totals, by_partition, "".join(lines))


class _One(Collector):
    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> Iterator[Metric]:
        yield self.family


async def exposition(registry: Collector) -> bytes:
    """What prometheus_client's `generate_latest(registry)` answers, a family at a time, the loop running
    every `TURN_S`: `NodeInfo`'s lines as they were rendered, its header and every other family by
    prometheus_client itself."""
    parts: list[bytes] = []
    turn = time.perf_counter()
    for family in registry.collect():
        if isinstance(family, NodeInfo):
            parts.append(generate_latest(_One(Metric(family.name, family.documentation, family.type))))
            parts.append(family.figures.info.encode())
        else:
            parts.append(generate_latest(_One(family)))
        if time.perf_counter() - turn > TURN_S:
            await asyncio.sleep(0)
            turn = time.perf_counter()
    return b"".join(parts)
