from __future__ import annotations

from syncer.controllers.sync.written import WrittenAnnotations
from syncer.model import KubeNode, KubePod
from syncer.model.keys import Keys


def pod(annotations: dict[str, str], uid: str = "u1") -> KubePod:
    return KubePod(namespace="slurm", name="slurmd-0", uid=uid, annotations=annotations)


def test_our_write_shows_until_the_cache_catches_up() -> None:
    written = WrittenAnnotations()
    stale = pod({Keys.STATE: "IDLE+DRAIN", Keys.REASON: "k8s: x", "user": "kept"})
    written.remember(stale, {Keys.STATE: "IDLE", Keys.REASON: None})
    seen = written.overlay(stale)
    assert seen is not None and seen.annotations == {Keys.STATE: "IDLE", "user": "kept"}
    caught_up = pod({Keys.STATE: "IDLE", "user": "kept", "other": "new"})
    assert written.overlay(caught_up) is caught_up
    assert len(written) == 0  # forgotten once the cache shows it


def test_a_recreated_object_or_an_old_write_is_not_overlaid() -> None:
    written = WrittenAnnotations(ttl_s=0.0)
    old = pod({Keys.STATE: "IDLE"})
    written.remember(old, {Keys.STATE: "DOWN"})
    assert written.overlay(old) is old  # older than the TTL
    written = WrittenAnnotations()
    written.remember(old, {Keys.STATE: "DOWN"})
    recreated = pod({Keys.STATE: "IDLE"}, uid="u2")
    assert written.overlay(recreated) is recreated


def test_nodes_and_pods_are_kept_apart_and_forgotten_on_leadership_change() -> None:
    written = WrittenAnnotations()
    node = KubeNode(name="slurmd-0", uid="u1", annotations={})
    written.remember(node, {Keys.STATE: "IDLE"})
    unrelated = written.overlay(pod({}))
    assert unrelated is not None and unrelated.annotations == {}
    overlaid = written.overlay(node)
    assert overlaid is not None and overlaid.annotations == {Keys.STATE: "IDLE"}
    written.forget_all()
    assert written.overlay(node) is node
