"""docs/architecture.md against the code: every claim of the page a test can check without running the
daemon, read from the page itself, so that the page and the code cannot drift apart silently. Elsewhere:
the Manager's task list (test_service_tasks.py), the writes, gate reads, declared watches and run loops of
every controller and the import contracts (test_boundaries.py), the walkthrough "How to add a controller"
(tests/e2e/test_add_a_controller.py)."""

from __future__ import annotations

import ast
import itertools
import re
import tomllib
from pathlib import Path

from syncer.app.metric_families import COUNTERS, GAUGES
from syncer.app.registry import registrations
from syncer.app.settings import OPTIONS
from syncer.controllers import CONTROLLERS
from syncer.runtime.queue import EVENT_LANES, Lane
from tests.unit.test_boundaries import client_writes

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs/architecture.md").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]
WALKTHROUGH = "greeter"  # the example controller's names: written by its e2e test, not in the tree


def bullet(opening: str) -> str:
    """The page's bullet that opens with `opening`, up to the next bullet, heading or blank line."""
    start = PAGE.index(opening)
    ends = [PAGE.find(mark, start + 1) for mark in ("\n- ", "\n#", "\n\n")]
    return PAGE[start : min(end for end in ends if end != -1)]


def ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def sources() -> list[Path]:
    return sorted(p for p in (REPO / "syncer").rglob("*.py") if "testing" not in p.relative_to(REPO).parts)


def test_every_path_the_page_names_exists() -> None:
    """A module, test, document or script named by the page is there (a path from the repository or from
    syncer/, or a file name some module or test carries); a name with * matches something."""
    names = set(re.findall(r"(?<![\w/.-])((?:[\w*-]+/)*[\w*-]+\.(?:py|md|toml|txt))(?!\w)", PAGE))
    names |= set(re.findall(r"(?<![\w/.-])((?:syncer|scripts|benchmarks|tests)/[\w/-]+)(?![\w.*])", PAGE))
    files = [p for p in REPO.rglob("*") if ".venv" not in p.parts and ".git" not in p.parts]
    missing = []
    for name in sorted(n for n in names if WALKTHROUGH not in n):
        if "/" in name:
            found = any(list(base.glob(name)) for base in (REPO, REPO / "syncer"))
        else:
            found = any(p.match(name) for p in files)
        if not found:
            missing.append(name)
    assert missing == []


def test_every_flag_the_page_names_is_an_option_of_run() -> None:
    flags = set(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]+)", PAGE))
    known = {option.name for option in OPTIONS} | {"config"}
    others = {"strict", f"{WALKTHROUGH}-enabled"}  # mypy's; the walkthrough's own controller's
    assert flags - others - known == set()


def controller_class(name: str) -> str:
    """The Controller subclass of syncer/controllers/<name>/controller.py."""
    tree = ast.parse((REPO / f"syncer/controllers/{name}/controller.py").read_text())
    (found,) = [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Controller" for b in node.bases)
    ]
    return found


def test_the_page_names_every_registered_controller_and_only_those() -> None:
    """The registry's folders, each with its REGISTRATION, are the controllers the layers table names (with
    their classes), the ones the introduction names, and the Manager's tasks one per controller."""
    assert [r.name for r in registrations()] == list(CONTROLLERS)
    classes = {name: controller_class(name) for name in CONTROLLERS}
    row = next(line for line in PAGE.splitlines() if line.startswith("| controllers |"))
    assert dict(re.findall(r"`(\w+)` \(`(\w+Controller)`", row)) == classes
    intro = PAGE[: PAGE.index("\n\n", PAGE.index("slurm-syncer is one asyncio process"))]
    assert set(re.findall(r"`(\w+Controller)`", intro)) == set(classes.values())
    manager = bullet("- **Manager**")
    named = manager[manager.index("one per\n  running controller") :]
    assert ticked(named[: named.index(")")]) == list(CONTROLLERS)


def test_the_layers_table_is_the_import_contract() -> None:
    """One row per layer of import-linter's layers contract, in its order, packages of a row side by side;
    the contract exhaustive, and the controllers' independence contract over every controller package."""
    table = PAGE[PAGE.index("| layer | package | job |") :]
    rows = table[: table.index("\n\n")].splitlines()[2:]
    layers = []
    for row in rows:
        packages = ticked(row.split("|")[2])
        packages = [re.sub(r"/<\w+>$", "", p).removeprefix("syncer/").removesuffix(".py") for p in packages]
        layers.append(" | ".join(packages))  # `syncer/controllers/<name>`: the package of every controller
    (layered,) = [c for c in PYPROJECT["importlinter"]["contracts"] if c["type"] == "layers"]
    assert layers == layered["layers"]
    assert layered["exhaustive"] is True
    (independent,) = [c for c in PYPROJECT["importlinter"]["contracts"] if c["type"] == "independence"]
    assert independent["modules"] == ["syncer.controllers.*"]


def test_the_queue_has_the_pages_lanes_in_its_order() -> None:
    """Four lanes, FIRST, URGENT and NORMAL served in that order by the general workers, RESYNC by one worker
    of its own; no controller's watch names RESYNC (it is the periodic resync's alone)."""
    queue = bullet("- **WorkQueue**")
    lanes = re.findall(r"\b([A-Z]{4,})\s+\(", queue)
    assert lanes == [lane.name for lane in Lane]
    assert f"one of {['', 'one', 'two', 'three', 'four', 'five'][len(Lane)]} lanes" in queue
    assert [lane.name for lane in EVENT_LANES] == lanes[:3]
    resync = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted((REPO / "syncer/controllers").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "RESYNC"
    ]
    assert resync == []


def test_the_client_writes_the_page_lists_are_the_clients() -> None:
    """The page's list of client writes (what no controller's package may call) is every write method the
    clients offer, derived from their source, and nothing else."""
    listed = bullet("- **One write path per edge.**")
    listed = listed[listed.index("The client writes are") :]
    public = {name for name in client_writes() if not name.startswith("_")}
    names = [name for name in ticked(listed) if not name.endswith("Client")]
    assert sorted(names) == sorted(public)
    assert len(names) == len(set(names))


def pure_cores() -> list[str]:
    """The modules the page's "A pure core" names, each as a path (a bare name is in the folder of the path
    named before it); `controller.py` is the one that runs them, not one of them."""
    cores, folder = [], ""
    for name in ticked(bullet("- **A pure core.**")):
        if name.startswith("syncer/") and name.endswith(".py"):
            folder = str(Path(name).parent)
            cores.append(name)
        elif name.endswith(".py") and "/" not in name and name != "controller.py":
            cores.append(f"{folder}/{name}")
    return cores


# what a pure core must not import: I/O, the clients, caches and writers, the runtime, the layers above it
IMPURE = (
    "asyncio", "aiohttp", "socket", "subprocess", "os", "time", "syncer.runtime", "syncer.control",
    "syncer.app", "syncer.kube", "syncer.slurm.client", "syncer.slurm.cache", "syncer.slurm.job_cache",
)  # fmt: skip


def test_the_pure_cores_the_page_names_are_pure_and_mutated() -> None:
    cores = pure_cores()
    assert len(cores) >= 20, cores
    assert [core for core in cores if core not in PYPROJECT["mutmut"]["only_mutate"]] == []
    impure = []
    for core in cores:
        for node in ast.walk(ast.parse((REPO / core).read_text())):
            if isinstance(node, ast.AsyncFunctionDef | ast.Await):
                impure.append(f"{core}:{node.lineno} awaits")
            impure += [
                f"{core}:{getattr(node, 'lineno', 0)} imports {name}"
                for name in imported(node)
                if any(name == bad or name.startswith(bad + ".") for bad in IMPURE)
            ]
    assert impure == []


def imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [node.module] if isinstance(node, ast.ImportFrom) and node.module else []


def test_one_retry_policy() -> None:
    """The runtime's Backoff is the one retry policy and retry.py the one retry loop: no other module grows
    a delay by a power of its attempt, defines a Backoff or imports tenacity."""
    found = []
    for path in sources():
        where = str(path.relative_to(REPO))
        own = {"syncer/runtime/backoff.py", "syncer/runtime/retry.py"}
        for node in ast.walk(ast.parse(path.read_text())) if where not in own else ():
            line = f"{where}:{getattr(node, 'lineno', 0)}"
            exponent = (
                ast.unparse(node.right)
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
                else ""
            )
            if re.search(r"attempt|retr|tries|failure", exponent.lower()):
                found.append(f"{line} {ast.unparse(node)}")
            if isinstance(node, ast.ClassDef) and node.name == "Backoff":
                found.append(f"{line} class Backoff")
            if any(name.split(".")[0] == "tenacity" for name in imported(node)):
                found.append(f"{line} imports tenacity")
    assert found == []


def test_every_metric_the_page_names_is_declared() -> None:
    """A metric the page names is a family of metric_families.py or one a module builds itself (the reconcile
    counter and histogram of the runtime, ...), named as Prometheus shows it (`_total` of a counter)."""
    declared = set(GAUGES) | set(COUNTERS)
    for path in sources():
        declared |= set(re.findall(r"(?:Histogram|Counter|Gauge)\(\s*\"([a-z_]+)\"", path.read_text()))
    named = set(re.findall(r"`(slurm_[a-z_]+)`", PAGE))
    modules = {path.stem for path in sources()}
    suffixes = ("_total", "_bucket", "_sum", "_count")
    unknown = [
        name
        for name in sorted(named - modules)
        if name not in declared
        and not any(name.removesuffix(s) in declared for s in suffixes if name.endswith(s))
    ]
    assert len(named - modules) >= 3, named
    assert unknown == []


def test_the_walks_stays_are_functions_of_their_modules() -> None:
    """Each row of the name's walk through a reconcile names functions its module defines, in a module the
    table names, none twice in a row (a stay is one module until the way leaves it)."""
    table = PAGE[PAGE.index("| # | module | stay |") :].split("\n\n")[0].splitlines()[2:]
    modules = []
    for row in table:
        _number, module, stay = (cell.strip() for cell in row.strip("|").split("|"))
        path = REPO / "syncer" / ticked(module)[0]
        defined = {
            node.name
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        named = [name.removesuffix("()").split(".")[-1] for name in ticked(stay)]
        assert named and [name for name in named if name not in defined] == [], row
        modules.append(path)
    assert len(modules) >= 10
    assert all(before != after for before, after in itertools.pairwise(modules))


def test_the_walk_enters_each_module_once_as_the_page_counts_it() -> None:
    """The page's count of the walk ("enters N modules in N stays: each module once") is its table's: as many
    rows as stays, each a module no other row names, none marked "(again)"."""
    table = PAGE[PAGE.index("| # | module | stay |") :].split("\n\n")[0].splitlines()[2:]
    modules = [ticked(row.strip("|").split("|")[1])[0] for row in table]
    count = re.search(r"the name enters (\d+) modules in (\d+) stays: each module once", PAGE)
    assert count is not None
    assert (int(count[1]), int(count[2])) == (len(set(modules)), len(table))
    assert len(set(modules)) == len(modules)
    assert not [row for row in table if "(again)" in row]
