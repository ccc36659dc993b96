"""Read a YAML file that must hold a mapping (the config file, kubeconfigs), with errors that name it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlFileError(ValueError):
    """The message names the file (as `what`) and what is wrong with it."""


def load_mapping(path: Path, what: str, shape: str) -> dict[str, Any]:
    """`what` names the file in messages ("the config file x"); `shape` says what it should be."""
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise YamlFileError(f"cannot read {what}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise YamlFileError(f"{what} is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise YamlFileError(f"{what} must be {shape}")
    return loaded
