"""A SlurmPartition CR, pure: what test_partition_spec.py leaves open (found by `scripts/mutation`): the
overSubscribe count Slurm stores when none is given, `In` and `NotIn` against another value, the settings
and defaults a resolved CR carries, and the whole status document."""

from __future__ import annotations

from syncer.controllers.partitions.plan import Outcome
from syncer.controllers.partitions.spec import selector_matches, settings_from_spec, status_of, wanted_from
from syncer.slurm.partitions import OverSubscribe, PartitionSettings, PartitionState


def test_oversubscribe_without_a_count_wants_what_slurm_stores():
    for mode, jobs in (("YES", 4), ("FORCE", 4), ("NO", 0)):  # Slurm stores YES:4 and FORCE:4
        got = settings_from_spec({"overSubscribe": {"mode": mode}})
        assert got == PartitionSettings(oversubscribe=OverSubscribe(mode, jobs))


def test_in_needs_the_label_with_one_of_the_values_and_not_in_holds_without_the_label_or_with_another():
    def match(operator: str, labels: dict[str, str]) -> bool:
        expression = {"key": "pool", "operator": operator, "values": ["gpu"]}
        return selector_matches({"matchExpressions": [expression]}, labels)

    assert [match("In", labels) for labels in ({"pool": "gpu"}, {"pool": "cpu"}, {})] == [True, False, False]
    assert [match("NotIn", labels) for labels in ({"pool": "gpu"}, {"pool": "cpu"}, {})] == [
        False,
        True,
        True,
    ]


def test_a_resolved_cr_carries_its_settings_and_is_not_adopting_unless_it_says_so():
    cr = {
        "metadata": {"name": "gpu", "uid": "u1", "creationTimestamp": "2026-11-26T00:00:00Z"},
        "spec": {"nodes": {"hosts": ["n1"]}, "maxTime": 60},
    }
    want = wanted_from(cr, [], lambda _node: (), lambda _ns, _name: None)
    assert want.settings == PartitionSettings(max_time=60)
    assert want.adopt is False and want.nodes == {"n1"} and not want.problems


def test_the_status_document_in_full_ready_or_not_with_or_without_the_partition():
    outcome = Outcome("gpu", "gpu-p", False, "Creating", "creating partition gpu-p")
    assert status_of(outcome, None, (0, 0), 2, None, {}, "T1") == {
        "observedGeneration": 2,
        "partitionName": "gpu-p",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Creating",
                "message": "creating partition gpu-p",
                "lastTransitionTime": "T1",
                "observedGeneration": 2,
            }
        ],
    }
    # a REST version that does not show the state: an empty text, never null
    have = PartitionState("gpu-p", frozenset({"n1"}), "n1", PartitionSettings(), 4)
    ready = Outcome("gpu", "gpu-p", True, "Ready", "partition gpu-p matches")
    document = status_of(ready, have, (1, 0), 3, "adopted", {}, "T2")
    assert document["conditions"][0]["status"] == "True"
    assert document["slurm"]["state"] == "" and document["ownership"] == "adopted"


def test_every_named_nodeset_adds_its_members_and_a_missing_one_stops_none_of_the_others():
    sets = {("slurm", "a"): ("a-0", "a-1"), ("slurm", "b"): ("b-0",)}
    refs = [{"namespace": "slurm", "name": n} for n in ("gone", "a", "b")]
    cr = {"metadata": {"name": "gpu", "generation": 3, "deletionTimestamp": "2026-11-26T01:00:00Z"},
          "spec": {"nodes": {"nodeSets": refs}}}  # fmt: skip
    want = wanted_from(cr, [], lambda _node: (), lambda ns, name: sets.get((ns, name)))
    assert want.nodes == {"a-0", "a-1", "b-0"} and want.joining == want.nodes
    assert want.problems == ("spec.nodes.nodeSets: NodeSet slurm/gone does not exist",)
    assert want.deleting and want.generation == 3
