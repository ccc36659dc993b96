"""The demo's log plumbing: the syncer's log goes to a file at the level asked, and the tap still sees
the actions the story tells (real structlog, a real file)."""

from __future__ import annotations

import json
from pathlib import Path

import structlog

from syncer.testing.demo_log import ActionTap, logging_to, story_line


def test_story_lines_name_the_actions_and_skip_the_rest() -> None:
    drained = {"event": "slurm node drained", "slurm_node": "n1", "reason": "k8s: fan", "redrain": False}
    line = story_line(drained)
    assert line is not None and (line.kind, line.subject) == ("drain", "n1")
    assert line.text == "drained n1 in Slurm, reason 'k8s: fan'"
    assert story_line({**drained, "redrain": True}) is None  # a new reason is not a new drain
    scale_in = story_line({"event": "scale-in: draining Slurm node before removing its pod", "pod": "gpu-0"})
    assert scale_in is not None and scale_in.text == "scale-in of gpu-0: drain its Slurm node first"
    assert story_line({"event": "caches synced, reconciling every bound Slurm node"}) is None


def test_take_returns_matching_actions_once_and_keeps_the_others() -> None:
    tap = ActionTap()
    for event in (
        {"event": "pod created", "pod": "gpu-0"},
        {"event": "slurm node drained", "slurm_node": "gpu-1", "reason": "r"},
        {"event": "pod created", "pod": "gpu-0"},  # the same text twice is told once
    ):
        tap(None, "info", event)
    assert tap.take("gpu-0") == ["created pod gpu-0"]
    assert tap.take("gpu-0") == []
    assert tap.saw("gpu-1", "drain") and not tap.saw("gpu-1", "undrain") and not tap.saw("gpu-0", "create")
    assert tap.take("gpu-1", kinds=("undrain",)) == []
    assert tap.take("gpu-1", kinds=("drain",)) == ["drained gpu-1 in Slurm, reason 'r'"]
    tap(None, "info", {"event": "slurm node undrained", "slurm_node": "n1"})
    tap.clear()
    assert tap.take("n1") == []


def test_the_log_goes_to_the_file_at_its_level_while_the_tap_sees_info(tmp_path: Path) -> None:
    log = tmp_path / "syncer.log"
    tap = ActionTap()
    try:
        with logging_to(log, "auto", "warning", tap):
            logger = structlog.get_logger("syncer.controllers.sync")
            logger.info("slurm node undrained", slurm_node="n1")
            logger.warning("safety valve open: automatic drain held back", slurm_node="n2")
    finally:
        structlog.reset_defaults()  # leave no configuration behind for other tests
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["event"] for r in records] == ["safety valve open: automatic drain held back"]
    assert tap.take("n1") == ["undrained n1 in Slurm"]
