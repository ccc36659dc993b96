"""Allocate at once, else submit (allocate.py): when the syncer's own view says a gang's job could start now,
and which job records are a refused try (never the pod's job)."""

from __future__ import annotations

import dataclasses

import pytest

from syncer.controllers.scheduler import edges, marker
from syncer.controllers.scheduler.allocate import VIA, Room, could_start, gres_free, refused_try
from syncer.controllers.scheduler.request import JobRequest
from syncer.controllers.scheduler.settings import Settings
from syncer.controllers.scheduler.values import Job, PodRef
from syncer.model.jobs import SlurmJob
from syncer.model.slurm import SlurmNode

RELEASE = "me:slurm-syncer"
POD = PodRef(namespace="ns", name="web-0", uid="u-1")
TEXT = marker.write(RELEASE, "ns/pod/web-0", [POD])


def request(**changes: object) -> JobRequest:
    fields: dict[str, object] = {
        "key": "ns/pod/web-0", "name": "ns/web-0", "comment": TEXT, "pods": (POD,), "nodes": 1,
        "cpus_per_node": 2, "memory_mib_per_node": 1000, **changes,
    }  # fmt: skip
    return JobRequest(**fields)  # type: ignore[arg-type]


def room(name: str = "n1", **changes: object) -> Room:
    fields: dict[str, object] = {
        "name": name, "state": frozenset({"IDLE"}), "partitions": ("main",), "features": ("gpu", "fast"),
        "free_cpus": 2, "free_memory_mb": 1000, **changes,
    }  # fmt: skip
    return Room(**fields)  # type: ignore[arg-type]


def test_a_node_with_exactly_the_cpus_and_memory_free_is_room() -> None:
    assert could_start(request(), [room()], ours_pending=False)
    assert could_start(request(), [room(state=frozenset({"MIXED"}))], ours_pending=False)
    assert not could_start(request(), [room(free_cpus=1)], ours_pending=False)
    assert not could_start(request(), [room(free_memory_mb=999)], ours_pending=False)
    assert not could_start(request(), [], ours_pending=False)


def test_a_job_of_ours_pending_is_ahead_so_nothing_is_tried() -> None:
    assert not could_start(request(), [room()], ours_pending=True)


@pytest.mark.parametrize(
    "state",
    [{"ALLOCATED"}, {"IDLE", "DRAIN"}, {"MIXED", "DRAIN"}, {"DOWN"}, {"IDLE", "POWERED_DOWN", "CLOUD"},
     {"IDLE", "RESERVED"}, {"IDLE", "PLANNED"}, {"IDLE", "COMPLETING"}, {"IDLE", "NOT_RESPONDING"}, set()],
)  # fmt: skip
def test_a_node_not_plainly_idle_or_mixed_is_no_room(state: set[str]) -> None:
    assert not could_start(request(), [room(state=frozenset(state))], ours_pending=False)


def test_a_cloud_or_dynamic_node_up_and_idle_is_room() -> None:
    for state in ({"IDLE", "CLOUD"}, {"IDLE", "DYNAMIC_NORM"}):
        assert could_start(request(), [room(state=frozenset(state))], ours_pending=False)


def test_a_gang_needs_as_many_nodes_with_room_as_it_has_pods() -> None:
    two = request(nodes=2)
    assert not could_start(two, [room("a"), room("b", free_cpus=1)], ours_pending=False)
    assert could_start(two, [room("a"), room("b"), room("c", free_cpus=0)], ours_pending=False)


def test_the_partition_and_plain_features_are_checked() -> None:
    asked = Settings(partition="other,main", constraint="gpu&fast")
    assert could_start(request(settings=asked), [room()], ours_pending=False)
    assert not could_start(request(settings=Settings(partition="other")), [room()], ours_pending=False)
    assert not could_start(request(settings=Settings(constraint="gpu&slow")), [room()], ours_pending=False)
    assert could_start(request(settings=Settings(constraint=" gpu ")), [room()], ours_pending=False)


@pytest.mark.parametrize("constraint", ["gpu|fast", "gpu*2", "[gpu&fast]", "gpu&", "&", "gpu,fast"])
def test_a_constraint_it_cannot_read_is_left_to_slurm(constraint: str) -> None:
    everything = room(features=("gpu", "fast", "gpu|fast", "gpu*2", "[gpu", "fast]", "gpu,fast", ""))
    asked = request(settings=Settings(constraint=constraint))
    assert not could_start(asked, [everything], ours_pending=False)


def test_a_reservation_is_left_to_slurm() -> None:
    assert not could_start(request(settings=Settings(reservation="r")), [room()], ours_pending=False)


# slurmrestd's node `gres` / `gres_used`, as measured on 24.11.5 and 26.05.5 (the same on both): an untyped
# GRES of 4 with 2 in use, and two types of 2 each with both a100 in use
PLAIN = ("gpu:4", "gpu:2")
TYPED = ("gpu:a100:2,gpu:v100:2", "gpu:a100:2(IDX:0-1),gpu:v100:0(IDX:N/A)")


def test_what_a_nodes_gres_leave_free_as_slurmrestd_lists_them() -> None:
    assert gres_free(*PLAIN) == (("gpu", 2),)
    assert gres_free(*TYPED) == (("gpu", 2), ("gpu:a100", 0), ("gpu:v100", 2))
    assert gres_free("gpu:4", "gpu:0") == (("gpu", 4),)
    assert gres_free("gpu:a100:4(S:0-1)", "gpu:a100:3(IDX:0,2-3)") == (("gpu", 1), ("gpu:a100", 1))
    assert gres_free("gpu:2,fpga:1", "gpu:1,fpga:1") == (("fpga", 0), ("gpu", 1))
    by_socket = ("gpu:a100:2(S:0),gpu:a100:2(S:1)", "gpu:a100:1(IDX:0),gpu:a100:0(IDX:N/A)")
    assert gres_free(*by_socket) == (("gpu", 3), ("gpu:a100", 3)), "one type listed twice adds up"
    typed_used = "gpu:a100:0(IDX:N/A),gpu:v100:1(IDX:0)"
    assert gres_free("gpu:a100:2,gpu:v100:2", typed_used) == (("gpu", 3), ("gpu:a100", 2), ("gpu:v100", 1))
    assert gres_free("", "") == () and gres_free("(null)", "") == (), "no GRES: none free, known"


@pytest.mark.parametrize(
    ("gres", "used"),
    [("gpu:4", ""), ("gpu:4", "gpu:5"), ("gpu:4", "fpga:1"), ("gpu:1K", "gpu:0"), ("gpu:4", "gpu:x"),
     ("gpu:a100:no_consume:4", "gpu:a100:0"), ("gpu", "gpu"), (":4", ":0"), ("gpu::4", "gpu::0"),
     ("gpu:4,shard:8", "gpu:0,shard:0"), ("gpu:4,mps:400", "gpu:0,mps:0"), ("gpu:a100:2", "gpu:2"),
     ("gpu:2,fpga:1", "gpu:1"), ("gpu:4", "gpu:2,"), ("gpu:4", "gpu:2(IDX:0,1"), ("gpu:4(S:0", "gpu:0")],
)  # fmt: skip
def test_gres_it_cannot_read_plainly_are_not_known(gres: str, used: str) -> None:
    """Unknown (None), never taken as free: an unreadable part, more used than there is, a used list that does
    not name the node's GRES and types (a typed node's use said untyped), shards or MPS sharing the GPUs."""
    assert gres_free(gres, used) is None


def test_a_gpu_pod_is_allocated_at_once_where_the_node_shows_its_gpus_free() -> None:
    one, two, three = (request(gres_per_node=(("gpu", n),)) for n in (1, 2, 3))
    plain = room(free_gres=gres_free(*PLAIN))
    assert could_start(two, [plain], ours_pending=False)
    assert not could_start(three, [plain], ours_pending=False)
    assert not could_start(one, [room()], ours_pending=False), "GRES not known: submitted, as before"
    assert not could_start(one, [room(free_gres=())], ours_pending=False), "a node without GPUs"
    assert could_start(one, [room(free_gres=()), plain], ours_pending=False), "the next node looked at"
    assert could_start(request(), [room()], ours_pending=False), "no GRES asked: not needed"


def test_a_typed_gpu_needs_its_type_free_and_an_untyped_one_any_type_the_typed_leave() -> None:
    typed = room(free_gres=gres_free(*TYPED))  # a100: 0 free, v100: 2 free
    assert not could_start(request(gres_per_node=(("gpu:a100", 1),)), [typed], ours_pending=False)
    assert could_start(request(gres_per_node=(("gpu:v100", 2),)), [typed], ours_pending=False)
    assert could_start(request(gres_per_node=(("gpu", 2),)), [typed], ours_pending=False)
    both = request(gres_per_node=(("gpu", 1), ("gpu:v100", 1)))
    assert could_start(both, [typed], ours_pending=False)
    more = request(gres_per_node=(("gpu", 1), ("gpu:v100", 2)))
    assert not could_start(more, [typed], ours_pending=False), "the untyped one has no GPU left to take"
    assert not could_start(request(gres_per_node=(("gpu:h100", 1),)), [typed], ours_pending=False)
    assert not could_start(request(gres_per_node=(("fpga", 1),)), [typed], ours_pending=False)
    twice = request(gres_per_node=(("gpu:v100", 1), ("gpu:v100", 2)))
    roomy = room(free_gres=(("gpu", 7), ("gpu:a100", 5), ("gpu:v100", 2)))
    assert not could_start(twice, [roomy], ours_pending=False), "a GRES asked for twice adds up"


def test_a_gpu_gang_needs_as_many_nodes_with_the_gpus_free() -> None:
    gang = request(nodes=2, gres_per_node=(("gpu", 2),))
    full = room("b", free_gres=gres_free("gpu:4", "gpu:3"))
    assert not could_start(gang, [room("a", free_gres=gres_free(*PLAIN)), full], ours_pending=False)
    assert could_start(gang, [room("a", free_gres=gres_free(*PLAIN)), room("c", free_gres=gres_free(*PLAIN))],
                       ours_pending=False)  # fmt: skip


def test_the_marker_of_an_allocation_says_so_and_reads_back() -> None:
    text = marker.via(TEXT, VIA)
    read = marker.read(text, RELEASE)
    assert text == TEXT + " via=allocate" and read is not None and read.via == VIA and read.uids == {"u-1"}
    plain = marker.read(TEXT, RELEASE)
    assert plain is not None and plain.via == ""


def slurm_job(**changes: object) -> SlurmJob:
    fields: dict[str, object] = {
        "job_id": 7, "state": frozenset({"FAILED"}), "reason": "BadConstraints",
        "marker": marker.via(TEXT, VIA), **changes,
    }  # fmt: skip
    return SlurmJob(**fields)  # type: ignore[arg-type]


def test_a_refused_try_is_never_the_pods_job() -> None:
    assert edges.job(slurm_job(), RELEASE) is None, "FAILED at the try, no node: not the pod's"
    ran = edges.job(slurm_job(state=frozenset({"CANCELLED"}), nodes=("n1",)), RELEASE)
    assert ran is not None and ran.ended, "allocated, then ended: the pod's job, which ended (pod goes)"
    running = edges.job(slurm_job(state=frozenset({"RUNNING"}), nodes=("n1",)), RELEASE)
    assert running is not None and not running.ended
    submitted = edges.job(slurm_job(marker=TEXT), RELEASE)
    assert submitted is not None, "a submitted job that failed before it ran is still the pod's (it goes)"


def test_refused_try_needs_each_of_its_marks() -> None:
    read = marker.read(marker.via(TEXT, VIA), RELEASE)
    assert read is not None
    tried = Job(job_id=1, state="FAILED", marker=read)
    assert refused_try(tried)
    assert not refused_try(dataclasses.replace(tried, nodes=("n1",)))
    assert not refused_try(dataclasses.replace(tried, state="RUNNING"))
    assert not refused_try(dataclasses.replace(tried, marker=dataclasses.replace(read, via="")))


def test_a_node_that_does_not_fit_is_skipped_and_the_next_one_looked_at() -> None:
    """Every check passes over the node that fails it to the next one (never stops looking)."""
    for unfit in (room("a", state=frozenset({"IDLE", "DRAIN"})), room("a", partitions=("other",)),
                  room("a", features=("gpu",)), room("a", free_cpus=1)):  # fmt: skip
        asked = request(settings=Settings(partition="main", constraint="gpu&fast"))
        assert could_start(asked, [unfit, room("b")], ours_pending=False)
        assert not could_start(asked, [unfit], ours_pending=False)


def test_a_nodes_room_is_what_is_left_of_it_as_the_node_cache_read_it() -> None:
    node = SlurmNode(
        name="n1", state=frozenset({"MIXED"}), partitions=("main",), features=("gpu", "fast"),
        active_features=("gpu",), cpus=16, alloc_cpus=5, real_memory_mb=64000, alloc_memory_mb=1000,
    )  # fmt: skip
    assert edges.room(node) == Room(
        name="n1", state=frozenset({"MIXED"}), partitions=("main",), features=("gpu",), free_cpus=11,
        free_memory_mb=63000, free_gres=(),
    )  # fmt: skip
    gpus = edges.room(SlurmNode(name="g", state=frozenset({"MIXED"}), gres=TYPED[0], gres_used=TYPED[1]))
    assert gpus.free_gres == (("gpu", 2), ("gpu:a100", 0), ("gpu:v100", 2))
    plain = edges.room(SlurmNode(name="n2", state=frozenset({"IDLE"}), features=("a",), cpus=2))
    assert plain.features == ("a",), "no active features listed: the configured ones"
    assert plain.free_cpus == 2 and plain.free_memory_mb == 0
