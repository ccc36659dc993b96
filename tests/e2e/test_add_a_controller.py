"""docs/architecture.md's "How to add a controller", followed literally: its files written into a copy of the
package as one new folder, its registration line added to the registry, `mypy --strict` on them, then
`slurm-syncer run --greeter-enabled` from the copy against the Slurm sandbox and the Kubernetes emulator,
until the new controller's Event is on the Node that asked for it. Nothing else of the copy is edited."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.rig import Rig, node_body, syncer_environment
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube, pytest.mark.one_release]
REPO = Path(__file__).resolve().parents[2]
REGISTRY = "syncer/controllers/__init__.py"


def walkthrough() -> tuple[dict[str, str], str]:
    """The section's files ({path: text}, each a code block opened by a `# <path>` line) and the
    registration line (the block that is one line)."""
    text = (REPO / "docs/architecture.md").read_text()
    section = text[text.index("## How to add a controller") :]
    section = section[: section.index("\n## ", 1)]
    files, lines = {}, []
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        first, _, rest = block.partition("\n")
        if first.startswith("# syncer/"):
            files[first[2:].strip()] = rest
        else:
            lines.append(block)
    (line,) = lines
    return files, line


def test_the_walkthrough_is_one_folder_and_one_line() -> None:
    files, line = walkthrough()
    assert {str(Path(path).parent) for path in files} == {"syncer/controllers/greeter"}
    assert line.strip() == '"greeter",'


async def test_the_walkthrough_adds_a_running_controller(rig: Rig, tmp_path: Path) -> None:
    files, line = walkthrough()
    copy = tmp_path / "src"
    shutil.copytree(REPO / "syncer", copy / "syncer", ignore=shutil.ignore_patterns("__pycache__"))
    for path, text in files.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_text(text)
    registry = (copy / REGISTRY).read_text()
    (copy / REGISTRY).write_text(registry.replace("\n)\n", f"\n{line.rstrip()}\n)\n", 1))
    checked = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *sorted(files)],
        cwd=copy, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr

    node = "k8s-greeted"
    rig.kube.create("", "v1", "nodes", node_body(node, {"example.com/greet": "yes"}))
    env = {**syncer_environment(rig), "PYTHONPATH": str(copy)}
    env |= {"SLURM_SYNCER_LEADER_ELECTION": "false", "SLURM_SYNCER_NODESET_ENABLED": "false"}
    log = tmp_path / "syncer.log"
    with log.open("wb") as out:  # the walkthrough's command: `slurm-syncer run --greeter-enabled`
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "syncer", "--log-format", "json", "run", "--greeter-enabled",
            cwd=copy, env=env, stdout=out, stderr=out,
        )  # fmt: skip
    try:

        def greeted() -> bool:
            return any(e.get("reason") == "Greeted" for e in rig.events_for(node))

        await wait_for(greeted, deadline_s=60, what=f"the greeter's Event on {node} ({log})")
        (event,) = [e for e in rig.events_for(node) if e.get("reason") == "Greeted"]
        assert re.fullmatch(r"hello from Slurm: \d+ node\(s\) known", event["message"])
        assert '"controller": "greeter"' in log.read_text(), "run by its runner, under its name"
    finally:
        process.terminate()
        await process.wait()
        rig.kube.api.delete(rig.kube.api.resource("", "v1", "nodes"), "", node)
    assert os.environ.get("PYTHONPATH", "") != str(copy)  # the suite's own package untouched
