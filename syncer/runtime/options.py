"""One option of `slurm-syncer run`, declared once (a flag `--name`, an environment variable
`SLURM_SYNCER_<NAME>`, a key of the `--config` file, a row of docs/configuration.md), and the parsers of
values most options share. The service's own options are listed in syncer/app/settings.py; a controller's
come with its registration (syncer/control/registration.py), so that its package is the one place they
are written."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "SLURM_SYNCER_"


@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    section: str
    kind: str = "value"  # "value", "flag" (boolean switch) or "list" (repeatable)
    shown_default: str = ""

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper().replace("-", "_")

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")


def parse_duration(text: str) -> float:
    """`500ms`, `30s`, `2m`, `1h`, `1m30s` or plain seconds."""
    value = str(text).strip()
    try:
        return float(value)
    except ValueError:
        pass
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError("a duration such as 500ms, 30s, 2m or 1h")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def parse_bool(text: str) -> bool:
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("true or false (also 1/0, yes/no)")


_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def label_key(text: str) -> str:
    key = text.strip()
    if not _LABEL_KEY.match(key) or len(key) > 316:
        raise ValueError(
            "a label or annotation key, [prefix/]name, e.g. nodeset.slinky.slurm.net/pod-hostname"
        )
    return key


def port(text: str) -> int:
    value = int(text)
    if not 0 < value < 65536:
        raise ValueError("a TCP port, 1 to 65535")
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError("a fraction in (0, 1], e.g. 0.10 for 10 %")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("a whole number >= 1")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise ValueError("a number > 0")
    return value


def positive_duration(text: str) -> float:
    value = parse_duration(text)
    if value <= 0:
        raise ValueError("a duration > 0 such as 500ms, 30s, 2m or 1h")
    return value


def choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(" or ".join(allowed))
        return text

    return parse
