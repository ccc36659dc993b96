"""Which Nodes each SlurmPartition's selector matches, kept as Nodes change (controllers/partitions/index.py),
and hostlists counted without being expanded (slurm/hostlist.count): the same answers as matching every Node
again and as expanding, for any sequence of changes and any hostlist."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.controllers.partitions.guards import lifts, preempting
from syncer.controllers.partitions.index import SelectorIndex
from syncer.controllers.partitions.spec import selector_matches
from syncer.model.kube import KubeNode
from syncer.slurm.hostlist import TooManyHosts, count, expand
from syncer.slurm.partitions import PartitionSettings, PartitionState

POOL = {"matchLabels": {"pool": "gpu"}}
ZONE = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}


def node(name: str, **labels: str) -> KubeNode:
    return KubeNode(name=name, labels=labels)


def test_a_new_selector_matches_every_node_once_and_a_node_change_says_which_crs_it_moves():
    nodes = [node("k1", pool="gpu", zone="a"), node("k2", pool="gpu"), node("k3", zone="a")]
    index = SelectorIndex()
    index.update({"gpu": POOL, "zone-a": ZONE, "none": None, "empty": {}}, lambda: nodes)
    assert index.matched("gpu") == {"k1", "k2"} and index.matched("zone-a") == {"k1", "k3"}
    assert index.matched("none") == frozenset() and index.matched("empty") == frozenset()
    assert index.selects("k3") and not index.selects("k4")
    assert index.node_changed(nodes[1], node("k2", pool="gpu", rack="r1")) == set(), "no selector moved"
    assert index.node_changed(nodes[1], node("k2", zone="a")) == {"gpu", "zone-a"}
    assert index.matched("gpu") == {"k1"} and index.matched("zone-a") == {"k1", "k2", "k3"}
    assert index.node_changed(None, node("k4", pool="gpu")) == {"gpu"}
    assert index.node_changed(node("k1", pool="gpu", zone="a"), None) == {"gpu", "zone-a"}
    assert index.node_changed(None, None) == set()
    assert index.matched("gpu") == {"k4"}


def test_a_changed_selector_is_matched_again_an_unchanged_one_is_not_and_a_gone_one_is_forgotten():
    nodes = [node("k1", pool="gpu"), node("k2", pool="cpu")]
    index = SelectorIndex()
    index.update({"a": POOL}, lambda: nodes)
    scans = []

    def counted() -> list[KubeNode]:
        scans.append(1)
        return nodes

    index.update({"a": dict(POOL)}, counted)
    assert scans == [], "an equal selector is not matched again"
    index.update({"a": {"matchLabels": {"pool": "cpu"}}}, counted)
    assert scans == [1] and index.matched("a") == {"k2"}
    index.update({}, counted)
    assert index.matched("a") == frozenset() and not index.selects("k2")
    assert index.node_changed(None, node("k3", pool="cpu")) == set()


labels = st.dictionaries(st.sampled_from(["pool", "zone"]), st.sampled_from(["gpu", "cpu", "a"]), max_size=2)
selectors = st.one_of(
    st.none(),
    st.builds(lambda v: {"matchLabels": {"pool": v}}, st.sampled_from(["gpu", "cpu"])),
    st.builds(
        lambda op: {"matchExpressions": [{"key": "zone", "operator": op, "values": ["a"]}]},
        st.sampled_from(["In", "NotIn"]),
    ),
)
events = st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3"]), st.one_of(st.none(), labels)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b"]), selectors),
    events,
    st.dictionaries(st.sampled_from(["a", "b"]), selectors),
)
def test_kept_as_nodes_change_it_answers_as_matching_every_node_again(first, changes, second):
    nodes: dict[str, KubeNode] = {}
    index = SelectorIndex()
    index.update(first, lambda: nodes.values())
    for name, now in changes:
        old = nodes.get(name)
        new = node(name, **now) if now is not None else None
        if new is None:
            nodes.pop(name, None)
        else:
            nodes[name] = new
        moved = index.node_changed(old, new)
        for cr, selector in first.items():
            was = old is not None and selector is not None and selector_matches(selector, old.labels)
            is_now = new is not None and selector is not None and selector_matches(selector, new.labels)
            assert (cr in moved) == (was != is_now)
    index.update(second, lambda: nodes.values())
    for cr, selector in second.items():
        expected = {
            n.name for n in nodes.values() if selector is not None and selector_matches(selector, n.labels)
        }
        assert index.matched(cr) == expected


hostlists = st.lists(
    st.one_of(
        st.sampled_from(["a", "gpu-bm7"]),
        st.builds(
            lambda head, ranges, tail: f"{head}[{','.join(ranges)}]{tail}",
            st.sampled_from(["n", "rack1-"]),
            st.lists(
                st.one_of(
                    st.builds(
                        lambda lo, width: f"{lo:03d}-{lo + width:03d}",
                        st.integers(0, 50),
                        st.integers(-3, 20),
                    ),
                    st.builds(lambda n: f"{n:02d}", st.integers(0, 99)),
                ),
                min_size=1,
                max_size=3,
            ),
            st.sampled_from(["", "x"]),
        ),
    ),
    max_size=4,
).map(",".join)


@settings(max_examples=300, deadline=None)
@given(hostlists)
def test_a_hostlist_is_counted_as_expand_would_name_it(hostlist):
    names = expand(hostlist)
    assert count(hostlist) == len(names)
    assert expand(hostlist, limit=len(names)) == names
    if names:
        with pytest.raises(TooManyHosts) as refused:
            expand(hostlist, limit=len(names) - 1)
        assert (refused.value.count, refused.value.limit) == (len(names), len(names) - 1)


def test_a_huge_hostlist_is_counted_not_made_and_a_bad_one_is_refused():
    assert count("n[0-99999999999]") == 10**11
    with pytest.raises(
        TooManyHosts, match=r"'n\[0-99999999999\]' names 100000000000 hosts, at most 5 allowed"
    ):
        expand("n[0-99999999999]", limit=5)
    assert count("n[5-3],m[7]") == 1 and expand("n[5-3],m[7]") == ["m7"]
    for bad in ("n[a-b]", "n[1-"):
        with pytest.raises(ValueError):
            count(bad)
    assert count("") == 0 and count(" a ,b") == 2


def test_a_bad_hostlist_says_which():
    with pytest.raises(ValueError, match=r"not a hostlist: 'a,,b'"):
        count("a,,b")


def test_an_unknown_state_is_taken_as_stopping_nothing():
    assert lifts("DOWN", "BOGUS") and not lifts("BOGUS", "DOWN")


def test_the_tier_a_busy_node_runs_jobs_at_is_the_lowest_of_the_partitions_it_is_in_one_without_a_tier_1():
    def part(name: str, nodes: set[str], tier: int | None) -> PartitionState:
        return PartitionState(
            name, frozenset(nodes), ",".join(sorted(nodes)), PartitionSettings(priority_tier=tier)
        )

    present = {"mid": part("mid", {"n1"}, 5), "low": part("low", {"n2"}, 1), "old": part("old", {"n3"}, None)}
    busy = frozenset({"n1", "n2", "n3"})
    assert preempting(["n1"], 3, "new", present, busy) == {}, "only the partitions n1 is in count"
    assert preempting(["n1", "n2", "n3"], 6, "new", present, busy) == {
        "n1": ("mid", 5), "n2": ("low", 1), "n3": ("old", 1),
    }  # fmt: skip
    assert preempting(["n3"], 1, "new", present, busy) == {}, "an unset tier is Slurm's 1"
