"""slurm-syncer's PrologSlurmctld in a sandbox (issue 47): the script the package ships, installed in the
instance's etc/ (slurmctld sees it at /sbx/etc), named in slurm.conf by `up(extra_conf=(CONF_LINE,))`, and
pointed at a running syncer (or nowhere) by the settings file beside it."""

from __future__ import annotations

import os
from pathlib import Path

from syncer.app.prolog_cmd import SCRIPT, script
from syncer.testing.sandbox.config import INNER

CONF_LINE = f"PrologSlurmctld={INNER}/etc/{SCRIPT}"
SETTINGS = f"{SCRIPT}.env"


def install(directory: Path) -> None:
    """The script into `directory`/etc (a sandbox's instance directory), readable and runnable by all."""
    etc = directory / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    path = etc / SCRIPT
    path.write_text(script())
    os.chmod(path, 0o755)
    point(directory, "")


def point(directory: Path, url: str, wait_s: int = 60) -> None:
    """The prolog asks the syncer at `url` ("" asks nobody: the prolog ends at once)."""
    settings = directory / "etc" / SETTINGS
    tmp = settings.with_suffix(".tmp")
    tmp.write_text(f"SLURM_SYNCER_URL={url}\nSLURM_SYNCER_PROLOG_WAIT={wait_s}\n")
    os.chmod(tmp, 0o644)
    tmp.replace(settings)  # a prolog reading it meanwhile sees the old file or the new one
