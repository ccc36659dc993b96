"""structlog set-up: JSON lines in production, readable console output on a terminal."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import structlog

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("auto", "json", "console")
# (flag, environment variable, allowed, default): read by the command line before any sub-command runs,
# so not options of syncer/app/settings.py (which `run` loads after logging is set up)
LOG_OPTIONS = (
    ("--log-level", "SLURM_SYNCER_LOG_LEVEL", LEVELS, "info"),
    ("--log-format", "SLURM_SYNCER_LOG_FORMAT", FORMATS, "auto"),
)


class LogSettingError(ValueError):
    """A bad log level or format: the message names the value, where it came from and what is allowed."""


def log_settings(level: str | None, fmt: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """(level, format): a flag beats the environment, which beats the default."""
    chosen = []
    for given, (flag, env, allowed, default) in zip((level, fmt), LOG_OPTIONS, strict=True):
        value, where = (given, flag) if given is not None else (environ.get(env), env)
        if value is None or value == "":
            chosen.append(default)
        elif value.lower() in allowed:
            chosen.append(value.lower())
        else:
            raise LogSettingError(f"bad value {value!r} for {where}: expected {', '.join(allowed)}")
    return chosen[0], chosen[1]


def configure_logging(
    fmt: str = "auto",
    level: str = "info",
    *,
    stream: TextIO | None = None,
    tap: structlog.typing.Processor | None = None,
) -> None:
    """Log to `stream` (default stderr); `tap` sees every event from info up before the level filter and
    the renderer (the demo tells the syncer's actions from it, whatever the log level)."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise SystemExit(f"slurm-syncer: unknown --log-level {level!r}; use debug, info, warning or error")
    out = stream if stream is not None else sys.stderr
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=out.isatty())
        if use_console
        else structlog.processors.JSONRenderer()
    )
    # the tap sees events from info up; the level filter after it keeps the log as asked
    tapped: list[structlog.typing.Processor] = [tap, _AtLeast(numeric)] if tap is not None else []
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            *tapped,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            min(numeric, logging.INFO) if tap is not None else numeric
        ),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


class _AtLeast:
    """Drops events below `level` (when a tap needs the logger itself to let more through)."""

    def __init__(self, level: int) -> None:
        self.level = level

    def __call__(self, _logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
        if logging.getLevelName(str(event.get("level", "info")).upper()) < self.level:
            raise structlog.DropEvent
        return event
