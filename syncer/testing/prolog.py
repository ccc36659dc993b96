"""slurm-syncer's PrologSlurmctld in a sandbox (issue 47): the script the package ships, installed in the
instance's etc/ (slurmctld sees it at /sbx/etc), named in slurm.conf by `up(extra_conf=(CONF_LINE,))`, and
pointed at a running syncer (or nowhere) by the settings file beside it; and how slurmctld's log tells which
way a job left CONFIGURING."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

from syncer.app.prolog_cmd import SCRIPT, script
from syncer.testing.sandbox.config import INNER

CONF_LINE = f"PrologSlurmctld={INNER}/etc/{SCRIPT}"
SETTINGS = f"{SCRIPT}.env"
# a slurmctld log line: its stamp, its text
LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (.*)$", re.M)
BY_PROLOG = "prolog_running_decr"  # the job's PrologSlurmctld ended with its nodes ready
BY_PERIODIC_CHECK = "job_time_limit"  # slurmctld's 30 s periodic check


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


def slurmctld_log(directory: Path) -> str:
    """The log of the slurmctld of the sandbox instance in `directory`."""
    return (directory / "log" / "slurmctld.log").read_text(errors="replace")


def configured(log: str, job: str) -> tuple[float, str] | None:
    """When (epoch seconds) and by which function (BY_PROLOG, BY_PERIODIC_CHECK, ...) slurmctld found job
    `job`'s nodes ready and let it leave CONFIGURING; None until it has logged that."""
    done = re.compile(rf"^(\w+): Configuration for JobId={job} (?:is )?complete")
    for stamp, line in LOG_LINE.findall(log):
        if found := done.match(line):
            return datetime.fromisoformat(stamp).timestamp(), found.group(1)
    return None
