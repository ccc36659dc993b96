"""The command line's habits: log options after the sub-command and from the environment, each
sub-command's help limited to its own options, `version`, and the output formats."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from syncer import __version__
from syncer.app import settings as settings_mod
from syncer.app.check_cmd import CHECK_OPTIONS, Item, report
from syncer.app.cli import build_parser
from syncer.app.logs import LogSettingError, log_settings
from syncer.app.status_cmd import CONNECTION_OPTIONS, render
from syncer.controllers.sync.drift import Row

REPO = Path(__file__).resolve().parents[2]


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syncer", *argv], cwd=REPO, capture_output=True, text=True, check=False,
        env={"PATH": "/usr/bin:/bin", **(env or {})}, timeout=60,
    )  # fmt: skip


def test_log_options_are_accepted_after_the_sub_command() -> None:
    for argv in (
        ["run", "--log-level", "debug"],
        ["--log-level", "debug", "run"],
        ["status", "--log-level=debug"],
    ):
        args = build_parser(argv).parse_args(argv)
        assert args.log_level == "debug", argv
    args = build_parser(["run"]).parse_args(["--log-format", "json", "run", "--log-level", "warning"])
    assert (args.log_format, args.log_level) == ("json", "warning")  # the sub-command keeps the global one
    args = build_parser(["check"]).parse_args(["check"])
    assert (args.log_format, args.log_level) == (None, None)  # left to the environment


def test_log_settings_flag_beats_environment_beats_default() -> None:
    env = {"SLURM_SYNCER_LOG_LEVEL": "WARNING", "SLURM_SYNCER_LOG_FORMAT": "json"}
    assert log_settings(None, None, {}) == ("info", "auto")
    assert log_settings(None, None, env) == ("warning", "json")
    assert log_settings("debug", "console", env) == ("debug", "console")
    with pytest.raises(LogSettingError, match=r"bad value 'loud' for SLURM_SYNCER_LOG_LEVEL: expected debug"):
        log_settings(None, None, {"SLURM_SYNCER_LOG_LEVEL": "loud"})
    with pytest.raises(LogSettingError, match=r"bad value 'xml' for --log-format: expected auto, json"):
        log_settings(None, "xml", {})


def test_bad_log_settings_are_refused_naming_where_they_came_from() -> None:
    done = cli("run", "--log-level", "loud", env={"SLURM_SYNCER_LOG_LEVEL": "debug"})
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "slurm-syncer: bad value 'loud' for --log-level: expected debug, info, warning, error"
    )
    done = cli("check", env={"SLURM_SYNCER_LOG_FORMAT": "xml"})
    assert done.returncode == 2 and done.stderr.strip() == (
        "slurm-syncer: bad value 'xml' for SLURM_SYNCER_LOG_FORMAT: expected auto, json, console"
    )


def flags_in_help(command: str) -> set[str]:
    parser = build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[index]
    return {s for action in sub._actions for s in action.option_strings if s.startswith("--")}


def test_each_sub_command_lists_only_its_own_options() -> None:
    every = {f"--{o.name}" for o in settings_mod.OPTIONS}
    assert every <= flags_in_help("run")
    status = flags_in_help("status")
    assert status & every == {f"--{n}" for n in CONNECTION_OPTIONS}
    assert {"--drifting", "--no-headers", "--output", "--all", "--log-level", "--config"} <= status
    check = flags_in_help("check")
    assert check & every == {f"--{n}" for n in CHECK_OPTIONS}
    assert {"--dry-run", "--no-write-probe", "--output"} <= check
    for daemon_only in ("--workers", "--lease-duration", "--kube-qps", "--slurm-metrics-duty"):
        assert daemon_only not in status | check
    done = cli("status", "--help")
    assert done.returncode == 0 and "--workers" not in done.stdout and "--drifting" in done.stdout


@pytest.mark.parametrize("command", ["run", "status", "check", "prolog", "version"])
def test_each_sub_commands_help_prints(command: str) -> None:
    done = cli(command, "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: slurm-syncer"), done.stderr[-500:]
    assert "Traceback" not in done.stderr


def test_a_percent_sign_in_an_options_help_reaches_the_help_as_written() -> None:
    percent = [o for o in settings_mod.OPTIONS if "%" in o.help]
    assert percent, "no option's help has a % sign: this test checks nothing"
    shown = " ".join(cli("run", "--help").stdout.split())
    for option in percent:
        assert " ".join(f"{option.help} [env {option.env}]".split())[:60] in shown


def test_status_reads_the_daemon_options_it_does_not_list_from_the_environment() -> None:
    args = build_parser(["status"]).parse_args(["status"])
    env = {"SLURM_SYNCER_SLURM_URL": "http://slurmrestd:6820", "SLURM_SYNCER_READY_GRACE_PERIOD": "2m"}
    loaded = settings_mod.load(args, env)
    assert loaded.value("ready_grace_period") == 120.0 and loaded.sources["ready_grace_period"] == "env"


def test_version() -> None:
    done = cli("version")
    assert done.returncode == 0 and done.stdout == f"slurm-syncer {__version__}\n"
    about = json.loads(cli("version", "-o", "json").stdout)
    assert about["version"] == __version__ and "v0.0.42" in about["slurm_rest_api_versions"]
    assert yaml.safe_load(cli("version", "-o", "yaml").stdout) == about


ROWS = [
    Row("n1", "pod", "slurm/p1", "k1", "IDLE", "", "yes", True, would="drain in Slurm (k8s: cordoned)"),
    Row("n2", "pod", "slurm/p2", "k2", "IDLE", "", "", False),
]


def test_status_table_headers_and_drifting_column() -> None:
    table = render(ROWS).splitlines()
    assert table[0].split()[:2] == ["SLURM", "NODE"] and table[-1] == "2 nodes, 1 drifting, 0 conflicting"
    assert [line.split()[0] for line in render(ROWS, headers=False).splitlines()] == ["n1", "n2"]
    drifting = render(ROWS[:1], drifting=True).splitlines()
    assert drifting[0].endswith("WOULD") and drifting[1].endswith("drain in Slurm (k8s: cordoned)")
    assert render([], drifting=True, headers=False) == ""
    named = render(ROWS, cluster="gpu-a").splitlines()[-1]
    assert named == "2 nodes, 1 drifting, 0 conflicting (release gpu-a: slurm-syncer.dev/cluster=gpu-a)"


def test_check_report_as_text_json_and_yaml() -> None:
    items = [
        Item(True, "slurmrestd answers"),
        Item(True, "write probe skipped (--dry-run)", "run it once", warn=True),
        Item(False, "may patch pods", "grant it"),
    ]
    text = report(items, "text").splitlines()
    assert text[0] == "ok    slurmrestd answers" and text[1].startswith("WARN  write probe skipped")
    assert text[3] == "FAIL  may patch pods" and text[4] == "      fix: grant it"
    assert text[-1] == "2 ok, 1 failed (1 to improve)"
    data = json.loads(report(items, "json"))
    assert data["failed"] == 1 and data["ok"] == 2 and data["warned"] == 1
    assert [i["status"] for i in data["items"]] == ["ok", "warn", "fail"]
    assert yaml.safe_load(report(items, "yaml")) == data


def test_documented_commands_parse() -> None:
    """Every `kubectl exec ... -- slurm-syncer ...` in the README, the chart's README and NOTES and the
    operations guide is a command line this version accepts."""
    documents = [
        REPO / "README.md",
        REPO / "docs" / "operations.md",
        REPO / "deploy" / "helm" / "slurm-syncer" / "README.md",
        REPO / "deploy" / "helm" / "slurm-syncer" / "templates" / "NOTES.txt",
    ]
    found = 0
    for document in documents:
        for match in re.finditer(r"-- slurm-syncer ([^`#\n]+)", document.read_text()):
            argv = match.group(1).split()
            try:
                build_parser(argv).parse_args(argv)
            except SystemExit as exc:
                raise AssertionError(f"{document.name}: slurm-syncer {' '.join(argv)}") from exc
            found += 1
    assert found >= 10
