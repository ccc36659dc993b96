import msgspec
from hypothesis import given
from hypothesis import strategies as st

from syncer.model import SlurmNode
from syncer.model.reason import MAX_MESSAGE_BYTES, sanitise_capped
from syncer.model.slurm import powered_down, reason_message_of
from syncer.slurm.cache import NODE_FIELDS, diff
from syncer.slurm.models import NodesResponse


def node(*flags: str, reason: str = "") -> SlurmNode:
    return SlurmNode(name="n1", state=frozenset(flags), reason=reason)


def test_state_text_puts_base_first_and_sorts_flags() -> None:
    assert node("DRAIN", "IDLE", "CLOUD").state_text == "IDLE+CLOUD+DRAIN"


def test_drained_needs_drain_flag_and_no_work() -> None:
    assert node("IDLE", "DRAIN").drained
    assert not node("MIXED", "DRAIN").drained
    assert not node("IDLE", "DRAIN", "COMPLETING").drained
    assert not node("IDLE").drained


def test_unhealthy_flags() -> None:
    assert node("DOWN").unhealthy
    assert node("IDLE", "NOT_RESPONDING").unhealthy
    assert not node("IDLE", "DRAIN").unhealthy


def test_a_node_slurm_powers_up_again_is_no_longer_powered_down() -> None:
    """Powered down (or powering down) until Slurm powers it up: POWERING_UP, or POWER_UP (the request),
    beside POWERED_DOWN means it will run jobs again, so a drain is no longer moot."""
    assert powered_down(frozenset({"IDLE", "POWERED_DOWN"}))
    assert powered_down(frozenset({"IDLE", "POWERING_DOWN"}))
    assert not powered_down(frozenset({"IDLE", "POWERED_DOWN", "POWERING_UP"}))
    assert not powered_down(frozenset({"IDLE", "POWERED_DOWN", "POWER_UP"}))
    assert not powered_down(frozenset({"IDLE"}))


def test_busy() -> None:
    assert node("ALLOCATED").busy
    assert node("IDLE", "COMPLETING").busy
    assert not node("IDLE", "DRAIN").busy


def test_every_base_state_is_recognised_in_order_and_none_reads_unknown() -> None:
    """The base state decides what an annotation shows and whether a node is busy: ERROR and FUTURE are
    base states like the others, DOWN wins over any other, and a node listing flags only reads UNKNOWN."""
    assert node("ERROR", "DRAIN").base_state == "ERROR"
    assert node("ERROR", "DRAIN").state_text == "ERROR+DRAIN"
    assert node("FUTURE", "CLOUD").state_text == "FUTURE+CLOUD"
    assert node("DOWN", "ERROR").base_state == "DOWN"
    assert node("ERROR", "ALLOCATED").base_state == "ERROR"
    assert node("FUTURE", "MIXED").base_state == "FUTURE"
    assert node("DRAIN", "CLOUD").base_state == "UNKNOWN"
    assert node("DRAIN", "CLOUD").state_text == "UNKNOWN+CLOUD+DRAIN"
    assert not node("ERROR", "COMPLETING").drained and node("ERROR", "DRAIN").drained


# A reason as an admin may set it: an escape sequence, a newline, a bidi override, and 3,000 bytes in all.
HOSTILE = "disk\x1b[31m failing\n\u202eevil\u202c  " + "é" * 1500
SAFE = sanitise_capped(HOSTILE, MAX_MESSAGE_BYTES)


def test_a_nodes_reason_is_made_safe_once_as_its_message_and_kept_raw() -> None:
    """`reason_message` is the reason sanitised and capped at 1024 UTF-8 bytes (what a condition, an Event or
    a log may show); `reason` itself stays as Slurm gave it (compared with our own drain reasons)."""
    built = node("IDLE", "DRAIN", reason=HOSTILE)
    assert built.reason == HOSTILE
    assert built.reason_message == SAFE
    assert SAFE.startswith("disk [31m failing evil éé") and len(SAFE.encode()) == 1023  # no é cut in two
    assert node("IDLE").reason_message == ""


def test_the_message_follows_the_reason_however_the_node_is_built() -> None:
    """The decoder, a direct construction and `msgspec.structs.replace` give the same message; one passed in
    is not kept (it cannot disagree with the reason)."""
    body = msgspec.json.encode({"nodes": [{"name": "n1", "state": ["IDLE", "DRAIN"], "reason": HOSTILE}]})
    (decoded,) = [raw.to_node() for raw in msgspec.json.decode(body, type=NodesResponse).nodes]
    assert decoded.reason == HOSTILE and decoded.reason_message == SAFE
    assert decoded == node("IDLE", "DRAIN", reason=HOSTILE)
    assert hash(decoded) == hash(node("IDLE", "DRAIN", reason=HOSTILE))
    lying = SlurmNode(name="n1", state=frozenset({"IDLE"}), reason="a\tb", reason_message="k8s: forged")
    assert lying.reason_message == "a b"
    replaced = msgspec.structs.replace(decoded, reason="next\nreason")
    assert (replaced.reason, replaced.reason_message) == ("next\nreason", "next reason")
    assert msgspec.structs.replace(decoded, reason="").reason_message == ""


def test_a_clean_reason_is_its_own_message() -> None:
    """Most reasons need no cleaning: the node keeps one string for both, not two equal ones."""
    reason = "".join(["maintenance ", "window"])  # built at run time, not an interned constant
    assert reason_message_of(reason) is reason
    assert reason_message_of("") == ""
    assert reason_message_of(" padded ") == "padded"


def test_a_change_between_two_lists_names_slurms_fields_only() -> None:
    """The node cache's diff names the fields Slurm changed: `reason`, not the message derived from it."""
    (change,) = diff({"n1": node("IDLE", reason="old")}, {"n1": node("IDLE", reason="new\nreason")})
    assert change.fields == ("reason",)
    assert "reason_message" not in NODE_FIELDS and "reason_message" in SlurmNode.__struct_fields__


@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=1500))
def test_the_message_is_what_a_condition_showed_of_the_reason_before(reason: str) -> None:
    """Byte for byte what `shown` computed on every reconcile before (the reason sanitised and capped at
    1024 UTF-8 bytes), whatever Slurm sends, lone surrogates included."""
    assert node("IDLE", reason=reason).reason_message == sanitise_capped(reason, MAX_MESSAGE_BYTES)
    assert node("IDLE", reason=reason).reason == reason
