"""When the SlurmPartition controller comes back by itself (docs/partitions.md): a failed /conf read is tried
again within 2 s whether or not Slinky declares partitions (no other change may come to start a reconcile),
also after a reconcile that stopped a CR or had a delete refused; a Slinky partition told as kept unlike
slurm.conf is read again within 10 s; a delete Slurm refused (2075) within 5 s; always the soonest of the
waits that apply; else only on a change. Failed /conf reads in a row are told once, then at most once a
minute, and their end once."""

from syncer.controllers.partitions.recheck import (
    IN_USE_RETRY_S,
    SLINKY_RECHECK_S,
    TELL_EVERY_S,
    UNREACHABLE_RETRY_S,
    ConfFailures,
    recheck_after,
    stopped_recheck,
)


def test_a_failed_conf_read_comes_back_within_the_unreachable_retry_whatever_else_holds():
    assert recheck_after(None, conf_failed=True, standing=False) == UNREACHABLE_RETRY_S == 2.0
    assert recheck_after(None, conf_failed=True, standing=True) == UNREACHABLE_RETRY_S
    assert recheck_after(30.0, conf_failed=True, standing=False) == UNREACHABLE_RETRY_S


def test_a_standing_slinky_difference_is_read_again_within_its_recheck():
    assert recheck_after(None, conf_failed=False, standing=True) == SLINKY_RECHECK_S == 10.0
    assert recheck_after(30.0, conf_failed=False, standing=True) == SLINKY_RECHECK_S


def test_a_sooner_requeue_of_the_reconcile_is_kept_and_nothing_to_wait_for_adds_none():
    assert recheck_after(1.0, conf_failed=True, standing=True) == 1.0
    assert recheck_after(1.0, conf_failed=False, standing=True) == 1.0
    assert recheck_after(None, conf_failed=False, standing=False) is None
    assert recheck_after(5.0, conf_failed=False, standing=False) == 5.0


def test_a_reconcile_that_stopped_a_cr_comes_back_only_while_conf_is_unread_or_a_difference_stands():
    """Unread: the CRs waiting for KeepPartInfo are made once it answers (nothing is sent twice meanwhile: a
    refused value is remembered, no claim is planned). A Slinky difference standing: read again within its
    recheck, as by every other reconcile then (it was `Terminal`: an `scontrol update` that settles it starts
    no reconcile, and the gauge stayed at 1). Neither: no recheck (a refused value is `Terminal`; a failed
    claim is retried with the runtime's back-off, the controller's choice)."""
    assert stopped_recheck(in_use=False, conf_failed=True, standing=False) == UNREACHABLE_RETRY_S
    assert stopped_recheck(in_use=False, conf_failed=True, standing=True) == UNREACHABLE_RETRY_S
    assert stopped_recheck(in_use=False, conf_failed=False, standing=True) == SLINKY_RECHECK_S
    assert stopped_recheck(in_use=False, conf_failed=False, standing=False) is None


def test_a_refused_delete_comes_back_within_its_wait_or_sooner_while_conf_is_unread():
    """Slurm's 2075: back within IN_USE_RETRY_S (its retry drains the partition, the job counted); with /conf
    unread within UNREACHABLE_RETRY_S, as every other reconcile then: the soonest wait, not the refusal's.
    It was IN_USE_RETRY_S whatever /conf said (the refused delete's branch decided alone)."""
    assert stopped_recheck(in_use=True, conf_failed=False, standing=False) == IN_USE_RETRY_S == 5.0
    assert stopped_recheck(in_use=True, conf_failed=True, standing=False) == UNREACHABLE_RETRY_S
    assert stopped_recheck(in_use=True, conf_failed=False, standing=True) == IN_USE_RETRY_S
    assert stopped_recheck(in_use=True, conf_failed=True, standing=True) == UNREACHABLE_RETRY_S


def test_failed_conf_reads_in_a_row_are_told_at_the_first_then_once_a_minute():
    failures = ConfFailures()
    assert failures.failed(1000.0) and failures.count == 1
    told = [failures.failed(1000.0 + 2 * i) for i in range(1, 30)]  # every 2 s, up to 58 s after the first
    assert told == [False] * 29 and failures.count == 30
    assert TELL_EVERY_S == 60.0
    assert failures.failed(1059.9) is False
    assert failures.failed(1060.0) is True and failures.count == 32  # a minute after the one told
    assert failures.failed(1119.0) is False
    assert failures.failed(1120.0) is True  # a minute after the last told, not after the first failure


def test_the_read_that_ends_failures_says_how_many_and_since_when_and_a_new_row_is_told_at_once():
    failures = ConfFailures()
    assert failures.answered(500.0) is None  # no failure: nothing to tell
    failures.failed(1000.0)
    failures.failed(1002.0)
    failures.failed(1004.0)
    assert failures.answered(1005.5) == (3, 5.5)
    assert failures.count == 0 and failures.answered(1006.0) is None
    # the next failure starts another row: told at once, however soon, and counted from itself
    assert failures.failed(1010.0) is True
    assert failures.failed(1012.0) is False
    assert failures.answered(1013.0) == (2, 3.0)
