"""What a pod's Slurm job asks for besides resources: the pod's annotations over its Namespace's.

The Namespace's annotations are its pods' defaults, and they alone say which settings the pods may choose
themselves (`slurm-syncer.dev/pod-overrides`): every job is submitted as the syncer's own Slurm user, so
Slurm's association limits do not stand between a pod's author and an account, partition or QOS. Only who
may edit a Namespace (a cluster admin, as for `scheduler.alpha.kubernetes.io/node-selector`) chooses those
for a tenant; the scheduler's options set the default list. A negative nice (a higher priority) likewise
comes only from the Namespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from syncer.controllers.scheduler import slurmtime
from syncer.model.keys import Keys

Value = str | int

PARTITION: Final = "partition"
ACCOUNT: Final = "account"
QOS: Final = "qos"
TIME_LIMIT: Final = "time-limit"
NICE: Final = "nice"
CONSTRAINT: Final = "constraint"
RESERVATION: Final = "reservation"
ANNOTATIONS: Final = {
    PARTITION: Keys.JOB_PARTITION,
    ACCOUNT: Keys.JOB_ACCOUNT,
    QOS: Keys.JOB_QOS,
    TIME_LIMIT: Keys.JOB_TIME_LIMIT,
    NICE: Keys.JOB_NICE,
    CONSTRAINT: Keys.JOB_CONSTRAINT,
    RESERVATION: Keys.JOB_RESERVATION,
}
FIELDS: Final = {name: name.replace("-", "_") for name in ANNOTATIONS} | {TIME_LIMIT: "time_limit_min"}
ALL: Final = "*"
# What a pod may choose unless its Namespace says otherwise: nothing that bills, outranks or enters
# another tenant's share.
DEFAULT_POD_OVERRIDES: Final = frozenset({TIME_LIMIT, NICE, CONSTRAINT})
MAX_NICE: Final = 2147483645  # Slurm: |nice| <= NICE_OFFSET - 3
_NAME: Final = re.compile(r"[A-Za-z0-9._-]+")
_NAMES: Final = re.compile(r"[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*")
_FEATURES: Final = re.compile(r"[A-Za-z0-9._:&|*()\[\],!-]+")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")


NEGATIVE_NICE: Final = (
    "a pod may only lower its priority (nice >= 0); a negative nice is set on its Namespace ("
    + Keys.JOB_NICE
    + ")"
)


class BadSetting(ValueError):
    pass


@dataclass(frozen=True, kw_only=True)
class Settings:
    partition: str | None = None  # a comma list: Slurm runs the job in the first that can
    account: str | None = None
    qos: str | None = None
    time_limit_min: int | None = None  # slurmtime.UNLIMITED for none; None: the partition's DefaultTime
    nice: int | None = None
    constraint: str | None = None
    reservation: str | None = None


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """Why no job is submitted: the field to fix (as Kubernetes names fields), on which object, and how."""

    field: str
    message: str
    object: str = ""  # "" for the pod itself; else e.g. "Namespace team-a", "Job team-a/train"

    @property
    def text(self) -> str:
        return refusal_text(self.field, self.message, self.object)


def refusal_text(field: str, message: str, on: str) -> str:
    """`[<object> ]<field>: <message>`, as a condition or an Event says it."""
    where = f"{on} " if on else ""
    return f"{where}{field}: {message}"


def _name(text: str) -> str:
    if not _NAME.fullmatch(text):
        raise BadSetting(f"{text!r} is not a Slurm name (letters, digits, '.', '_', '-')")
    return text


def _names(text: str) -> str:
    if not _NAMES.fullmatch(text):
        raise BadSetting(f"{text!r} is not a comma list of Slurm names (letters, digits, '.', '_', '-')")
    return text


def _features(text: str) -> str:
    if not _FEATURES.fullmatch(text):
        raise BadSetting(f"{text!r} is not a Slurm feature expression (as sbatch --constraint takes)")
    return text


def _time(text: str) -> int:
    try:
        return slurmtime.parse(text)
    except ValueError as error:
        raise BadSetting(str(error)) from None


def _nice(text: str) -> int:
    if not _INTEGER.fullmatch(text) or abs(int(text)) > MAX_NICE:
        raise BadSetting(f"{text!r} is not a Slurm nice value (a whole number, -{MAX_NICE} to {MAX_NICE})")
    return int(text)


PARSERS: Final[dict[str, Callable[[str], Value]]] = {
    PARTITION: _names,
    ACCOUNT: _name,
    QOS: _name,
    TIME_LIMIT: _time,
    NICE: _nice,
    CONSTRAINT: _features,
    RESERVATION: _name,
}


def annotation_field(key: str) -> str:
    return f"metadata.annotations[{key}]"


def pod_overrides(namespace: str, annotations: Mapping[str, str], default: frozenset[str]) -> frozenset[str]:
    """The settings the Namespace lets its pods choose; BadSetting (as a Refusal) for a name it misspells."""
    text = annotations.get(Keys.POD_OVERRIDES)
    if text is None:
        return default
    names = frozenset(part.strip() for part in text.split(",")) - {""}
    if ALL in names:
        return frozenset(ANNOTATIONS)
    unknown = sorted(names - ANNOTATIONS.keys())
    if unknown:
        raise _refusal(
            Keys.POD_OVERRIDES,
            f"{', '.join(unknown)} is not a setting; name some of {', '.join(ANNOTATIONS)}, or {ALL}",
            f"Namespace {namespace}",
        )
    return names


class RefusedSetting(Exception):
    """Carries a Refusal (its only argument) out of the parsing of one annotation."""


def _refusal(key: str, message: str, on: str = "") -> RefusedSetting:
    return RefusedSetting(Refusal(field=annotation_field(key), message=message, object=on))


def resolve(
    namespace: str,
    pod_annotations: Mapping[str, str],
    namespace_annotations: Mapping[str, str],
    default_overrides: frozenset[str] = DEFAULT_POD_OVERRIDES,
) -> Settings | Refusal:
    """The job's settings: each from the pod's annotation where the Namespace lets pods choose it, else the
    Namespace's; a Refusal naming the first bad or forbidden annotation (and what to do) otherwise."""
    try:
        allowed = pod_overrides(namespace, namespace_annotations, default_overrides)
        values: dict[str, Any] = {}
        for name, key in ANNOTATIONS.items():
            ns_text = namespace_annotations.get(key)
            if ns_text is not None:
                values[FIELDS[name]] = _parse(name, key, ns_text, f"Namespace {namespace}")
            pod_text = pod_annotations.get(key)
            if pod_text is None:
                continue
            if name not in allowed:
                raise _refusal(key, _forbidden(namespace, name, allowed))
            value = _parse(name, key, pod_text, "")
            if name == NICE and int(value) < 0:
                raise _refusal(key, NEGATIVE_NICE)
            values[FIELDS[name]] = value
    except RefusedSetting as refused:
        refusal: Refusal = refused.args[0]
        return refusal
    return replace(Settings(), **values)


def _parse(name: str, key: str, text: str, on: str) -> Value:
    if not text.strip():
        raise _refusal(key, "empty: give a value or remove the annotation", on)
    try:
        return PARSERS[name](text.strip())
    except BadSetting as error:
        raise _refusal(key, str(error), on) from None


def _forbidden(namespace: str, name: str, allowed: frozenset[str]) -> str:
    listed = ", ".join(sorted(allowed)) or "none"
    return (
        f"Namespace {namespace} does not let its pods choose {name} (they may choose: {listed}); remove the "
        f"annotation, or ask the Namespace's admin to set it there or list it in {Keys.POD_OVERRIDES}"
    )
