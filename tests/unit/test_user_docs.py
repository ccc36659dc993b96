"""The user-facing pages (README.md and docs/ but architecture.md and emulator.md, which have tests of their
own) against the code: every metric they name is one the syncer exports, with the labels they give it; every
`slurm-syncer.dev/` key is one the code reads or writes; every repository path is there; every `--flag` and
`SLURM_SYNCER_` variable is one a slurm-syncer command reads (or another tool's, listed); every CamelCase name
(an Event or condition reason, a condition, a kind) is the code's (or Slurm's, Kubernetes', ..., listed).
Elsewhere: the commands they show (test_cli.py), the alerts and their runbook headings
(tests/e2e/test_prometheus.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from syncer.app import settings as settings_mod
from syncer.app.cli import COMMAND_MODULES, TOOL_COMMANDS, build_parser
from syncer.app.metric_families import COUNTERS, GAUGES
from syncer.app.metrics import DIAG_FIELDS

REPO = Path(__file__).resolve().parents[2]
PAGES = [
    "README.md",
    *(f"docs/{p}.md" for p in ("operations", "contract", "nodeset", "partitions", "scheduler", "interop")),
]
# labels every series carries from the scrape (the chart's monitor), not from the syncer
SCRAPE_LABELS = {"job", "namespace", "release", "instance", "le"}
# other tools' flags the pages name: helm, kubectl, podman, sbatch/squeue/scancel, slurmd, cluster-autoscaler
FOREIGN_FLAGS = {
    "--set", "--set-file", "--reuse-values", "--from-file", "--field-selector", "--overwrite", "--build-arg",
    "--isolation", "--constraint", "--partition", "--account", "--qos", "--reservation", "--time", "--nice",
    "--priority", "--segment", "--switches", "--requeue", "--no-requeue", "--states", "--conf",
    "--max-node-provision-time", "--scale-down-unneeded-time",
}  # fmt: skip
# CamelCase names the pages give that are not this project's: Slurm's (slurm.conf keys, job reasons, node
# states), Kubernetes', Slinky's, NVSentinel's, Nebius'
FOREIGN_NAMES = {
    "AllocNodes", "BadConstraints", "CompleteWait", "GresTypes", "JobRequeue", "MinJobAge", "NodeAddr",
    "PartitionDown", "ResumeFailProgram", "ResumeRate", "SchedulerParameters", "SelectType", "SlurmctldHost",
    "SlurmctldParameters", "SuspendRate", "TopologyPlugin", "NotResponding", "ExclusiveUser",
    "PodRequests",
    "GetSlurmNodeName", "NodeSetPowerState", "SlurmNodeState", "SlurmNodeStateDrain",
    "SetLabelKeys",
    "MaintenanceScheduled",
}  # fmt: skip


def texts() -> dict[str, str]:
    return {page: (REPO / page).read_text() for page in PAGES}


def sources() -> list[Path]:
    return sorted(p for p in (REPO / "syncer").rglob("*.py") if "testing" not in p.relative_to(REPO).parts)


def built(path: Path) -> dict[str, set[str] | None]:
    """The metric families a module builds itself (a prometheus_client Histogram/Counter/Gauge, or a
    *MetricFamily at scrape time) -> their label names, where the call gives them as a literal."""
    found: dict[str, set[str] | None] = {}
    for call in ast.walk(ast.parse(path.read_text())):
        if not isinstance(call, ast.Call) or not call.args or not isinstance(call.args[0], ast.Constant):
            continue
        func = ast.unparse(call.func).rsplit(".", 1)[-1]
        if not re.fullmatch(r"(Prom)?(Histogram|Counter|Gauge)|\w*MetricFamily", func):
            continue
        given = [k.value for k in call.keywords if k.arg in ("labelnames", "labels")]
        given += call.args[2:3]
        labels = given[0] if given else None
        if isinstance(labels, (ast.List, ast.Tuple)):
            found[str(call.args[0].value)] = {
                str(e.value) for e in labels.elts if isinstance(e, ast.Constant)
            }
        else:
            found[str(call.args[0].value)] = set() if not given else None
    return found


def families() -> dict[str, set[str] | None]:
    """Every metric family the daemon exports -> its label names (None: not read from the code)."""
    found: dict[str, set[str] | None] = {n: set(f.labels) for n, f in {**GAUGES, **COUNTERS}.items()}
    for path in sources():
        for name, labels in built(path).items():
            found.setdefault(name, labels)
    found |= {f"slurm_scheduler_{suffix}": set() for suffix, _, _ in DIAG_FIELDS.values()}  # slurmctld's diag
    return found


def family_of(name: str, known: dict[str, set[str] | None]) -> str | None:
    if name in known:
        return name
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name.removesuffix(suffix) in known:
            return name.removesuffix(suffix)
    return None


def test_every_metric_the_pages_name_is_exported_with_the_labels_they_give() -> None:
    known = families()
    # a log event's name; a fixture; Slurm's reason (a label value); prefixes of families named in prose
    others = {
        "slurm_metrics_hint_failed",
        "slurm_api_version_changed",
        "slurm_api_version_not_chosen",
        "slurm_sandbox",
        "slurm_reason",
        "slurm_partition_jobs",
        "slurm_scheduler",
    }
    unknown, bad_labels, checked = [], [], 0
    for page, text in texts().items():
        for name, labels in re.findall(r"`(slurm_(?:syncer_)?[a-z_]+[a-z])(\{[^}`]*\})?", text):
            if name in others:
                continue
            family = family_of(name, known)
            if family is None:
                unknown.append(f"{page}: {name}")
                continue
            checked += 1
            given = (
                set(re.findall(r"([a-z_]+)\s*(?:=~|!=|=|,|\}|$)", labels.strip("{}") + "}"))
                if labels
                else set()
            )
            declared = known[family]
            if declared is not None and given - declared - SCRAPE_LABELS:
                bad_labels.append(f"{page}: {name}{labels} (labels {sorted(declared)})")
    assert checked >= 40
    assert unknown == []
    assert bad_labels == []


def test_every_key_the_pages_name_is_the_codes() -> None:
    """An annotation, label, condition or finalizer key under slurm-syncer.dev/ that the pages name appears in
    the code or the chart (a key with a variable part, `partition-<cluster name>`, by its fixed part)."""
    code = "".join(p.read_text() for p in sources())
    code += "".join(p.read_text() for p in (REPO / "deploy/helm").rglob("*") if p.is_file())
    named = {
        k for text in texts().values() for k in re.findall(r"slurm-syncer\.dev/[a-z0-9-]*[a-z0-9]", text)
    }
    assert len(named) >= 20
    unknown = [k for k in named if k not in code and f'"{k.removeprefix("slurm-syncer.dev/")}' not in code]
    assert sorted(unknown) == []


def test_every_repository_path_the_pages_name_exists() -> None:
    missing = []
    for page, text in texts().items():
        for match in re.finditer(
            r"(?<![\w/.-])((?:syncer|tests|deploy|scripts|benchmarks)/[\w./-]*\w)", text
        ):
            path = match.group(1)
            if path == "deploy/slurm-syncer" or text[match.end()] == "*":  # kubectl's deploy/<name>; a glob
                continue
            if not any((REPO / p).exists() for p in (path, f"{path}.py", path.rsplit(".", 1)[0] + ".py")):
                missing.append(f"{page}: {path}")
    assert missing == []


def command_flags() -> set[str]:
    """Every option of every slurm-syncer command (the local tools' too: the pages show them)."""
    found: set[str] = set()
    commands = [name.rsplit(".", 1)[1].removesuffix("_cmd") for name in COMMAND_MODULES]
    for command in [*commands, *TOOL_COMMANDS]:
        parser = build_parser([command])
        sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[index]
        options = [s for p in (parser, sub) for a in p._actions for s in a.option_strings]
        found |= {s for s in options if s.startswith("--")}
    return found


def test_every_flag_and_variable_the_pages_name_is_one_the_syncer_reads() -> None:
    """A `--flag` is an option of a slurm-syncer command (its `--no-` form included) or another tool's
    (FOREIGN_FLAGS); a `SLURM_SYNCER_` variable is an option's, or one the code, tests or scripts read."""
    flags = command_flags()
    envs = {option.env for option in settings_mod.OPTIONS}
    readers = "".join(
        p.read_text()
        for top in ("syncer", "tests", "scripts")
        for p in (REPO / top).rglob("*")
        if p.is_file() and p.suffix in ("", ".py", ".sh") and p.name != "test_user_docs.py"
    )
    unknown, checked = [], 0
    for page, text in texts().items():
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]", text):
            checked += 1
            if flag not in flags and flag not in FOREIGN_FLAGS:
                unknown.append(f"{page}: {flag}")
        for env in re.findall(r"\bSLURM_SYNCER_[A-Z0-9_]*[A-Z0-9]\b", text):
            checked += 1
            if env not in envs and env not in readers:
                unknown.append(f"{page}: {env}")
    assert checked >= 200
    assert unknown == []


def code_words() -> set[str]:
    """The words of the code's string literals (docstrings left out: they may name what once was) and its
    names, and of the chart and the other deploy/ files."""
    words: set[str] = set()
    for path in sources():
        tree = ast.parse(path.read_text())
        docstrings = {
            id(first.value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(first := node.body[0], ast.Expr)
            and isinstance(first.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                words |= set(re.findall(r"[A-Za-z][A-Za-z0-9]*", node.value))
            elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                words.add(node.name)
            elif isinstance(node, ast.Name):
                words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
    for path in (REPO / "deploy").rglob("*"):
        if path.is_file() and path.suffix in ("", ".yaml", ".yml", ".tpl", ".txt", ".json"):
            words |= set(re.findall(r"[A-Za-z][A-Za-z0-9]*", path.read_text()))
    return words


def test_every_camelcase_name_the_pages_give_is_the_codes() -> None:
    """An Event or condition reason, a condition type, a kind or a class the pages name in backticks
    (`SlurmJobSubmitted`, `KeepPartInfoMissing`, `SlurmNodeDrained`) is in the code, or is another
    project's (FOREIGN_NAMES)."""
    words = code_words()
    named = {
        name: page
        for page, text in texts().items()
        for name in re.findall(r"`([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)", text)
    }
    assert len(named) >= 100
    unknown = sorted(f"{page}: {name}" for name, page in named.items() if name not in words | FOREIGN_NAMES)
    assert unknown == []
