"""Which zones are disrupted (most of their Nodes NotReady at once), kept from the Node informer's changes:
the counts always equal a recount of the Nodes as they are, whatever order the changes came in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from syncer.controllers.nodeset.disruption import (
    ZONE_LABEL,
    ZoneCount,
    ZoneHealth,
    disrupted,
    not_ready,
    zone_of,
)
from syncer.model.kube import Condition, KubeNode


def node(name: str, zone: str | None, ready: str | None) -> KubeNode:
    labels = {ZONE_LABEL: zone} if zone is not None else {}
    conditions = (Condition(type="Ready", status=ready),) if ready is not None else ()
    return KubeNode(name=name, labels=labels, conditions=conditions)


def test_kubernetes_thresholds_more_than_two_and_at_least_55_percent() -> None:
    assert not disrupted(2, 2)  # two Nodes NotReady of two: not a storm (Kubernetes: more than 2)
    assert disrupted(3, 3)
    assert disrupted(11, 20)  # 55 %
    assert not disrupted(10, 20)  # 50 %
    assert not disrupted(0, 0)
    assert ZoneCount(3, 5).disrupted and not ZoneCount(3, 6).disrupted


def test_not_ready_is_false_or_unknown_and_a_node_without_ready_is_not_judged() -> None:
    assert not_ready(node("a", None, "False")) and not_ready(node("a", None, "Unknown"))
    assert not not_ready(node("a", None, "True")) and not not_ready(node("a", None, None))


def test_the_zone_is_the_topology_label_else_none() -> None:
    assert zone_of(node("a", "eu-1a", "True")) == "eu-1a"
    assert zone_of(node("a", None, "True")) == ""


def test_a_zone_turns_disrupted_and_back_as_its_nodes_change() -> None:
    health = ZoneHealth()
    for i in range(4):
        health.update(None, node(f"n{i}", "a", "True"))
    health.update(None, node("m", "b", "True"))
    for i in range(3):
        health.update(node(f"n{i}", "a", "True"), node(f"n{i}", "a", "Unknown"))
    assert health.count("a") == ZoneCount(3, 4) and health.count("a").disrupted
    assert not health.count("b").disrupted and health.count("nowhere") == ZoneCount(0, 0)
    health.update(node("n0", "a", "Unknown"), node("n0", "a", "True"))
    assert health.count("a") == ZoneCount(2, 4) and not health.count("a").disrupted
    health.update(node("m", "b", "True"), None)  # deleted: its zone goes with its last Node
    assert health.zones() == {"a": ZoneCount(2, 4)}
    health.update(node("n1", "a", "Unknown"), node("n1", "c", "Unknown"))  # relabelled into another zone
    assert health.zones() == {"a": ZoneCount(1, 3), "c": ZoneCount(1, 1)}


changes = st.lists(
    st.tuples(
        st.sampled_from(["n0", "n1", "n2", "n3"]),
        st.one_of(
            st.none(), st.tuples(st.sampled_from([None, "a", "b"]), st.sampled_from([None, "True", "False"]))
        ),
    ),
    max_size=40,
)


@given(changes)
def test_counts_equal_a_recount_after_any_changes(
    steps: list[tuple[str, tuple[str | None, str | None] | None]],
) -> None:
    health, current = ZoneHealth(), dict[str, KubeNode]()
    for name, after in steps:
        new = node(name, *after) if after is not None else None
        old = current.get(name)
        if old is None and new is None:
            continue
        health.update(old, new)
        if new is None:
            del current[name]
        else:
            current[name] = new
    expected: dict[str, ZoneCount] = {}
    for n in current.values():
        before = expected.get(zone_of(n), ZoneCount(0, 0))
        expected[zone_of(n)] = ZoneCount(before.not_ready + not_ready(n), before.total + 1)
    assert health.zones() == dict(sorted(expected.items()))
