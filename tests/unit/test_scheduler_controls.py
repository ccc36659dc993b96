"""The scheduler controller's pure parts around the core: the holds it shares with the sync engine, its
options' parsers, and what `check` says about it."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from syncer.app.check_scheduler import pending, switched
from syncer.app.permissions import Right, needed
from syncer.app.settings import Settings, add_arguments, load
from syncer.control.holds import HOLD_TAG, NodeHolds, held_in, hold_text
from syncer.controllers.scheduler.options import (
    SchedulerOptions,
    gres_entry,
    namespaces,
    options_from,
    scheduler_name,
)
from syncer.controllers.scheduler.request import DEFAULT_GRES
from syncer.model.slurm import SlurmNode

WHY = "pod a/b still runs: Slurm job 7 was cancelled in Slurm"


def test_a_node_stays_held_while_any_gang_holds_it() -> None:
    holds, told = NodeHolds(), list[str]()
    holds.subscribe(told.append)
    holds.hold("n1", "ns/pod/a", WHY)
    holds.hold("n1", "ns/pod/a", WHY)  # the same again tells no one
    holds.hold("n1", "ns/pod/b", "other")
    assert told == ["n1", "n1"]
    assert (
        holds.get("n1") == WHY
        and holds.of("ns/pod/b") == {"n1"}
        and holds.holders() == {"ns/pod/a", "ns/pod/b"}
    )
    holds.release("n1", "ns/pod/a")
    assert holds.get("n1") == "other" and len(holds) == 1
    holds.release("n1", "ns/pod/a")  # not a holder any more: nothing
    holds.release("n1", "ns/pod/b")
    assert holds.get("n1") is None and len(holds) == 0 and told == ["n1", "n1", "n1", "n1"]
    holds.release("n9", "ns/pod/a")
    assert told == ["n1", "n1", "n1", "n1"]


def test_settling_tells_the_engine_about_held_looking_nodes_once() -> None:
    holds, told = NodeHolds(settled=False), list[str]()
    holds.subscribe(told.append)
    holds.settle(lambda: ["n1", "n2"])
    holds.settle(lambda: ["n3"])
    assert holds.settled and told == ["n1", "n2"]


@pytest.mark.parametrize(
    ("reason", "found"),
    [
        (f"k8s: {hold_text(WHY)}", hold_text(WHY)),
        (f"k8s: Node cordoned; {hold_text(WHY)}", hold_text(WHY)),
        (f"k8s: {hold_text(WHY)}; pod x terminating", hold_text(WHY)),
        (f"admin: {hold_text(WHY)}", None),  # not ours
        ("k8s: Node cordoned", None),
        (f"k8s: cordon {HOLD_TAG}x", None),  # the tag inside another cause's text
    ],
)
def test_a_hold_is_read_back_from_a_drain_reason_of_ours(reason: str, found: str | None) -> None:
    assert held_in(reason, "k8s: ") == found


def test_the_drain_cause_of_a_hold_is_the_holds_own_or_one_of_ours_kept_until_settled() -> None:
    ours = SlurmNode(name="n1", state=frozenset({"IDLE", "DRAIN"}), reason=f"k8s: {hold_text('old')}")
    settled = NodeHolds()
    settled.hold("n1", "gang-a", WHY)
    assert settled.cause_of("n1", ours, "k8s: ") == hold_text(WHY)  # the hold itself, whatever Slurm shows
    assert settled.cause_of("n2", ours, "k8s: ") is None  # settled: a drain that reads as a hold is not one
    starting = NodeHolds(settled=False)
    assert starting.cause_of("n1", ours, "k8s: ") == hold_text("old")  # kept until the scheduler has planned
    assert starting.cause_of("n1", None, "k8s: ") is None  # nothing read of Slurm: nothing to keep
    assert starting.cause_of("n1", ours, "mine> ") is None  # not our drain


def test_option_parsers_name_what_they_take() -> None:
    assert scheduler_name(" slurm-syncer ") == "slurm-syncer" and scheduler_name("") == ""
    with pytest.raises(ValueError, match="scheduler name"):
        scheduler_name("Slurm_Syncer")
    assert namespaces("team-a, team-b") == ("team-a", "team-b")
    with pytest.raises(ValueError, match="'Team' is not one"):
        namespaces("a,Team")
    with pytest.raises(ValueError, match="namespace names"):
        namespaces(" , ")
    assert gres_entry("nvidia.com/a100=gpu:a100") == ("nvidia.com/a100", "gpu:a100")
    assert gres_entry("example.com/fpga=") == ("example.com/fpga", "")
    for bad in ("nvidia.com/gpu", "gpu=gpu", "kubernetes.io/x=gpu", "nvidia.com/gpu=gpu a"):
        with pytest.raises(ValueError):
            gres_entry(bad)


def test_options_from_settings_values() -> None:
    values = {
        "scheduler_name": "slurm-syncer",
        "scheduler_namespaces": (("a", "b"), ("b", "c")),
        "scheduler_placeholder": True,
        "scheduler_allocate": False,
        "scheduler_gres": (),
        "scheduler_retry_after": 5.0,
    }
    options = options_from(values)
    assert options.enabled and options.namespaces == ("a", "b", "c") and options.placeholder
    assert not options.allocate and SchedulerOptions().allocate, "allocate at once: on unless turned off"
    assert options.gres == DEFAULT_GRES and options.retry_after_s == 5.0
    options = options_from({**values, "scheduler_name": "", "scheduler_gres": (("x.io/f", "fpga"),)})
    assert not options.enabled and options.gres == {"x.io/f": "fpga"}
    # allocate at once: exactly what the value says, and on (True, not merely truthy) where none is given
    assert options_from(values).allocate is False
    unset = {k: v for k, v in values.items() if k != "scheduler_allocate"}
    assert options_from(unset).allocate is True


def test_check_names_the_scheduler_and_why_pods_wait() -> None:
    assert switched("", ()) == (True, "scheduler: off (--scheduler-name not set)", "", False)
    assert "in team-a, team-b" in switched("slurm-syncer", ("team-a", "team-b"))[1]
    assert "every namespace" in switched("slurm-syncer", ())[1]
    cond = {
        "type": "PodScheduled",
        "reason": "SlurmJobPending",
        "message": "Slurm job 4 is pending (Priority)",
    }
    waiting = {"metadata": {"namespace": "t", "name": "p"}, "status": {"conditions": [cond]}}
    bound = {"metadata": {"namespace": "t", "name": "q"}, "spec": {"nodeName": "k1"}}
    fresh = {"metadata": {"namespace": "t", "name": "r"}}
    ok, what, _, warn = pending([waiting, bound, fresh])
    assert ok and warn
    assert what == (
        "scheduler: 2 pod(s) wait (1 NoCondition, 1 SlurmJobPending): "
        "t/p: Slurm job 4 is pending (Priority); t/r: not looked at yet"
    )
    assert pending([bound]) == (True, "scheduler: no pod waits", "", False)


def _settings(*argv: str, **env: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return load(parser.parse_args(["--slurm-url", "http://s:1", *argv]), env)


def test_flags_and_environment_give_the_same_scheduler_options() -> None:
    flags = _settings(
        "--scheduler-name", "slurm-syncer", "--scheduler-namespaces", "a,b", "--scheduler-namespaces", "c",
        "--scheduler-gres", "nvidia.com/gpu=gpu:a100",
    )  # fmt: skip
    env = _settings(
        SLURM_SYNCER_SCHEDULER_NAME="slurm-syncer",
        SLURM_SYNCER_SCHEDULER_NAMESPACES="a,b,c",
        SLURM_SYNCER_SCHEDULER_GRES="nvidia.com/gpu=gpu:a100",
    )
    for loaded in (flags, env):
        options = loaded.controller_options("scheduler")
        assert options.name == "slurm-syncer" and options.namespaces == ("a", "b", "c")
        assert options.gres == {"nvidia.com/gpu": "gpu:a100"} and not options.placeholder


def test_the_scheduler_asks_for_its_rights_in_the_namespaces_it_serves_only() -> None:
    assert not [r for r in needed(_settings(), "default") if r.resource == "pods/binding"]
    served = needed(_settings("--scheduler-name", "s", "--scheduler-namespaces", "a,b"), "default")
    binding = [r for r in served if r.resource == "pods/binding"]
    assert [(r.verb, r.namespace) for r in binding] == [("create", "a"), ("create", "b")]
    assert Right("get", "", "namespaces", "", "a") in served and Right("get", "", "namespaces") not in served
    assert Right("list", "", "pods") in served and Right("get", "batch", "jobs", "b") in served
    assert all(r.why for r in served)
    everywhere = needed(_settings("--scheduler-name", "s"), "default")
    assert Right("create", "", "pods/binding") in everywhere and Right("get", "", "namespaces") in everywhere


def _refusal(parse: Any, text: str) -> str:
    with pytest.raises(ValueError) as caught:
        parse(text)
    return str(caught.value)


def test_option_refusals_say_what_is_taken() -> None:
    longest = ".".join(("a" * 63, "b" * 63, "c" * 63, "d" * 61))  # 253 characters, labels of 63 at most
    assert scheduler_name(longest) == longest and scheduler_name("slurm.syncer") == "slurm.syncer"
    assert _refusal(scheduler_name, longest + "d") == (
        "a scheduler name such as slurm-syncer (lower case letters, digits, '-' and '.')"
    )
    assert _refusal(namespaces, ",") == "namespace names such as team-a,team-b"
    assert _refusal(namespaces, "A") == "namespace names such as team-a,team-b ('A' is not one)"
    resource = "RESOURCE=GRES with an extended resource, e.g. nvidia.com/gpu=gpu or example.com/fpga="
    gres = "a GRES name, or name:type, after '=' (e.g. gpu or gpu:a100), or nothing"
    assert _refusal(gres_entry, "gpu") == resource
    assert _refusal(gres_entry, "nvidia.com/gpu=gpu=x") == gres


def test_a_namespace_given_alone_is_one_name() -> None:
    values = {
        "scheduler_name": "s",
        "scheduler_namespaces": ("team-a",),
        "scheduler_placeholder": False,
        "scheduler_gres": (),
        "scheduler_retry_after": 60.0,
    }
    assert options_from(values).namespaces == ("team-a",)


def test_hold_reasons_read_back_exactly() -> None:
    assert hold_text("x") == "scheduler hold: x"
    assert NodeHolds().settled is True
    assert held_in("k8s: scheduler hold: a; scheduler hold: b", "k8s: ") == "scheduler hold: a"
    assert held_in("k8s:  scheduler hold: a", "k8s: ") is None  # the tag one character in: not a cause
    assert held_in("k8s: scheduler hold: a; b; c", "k8s: ") == "scheduler hold: a"
