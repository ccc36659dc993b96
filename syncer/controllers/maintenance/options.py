"""The maintenance controller's rows of the option table (section "Maintenance"); its options object,
`MaintenanceOptions`, is the pure plan's (plan.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from syncer.controllers.maintenance.plan import MaintenanceCondition, MaintenanceOptions
from syncer.runtime.options import Option, parse_duration, positive_duration

_DEFAULTS = MaintenanceOptions()


def maintenance_condition(text: str) -> MaintenanceCondition:
    match = re.fullmatch(r"\s*([A-Za-z][A-Za-z0-9_.-]*)(?:=([+-])(\S+))?\s*", text)
    if match is None:
        raise ValueError("Type or Type=+DURATION / Type=-DURATION, e.g. CSPMaintenance=+30m")
    shift = 0.0
    if match.group(3):
        shift = parse_duration(match.group(3)) * (-1 if match.group(2) == "-" else 1)
    return MaintenanceCondition(match.group(1), shift)


OPTIONS = (
    Option(
        "maintenance-condition",
        maintenance_condition,
        (),
        "Node condition type that announces maintenance while True (repeatable), Type[=+/-DURATION]: the "
        "window is read from its message (an ISO 8601 interval, or timestamps: start, end), else starts at "
        "its lastTransitionTime; the DURATION shifts the start (NVSentinel CSPMaintenance=+30m, "
        "NebiusMaintenanceScheduled=-1h; docs/interop.md)",
        "Maintenance",
        "list",
    ),
    Option(
        "max-maintenance-window",
        positive_duration,
        _DEFAULTS.max_window_s,
        "a longer maintenance window is refused (Event on the Node, no reservation)",
        "Maintenance",
        shown_default="168h",
    ),
    Option(
        "maintenance-default-duration",
        positive_duration,
        _DEFAULTS.default_duration_s,
        "length of a window whose source gives a start but no end",
        "Maintenance",
        shown_default="4h",
    ),
)


def options_from(values: Mapping[str, Any]) -> MaintenanceOptions:
    return MaintenanceOptions(
        conditions=values["maintenance_condition"],
        max_window_s=values["max_maintenance_window"],
        default_duration_s=values["maintenance_default_duration"],
    )
