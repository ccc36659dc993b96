"""What the one-pool scheduler (issue 44) needs to know of Slurm's jobs, measured on a private sandbox.

    python benchmarks/scheduler_slurm.py --slurm 26.05 --out benchmarks/results/scheduler-slurm-26.05
    python benchmarks/scheduler_slurm.py --slurm 24.11 --out benchmarks/results/scheduler-slurm-24.11
    python benchmarks/scheduler_slurm.py --slurm 26.05 --only cancel,preempt   # some scenarios

Each scenario starts its own sandbox (never the tests' shared one: some need slurm.conf settings that need a
restart, PreemptType, GraceTime, GresTypes, a short SlurmdTimeout) with real slurmd for the nodes a job lands
on, and follows its jobs over REST (`GET /job/{id}` every 0.1 s from this process: each time includes up to
one such poll). A pod's job is what `SlurmClient.submit_job` sends: external where the release has them, a
placeholder batch job (its script) on 24.11. The scenarios (`SCENARIOS`): a pod's job's life (submit, run,
fields), cancel with and without a signal, its time limit, hold and release, a 2-node job, node failures
(slurmd killed; node set DOWN; node deleted), preemption (partition priority: REQUEUE, CANCEL, GraceTime),
what a job asks for (CPUs, memory, GPUs) against what `job_resources` shows, the pending reasons, the marker
field, epilogs, the placeholder's scripts, what following jobs costs with 1,000 and 10,000 jobs queued (and
the JobCache's own cost), and accounting without slurmdbd.

Prints each scenario's facts as it goes and adds them to DIR/results.json (release, date, machine reference,
load). Needs root, as the sandbox does. All scenarios take about 25 minutes on a 2-core machine (`follow`,
which submits 10,000 jobs, about 6).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.run import machine_reference_s, progress
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.job_cache import JobCache
from syncer.slurm.jobs import PLACEHOLDER_SCRIPT
from syncer.slurm.metrics_hint import MetricsReader
from syncer.slurm.versions import VERSIONS
from syncer.testing.sandbox import Sandbox, release, up
from syncer.testing.sandbox.config import free_port

Json = dict[str, Any]


@dataclass
class Answer:
    status: int
    body: Json
    size: int
    seconds: float

    @property
    def errors(self) -> list[str]:
        return [
            f"{e.get('error_number')}: {e.get('description') or e.get('error')}"
            for e in self.body.get("errors", [])
        ]


class Rest:
    """slurmrestd, raw (urllib): what the wire carries, sizes and times of each call."""

    def __init__(self, sandbox: Sandbox, version: str | None = None) -> None:
        self.sandbox = sandbox
        self.version = version or sandbox.api_versions[-1]
        self.token = sandbox.token_file.read_text().strip()
        self.external_jobs = VERSIONS[self.version].external_jobs

    def call(
        self, method: str, path: str, body: Json | None = None, query: str = "", token: str = ""
    ) -> Answer:
        url = f"{self.sandbox.rest_url}/slurm/{self.version}{path}" + (f"?{query}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-SLURM-USER-TOKEN": token or self.token, "Content-Type": "application/json"}
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        seconds = time.monotonic() - started
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError:
            decoded = {"text": raw[:300].decode(errors="replace")}
        return Answer(status, decoded if isinstance(decoded, dict) else {"value": decoded}, len(raw), seconds)

    def submit(self, job: Json, script: str | None = None, token: str = "") -> Answer:
        job = {"current_working_directory": "/tmp", "environment": ["PATH=/bin:/usr/bin"], **job}
        body: Json = {"job": job}
        if script is not None:
            body["script"] = script
        return self.call("POST", "/job/submit", body, token=token)

    def pod(self, job: Json, token: str = "") -> Answer:
        """Submits a pod's job as the client does: external (no script) where the release has them, else
        (24.11) a placeholder batch job; `requeue` false unless `job` says otherwise."""
        job = {"nodes": "1", "requeue": False, **job}
        if self.external_jobs:
            return self.submit({"name": "ext", "flags": ["EXTERNAL_JOB"], **job}, token=token)
        job = {"name": "placeholder", "standard_output": "/dev/null", **job}
        return self.submit(job, script=PLACEHOLDER_SCRIPT, token=token)

    def external(self, **job: Any) -> int:
        """A pod's job (`pod`); its id, or raises with Slurm's errors."""
        answer = self.pod(job)
        if answer.status != 200 or not answer.body.get("job_id"):
            raise RuntimeError(f"submit refused: HTTP {answer.status} {answer.errors}")
        return int(answer.body["job_id"])

    def batch(self, script: str = "#!/bin/sh\nsleep 600\n", **job: Any) -> int:
        answer = self.submit({"name": "batch", "nodes": "1", **job}, script=script)
        if answer.status != 200 or not answer.body.get("job_id"):
            raise RuntimeError(f"submit refused: HTTP {answer.status} {answer.errors}")
        return int(answer.body["job_id"])

    def job(self, job_id: int) -> Json | None:
        answer = self.call("GET", f"/job/{job_id}")
        jobs = answer.body.get("jobs") or []
        return jobs[0] if answer.status == 200 and jobs else None

    def cancel(self, job_id: int, query: str = "") -> Answer:
        return self.call("DELETE", f"/job/{job_id}", query=query)

    def node(self, name: str) -> Json | None:
        nodes = self.call("GET", f"/node/{name}").body.get("nodes") or []
        return nodes[0] if nodes else None


def number(value: Any) -> Any:
    """Slurm's {"set","infinite","number"} as its number (None unset, "inf" infinite)."""
    if isinstance(value, dict) and "number" in value:
        if value.get("infinite"):
            return "inf"
        return value["number"] if value.get("set") else None
    return value


def summary(job: Json | None) -> Json:
    """The fields of a job the scheduler reads, flat."""
    if job is None:
        return {"gone": True}
    return {
        "state": job.get("job_state"),
        "reason": job.get("state_reason"),
        "nodes": job.get("nodes"),
        "preempt_time": number(job.get("preempt_time")),
        "end_time": number(job.get("end_time")),
        "start_time": number(job.get("start_time")),
        "restart_cnt": job.get("restart_cnt"),
        "priority": number(job.get("priority")),
        "hold": job.get("hold"),
        "flags": [f for f in job.get("flags", []) if not f.startswith("USING_DEFAULT")],
    }


@dataclass
class Timeline:
    """A job's distinct summaries, each with the seconds since `t0` it was first seen."""

    t0: float = field(default_factory=time.monotonic)
    seen: list[tuple[float, Json]] = field(default_factory=list)

    def add(self, state: Json) -> None:
        if not self.seen or self.seen[-1][1] != state:
            self.seen.append((round(time.monotonic() - self.t0, 2), state))

    def first(self, test: Callable[[Json], bool]) -> float | None:
        return next((t for t, s in self.seen if test(s)), None)

    def rows(self) -> list[Json]:
        return [{"t": t, **s} for t, s in self.seen]


def follow(
    rest: Rest,
    job_ids: list[int],
    until: Callable[[dict[int, Json]], bool],
    timeout_s: float,
    t0: float | None = None,
    extra: Callable[[], Json] | None = None,
) -> dict[int, Timeline]:
    """Polls the jobs every 0.1 s until `until(latest summaries)` or `timeout_s`."""
    start = t0 if t0 is not None else time.monotonic()
    lines = {j: Timeline(start) for j in job_ids}
    deadline = time.monotonic() + timeout_s
    while True:
        latest = {}
        for job_id in job_ids:
            state = summary(rest.job(job_id))
            if extra is not None:
                state.update(extra())
            lines[job_id].add(state)
            latest[job_id] = state
        if until(latest) or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


def ended(state: Json) -> bool:
    return state.get("gone") or not {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"} & set(
        state.get("state") or []
    )


def running(state: Json) -> bool:
    return "RUNNING" in (state.get("state") or [])


def wait(check: Callable[[], bool], timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        time.sleep(0.05)
    return time.monotonic() - started


# --- sandboxes ----------------------------------------------------------------------------------------------

PREEMPTION = (
    "PreemptType=preempt/partition_prio",
    "PreemptMode=REQUEUE",
    "PartitionName=low Nodes=ALL PriorityTier=1 GraceTime=10 PreemptMode=REQUEUE",
    "PartitionName=lowcancel Nodes=ALL PriorityTier=1 GraceTime=10 PreemptMode=CANCEL",
    "PartitionName=nograce Nodes=ALL PriorityTier=1 PreemptMode=CANCEL",
    "PartitionName=high Nodes=ALL PriorityTier=10 PreemptMode=OFF",
)


@contextmanager
def sandbox(
    base: Path,
    name: str,
    slurm: str,
    extra: tuple[str, ...] = (),
    nodes: int = 4,
    files: dict[str, str] | None = None,
) -> Iterator[Sandbox]:
    """A private sandbox; `files` are written to its etc/ first (scripts slurm.conf names must exist)."""
    directory = base / name
    progress(f"{name}: starting a Slurm {slurm} sandbox in {directory}")
    for file_name, text in (files or {}).items():
        path = directory / "etc" / file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    sbx = up(directory, nodes=nodes, slurm=slurm, extra_conf=extra)
    try:
        yield sbx
    finally:
        sbx.down()


def real_nodes(sbx: Sandbox, *names: str, cpus: int = 2, memory_mb: int = 1000, gpus: int = 0) -> None:
    """Real slurmd for dynamic nodes `names` (they run jobs and answer pings), registered and idle."""
    for name in names:
        gres = sbx.write_gres(name, count=gpus) if gpus else ""
        sbx.start_slurmd(name, cpus=cpus, memory_mb=memory_mb, gres=gres)


def runs(rest: Rest, job_id: int) -> Callable[[], bool]:
    """A check that `job_id` is RUNNING (for `wait`)."""
    return lambda: running(summary(rest.job(job_id)))


def waits_on_resources(rest: Rest, job_id: int) -> Callable[[], bool]:
    return lambda: summary(rest.job(job_id))["reason"] == "Resources"


def runs_in(job_id: int) -> Callable[[dict[int, Json]], bool]:
    """A `follow` condition: `job_id` is RUNNING."""
    return lambda latest: running(latest[job_id])


def decided(rest: Rest, job_id: int) -> bool:
    state = summary(rest.job(job_id))
    return running(state) or state.get("reason") not in ("None", None)


def idle(rest: Rest, node: str) -> bool:
    """Nothing allocated or completing on `node` (its `alloc_cpus` can lag behind its state)."""
    state = set((rest.node(node) or {}).get("state") or [])
    return "IDLE" in state and "COMPLETING" not in state


def mb(value: int) -> Json:
    return {"set": True, "number": value}


WHOLE: Json = {"tasks": 1, "cpus_per_task": 2, "memory_per_node": mb(500)}  # all of a 2-CPU node's CPUs


# --- scenarios ----------------------------------------------------------------------------------------------


def scenario_external(base: Path, slurm: str) -> Json:
    """Submit -> RUNNING on an idle real node (n=5), the submit answer and the fields read back; which REST
    versions parse the EXTERNAL_JOB flag; a second identical submit (is it deduplicated?)."""
    out: Json = {}
    with sandbox(base, "external", slurm) as sbx:
        real_nodes(sbx, "dyn1")
        parse: Json = {}
        for version in sbx.api_versions:
            answer = Rest(sbx, version).submit(
                {"name": "v", "flags": ["EXTERNAL_JOB"], "nodes": "1", **WHOLE}
            )
            parse[version] = answer.errors or f"job {answer.body.get('job_id')}"
            if answer.body.get("job_id"):
                Rest(sbx).cancel(answer.body["job_id"])
        out["flag_by_version"] = parse
        rest = Rest(sbx)
        times = []
        for _ in range(5):
            started = time.monotonic()
            job_id = rest.external(required_nodes=["dyn1"], **WHOLE)
            submitted = time.monotonic() - started
            runs = submitted + wait(lambda: running(summary(rest.job(job_id))), 30, "runs")  # noqa: B023
            times.append((round(submitted, 3), round(runs, 2)))
            last = rest.job(job_id) or {}
            rest.cancel(job_id)
            wait(lambda: idle(rest, "dyn1"), 10, "node free")
        out["submit_and_running_s"] = times
        out["fields"] = {k: number(last.get(k)) for k in FIELDS}
        twice = [rest.external(name="same", admin_comment="m", hold=True) for _ in range(2)]
        out["same_submit_twice"] = twice
        for job_id in twice:
            rest.cancel(job_id)
    return out


FIELDS = (
    "batch_flag",
    "flags",
    "admin_comment",
    "comment",
    "command",
    "batch_host",
    "requeue",
    "nodes",
    "job_state",
    "state_reason",
    "time_limit",
    "end_time",
    "user_name",
    "standard_output",
)


def pair(rest: Rest, node: str, external: Json | None = None) -> tuple[int, int]:
    """An external job holding all of `node`, RUNNING, and a batch job waiting for it (Resources)."""
    holder = rest.external(required_nodes=[node], **WHOLE, **(external or {}))
    wait(lambda: running(summary(rest.job(holder))), 30, "holder runs")
    waiter = rest.batch(required_nodes=[node], **WHOLE)
    wait(lambda: summary(rest.job(waiter))["reason"] == "Resources", 30, "waiter waits on Resources")
    return holder, waiter


def scenario_cancel(base: Path, slurm: str) -> Json:
    """DELETE /job/{id} of a running external job, with and without a signal (n=3 each): when it ends, in
    which state, and when a job waiting for its node starts."""
    out: Json = {}
    with sandbox(base, "cancel", slurm) as sbx:
        real_nodes(sbx, "dyn1")
        rest = Rest(sbx)
        for query in ("", "signal=SIGTERM", "signal=SIGKILL", "signal=SIGUSR1", "flags=FULL_JOB"):
            runs = []
            for _ in range(3):
                holder, waiter = pair(rest, "dyn1")
                t0 = time.monotonic()
                answer = rest.cancel(holder, query)
                lines = follow(
                    rest,
                    [holder, waiter],
                    runs_in(waiter),
                    20,
                    t0,
                )
                runs.append(
                    {
                        "answer": [answer.status, answer.errors],
                        "holder": [(r["t"], r.get("state"), r.get("reason")) for r in lines[holder].rows()],
                        "waiter_runs_s": lines[waiter].first(running),
                    }
                )
                for job_id in (holder, waiter):
                    rest.cancel(job_id)
                wait(lambda: idle(rest, "dyn1"), 20, "node free")
            out[query or "no signal"] = runs
    return out


def scenario_time_limit(base: Path, slurm: str) -> Json:
    """An external job with a 1-minute time limit (3 at once, one per node): when it ends against its
    end_time, its state, and when the job waiting for its node starts."""
    out: Json = {}
    with sandbox(base, "timelimit", slurm) as sbx:
        nodes = ("dyn1", "dyn2", "dyn3")
        real_nodes(sbx, *nodes)
        rest = Rest(sbx)
        pairs = [pair(rest, node, {"time_limit": {"set": True, "number": 1}}) for node in nodes]
        ends = {h: summary(rest.job(h))["end_time"] for h, _ in pairs}
        t0 = time.monotonic()
        wall0 = time.time()
        watched = [j for p in pairs for j in p]
        lines = follow(rest, watched, lambda s: all(running(s[w]) for _, w in pairs), 150, t0)
        out["runs"] = [
            {
                "end_time_after_s": round(ends[h] - wall0, 1),
                "holder": [
                    (r["t"], r.get("state"), r.get("reason"), r.get("end_time")) for r in lines[h].rows()
                ],
                "waiter_runs_s": lines[w].first(running),
            }
            for h, w in pairs
        ]
        for job_id in watched:
            rest.cancel(job_id)
    return out


def scenario_hold(base: Path, slurm: str) -> Json:
    """Held at submit (`hold: true`, `priority: 0`), then released over REST (`POST /job/{id}`): reasons and
    what each update body does; nice and priority of a pending job."""
    out: Json = {}
    with sandbox(base, "hold", slurm) as sbx:
        real_nodes(sbx, "dyn1")
        rest = Rest(sbx)
        for how, extra, release_body in (
            ("hold: true", {"hold": True}, {"hold": False}),
            ("priority: 0", {"priority": mb(0)}, {"priority": mb(100)}),
            ("hold: true, released by priority", {"hold": True}, {"priority": mb(100)}),
        ):
            job_id = rest.external(required_nodes=["dyn1"], **WHOLE, **extra)
            time.sleep(1)  # a scheduling pass: a held job must stay pending through it
            held = summary(rest.job(job_id))
            t0 = time.monotonic()
            answer = rest.call("POST", f"/job/{job_id}", release_body)  # the fields at the top level
            lines = follow(rest, [job_id], runs_in(job_id), 15, t0)
            out[how] = {
                "held": held,
                "release": [release_body, answer.status, answer.errors],
                "runs_after_s": lines[job_id].first(running),
            }
            rest.cancel(job_id)
            wait(lambda: idle(rest, "dyn1"), 20, "node free")
        holder = rest.external(required_nodes=["dyn1"], **WHOLE)
        waiter = rest.external(required_nodes=["dyn1"], **WHOLE)
        time.sleep(1)
        for body in ({"nice": 100}, {"priority": mb(5000)}, {"hold": True}):
            answer = rest.call("POST", f"/job/{waiter}", body)
            out[f"pending update {json.dumps(body)}"] = [
                answer.status,
                answer.errors,
                summary(rest.job(waiter)),
            ]
        answer = rest.call("POST", f"/job/{holder}", {"hold": True})
        out["hold of a running job"] = [answer.status, answer.errors, summary(rest.job(holder))]
        for job_id in (holder, waiter):
            rest.cancel(job_id)
    return out


def scenario_two_nodes(base: Path, slurm: str) -> Json:
    """A 2-node external job: with both nodes free (both at once? its node list), and with one busy (does it
    hold the free one meanwhile: all-or-nothing?)."""
    out: Json = {}
    with sandbox(base, "twonode", slurm) as sbx:
        real_nodes(sbx, "dyn1", "dyn2")
        rest = Rest(sbx)
        both = {
            "nodes": "2",
            "tasks_per_node": 1,
            "cpus_per_task": 2,
            "memory_per_node": mb(500),
            "required_nodes": ["dyn1", "dyn2"],
        }
        t0 = time.monotonic()
        job_id = rest.external(**both)
        lines = follow(rest, [job_id], lambda s: running(s[job_id]), 20, t0)
        out["both_free"] = lines[job_id].rows()[-1]
        rest.cancel(job_id)
        wait(lambda: idle(rest, "dyn1") and idle(rest, "dyn2"), 20, "free")
        blocker = rest.external(required_nodes=["dyn2"], **WHOLE)
        wait(lambda: running(summary(rest.job(blocker))), 20, "blocker runs")
        job_id = rest.external(**both)
        time.sleep(6)  # a scheduling pass and a backfill pass (bf_interval=5): it must stay pending whole
        out["one_busy"] = {
            "job": summary(rest.job(job_id)),
            "dyn1_state": (rest.node("dyn1") or {}).get("state"),
        }
        t0 = time.monotonic()
        rest.cancel(blocker)
        lines = follow(rest, [job_id], lambda s: running(s[job_id]), 20, t0)
        out["after_release"] = lines[job_id].rows()[-1]
        rest.cancel(job_id)
    return out


FAILURES = ("SlurmdTimeout=20",)


def scenario_node_failure(base: Path, slurm: str) -> Json:
    """External jobs under node failures, side by side (SlurmdTimeout=20 here, 60 in the tests' sandbox): its
    slurmd killed (requeue true and false; a batch job beside for comparison), the node set DOWN by an admin,
    the dynamic node deleted over REST. What each job ends as, when, and whether it comes back."""
    out: Json = {}
    with sandbox(base, "nodefail", slurm, FAILURES) as sbx:
        cases = {
            "killed": "dyn1",
            "killed_norequeue": "dyn2",
            "killed_batch": "dyn3",
            "admin_down": "dyn4",
            "deleted": "dyn5",
        }
        real_nodes(sbx, *cases.values())
        rest = Rest(sbx)
        jobs = {}
        for case, node in cases.items():
            extra: Json = {"requeue": case != "killed_norequeue", "required_nodes": [node], **WHOLE}
            jobs[case] = rest.batch(**extra) if case == "killed_batch" else rest.external(**extra)
        wait(lambda: all(running(summary(rest.job(j))) for j in jobs.values()), 30, "all run")
        t0 = time.monotonic()
        for case in ("killed", "killed_norequeue", "killed_batch"):
            sbx.stop_slurmd(cases[case])
        sbx.scontrol("update", f"nodename={cases['admin_down']}", "state=down", "reason=admin test")
        deleted = rest.call("DELETE", f"/node/{cases['deleted']}")
        out["delete_answer"] = [deleted.status, deleted.errors]
        ids = list(jobs.values())
        lines = follow(
            rest, ids, lambda s: all(ended(v) or v.get("restart_cnt") for v in s.values()), 150, t0
        )
        for case, job_id in jobs.items():
            found = rest.node(cases[case])
            out[case] = {
                "job": [
                    (r["t"], r.get("state"), r.get("reason"), r.get("nodes"), r.get("restart_cnt"))
                    for r in lines[job_id].rows()
                ],
                "node_after": [found.get("state"), found.get("reason")] if found else "gone",
            }
        time.sleep(5)
        out["5 s later"] = {case: summary(rest.job(j)) for case, j in jobs.items()}
    return out


def preemption_round(
    rest: Rest,
    victim_partition: str,
    victim_kind: str,
    preemptor_partition: str,
    preemptor_kind: str,
    nodes: tuple[str, ...],
) -> list[Json]:
    """One victim per node, then one preemptor per node; each pair's times from the preemptor's submit."""
    submit = {"external": rest.external, "batch": rest.batch}
    victims = [submit[victim_kind](partition=victim_partition, required_nodes=[n], **WHOLE) for n in nodes]
    wait(lambda: all(running(summary(rest.job(v))) for v in victims), 30, "victims run")
    t0 = time.monotonic()
    wall0 = time.time()
    winners = [
        submit[preemptor_kind](partition=preemptor_partition, required_nodes=[n], **WHOLE) for n in nodes
    ]
    lines = follow(rest, victims + winners, lambda s: all(running(s[w]) for w in winners), 90, t0)
    rows = []
    for victim, winner in zip(victims, winners, strict=True):
        seen = lines[victim].rows()
        preempted = next((r for r in seen if r.get("preempt_time")), None)
        rows.append(
            {
                "preempt_time_after_submit_s": round(preempted["preempt_time"] - wall0, 1)
                if preempted
                else None,
                "grace_end_time_after_submit_s": round(preempted["end_time"] - wall0, 1)
                if preempted
                else None,
                "victim": [(r["t"], r.get("state"), r.get("reason"), r.get("restart_cnt")) for r in seen],
                "winner_runs_s": lines[winner].first(running),
                "victim_after": summary(rest.job(victim)),
            }
        )
    for job_id in victims + winners:
        rest.cancel(job_id)
    return rows


def scenario_preemption(base: Path, slurm: str) -> Json:
    """PreemptType=preempt/partition_prio: an external job preempted by a batch job in a higher tier, with
    PreemptMode REQUEUE and CANCEL and GraceTime=10, and CANCEL without grace (3 nodes side by side each);
    a batch job beside for comparison; and an external job preempting a batch job."""
    out: Json = {}
    with sandbox(base, "preempt", slurm, PREEMPTION) as sbx:
        nodes = ("dyn1", "dyn2", "dyn3")
        real_nodes(sbx, *nodes)
        rest = Rest(sbx)
        for victim_partition, victim_kind, winner_kind in (
            ("low", "external", "batch"),
            ("lowcancel", "external", "batch"),
            ("nograce", "external", "batch"),
            ("low", "batch", "batch"),
            ("low", "batch", "external"),
            ("nograce", "batch", "external"),
        ):
            key = f"{victim_kind} in {victim_partition} by {winner_kind} in high"
            progress(f"preemption: {key}")
            out[key] = preemption_round(rest, victim_partition, victim_kind, "high", winner_kind, nodes)
            left = settle(rest, nodes)
            if left:
                out[f"{key}: left after the round"] = left
    return out


def settle(rest: Rest, nodes: tuple[str, ...], timeout_s: float = 60) -> list[Json]:
    """Cancels every job and waits until `nodes` are free; what was still there after `timeout_s`."""
    for job in rest.call("GET", "/jobs/").body.get("jobs", []):
        rest.cancel(job["job_id"])
    try:
        wait(lambda: all(idle(rest, n) for n in nodes), timeout_s, "nodes free")
    except TimeoutError:
        jobs = rest.call("GET", "/jobs/").body.get("jobs", [])
        return [{"job": j["job_id"], **summary(j)} for j in jobs] + [
            {"node": n, "state": (rest.node(n) or {}).get("state")} for n in nodes
        ]
    return []


GPUS = ("GresTypes=gpu",)  # AccountingStorageTRES=gres/gpu needs slurmdbd: slurmctld refuses to start
RESOURCE_SPECS: tuple[tuple[str, Json], ...] = (
    (
        "1 pod: 3 CPUs, 1500 MB, 2 GPUs on one node",
        {
            "tasks": 1,
            "cpus_per_task": 3,
            "memory_per_node": mb(1500),
            "tres_per_node": "gres/gpu:2",
            "required_nodes": ["gpu1"],
        },
    ),
    (
        "2 pods, one per node: 2 CPUs, 1000 MB, 1 GPU each",
        {
            "nodes": "2",
            "tasks_per_node": 1,
            "cpus_per_task": 2,
            "memory_per_node": mb(1000),
            "tres_per_node": "gres/gpu:1",
            "required_nodes": ["gpu1", "gpu2"],
        },
    ),
    (
        "3 pods packed as tasks: 2 CPUs, 300 MB per CPU, 1 GPU each",
        {
            "tasks": 3,
            "cpus_per_task": 2,
            "memory_per_cpu": mb(300),
            "tres_per_task": "gres/gpu:1",
            "required_nodes": ["gpu1", "gpu2"],
        },
    ),
    ("1 pod with no memory asked", {"tasks": 1, "cpus_per_task": 1, "required_nodes": ["gpu1"]}),
    (
        "1 pod: 3 CPUs on a node with 2 threads per core",
        {"tasks": 1, "cpus_per_task": 3, "memory_per_node": mb(100), "required_nodes": ["ht1"]},
    ),
    (
        "GPU type the node has not",
        {"tasks": 1, "cpus_per_task": 1, "memory_per_node": mb(100), "tres_per_node": "gres/gpu:a100:1"},
    ),
    ("more CPUs than any node has", {"tasks": 1, "cpus_per_task": 999, "memory_per_node": mb(100)}),
    ("more memory than any node has", {"tasks": 1, "cpus_per_task": 1, "memory_per_node": mb(10**7)}),
    (
        "an unknown GRES",
        {"tasks": 1, "cpus_per_task": 1, "memory_per_node": mb(100), "tres_per_node": "gres/fpga:1"},
    ),
)


def scenario_resources(base: Path, slurm: str) -> Json:
    """What a job asks for (CPUs, memory, GPUs; one pod per node or packed tasks) against what it gets per
    node (`job_resources`, `gres_detail`), and what Slurm refuses at submit."""
    out: Json = {}
    with sandbox(base, "resources", slurm, GPUS, nodes=2) as sbx:
        real_nodes(sbx, "gpu1", "gpu2", cpus=8, memory_mb=4000, gpus=4)
        (sbx.directory / "spool" / "ht1").mkdir(parents=True, exist_ok=True)  # a node with 2 threads per core
        sbx._spawn(
            "slurmd:ht1",
            [
                "slurmd",
                "-D",
                "-f",
                "/sbx/etc/slurm.conf",
                "-N",
                "ht1",
                "-Z",
                "--conf",
                "CPUs=8 Sockets=1 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=1000 NodeAddr=127.0.0.1 "
                f"Port={free_port()}",
            ],
        )
        wait(lambda: "IDLE" in sbx.node_state("ht1"), 60, "ht1 registered")
        rest = Rest(sbx)
        for what, spec in RESOURCE_SPECS:
            answer = rest.pod({"name": "res", **spec})
            job_id = answer.body.get("job_id")
            if answer.status != 200 or not job_id:
                out[what] = {"refused": [answer.status, answer.errors]}
                continue
            with contextlib.suppress(TimeoutError):  # started, or a reason given: Slurm has looked at it
                wait(lambda: decided(rest, job_id), 10, "scheduled")  # noqa: B023
            job = rest.job(job_id) or {}
            resources = job.get("job_resources") or {}
            out[what] = {
                "state": [job.get("job_state"), job.get("state_reason")],
                "nodes": job.get("nodes"),
                "per_node": [
                    {"node": a["name"], "cpus": a["cpus"]["count"], "memory_mb": a["memory"]["allocated"]}
                    for a in (resources.get("nodes") or {}).get("allocation", [])
                ],
                "gres_detail": job.get("gres_detail"),
                "tres_req_str": job.get("tres_req_str"),
                "tres_alloc_str": job.get("tres_alloc_str"),
                **{
                    k: number(job.get(k))
                    for k in (
                        "cpus",
                        "tasks",
                        "node_count",
                        "memory_per_node",
                        "memory_per_cpu",
                        "tres_per_node",
                        "tres_per_task",
                    )
                },
            }
            rest.cancel(job_id)
            time.sleep(0.5)
    return out


REASONS = (
    "Licenses=lic:1",
    "PartitionName=pdown Nodes=ALL State=DOWN",
    "PartitionName=pinactive Nodes=ALL State=INACTIVE",
    "PartitionName=pshort Nodes=ALL MaxTime=1 MaxNodes=1",
)


def scenario_reasons(base: Path, slurm: str) -> Json:
    """The pending reasons a bridged pod can wait with, as REST shows them (`state_reason`,
    `state_description`), each job made to wait for one cause."""
    out: Json = {}
    with sandbox(base, "reasons", slurm, REASONS) as sbx:
        real_nodes(sbx, "dyn1", "dyn2", "dyn3")
        rest = Rest(sbx)
        busy = rest.external(required_nodes=["dyn1"], **WHOLE)
        lic = rest.external(
            required_nodes=["dyn2"], tasks=1, cpus_per_task=1, memory_per_node=mb(100), licenses="lic:1"
        )
        wait(lambda: running(summary(rest.job(busy))) and running(summary(rest.job(lic))), 20, "blockers run")
        sbx.scontrol("update", "nodename=dyn3", "state=drain", "reason=maintenance")
        small = {"tasks": 1, "cpus_per_task": 1, "memory_per_node": mb(100)}
        cases: dict[str, Json] = {
            "resources (node busy)": {"required_nodes": ["dyn1"], **WHOLE},
            "lower priority behind it": {"required_nodes": ["dyn1"], **WHOLE, "nice": 1000},
            "required node drained": {"required_nodes": ["dyn3"], **small},
            "partition DOWN": {"partition": "pdown", **small},
            "partition INACTIVE": {"partition": "pinactive", **small},
            "time limit above the partition's": {"partition": "pshort", "time_limit": mb(5), **small},
            "more nodes than the partition allows": {"partition": "pshort", "nodes": "2", **small},
            "begin time ahead": {"begin_time": mb(int(time.time()) + 3600), **small},
            "dependency on a pending job": {"dependency": "afterok:{first}", **small},
            "held by the user": {"hold": True, **small},
            "priority 0 (admin hold)": {"priority": mb(0), **small},
            "license taken": {"licenses": "lic:1", **small},
            "unknown account": {"account": "nosuchaccount", **small},
            "unknown QOS": {"qos": "nosuchqos", **small},
        }
        ids: dict[str, int] = {}
        for what, spec in cases.items():
            if "dependency" in spec:
                spec = {**spec, "dependency": spec["dependency"].format(first=ids["resources (node busy)"])}
            answer = rest.pod({"name": "why", **spec})
            if answer.body.get("job_id"):
                ids[what] = int(answer.body["job_id"])
            else:
                out[what] = {"refused": [answer.status, answer.errors]}
        time.sleep(7)  # a scheduling pass and a backfill pass
        for what, job_id in ids.items():
            job = rest.job(job_id) or {}
            out[what] = {
                "state": job.get("job_state"),
                "state_reason": job.get("state_reason"),
                "state_description": job.get("state_description"),
            }
        for job_id in [busy, lic, *ids.values()]:
            rest.cancel(job_id)
        sbx.scontrol("update", "nodename=dyn3", "state=resume")
    return out


def scenario_marker(base: Path, slurm: str) -> Json:
    """Which field can name a job's pods: `admin_comment` or `comment` - who may set them at submit and
    change them later (the job's owner with scontrol, another user, over REST), what REST returns, limits."""
    out: Json = {}
    marker = "slurm-syncer.dev/owner=ns/lease pods=ns/web-0/uid-1,ns/web-1/uid-2"
    with sandbox(base, "marker", slurm) as sbx:
        rest = Rest(sbx)
        plain = "slurmrest"  # a user that is no Slurm administrator (the sandbox's slurmrestd user)
        user = sbx.token(user=plain)
        held = {"name": "m", "hold": True}
        as_admin = rest.pod({**held, "admin_comment": marker, "comment": marker})
        out["submit as SlurmUser, both fields"] = [
            as_admin.status,
            as_admin.errors,
            as_admin.body.get("job_id"),
        ]
        for what, extra in (
            ("both fields", {"admin_comment": marker, "comment": marker}),
            ("admin_comment", {"admin_comment": marker}),
            ("comment", {"comment": marker}),
        ):
            answer = rest.pod({**held, **extra}, token=user)
            out[f"submit as a plain user, {what}"] = [answer.status, answer.errors, answer.body.get("job_id")]
        mine = int(as_admin.body["job_id"])
        theirs = int(rest.pod({**held, "comment": "x"}, token=user).body["job_id"])
        for field_name in ("admin_comment", "comment"):
            for who, token, job_id in (
                ("the job's owner (a plain user) over REST", user, theirs),
                ("a plain user, not the owner, over REST", user, mine),
                ("SlurmUser over REST", "", theirs),
            ):
                answer = rest.call("POST", f"/job/{job_id}", {field_name: f"changed by {who}"}, token=token)
                out[f"{field_name}: {who}"] = [
                    answer.status,
                    answer.errors,
                    (rest.job(job_id) or {}).get(field_name),
                ]
            result = sbx.run("scontrol", "update", f"jobid={theirs}", f"{field_name}=by-scontrol", user=plain)
            out[f"{field_name}: the job's owner with scontrol update"] = [
                result.returncode,
                (result.stderr or result.stdout).strip(),
                (rest.job(theirs) or {}).get(field_name),
            ]
        seen = Rest(sbx).call("GET", "/jobs/", token=user).body.get("jobs", [])
        out["GET /jobs/ as a plain user shows"] = {
            j["job_id"]: [j.get("admin_comment"), j.get("comment")] for j in seen
        }
        for size in (255, 1024, 8192, 65536):
            answer = rest.pod({"name": "long", "hold": True, "admin_comment": "x" * size})
            stored = (
                len((rest.job(answer.body["job_id"]) or {}).get("admin_comment", ""))
                if answer.body.get("job_id")
                else None
            )
            out[f"admin_comment of {size} bytes"] = [answer.status, answer.errors, stored]
        for job in rest.call("GET", "/jobs/").body.get("jobs", []):
            rest.cancel(job["job_id"])
    return out


def timed(call: Callable[[], Answer], n: int) -> Json:
    answers = [call() for _ in range(n)]
    seconds = sorted(a.seconds for a in answers)
    return {
        "status": answers[-1].status,
        "bytes": answers[-1].size,
        "p50_ms": round(seconds[len(seconds) // 2] * 1000, 1),
        "max_ms": round(seconds[-1] * 1000, 1),
        "n": n,
    }


def metrics_page(sbx: Sandbox, page: str) -> Answer:
    started = time.monotonic()
    with urllib.request.urlopen(sbx.metrics_url + page, timeout=10) as response:
        body = response.read()
    return Answer(response.status, {}, len(body), time.monotonic() - started)


def fill(rest: Rest, count: int, held: bool = True) -> None:
    """`count` more batch jobs in the queue (held, or pending on a partition that runs nothing)."""
    for i in range(count):
        answer = rest.submit(
            {
                "name": f"q{i}",
                "nodes": "1",
                "hold": held,
                "partition": "main" if held else "idle",
                "tasks": 1,
                "cpus_per_task": 1,
                "memory_per_node": mb(10),
            },
            script="#!/bin/sh\ntrue\n",
        )
        if answer.status != 200:
            raise RuntimeError(f"fill: {answer.status} {answer.errors}")


def follow_costs(sbx: Sandbox, rest: Rest, ours: list[int]) -> Json:
    """Each way of following jobs, n=10: bytes and time per request."""
    listed = rest.call("GET", "/jobs/")
    last = number(listed.body.get("last_update"))
    costs: Json = {
        "GET /jobs/": timed(lambda: rest.call("GET", "/jobs/"), 5),
        "GET /jobs/?update_time=<now>": timed(
            lambda: rest.call("GET", "/jobs/", query=f"update_time={int(time.time())}"), 10
        ),
        "GET /jobs/?update_time=<last list>": timed(
            lambda: rest.call("GET", "/jobs/", query=f"update_time={last}"), 5
        ),
        "GET /job/{id}": timed(lambda: rest.call("GET", f"/job/{ours[0]}"), 10),
        "GET /jobs/state/?job_id=<1 of ours>": timed(
            lambda: rest.call("GET", "/jobs/state/", query=f"job_id={ours[0]}"), 10
        ),
        f"GET /jobs/state/?job_id=<{len(ours)} of ours>": timed(
            lambda: rest.call("GET", "/jobs/state/", query="&".join(f"job_id={j}" for j in ours)), 10
        ),
        "GET /jobs/state/ (every job)": timed(lambda: rest.call("GET", "/jobs/state/"), 5),
    }
    costs["list bytes per job"] = round(listed.size / max(1, len(listed.body.get("jobs", []))))
    if sbx.metrics_url:
        for page in ("/metrics/jobs", "/metrics/partitions", "/metrics/scheduler"):
            costs[f"slurmctld {page}"] = timed(lambda p=page: metrics_page(sbx, p), 10)  # type: ignore[misc]
    return costs


def probe_changes(rest: Rest, seconds: float) -> Json:
    """How often `update_time` says "changed" on this queue: a probe a second with the last answer's time."""
    last = number(rest.call("GET", "/jobs/").body.get("last_update"))
    changed = unchanged = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = rest.call("GET", "/jobs/", query=f"update_time={last}")
        if answer.body.get("jobs"):
            changed += 1
            last = number(answer.body.get("last_update"))
        else:
            unchanged += 1
        time.sleep(1)
    return {"changed": changed, "unchanged": unchanged}


def scenario_follow(base: Path, slurm: str) -> Json:
    """What following jobs costs with 1,000 and 10,000 jobs queued (held batch jobs; 100 more pending on a
    partition whose only node is drained, so the scheduler looks at them every pass) and 8 external jobs of
    ours running: a full list, `update_time` probes, one job, `/jobs/state` for ours, slurmctld's metrics."""
    out: Json = {}
    extra = ("MaxJobCount=30000", "PartitionName=idle Nodes=node00001 State=UP")
    with sandbox(base, "follow", slurm, extra) as sbx:
        real_nodes(sbx, "dyn1", cpus=8, memory_mb=8000)
        sbx.scontrol(
            "update", "nodename=node00001", "state=drain", "reason=keeps the idle partition's jobs pending"
        )
        rest = Rest(sbx)
        ours = [
            rest.external(
                required_nodes=["dyn1"],
                tasks=1,
                cpus_per_task=1,
                memory_per_node=mb(100),
                admin_comment=f"slurm-syncer.dev/pods=ns/p{i}",
            )
            for i in range(8)
        ]
        fill(rest, 100, held=False)
        queued = 108
        for target in (1000, 10000):
            progress(f"follow: filling the queue to {target} jobs")
            started = time.monotonic()
            fill(rest, target - queued)
            out[f"submit s per job (to {target})"] = round(
                (time.monotonic() - started) / (target - queued), 4
            )
            queued = target
            out[f"{target} jobs"] = follow_costs(sbx, rest, ours)
            out[f"{target} jobs: update_time probes over 30 s"] = probe_changes(rest, 30)
            for hinted in (False, True) if sbx.metrics_url else (False,):
                key = f"{target} jobs: the job cache over 30 s, {'with' if hinted else 'without'} the hint"
                out[key] = asyncio.run(cache_cost(sbx, hinted, 30))
    return out


async def cache_cost(sbx: Sandbox, hinted: bool, seconds: float) -> Json:
    """A JobCache with its defaults following our 8 running jobs for `seconds`: what it read, per path, and
    what slurmrestd served it (requests and bytes per endpoint), the first whole list apart."""
    hint = MetricsReader(sbx.metrics_url) if hinted else None
    async with SlurmClient(sbx.rest_url, TokenFile(sbx.token_file)) as client:
        cache = JobCache(client, owned=lambda text: text.startswith("slurm-syncer.dev/pods="), hint=hint)
        task = asyncio.create_task(cache.run())
        try:
            started = time.monotonic()
            await asyncio.wait_for(cache.wait_synced(), 120)
            first_list = {
                "seconds": round(time.monotonic() - started, 2),
                "bytes": cache.stats.read_bytes["list"],
                "jobs kept": len(cache.jobs),
                "jobs listed": cache.stats.last_list_jobs,
            }
            reads, read_bytes = dict(cache.stats.reads), dict(cache.stats.read_bytes)
            requests, body = sum(client.stats.requests.values()), sum(client.stats.body_bytes.values())
            await asyncio.sleep(seconds)  # the cost over a while is what is measured
            return {
                "first whole list": first_list,
                "reads": {k: v - reads[k] for k, v in cache.stats.reads.items()},
                "bytes": {k: v - read_bytes[k] for k, v in cache.stats.read_bytes.items()},
                "slurmrestd requests per s": round(
                    (sum(client.stats.requests.values()) - requests) / seconds, 2
                ),
                "slurmrestd bytes per s": round((sum(client.stats.body_bytes.values()) - body) / seconds),
                "slurmrestd bytes per s per job of ours": round(
                    (sum(client.stats.body_bytes.values()) - body) / seconds / max(1, len(cache.jobs))
                ),
                "stale": cache.stale,
            }
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if hint is not None:
                await hint.close()


HOLD_SCRIPT = "#!/bin/sh\n# a placeholder: holds the allocation until cancelled\nexec sleep infinity\n"
TRAP_SCRIPT = (  # outlives SIGTERM: Slurm ends it with SIGKILL after KillWait
    "#!/bin/sh\ntrap '' TERM\nwhile :; do sleep 1; done\n"
)


def placeholder_cancel(rest: Rest, script: str, query: str) -> Json:
    """A placeholder holding all of dyn1 and a batch job waiting for it; the placeholder cancelled with
    `query`: its states and when the waiting job starts."""
    holder = rest.batch(script, required_nodes=["dyn1"], **WHOLE, standard_output="/dev/null")
    started = wait(lambda: running(summary(rest.job(holder))), 30, "holder runs")
    waiter = rest.batch(required_nodes=["dyn1"], **WHOLE)
    wait(lambda: summary(rest.job(waiter))["reason"] == "Resources", 30, "waiter waits")
    t0 = time.monotonic()
    rest.cancel(holder, query)
    lines = follow(rest, [holder, waiter], lambda s: running(s[waiter]), 30, t0)
    rest.cancel(waiter)
    wait(lambda: idle(rest, "dyn1"), 30, "free")
    return {
        "running_after_submit_s": round(started, 2),
        "holder": [(r["t"], r.get("state")) for r in lines[holder].rows()],
        "waiter_runs_s": lines[waiter].first(running),
    }


def scenario_placeholder(base: Path, slurm: str) -> Json:
    """A batch job whose script holds the allocation (what 24.11 has instead of external jobs): start time;
    cancel (n=3) of a script that dies on SIGTERM and of one that ignores it (KillWait), each also cancelled
    with SIGKILL; preempted with GraceTime; its node's slurmd killed with requeue on and off."""
    out: Json = {}
    with sandbox(base, "placeholder", slurm, FAILURES + PREEMPTION) as sbx:
        real_nodes(sbx, "dyn1", "dyn2", "dyn3")
        rest = Rest(sbx)
        for name, script in (("exec sleep", HOLD_SCRIPT), ("trap TERM", TRAP_SCRIPT)):
            for query in ("", "signal=SIGKILL"):
                key = f"cancel {query or 'plain'}, script {name}"
                out[key] = [placeholder_cancel(rest, script, query) for _ in range(3)]
        for query in (
            "",
            "signal=SIGUSR1&flags=BATCH_JOB",
        ):  # the client's script: a cancel, and end_job's way
            key = f"{query or 'cancel'}, the client's placeholder script"
            out[key] = [placeholder_cancel(rest, PLACEHOLDER_SCRIPT, query) for _ in range(3)]
        # preempted: GraceTime=10 and KillWait=5 of the partition `lowcancel`, by a batch job in `high`
        for name, script in (("exec sleep", HOLD_SCRIPT), ("trap TERM", TRAP_SCRIPT)):
            victim = rest.batch(script, partition="lowcancel", required_nodes=["dyn1"], **WHOLE)
            wait(lambda: running(summary(rest.job(victim))), 30, "victim runs")  # noqa: B023
            t0 = time.monotonic()
            winner = rest.batch(partition="high", required_nodes=["dyn1"], **WHOLE)
            lines = follow(rest, [victim, winner], lambda s: running(s[winner]), 60, t0)  # noqa: B023
            out[f"preempted (GraceTime=10), script {name}"] = {
                "victim": [
                    (r["t"], r.get("state"), r.get("preempt_time"), r.get("end_time"))
                    for r in lines[victim].rows()
                ],
                "winner_runs_s": lines[winner].first(running),
            }
            settle(rest, ("dyn1",))
        holders = {
            requeue: rest.batch(HOLD_SCRIPT, required_nodes=[node], **WHOLE, requeue=requeue)
            for requeue, node in ((True, "dyn2"), (False, "dyn3"))
        }
        wait(lambda: all(running(summary(rest.job(h))) for h in holders.values()), 30, "holders run")
        t0 = time.monotonic()
        sbx.stop_slurmd("dyn2")
        sbx.stop_slurmd("dyn3")
        ids = list(holders.values())
        lines = follow(
            rest, ids, lambda s: all(ended(v) or bool(v.get("restart_cnt")) for v in s.values()), 120, t0
        )
        for requeue, job_id in holders.items():
            out[f"slurmd killed, requeue {requeue}"] = [
                (r["t"], r.get("state"), r.get("reason"), r.get("restart_cnt")) for r in lines[job_id].rows()
            ]
            rest.cancel(job_id)
    return out


EPILOG = (
    "EpilogSlurmctld=/sbx/etc/epilog_slurmctld.sh",
    "Epilog=/sbx/etc/epilog_slurmd.sh",
)
EPILOG_SCRIPT = (
    '#!/bin/sh\necho "$(date +%s.%N) $0 job=$SLURM_JOB_ID" >> /sbx/log/epilogs.log\nsleep 8\nexit 0\n'
)


def scenario_epilog(base: Path, slurm: str) -> Json:
    """Whether an epilog holds an external job's node after the job ends (what SUNK's blocking placeholder
    does): EpilogSlurmctld and the slurmd Epilog both sleep 8 s; a cancelled external job and a batch job."""
    out: Json = {}
    scripts = dict.fromkeys(("epilog_slurmctld.sh", "epilog_slurmd.sh"), EPILOG_SCRIPT)
    with sandbox(base, "epilog", slurm, EPILOG, files=scripts) as sbx:
        real_nodes(sbx, "dyn1")
        rest = Rest(sbx)
        for kind in ("external", "batch"):
            holder = (rest.external if kind == "external" else rest.batch)(required_nodes=["dyn1"], **WHOLE)
            wait(runs(rest, holder), 30, "holder runs")
            waiter = rest.batch(required_nodes=["dyn1"], **WHOLE)
            wait(waits_on_resources(rest, waiter), 30, "waiter waits")
            t0 = time.monotonic()
            rest.cancel(holder)
            lines = follow(
                rest,
                [holder, waiter],
                runs_in(waiter),
                40,
                t0,
                extra=lambda: {"node": (rest.node("dyn1") or {}).get("state")},
            )
            out[kind] = {
                "holder": [(r["t"], r.get("state"), r.get("node")) for r in lines[holder].rows()],
                "waiter_runs_s": lines[waiter].first(running),
            }
            rest.cancel(waiter)
            wait(lambda: idle(rest, "dyn1"), 30, "free")
        log = sbx.directory / "log" / "epilogs.log"
        out["epilogs run"] = log.read_text().splitlines() if log.exists() else []
    return out


def scenario_accounting(base: Path, slurm: str) -> Json:
    """What sacct says in the sandbox (no slurmdbd), and whether a pod's job is written by the job completion
    plugin that needs no database (`JobCompType=jobcomp/filetxt`)."""
    extra = ("JobCompType=jobcomp/filetxt", "JobCompLoc=/sbx/log/jobcomp.txt")
    with sandbox(base, "accounting", slurm, extra) as sbx:
        result = sbx.run("sacct", "-a", "-X")
        config = sbx.scontrol("show", "config")
        wanted = ("AccountingStorageType", "JobCompType", "AccountingStorageEnforce")
        real_nodes(sbx, "dyn1")
        rest = Rest(sbx)
        job_id = rest.external(
            required_nodes=["dyn1"], admin_comment="slurm-syncer.dev/pods=ns/web-0", **WHOLE
        )
        wait(lambda: running(summary(rest.job(job_id))), 30, "runs")
        rest.cancel(job_id)
        log = sbx.directory / "log" / "jobcomp.txt"
        with contextlib.suppress(TimeoutError):
            wait(lambda: log.exists() and f"JobId={job_id} " in log.read_text(), 20, "the completion written")
        lines = [
            line
            for line in (log.read_text() if log.exists() else "").splitlines()
            if f"JobId={job_id} " in line
        ]
        return {
            "sacct": [result.returncode, (result.stderr or result.stdout).strip()[:300]],
            "config": [line.strip() for line in config.splitlines() if line.strip().startswith(wanted)],
            "jobcomp/filetxt line of a pod's job": lines,
        }


SCENARIOS: dict[str, Callable[[Path, str], Json]] = {
    "external": scenario_external,
    "cancel": scenario_cancel,
    "timelimit": scenario_time_limit,
    "hold": scenario_hold,
    "twonode": scenario_two_nodes,
    "nodefail": scenario_node_failure,
    "preempt": scenario_preemption,
    "resources": scenario_resources,
    "reasons": scenario_reasons,
    "marker": scenario_marker,
    "follow": scenario_follow,
    "placeholder": scenario_placeholder,
    "epilog": scenario_epilog,
    "accounting": scenario_accounting,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--slurm", default=None, help="24.11 or 26.05 (default: $SLURM_SYNCER_SLURM_RELEASE, else 26.05)"
    )
    parser.add_argument("--only", default="", help="comma-separated scenarios: " + ", ".join(SCENARIOS))
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for results.json (and the sandboxes)"
    )
    args = parser.parse_args()
    slurm = release(args.slurm).name
    wanted = [s for s in args.only.split(",") if s] or list(SCENARIOS)
    unknown = set(wanted) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {', '.join(sorted(unknown))}; choose from {', '.join(SCENARIOS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "results.json"
    results: Json = json.loads(path.read_text()) if path.exists() else {}
    results.update(
        {
            "release": slurm,
            "machine_reference_s": round(machine_reference_s(), 3),
            "load_before": os.getloadavg(),
        }
    )
    for name in wanted:
        started = time.monotonic()
        try:
            found = SCENARIOS[name](args.out / "sandboxes", slurm)
        except Exception as exc:  # one scenario's failure is a result too; the others still run
            found = {"error": f"{type(exc).__name__}: {exc}"}
        found["date"] = time.strftime("%Y-%m-%d %H:%M")
        found["seconds"] = round(time.monotonic() - started, 1)
        results[name] = found
        print(json.dumps({name: found}, indent=1, default=str), flush=True)
        path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    results["load_after"] = os.getloadavg()
    path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
