"""The syncer's part of a power-up, the code at a git revision beside this tree's, taking turns in one run
(issue 47): POWERING_UP -> pod created and its parts (benchmarks/power_trace.py).

    python benchmarks/power_prolog_compare.py --slurm 24.11 --baseline main --rounds 3 --samples 40 --out DIR

Each round runs benchmarks/power_prolog.py (`--samples` power-ups in batches of `--batch`, with the prolog;
no Slurm's-own-way jobs, no ordinary ones) once from a `git archive` of the revision and once from this
tree, in that order, each a process of its own with a sandbox of its own; this tree's benchmark files are
laid over the revision's, so both sides are measured the same way. Prints per side the parts over every
round's samples, the NodeSet passes, and each run's load and machine reference; writes DIR/results.json and
every run's results under DIR/runs/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.power import summary, uptime
from benchmarks.power_pass import tree_of
from benchmarks.power_prolog import parts
from benchmarks.power_trace import pass_seconds, traced_parts
from benchmarks.run import progress

ROOT = Path(__file__).resolve().parents[1]
RUN_FIELDS = ("uptime_before", "uptime_after", "machine_reference_s")
OVERLAY = ("power_prolog.py", "power_trace.py")  # the measuring side, the same on both


def run_once(root: Path, release: str, samples: int, batch: int, out: Path) -> dict[str, Any]:
    command = [
        sys.executable, str(root / "benchmarks" / "power_prolog.py"), "--slurm", release,
        "--samples", str(samples), "--without", "0", "--plain", "0", "--batch", str(batch), "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=root)
    result: dict[str, Any] = json.loads((out / "results.json").read_text())
    return result


def compare(release: str, baseline: str, rounds: int, samples: int, batch: int, out: Path) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="bench-prolog-compare-") as tmp:
        base = tree_of(baseline, Path(tmp))
        for name in OVERLAY:
            shutil.copy(ROOT / "benchmarks" / name, base / "benchmarks" / name)
        for index in range(rounds):
            for side, root in (("before", base), ("after", ROOT)):
                progress(f"round {index + 1}/{rounds}: {side} ({uptime()})")
                runs[side].append(run_once(root, release, samples, batch, out / "runs" / f"{side}-{index}"))
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", baseline], capture_output=True, text=True, check=True
    ).stdout.strip()
    results: dict[str, Any] = {"slurm": release, "baseline": f"{baseline} ({commit})", "rounds": rounds}
    results["samples_per_run"] = samples
    for side, done in runs.items():
        every = [s for r in done for s in r["samples"]]
        passes = [p for r in done for p in r["passes"]]
        results[side] = {
            "parts": parts(every),
            "syncer_parts": traced_parts(every, summary),
            "passes": len(passes),
            "pass_seconds": pass_seconds(passes, summary),
            "runs": [{k: r[k] for k in RUN_FIELDS} for r in done],
        }
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slurm", choices=("26.05", "24.11"), default="24.11")
    parser.add_argument("--baseline", default="main", help="the revision measured as 'before'")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=40, help="power-ups per run")
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results = compare(args.slurm, args.baseline, args.rounds, args.samples, args.batch, args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({side: results[side] for side in ("before", "after")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
