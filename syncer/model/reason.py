"""Reason text made safe: a text sanitised and capped in UTF-8 bytes; drain causes' texts, none twice,
composed into one Slurm reason. A leaf (no project imports): a Slurm node's reason as it may be shown
(model/slurm.py), the sync engine's options, causes and Event texts, the scheduler's holds use it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, TypeVar

# C0/C1 controls (newlines and tabs too), line/paragraph separators, bidi overrides that could make a
# reason read differently in `sinfo` than it is, and lone surrogates (not encodable in UTF-8).
UNSAFE_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
SEPARATOR: Final = "; "  # between the causes of one drain reason
MAX_MESSAGE_BYTES: Final = 1024  # a condition's message, an Event's note: Kubernetes cuts longer notes
K = TypeVar("K")


def sanitise(text: str) -> str:
    """Control characters become spaces, runs of whitespace one space, ends stripped."""
    return " ".join(UNSAFE_CHARS.sub(" ", text).split())


def cap_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` that fits `max_bytes` in UTF-8, never splitting a character."""
    if len(text) * 4 <= max_bytes:  # fast path: no character takes more than 4 bytes
        return text
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    # A cut inside a multi-byte sequence leaves an incomplete tail; "ignore" drops exactly that tail.
    return encoded[:max_bytes].decode("utf-8", "ignore")


def sanitise_capped(text: str, max_bytes: int) -> str:
    """`cap_utf8(sanitise(text), max_bytes)` without sanitising megabytes that the cap would drop anyway."""
    # sanitise(text[:k]) is always a prefix of sanitise(text): once it fills the cap, the rest cannot matter.
    chars = 2 * max_bytes + 64
    while True:
        clean = sanitise(text[:chars])
        if chars >= len(text) or len(clean.encode("utf-8")) >= max_bytes:
            return cap_utf8(clean, max_bytes)
        chars *= 4


def distinct(found: Iterable[tuple[K, str, str | None]], max_bytes: int) -> list[tuple[K, str]]:
    """(key, text) for each (key, raw text, fallback) in order: the text sanitised and capped (where nothing
    is left of it, the `fallback`, when there is one, sanitised and capped too); an empty text, or one
    already taken, is left out (the same text twice adds nothing to a reason)."""
    taken: list[tuple[K, str]] = []
    for key, raw, fallback in found:
        text = sanitise_capped(raw, max_bytes)
        if fallback is not None:
            text = sanitise_capped(text or fallback, max_bytes)
        if text and all(other != text for _key, other in taken):
            taken.append((key, text))
    return taken


def compose(prefix: str, texts: Iterable[str], max_bytes: int) -> str:
    """`<prefix><text>; <text>`, each text sanitised (empty ones left out), capped at `max_bytes` (prefix
    included)."""
    kept = [text for text in (sanitise(text) for text in texts) if text]
    full = prefix + SEPARATOR.join(kept)
    reason = cap_utf8(full, max_bytes)
    if len(reason) == len(full):
        return full
    # A cut may end in a space or a dangling separator; drop it so the text reads cleanly.
    return prefix + reason[len(prefix) :].rstrip(" ;")
