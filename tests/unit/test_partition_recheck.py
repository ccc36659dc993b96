"""When the SlurmPartition controller comes back by itself (docs/partitions.md): a failed /conf read is tried
again within 2 s whether or not Slinky declares partitions (no other change may come to start a reconcile);
a Slinky partition told as kept unlike slurm.conf is read again within 10 s; else only on a change."""

from syncer.controllers.partitions.recheck import SLINKY_RECHECK_S, UNREACHABLE_RETRY_S, recheck_after


def test_a_failed_conf_read_comes_back_within_the_unreachable_retry_whatever_else_holds():
    assert recheck_after(None, conf_failed=True, standing=False) == UNREACHABLE_RETRY_S == 2.0
    assert recheck_after(None, conf_failed=True, standing=True) == UNREACHABLE_RETRY_S
    assert recheck_after(30.0, conf_failed=True, standing=False) == UNREACHABLE_RETRY_S


def test_a_standing_slinky_difference_is_read_again_within_its_recheck():
    assert recheck_after(None, conf_failed=False, standing=True) == SLINKY_RECHECK_S == 10.0


def test_a_sooner_requeue_of_the_reconcile_is_kept_and_nothing_to_wait_for_adds_none():
    assert recheck_after(1.0, conf_failed=True, standing=True) == 1.0
    assert recheck_after(None, conf_failed=False, standing=False) is None
    assert recheck_after(5.0, conf_failed=False, standing=False) == 5.0
