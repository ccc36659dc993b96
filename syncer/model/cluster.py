"""Which release an object belongs to (issue 45 item 3; docs/contract.md "One release per object").

Each release (one chart install, one Slurm cluster) has a cluster identity (--cluster-name; the chart's
`clusterName`, its release name by default). A SlurmPartition or NodeSet labelled
`slurm-syncer.dev/cluster: <name>` belongs to that release alone: each release's informers select that label,
so no other release ever sees the object. The pods a NodeSet makes carry the label too, and a release keeps
no pod labelled with another's name.

An object without the label (made before the label existed, or by someone who left it out) belongs to nobody
until a release that adopts (--adopt-unlabelled, on by default) writes its own name on it. That write is made
only while the label is absent, over the resourceVersion read, so of two releases both adopting exactly one
succeeds, and only that one acts on the object from then on. An unlabelled object is never acted on as such.

Finalizers are per release (`slurm-syncer.dev/partition-<name>`), so one release's finalizer never stands
for another's; the one name used before identities (`slurm-syncer.dev/partition`) is taken by the release
the CR belongs to as its own and replaced by its own on its next claim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from syncer.model.keys import ANNOTATION_PREFIX, Keys

LABEL: Final = Keys.CLUSTER_LABEL
UNLABELLED: Final = "!" + LABEL  # the label selector of objects no release has taken yet
LEGACY_PARTITION_FINALIZER: Final = Keys.PARTITION_FINALIZER
PARTITION_FINALIZER_PREFIX: Final = ANNOTATION_PREFIX + "partition-"
# a finalizer's name part is at most 63 characters: "partition-" and the identity
MAX_LENGTH: Final = 63 - len("partition-")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class ClusterNameError(ValueError):
    """A cluster identity that cannot be a label value and a finalizer name: the message says what can."""


def validated(name: str) -> str:
    """The identity as given, or ClusterNameError: lower-case letters, digits, '-' and '.' (as a
    Helm release name), at most MAX_LENGTH characters: a label value and a finalizer's name part."""
    if not _NAME.match(name) or len(name) > MAX_LENGTH:
        raise ClusterNameError(
            f"a cluster name: lower-case letters, digits, '-' and '.', starting and ending with a letter or "
            f"digit, at most {MAX_LENGTH} characters (e.g. the Helm release name, or Slurm's ClusterName)"
        )
    return name


def selector(cluster: str) -> str:
    """The label selector of this release's objects."""
    return f"{LABEL}={cluster}"


def owner(labels: Mapping[str, str]) -> str | None:
    """The release an object belongs to; None when unlabelled ("" when labelled empty: nobody's)."""
    return labels.get(LABEL)


def belongs(labels: Mapping[str, str], cluster: str) -> bool:
    return owner(labels) == cluster


def pod_seen(labels: Mapping[str, str], cluster: str) -> bool:
    """Whether this release keeps a pod in its caches: its own, or one no release labelled (a slurmd pod of
    Slinky's, one made before the label existed). Another release's pod is never seen."""
    return owner(labels) in (None, cluster)


def adoption(labels: Mapping[str, str], cluster: str) -> dict[str, Any] | None:
    """The patch that makes an unlabelled object this release's, from its current labels; None once it
    carries any cluster label (another release took it first, or someone labelled it)."""
    if owner(labels) is not None:
        return None
    return {"metadata": {"labels": {LABEL: cluster}}}


def partition_finalizer(cluster: str) -> str:
    return PARTITION_FINALIZER_PREFIX + cluster


def claimed_finalizers(finalizers: Sequence[str], cluster: str) -> list[str] | None:
    """The finalizers once this release claims the CR: its own in place of the legacy one, or added;
    None when they are so already."""
    own = partition_finalizer(cluster)
    wanted = [f for f in finalizers if f != LEGACY_PARTITION_FINALIZER]
    if own not in wanted:
        wanted.append(own)
    return None if wanted == list(finalizers) else wanted


def released_finalizers(finalizers: Sequence[str], cluster: str) -> list[str] | None:
    """The finalizers once this release lets the CR go: its own and the legacy one removed, any other
    release's kept; None when neither is there."""
    mine = (partition_finalizer(cluster), LEGACY_PARTITION_FINALIZER)
    kept = [f for f in finalizers if f not in mine]
    return None if len(kept) == len(finalizers) else kept


@dataclass(frozen=True)
class Scoped:
    """One object as `check` reads it: its kind, name (namespace/name for a NodeSet), labels, finalizers."""

    kind: str
    name: str
    labels: Mapping[str, str]
    finalizers: Sequence[str] = ()


def problems(objects: Iterable[Scoped], cluster: str, adopts: bool) -> list[str]:
    """What `check` warns of: objects no release can see as they are, objects this release would take
    (with another release beside it, either might), and finalizers of another release on an object of
    this one (a CR whose label was changed: the other release no longer sees it to remove its finalizer)."""
    said: list[str] = []
    unlabelled: list[str] = []
    for obj in objects:
        found = owner(obj.labels)
        where = f"{obj.kind} {obj.name}"
        if found is None:
            unlabelled.append(where)
        elif found == "":
            said.append(f"{where}: label {LABEL} is empty: no release acts on it; set it to a cluster name")
        elif found == cluster:
            others = [
                f for f in obj.finalizers
                if f.startswith(PARTITION_FINALIZER_PREFIX) and f != partition_finalizer(cluster)
            ]  # fmt: skip
            if others:
                said.append(
                    f"{where}: finalizer {', '.join(others)} of another release, which no longer sees it "
                    "(its label was changed): the CR cannot go until that release's partition is removed "
                    "and the finalizer taken off by hand"
                )
    if unlabelled:
        shown = ", ".join(unlabelled[:5]) + (
            f" and {len(unlabelled) - 5} more" if len(unlabelled) > 5 else ""
        )
        how = (
            f"this release (--adopt-unlabelled) labels them {LABEL}={cluster} and acts on them, unless "
            "another adopting release labels them first"
            if adopts
            else "no release acts on them until one adopts them (--adopt-unlabelled) or they are labelled"
        )
        said.append(
            f"{len(unlabelled)} object(s) without label {LABEL} ({shown}): {how}; with several releases in "
            f"this Kubernetes cluster label each with its release's cluster name"
        )
    return said
