"""Give big transient buffers back to the OS when they are freed.

A full node list at 10,000 nodes is a 23 MB body (and the first Kubernetes lists are as large). glibc serves
such a block with mmap and unmaps it on free, but then raises its mmap threshold to that block's size (up to
32 MiB): from the second list on, each body is carved from the heap and its pages stay resident after it is
freed. Measured with the real client at 10,000 nodes (24.11 sandbox): RSS 103 MB after 8 lists, 59 MB with
the threshold fixed at 1 MiB. A fixed threshold also turns off glibc's dynamic adjustment, which is what we
want for a daemon whose large blocks are all short-lived.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
DEFAULT_THRESHOLD = 1 << 20


def keep_big_buffers_off_the_heap(threshold: int = DEFAULT_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold; False where there is no glibc (musl, macOS): nothing to fix there."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))
