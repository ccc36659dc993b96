"""The mutation score of the decision core, per file, from mutmut's results (run by scripts/mutation).

    python benchmarks/mutation_report.py [--diffs] [--json FILE]

Reads `mutmut results --all true` (run from the repository root, after `mutmut run`) and the list of
mutants judged equivalent (benchmarks/mutation_equivalent.txt: `<mutant name>  <why>`, one a line).
Prints per file: mutants, killed, surviving, equivalent and the score = killed / (mutants - equivalent);
then every surviving non-equivalent mutant (with its diff when --diffs). Exits 1 when a file is below
the target (95 %) or an equivalent entry names a mutant that no longer exists or that the tests kill
(the names follow the code: the list went stale).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.95
EQUIVALENT = ROOT / "benchmarks" / "mutation_equivalent.txt"
KILLED = {"killed", "timeout", "caught by type check"}  # a timeout is a mutant the tests noticed
NOT_RUN = {"not checked", "skipped"}  # e.g. outside the names given to `mutmut run`


@dataclass
class FileScore:
    path: str
    statuses: dict[str, str] = field(default_factory=dict)  # mutant name -> status
    equivalent: dict[str, str] = field(default_factory=dict)  # mutant name -> why

    @property
    def run(self) -> dict[str, str]:
        return {n: s for n, s in self.statuses.items() if s not in NOT_RUN}

    @property
    def killed(self) -> int:
        return sum(1 for s in self.statuses.values() if s in KILLED)

    @property
    def surviving(self) -> list[str]:
        return sorted(n for n, s in self.run.items() if s not in KILLED and n not in self.equivalent)

    @property
    def misjudged(self) -> list[str]:
        """Listed as equivalent but killed: the entry names another mutant now (the names follow the code)."""
        return sorted(n for n in self.equivalent if self.statuses.get(n) in KILLED)

    @property
    def score(self) -> float:
        judged = len(self.run) - (len(self.equivalent) - len(self.misjudged))
        return self.killed / judged if judged else 1.0


def core_files() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(config["only_mutate"])


def module_of(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def mutmut(*args: str) -> str:
    mutmut_bin = Path(sys.executable).parent / "mutmut"
    result = subprocess.run(
        [str(mutmut_bin), *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=600
    )
    if result.returncode != 0:
        raise SystemExit(f"mutmut {' '.join(args)} failed: {result.stderr.strip()[-2000:]}")
    return result.stdout


def parse_results(text: str) -> dict[str, str]:
    """`    syncer.controllers.sync.binding.x_resolve__mutmut_1: killed` lines -> {name: status}."""
    statuses = {}
    for line in text.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            statuses[name] = status.strip()
    return statuses


def parse_equivalent(text: str) -> dict[str, str]:
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, why = line.partition(" ")
        if not why.strip():
            raise SystemExit(f"{EQUIVALENT.name}:{number}: {name} needs a reason after the name")
        entries[name] = why.strip()
    return entries


def scores(statuses: dict[str, str], equivalent: dict[str, str], files: list[str]) -> list[FileScore]:
    by_file = {path: FileScore(path) for path in files}
    # longest module first, so syncer.controllers.sync.plan never swallows a syncer.controllers.sync.decide_x
    modules = sorted(((module_of(p), p) for p in files), key=lambda mp: -len(mp[0]))
    for name, status in statuses.items():
        for module, path in modules:
            if name.startswith(module + "."):
                by_file[path].statuses[name] = status
                if name in equivalent:
                    by_file[path].equivalent[name] = equivalent[name]
                break
    return [by_file[p] for p in files]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--diffs", action="store_true", help="print each surviving mutant's diff")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    files = core_files()
    statuses = parse_results(mutmut("results", "--all", "true"))
    equivalent = parse_equivalent(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    table = scores(statuses, equivalent, files)
    stale = sorted(set(equivalent) - set(statuses))  # gone from the code, not merely not run
    stale += [name for row in table for name in row.misjudged]
    print(f"{'file':32s} {'mutants':>8s} {'killed':>7s} {'survived':>9s} {'equivalent':>11s} {'score':>7s}")
    for row in table:
        print(
            f"{row.path:32s} {len(row.run):8d} {row.killed:7d} {len(row.surviving):9d} "
            f"{len(row.equivalent):11d} {f'{row.score:.1%}' if row.run else 'not run':>7s}"
        )
    for row in table:
        for name in row.surviving:
            print(f"\nSURVIVED {name} ({row.statuses[name]})")
            if args.diffs:
                print(mutmut("show", name).rstrip())
    for name in stale:
        print(f"\nSTALE equivalent entry (no such mutant now, or one the tests kill): {name}")
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {"file": r.path, "mutants": len(r.run), "killed": r.killed,
                     "survived": r.surviving, "equivalent": r.equivalent, "score": round(r.score, 4)}
                    for r in table
                ],
                indent=2,
            )
        )  # fmt: skip
    missing = [r.path for r in table if not r.run]
    if missing:
        print(f"\nnot run: {', '.join(missing)} (scripts/mutation without names runs every file)")
    below = [r.path for r in table if r.run and r.score < TARGET]
    if below:
        print(f"\nbelow the {TARGET:.0%} target: {', '.join(below)}")
    return 1 if below or stale or len(missing) == len(table) else 0


if __name__ == "__main__":
    sys.exit(main())
