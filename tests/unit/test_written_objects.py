"""The writer's base while the cache lags (issue 18): only what our writes diff against is kept, it is
used only while the cache shows the version we wrote over, and it is dropped when its time is up even if
nothing else is written (the cache of 20,000 whole objects held ~60 MB at 10,000 nodes)."""

from __future__ import annotations

import time

from syncer.controllers.sync.written import WrittenObjects
from syncer.model.keys import Keys
from syncer.model.kube import KubePod

POD = KubePod(namespace="slurm", name="slurmd-a", resource_version="10")
WRITTEN = {
    "metadata": {
        "resourceVersion": "11",
        "annotations": {
            Keys.STATE: "IDLE+DRAIN",
            "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        },
        "labels": {"app": "slurmd"},
    },
    "status": {
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": Keys.CONDITION_DRAINED, "status": "True"},
        ]
    },
}


def test_only_what_our_writes_diff_against_is_kept_and_only_while_the_cache_lags() -> None:
    objects = WrittenObjects()
    objects.remember(POD, WRITTEN)
    base = objects.current(POD, {"cached": True})
    assert base["metadata"] == {"annotations": {Keys.STATE: "IDLE+DRAIN"}, "resourceVersion": "11"}
    assert base["status"]["conditions"] == [{"type": Keys.CONDITION_DRAINED, "status": "True"}]
    caught_up = KubePod(namespace="slurm", name="slurmd-a", resource_version="11")
    assert objects.current(caught_up, {"cached": True}) == {"cached": True}  # the cache has our write now
    assert len(objects) == 0


def test_entries_go_when_their_time_is_up_without_another_write() -> None:
    objects = WrittenObjects(ttl_s=0.01)
    objects.remember(POD, WRITTEN)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(objects):
        objects.prune()  # the engine's housekeeping calls this every second
    assert len(objects) == 0
