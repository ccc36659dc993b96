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


# A snapshot's objects freed all over the heap, a few survivors pinning it: RSS before and after the trim.
TRIM_SCRIPT = """
from pathlib import Path
from syncer.runtime.memory import give_free_pages_back, keep_big_buffers_off_the_heap
def rss():
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) // 1024 for line in status.splitlines() if line.startswith("VmRSS:"))
keep_big_buffers_off_the_heap()
blocks = [bytearray(2000) for _ in range(50000)]  # 100 MB of heap blocks (above pymalloc's 512 bytes)
survivors = blocks[::64]  # every 64th outlives the rest: the heap cannot shrink from its top
del blocks
before = rss()
trimmed = give_free_pages_back()
print(before, rss(), trimmed, len(survivors))
"""


def test_freed_small_objects_give_their_pages_back() -> None:
    result = subprocess.run(
        [sys.executable, "-c", TRIM_SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    before, after, trimmed, _ = result.stdout.split()
    assert trimmed == "True"
    assert int(before) - int(after) >= 50, result.stdout  # ~98 of the 100 MB were free pages
