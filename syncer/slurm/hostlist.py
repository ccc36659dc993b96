"""Slurm hostlists (`node[001-003,007],sbx-real`) expanded to names: slurmrestd answers a
reservation's `node_list` and a job's `nodes` in that compact form.

`count` says how many names a hostlist has without making them: `n[0-99999999999]` is 10^11 names, which
expanded took 24 GB (issue 45), so input from users is counted and bounded before `expand`."""

from __future__ import annotations

import re
from collections.abc import Iterator

_PART = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?([^,\[]*)")


class TooManyHosts(ValueError):
    """A hostlist with more names than the caller allows (counted, never expanded)."""

    def __init__(self, hostlist: str, count: int, limit: int) -> None:
        super().__init__(f"{hostlist!r} names {count} hosts, at most {limit} allowed")
        self.count = count
        self.limit = limit


def _pieces(hostlist: str) -> Iterator[tuple[str, list[tuple[str, str]] | None, str]]:
    """(head, [(low, high or ""), ...] or None without brackets, tail) for each comma-separated piece."""
    pos = 0
    text = hostlist.strip()
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"not a hostlist: {hostlist!r}")
        head, ranges, tail = match.groups()
        if ranges is None:
            yield head, None, tail
        else:
            yield (
                head,
                [(low, high) for low, _, high in (item.partition("-") for item in ranges.split(","))],
                tail,
            )
        pos = match.end()
        if pos < len(text) and text[pos] == ",":
            pos += 1


def count(hostlist: str) -> int:
    """How many names `expand` gives, computed from the ranges alone (no name is made)."""
    total = 0
    for head, ranges, tail in _pieces(hostlist):
        if ranges is None:
            total += 1 if head or tail else 0
            continue
        for low, high in ranges:
            total += max(0, int(high) - int(low) + 1) if high else 1
    return total


def expand(hostlist: str, limit: int | None = None) -> list[str]:
    """Every name of a hostlist, in order. One bracket per name is what Slurm writes for nodes. With
    `limit`, a hostlist of more names raises TooManyHosts before any name is made."""
    if limit is not None and (total := count(hostlist)) > limit:
        raise TooManyHosts(hostlist, total, limit)
    names: list[str] = []
    for head, ranges, tail in _pieces(hostlist):
        if ranges is None:
            if head or tail:
                names.append(head + tail)
            continue
        for low, high in ranges:
            if not high:
                names.append(f"{head}{low}{tail}")
                continue
            width = len(low)
            names.extend(f"{head}{n:0{width}d}{tail}" for n in range(int(low), int(high) + 1))
    return names
