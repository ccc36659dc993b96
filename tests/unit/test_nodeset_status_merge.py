"""What a NodeSet status write leaves stored: the merge patch as the API server applies it (RFC 7386)."""

from __future__ import annotations

from syncer.controllers.nodeset.status import merge_patched


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
