"""Slurm hostlists (`node[001-003,007],sbx-real`) expanded to names: slurmrestd answers a
reservation's `node_list` and a job's `nodes` in that compact form."""

from __future__ import annotations

import re

_PART = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?([^,\[]*)")


def expand(hostlist: str) -> list[str]:
    """Every name of a hostlist, in order. One bracket per name is what Slurm writes for nodes."""
    names: list[str] = []
    pos = 0
    text = hostlist.strip()
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"not a hostlist: {hostlist!r}")
        head, ranges, tail = match.groups()
        if ranges is None:
            if head or tail:
                names.append(head + tail)
        else:
            for item in ranges.split(","):
                low, _, high = item.partition("-")
                if not high:
                    names.append(f"{head}{low}{tail}")
                    continue
                width = len(low)
                names.extend(f"{head}{n:0{width}d}{tail}" for n in range(int(low), int(high) + 1))
        pos = match.end()
        if pos < len(text) and text[pos] == ",":
            pos += 1
    return names
