"""The scale-in marks shared by the NodeSet and sync controllers (syncer/control/scale_in.py): which Slurm
nodes a NodeSet is removing, looked up by node, by the NodeSet's key and by its identity, and every change
told to the listeners."""

from __future__ import annotations

from syncer.control.scale_in import ScaleInMarks
from syncer.model.kube import NodeSetRef

GPU = NodeSetRef(namespace="slurm", name="gpu", uid="u1")
GPU_AGAIN = NodeSetRef(namespace="slurm", name="gpu", uid="u2")  # deleted and created again
GPU_ELSEWHERE = NodeSetRef(namespace="other", name="gpu", uid="u3")


def test_a_node_starts_unmarked_and_a_mark_names_the_nodeset_removing_it() -> None:
    marks = ScaleInMarks()
    assert marks.get("gpu-0") is None and len(marks) == 0
    marks.set("gpu-0", GPU)
    assert marks.get("gpu-0") == GPU
    assert marks.get("gpu-1") is None


def test_setting_none_unmarks_and_unmarking_an_unmarked_node_is_harmless() -> None:
    marks = ScaleInMarks()
    marks.set("gpu-0", GPU)
    marks.set("gpu-1", GPU)
    marks.set("gpu-0", None)
    assert (marks.get("gpu-0"), marks.get("gpu-1"), len(marks)) == (None, GPU, 1)
    marks.set("gpu-0", None)
    assert len(marks) == 1


def test_a_new_mark_replaces_the_old_one_of_that_node() -> None:
    marks = ScaleInMarks()
    marks.set("gpu-0", GPU)
    marks.set("gpu-0", GPU_AGAIN)
    assert (marks.get("gpu-0"), len(marks)) == (GPU_AGAIN, 1)


def test_the_length_counts_marked_nodes() -> None:
    marks = ScaleInMarks()
    for name in ("gpu-0", "gpu-1", "gpu-2"):
        marks.set(name, GPU)
    assert len(marks) == 3


def test_owned_by_a_key_finds_the_marks_of_every_uid_of_that_namespace_and_name_only() -> None:
    marks = ScaleInMarks()
    marks.set("gpu-0", GPU)
    marks.set("gpu-1", GPU_AGAIN)
    marks.set("gpu-2", GPU_ELSEWHERE)
    assert marks.owned_by("slurm/gpu") == [("gpu-0", GPU), ("gpu-1", GPU_AGAIN)]
    assert marks.owned_by("other/gpu") == [("gpu-2", GPU_ELSEWHERE)]
    assert marks.owned_by("slurm/cpu") == []


def test_of_an_identity_finds_only_the_marks_of_that_uid() -> None:
    marks = ScaleInMarks()
    marks.set("gpu-0", GPU)
    marks.set("gpu-1", GPU_AGAIN)
    marks.set("gpu-2", GPU)
    assert marks.of(GPU) == ["gpu-0", "gpu-2"]
    assert marks.of(GPU_AGAIN) == ["gpu-1"]
    assert marks.of(GPU_ELSEWHERE) == []


def test_every_listener_is_told_the_node_of_every_mark_and_unmark_in_order() -> None:
    marks = ScaleInMarks()
    first: list[str] = []
    second: list[str] = []
    marks.subscribe(first.append)
    marks.subscribe(second.append)
    marks.set("gpu-0", GPU)
    marks.set("gpu-0", None)
    marks.set("gpu-1", None)  # told even when nothing was marked: the listener looks at the node again
    assert first == second == ["gpu-0", "gpu-0", "gpu-1"]


def test_a_listener_sees_the_change_already_made() -> None:
    marks = ScaleInMarks()
    seen: list[NodeSetRef | None] = []
    marks.subscribe(lambda name: seen.append(marks.get(name)))
    marks.set("gpu-0", GPU)
    marks.set("gpu-0", None)
    assert seen == [GPU, None]
