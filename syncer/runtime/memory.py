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
import functools
import sys
from typing import Any

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
DEFAULT_THRESHOLD = 1 << 20


@functools.cache
def _glibc() -> Any:
    """glibc, or None where there is none (musl, macOS): nothing to tune there."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 - both must exist
    except (OSError, AttributeError):
        return None
    return libc


def keep_big_buffers_off_the_heap(threshold: int = DEFAULT_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold; False where there is no glibc."""
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))


def give_free_pages_back() -> bool:
    """malloc_trim(0): the heap's wholly free pages go back to the OS, wherever they are. A full list
    replaces 10,000 nodes' small objects; the old ones are freed all over the heap, and glibc on its own
    only ever returns the heap's top. False where there is no glibc, or nothing was given back."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))
