"""Counts per Slurm release from pytest's JUnit XML files, then one closing total line.

python scripts/test_summary.py .test-results/slurm-26.05.xml .test-results/slurm-24.11.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in total:
            total[key] += int(suite.get(key, "0"))
    return total


def main(paths: list[str]) -> int:
    passed = failed = 0
    for name in paths:
        path = Path(name)
        label = path.stem.replace("slurm-", "Slurm ")
        if not path.exists():
            print(f"{label}: no results (pytest did not run to the end)")
            failed += 1
            continue
        c = counts(path)
        ok = c["tests"] - c["failures"] - c["errors"] - c["skipped"]
        passed, failed = passed + ok, failed + c["failures"] + c["errors"]
        print(f"{label}: {ok} passed, {c['failures']} failed, {c['errors']} errors, {c['skipped']} skipped")
    print(f"total: {passed} passed, {failed} failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
