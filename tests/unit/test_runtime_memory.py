"""Big freed buffers go back to the OS: a daemon that reads 23 MB lists must not keep each one resident."""

from __future__ import annotations

import subprocess
import sys

# Four "list bodies" of 24 MB, each followed by what a decode keeps; prints VmRSS in MB at the end.
SCRIPT = """
import sys
from pathlib import Path
from syncer.runtime.memory import keep_big_buffers_off_the_heap
if sys.argv[1] == "fixed":
    assert keep_big_buffers_off_the_heap()
kept = []
for _ in range(4):
    body = bytearray(b"x" * (24 << 20))
    kept.append([str(i) for i in range(20000)])
    del body
status = Path("/proc/self/status").read_text()
print(next(int(line.split()[1]) // 1024 for line in status.splitlines() if line.startswith("VmRSS:")))
"""


def resident_mb(mode: str) -> int:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=60, check=True
    )
    return int(result.stdout)


def test_freed_list_bodies_do_not_stay_resident() -> None:
    default, fixed = resident_mb("default"), resident_mb("fixed")
    # glibc's dynamic threshold keeps at least one 24 MB body on the heap; the fixed one returns them all
    assert default - fixed >= 20, (default, fixed)
