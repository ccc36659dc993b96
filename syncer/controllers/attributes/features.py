"""Node labels -> Slurm features, pure: which features the syncer owns on a node, and the node's full
feature lists with them (Slurm's node update replaces both lists, so everything without the prefix is sent
back exactly as it was)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# What slurmctld takes in a feature name (measured on 26.05: a feature with `=` fails the whole update).
FEATURE = re.compile(r"[A-Za-z0-9._:-]+")
DEFAULT_PREFIX = "k8s."


@dataclass(frozen=True)
class FeatureLabel:
    """`--feature-label KEY[=NAME]`: the label KEY gives the feature `<prefix><NAME>[:<value>]`."""

    key: str
    name: str

    @classmethod
    def parse(cls, spec: str) -> FeatureLabel:
        key, _, name = spec.strip().partition("=")
        key, name = key.strip(), name.strip() or key.strip().rsplit("/", 1)[-1]
        if not key:
            raise ValueError(f"feature label {spec!r}: no label key (KEY[=NAME])")
        if not FEATURE.fullmatch(name) or ":" in name:
            raise ValueError(
                f"feature label {spec!r}: the name {name!r} is no Slurm feature name "
                "(letters, digits, '.', '_', '-'); give one with KEY=NAME"
            )
        return cls(key, name)


@dataclass(frozen=True)
class Refused:
    """A label whose value Slurm cannot take as a feature: no feature, one Event naming it."""

    label: str
    value: str
    why: str

    @property
    def message(self) -> str:
        return f"label {self.label}={self.value!r} gives no Slurm feature: {self.why}"


@dataclass(frozen=True)
class WantedFeatures:
    owned: tuple[str, ...]  # sorted
    refused: tuple[Refused, ...]


def wanted(labels: Mapping[str, str], specs: Sequence[FeatureLabel], prefix: str) -> WantedFeatures:
    owned: set[str] = set()
    refused: list[Refused] = []
    for spec in specs:
        value = labels.get(spec.key)
        if value is None or value in ("", "false"):
            continue
        feature = f"{prefix}{spec.name}" if value == "true" else f"{prefix}{spec.name}:{value}"
        if not FEATURE.fullmatch(feature):
            bad = sorted({c for c in value if not FEATURE.fullmatch(c)})
            refused.append(
                Refused(
                    spec.key, value, f"Slurm takes only letters, digits and . _ - : (not {''.join(bad)!r})"
                )
            )
            continue
        owned.add(feature)
    return WantedFeatures(tuple(sorted(owned)), tuple(refused))


def with_owned(current: Sequence[str], owned: Sequence[str], prefix: str) -> tuple[str, ...] | None:
    """`current` with its features under `prefix` replaced by `owned`, or None when they already match.
    The features the syncer does not own keep their order; its own follow, sorted."""
    mine = {f for f in current if f.startswith(prefix)}
    if mine == set(owned):
        return None
    return (*(f for f in current if not f.startswith(prefix)), *sorted(owned))
