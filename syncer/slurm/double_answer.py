"""Reading the first of two HTTP answers that slurmrestd 25.11+ sends on some errors.

On a rejected token and on some refused updates, slurmrestd 26.05 writes its JSON error answer with
`Connection: Close`, then a second, plain-text answer on the same connection. aiohttp's parser
(llhttp) refuses the whole exchange ("Data after `Connection: close`") and hands back only its own
message, which quotes the bytes it refused: the first answer's body and the second answer's status
line (the same status, as measured). This module recovers status and body from that message, so the
client can raise its usual typed error instead of a raw parser error.
"""

from __future__ import annotations

import ast
import re

MARKER = "Data after `Connection: close`"
_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})")


def is_double_answer(message: str) -> bool:
    return message.startswith(MARKER)


def recover(message: str) -> tuple[int, bytes] | None:
    """(status, first body) from aiohttp's message, or None when it does not quote enough to tell."""
    if not is_double_answer(message):
        return None
    lines = (line.strip() for line in message.splitlines())
    quoted = next((line for line in lines if line.startswith(("b'", 'b"'))), None)
    if quoted is None:
        return None
    try:
        data = ast.literal_eval(quoted)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(data, bytes):
        return None
    found = list(_STATUS.finditer(data))
    if not found:
        return None
    last = found[-1]
    return int(last.group(1)), data[: last.start()]
