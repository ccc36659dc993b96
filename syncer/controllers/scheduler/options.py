"""The scheduler's options: the core's (`Options`, what the plan reads) and the controller's
(`SchedulerOptions`: whether it runs, which pods are its own, how jobs are made), with their rows of the
option table (section "Scheduler") and the parsers of their values."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from syncer.controllers.scheduler.request import DEFAULT_GRES
from syncer.controllers.scheduler.settings import DEFAULT_POD_OVERRIDES
from syncer.runtime.options import Option, parse_bool, positive_duration


@dataclass(frozen=True, kw_only=True)
class Options:
    release: str  # names this syncer's jobs (the marker): another release's are not ours
    gres: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_GRES))  # extended resource -> GRES
    pod_overrides: frozenset[str] = DEFAULT_POD_OVERRIDES  # unless the Namespace lists its own
    retry_after_s: float = 60.0  # a job cancelled because its pod could not be placed: submitted again after


@dataclass(frozen=True, kw_only=True)
class SchedulerOptions:
    """The controller's: off while `name` is empty."""

    name: str = ""  # spec.schedulerName of the pods it places
    namespaces: tuple[str, ...] = ()  # the namespaces it serves; (): every namespace
    placeholder: bool = False  # Slurm 24.11 (no external jobs): a placeholder batch job per pod
    allocate: bool = True  # allocate at once when the node cache shows room, else submit (allocate.py)
    gres: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_GRES))
    retry_after_s: float = 60.0
    # a bind of ours the pod informer does not show after this is warned of (controller.py): no option, a
    # test seam (an informer that lags this long, without waiting for it)
    bind_shows_s: float = 30.0

    @property
    def enabled(self) -> bool:
        return bool(self.name)


_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_RESOURCE: Final = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_GRES: Final = re.compile(r"[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)?")


def scheduler_name(text: str) -> str:
    """A scheduler name as `spec.schedulerName` takes it (a DNS subdomain), or "" (off)."""
    name = text.strip()
    if name and not (len(name) <= 253 and all(_DNS_LABEL.fullmatch(part) for part in name.split("."))):
        raise ValueError("a scheduler name such as slurm-syncer (lower case letters, digits, '-' and '.')")
    return name


def namespaces(text: str) -> tuple[str, ...]:
    """One namespace or a comma list of them (`--scheduler-namespaces a,b`)."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [name for name in names if not _DNS_LABEL.fullmatch(name)]
    if bad or not names:
        raise ValueError(f"namespace names such as team-a,team-b ({bad[0]!r} is not one)" if bad else
                         "namespace names such as team-a,team-b")  # fmt: skip
    return names


def gres_entry(text: str) -> tuple[str, str]:
    """`RESOURCE=GRES`: an extended resource and the Slurm GRES it is asked as (`nvidia.com/gpu=gpu`,
    `nvidia.com/a100=gpu:a100`), or `RESOURCE=` (Kubernetes alone counts it)."""
    resource, sep, gres = (part.strip() for part in text.partition("="))
    if not sep or not _RESOURCE.fullmatch(resource) or resource.split("/")[0].endswith("kubernetes.io"):
        raise ValueError(
            "RESOURCE=GRES with an extended resource, e.g. nvidia.com/gpu=gpu or example.com/fpga="
        )
    if gres and not _GRES.fullmatch(gres):
        raise ValueError("a GRES name, or name:type, after '=' (e.g. gpu or gpu:a100), or nothing")
    return resource, gres


SECTION: Final = "Scheduler"
_DEFAULTS: Final = SchedulerOptions()

OPTIONS = (
    Option(
        "scheduler-name",
        scheduler_name,
        "",
        "turns the one-pool scheduler on: pods with this spec.schedulerName become Slurm jobs and are bound "
        "where Slurm allocates them (docs/scheduler.md); empty: off",
        SECTION,
        shown_default="(off)",
    ),
    Option(
        "scheduler-namespaces",
        namespaces,
        (),
        "the namespaces whose pods the scheduler serves (a comma list; repeatable); empty: every namespace, "
        "which needs its rights cluster-wide. List them: the chart then grants the rights per namespace",
        SECTION,
        "list",
        shown_default="(every namespace)",
    ),
    Option(
        "scheduler-placeholder",
        parse_bool,
        False,
        "where slurmrestd has no external jobs (Slurm 24.11, REST v0.0.42) stand for each pod with a "
        "placeholder batch job that holds the allocation; off: such pods are refused with an Event saying so",
        SECTION,
        "flag",
    ),
    Option(
        "scheduler-allocate",
        parse_bool,
        True,
        "ask Slurm to allocate a pod's external job at once (POST /job/allocate, immediate) when the node "
        "cache shows room for it, and submit it only if Slurm refuses (each refusal leaves a FAILED job "
        "record); off: always submit (the job waits for Slurm's next scheduling pass)",
        SECTION,
        "flag",
    ),
    Option(
        "scheduler-gres",
        gres_entry,
        (),
        "an extended resource and the Slurm GRES it is asked as, RESOURCE=GRES (repeatable; GRES may be "
        "name:type; empty: Kubernetes alone counts it); any given replaces the defaults nvidia.com/gpu=gpu, "
        "amd.com/gpu=gpu",
        SECTION,
        "list",
        shown_default="nvidia.com/gpu=gpu,amd.com/gpu=gpu",
    ),
    Option(
        "scheduler-retry-after",
        positive_duration,
        _DEFAULTS.retry_after_s,
        "a job cancelled as its pod did not fit the Node Slurm placed it on, or a submit Slurm refused, is "
        "submitted again after this",
        SECTION,
        shown_default="60s",
    ),
)


def _flat(found: Any) -> tuple[str, ...]:
    """Comma lists given several times (a repeated flag, an env list): one tuple, order kept, once each."""
    names: list[str] = []
    for item in found:
        for name in (item,) if isinstance(item, str) else item:
            if name not in names:
                names.append(name)
    return tuple(names)


def options_from(values: Mapping[str, Any]) -> SchedulerOptions:
    gres = dict(values["scheduler_gres"]) if values["scheduler_gres"] else dict(DEFAULT_GRES)
    return SchedulerOptions(
        name=values["scheduler_name"],
        namespaces=_flat(values["scheduler_namespaces"]),
        placeholder=values["scheduler_placeholder"],
        allocate=values.get("scheduler_allocate", _DEFAULTS.allocate),
        gres=gres,
        retry_after_s=values["scheduler_retry_after"],
    )
