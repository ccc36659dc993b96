"""The job's marker: its admin comment names the syncer release that made it, the gang's key and each pod
(name and UID), so a restarted or failed-over syncer adopts its jobs by identity, and tells another
release's jobs (or an admin's) from its own. Only Slurm operators and admins can write an admin comment.

    slurm-syncer.dev/pods release=prod key=team-a/group/train pods=train-0:0b1c...,train-1:5d2e...

A job asked for by an immediate allocation (allocate.py) says so with ` via=allocate` at the end: Slurm leaves
a FAILED record of each such try it refuses, which is never the pod's job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from syncer.controllers.scheduler.values import Marker, PodRef
from syncer.model.keys import Keys

PREFIX: Final = Keys.JOB_MARKER


def write(release: str, key: str, pods: Iterable[PodRef]) -> str:
    listed = ",".join(f"{pod.name}:{pod.uid}" for pod in sorted(pods, key=lambda pod: pod.name))
    return f"{PREFIX} release={release} key={key} pods={listed}"


def via(text: str, how: str) -> str:
    """The marker `text` of a job asked for another way (`how`: allocate.VIA)."""
    return f"{text} via={how}"


def read(text: str, release: str) -> Marker | None:
    """The marker of a job of this release, or None (another release's, someone else's, or malformed)."""
    fields = _fields(text)
    if fields is None:
        return None
    pods = _pods(fields)
    if fields.get("release") != release or not fields.get("key"):
        return None
    if not all(name and uid for name, uid in pods):
        return None
    return Marker(release=release, key=fields["key"], pods=pods, via=fields.get("via", ""))


def release_of(text: str) -> str:
    """The release a slurm-syncer marker names ("" when `text` is none: an admin's comment, or no release)."""
    fields = _fields(text)
    return fields.get("release", "") if fields is not None else ""


def named_uids(text: str) -> frozenset[str]:
    """The pod UIDs a slurm-syncer marker names, whichever release's (none when `text` is no marker)."""
    return frozenset(uid for _, uid in _pods(_fields(text) or {}) if uid)


def _fields(text: str) -> dict[str, str] | None:
    words = text.split()
    if not words or words[0] != PREFIX:
        return None
    return {name: value for name, _, value in (word.partition("=") for word in words[1:])}


def _pods(fields: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """(name, UID) of each entry of the marker's `pods=` field, as written (either may be empty)."""
    return tuple(
        (name, uid) for name, _, uid in (entry.partition(":") for entry in fields.get("pods", "").split(","))
    )
