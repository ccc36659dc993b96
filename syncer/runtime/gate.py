"""What the edges' writers need of the write gate (`syncer/control/gate.py`): a check before every
write, and leader election opening and closing it. A protocol, so the edges depend on no layer above."""

from __future__ import annotations

from typing import Any, Protocol

import structlog

log = structlog.get_logger("syncer.runtime")


class Gate(Protocol):
    @property
    def leading(self) -> bool: ...

    def check(self) -> bool:
        """True: write; False: dry run (the writer logs what it would have done); raises NotLeader."""
        ...

    def grant(self, valid_for_s: float, since: float | None = None) -> None: ...

    def revoke(self) -> None: ...


def allowed(gate: Gate, would: str, **fields: Any) -> bool:
    """The gate, checked once for one write: raises NotLeader when not leading; False in a dry run, after
    logging what would have been written."""
    if gate.check():
        return True
    log.info(f"dry-run: would {would}", **fields)
    return False
