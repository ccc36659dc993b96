"""Drain reason text: sanitising, ownership and the UTF-8 byte cap (hostile input included)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncer.controllers.sync.causes import Cause
from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.plan import is_ours
from syncer.model.reason import UNSAFE_CHARS, cap_utf8, compose, sanitise, sanitise_capped

OPTS = SyncOptions()
OTHER_OPTS = SyncOptions(owner_prefix="mine> ")
# Every code point, lone surrogates included (JSON may decode "\ud800" into a str).
ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=400)


def cause(text: str) -> Cause:
    return Cause("cordon", text)


def composed(causes: list[Cause], opts: SyncOptions) -> str:
    """The Slurm reason these causes compose (as `drain_causes` composes it)."""
    return compose(opts.owner_prefix, [c.text for c in causes], opts.max_reason_bytes)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain", "plain"),
        ("  padded  ", "padded"),
        ("line one\nline two", "line one line two"),
        ("tab\there", "tab here"),
        ("cr\r\nlf", "cr lf"),
        ("nul\x00byte", "nul byte"),
        ("bell\x07 and esc\x1b[31m", "bell and esc [31m"),
        ("del\x7fc1\x85", "del c1"),
        ("many   \t\n  spaces", "many spaces"),
        ("sep\u2028para\u2029end", "sep para end"),
        ("bidi\u202eevil\u202c", "bidi evil"),
        ("lone\ud800surrogate", "lone surrogate"),
        ("ünïcödé ✓ 日本語 🚀", "ünïcödé ✓ 日本語 🚀"),
        ("", ""),
        ("\n\t\r", ""),
    ],
)
def test_sanitise(raw: str, clean: str) -> None:
    assert sanitise(raw) == clean


def test_compose_joins_causes_after_the_owner_prefix() -> None:
    assert composed([cause("Node cordoned"), cause("(Ready: KubeletNotReady)")], OTHER_OPTS) == (
        "mine> Node cordoned; (Ready: KubeletNotReady)"
    )
    assert composed([cause("a"), cause("b")], OPTS) == "k8s: a; b"


def test_compose_sanitises_cause_texts_and_skips_empty_ones() -> None:
    assert composed([cause("a\nb"), cause(" \t "), cause("c")], OPTS) == "k8s: a b; c"


@pytest.mark.parametrize("max_bytes", [6, 7, 8, 9, 10, 11, 12, 64, 256])
def test_compose_caps_bytes_without_splitting_characters(max_bytes: int) -> None:
    opts = SyncOptions(max_reason_bytes=max_bytes)
    reason = composed([cause("日本語🚀" * 100)], opts)
    assert len(reason.encode()) <= max_bytes
    assert reason.startswith("k8s: ")
    assert ("k8s: " + "日本語🚀" * 100).startswith(reason)  # a clean prefix: no broken character


def test_one_megabyte_of_hostile_text_is_capped() -> None:
    hostile = ("\x00\n\t\x1b" + "ä" * 7 + "🚀\u202e") * 80_000  # > 1 MB
    reason = composed([cause(hostile), cause("second")], OPTS)
    assert len(reason.encode()) <= 256
    assert not UNSAFE_CHARS.search(reason)
    reason.encode("utf-8")  # strict: no surrogates, nothing split


def test_cut_does_not_leave_a_dangling_separator() -> None:
    opts = SyncOptions(max_reason_bytes=12)
    assert composed([cause("abcde"), cause("fghij")], opts) == "k8s: abcde"


def test_is_ours() -> None:
    assert is_ours("k8s: Node cordoned", OPTS)
    assert not is_ours("admin: bad DIMM", OPTS)
    assert not is_ours("", OPTS)
    assert not is_ours("K8S: shouting", OPTS)
    assert is_ours("mine> x", OTHER_OPTS)
    assert not is_ours("k8s: x", OTHER_OPTS)


def test_cap_utf8() -> None:
    assert cap_utf8("abc", 10) == "abc"
    assert cap_utf8("aé", 2) == "a"  # é takes two bytes: not split
    assert cap_utf8("🚀🚀", 7) == "🚀"
    assert cap_utf8("", 0) == ""


@pytest.mark.parametrize(
    "kwargs",
    [
        {"owner_prefix": ""},
        {"owner_prefix": "  "},
        {"owner_prefix": "k8s:\n"},
        {"max_reason_bytes": 5},
        {"ready_grace_s": -1.0},
        {"drain_on_conditions": (("GpuUnhealthy", ""),)},
    ],
)
def test_options_refuse_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SyncOptions(**kwargs)  # type: ignore[arg-type]


@given(st.lists(ANY_TEXT, max_size=6), st.integers(min_value=6, max_value=300))
def test_compose_never_exceeds_cap_nor_carries_controls(texts: list[str], max_bytes: int) -> None:
    opts = SyncOptions(max_reason_bytes=max_bytes)
    reason = composed([cause(text) for text in texts], opts)
    assert len(reason.encode("utf-8")) <= max_bytes  # strict encode: would raise on a surrogate
    assert is_ours(reason, opts)
    assert not UNSAFE_CHARS.search(reason)
    assert composed([cause(text) for text in texts], opts) == reason  # deterministic


@given(ANY_TEXT)
def test_sanitise_is_idempotent_and_clean(text: str) -> None:
    clean = sanitise(text)
    assert sanitise(clean) == clean
    assert not UNSAFE_CHARS.search(clean)
    assert clean == clean.strip()
    assert "  " not in clean


# Long runs of whitespace and controls between words: the bounded sanitising must still see the words.
SPARSE_TEXT = st.lists(
    st.one_of(ANY_TEXT, st.integers(min_value=0, max_value=5000).map(lambda n: " \n\x00\t"[n % 4] * n)),
    max_size=8,
).map("".join)


@given(SPARSE_TEXT, st.integers(min_value=0, max_value=300))
def test_sanitise_capped_equals_sanitise_then_cap(text: str, max_bytes: int) -> None:
    assert sanitise_capped(text, max_bytes) == cap_utf8(sanitise(text), max_bytes)


def test_sanitise_capped_finds_text_after_a_megabyte_of_whitespace() -> None:
    assert sanitise_capped("\n" * 1_048_576 + "late words", 256) == "late words"
