"""How a controller joins the syncer: one `REGISTRATION` in its `controller.py`, and its folder's name in
`syncer/controllers/__init__.py`'s `CONTROLLERS` (the one registration line). The service builds every
controller from the registry and calls no controller class (its typed accessors and the exporter name the
classes only to read them).

    REGISTRATION = Registration(
        "toy",
        build=when_enabled(ToyController),            # built when its options' `enabled`, else not run
        defaults=ToyOptions(),                        # its options when the configuration names none
        options=(Option("toy-enabled", parse_bool, False, "run the toy controller", "Toy", "flag"),),
        configure=lambda values: ToyOptions(enabled=values["toy_enabled"]),  # from the settings' values
    )

Its option rows join `slurm-syncer run`'s flags, environment variables, `--config` keys and
docs/configuration.md; `configure` turns the loaded values into its options object (it may read the
service's own values too, by name)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from syncer.control.context import ControllerContext
from syncer.runtime.controller import Controller
from syncer.runtime.options import Option

Options = TypeVar("Options")


@dataclass(frozen=True)
class Registration(Generic[Options]):
    name: str  # its folder's name: its logs' and metrics' `controller`, its Manager task
    build: Callable[[ControllerContext, Options], Controller | None]  # None: not run (off by its options)
    defaults: Options  # its options when the configuration names none (tests, the demo)
    options: tuple[Option, ...] = ()  # its rows of the option table
    configure: Callable[[Mapping[str, Any]], Options] | None = (
        None  # loaded values -> its options; None: defaults
    )

    def options_from(self, values: Mapping[str, Any]) -> Options:
        return self.configure(values) if self.configure is not None else self.defaults


class OptIn(Protocol):
    @property
    def enabled(self) -> bool: ...


OptInOptions = TypeVar("OptInOptions", bound=OptIn)


def when_enabled(
    controller: Callable[[ControllerContext, OptInOptions], Controller],
) -> Callable[[ControllerContext, OptInOptions], Controller | None]:
    """`build` of a controller its options turn on (`enabled`): built when on, None (not run) when off."""
    return lambda context, options: controller(context, options) if options.enabled else None
