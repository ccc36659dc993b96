"""Every option of `slurm-syncer run`, declared once: each is a flag `--name`, an environment
variable `SLURM_SYNCER_<NAME>` and a key of the optional YAML file `--config`; a flag beats the
environment, which beats the file, which beats the default. docs/configuration.md is generated
from this table (`python -m syncer.app.settings > docs/configuration.md`)."""

from __future__ import annotations

import argparse
import re
import socket
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from syncer.app.logs import LOG_OPTIONS
from syncer.app.registry import registrations
from syncer.model import cluster
from syncer.model.keys import DEFAULT_NODE_NAME_LABELS
from syncer.runtime.options import (
    ENV_PREFIX,
    Option,
    choice,
    fraction,
    label_key,
    parse_bool,
    parse_duration,
    port,
    positive_duration,
    positive_float,
    positive_int,
)
from syncer.runtime.yaml_file import YamlFileError, load_mapping

__all__ = [
    "ENV_PREFIX", "OPTIONS", "Option", "Settings", "SettingsError", "load", "parse_bool", "parse_duration",
]  # fmt: skip


class SettingsError(Exception):
    """A bad option: the message names the option, the value, where it came from and what is allowed."""


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _lease_name(text: str) -> str:
    name = text.strip()
    if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        raise ValueError("a Lease name: lower-case letters, digits, '-' and '.', e.g. slurm-syncer-gpu")
    return name


def _cluster_name(text: str) -> str:
    name = text.strip()
    return cluster.validated(name) if name else ""


def _label_selector(text: str) -> str:
    selector = text.strip()
    if any(ch in selector for ch in "\n\r\t\x00") or selector.count("(") != selector.count(")"):
        raise ValueError("a Kubernetes label selector, e.g. app.kubernetes.io/name=slurmd")
    return selector


def _url(text: str) -> str:
    if not re.match(r"^(https?://[^/\s]+|unix:///\S+)", text):
        raise ValueError("http://host:port, https://host:port or unix:///path/to/slurmrestd.sock")
    return text


def _metrics_url(text: str) -> str:
    value = text.strip()
    if value.lower() in ("auto", "off", ""):
        return value.lower() or "off"
    if not re.match(r"^http://[^/\s]+/?$", value):
        raise ValueError("auto, off, or http://slurmctld-host:SlurmctldPort")
    return value


def _listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError("host:port or :port, e.g. :8080")
    return host or "0.0.0.0", int(port)


# The service's own options; each controller's rows come with its registration (its package)
SERVICE_OPTIONS: tuple[Option, ...] = (
    Option("slurm-url", _url, None, "slurmrestd URL (http, https or unix socket); required", "Slurm"),
    Option(
        "slurm-token-file",
        str,
        "",
        "file holding a Slurm JWT (re-read when it changes: rotation without restart)",
        "Slurm",
    ),
    Option(
        "slurm-jwt-key-file",
        str,
        "",
        "Slurm's jwt_hs256.key: the syncer mints its own short-lived tokens",
        "Slurm",
    ),
    Option(
        "slurm-jwt-user",
        str,
        "slurm",
        "user named in X-SLURM-USER-NAME and in minted tokens; with --slurm-token-file set it to the token's "
        "user (its sun claim): slurmrestd refuses another user's token unless that one is SlurmUser or root",
        "Slurm",
    ),
    Option(
        "slurm-api-version",
        str,
        "auto",
        "REST API version (v0.0.40 ... v0.0.45) or auto (newest both sides speak; chosen again when "
        "slurmrestd is replaced, e.g. by a Slurm upgrade)",
        "Slurm",
    ),
    Option(
        "slurm-poll-interval",
        positive_duration,
        1.0,
        "how often the node cache asks slurmrestd what changed",
        "Slurm",
        shown_default="1s",
    ),
    Option(
        "slurm-probe-interval",
        positive_duration,
        0.25,
        "without slurmctld's metrics, where slurmrestd says 'changed' without the list (24.11): how often "
        "the node cache asks 'changed since?' (a 304 or a 500, no node list; lists stay under the 25 % duty "
        "limit); at or above --slurm-poll-interval: every poll",
        "Slurm",
        shown_default="250ms",
    ),
    Option(
        "slurm-poll-strategy",
        choice("conditional", "full"),
        "conditional",
        "conditional (update_time probes) or full (a whole node list each poll)",
        "Slurm",
    ),
    Option(
        "slurm-stale-after",
        positive_duration,
        30.0,
        "Slurm data older than this is stale: no undrain, not ready",
        "Slurm",
        shown_default="30s",
    ),
    Option(
        "slurm-metrics-url",
        _metrics_url,
        "auto",
        "slurmctld's OpenMetrics (25.11+, MetricsType=metrics/openmetrics): node-state counts decide when to "
        "list. auto: the primary slurmctld slurmrestd's ping names, on the SlurmctldPort slurmrestd's /conf "
        "gives (REST v0.0.45, Slurm 26.05), else on --slurm-metrics-port, checked and "
        "followed after a failover (where there are none: update_time probes, logged and exported); "
        "http://host:SlurmctldPort: that one; off: update_time probes only",
        "Slurm",
    ),
    Option(
        "slurm-metrics-port",
        port,
        6817,
        "with --slurm-metrics-url auto where slurmrestd has no /conf (before Slurm 26.05): slurmctld's "
        "SlurmctldPort, where it serves its metrics",
        "Slurm",
    ),
    Option(
        "slurm-metrics-interval",
        positive_duration,
        0.25,
        "with --slurm-metrics-url: how often slurmctld's node-state counts are read (12 KB from slurmctld, "
        "nothing from slurmrestd), idle and while a list runs",
        "Slurm",
        shown_default="250ms",
    ),
    Option(
        "slurm-metrics-floor",
        positive_duration,
        30.0,
        "with --slurm-metrics-url: a full check at least this often, even when no count moved "
        "(bounds how late a drain whose counts cancel out is seen)",
        "Slurm",
        shown_default="30s",
    ),
    Option(
        "slurm-metrics-duty",
        fraction,
        1.0,
        "with --slurm-metrics-url: the share of time slurmrestd may spend listing for us while the counts "
        "keep moving (1.0: lists back to back during a burst; 0.25 otherwise)",
        "Slurm",
    ),
    Option(
        "slurm-metrics-lists-in-flight",
        positive_int,
        2,
        "with --slurm-metrics-url and duty 1.0: while a list runs and the counts move again, start the next "
        "list beside it, up to this many at a time, each a list's time over this number after the one "
        "before (1: one after another)",
        "Slurm",
    ),
    Option(
        "slurm-timeout",
        positive_duration,
        10.0,
        "timeout of one slurmrestd request",
        "Slurm",
        shown_default="10s",
    ),
    Option(
        "kubeconfig",
        str,
        "",
        "kubeconfig file; empty: $KUBECONFIG (merged), else ~/.kube/config, else in-cluster credentials",
        "Kubernetes",
    ),
    Option("namespace", str, "", "namespace of the slurmd pods; empty: all namespaces", "Kubernetes"),
    Option(
        "lease-namespace",
        str,
        "",
        "namespace of the leader Lease and of Node Events; default $POD_NAMESPACE or default",
        "Kubernetes",
    ),
    Option(
        "lease-name",
        _lease_name,
        "slurm-syncer",
        "name of the leader Lease; two syncers in one namespace need two names (the chart: its release)",
        "Kubernetes",
    ),
    Option(
        "cluster-name",
        _cluster_name,
        "",
        "this release's cluster identity: it acts only on SlurmPartitions, NodeSets and pods labelled "
        "slurm-syncer.dev/cluster=<it> (docs/contract.md); default the lease name (the chart: clusterName, "
        "else its release name)",
        "Kubernetes",
    ),
    Option(
        "adopt-unlabelled",
        parse_bool,
        True,
        "label SlurmPartitions and NodeSets that carry no slurm-syncer.dev/cluster with this release's "
        "cluster name, then act on them (one release wins each; with several releases label every object)",
        "Kubernetes",
        "flag",
    ),
    Option(
        "leader-election",
        parse_bool,
        True,
        "elect a leader on a Lease (run 2 replicas); off: this process always writes",
        "Kubernetes",
        "flag",
    ),
    Option(
        "lease-duration",
        positive_duration,
        15.0,
        "how long a lease lasts without renewal",
        "Kubernetes",
        shown_default="15s",
    ),
    Option(
        "renew-deadline",
        positive_duration,
        10.0,
        "the leader stops writing when it could not renew for this long",
        "Kubernetes",
        shown_default="10s",
    ),
    Option(
        "retry-period",
        positive_duration,
        2.0,
        "interval of lease renewals and acquisition attempts",
        "Kubernetes",
        shown_default="2s",
    ),
    Option(
        "kube-qps",
        positive_float,
        50.0,
        "client-side rate limit of Kubernetes API requests per second",
        "Kubernetes",
    ),
    Option("kube-burst", positive_int, 100, "requests allowed at once above kube-qps", "Kubernetes"),
    Option("identity", str, "", "name of this replica in the Lease; default the host name", "Kubernetes"),
    Option(
        "owner-prefix",
        str,
        "k8s: ",
        "drain reasons starting with this are the syncer's; others are never touched",
        "Sync",
    ),
    Option(
        "node-name-label",
        label_key,
        DEFAULT_NODE_NAME_LABELS,
        "pod label naming its Slurm node (repeatable, first present wins; default: ours, then Slinky's "
        "pod-hostname, computed as Slinky does)",
        "Sync",
        "list",
    ),
    Option(
        "pod-selector",
        _label_selector,
        "",
        "label selector narrowing which pods are considered, e.g. app.kubernetes.io/name=slurmd "
        "(with several node-name labels, without it every pod is listed and filtered here)",
        "Sync",
    ),
    Option(
        "bind-by-node-name",
        parse_bool,
        False,
        "bind a Slurm node to the Kubernetes Node of the same name (hybrid hosts)",
        "Sync",
        "flag",
    ),
    Option(
        "workers",
        positive_int,
        8,
        "Slurm nodes reconciled at once; 32 times as many more for Kubernetes changes only (at most "
        "four times as many reading Slurm at once)",
        "Sync",
    ),
    Option("dry-run", parse_bool, False, "compute and log every action, write nothing", "Sync", "flag"),
)
SERVER_OPTIONS: tuple[Option, ...] = (
    Option(
        "listen-address",
        _listen,
        ("0.0.0.0", 8080),
        "where /metrics, /healthz and /readyz are served",
        "Server",
        shown_default=":8080",
    ),
    Option(
        "jobs-poll-interval",
        positive_duration,
        30.0,
        "how often the exporter refreshes job counts and scheduler statistics (from slurmctld's metrics "
        "while the hint works, else GET /jobs and /diag from slurmrestd)",
        "Server",
        shown_default="30s",
    ),
)
CONTROLLER_OPTIONS: tuple[Option, ...] = tuple(o for r in registrations() for o in r.options)
OPTIONS: tuple[Option, ...] = (*SERVICE_OPTIONS, *CONTROLLER_OPTIONS, *SERVER_OPTIONS)
BY_ATTR = {option.attr: option for option in OPTIONS}


def default(attr: str) -> Any:
    """An option's default, for code that builds a configuration without the command line."""
    return BY_ATTR[attr].default


@dataclass(frozen=True)
class Settings:
    """The loaded options: the service's own typed, so that mypy sees every one (a misspelt option is a type
    error); each controller's by name in `controller_values`, typed by its options object
    (`controller_options(name)`). Defaults live in the option rows only; a test checks these fields against
    the table."""

    slurm_url: str
    slurm_token_file: str
    slurm_jwt_key_file: str
    slurm_jwt_user: str
    slurm_api_version: str
    slurm_poll_interval: float
    slurm_probe_interval: float
    slurm_poll_strategy: Literal["conditional", "full"]
    slurm_stale_after: float
    slurm_metrics_url: str
    slurm_metrics_port: int
    slurm_metrics_interval: float
    slurm_metrics_floor: float
    slurm_metrics_duty: float
    slurm_metrics_lists_in_flight: int
    slurm_timeout: float
    kubeconfig: str
    namespace: str
    lease_namespace: str
    lease_name: str
    cluster_name: str
    adopt_unlabelled: bool
    leader_election: bool
    lease_duration: float
    renew_deadline: float
    retry_period: float
    kube_qps: float
    kube_burst: int
    identity: str
    owner_prefix: str
    node_name_label: tuple[str, ...]
    pod_selector: str
    bind_by_node_name: bool
    workers: int
    dry_run: bool
    listen_address: tuple[str, int]
    jobs_poll_interval: float
    # the controllers' options by attribute name (their rows and types live in their packages)
    controller_values: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)  # attr -> "flag", "env", "file" or "default"

    @property
    def values(self) -> dict[str, Any]:
        """Every option by attribute name (no sources)."""
        own = {option.attr: getattr(self, option.attr) for option in (*SERVICE_OPTIONS, *SERVER_OPTIONS)}
        return own | dict(self.controller_values)

    def value(self, attr: str) -> Any:
        """One option by attribute name (a controller's too)."""
        return self.values[attr]

    def controller_options(self, name: str) -> Any:
        """The options object of the registered controller `name`, from these values."""
        (registration,) = [r for r in registrations() if r.name == name]
        return registration.options_from(self.values)

    def lease_namespace_resolved(self, environ: Mapping[str, str]) -> str:
        return self.lease_namespace or environ.get("POD_NAMESPACE") or "default"

    def cluster_name_resolved(self) -> str:
        """--cluster-name, else the lease name (which two releases in one namespace already need apart)."""
        if self.cluster_name:
            return self.cluster_name
        try:
            return cluster.validated(self.lease_name)
        except cluster.ClusterNameError as exc:
            raise SettingsError(
                f"--cluster-name is unset and the lease name {self.lease_name!r} cannot stand for it "
                f"({exc}): set --cluster-name (env SLURM_SYNCER_CLUSTER_NAME)"
            ) from exc

    def identity_resolved(self) -> str:
        return self.identity or socket.gethostname()


def add_arguments(parser: argparse.ArgumentParser, only: Collection[str] | None = None) -> None:
    """Every option as a flag, or only those named in `only` (a command that needs few of them lists
    those in its help; the others still come from the environment and --config, as for `run`)."""
    parser.add_argument(
        "--config", type=Path, default=None, help="YAML file of options (keys as the flag names)"
    )
    shown = [o for o in OPTIONS if only is None or o.name in only]
    unknown = set(only or ()) - {o.name for o in OPTIONS}
    assert not unknown, f"no such options: {sorted(unknown)}"
    for section in dict.fromkeys(o.section for o in shown):
        group = parser.add_argument_group(section)
        for option in (o for o in shown if o.section == section):
            # argparse %-formats help: a literal % (as in "25 % duty") must reach it doubled
            help_text = f"{option.help} [env {option.env}]".replace("%", "%%")
            if option.kind == "flag":
                group.add_argument(
                    f"--{option.name}",
                    dest=option.attr,
                    action=argparse.BooleanOptionalAction,
                    default=None,
                    help=help_text,
                )
            elif option.kind == "list":
                group.add_argument(
                    f"--{option.name}",
                    dest=option.attr,
                    action="append",
                    default=None,
                    metavar="VALUE",
                    help=help_text,
                )
            else:
                group.add_argument(
                    f"--{option.name}", dest=option.attr, default=None, metavar="VALUE", help=help_text
                )


def _parse(option: Option, raw: Any, source: str) -> Any:
    try:
        if option.kind == "list":
            items = raw if isinstance(raw, list) else [p for p in str(raw).split(",") if p.strip()]
            parsed = []
            for item in items:
                raw = item  # a bad item is named alone, not the whole list
                parsed.append(option.parse(str(item)))
            return tuple(parsed)
        if option.kind == "flag" and isinstance(raw, bool):
            return raw
        return option.parse(str(raw))
    except (ValueError, TypeError) as exc:
        where = {
            "flag": f"--{option.name}",
            "env": option.env,
            "file": f"key {option.name!r} of the config file",
        }[source]
        raise SettingsError(f"bad value {raw!r} for {where}: expected {exc}") from None


def _read_file(path: Path) -> dict[str, Any]:
    try:
        loaded = load_mapping(path, f"the config file {path}", "a mapping of option names to values")
    except YamlFileError as exc:
        raise SettingsError(str(exc)) from None
    values: dict[str, Any] = {}
    for key, value in loaded.items():
        attr = str(key).replace("-", "_")
        if attr not in BY_ATTR:
            raise SettingsError(
                f"unknown option {key!r} in the config file {path} (see docs/configuration.md)"
            )
        values[attr] = value
    return values


def load(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    file_values = _read_file(args.config) if getattr(args, "config", None) else {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in OPTIONS:
        flag = getattr(args, option.attr, None)
        if flag is not None:
            values[option.attr], sources[option.attr] = _parse(option, flag, "flag"), "flag"
        elif option.env in environ:
            values[option.attr], sources[option.attr] = _parse(option, environ[option.env], "env"), "env"
        elif option.attr in file_values:
            values[option.attr], sources[option.attr] = (
                _parse(option, file_values[option.attr], "file"),
                "file",
            )
        else:
            values[option.attr], sources[option.attr] = option.default, "default"
    if not values["slurm_url"]:
        raise SettingsError("--slurm-url is required (or SLURM_SYNCER_SLURM_URL, or slurm-url in --config)")
    if not values["renew_deadline"] < values["lease_duration"]:
        raise SettingsError(
            f"--renew-deadline ({values['renew_deadline']} s) must be shorter than --lease-duration "
            f"({values['lease_duration']} s)"
        )
    if not values["retry_period"] < values["renew_deadline"]:
        raise SettingsError(
            f"--retry-period ({values['retry_period']} s) must be shorter than --renew-deadline "
            f"({values['renew_deadline']} s)"
        )
    if values["slurm_token_file"] and values["slurm_jwt_key_file"]:
        raise SettingsError("give either --slurm-token-file or --slurm-jwt-key-file, not both")
    controllers = {o.attr for o in CONTROLLER_OPTIONS}
    own = {attr: value for attr, value in values.items() if attr not in controllers}
    theirs = {attr: value for attr, value in values.items() if attr in controllers}
    return Settings(**own, controller_values=theirs, sources=sources)


def markdown() -> str:
    lines = [
        "# Configuration",
        "",
        "Generated from `syncer/app/settings.py` (`python -m syncer.app.settings > docs/configuration.md`);",
        "a test fails when this file is out of date.",
        "",
        "Every option of `slurm-syncer run` can be given as a flag, as an environment variable, or as a key",
        "of the YAML file named by `--config`. A flag beats the environment, which beats the file, which",
        "beats the default. Durations take `500ms`, `30s`, `2m`, `1h` or plain seconds; switches take",
        "`--name` / `--no-name` as flags and true/false (1/0, yes/no) elsewhere; repeatable options take a",
        "list in YAML and a comma-separated value in the environment.",
        "",
    ]
    for section in dict.fromkeys(o.section for o in OPTIONS):
        lines += [
            f"## {section}",
            "",
            "| option | environment variable | default | meaning |",
            "|---|---|---|---|",
        ]
        for option in (o for o in OPTIONS if o.section == section):
            if option.shown_default:
                default = option.shown_default
            elif option.default is None:
                default = "(required)"
            elif isinstance(option.default, bool):
                default = str(option.default).lower()
            elif option.default in ("", ()):
                default = "(empty)"
            elif isinstance(option.default, tuple):  # as the flag and the environment take it
                default = ",".join(str(item) for item in option.default)
            else:
                default = str(option.default)
            flag = f"`--{option.name}`" + (" (repeatable)" if option.kind == "list" else "")
            lines.append(f"| {flag} | `{option.env}` | `{default}` | {option.help} |")
        lines.append("")
    lines += [
        "## Logging",
        "",
        "Options of every command, before or after its name (`slurm-syncer run --log-level debug`), or",
        "from the environment (not from `--config`: the log is set up before the file is read). In the Helm",
        "chart: `log.level` and `log.format`.",
        "",
        "| option | environment variable | default | values |",
        "|---|---|---|---|",
        *(
            f"| `{flag}` | `{env}` | `{dflt}` | {', '.join(allowed)} |"
            for flag, env, allowed, dflt in LOG_OPTIONS
        ),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())
