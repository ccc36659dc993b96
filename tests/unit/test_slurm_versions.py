"""Which REST API version the Slurm client speaks (syncer/slurm/versions.py): the newest both sides speak or
the pinned one, and what each version can do, as measured on 24.11.5 and 26.05.5."""

from __future__ import annotations

from syncer.slurm.versions import PREFERENCE, VERSIONS, choose


def test_version_choice_prefers_the_newest_and_honours_pins() -> None:
    served = {"v0.0.40", "v0.0.41", "v0.0.42"}
    assert choose(served) == VERSIONS["v0.0.42"]
    assert choose(served, "v0.0.40") == VERSIONS["v0.0.40"]
    assert choose(served, "v0.0.44") is None
    assert choose({"v0.0.39"}) is None
    assert all(v.verified_live for v in VERSIONS.values())
    assert VERSIONS["v0.0.42"].verified_on == ("24.11", "26.05")


def test_newer_versions_are_preferred_in_order() -> None:
    assert list(VERSIONS) == ["v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40"]
    assert tuple(VERSIONS) == PREFERENCE and all(VERSIONS[name].name == name for name in VERSIONS)
    assert VERSIONS["v0.0.44"].prefix == "/slurm/v0.0.44"
    assert choose(set(VERSIONS)) == VERSIONS["v0.0.45"]
    assert choose({"v0.0.43", "v0.0.44"}) == VERSIONS["v0.0.44"]


def test_each_version_can_do_what_was_measured_on_the_releases_it_was_verified_on() -> None:
    """v0.0.43 (Slurm 25.05) adds topology, reservation writes and external jobs; v0.0.44 node creation;
    v0.0.45 GET /conf and partition writes; changed-since node reads from v0.0.42 (docs/slurm-releases.md)."""
    flags = [
        "conditional_nodes", "reservation_writes", "topology", "external_jobs", "node_create", "conf",
        "partition_writes",
    ]  # fmt: skip
    can = {name: [flag for flag in flags if getattr(version, flag)] for name, version in VERSIONS.items()}
    slurm_25_05 = ["conditional_nodes", "reservation_writes", "topology", "external_jobs"]
    assert can == {
        "v0.0.45": [*slurm_25_05, "node_create", "conf", "partition_writes"],
        "v0.0.44": [*slurm_25_05, "node_create"],
        "v0.0.43": slurm_25_05,
        "v0.0.42": ["conditional_nodes"],
        "v0.0.41": [],
        "v0.0.40": [],
    }
    assert {name: version.verified_on for name, version in VERSIONS.items()} == {
        "v0.0.45": ("26.05",), "v0.0.44": ("26.05",), "v0.0.43": ("26.05",), "v0.0.42": ("24.11", "26.05"),
        "v0.0.41": ("24.11",), "v0.0.40": ("24.11",),
    }  # fmt: skip
    assert all(version.verified_live is True for version in VERSIONS.values())
