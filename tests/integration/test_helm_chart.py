"""The Helm chart deploy/helm/slurm-syncer and the plain manifests rendered from it.

Rendered and linted by the real Helm engine (Helm's Go SDK in a shared library: PyPI helm-python-sdk,
offline), every object checked against the Kubernetes OpenAPI schemas (PyPI kubernetes-validate, strict:
unknown fields fail), applied with the real kubectl to the API emulator, and its settings loaded the way
`slurm-syncer run` loads them."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import shutil
import subprocess
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import helm_python as helm
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from syncer.app import permissions
from syncer.app import settings as settings_mod
from syncer.app.cli import build_parser
from syncer.app.dashboards import RUNBOOKS, SEL, board_for_release, rules_for_release
from syncer.testing.kubeapi import KubeApiEmulator
from tests.fixtures.kube import Kubectl

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "slurm-syncer"
MANIFESTS = ROOT / "deploy" / "manifests" / "slurm-syncer.yaml"
RENDER_SCRIPT = ROOT / "scripts" / "render-manifests"
NAMESPACE = "slurm-syncer"

# options the chart sets from its own keys (slurm.*, bindings, leaderElection, port) or leaves alone
# (kubeconfig: the in-cluster ServiceAccount); every other option is a key of `config:`
CHART_OWNED = {
    "slurm-url",
    "slurm-token-file",
    "slurm-jwt-key-file",
    "slurm-jwt-user",
    "slurm-api-version",
    "bind-by-node-name",
    "leader-election",
    "lease-name",
    "cluster-name",  # clusterName: the release name by default
    "listen-address",
    "kubeconfig",
    "scheduler-name",
    "scheduler-namespaces",
    "scheduler-placeholder",
}
MONITORING_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}  # monitoring.coreos.com/v1 CRDs

COMBINATIONS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "jwt-key": {"slurm": {"auth": {"type": "jwtKey", "secretName": "slurm-jwt-key"}}},
    "network-policy": {"networkPolicy": {"enabled": True}},
    "monitors-off": {
        "monitoring": {
            "serviceMonitor": {"enabled": False},
            "podMonitor": {"enabled": False},
            "prometheusRule": {"enabled": False},
            "dashboards": {"enabled": False},
        }
    },
    "node-name-bindings": {"bindings": {"mode": "nodeName"}},
    "hybrid": {
        "slurm": {
            "url": "https://slurmrestd.hpc.example.org",
            "apiVersion": "v0.0.42",
            "user": "syncer",
            "auth": {"type": "jwtKey", "secretName": "slurm-jwt", "secretKey": "key"},
        },
        "bindings": {"mode": "nodeName"},
        "image": {"repository": "registry.example.org/slurm-syncer", "tag": "0.1.0-rc1"},
        "config": {
            "namespace": "slurm",
            "drain-on-condition": ["GpuUnhealthy=True", "NetworkUnavailable=True"],
            "cordon-on-slurm-drain": True,
            "kube-qps": 20.5,
            "workers": 16,
            "ready-grace-period": "2m",
            "dry-run": True,
            "slurm-poll-interval": None,
            "nodeset-enabled": False,
        },
        "extraArgs": ["--ready-grace-period=90s"],
        "extraEnv": [{"name": "SSL_CERT_FILE", "value": "/etc/slurm-syncer/ca/ca.crt"}],
        "extraVolumes": [{"name": "ca", "configMap": {"name": "slurmrestd-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/slurm-syncer/ca", "readOnly": True}],
        "monitoring": {"serviceMonitor": {"enabled": False}, "podMonitor": {"enabled": True}},
        "networkPolicy": {
            "enabled": True,
            "slurmrestd": {"to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}]},
            "apiServer": {"to": [{"ipBlock": {"cidr": "198.51.100.0/24"}}]},
        },
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
        "podAnnotations": {"example.org/team": "hpc"},
    },
    "scheduler": {"scheduler": {"enabled": True, "namespaces": ["team-a", "team-b"], "placeholder": True}},
    "auth-none-single": {
        "slurm": {"auth": {"type": "none"}},
        "replicas": 1,
        "leaderElection": {"enabled": False},
    },
}


@functools.cache
def render_script() -> ModuleType:
    return load_script(RENDER_SCRIPT)


@functools.cache
def chart_tables() -> ModuleType:
    return load_script(ROOT / "scripts" / "chart-tables")


def load_script(path: Path) -> ModuleType:
    name = path.name.replace("-", "_")
    loader = SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@functools.cache
def _render(values_json: str, chart_dir: str) -> tuple[tuple[str, str], ...]:
    values = json.loads(values_json)
    return tuple(render_script().documents(values, "slurm-syncer", NAMESPACE, Path(chart_dir)))


def render(values: dict[str, Any] | None = None, chart_dir: Path = CHART) -> list[dict[str, Any]]:
    """Every object of the chart (CRDs included), parsed; a fresh copy each call."""
    docs = _render(json.dumps(values), str(chart_dir))
    return [yaml.safe_load(text) for _, text in docs]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def kinds(objects: list[dict[str, Any]]) -> list[str]:
    return [o["kind"] for o in objects]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def environment(main: dict[str, Any], namespace: str = NAMESPACE) -> dict[str, str]:
    """The container's environment as it runs, its one fieldRef (the pod's namespace) as `namespace`."""
    environ: dict[str, str] = {}
    for var in main["env"]:
        if "valueFrom" in var:
            assert var["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
            environ[var["name"]] = namespace
        else:
            environ[var["name"]] = var["value"]
    assert len(environ) == len(main["env"]), "an environment variable is set twice"
    return environ


def load_settings(objects: list[dict[str, Any]]) -> settings_mod.Settings:
    """The Deployment's environment and arguments, loaded as `slurm-syncer run` loads them."""
    main = container(objects)
    assert "command" not in main, "the image's entrypoint `slurm-syncer run` must stay"
    args = build_parser().parse_args(["run", *main.get("args", [])])
    return settings_mod.load(args, environment(main))


# --- the chart's files ---------------------------------------------------------------------------


def test_the_chart_crd_is_the_deploy_crd_behind_a_value():
    chart_crd = CHART / "files" / "crds" / "nodesets.slurm-syncer.dev.yaml"
    deploy_crd = ROOT / "deploy" / "crds" / "nodesets.slurm-syncer.dev.yaml"
    assert chart_crd.read_bytes() == deploy_crd.read_bytes()
    assert not (CHART / "crds").exists()  # a template, so that a value can leave it out
    with helm.Chart.load(CHART) as chart:
        assert chart.crds == []
    crd = one(render(), "CustomResourceDefinition")
    assert crd["metadata"].pop("annotations") == {
        "helm.sh/resource-policy": "keep"
    }  # NodeSets survive uninstall
    assert crd["metadata"].pop("labels")["app.kubernetes.io/instance"] == "slurm-syncer"
    assert crd == yaml.safe_load(deploy_crd.read_text())  # the same CRD, whatever YAML round trip
    assert "CustomResourceDefinition" not in kinds(render({"crds": {"nodeSet": False}}))


def test_the_slurmpartition_crd_comes_with_its_value_only_and_is_the_package_crd():
    name = "slurmpartitions.slurm-syncer.dev.yaml"
    package = ROOT / "syncer" / "model" / "crds" / name
    assert (CHART / "files" / "crds" / name).read_bytes() == package.read_bytes()

    def crds(values: dict[str, Any]) -> list[dict[str, Any]]:
        return [o for o in render(values) if o["metadata"]["name"] == "slurmpartitions.slurm-syncer.dev"]

    assert crds({}) == [], "off by default, as --partitions-enabled is"
    [crd] = crds({"crds": {"slurmPartition": True}})
    assert crd["spec"] == yaml.safe_load(package.read_text())["spec"]
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_chart_copies_of_rules_and_dashboards_equal_the_originals():
    rules = ROOT / "deploy" / "prometheus" / "rules.yaml"
    assert rules.exists(), "deploy/prometheus/rules.yaml is gone: remove the chart's copy too"
    assert (CHART / "files" / "prometheus" / "rules.yaml").read_bytes() == rules.read_bytes()
    originals = sorted((ROOT / "deploy" / "grafana").glob("*.json"))
    copies = sorted((CHART / "files" / "grafana").glob("*.json"))
    assert originals and [p.name for p in copies] == [p.name for p in originals]
    for original, chart_copy in zip(originals, copies, strict=True):
        assert chart_copy.read_bytes() == original.read_bytes(), f"copy {original} into the chart"


def test_chart_version_and_image_follow_the_package():
    from syncer import __version__

    metadata = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert metadata["appVersion"] == __version__
    assert container(render())["image"] == f"slurm-syncer:{__version__}"
    digest = "sha256:" + "0123456789abcdef" * 4
    pinned = render({"image": {"repository": "registry.example/slurm-syncer", "digest": digest}})
    assert container(pinned)["image"] == f"registry.example/slurm-syncer@{digest}"  # the tag is ignored
    with pytest.raises(helm.HelmError, match="image/digest"):  # a tag in the digest's place
        render({"image": {"digest": "v1.2"}})


# --- lint and schemas ------------------------------------------------------------------------------


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_helm_lint_is_clean(combination: str):
    report = helm.lint(
        CHART, COMBINATIONS[combination], strict=True, namespace=NAMESPACE, kube_version="v1.25.0"
    )
    assert report["errors"] == []
    # severity 1 is "info" (an icon is recommended); nothing at warning (2) or error (3)
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_every_object_is_valid_for_kubernetes(combination: str):
    values = COMBINATIONS[combination]
    objects = render(values)
    without_schema = set()
    for version in ("1.25.0", kubernetes_validate.latest_version()):
        for obj in objects:
            if version == "1.25.0" and obj["kind"] == "PodDisruptionBudget":
                # rendered for 1.27+ API servers only (.Capabilities.KubeVersion); this render: the newest
                obj = copy.deepcopy(obj)
                obj["spec"].pop("unhealthyPodEvictionPolicy")
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                without_schema.add(obj["kind"])
            except kubernetes_validate.ValidationError as exc:
                raise AssertionError(
                    f"{obj['kind']} {obj['metadata']['name']} ({version}): {exc.message}"
                ) from None
    # the Prometheus Operator's kinds are CRDs kubernetes-validate has no schema for; nothing else
    assert without_schema == MONITORING_KINDS & set(kinds(objects))


def test_the_strict_schemas_catch_a_bad_object():
    deployment = copy.deepcopy(one(render(), "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["paht"] = "/healthz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.30.0", strict=True)


def test_bad_values_are_refused_with_a_reason():
    with helm.Chart.load(CHART) as chart:
        for values, expected in (
            ({"config": {"dry-runn": True}}, "additional properties 'dry-runn' not allowed"),
            ({"config": {"workers": 0}}, "/config/workers"),
            ({"config": {"drain-on-condition": ["GpuUnhealthy"]}}, "/config/drain-on-condition"),
            ({"config": {"slurm-url": "http://x:1"}}, "additional properties 'slurm-url' not allowed"),
            ({"bindings": {"mode": "hostname"}}, "/bindings/mode"),
            ({"slurm": {"auth": {"type": "password"}}}, "/slurm/auth/type"),
            ({"slurm": {"url": "slurmrestd:6820"}}, "/slurm/url"),
            ({"leaderElection": {"enabled": False}}, "replicas > 1 needs leaderElection.enabled"),
            ({"leaderElection": {"leaseName": "GPU_cluster"}}, "/leaderElection/leaseName"),
            ({"clusterName": "GPU_cluster"}, "/clusterName"),
            ({"clusterName": "x" * 54}, "/clusterName"),
            ({"config": {"adopt-unlabelled": "yes"}}, "/config/adopt-unlabelled"),
            ({"monitoring": {"podMonitor": {"enabled": True}}}, "not both"),
            ({"config": {"pod-selector": ""}}, "config.pod-selector is empty: every pod of the cluster"),
            ({"scheduler": {"enabled": True}}, "scheduler.enabled needs scheduler.namespaces"),
            ({"scheduler": {"name": "Slurm Syncer"}}, "/scheduler/name"),
            ({"scheduler": {"namespaces": ["a", "a"]}}, "/scheduler/namespaces"),
        ):
            with pytest.raises(helm.HelmError) as caught:
                chart.render(values, name="slurm-syncer", namespace=NAMESPACE)
            assert expected in str(caught.value), (values, str(caught.value))


# --- what the objects say ----------------------------------------------------------------------------


def test_the_deployment_runs_two_hardened_replicas_with_probes():
    objects = render()
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    main = container(objects)
    assert deployment["spec"]["replicas"] == 2
    budget = one(objects, "PodDisruptionBudget")["spec"]  # not-ready replicas never block a drain
    assert budget["maxUnavailable"] == 1 and budget["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    # no arguments: everything is in the environment, which `kubectl exec ... slurm-syncer check` shares
    assert "args" not in main
    env = {var["name"]: var.get("value") for var in main["env"]}
    assert env["SLURM_SYNCER_SLURM_TOKEN_FILE"] == "/var/run/secrets/slurm-syncer/token"
    assert main["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert main["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert set(main["resources"]) == {"requests", "limits"}
    resources = main["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and "cpu" in resources["limits"]
    assert (
        resources["requests"]["memory"] == resources["limits"]["memory"] == "256Mi"
    )  # as measured, no overcommit
    security = main["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 65532
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    # the token file is in a directory mount of the Secret (a subPath mount would never see a rotation)
    mounts = {m["name"]: m for m in main["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "subPath" not in mounts["slurm-auth"] and mounts["slurm-auth"]["readOnly"] is True
    assert volumes["slurm-auth"]["secret"]["secretName"] == "slurm-syncer-slurm-auth"
    assert volumes["slurm-auth"]["secret"]["items"] == [{"key": "token", "path": "token"}]
    assert f"{mounts['slurm-auth']['mountPath']}/token" == env["SLURM_SYNCER_SLURM_TOKEN_FILE"]
    assert mounts["tmp"]["mountPath"] == "/tmp" and "emptyDir" in volumes["tmp"]
    # the Service and the PodDisruptionBudget select the Deployment's pods
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = one(objects, "Service")
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}
    ]
    assert service["spec"]["selector"].items() <= labels.items()
    assert one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


# value sets whose RBAC differs: every profile of the README's table and then some
RBAC_PROFILES: dict[str, dict[str, Any]] = {
    **{name: values for name, (_, values) in chart_tables().PROFILES.items()},
    "namespaced, lease there too": {"config": {"namespace": NAMESPACE}},
    "lease elsewhere": {"config": {"lease-namespace": "kube-leases"}, "leaderElection": {"leaseName": "gpu"}},
    "kueue": {"config": {"topology-kueue": "gpu-fabric"}},
    "partitions": {"config": {"partitions-enabled": True}},
    "no adoption of unlabelled objects": {"config": {"adopt-unlabelled": False}},
    "partitions, namespaced": {"config": {"partitions-enabled": True, "namespace": NAMESPACE}},
    "scheduler, namespaced": {
        "scheduler": {"enabled": True, "namespaces": ["team-a"]},
        "config": {"namespace": NAMESPACE},
    },
    "scheduler off, namespaces listed": {"scheduler": {"enabled": False, "namespaces": ["team-a"]}},
    "no leader election": COMBINATIONS["auth-none-single"] or {},
    "hybrid": COMBINATIONS["hybrid"] or {},
}


@pytest.mark.parametrize("profile", RBAC_PROFILES)
def test_the_rendered_rbac_grants_exactly_what_the_configuration_needs(profile: str):
    """The chart's Roles and ClusterRoles equal permissions.needed for the settings the Deployment gives
    the syncer: nothing more (a superfluous right fails), nothing less."""
    objects = render(RBAC_PROFILES[profile])
    settings = load_settings(objects)
    account = one(objects, "ServiceAccount")["metadata"]
    user = f"system:serviceaccount:{NAMESPACE}:{account['name']}"
    rbac = [o for o in objects if o["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]
    granted = permissions.granted(rbac, user)
    assert len(granted) == len(set(granted))
    needed = permissions.needed(settings, settings.lease_namespace_resolved({"POD_NAMESPACE": NAMESPACE}))
    print(f"\n{profile}:\n  " + "\n  ".join(map(str, granted)))
    assert granted == needed, {
        "superfluous": [str(r) for r in granted if r not in needed],
        "missing": [str(r) for r in needed if r not in granted],
    }
    for right in granted:
        assert right.why, right
    for role in (o for o in rbac if o["kind"] in ("Role", "ClusterRole")):
        for rule in role["rules"]:
            assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, "no nonResourceURLs"
            assert "*" not in json.dumps(rule), "no wildcards"
    if settings.leader_election:
        lease = next(r for r in granted if (r.verb, r.resource) == ("update", "leases"))
        assert lease.name == settings.lease_name and lease.namespace == settings.lease_namespace_resolved(
            {"POD_NAMESPACE": NAMESPACE}
        )


def test_the_lease_is_named_after_the_release():
    loaded = load_settings(render())
    assert loaded.lease_name == one(render(), "Deployment")["metadata"]["name"] == "slurm-syncer"
    docs = render_script().documents({}, "gpu-a", NAMESPACE)
    names = {
        yaml.safe_load(text)["metadata"]["name"] for _, text in docs if yaml.safe_load(text)["kind"] == "Role"
    }
    assert names == {"gpu-a-slurm-syncer-lease"}
    env = {e["name"]: e.get("value") for e in container([yaml.safe_load(t) for _, t in docs])["env"]}
    assert env["SLURM_SYNCER_LEASE_NAME"] == "gpu-a-slurm-syncer"
    assert load_settings(render({"leaderElection": {"leaseName": "gpu"}})).lease_name == "gpu"


def test_the_cluster_identity_is_the_release_name_unless_set_and_notes_show_it():
    """Each release acts only on the objects labelled with its identity (docs/operations.md, several
    releases): two releases are apart by default, as their Leases are."""
    loaded = load_settings(render())
    assert loaded.cluster_name_resolved() == "slurm-syncer" and loaded.sources["cluster_name"] == "env"
    assert loaded.adopt_unlabelled and loaded.sources["adopt_unlabelled"] == "env"
    docs = [yaml.safe_load(t) for _, t in render_script().documents({}, "gpu-a", NAMESPACE)]
    assert environment(container(docs))["SLURM_SYNCER_CLUSTER_NAME"] == "gpu-a"
    named = load_settings(render({"clusterName": "hpc1", "config": {"adopt-unlabelled": False}}))
    assert named.cluster_name_resolved() == "hpc1" and not named.adopt_unlabelled
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render({"clusterName": "hpc1"}, name="gpu-a", namespace=NAMESPACE)
    [notes] = [text for source, text in rendered.items() if source.endswith("NOTES.txt")]
    assert "Its cluster identity is hpc1" in notes and "-l slurm-syncer.dev/cluster=hpc1" in notes


def test_options_that_decide_rbac_are_refused_in_extra_args():
    with helm.Chart.load(CHART) as chart:
        for flag, value in (
            ("--namespace=slurm", "config.namespace"),
            ("--no-nodeset-enabled", "nodeset-enabled"),
            ("--scheduler-name=x", "scheduler.*"),
            ("--scheduler-namespaces=a", "scheduler.*"),
        ):
            with pytest.raises(helm.HelmError) as caught:
                chart.render({"extraArgs": [flag]}, name="slurm-syncer", namespace=NAMESPACE)
            assert "decides the chart's RBAC" in str(caught.value) and value in str(caught.value)


def test_the_chart_readme_rbac_and_network_tables_are_fresh():
    assert chart_tables().main(["--check"]) == 0, "run scripts/chart-tables"
    readme = (CHART / "README.md").read_text()
    assert "| create | leases.coordination.k8s.io |" in readme
    slurmctld = next(line for line in readme.splitlines() if "| `slurmctld.to` |" in line)
    # auto: config.slurm-metrics-port; a URL: its port; the ports listed; off: no rule
    assert "| 6817/TCP | 6900/TCP | 6817/TCP, 6818/TCP | - |" in slurmctld


def test_a_stale_network_table_is_rewritten_from_the_templates():
    readme = (CHART / "README.md").read_text()
    stale = readme.replace("| 6820/TCP |", "| 6821/TCP |")
    assert stale != readme
    assert chart_tables().rewritten(stale) == readme


# The chart's own defaults: never list and watch every pod of a cluster (issue 37).
CHART_DEFAULTS = {"pod-selector": "slurm-syncer.dev/node-name"}


def test_values_config_covers_every_option_of_slurm_syncer_run():
    names = {option.name for option in settings_mod.OPTIONS}
    config = yaml.safe_load((CHART / "values.yaml").read_text())["config"]
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(config) | CHART_OWNED == names and not set(config) & CHART_OWNED
    assert set(schema["properties"]["config"]["properties"]) == set(config)
    assert schema["properties"]["config"]["additionalProperties"] is False
    # the chart's defaults are the syncer's, but where the chart narrows on purpose
    loaded = load_settings(render())
    for option in settings_mod.OPTIONS:
        if option.name in config:
            assert loaded.sources[option.attr] == "env", option.name
            expected = CHART_DEFAULTS.get(option.name, option.default)
            assert loaded.values[option.attr] == expected, option.name


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_the_deployment_settings_load_like_slurm_syncer_run(combination: str):
    values = COMBINATIONS[combination]
    loaded = load_settings(render(values))
    unset = {name for name, source in loaded.sources.items() if source == "default"}
    chart_leaves_alone = {"kubeconfig"} | {"slurm_jwt_key_file", "slurm_token_file"}
    assert unset <= chart_leaves_alone | {"slurm_poll_interval"}  # hybrid sets it to null
    assert loaded.lease_namespace_resolved({"POD_NAMESPACE": NAMESPACE}) == NAMESPACE
    assert loaded.listen_address == ("0.0.0.0", 8080)
    auth = (values or {}).get("slurm", {}).get("auth", {}).get("type", "token")
    # the chart's settings are all in the environment (`kubectl exec` commands see them); extraArgs only
    # add flags
    flags = {name for name, source in loaded.sources.items() if source == "flag"}
    assert flags == ({"ready_grace_period"} if combination == "hybrid" else set()), flags
    if auth == "token":
        assert (loaded.slurm_token_file, loaded.slurm_jwt_key_file) == (
            "/var/run/secrets/slurm-syncer/token",
            "",
        )
    elif auth == "jwtKey":
        key = (values or {})["slurm"]["auth"].get("secretKey", "jwt_hs256.key")
        assert (loaded.slurm_token_file, loaded.slurm_jwt_key_file) == (
            "",
            f"/var/run/secrets/slurm-syncer/{key}",
        )
    else:
        assert (loaded.slurm_token_file, loaded.slurm_jwt_key_file) == ("", "")
    mode = (values or {}).get("bindings", {}).get("mode", "podLabel")
    assert loaded.bind_by_node_name is (mode == "nodeName")
    assert loaded.leader_election is ((values or {}).get("leaderElection", {}).get("enabled", True))


def test_hybrid_values_reach_the_syncer():
    objects = render(COMBINATIONS["hybrid"])
    loaded = load_settings(objects)
    assert loaded.slurm_url == "https://slurmrestd.hpc.example.org"
    assert (loaded.slurm_api_version, loaded.slurm_jwt_user) == ("v0.0.42", "syncer")
    assert loaded.value("drain_on_condition") == (("GpuUnhealthy", "True"), ("NetworkUnavailable", "True"))
    assert loaded.value("cordon_on_slurm_drain") is True and loaded.dry_run is True
    assert (loaded.kube_qps, loaded.workers, loaded.value("ready_grace_period")) == (20.5, 16, 90.0)
    assert loaded.sources["ready_grace_period"] == "flag"  # extraArgs win over config
    assert loaded.namespace == "slurm" and loaded.value("nodeset_enabled") is False
    assert loaded.sources["slurm_poll_interval"] == "default"  # null: left to the syncer
    main = container(objects)
    pod = one(objects, "Deployment")["spec"]["template"]
    assert main["image"] == "registry.example.org/slurm-syncer:0.1.0-rc1"
    assert {"name": "SSL_CERT_FILE", "value": "/etc/slurm-syncer/ca/ca.crt"} in main["env"]
    assert {"name": "ca", "mountPath": "/etc/slurm-syncer/ca", "readOnly": True} in main["volumeMounts"]
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["spec"]["tolerations"][0]["key"] == "dedicated"
    assert pod["metadata"]["annotations"] == {"example.org/team": "hpc"}
    secret = next(v for v in pod["spec"]["volumes"] if v["name"] == "slurm-auth")["secret"]
    assert secret["secretName"] == "slurm-jwt" and secret["items"] == [{"key": "key", "path": "key"}]


def test_the_scheduler_is_off_and_granted_nothing_unless_enabled():
    """Off (the default, or namespaces listed but not enabled): an empty name, so the syncer runs no
    scheduler, and no rule of the chart names a scheduler's right. On: its name and namespaces reach the
    syncer, a Role and RoleBinding in each namespace, the Namespaces readable by name only."""
    for values in (None, {"scheduler": {"namespaces": ["team-a"], "placeholder": True}}):
        objects = render(values)
        loaded = load_settings(objects)
        assert loaded.value("scheduler_name") == "" and loaded.value("scheduler_placeholder") is False
        rules = [r for o in objects if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]]
        text = json.dumps(rules)
        assert "pods/binding" not in text and "namespaces" not in text and "batch" not in text
        assert not [o for o in objects if o["metadata"]["name"].endswith("-scheduler")]
    objects = render(COMBINATIONS["scheduler"])
    loaded = load_settings(objects)
    assert loaded.value("scheduler_name") == "slurm-syncer"
    assert loaded.controller_options("scheduler").namespaces == ("team-a", "team-b")
    assert loaded.value("scheduler_placeholder") is True
    roles = {
        (o["kind"], o["metadata"]["namespace"])
        for o in objects
        if o["metadata"]["name"] == "slurm-syncer-scheduler"
    }
    assert roles == {(kind, ns) for kind in ("Role", "RoleBinding") for ns in ("team-a", "team-b")}
    cluster = one(objects, "ClusterRole")["rules"]
    assert {
        "apiGroups": [""],
        "resources": ["namespaces"],
        "resourceNames": ["team-a", "team-b"],
        "verbs": ["get"],
    } in cluster
    named = load_settings(render({"scheduler": {"enabled": True, "name": "gpu-pool", "namespaces": ["x"]}}))
    assert named.value("scheduler_name") == "gpu-pool"


def test_the_log_level_and_format_are_chart_values():
    env = {var["name"]: var.get("value") for var in container(render())["env"]}
    assert (env["SLURM_SYNCER_LOG_LEVEL"], env["SLURM_SYNCER_LOG_FORMAT"]) == ("info", "auto")
    main = container(render({"log": {"level": "debug", "format": "json"}}))
    env = {var["name"]: var.get("value") for var in main["env"]}
    assert (env["SLURM_SYNCER_LOG_LEVEL"], env["SLURM_SYNCER_LOG_FORMAT"]) == ("debug", "json")
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmError) as caught:
        chart.render({"log": {"level": "loud"}}, name="slurm-syncer", namespace=NAMESPACE)
    assert "/log/level" in str(caught.value)


def test_auth_none_mounts_no_secret_and_one_replica_has_no_disruption_budget():
    objects = render(COMBINATIONS["auth-none-single"])
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]
    assert "args" not in container(objects)
    assert "PodDisruptionBudget" not in kinds(objects)


# --- monitoring and network policy ----------------------------------------------------------------------


def test_monitoring_objects_follow_the_values():
    objects = render()
    assert "ServiceMonitor" in kinds(objects) and "PodMonitor" not in kinds(objects)
    monitor = one(objects, "ServiceMonitor")
    service = one(objects, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == "http"
    # the alerts match job="slurm-syncer"; the job comes from this label of the Service
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "slurm-syncer"
    assert monitor["spec"]["endpoints"][0]["relabelings"] == [
        {"action": "replace", "targetLabel": "release", "replacement": "slurm-syncer"}
    ]
    # every rule narrowed to this release, runbooks under the value's base (as dashboards.py does it)
    runbooks = RUNBOOKS
    scoped = rules_for_release("slurm-syncer", NAMESPACE, "slurm-syncer", runbooks)
    assert one(objects, "PrometheusRule")["spec"] == scoped
    exprs = [rule["expr"] for group in scoped["groups"] for rule in group["rules"]]
    scope = f'job="slurm-syncer", namespace="{NAMESPACE}", release="slurm-syncer"'
    assert all(scope in expr for expr in exprs) and not any(SEL + "}" in e for e in exprs)
    dashboards = [o for o in objects if o["kind"] == "ConfigMap"]
    originals = {
        p.name: board_for_release(json.loads(p.read_text()), NAMESPACE, "slurm-syncer", "slurm-syncer")
        for p in (ROOT / "deploy" / "grafana").glob("*.json")
    }
    assert {name: json.loads(text) for cm in dashboards for name, text in cm["data"].items()} == originals
    assert all(cm["metadata"]["labels"]["grafana_dashboard"] == "1" for cm in dashboards)

    pod_monitored = render(
        {
            "monitoring": {
                "serviceMonitor": {"enabled": False},
                "podMonitor": {"enabled": True, "labels": {"release": "prom"}},
                "dashboards": {"labels": {"dashboards": "slurm"}, "namespace": "grafana"},
            }
        }
    )
    monitor = one(pod_monitored, "PodMonitor")
    labels = one(pod_monitored, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert labels[monitor["spec"]["jobLabel"]] == "slurm-syncer"
    assert "ServiceMonitor" not in kinds(pod_monitored)
    for cm in (o for o in pod_monitored if o["kind"] == "ConfigMap"):
        assert cm["metadata"]["namespace"] == "grafana" and cm["metadata"]["labels"]["dashboards"] == "slurm"

    off = render(COMBINATIONS["monitors-off"])
    assert not MONITORING_KINDS & set(kinds(off)) and "ConfigMap" not in kinds(off)


def test_two_releases_in_one_namespace_do_not_collide_in_grafana_or_prometheus():
    """Kube-prometheus-stack selects the monitors and rules by `release:`; Grafana refuses a second
    dashboard with one UID, or one title in a folder; each release's absent() must be its own."""
    labels = {"release": "kube-prometheus-stack"}
    values = {
        "monitoring": {"labels": labels, "prometheusRule": {"runbookBaseUrl": "https://wiki.example.org/ops"}}
    }
    boards: dict[str, set[str]] = {"uid": set(), "title": set()}
    exprs: dict[str, list[str]] = {}
    for release in ("hpc-a", "hpc-b"):
        docs = render_script().documents(values, release, "slurm", CHART)
        objects = [yaml.safe_load(text) for _, text in docs]
        for kind in ("ServiceMonitor", "PrometheusRule"):
            assert one(objects, kind)["metadata"]["labels"].items() >= labels.items(), kind
        rule = one(objects, "PrometheusRule")["spec"]
        assert rule == rules_for_release("slurm-syncer", "slurm", release, "https://wiki.example.org/ops")
        exprs[release] = [r["expr"] for g in rule["groups"] for r in g["rules"]]
        assert all(
            r["annotations"]["runbook_url"] == f"https://wiki.example.org/ops#{r['alert'].lower()}"
            for g in rule["groups"]
            for r in g["rules"]
        )
        for cm in (o for o in objects if o["kind"] == "ConfigMap"):
            for file, text in cm["data"].items():
                board = json.loads(text)
                original = json.loads((ROOT / "deploy" / "grafana" / file).read_text())
                assert board == board_for_release(original, "slurm", release, f"{release}-slurm-syncer")
                boards["uid"].add(board["uid"])
                boards["title"].add(board["title"])
                assert len(board["uid"]) <= 40  # Grafana's limit
    assert len(boards["uid"]) == len(boards["title"]) == 4
    absent = [e for e in exprs["hpc-a"] if e.startswith("absent(")]
    assert absent == ['absent(up{job="slurm-syncer", namespace="slurm", release="hpc-a"})']
    assert not set(exprs["hpc-a"]) & set(exprs["hpc-b"])


def test_the_chart_renders_without_the_rules_and_dashboard_files(tmp_path: Path):
    chart = tmp_path / "slurm-syncer"
    shutil.copytree(CHART, chart)
    shutil.rmtree(chart / "files" / "prometheus")
    shutil.rmtree(chart / "files" / "grafana")
    objects = render(None, chart)
    assert "PrometheusRule" not in kinds(objects) and "ConfigMap" not in kinds(objects)
    assert "Deployment" in kinds(objects) and "ServiceMonitor" in kinds(objects)


def test_network_policy_opens_only_slurmrestd_the_api_server_dns_and_metrics():
    policy = one(render(COMBINATIONS["network-policy"]), "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [
        {
            "ports": [{"port": "http", "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        }
    ]
    ports = [[(p["port"], p["protocol"]) for p in rule["ports"]] for rule in policy["egress"]]
    assert ports == [
        [(6820, "TCP")], [(443, "TCP"), (6443, "TCP")], [(53, "UDP"), (53, "TCP")], [(6817, "TCP")]
    ]  # fmt: skip
    assert all("to" not in rule for rule in policy["egress"])  # no peers given: any address on those ports

    hybrid = one(render(COMBINATIONS["hybrid"]), "NetworkPolicy")["spec"]
    slurmrestd, api_server = hybrid["egress"][:2]
    assert slurmrestd == {
        "ports": [{"port": 443, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}],
    }
    assert api_server["to"] == [{"ipBlock": {"cidr": "198.51.100.0/24"}}]
    explicit = one(
        render({"networkPolicy": {"enabled": True, "slurmrestd": {"port": 7000}}}), "NetworkPolicy"
    )
    assert explicit["spec"]["egress"][0]["ports"] == [{"port": 7000, "protocol": "TCP"}]
    assert "NetworkPolicy" not in kinds(render())


def test_network_policy_opens_slurmctlds_metrics_port_while_the_hint_is_on():
    def ports(values: dict[str, Any]) -> list[int]:
        spec = one(
            render({**values, "networkPolicy": {"enabled": True, **values.get("networkPolicy", {})}}),
            "NetworkPolicy",
        )["spec"]
        return [p["port"] for rule in spec["egress"][3:] for p in rule["ports"]]

    assert ports({}) == [6817]  # auto, the default: SlurmctldPort as config.slurm-metrics-port says
    assert ports({"config": {"slurm-metrics-port": 7817}}) == [7817]
    assert ports({"config": {"slurm-metrics-url": "http://ctld.example:6900"}}) == [6900]
    assert ports({"config": {"slurm-metrics-url": "off"}}) == []  # no hint, no hole
    peers = [{"ipBlock": {"cidr": "192.0.2.20/31"}}]
    given = {"networkPolicy": {"slurmctld": {"ports": [6817, 6818], "to": peers}}}
    assert ports(given) == [6817, 6818]
    spec = one(render({"networkPolicy": {"enabled": True, **given["networkPolicy"]}}), "NetworkPolicy")[
        "spec"
    ]
    assert spec["egress"][3]["to"] == peers


# --- plain manifests and kubectl -------------------------------------------------------------------------


def test_the_committed_manifests_are_a_fresh_render(tmp_path: Path):
    fresh = tmp_path / "slurm-syncer.yaml"
    done = subprocess.run(
        [sys.executable, str(RENDER_SCRIPT), "--out", str(fresh)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert MANIFESTS.read_text() == fresh.read_text(), "run scripts/render-manifests"
    checked = subprocess.run(
        [sys.executable, str(RENDER_SCRIPT), "--check"], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stderr
    objects = list(yaml.safe_load_all(MANIFESTS.read_text()))
    assert objects[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    assert objects[1:] == render()


async def served_kinds(kubectl: Kubectl) -> set[tuple[str, str]]:
    lines = (await kubectl("api-resources", "--no-headers")).splitlines()
    return {(line.split()[-3], line.split()[-1]) for line in lines if line.strip()}


@pytest.mark.kube
async def test_kubectl_applies_the_manifests_to_the_emulator(tmp_path: Path):
    async with KubeApiEmulator(with_crds=False) as kube:
        kubectl = Kubectl(kube.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
        served = await served_kinds(kubectl)
        objects = list(yaml.safe_load_all(MANIFESTS.read_text()))
        applied = [o for o in objects if (o["apiVersion"], o["kind"]) in served]
        # the emulator, like a cluster without the Prometheus Operator, has no monitoring.coreos.com kinds
        assert {o["kind"] for o in objects} - {o["kind"] for o in applied} == {
            "ServiceMonitor",
            "PrometheusRule",
        }
        stream = "---\n".join(yaml.safe_dump(o) for o in applied)
        created = await kubectl("apply", "-f", "-", stdin=stream)
        assert created.count(" created") == len(applied), created
        assert "unchanged" in await kubectl("apply", "-f", "-", stdin=stream)
        deployment = await kubectl.json("get", "deployment", "slurm-syncer", "-n", NAMESPACE)
        rendered = one(objects, "Deployment")
        assert (
            deployment["spec"]["template"]["spec"]["containers"]
            == rendered["spec"]["template"]["spec"]["containers"]
        )
        role = await kubectl.json("get", "clusterrole", "slurm-syncer")
        assert role["rules"] == one(objects, "ClusterRole")["rules"]
        assert (await kubectl("get", "crd", "nodesets.slurm-syncer.dev", "-o", "name")).strip()

        # an upgrade to other values: JWT key, node-name bindings, a NetworkPolicy
        upgraded = [
            o
            for o in render(
                {
                    "slurm": {"auth": {"type": "jwtKey"}},
                    "bindings": {"mode": "nodeName"},
                    "networkPolicy": {"enabled": True},
                }
            )
            if (o["apiVersion"], o["kind"]) in served
        ]
        out = await kubectl("apply", "-f", "-", stdin="---\n".join(yaml.safe_dump(o) for o in upgraded))
        assert "deployment.apps/slurm-syncer configured" in out
        assert "networkpolicy.networking.k8s.io/slurm-syncer created" in out
        deployment = await kubectl.json("get", "deployment", "slurm-syncer", "-n", NAMESPACE)
        env = {
            v["name"]: v.get("value") for v in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["SLURM_SYNCER_BIND_BY_NODE_NAME"] == "true"
        assert env["SLURM_SYNCER_SLURM_JWT_KEY_FILE"] == "/var/run/secrets/slurm-syncer/jwt_hs256.key"
        assert "SLURM_SYNCER_SLURM_TOKEN_FILE" not in env
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        assert volumes["slurm-auth"]["secret"]["items"] == [{"key": "jwt_hs256.key", "path": "jwt_hs256.key"}]


def test_the_slinky_example_values_render_and_load():
    values = yaml.safe_load((ROOT / "deploy" / "examples" / "values-slinky.yaml").read_text())
    loaded = load_settings(render(values))
    assert loaded.value("nodeset_enabled") is False and loaded.pod_selector == "app.kubernetes.io/name=slurmd"
    assert loaded.node_name_label[-1] == "nodeset.slinky.slurm.net/pod-hostname"
    assert loaded.value("cordon_reason_annotation")[-1] == "nodeset.slinky.slurm.net/node-cordon-reason"
    assert loaded.slurm_url == "http://slurm-restapi.slurm.svc.cluster.local:6820"
    # Slinky's own JWT key Secret (its chart's `<fullname>-auth-jwt`, key `jwt.key`): tokens minted here
    objects = render(values)
    assert (
        loaded.slurm_jwt_key_file == "/var/run/secrets/slurm-syncer/jwt.key" and not loaded.slurm_token_file
    )
    assert loaded.slurm_jwt_user == "slurm"
    (volume,) = [
        v for v in one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"] if "secret" in v
    ]
    assert volume["secret"]["secretName"] == "slurm-auth-jwt"
    assert volume["secret"]["items"] == [{"key": "jwt.key", "path": "jwt.key"}]
    assert (
        volume["secret"]["optional"] is True
    )  # a missing key is the syncer's clear message, not a stuck pod


def test_the_prolog_configmap_is_the_packaged_script_asking_this_release_and_off_by_default():
    from syncer.app.prolog_cmd import SCRIPT, script

    packaged = ROOT / "syncer" / "app" / "files" / SCRIPT
    assert (CHART / "files" / SCRIPT).read_bytes() == packaged.read_bytes(), "copy the script into the chart"
    assert not [o for o in render() if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-prolog")]
    objects = render({"prolog": {"configMap": True, "wait": 120}})
    [cm] = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-prolog")]
    [service] = [o for o in objects if o["kind"] == "Service"]
    url = f"http://{service['metadata']['name']}.{NAMESPACE}.svc:8080"
    assert cm["data"][SCRIPT] == script(url, 120)
    given = render({"prolog": {"configMap": True, "url": "http://syncer.example:9000"}})
    [cm] = [o for o in given if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-prolog")]
    assert cm["data"][SCRIPT] == script("http://syncer.example:9000", 300)
