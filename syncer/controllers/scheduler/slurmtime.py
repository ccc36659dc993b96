"""Slurm's time limit forms (sbatch --time): `minutes`, `minutes:seconds`, `hours:minutes:seconds`,
`days-hours`, `days-hours:minutes`, `days-hours:minutes:seconds`, and UNLIMITED / INFINITE.

As slurmctld reads them (src/common/parse_time.c, time_str2mins): seconds round up to whole minutes, a field
may exceed its clock range ("90" is 90 minutes, "0:90" 2 minutes), and 0 means no limit (sbatch's rule).
"""

from __future__ import annotations

import math
from typing import Final

UNLIMITED: Final = 0xFFFFFFFF  # Slurm's INFINITE; REST: {"infinite": true}
_UNLIMITED_WORDS: Final = frozenset({"unlimited", "infinite", "-1"})
MAX_SECONDS: Final = 2**31 - 1  # slurmctld parses into a C int
FORMS: Final = "minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]] or UNLIMITED"


def parse(text: str) -> int:
    """Minutes (or UNLIMITED); ValueError naming the accepted forms."""
    if text.lower() in _UNLIMITED_WORDS:
        return UNLIMITED
    days, dash, clock = text.rpartition("-")
    fields = clock.split(":")
    numbers = [days] * bool(dash) + fields
    if not all(part.isascii() and part.isdecimal() for part in numbers) or len(fields) > 3:
        raise ValueError(f"{text!r} is not a Slurm time limit ({FORMS})")
    # days-hours[:minutes[:seconds]], else minutes | minutes:seconds | hours:minutes:seconds
    units = (86400, 3600, 60, 1) if dash else ((60,), (60, 1), (3600, 60, 1))[len(fields) - 1]
    seconds = sum(int(part) * unit for part, unit in zip(numbers, units, strict=False))
    if seconds > MAX_SECONDS:
        raise ValueError(f"{text!r} is longer than Slurm can count ({MAX_SECONDS} s); use UNLIMITED")
    return math.ceil(seconds / 60) or UNLIMITED
