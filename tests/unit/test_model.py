from syncer.model import SlurmNode


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


def test_busy() -> None:
    assert node("ALLOCATED").busy
    assert node("IDLE", "COMPLETING").busy
    assert not node("IDLE", "DRAIN").busy
