"""Options: flag > environment > file > default, clear errors, docs in step with the code."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest
from mypy import api as mypy_api

from syncer.app import settings, wiring
from syncer.app.settings import SettingsError, load, markdown, parse_duration

REPO = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_and_required_url():
    with pytest.raises(SettingsError, match="--slurm-url is required"):
        load(parse(), {})
    loaded = load(parse("--slurm-url", "http://slurmrestd:6820"), {})
    assert (
        loaded.slurm_poll_interval == 1.0
        and loaded.value("max_drain_fraction") == 0.10
        and loaded.value("safety_valve_min_nodes") == 3
        and loaded.leader_election is True
    )
    assert loaded.listen_address == ("0.0.0.0", 8080) and loaded.sources["workers"] == "default"


def test_precedence_flag_env_file(tmp_path: Path):
    config = tmp_path / "syncer.yaml"
    config.write_text("slurm-url: http://from-file:6820\nworkers: 3\nready_grace_period: 2m\ndry-run: true\n")
    env = {"SLURM_SYNCER_WORKERS": "5", "SLURM_SYNCER_SLURM_URL": "http://from-env:6820"}
    loaded = load(parse("--config", str(config), "--workers", "7"), env)
    assert loaded.workers == 7 and loaded.sources["workers"] == "flag"
    assert loaded.slurm_url == "http://from-env:6820" and loaded.sources["slurm_url"] == "env"
    assert loaded.value("ready_grace_period") == 120.0 and loaded.sources["ready_grace_period"] == "file"
    assert loaded.dry_run is True
    assert load(parse("--config", str(config), "--no-dry-run"), env).dry_run is False


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), ("1m30s", 90.0), ("7", 7.0)],
)
def test_durations(text: str, seconds: float):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("1", True), ("yes", True), ("false", False), ("0", False), ("no", False)],
)
def test_bool_env_values(text: str, value: bool):
    loaded = load(parse(), {"SLURM_SYNCER_SLURM_URL": "http://s:1", "SLURM_SYNCER_DRY_RUN": text})
    assert loaded.dry_run is value


def test_repeatable_conditions_from_flags_env_and_file(tmp_path: Path):
    flags = load(
        parse(
            "--slurm-url",
            "http://s:1",
            "--drain-on-condition",
            "GpuUnhealthy=True",
            "--drain-on-condition",
            "DiskPressure=True",
        ),
        {},
    )
    assert flags.value("drain_on_condition") == (("GpuUnhealthy", "True"), ("DiskPressure", "True"))
    env = load(parse("--slurm-url", "http://s:1"), {"SLURM_SYNCER_DRAIN_ON_CONDITION": "A=True,B=False"})
    assert env.value("drain_on_condition") == (("A", "True"), ("B", "False"))
    config = tmp_path / "c.yaml"
    config.write_text("slurm-url: http://s:1\ndrain-on-condition: [GpuUnhealthy=True]\n")
    assert load(parse("--config", str(config)), {}).value("drain_on_condition") == (("GpuUnhealthy", "True"),)


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            ("--slurm-url", "slurmrestd:6820"),
            {},
            "bad value 'slurmrestd:6820' for --slurm-url: expected http://",
        ),
        (
            ("--slurm-url", "http://s:1", "--max-drain-fraction", "1.5"),
            {},
            "--max-drain-fraction: expected a fraction",
        ),
        (
            ("--slurm-url", "http://s:1"),
            {"SLURM_SYNCER_SLURM_POLL_INTERVAL": "soon"},
            "SLURM_SYNCER_SLURM_POLL_INTERVAL: expected a duration",
        ),
        (("--slurm-url", "http://s:1", "--drain-on-condition", "GpuUnhealthy"), {}, "expected Type=Status"),
        (
            ("--slurm-url", "http://s:1", "--slurm-poll-strategy", "sometimes"),
            {},
            "expected conditional or full",
        ),
        (("--slurm-url", "http://s:1", "--workers", "0"), {}, "--workers: expected a whole number >= 1"),
        (
            ("--slurm-url", "http://s:1"),
            {"SLURM_SYNCER_SAFETY_VALVE_MIN_NODES": "0"},
            "bad value '0' for SLURM_SYNCER_SAFETY_VALVE_MIN_NODES: expected a whole number >= 1",
        ),
        (
            ("--slurm-url", "http://s:1", "--renew-deadline", "20s"),
            {},
            "must be shorter than --lease-duration",
        ),
        (("--slurm-url", "http://s:1", "--listen-address", "localhost"), {}, "expected host:port"),
        (
            ("--slurm-url", "http://s:1"),
            {"SLURM_SYNCER_LEASE_NAME": "GPU_cluster"},
            "bad value 'GPU_cluster' for SLURM_SYNCER_LEASE_NAME: expected a Lease name",
        ),
        (
            ("--slurm-url", "http://s:1", "--slurm-token-file", "/t", "--slurm-jwt-key-file", "/k"),
            {},
            "not both",
        ),
    ],
)
def test_errors_name_the_option_value_and_what_is_allowed(
    argv: tuple[str, ...], env: dict[str, str], message: str
):
    with pytest.raises(SettingsError) as raised:
        load(parse(*argv), env)
    assert message in str(raised.value)


def test_config_file_errors(tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text("slurm-url: http://s:1\nslurm-urll: typo\n")
    with pytest.raises(SettingsError, match="unknown option 'slurm-urll'"):
        load(parse("--config", str(config)), {})
    config.write_text("workers: [1\n")
    with pytest.raises(SettingsError, match="not valid YAML"):
        load(parse("--config", str(config)), {})
    config.write_text("workers: many\nslurm-url: http://s:1\n")
    with pytest.raises(SettingsError, match="key 'workers' of the config file"):
        load(parse("--config", str(config)), {})
    with pytest.raises(SettingsError, match="cannot read the config file"):
        load(parse("--config", str(tmp_path / "missing.yaml")), {})


def test_configuration_docs_are_current():
    documented = (REPO / "docs" / "configuration.md").read_text()
    assert documented == markdown(), (
        "docs/configuration.md is stale: run `python -m syncer.app.settings > docs/configuration.md`"
    )
    for option in settings.OPTIONS:
        assert f"`--{option.name}`" in documented and option.env in documented


def test_settings_are_typed_fields_checked_against_the_option_table():
    """One typed field per option of the service (no `__getattr__ -> Any`); every controller's by name, typed
    by its registration's options; defaults only in the table."""
    names = [
        f.name
        for f in dataclasses.fields(settings.Settings)
        if f.name not in ("sources", "controller_values")
    ]
    assert names == [option.attr for option in (*settings.SERVICE_OPTIONS, *settings.SERVER_OPTIONS)]
    loaded = load(parse("--slurm-url", "http://slurmrestd:6820"), {})
    assert set(loaded.controller_values) == {o.attr for o in settings.CONTROLLER_OPTIONS}
    assert loaded.values == {o.attr: o.default for o in settings.OPTIONS} | {
        "slurm_url": "http://slurmrestd:6820"
    }
    assert len({o.name for o in settings.OPTIONS}) == len(settings.OPTIONS), "an option declared twice"


def test_mypy_sees_a_misspelt_option(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from syncer.app.settings import Settings\n\n\n"
        "def interval(settings: Settings) -> float:\n"
        "    return settings.slurm_pol_interval\n"
    )
    out, _err, status = mypy_api.run(["--strict", "--no-incremental", str(probe)])
    assert status == 1 and 'has no attribute "slurm_pol_interval"' in out, out


def test_service_defaults_come_from_the_option_table():
    from syncer.app.service import ServiceConfig

    config = ServiceConfig()
    assert (config.slurm_poll_interval_s, config.slurm_stale_after_s, config.workers) == (
        settings.default("slurm_poll_interval"),
        settings.default("slurm_stale_after"),
        settings.default("workers"),
    )
    assert (config.listen_host, config.listen_port) == settings.default("listen_address")
    assert config.options("sync").ready_grace_s == settings.default("ready_grace_period")


def test_binding_labels_pod_selector_and_cordon_reason_annotations():
    default = load(parse("--slurm-url", "http://s:1"), {})
    assert default.node_name_label == (
        "slurm-syncer.dev/node-name",
        "nodeset.slinky.slurm.net/pod-hostname",
    )
    assert default.value("cordon_reason_annotation") == (
        "slurm-syncer.dev/cordon-reason",
        "nodeset.slinky.slurm.net/node-cordon-reason",
    )
    assert default.value("cordon_reason_label") == (
        "k8saas.nvidia.com/cordon-reason",
    )  # NVSentinel's default prefix
    assert default.pod_selector == ""
    labels = load(
        parse("--slurm-url", "http://s:1", "--cordon-reason-label", "nvsentinel.example/cordon-reason"), {}
    )
    assert labels.value("cordon_reason_label") == ("nvsentinel.example/cordon-reason",)
    chosen = load(
        parse("--slurm-url", "http://s:1", "--node-name-label", "example.com/slurm-node"),
        {"SLURM_SYNCER_POD_SELECTOR": "app.kubernetes.io/name=slurmd"},
    )
    assert chosen.node_name_label == ("example.com/slurm-node",)
    assert chosen.pod_selector == "app.kubernetes.io/name=slurmd"
    with pytest.raises(SettingsError, match="bad value 'not a key!' for --node-name-label: expected a label"):
        load(parse("--slurm-url", "http://s:1", "--node-name-label", "not a key!"), {})


def test_slurm_metrics_hint_options():
    base = ("--slurm-url", "http://slurmrestd:6820")
    default = load(parse(*base), {})
    assert (default.slurm_metrics_url, default.slurm_metrics_port) == ("auto", 6817)  # found by itself
    assert (default.slurm_metrics_floor, default.slurm_metrics_duty) == (30.0, 1.0)
    assert default.slurm_metrics_lists_in_flight == 2 and default.slurm_metrics_interval == 0.25
    for off in ("", "off", "OFF"):
        assert load(parse(*base), {"SLURM_SYNCER_SLURM_METRICS_URL": off}).slurm_metrics_url == "off"
    auto = load(parse(*base, "--slurm-metrics-url", "auto", "--slurm-metrics-port", "16817"), {})
    assert (auto.slurm_metrics_url, wiring.service_config(auto, {}).slurm_metrics_port) == ("auto", 16817)
    with pytest.raises(SettingsError, match="slurm-metrics-url: expected auto, off, or http://"):
        load(parse(*base, "--slurm-metrics-url", "slurmctld:6817"), {})
    with pytest.raises(SettingsError, match="slurm-metrics-port"):
        load(parse(*base, "--slurm-metrics-port", "70000"), {})
    on = load(
        parse(*base, "--slurm-metrics-url", "http://slurmctld:6817", "--slurm-metrics-floor", "1m",
              "--slurm-metrics-duty", "0.5", "--slurm-metrics-lists-in-flight", "1",
              "--slurm-metrics-interval", "500ms"),
        {},
    )  # fmt: skip
    assert (on.slurm_metrics_url, on.slurm_metrics_floor, on.slurm_metrics_duty) == (
        "http://slurmctld:6817",
        60.0,
        0.5,
    )
    config = wiring.service_config(on, {})
    assert (config.slurm_metrics_url, config.slurm_metrics_floor_s, config.slurm_metrics_duty) == (
        "http://slurmctld:6817",
        60.0,
        0.5,
    )
    assert config.slurm_metrics_lists_in_flight == 1 and config.slurm_metrics_interval_s == 0.5
    with pytest.raises(SettingsError, match="slurm-metrics-duty"):
        load(parse(*base, "--slurm-metrics-duty", "0"), {})
    with pytest.raises(SettingsError, match="slurm-metrics-lists-in-flight"):
        load(parse(*base, "--slurm-metrics-lists-in-flight", "0"), {})
    with pytest.raises(SettingsError, match="slurm-metrics-interval"):
        load(parse(*base, "--slurm-metrics-interval", "0s"), {})
    with pytest.raises(SettingsError, match="slurm-metrics-url"):
        load(parse(*base, "--slurm-metrics-url", "http://slurmctld:6817/metrics/nodes"), {})


def test_node_attribute_options():
    base = ("--slurm-url", "http://slurmrestd:6820")
    off = wiring.service_config(load(parse(*base), {}), {}).options("attributes")
    assert not off.enabled and off.feature_prefix == "k8s." and off.topology.tree_labels[-1].endswith("/leaf")
    env = {
        "SLURM_SYNCER_FEATURE_LABEL": "nvidia.com/gpu.product,node.kubernetes.io/instance-type=itype",
        "SLURM_SYNCER_TOPOLOGY_BLOCK_NAME": "nvl",
        "SLURM_SYNCER_TOPOLOGY_BLOCK_LABEL": "ds.coreweave.com/nvlink.domain",
        "SLURM_SYNCER_TOPOLOGY_TREE_NAME": "default",
        "SLURM_SYNCER_TOPOLOGY_TREE_LABEL": "topology.nebius.com/tier-2,topology.nebius.com/tier-1",
    }
    on = wiring.service_config(load(parse(*base, "--feature-prefix", "kube."), env), {}).options("attributes")
    assert [(f.key, f.name) for f in on.feature_labels] == [
        ("nvidia.com/gpu.product", "gpu.product"),
        ("node.kubernetes.io/instance-type", "itype"),
    ]
    assert on.feature_prefix == "kube." and on.enabled
    assert (on.topology.block_name, on.topology.block_label) == ("nvl", "ds.coreweave.com/nvlink.domain")
    assert on.topology.tree_labels == ("topology.nebius.com/tier-2", "topology.nebius.com/tier-1")
    with pytest.raises(SettingsError, match="SLURM_SYNCER_FEATURE_LABEL"):
        load(parse(*base), {"SLURM_SYNCER_FEATURE_LABEL": "example.com/x=a=b"})
    with pytest.raises(SettingsError, match="--feature-prefix"):
        load(parse(*base, "--feature-prefix", ""), {})


def test_a_list_default_is_documented_as_the_environment_takes_it():
    """A reader copies the default into SLURM_SYNCER_...: a comma list, not a Python tuple."""
    documented = markdown()
    for option in settings.OPTIONS:
        if option.kind == "list" and option.default and not option.shown_default:
            shown = ",".join(option.default)
            assert f"| `{shown}` |" in documented, option.name
            loaded = load(parse("--slurm-url", "http://s:1"), {option.env: shown})
            assert loaded.values[option.attr] == option.default, option.name
