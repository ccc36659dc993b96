"""The demo's scenario (`slurm-syncer demo`) leaves both systems in the state it narrates, and stops every
daemon it started. The checks read Slurm and Kubernetes, not the narration."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from syncer.model.keys import Keys
from syncer.testing import demo

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
CLI = str(Path(sys.executable).parent / "slurm-syncer")


def demo_args(*argv: str) -> argparse.Namespace:
    """Parsed by the demo's own parser, so defaults added there apply here too."""
    parser = argparse.ArgumentParser()
    demo.register(parser.add_subparsers())
    return parser.parse_args(["demo", *argv])


async def test_demo_scenario_leaves_both_systems_as_narrated(tmp_path: Path) -> None:
    args = demo_args("--nodes", "5", "--dir", str(tmp_path / "demo"))
    target, admin = demo.BOUND[0], demo.BOUND[1]
    async with demo.world(args, args.dir) as w:
        await demo.scenario(w, args.replicas)
        # 1 and 4: cpu-0 cordoned then uncordoned; its Slurm node drained by us, then undrained
        assert not (w.kube.node("cpu-0") or {}).get("spec", {}).get("unschedulable")
        assert not (await w.reader.get_node(target)).drain_flag
        # 2: the admin's drain stays, and Kubernetes shows it
        node = await w.reader.get_node(admin)
        assert node.drain_flag and node.reason == "bad DIMM"
        shown = demo.annotations_of(w.pod(f"slurmd-{admin}"))
        assert shown[Keys.REASON] == "bad DIMM" and "DRAIN" in shown[Keys.STATE].split("+")
        # 3: scaled from 3 to 1: the idle member and the busy one (after its job) gone from both systems
        members = {n.name for n in (await w.reader.list_all_nodes()).nodes if n.name.startswith("gpu-")}
        assert members == {"gpu-1"}, members
        assert not w.pod("gpu-0") and not w.pod("gpu-2") and w.pod("gpu-1")
        jobs = w.sandbox.run("scontrol", "show", "job", "-o").stdout.splitlines()
        short = [job for job in jobs if "NodeList=gpu-2 " in job]
        assert short and all("JobState=COMPLETED" in job for job in short), short  # never killed
        assert w.nodeset().get("status", {}).get("replicas") == 1
        daemons = dict(w.sandbox.daemons)
    assert daemons and not [name for name, process in daemons.items() if process.alive()], daemons


def test_demo_command_refuses_bad_sizes_with_a_clear_line() -> None:
    result = subprocess.run(
        [CLI, "demo", "--nodes", "1"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "slurm-syncer demo: need --replicas >= 0 and --nodes >= 3"
