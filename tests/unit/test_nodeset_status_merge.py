"""What a NodeSet status write leaves stored: the merge patch as the API server applies it (RFC 7386)."""

from __future__ import annotations

import msgspec

from syncer.controllers.nodeset.plan import plan
from syncer.controllers.nodeset.status import compute_status, merge_patched
from tests.unit.test_nodeset_plan import NS, make_spec

NOW = "2026-12-02T00:00:00Z"


def test_keys_the_patch_does_not_name_stay_and_named_ones_are_replaced_or_merged():
    stored = {
        "replicas": 1,
        "power": {"poweredDown": 1, "declaring": ["a"]},
        "conditions": [{"type": "Valid"}],
    }
    patch = {"replicas": 2, "power": {"declaring": []}, "conditions": [{"type": "SlurmAvailable"}]}
    assert merge_patched(stored, patch) == {
        "replicas": 2,
        "power": {"poweredDown": 1, "declaring": []},  # an object is merged key by key
        "conditions": [{"type": "SlurmAvailable"}],  # a list is replaced whole
    }
    assert stored["replicas"] == 1, "the stored status is not changed in place"


def test_null_deletes_a_key_and_a_patch_over_a_non_object_replaces_it():
    assert merge_patched({"power": {"poweredDown": 1}, "replicas": 1}, {"power": None}) == {"replicas": 1}
    assert merge_patched({"slurm": 3}, {"slurm": {"idle": 1}}) == {"slurm": {"idle": 1}}
    assert merge_patched({"a": 1}, {"a": {"b": None}}) == {"a": {}}
    assert merge_patched({"a": 1}, {}) == {"a": 1}


def test_power_counts_go_from_the_status_once_spec_power_is_removed():
    stale = {"replicas": 0, "power": {"poweredDown": 2, "declaring": []}}
    nodeset = msgspec.structs.replace(NS, status=stale)
    spec = make_spec(0)  # spec.power removed: an ordinary NodeSet now
    result = plan(nodeset, spec, [], {}, nodes=[], slurm_fresh=True, now=0.0)
    status = compute_status(nodeset, spec, result, [], {}, slurm_fresh=True, slurm_error="", now=NOW)
    stored = merge_patched(nodeset.status, status)
    assert "power" not in stored, "the counts of a power saving no longer configured are not left behind"
    assert merge_patched(stored, compute_status(
        msgspec.structs.replace(nodeset, status=stored), spec, result, [], {},
        slurm_fresh=True, slurm_error="", now=NOW,
    )) == stored  # fmt: skip
