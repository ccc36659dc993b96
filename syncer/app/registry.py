"""The controllers the service runs: each folder `CONTROLLERS` names (syncer/controllers/__init__.py),
its `controller.py`'s `REGISTRATION`. The service builds them, the option table takes their rows."""

from __future__ import annotations

import functools
import importlib
from typing import Any

from syncer.control.registration import Registration
from syncer.controllers import CONTROLLERS


@functools.cache
def registrations() -> tuple[Registration[Any], ...]:
    found = []
    for name in CONTROLLERS:
        module = importlib.import_module(f"syncer.controllers.{name}.controller")
        registration = getattr(module, "REGISTRATION", None)
        if not isinstance(registration, Registration) or registration.name != name:
            raise TypeError(f"syncer/controllers/{name}/controller.py: no REGISTRATION named {name!r}")
        found.append(registration)
    return tuple(found)
