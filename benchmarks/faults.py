"""Fault scenarios with figures: while two streams of changes flow (Kubernetes-side cordons and uncordons,
Slurm-side drains and resumes made with scontrol), faults are injected concurrently on one side. Every
Slurm write the syncer sends goes through a recording proxy and is judged at the instant it arrived,
whether or not it was ever acknowledged; every Slurm state the syncer shows in Kubernetes is judged at the
instant the API server stored it. Afterwards the faults are cleared and the harness waits for convergence.

    python benchmarks/faults.py --out DIR                       # long versions
    python benchmarks/faults.py --quick --out DIR               # short versions (the tests run these)
    python benchmarks/faults.py --quick --controls --out DIR    # negative controls (wrong syncers)
    python benchmarks/faults.py --table DIR/results.json        # the figures as docs/reliability.md shows

Per scenario: faults injected, faults observed (the errors the syncer itself recorded: failed requests,
decode errors, retries, watch errors and restarts), actions (Slurm writes at the wire), wrong actions
(must be 0), changes lost (must be 0) and seconds to converge after the last fault. A scenario whose
faults the syncer never observed proves nothing and fails the run. A negative control must make the
oracle report wrong actions or lost changes; one that does not fails the run (the harness is broken).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root

from benchmarks.run import cancel_on_sigterm, seed
from syncer.app.logs import configure_logging
from syncer.app.service import ServiceConfig, SyncerService
from syncer.controllers.nodeset.node_shape import NodeShape
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.plan import EVENT_STATE_CHANGED
from syncer.kube.client import KubeClient
from syncer.kube.writer import pod_path
from syncer.model.keys import Keys
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.versions import VERSIONS
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi.store import Change
from syncer.testing.processes import stop_process
from syncer.testing.sandbox import RELEASES, Release, Sandbox, release, up
from syncer.testing.sandbox.config import free_port_block, short_hostname, sim_node_names
from syncer.testing.slurmd_standin import SlurmdStandIn

NAMESPACE = "slurm"
GROUP, VERSION = "slurm-syncer.dev", "v1alpha1"
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "KubeletReady",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}
CONFIG = ServiceConfig(
    # the NotReady scenario sets its own grace and valve
    controllers={"sync": SyncOptions(ready_grace_s=3600.0, max_drain_fraction=1.0)},
    slurm_poll_interval_s=0.3,
    slurm_stale_after_s=3.0,
    leader_election=False,
    listen_port=None,
    resync_s=5.0,
)
STATE_KEY = Keys.STATE
SLURM_SIDE_REASON = "faults: Slurm-side drain"
STEP_S = 0.1  # the pace of the change streams
# answers that are not failures: before 26.05 slurmrestd answers a node list with `update_time` "something
# changed" with HTTP 500 (docs/contract.md; the node cache counts real failures as poll errors)
SLURM_NOT_FAILURES = {("nodes", "500")}


def _is_list(path: str) -> bool:
    """A collection GET (a re-list), as opposed to a GET of one object."""
    bare = path.split("?", 1)[0].rstrip("/")
    return bare.endswith(("/pods", "/nodes", "/nodesets", "/events", "/leases"))


class Tape:
    """The syncer's own log events (info and up, whatever the log level) with their monotonic times: the
    evidence of a wrong action names what the syncer logged about that node and its informers then."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, dict[str, Any]]] = []

    def __call__(self, _logger: Any, _method: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
        self.lines.append((time.monotonic(), dict(event)))
        return event

    def around(self, node: str, at: float, before_s: float = 5.0, after_s: float = 1.0) -> list[str]:
        """Lines about `node` or any informer from `before_s` before `at` to `after_s` after, newest last."""
        lines = []
        for t, event in self.lines:
            if not at - before_s <= t <= at + after_s:
                continue
            if event.get("slurm_node") != node and "kind" not in event:
                continue
            extra = " ".join(
                f"{k}={str(v)[:80]}" for k, v in event.items()
                if k not in ("event", "timestamp", "level", "slurm_node", "pod", "node")
            )  # fmt: skip
            lines.append(f"{t - at:+.2f} {event.get('event')} {extra}".strip())
        return lines[-12:]


TAPE = Tape()


def progress(text: str) -> None:
    print(f"[faults] {text}", file=sys.stderr, flush=True)


@dataclass
class Outcome:
    scenario: str
    faults_injected: int = 0
    # what the syncer itself recorded of the faults (its own counters), by kind; their sum is the figure
    observed: dict[str, int] = field(default_factory=dict)
    actions: int = 0  # Slurm writes that reached the proxy (acknowledged or not)
    kube_states: int = 0  # Slurm states the syncer wrote into Kubernetes
    # writes that never reached slurmrestd (refused or answered by an injected failure): not judged, but
    # counted, with how many would have been wrong had they arrived (stale resends of an older decision)
    unforwarded: int = 0
    unforwarded_wrong: int = 0
    wrong_actions: list[str] = field(default_factory=list)
    # writes that raced a Kubernetes change and were undone in time (`race`): reported apart, not wrong
    raced: list[str] = field(default_factory=list)
    unproven: int = 0  # stale writes whose order the evidence could not prove (among the wrong ones)
    changes_lost: list[str] = field(default_factory=list)
    converge_s: float = 0.0
    notes: str = ""
    control: str = ""  # a negative control: the deliberately wrong syncer it ran
    kube: dict[str, float] = field(default_factory=dict)  # the syncer's Kubernetes API requests
    events: dict[str, int] = field(default_factory=dict)  # Event writes (creates and count bumps)
    not_ready_s: float = 0.0  # how long /readyz said not ready while the faults lasted
    ready_after: bool | None = None  # ready again once converged
    # per wrong action or lost change (the first few): the node's timeline around it, what the syncer's
    # caches showed when the write arrived and the syncer's own log lines, so a flaky run can be read later
    evidence: list[str] = field(default_factory=list)

    @property
    def faults_observed(self) -> int:
        return sum(self.observed.values())

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "control": self.control, "faults_injected": self.faults_injected,
            "faults_observed": self.faults_observed, "observed": self.observed, "actions": self.actions,
            "kube_states": self.kube_states, "unforwarded": self.unforwarded,
            "unforwarded_wrong": self.unforwarded_wrong, "wrong_actions": len(self.wrong_actions),
            "changes_lost": len(self.changes_lost), "converge_s": round(self.converge_s, 2),
            "raced": len(self.raced), "raced_examples": self.raced[:5], "order_unproven": self.unproven,
            "examples": (self.wrong_actions + self.changes_lost)[:5], "kube_requests": self.kube,
            "events": self.events, "not_ready_s": round(self.not_ready_s, 1), "ready_after": self.ready_after,
            "notes": self.notes, "evidence": self.evidence,
        }  # fmt: skip


# -- ground truth and the oracles ----------------------------------------------------------------------


@dataclass
class Truth:
    """What the harness did and when (monotonic seconds): each node is cordoned at most once and
    uncordoned at most once; Slurm-side drains are issued at most once per node."""

    cordoned_at: dict[str, float] = field(default_factory=dict)
    uncordoned_at: dict[str, float] = field(default_factory=dict)
    slurm_drained_at: dict[str, float] = field(default_factory=dict)  # scontrol drain issued
    slurm_resumed_at: dict[str, float] = field(default_factory=dict)
    # the resourceVersion the API server gave the Node's cordon and uncordon (the race rule compares the
    # version in the syncer's cache with these)
    cordon_rv: dict[str, int] = field(default_factory=dict)
    uncordon_rv: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Look:
    """One look of the syncer at Kubernetes for a Slurm write of one node, as the harness traces it: the
    write handed to the bulk writer, or its "still wanted?" check right before the request goes out, with
    the resourceVersion of the node's Kubernetes Node in the syncer's cache at that instant (None: not in
    the cache). `sends`: a look that can have sent the write (handed over, or still wanted)."""

    at: float
    node: str
    state: str  # "DRAIN" or "UNDRAIN"
    sends: bool
    cache_rv: int | None


# A raced write must be undone within this of its arrival: the syncer decides every node again at least
# once a resync (5 s here, on any change sooner), on Slurm data at most its staleness bound old (3 s here)
# while it reports ready; a raced drain it has not undone by then was not corrected but left. (The
# staleness bound alone, 3 s, was too short: a raced drain under the Kubernetes API faults was undone
# 3.79 s after it arrived, held meanwhile by the watch gaps the faults made, as the syncer must.)
RACE_UNDONE_S = CONFIG.resync_s + CONFIG.slurm_stale_after_s


Write = tuple[float, str, str, bytes]  # (arrival, method, path, body) as the proxy recorded it
Shown = tuple[float, str, str]  # (stored at, Slurm node, state annotation or "" when removed)


def node_writes(writes: list[Write]) -> Iterator[tuple[float, str, list[str] | None, bytes]]:
    """Each node a Slurm write names, with the state it asks for (None: unreadable): `POST /node/X` names
    one, the bulk `POST /nodes/` a comma-separated list in its body's `name`."""
    for at, method, path, body in writes:
        route = path.split("?")[0].rstrip("/")
        if method != "POST" or not ("/node/" in route or route.endswith("/nodes")):
            continue
        try:
            doc = json.loads(body)
            state = list(doc.get("state") or [])
        except (ValueError, AttributeError):
            doc, state = {}, None
        if "/node/" in route:
            names = [route.rsplit("/", 1)[1]]
        else:
            names = [n for n in str(doc.get("name") or "").split(",") if n] or ["(unreadable bulk write)"]
        for name in names:
            yield at, name, state, body


Wrong = tuple[float, str, str]  # (when, node, what was wrong)


@dataclass
class Judged:
    """Every node write at the wire judged: the wrong ones, and apart from them the raced ones (see
    `race`), which are not wrong; `unproven`: stale writes the evidence could not order (counted wrong)."""

    actions: int = 0
    wrong: list[Wrong] = field(default_factory=list)
    raced: list[Wrong] = field(default_factory=list)
    unproven: int = 0


def judge_writes(
    writes: list[Write], truth: Truth, looks: Sequence[Look] | None = None
) -> tuple[int, list[str]]:
    """Every node write that reached the proxy, judged at the instant it arrived: a drain needs a cordon
    that still held then (made before it, not yet lifted); an undrain needs no cordon holding then (the
    uncordon made before it, or no cordon at all) and no Slurm-side drain of the harness's holding. A
    raced write (`race`) is not wrong; `looks` None: the syncer's looks were not traced (nothing raced)."""
    judged = wrong_writes(writes, truth, looks)
    return judged.actions, [text for _at, _node, text in judged.wrong]


def wrong_writes(writes: list[Write], truth: Truth, looks: Sequence[Look] | None = None) -> Judged:
    """judge_writes, each wrong write with its node and arrival; the texts say how far it was off."""
    judged = Judged()
    every = list(node_writes(writes))
    for at, node, state, body in every:
        if state is None:
            judged.wrong.append((at, node, f"unreadable write to {node}: {body[:80]!r}"))
            continue
        judged.actions += 1
        cordon_at = truth.cordoned_at.get(node, float("inf"))
        uncordon_at = truth.uncordoned_at.get(node, float("inf"))
        # a write made wrong by a Kubernetes change (the uncordon for a drain, the cordon for an undrain)
        # may have raced it: (the change's time, its resourceVersion, the write that undoes it)
        stale: tuple[float, int | None, str] | None = None
        text = ""
        if "DRAIN" in state and not cordon_at <= at:
            when = (
                "never cordoned" if cordon_at == float("inf") else f"{cordon_at - at:.2f} s before its cordon"
            )
            text = f"drained {node}, not cordoned ({when})"
        elif "DRAIN" in state and uncordon_at <= at:
            late = f"{at - uncordon_at:.2f} s after it, {at - cordon_at:.2f} s after the cordon"
            text = f"drained {node} after its uncordon (stale): {late}"
            stale = (uncordon_at, truth.uncordon_rv.get(node), "UNDRAIN")
        # an undrain is wrong while the node's cordon holds, or while the harness's own Slurm-side drain
        # does (someone else's reason); a node never cordoned in this scenario is not cordoned (a drain under
        # the syncer's reason left by an earlier scenario is rightly lifted)
        drained_at = truth.slurm_drained_at.get(node, float("inf"))
        resumed_at = truth.slurm_resumed_at.get(node, float("inf"))
        if "UNDRAIN" in state and cordon_at <= at < uncordon_at:
            text = f"undrained {node} while cordoned ({at - cordon_at:.2f} s after its cordon)"
            if not drained_at <= at < resumed_at:
                stale = (cordon_at, truth.cordon_rv.get(node), "DRAIN")
        elif "UNDRAIN" in state and drained_at <= at < resumed_at:
            text = f"undrained {node} while drained in Slurm by someone else (scontrol)"
        if not text:
            continue
        if stale is None or looks is None:
            judged.wrong.append((at, node, text))
            continue
        raced, why = race(at, node, "+".join(state), stale, every, looks)
        (judged.raced if raced else judged.wrong).append((at, node, f"{text}; {why}"))
        judged.unproven += why.startswith("order not proven")
    return judged


def race(
    at: float,
    node: str,
    kind: str,
    change: tuple[float, int | None, str],
    every: list[tuple[float, str, list[str] | None, bytes]],
    looks: Sequence[Look],
) -> tuple[bool, str]:
    """Whether a write that a Kubernetes change made wrong raced that change, and why (or why not). Raced:
    every look of the syncer that can have sent it (at or before its arrival) ran on a Node cache older than
    the change (its resourceVersion below the change's: the syncer decided before its cache held it), and
    the syncer undid it within RACE_UNDONE_S (the opposite write arrived after it). Anything else is
    wrong: no look recorded or a version unknown (the order is not proven), a look whose cache had the
    change, or a raced write not undone in time."""
    changed_at, change_rv, undo = change
    mine = [
        look for look in looks if look.node == node and look.state == kind and look.sends and look.at <= at
    ]
    if change_rv is None or not mine or any(look.cache_rv is None for look in mine):
        return False, "order not proven (no look of the syncer's or no cache version recorded)"
    saw = [look for look in mine if look.cache_rv is not None and look.cache_rv >= change_rv]
    if saw:
        return False, (
            f"not raced: decided {saw[-1].at - changed_at:+.2f} s from the change on a cache that had it "
            f"(rv {saw[-1].cache_rv} >= {change_rv})"
        )
    last = mine[-1]
    decided = f"decided {last.at - changed_at:+.2f} s from the change on rv {last.cache_rv} < {change_rv}"
    undone = [t for t, n, state, _b in every if n == node and state and undo in state and at < t]
    if not undone or undone[0] - at > RACE_UNDONE_S:
        after = f"{undone[0] - at:.2f} s later" if undone else "never"
        return False, f"raced ({decided}) but undone {after}, not within {RACE_UNDONE_S:.0f} s"
    return True, f"raced: {decided}, undone {undone[0] - at:.2f} s later"


def forwarded(proxy: FaultProxy) -> list[Write]:
    """The writes that may have reached slurmrestd: all but those answered by an injected failure or
    refused for want of a slurmrestd (those cannot have changed Slurm; they are reported apart)."""
    refused = {id(write) for write in proxy.unforwarded}
    return [write for write in proxy.writes if id(write) not in refused]


def judge_shown(shown: list[Shown], writes: list[Write], truth: Truth) -> list[str]:
    """Kubernetes never shows a Slurm state Slurm did not have: a DRAIN shown at time t needs a drain
    in Slurm issued before t, by the harness (scontrol) or by the syncer (a drain write at the proxy)."""
    return [text for _at, _node, text in wrong_shown(shown, writes, truth)]


def wrong_shown(shown: list[Shown], writes: list[Write], truth: Truth) -> list[Wrong]:
    """judge_shown, each with its node and the time the API server stored it."""
    drained_by_syncer: dict[str, float] = {}
    for at, node, asked, _body in node_writes(writes):
        if asked and "DRAIN" in asked:
            drained_by_syncer.setdefault(node, at)
    wrong = []
    for at, node, state in shown:
        if "DRAIN" not in state.split("+"):
            continue
        first = min(truth.slurm_drained_at.get(node, float("inf")), drained_by_syncer.get(node, float("inf")))
        if not first <= at:
            wrong.append((at, node, f"Kubernetes showed {node} as {state}, a drain Slurm never had by then"))
    return wrong


# -- the stage --------------------------------------------------------------------------------------


@dataclass
class Stage:
    sandbox: Sandbox
    kube: KubeApiEmulator
    kubeconfig: Path
    reader: SlurmClient
    names: list[str]
    workdir: Path
    truth: Truth = field(default_factory=Truth)
    cordoned: set[str] = field(default_factory=set)
    shown: list[Shown] = field(default_factory=list)
    foreign: set[str] = field(default_factory=set)  # nodes the harness drained in Slurm (their reason stays)
    power_port_base: int = 0  # the power members' ports where slurm.conf names them (24.11); 0: pick one
    # (arrival, Slurm node) -> what the syncer's Node cache and informer showed when that write arrived
    views: dict[tuple[float, str], str] = field(default_factory=dict)
    # Slurm node -> each version of its Kubernetes Node as the API server stored it: (when, rv, cordoned)
    node_versions: dict[str, list[tuple[float, str, bool]]] = field(default_factory=dict)
    # Slurm node -> the syncer's Slurm writes as it made them: (when, what) - handed to the bulk writer, and
    # each "still wanted?" check right before its request went out (the decision's last look at the cordon)
    decisions: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    looks: list[Look] = field(default_factory=list)  # the same looks, with the Node's version in the cache

    def cordon(self, name: str, on: bool) -> None:
        stored = self.kube.patch(
            "", "v1", "nodes", f"k8s-{name}", {"spec": {"unschedulable": True if on else None}}
        )
        (self.cordoned.add if on else self.cordoned.discard)(name)
        (self.truth.cordoned_at if on else self.truth.uncordoned_at)[name] = time.monotonic()
        (self.truth.cordon_rv if on else self.truth.uncordon_rv)[name] = int(
            stored["metadata"]["resourceVersion"]
        )

    async def slurm_drain(self, name: str, on: bool) -> None:
        """A Slurm-side change made as an admin would (scontrol, not through slurmrestd); the time it was
        issued is what the oracle allows a Kubernetes state from (it may fail while slurmctld restarts).
        Resumed with `state=resume`, which clears the reason too: `undrain` would leave the admin's reason
        behind, and the syncer rightly never drains over someone else's reason."""
        (self.truth.slurm_drained_at if on else self.truth.slurm_resumed_at)[name] = time.monotonic()
        argv = [
            f"nodename={name}",
            *(("state=drain", f"reason={SLURM_SIDE_REASON}") if on else ("state=resume",)),
        ]
        result = await asyncio.to_thread(self.sandbox.run, "scontrol", "update", *argv)
        if result.returncode != 0:
            progress(
                f"scontrol update {' '.join(argv)} failed (counted as maybe applied): {result.stderr.strip()}"
            )

    def on_change(self, change: Change) -> None:
        """Every Slurm state the syncer writes into Kubernetes, timestamped when the API server stores it; and
        every version of every Node (the evidence tells how old the syncer's view of one was)."""
        if change.resource == ("", "nodes") and change.type != "DELETED":
            meta, cordoned = change.obj["metadata"], bool(change.obj.get("spec", {}).get("unschedulable"))
            versions = self.node_versions.setdefault(meta["name"].removeprefix("k8s-"), [])
            versions.append((time.monotonic(), str(meta.get("resourceVersion")), cordoned))
        if change.resource != ("", "pods") or change.type == "DELETED":
            return
        slurm_node = (change.obj["metadata"].get("labels") or {}).get(Keys.NODE_NAME_LABEL)
        state = (change.obj["metadata"].get("annotations") or {}).get(STATE_KEY, "")
        before = ((change.old or {}).get("metadata", {}).get("annotations") or {}).get(STATE_KEY, "")
        if slurm_node and state != before:
            self.shown.append((time.monotonic(), slurm_node, state))

    async def syncer(self, config: ServiceConfig = CONFIG, slurm_url: str = "") -> SyncerService:
        """A syncer in this process, on the sandbox (or `slurm_url`, e.g. a fault proxy) and the emulator."""
        slurm = SlurmClient(slurm_url or self.sandbox.rest_url, TokenFile(self.sandbox.token_file))
        kube = await KubeClient.from_config(str(self.kubeconfig), qps=200, burst=400)
        return SyncerService(slurm, kube, config)

    def pick(self, cordons: int, slurm_side: int) -> tuple[list[str], list[str], str]:
        """Nodes for the Kubernetes-side stream, the Slurm-side stream and one bystander. Once drained
        in Slurm by the harness a node keeps its reason even when resumed (a powered-down CLOUD node), and
        the syncer rightly never drains over someone else's reason: such nodes serve only Slurm-side
        streams afterwards."""
        clean = [n for n in self.names if n not in self.foreign]
        chosen = random.sample(clean, cordons + 1)
        rest = [n for n in self.names if n not in chosen]
        slurm = sorted(rest, key=lambda n: (n not in self.foreign, random.random()))[:slurm_side]
        self.foreign.update(slurm)
        return chosen[:-1], slurm, chosen[-1]

    def begin(self) -> None:
        self.truth = Truth()
        self.shown = []
        self.views = {}
        self.node_versions = {}
        self.decisions = {}
        self.looks = []
        TAPE.lines.clear()
        self.kube.api.store.listeners.append(self.on_change)

    def end(self) -> None:
        self.kube.api.store.listeners.remove(self.on_change)

    def note_view(self, service: SyncerService, write: Write) -> None:
        """At a write's arrival: the cordon as the syncer's Node cache has it against the API server's, and
        its Node informer's state (a cache lagging behind the server shows here)."""
        informer = service.kube_cache.nodes
        for at, node, _state, _body in node_writes([write]):
            cached, stored = informer.items.get(f"k8s-{node}"), self.kube.node(f"k8s-{node}") or {}
            server = f"unschedulable={bool(stored.get('spec', {}).get('unschedulable'))} " + (
                f"rv {stored.get('metadata', {}).get('resourceVersion')}"
            )
            mine = (
                f"unschedulable={cached.unschedulable} rv {cached.resource_version}" if cached else "absent"
            )
            if cached is not None:
                versions = self.node_versions.get(node, [])
                made = next((t for t, rv, _c in versions if rv == cached.resource_version), None)
                newer = [
                    f"{t - at:+.2f} (unschedulable={c})" for t, _rv, c in versions if made is None or t > made
                ]
                when = f"{made - at:+.2f}" if made is not None else "before the scenario"
                mine += f" (stored {when}; newer: {', '.join(newer) or 'none'})"
            stats = informer.stats
            self.views[(at, node)] = (
                f"syncer's Node cache {mine}, API server {server}; Node informer: last event "
                f"{at - stats.last_event_monotonic:.2f} s before, {stats.lists} lists "
                f"({stats.relists_after_gone} after 410), {stats.watch_restarts} watch restarts, "
                f"{stats.errors} errors"
            )

    def evidence(self, node: str, at: float, text: str, writes: list[Write]) -> str:
        """One wrong action or lost change read later: the node's timeline in seconds from `at` (the harness's
        changes, the syncer's Slurm writes, the states Kubernetes showed), the syncer's view when the write
        arrived and its log lines about the node and the informers."""

        def rel(t: float | None) -> str:
            return "-" if t is None else f"{t - at:+.2f}"

        truth = self.truth
        harness = (
            f"cordon {rel(truth.cordoned_at.get(node))}, uncordon {rel(truth.uncordoned_at.get(node))}, "
            f"scontrol drain {rel(truth.slurm_drained_at.get(node))}, "
            f"resume {rel(truth.slurm_resumed_at.get(node))}"
        )
        slurm = ", ".join(
            f"{'+'.join(state or ['?'])} {rel(t)}" for t, n, state, _b in node_writes(writes) if n == node
        )
        shown = ", ".join(
            f"{state or '(none)'} {rel(t)}" for t, n, state in self.shown if n == node and abs(t - at) < 5.0
        )
        parts = [
            text, f"{node} in s from then: {harness}", f"Slurm writes: {slurm or 'none'}",
            f"Kubernetes shown within 5 s: {shown or 'none'}",
        ]  # fmt: skip
        if (view := self.views.get((at, node))) is not None:
            parts.append(view)
        made = [f"{what} {rel(t)}" for t, what in self.decisions.get(node, []) if abs(t - at) < 5.0]
        if made:
            parts.append(f"the syncer's Slurm writes of it within 5 s: {', '.join(made[-8:])}")
        parts.append("syncer log: " + ("; ".join(TAPE.around(node, at)) or "none"))
        return " | ".join(parts)

    def reset(self, touched: list[str]) -> None:
        """Leaves the stage clean for the next scenario."""
        for node in touched:
            if node in self.cordoned:
                self.cordon(node, False)
        for node in touched:
            if node in self.truth.slurm_drained_at and node not in self.truth.slurm_resumed_at:
                self.sandbox.run("scontrol", "update", f"nodename={node}", "state=resume")
            self.sandbox.run("scontrol", "update", f"nodename={node}", "state=undrain")

    def event_counts(self) -> Counter[tuple[str, str]]:
        """(object, reason) -> how many times an Event was recorded (count summed over Event objects).
        Storm summaries on the syncer's Lease are counted apart: ("(summaries)", reason) and
        ("(folded)", reason), the Events they stand for. A SlurmStateChanged is one per state transition, and
        a node running jobs has several (a power member: up, job started, job ended, and COMPLETING between
        when a poll catches it): it is counted by its transition, "reason (before -> after)". A NodeSet's
        Event by its message, which names the member ("created pod fpw-1")."""
        counts: Counter[tuple[str, str]] = Counter()
        for event in self.kube.api.store.objects_of(("", "events")):
            times = int(event.get("count") or 1)
            if event["involvedObject"].get("kind") == "Lease":
                counts[("(summaries)", event["reason"])] += times
                counts[("(folded)", event["reason"])] += times * int(event["message"].split()[0])
            elif event["reason"] == EVENT_STATE_CHANGED:
                transition = event["message"].rsplit(": ", 1)[-1]
                counts[(event["involvedObject"]["name"], f"{event['reason']} ({transition})")] += times
            elif event["involvedObject"].get("kind") == "NodeSet":
                # a NodeSet's Events name the member in the message: one CreatedPod per member is no repeat
                counts[(event["involvedObject"]["name"], f"{event['reason']} ({event['message']})")] += times
            else:
                counts[(event["involvedObject"]["name"], event["reason"])] += times
        return counts

    def watch_kube(self) -> Callable[[], tuple[dict[str, float], dict[str, int]]]:
        """Starts counting the syncer's requests and Events; the returned function gives the figures."""
        server = self.kube.server
        server.requests.clear()
        server.record_requests = True
        events_before = self.event_counts()
        started = time.monotonic()

        def figures() -> tuple[dict[str, float], dict[str, int]]:
            server.record_requests = False
            elapsed = max(time.monotonic() - started, 1e-9)
            requests = list(server.requests)
            per_second = Counter(int(t - started) for t, _method, _path in requests)
            lists = sum(
                1 for _t, m, path in requests if m == "GET" and "watch=" not in path and _is_list(path)
            )
            kube = {
                "total": len(requests), "per_s": round(len(requests) / elapsed, 1),
                "peak_per_s": max(per_second.values(), default=0), "lists": lists,
                "watches": sum(1 for _t, m, path in requests if m == "GET" and "watch=" in path),
                "writes": sum(1 for _t, m, _path in requests if m != "GET"),
            }  # fmt: skip
            counted = self.event_counts() - events_before
            written = Counter({k: n for k, n in counted.items() if not k[0].startswith("(")})
            repeated = sorted((n, f"{obj} {reason}") for (obj, reason), n in written.items() if n > 1)
            if repeated:
                progress(f"Events recorded more than once: {repeated[-5:]}")
            events = {
                "written": sum(written.values()),
                "max_per_object_reason": max(written.values(), default=0),
                # past the storm burst: summary Events on the Lease and how many Events they stand for
                "summaries": sum(n for (obj, _r), n in counted.items() if obj == "(summaries)"),
                "folded": sum(n for (obj, _r), n in counted.items() if obj == "(folded)"),
            }
            return kube, events

        return figures

    async def wait_converged(self, outcome: Outcome, touched: list[str], deadline_s: float) -> None:
        """Records what is still wrong after `deadline_s` (nothing, once converged) and how long it took."""
        cleared = time.monotonic()
        while time.monotonic() - cleared < deadline_s:
            outcome.changes_lost = await self.converged(touched)
            if not outcome.changes_lost:
                break
            await asyncio.sleep(0.2)  # convergence poll
        outcome.converge_s = time.monotonic() - cleared

    async def converged(self, touched: list[str]) -> list[str]:
        """Both directions: Slurm drains exactly the cordoned nodes of the Kubernetes-side stream, and every
        touched node's state in Kubernetes shows the DRAIN flag exactly when Slurm has it."""
        listing = await self.reader.list_all_nodes()
        drained = {n.name for n in listing.nodes if n.drain_flag}
        slurm = {n.name: n for n in listing.nodes}
        wrong = [
            f"{n}: Slurm {'+'.join(sorted(slurm[n].state)) if n in slurm else 'missing'} "
            f"(reason {slurm[n].reason if n in slurm else ''!r}), cordoned {n in self.cordoned}"
            for n in self.truth.cordoned_at if (n in self.cordoned) != (n in drained)
        ]  # fmt: skip
        for name in touched:
            pod = self.kube.pod(NAMESPACE, f"slurmd-{name}") or {}
            shown = (pod.get("metadata", {}).get("annotations") or {}).get(STATE_KEY, "")
            if ("DRAIN" in shown.split("+")) != (name in drained):
                wrong.append(f"{name}: Kubernetes shows {shown!r}, Slurm drained {name in drained}")
        return sorted(wrong)


# -- what the syncer observed ------------------------------------------------------------------------


def observed_counters(service: SyncerService) -> Counter[str]:
    """The syncer's own record of trouble: failed slurmrestd requests (errors, timeouts, non-2xx), failed
    node-cache polls (decode errors included), periods the Slurm data outgrew the staleness bound (a poll
    that hangs until slurmctld is back fails nothing), reconciles retried, failed Kubernetes requests, watch
    errors and watch streams that ended. Read from the same counters /metrics exports. Write conflicts
    (409) are left out: the harness's own Node patches cause them without any fault."""
    informers = (service.kube_cache.pods, service.kube_cache.nodes)
    return Counter(
        {
            "slurm_failed_requests": sum(
                n
                for (endpoint, status), n in service.slurm.stats.requests.items()
                if status[:1] not in ("2", "3") and (endpoint, status) not in SLURM_NOT_FAILURES
            ),
            "slurm_poll_errors": service.slurm_cache.stats.errors,
            "slurm_stale_periods": service.slurm_cache.stats.stale_periods,
            "reconcile_retries": service.engine.runner.retries_total,
            "kube_failed_requests": service.kube.errors_total - service.writer.stats.conflicts,
            "watch_errors": sum(i.stats.errors for i in informers),
            "watch_restarts": sum(i.stats.watch_restarts for i in informers),
        }
    )


# -- negative controls: deliberately wrong syncers ---------------------------------------------------


def apply_control(control: str, service: SyncerService, bystander: str) -> None:
    """Makes `service` wrong in one way; the oracle must notice (see CONTROLS)."""
    bulk = service.context.slurm_writer  # every Slurm write of every controller goes through it
    update = bulk.update

    async def drains_a_bystander(name: str, **body: Any) -> bool:
        written = await update(name, **body)
        if body.get("state") == ["DRAIN"]:
            await update(bystander, **body)
        return written

    async def undrains_while_cordoned(name: str, **body: Any) -> bool:
        written = await update(name, **body)
        if body.get("state") == ["DRAIN"]:
            await update(name, state=["UNDRAIN"])  # as a syncer trusting a stale view of the cordon would
        return written

    async def drops_writes(name: str, **body: Any) -> bool:
        if zlib.crc32(name.encode()) % 3:  # a third of the nodes, always the same ones
            return await update(name, **body)
        return True  # said to be written

    set_status = service.writer.set_status  # the Slurm state's annotations go with the conditions

    async def shows_a_fake_drain(path: str, conditions: Any, now: str, **kwargs: Any) -> Any:
        written = await set_status(path, conditions, now, **kwargs)
        if STATE_KEY in (kwargs.get("annotations") or {}):
            fake: dict[str, str | None] = {STATE_KEY: "IDLE+DRAIN"}
            await set_status(pod_path(NAMESPACE, f"slurmd-{bystander}"), [], now, annotations=fake)
        return written

    replacement: dict[str, tuple[object, str, Callable[..., Awaitable[Any]]]] = {
        "drains-bystander": (bulk, "update", drains_a_bystander),
        "undrains-cordoned": (bulk, "update", undrains_while_cordoned),
        "drops-writes": (bulk, "update", drops_writes),
        "fake-kube-drain": (service.writer, "set_status", shows_a_fake_drain),
    }
    target, attribute, wrong = replacement[control]
    setattr(target, attribute, wrong)  # a bound method replaced on this one instance


CONTROLS = {
    "drains-bystander": "drains a node nobody cordoned each time it drains one",
    "undrains-cordoned": "undrains each node right after draining it, while it is still cordoned",
    "drops-writes": "silently skips every Slurm write for a third of the nodes",
    "fake-kube-drain": "shows a drain in Kubernetes on a node Slurm never drained",
}


# -- one scenario --------------------------------------------------------------------------------------


@dataclass
class Faults:
    """Handed to a scenario's injector: the stage, the proxy in front of slurmrestd, and whether the
    change streams are over (the injector then finishes its current fault and returns)."""

    stage: Stage
    proxy: FaultProxy
    streams_done: asyncio.Event
    injected: int = 0

    async def pause(self, seconds: float) -> bool:
        """Waits `seconds`; False once the change streams are over."""
        if self.streams_done.is_set():
            return False
        try:
            await asyncio.wait_for(self.streams_done.wait(), seconds)
        except TimeoutError:
            return True
        return False


Injector = Callable[[Faults], Coroutine[Any, Any, None]]


async def no_faults(_faults: Faults) -> None:
    return None


async def run_scenario(
    stage: Stage,
    name: str,
    changes: int,
    inject: Injector,
    *,
    proxy: FaultProxy | None = None,
    config: ServiceConfig = CONFIG,
    deadline_s: float = 90.0,
    control: str = "",
) -> Outcome:
    """`changes` nodes are cordoned and half of them later uncordoned (one step every STEP_S); meanwhile
    `changes // 3` other nodes are drained in Slurm and half of them resumed; `inject` runs concurrently
    with both streams. Every Slurm write goes through `proxy` (a plain recording one if None)."""
    progress(f"{name}: {changes} nodes cordoned, {changes // 3} drained in Slurm, faults meanwhile")
    outcome = Outcome(name, control=control)
    async with FaultProxy(stage.sandbox.rest_url) as recorder:
        wire = proxy or recorder
        service = await stage.syncer(config, wire.url)
        wire.on_write = lambda write: stage.note_view(service, write)
        trace_decisions(stage, service)
        cordon_nodes, slurm_nodes, bystander = stage.pick(changes, changes // 3)
        picked = [*cordon_nodes, *slurm_nodes, bystander]
        if control:
            apply_control(control, service, bystander)
        figures = stage.watch_kube()
        stage.begin()
        await service.start()
        try:
            await service.wait_ready(60)
            before = observed_counters(service)
            done, faults_over = asyncio.Event(), asyncio.Event()
            faults = Faults(stage, wire, done)
            sampler = asyncio.create_task(sample_readiness(service, outcome, faults_over))
            injector = asyncio.create_task(inject(faults))
            slurm_stream = asyncio.create_task(slurm_side_stream(stage, slurm_nodes, changes))
            plan = [(n, True) for n in cordon_nodes] + [(n, False) for n in cordon_nodes[: changes // 2]]
            for node, on in plan:
                stage.cordon(node, on)
                await asyncio.sleep(STEP_S)  # the pace of the change stream
            await slurm_stream
            done.set()
            await injector
            faults_over.set()
            wire.clear_faults()
            stage.kube.faults.clear()
            await sampler
            outcome.faults_injected = faults.injected
            await stage.wait_converged(outcome, picked, deadline_s)
            await wait_ready_again(service, outcome)
            outcome.observed = dict(observed_counters(service) - before)
        finally:
            await service.stop()
            stage.end()
            outcome.kube, outcome.events = figures()
        writes = forwarded(wire)
        stale_attempts = judge_writes(list(wire.unforwarded), stage.truth)[1]
    judged = wrong_writes(writes, stage.truth, stage.looks)
    outcome.actions, wrong = judged.actions, judged.wrong
    outcome.raced = [text for _at, _node, text in judged.raced]
    outcome.unproven = judged.unproven
    outcome.unforwarded, outcome.unforwarded_wrong = len(wire.unforwarded), len(stale_attempts)
    if wire.unforwarded:
        outcome.notes = f"{len(wire.unforwarded)} writes never reached slurmrestd (not judged)"
    if stale_attempts:
        outcome.notes += f", {len(stale_attempts)} of them would have been wrong: {stale_attempts[:3]}"
    wrong += wrong_shown(stage.shown, writes, stage.truth)
    outcome.wrong_actions = [text for _at, _node, text in wrong]
    outcome.kube_states = len(stage.shown)
    keep_evidence(stage, outcome, wrong, writes, judged.raced)
    stage.reset(picked)
    progress(f"{name}: {outcome.row()}")
    return outcome


def trace_decisions(stage: Stage, service: SyncerService) -> None:
    """Notes in `stage.decisions` when the syncer hands each Slurm write to its bulk writer and each answer
    of its "still wanted?" check right before the request goes out (the time of its last look at the
    cordon, which the proxy's arrival time follows); and in `stage.looks` the same looks with the version of
    the node's Kubernetes Node in the syncer's cache then (taken in the same turn of the event loop as the
    look itself: what it decided on)."""
    bulk = service.context.slurm_writer
    update = bulk.update
    nodes = service.kube_cache.nodes

    def cache_rv(name: str) -> int | None:
        cached = nodes.items.get(f"k8s-{name}")
        return int(cached.resource_version) if cached is not None and cached.resource_version else None

    async def traced(name: str, *args: Any, **kwargs: Any) -> bool:
        notes = stage.decisions.setdefault(name, [])
        state = "+".join(kwargs.get("state") or ["?"])
        now, rv = time.monotonic(), cache_rv(name)
        notes.append((now, f"{state} handed to the bulk writer (cache rv {rv})"))
        stage.looks.append(Look(now, name, state, True, rv))
        still = kwargs.get("still")
        if still is not None:

            def checked() -> bool:
                rv = cache_rv(name)
                wanted = bool(still())
                now = time.monotonic()
                notes.append((now, f"{state} still wanted {wanted} (cache rv {rv})"))
                stage.looks.append(Look(now, name, state, wanted, rv))
                return wanted

            kwargs["still"] = checked
        return await update(name, *args, **kwargs)

    bulk.update = traced  # type: ignore[method-assign]  # on this one instance, as the controls do


def keep_evidence(
    stage: Stage, outcome: Outcome, wrong: list[Wrong], writes: list[Write], raced: list[Wrong] | None = None
) -> None:
    """The evidence of the first wrong actions and lost changes (a lost one: its node as convergence left
    it), then of the first raced writes (each marked so: read when a bound is in question)."""
    end = time.monotonic()
    lost = [(end, text.split(":", 1)[0], text) for text in outcome.changes_lost]
    marked = [(at, node, f"(raced, not wrong) {text}") for at, node, text in (raced or [])[:2]]
    outcome.evidence = [
        stage.evidence(node, at, text, writes) for at, node, text in (wrong[:3] + lost[:2] + marked)
    ]


async def slurm_side_stream(stage: Stage, nodes: list[str], changes: int) -> None:
    """Slurm-side drains spread over the Kubernetes-side stream's duration, then half of them resumed."""
    if not nodes:
        return
    every = STEP_S * changes / len(nodes)
    for node in nodes:
        await stage.slurm_drain(node, True)
        await asyncio.sleep(every)  # the pace of this stream
    for node in nodes[: len(nodes) // 2]:
        await stage.slurm_drain(node, False)
        await asyncio.sleep(every)


async def sample_readiness(service: SyncerService, outcome: Outcome, done: asyncio.Event) -> None:
    while not done.is_set():
        await asyncio.sleep(0.1)  # sampling period
        if not service.readiness()[0]:
            outcome.not_ready_s += 0.1


async def wait_ready_again(service: SyncerService, outcome: Outcome, deadline_s: float = 30.0) -> None:
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        if service.readiness()[0]:
            break
        await asyncio.sleep(0.1)  # readiness poll
    outcome.ready_after = service.readiness()[0]
    if not outcome.ready_after:
        outcome.notes = f"not ready after recovery: {service.readiness()[1]}"


async def warm_up(stage: Stage) -> None:
    """A first syncer writes every node's Slurm state to Kubernetes, so that no scenario's figures carry
    that one-off initial sync."""
    progress("warm-up: initial sync of Slurm state into Kubernetes")
    service = await stage.syncer()
    await service.start()
    try:
        await service.wait_ready(60)
        store, deadline = stage.kube.api.store, time.monotonic() + 60
        seen, quiet_since = store.rv, time.monotonic()
        while time.monotonic() - quiet_since < 1.5 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # until the store stops moving
            if store.rv != seen:
                seen, quiet_since = store.rv, time.monotonic()
    finally:
        await service.stop()


def size(quick: bool) -> int:
    return 12 if quick else 60


# -- the scenarios ----------------------------------------------------------------------------------


async def slurmrestd_restarts(stage: Stage, quick: bool) -> Outcome:
    async def inject(faults: Faults) -> None:
        outage = 0
        while await faults.pause(0.3):
            await asyncio.to_thread(stage.sandbox.stop_slurmrestd)
            faults.injected += 1
            # the first outage longer than the staleness bound (3 s), so /readyz must say so; then short ones
            await asyncio.sleep(5.0 if outage == 0 else 1.0)  # the outage itself
            await asyncio.to_thread(stage.sandbox.start_slurmrestd)
            outage += 1

    return await run_scenario(stage, "slurmrestd killed and restarted", size(quick), inject)


async def slurmctld_restart(stage: Stage, quick: bool) -> Outcome:
    async def inject(faults: Faults) -> None:
        # the long version's first outage outlasts 26.05 slurmrestd's 10 s wait for slurmctld, so the
        # syncer sees errors and stale data, not only one slow answer; the short version's outlasts the 3 s
        # staleness bound (two bare restarts could fall between two polls: none observed, a flaky run at
        # 53e5681 on 24.11); then quick restarts
        outage_s = 4.0 if quick else 12.0
        while await faults.pause(0.3):
            await asyncio.to_thread(stage.sandbox.restart_slurmctld, outage_s)
            outage_s = 0.0
            faults.injected += 1

    return await run_scenario(stage, "slurmctld restarted", size(quick), inject)


async def bad_slurm_answers(stage: Stage, quick: bool) -> Outcome:
    async with FaultProxy(stage.sandbox.rest_url) as proxy:
        modes = ["corrupt", "truncate", "delay"]

        async def inject(faults: Faults) -> None:
            step = 0
            while True:
                proxy.clear_faults()
                mode = modes[step % 3]
                if mode == "delay":
                    proxy.delay_s = 1.5
                else:
                    setattr(proxy, mode, True)
                faults.injected += 1
                step += 1
                if not await faults.pause(0.4):
                    return

        return await run_scenario(
            stage, "slurmrestd slow, corrupted and truncated answers", size(quick), inject, proxy=proxy
        )


async def kube_api_faults(stage: Stage, quick: bool) -> Outcome:
    async def inject(faults: Faults) -> None:
        kube, step = stage.kube, 0
        while True:
            if step % 4 == 0:
                kube.drop_watches()
            elif step % 4 == 1:
                kube.compact()
            elif step % 4 == 2:
                kube.faults.fail_next(5, status=500 if step % 8 == 2 else 429)
            elif not kube.faults.latency_s:
                kube.faults.latency_s = 0.3  # from then on: counted once, not once per step
            else:
                step += 1
                continue
            faults.injected += 1
            step += 1
            if not await faults.pause(0.4):
                return

    # the same streams without faults first: the yardstick for requests and Events under faults
    baseline = await run_scenario(stage, "Kubernetes API baseline (no faults)", size(quick), no_faults)
    outcome = await run_scenario(
        stage, "Kubernetes API: dropped watches, 410, 500/429, latency", size(quick), inject
    )
    outcome.kube["baseline_total"] = baseline.kube["total"]
    outcome.kube["ratio_to_baseline"] = round(outcome.kube["total"] / max(baseline.kube["total"], 1), 2)
    outcome.events["baseline_written"] = baseline.events["written"]
    outcome.raced += [f"baseline: {text}" for text in baseline.raced]
    outcome.unproven += baseline.unproven
    outcome.wrong_actions += [f"baseline: {w}" for w in baseline.wrong_actions]
    outcome.changes_lost += [f"baseline: {w}" for w in baseline.changes_lost]
    outcome.evidence += [f"baseline: {e}" for e in baseline.evidence]  # its raced writes' too
    return outcome


async def mass_not_ready(stage: Stage, quick: bool) -> Outcome:
    """A network partition: every Node loses Ready at once; the valve must hold. Drains are counted at
    the wire (every drain that reached the proxy, acknowledged or not)."""
    outcome = Outcome("mass NotReady (all Nodes at once)")
    config = CONFIG.replace(sync=SyncOptions(ready_grace_s=1.0, max_drain_fraction=0.10))
    async with FaultProxy(stage.sandbox.rest_url) as proxy:
        service = await stage.syncer(config, proxy.url)
        figures = stage.watch_kube()
        await service.start()
        try:
            await service.wait_ready(60)
            refusals_before = service.engine.stats.valve_refusals
            lost_ready_at = time.monotonic()
            for name in stage.names:
                stage.kube.set_node_condition(
                    f"k8s-{name}", "Ready", "False", "NodeStatusUnknown", "partition"
                )
            outcome.faults_injected = len(stage.names)
            await asyncio.sleep(
                8 if quick else 30
            )  # the storm lasts this long: the valve must hold throughout
            threshold = service.engine.valve.threshold(len(stage.names))
            drained = {
                node for _t, node, state, _b in node_writes(proxy.writes) if state and "DRAIN" in state
            }
            outcome.observed = {"valve_refusals": service.engine.stats.valve_refusals - refusals_before}
            if len(drained) > threshold:
                outcome.wrong_actions.append(f"{len(drained)} drains past the valve threshold {threshold}")
            outcome.notes = (
                f"valve open: {service.engine.valve.is_open}, threshold {threshold}, drained {len(drained)}"
            )
            ready, reasons = service.readiness()
            if ready or not any("valve" in r for r in reasons):
                outcome.wrong_actions.append("readiness did not report the open valve")
            ready_at = time.monotonic()
            for name in stage.names:
                stage.kube.set_node_condition(f"k8s-{name}", "Ready", "True", "KubeletReady", "back")
            cleared = time.monotonic()
            left: list[str] = []
            while time.monotonic() - cleared < 60:
                listing = await stage.reader.list_all_nodes()
                left = [n.name for n in listing.nodes if n.drain_flag and n.name in set(stage.names)]
                if not left:
                    break
                await asyncio.sleep(0.2)  # recovery poll
            outcome.changes_lost = left
            outcome.converge_s = time.monotonic() - cleared
        finally:
            await service.stop()
            outcome.kube, outcome.events = figures()
        for at, node, state, _body in node_writes(proxy.writes):
            outcome.actions += 1
            if state and "DRAIN" in state and not lost_ready_at <= at:
                outcome.wrong_actions.append(f"drained {node} before it lost Ready")
            if state and "UNDRAIN" in state and not ready_at <= at:
                outcome.wrong_actions.append(f"undrained {node} while NotReady")
    progress(f"{outcome.scenario}: {outcome.row()}")
    return outcome


POWER_SET, POWER_MEMBERS = "fpw", 3
POWER_SHAPE = NodeShape(cpus=1, real_memory_mb=400, features=(POWER_SET,))


def power_members_conf(wanted: Release) -> tuple[int, tuple[str, ...]]:
    """Where the release cannot declare members over REST (24.11: no `POST /new/node/`), the slurm.conf
    lines naming them, as the NodeSet's PowerSaving condition tells an admin to, and their port base (each
    member's slurmd listens on base + n); (0, ()) where the syncer declares them itself."""
    if VERSIONS[wanted.newest_api_version].node_create:
        return 0, ()
    base = free_port_block(POWER_MEMBERS)
    address = f"NodeAddr=127.0.0.1 NodeHostname={short_hostname()}"  # every slurmd of the sandbox is here
    return base, tuple(
        f"{POWER_SHAPE.node_conf(f'{POWER_SET}-{i}', base + i)} {address}" for i in range(POWER_MEMBERS)
    )


def power_nodeset(ceiling: int) -> dict[str, Any]:
    """A power-managed NodeSet on the Nodes of pool `power`, startTimeout 2 s: a Node NotReady longer than
    that is what forced members down before issue 45."""
    return {
        "metadata": {"name": POWER_SET},
        "spec": {
            "slurm": {"features": [POWER_SET]},
            "power": {
                "maxReplicas": ceiling, "startTimeout": "2s",
                "node": {"cpus": POWER_SHAPE.cpus, "realMemory": POWER_SHAPE.real_memory_mb},
            },
            "template": {"spec": {"nodeSelector": {"pool": "power"},
                                  "containers": [{"name": "slurmd", "image": "slurmd:26.05"}]}},
        },
    }  # fmt: skip


async def squeue(stage: Stage, jobs: list[str]) -> dict[str, str]:
    """Job id -> state (scontrol's JobState; GONE once slurmctld forgot it)."""
    found = {}
    for job in jobs:
        out = (await asyncio.to_thread(stage.sandbox.run, "scontrol", "show", "job", job)).stdout
        state = next((w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")), "GONE")
        found[job] = state
    return found


async def until(
    check: Callable[[], Awaitable[bool]], deadline_s: float, what: str,
    seen: Callable[[], Awaitable[str]] | None = None,
) -> None:  # fmt: skip
    """`seen`: what to tell about the state of things when the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while not await check():
        if time.monotonic() > deadline:
            told = f": {await seen()}" if seen is not None else ""
            raise RuntimeError(f"timed out after {deadline_s} s waiting for {what}{told}")
        await asyncio.sleep(0.2)  # condition poll


async def power_not_ready(stage: Stage, quick: bool) -> Outcome:
    """Nodes NotReady with slurmd fine (issue 45): the Kubernetes Nodes under running members of a power-
    managed NodeSet turn Ready=Unknown (a control plane that lost them, expired kubelet certificates) for
    longer than startTimeout while each member's real slurmd keeps answering Slurm. Wrong: any power-down
    of a member at the wire (POWER_DOWN_FORCE would requeue or end its job). Lost: a job that did not end
    COMPLETED once released. Observed: the NotReady Nodes the syncer itself counted. Where the release cannot
    declare members over REST (24.11), slurm.conf names them (`power_members_conf`)."""
    outcome = Outcome("Nodes NotReady with slurmd fine (power members running jobs)")
    kube, hosts = stage.kube, [f"power-h{i}" for i in range(POWER_MEMBERS)]
    for host in hosts:
        kube.create("", "v1", "nodes", {"metadata": {"name": host, "labels": {"pool": "power"}},
                                        "status": {"conditions": [READY]}})  # fmt: skip
    members = [f"{POWER_SET}-{i}" for i in range(POWER_MEMBERS)]
    port_base = stage.power_port_base or free_port_block(POWER_MEMBERS)
    config = CONFIG.replace(nodeset=NodeSetOptions(power_port_base=port_base))
    done = stage.sandbox.directory / "work" / f"{POWER_SET}.done"
    done.unlink(missing_ok=True)
    jobs: list[str] = []
    async with FaultProxy(stage.sandbox.rest_url) as proxy:
        service = await stage.syncer(config, proxy.url)
        figures = stage.watch_kube()
        try:
            async with SlurmdStandIn(
                kube, stage.sandbox, boot=True, port_base=port_base, nodesets=(POWER_SET,)
            ):
                await service.start()
                await service.wait_ready(60)
                kube.create(GROUP, VERSION, "nodesets", power_nodeset(POWER_MEMBERS), namespace=NAMESPACE)
                jobs = await _members_running_jobs(stage, members, done.name)
                seen_not_ready = 0
                fault_at = time.monotonic()
                for host in hosts:
                    kube.set_node_condition(host, "Ready", "Unknown", "NodeStatusUnknown",
                                            "Kubelet stopped posting node status.")  # fmt: skip
                outcome.faults_injected = len(hosts)
                hold_until = fault_at + (8 if quick else 30)  # past startTimeout, many passes
                while time.monotonic() < hold_until:
                    seen_not_ready = max(seen_not_ready, not_ready_seen(service, hosts))
                    await asyncio.sleep(0.2)  # the fault lasts this long
                outcome.observed = {"nodes_not_ready_seen": seen_not_ready}
                states = await squeue(stage, jobs)
                outcome.wrong_actions += [
                    f"job {job} {state} while its Node was NotReady" for job, state in states.items()
                    if state != "RUNNING"
                ]  # fmt: skip
                for host in hosts:
                    kube.set_node_condition(host, "Ready", "True", "KubeletReady", "back")
                released = time.monotonic()
                done.touch()

                async def ended() -> bool:
                    return all(
                        s not in ("RUNNING", "COMPLETING", "PENDING")
                        for s in (await squeue(stage, jobs)).values()
                    )

                await until(ended, 60, "the jobs' end")
                outcome.converge_s = time.monotonic() - released
                outcome.changes_lost = [f"job {j} ended {s}" for j, s in (await squeue(stage, jobs)).items()
                                        if s != "COMPLETED"]  # fmt: skip
        finally:
            done.touch()
            await service.stop()
            outcome.kube, outcome.events = figures()
            await _power_cleanup(stage, members, jobs)
        for at, node, state, _body in node_writes(forwarded(proxy)):
            outcome.actions += 1
            if node in members and state and any(s.startswith("POWER_DOWN") for s in state):
                outcome.wrong_actions.append(
                    f"{'+'.join(state)} on {node} {at - fault_at:.1f} s into the fault"
                )
    declared = "named in slurm.conf" if stage.power_port_base else "declared by the syncer"
    outcome.notes = (
        f"{len(jobs)} --no-requeue jobs on members ({declared}) whose Nodes were NotReady, slurmd answering"
    )
    progress(f"{outcome.scenario}: {outcome.row()}")
    return outcome


def not_ready_seen(service: SyncerService, hosts: list[str]) -> int:
    """How many of `hosts` the syncer's own Node cache shows NotReady."""
    nodes = service.kube_cache.nodes.items
    return sum(
        1
        for h in hosts
        if h in nodes and (c := nodes[h].condition("Ready")) is not None and c.status != "True"
    )


async def _members_running_jobs(stage: Stage, members: list[str], done: str) -> list[str]:
    """Powers every member up (declared first), and starts a --no-requeue job on each that runs until told."""

    async def declared() -> bool:
        states = {n: await asyncio.to_thread(stage.sandbox.node_state, n) for n in members}
        return all("POWERED_DOWN" in flags for flags in states.values())

    await until(declared, 60, "the members declared")
    names = f"{POWER_SET}-[0-{len(members) - 1}]"
    await asyncio.to_thread(stage.sandbox.scontrol, "update", f"nodename={names}", "state=POWER_UP")

    async def registered() -> bool:
        # registered: neither powered down (a POWER_UP request waits for Slurm's power-save pass, up to
        # 10 s), powering up nor silent. Without POWERED_DOWN this passed at once and the jobs went to
        # members not up yet (one allocated before its slurmd registered waits for the 30 s check)
        states = [await asyncio.to_thread(stage.sandbox.node_state, n) for n in members]
        not_up = {"POWERED_DOWN", "POWERING_UP", "NOT_RESPONDING"}
        return all(flags and not flags & not_up for flags in states)

    await until(registered, 120, "the members' slurmd registered", lambda: _states(stage, members, []))
    jobs = []
    for member in members:
        out = await asyncio.to_thread(
            stage.sandbox.run, "sbatch", "--parsable", "--no-requeue", "-w", member, "--wrap",
            f"while [ ! -e {done} ]; do sleep 0.2; done", check=True,
        )  # fmt: skip
        jobs.append(out.stdout.strip().split(";")[0])

    async def running() -> bool:
        return all(s == "RUNNING" for s in (await squeue(stage, jobs)).values())

    # registered and idle: each job starts at its submission or the next scheduling pass (seconds)
    await until(running, 90, "a job running on each member", lambda: _states(stage, members, jobs))
    return jobs


async def _states(stage: Stage, members: list[str], jobs: list[str]) -> str:
    """What a timed-out wait saw: each member's Slurm state, each job's state and reason."""
    nodes = {n: "+".join(sorted(await asyncio.to_thread(stage.sandbox.node_state, n))) for n in members}
    shown = {}
    for job in jobs:
        out = (await asyncio.to_thread(stage.sandbox.run, "scontrol", "show", "job", job)).stdout.split()
        shown[job] = " ".join(w for w in out if w.startswith(("JobState=", "Reason=", "NodeList=")))
    return f"members {nodes}, jobs {shown}"


async def _power_cleanup(stage: Stage, members: list[str], jobs: list[str]) -> None:
    """No NodeSet, pods, Nodes, slurmd or records made over REST of this scenario left for the next one. A
    member slurm.conf names (24.11) stays, as it was; one never declared (the scenario failed before) is
    not there to delete."""
    for job in jobs:
        await asyncio.to_thread(stage.sandbox.run, "scancel", job)
    kube = stage.kube
    kube.api.delete(kube.api.resource(GROUP, VERSION, "nodesets"), NAMESPACE, POWER_SET)
    pods = kube.api.resource("", "v1", "pods")
    for member in members:
        if kube.pod(NAMESPACE, member) is not None:
            # at once, not gracefully: a pod still terminating when the next scenario's syncer starts is
            # rightly drained by it, and that scenario would judge the drain as its own wrong write
            kube.api.delete(pods, NAMESPACE, member, {"gracePeriodSeconds": 0})
        if kube.pod(NAMESPACE, member) is not None:  # a finalizer holds it: nobody here will remove it
            kube.patch("", "v1", "pods", member, {"metadata": {"finalizers": None}}, namespace=NAMESPACE)

    async def pods_gone() -> bool:
        return all(kube.pod(NAMESPACE, member) is None for member in members)

    await until(pods_gone, 30, "the members' pods gone")
    for i in range(POWER_MEMBERS):
        kube.api.delete(kube.api.resource("", "v1", "nodes"), "", f"power-h{i}")
    for member in members:
        await asyncio.to_thread(stage.sandbox.stop_slurmd, member)
        known = await asyncio.to_thread(stage.sandbox.node_state, member)
        if not known or stage.sandbox.named_in_conf(member):
            continue
        await asyncio.to_thread(stage.sandbox.delete_node, member)


async def syncer_crashes(stage: Stage, quick: bool) -> Outcome:
    return await crash_scenario(stage, changes=40 if quick else 200, kills=4 if quick else 12)


SCENARIOS: dict[str, Callable[[Stage, bool], Awaitable[Outcome]]] = {
    "slurmrestd": slurmrestd_restarts,
    "slurmctld": slurmctld_restart,
    "bad-answers": bad_slurm_answers,
    "kube-api": kube_api_faults,
    "not-ready": mass_not_ready,
    "power-not-ready": power_not_ready,
    "crash": syncer_crashes,
}


async def negative_control(stage: Stage, control: str, quick: bool) -> Outcome:
    return await run_scenario(
        stage,
        f"negative control: {CONTROLS[control]}",
        size(quick),
        no_faults,
        control=control,
        deadline_s=8.0,
    )


class SyncerProcess:
    """`slurm-syncer run` as a real process (as the Deployment runs it), restarted after each SIGKILL with
    the same identity, as a container restarted in its pod would be."""

    def __init__(self, stage: Stage, slurm_url: str) -> None:
        self.stage = stage
        self.slurm_url = slurm_url
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.started_at = 0.0

    async def start(self) -> None:
        self.starts += 1
        self.started_at = time.monotonic()
        argv = [
            str(Path(sys.executable).parent / "slurm-syncer"), "--log-format", "json", "run",
            "--slurm-url", self.slurm_url, "--slurm-token-file", str(self.stage.sandbox.token_file),
            "--kubeconfig", str(self.stage.kubeconfig), "--namespace", NAMESPACE, "--identity", "crash-test",
            "--lease-namespace", NAMESPACE, "--slurm-poll-interval", "300ms", "--slurm-stale-after", "3s",
            "--max-drain-fraction", "1.0", "--ready-grace-period", "3600s", "--no-nodeset-enabled",
            "--listen-address", "127.0.0.1:0",
        ]  # fmt: skip
        log = (self.stage.workdir / f"syncer-{self.starts}.log").open("wb")
        with log:
            self.process = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log)

    async def kill(self) -> int:
        """SIGKILL; 1 if that killed a running process (its exit status says so), else 0."""
        if self.process is None or self.process.returncode is not None:
            return 0
        self.process.kill()
        return int(await self.process.wait() == -9)

    async def stop(self) -> None:
        if self.process is not None:
            await stop_process(self.process)


async def crash_scenario(stage: Stage, changes: int, kills: int, deadline_s: float = 90.0) -> Outcome:
    """The syncer process is SIGKILLed at random points of a stream of `changes` cordons and uncordons (a
    random delay after a change, so a write may be in flight) and restarted at once each time."""
    name = "syncer SIGKILLed at random points and restarted"
    cordons = (changes * 2 + 2) // 3
    progress(f"{name}: {changes} changes ({cordons} cordons, {changes - cordons} uncordons), {kills} kills")
    outcome = Outcome(name)
    picked, _none, _bystander = stage.pick(cordons, 0)
    plan = [(n, True) for n in picked] + [(n, False) for n in random.sample(picked, changes - cordons)]
    kill_after = set(random.sample(range(changes), kills))
    killed_writing = 0  # kills of a process that had already written to Slurm
    figures = stage.watch_kube()
    stage.begin()
    async with FaultProxy(stage.sandbox.rest_url) as proxy:  # records every write the syncer makes
        syncer = SyncerProcess(stage, proxy.url)
        await syncer.start()
        try:
            for step, (node, on) in enumerate(plan):
                stage.cordon(node, on)
                if step in kill_after:
                    # a random point of the process's life: starting, syncing, or writing
                    await asyncio.sleep(random.uniform(0.0, 4.0))
                    killed = await syncer.kill()
                    outcome.faults_injected += 1
                    outcome.observed["processes_killed_running"] = (
                        outcome.observed.get("processes_killed_running", 0) + killed
                    )
                    killed_writing += any(t > syncer.started_at for t, *_rest in proxy.writes)
                    await syncer.start()
                await asyncio.sleep(0.1)  # the pace of the change stream
            await stage.wait_converged(outcome, picked, deadline_s)
        finally:
            await syncer.stop()
            stage.end()
            outcome.kube, outcome.events = figures()
        judged = wrong_writes(forwarded(proxy), stage.truth)  # another process: no looks, nothing raced
        outcome.actions, wrong = judged.actions, judged.wrong
        wrong += wrong_shown(stage.shown, forwarded(proxy), stage.truth)
        outcome.wrong_actions = [text for _at, _node, text in wrong]
        outcome.kube_states = len(stage.shown)
        keep_evidence(stage, outcome, wrong, forwarded(proxy))
    outcome.notes = f"{syncer.starts} processes, {killed_writing} of the {kills} kills after it had written"
    if outcome.changes_lost:
        tail = (stage.workdir / f"syncer-{syncer.starts}.log").read_text(errors="replace")[-3000:]
        progress(f"{name}: not converged; last syncer log:\n{tail}")
    stage.reset(picked)
    progress(f"{name}: {outcome.row()}")
    return outcome


async def main_async(args: argparse.Namespace) -> int:
    cancel_on_sigterm()
    out = Path(args.out)
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    nodes = 60 if args.quick else 200
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        power_ports, power_conf = power_members_conf(release(args.slurm))
        sandbox = await asyncio.to_thread(
            up, Path(tmp) / "sandbox", nodes, slurm=args.slurm, extra_conf=power_conf
        )
        kube = KubeApiEmulator(bookmark_interval_s=1.0)
        await kube.start()
        reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
        try:
            await reader.start()
            names = sim_node_names(nodes)
            seed(kube, names)
            kubeconfig = kube.write_kubeconfig(Path(tmp) / "kubeconfig")
            stage = Stage(sandbox, kube, kubeconfig, reader, names, Path(tmp), power_port_base=power_ports)
            await warm_up(stage)
            if args.controls:
                outcomes = [await negative_control(stage, c, args.quick) for c in args.only or CONTROLS]
            else:
                outcomes = [await SCENARIOS[key](stage, args.quick) for key in args.only or SCENARIOS]
        finally:
            await reader.close()
            await kube.stop()
            await asyncio.to_thread(sandbox.down)
    rows = [o.row() for o in outcomes]
    results = {
        "date": time.strftime("%Y-%m-%d"), "nodes": nodes, "quick": args.quick, "slurm": sandbox.release.name,
        "controls": args.controls, "scenarios": rows,
    }  # fmt: skip
    await asyncio.to_thread((out / "results.json").write_text, json.dumps(results, indent=2))
    for row in rows:
        print(
            f"{row['scenario']:58s} faults {row['faults_injected']:3d} "
            f"(observed {row['faults_observed']:3d})  "
            f"actions {row['actions']:4d}  wrong {row['wrong_actions']}  lost {row['changes_lost']}  "
            f"raced {row['raced']}  "
            f"converge {row['converge_s']:.1f} s"
        )
    return verdict(rows, controls=args.controls)


def verdict(rows: list[dict[str, Any]], *, controls: bool) -> int:
    """0 when the run proves what it should: fault scenarios with faults observed and nothing wrong or
    lost; negative controls each caught (wrong or lost non-zero)."""
    failed = []
    for row in rows:
        caught = bool(row["wrong_actions"] or row["changes_lost"])
        if controls and not caught:
            failed.append(f"{row['scenario']}: the oracle reported nothing; the harness is broken")
        if not controls and caught:
            failed.append(f"{row['scenario']}: {row['wrong_actions']} wrong, {row['changes_lost']} lost")
        if not controls and row["faults_injected"] and not row["faults_observed"]:
            failed.append(f"{row['scenario']}: {row['faults_injected']} faults injected, none observed")
    for line in failed:
        progress(f"FAILED {line}")
    return 1 if failed else 0


def markdown(results: dict[str, Any]) -> str:
    """The figures of a results.json as the Markdown table docs/reliability.md shows."""
    lines = [
        "| scenario | faults injected | faults observed | Slurm writes judged (never reached slurmrestd; "
        "would have been wrong) | Kubernetes states judged | wrong | lost | converge |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in results["scenarios"]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(row["observed"].items())) or "-"
        lines.append(
            f"| {row['scenario']} | {row['faults_injected']} | {row['faults_observed']} ({kinds}) | "
            f"{row['actions']} ({row.get('unforwarded', 0)}; {row.get('unforwarded_wrong', 0)}) | "
            f"{row['kube_states']} | "
            f"{row['wrong_actions']} | {row['changes_lost']} | {row['converge_s']:.1f} s |"
        )
    return "\n".join(lines)


def main() -> int:
    if sys.argv[1:2] == ["--table"]:  # python benchmarks/faults.py --table DIR/results.json
        print(markdown(json.loads(Path(sys.argv[2]).read_text())))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="short versions (60 nodes, 12 changes each)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--slurm", choices=sorted(RELEASES), default=None,
        help="Slurm release of the sandbox (default: $SLURM_SYNCER_SLURM_RELEASE, else 26.05)",
    )  # fmt: skip
    parser.add_argument(
        "--controls", action="store_true",
        help="run the negative controls (deliberately wrong syncers) instead of the fault scenarios",
    )  # fmt: skip
    parser.add_argument(
        "--only", nargs="+", choices=[*SCENARIOS, *CONTROLS], help="run only these scenarios (or controls)"
    )
    args = parser.parse_args()
    wrong_kind = [o for o in args.only or [] if (o in CONTROLS) != args.controls]
    if wrong_kind:
        parser.error(f"--only {' '.join(wrong_kind)}: {'fault scenarios' if args.controls else 'controls'} "
                     f"need {'no ' if args.controls else ''}--controls")  # fmt: skip
    # the figures matter here, not the syncer's info lines; the tape keeps them for a wrong action's evidence
    configure_logging("console", "warning", tap=TAPE)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
