"""Which entries of a several-partition POST Slurm refused, from its errors (wording measured on 26.05.5)."""

from __future__ import annotations

from syncer.slurm.errors import SlurmApiError, SlurmMessage
from syncer.slurm.partitions import refused_entries


def refused(*descriptions: str) -> SlurmApiError:
    errors = tuple(SlurmMessage(d, 2018, "Invalid node name specified") for d in descriptions)
    return SlurmApiError("partition_update", status=422, errors=errors)


def test_each_refused_entry_is_found_by_its_index() -> None:
    exc = refused("Failed to create partition mg with description at index 0",
                  "Failed to update partition mi with description at index 2")  # fmt: skip
    found = refused_entries(exc, 4)
    assert found is not None and sorted(found) == [0, 2]


def test_an_error_naming_no_entry_or_one_out_of_range_leaves_it_unknown() -> None:
    assert refused_entries(refused('Unknown flag "BOGUS"'), 3) is None
    assert refused_entries(refused("Failed to create partition x with description at index 5"), 3) is None
    assert refused_entries(refused(), 3) is None  # an error without Slurm's errors: nothing to go by
