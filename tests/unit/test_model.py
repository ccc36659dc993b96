from syncer.model import SlurmNode
from syncer.model.slurm import powered_down


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
