"""Boundaries import-linter cannot see: the daemon loads no test code, and the cordon-owner value is
written in one place only."""

from __future__ import annotations

import ast
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def modules_loaded_by(argv: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from syncer.app.cli import build_parser\n"
        f"build_parser({argv!r}).parse_args({argv!r})\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_run_and_status_load_neither_the_emulator_nor_the_sandbox() -> None:
    for argv in (["run", "--slurm-url", "http://slurmrestd:6820"], ["status"], ["check"]):
        loaded = modules_loaded_by(argv)
        assert "syncer.app.run_cmd" in loaded
        assert not {m for m in loaded if m.startswith("syncer.testing")}, argv


def test_the_local_tools_still_load_when_asked_for() -> None:
    assert "syncer.testing.kubeapi_cli" in modules_loaded_by(["kubeapi"])
    assert "syncer.testing.demo" in modules_loaded_by(["--log-level", "debug", "demo"])


def test_the_cordon_owner_value_is_never_written_as_a_literal() -> None:
    """`Keys.CORDONED_BY` is compared with and set to CORDONED_BY_SLURM only, so the value the engine
    writes and the one `decide` treats as the syncer's own can never drift apart."""
    from syncer.model.keys import CORDONED_BY_SLURM

    offenders = []
    for path in sorted((REPO / "syncer").rglob("*.py")):
        if "testing" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(node, ast.Dict):
                pairs += [(k, v) for k, v in zip(node.keys, node.values, strict=True) if k is not None]
            if isinstance(node, ast.Compare):
                pairs += [(node.left, right) for right in node.comparators]
                pairs += [(right, node.left) for right in node.comparators]
            for key, value in pairs:
                mentions_key = "CORDONED_BY" in ast.unparse(key) and "CORDONED_BY_SLURM" not in ast.unparse(
                    key
                )
                if mentions_key and isinstance(value, ast.Constant) and value.value == CORDONED_BY_SLURM:
                    offenders.append(f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}")
    assert not offenders, f"literal {CORDONED_BY_SLURM!r} beside Keys.CORDONED_BY: {offenders}"


def import_cycles(package: str) -> list[list[str]]:
    """Groups of modules of `package` that import each other in a circle (type-checking imports too)."""
    import grimp  # import-linter's graph builder

    graph = grimp.build_graph(package, include_external_packages=False)
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in imports[module]:
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = []
            while (member := stack.pop()) != module:
                component.append(member)
            if component:
                cycles.append(sorted([module, *component]))

    for module in sorted(imports):
        if module not in order:
            visit(module)
    return cycles


def test_no_module_of_the_syncer_imports_itself_in_a_circle() -> None:
    assert import_cycles("syncer") == []


WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CLIENT_MODULES = ("syncer/slurm/client.py", "syncer/kube/client.py")


@functools.cache  # derived from the sources once: the tests below ask for every call they look at
def client_writes() -> frozenset[str]:
    """The calls that write, on a client (to slurmrestd or the Kubernetes API), derived from the clients:
    every method that names a write verb or calls one that does, and every one that takes the HTTP method
    as an argument."""
    writes: set[str] = set()
    for module in CLIENT_MODULES:
        tree = ast.parse((REPO / module).read_text())
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Client")):
            methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
            generic = {name for name, f in methods.items() if "method" in {a.arg for a in f.args.args}}
            direct = {
                name
                for name, f in methods.items()
                if any(isinstance(c, ast.Constant) and c.value in WRITE_VERBS for c in ast.walk(f))
            }
            calls = {
                name: {
                    c.func.attr
                    for c in ast.walk(f)
                    if isinstance(c, ast.Call)
                    and isinstance(c.func, ast.Attribute)
                    and ast.unparse(c.func.value) == "self"
                }
                for name, f in methods.items()
            }
            while grown := {n for n, called in calls.items() if called & direct} - direct:
                direct |= grown
            direct |= generic  # the HTTP method is the caller's: a write whenever it says so
            writes |= direct
    return frozenset(writes)


def test_the_client_writes_are_derived_completely() -> None:
    """The derivation finds every write the clients offer (docs/architecture.md lists them:
    test_architecture_doc.py holds the list to this derivation) and no read."""
    assert client_writes() >= {
        "update_node", "update_nodes", "create_node", "delete_node", "put_partition", "put_partitions",
        "delete_partition", "put_reservation", "delete_reservation", "submit_job", "allocate_job",
        "cancel_job", "end_job", "update_job", "create", "patch", "replace", "delete", "request",
        "request_bytes",
    }  # fmt: skip
    assert not client_writes() & {"get", "get_node", "list_nodes", "list_jobs", "list_partitions", "diag"}


CLIENTS = frozenset({"slurm", "kube", "client"})
# Loops of its own beside the runner's: what `ControllerRunner.serve` (syncer/runtime) alone may run.
OWN_LOOPS = frozenset({"TaskGroup", "create_task", "ensure_future", "wait", "run_forever"})


@functools.cache
def controllers() -> dict[str, Path]:
    """Every controller class of the syncer (a subclass of runtime's Controller) and its module: found,
    not listed, so a controller added later is held to the same rules."""
    found = {}
    for path in sorted((REPO / "syncer").rglob("*.py")):
        if {"testing", "runtime"} & set(path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Controller" for b in node.bases):
                found[node.name] = path
    return found


def controller_modules() -> list[Path]:
    """Every module of a package that holds a controller (its decisions, its writes, its helpers)."""
    packages = {path.parent for path in controllers().values()}
    return sorted(path for package in packages for path in package.glob("*.py"))


def receiver(call: ast.Call) -> str:
    """`slurm` for self.slurm.update_node(...), self.context.slurm.update_node(...), slurm.update_node()."""
    assert isinstance(call.func, ast.Attribute)
    owner = call.func.value
    if isinstance(owner, ast.Attribute):
        return owner.attr
    return owner.id if isinstance(owner, ast.Name) else ""


def test_the_controllers_are_found() -> None:
    """Every controller class is one of the registry's (syncer/controllers/__init__.py), each in its
    folder's controller.py: none runs unregistered, none hides outside syncer/controllers/<name>/."""
    from syncer.controllers import CONTROLLERS

    found = sorted(str(path.relative_to(REPO)) for path in controllers().values())
    assert found == sorted(f"syncer/controllers/{name}/controller.py" for name in CONTROLLERS)
    assert all(name.endswith("Controller") for name in controllers()), "one name for one role"


def test_controllers_write_only_through_the_writers() -> None:
    """Every write of every controller goes through the context's writers (KubeWriter, EventRecorder,
    SlurmWriter and its group commit, in syncer/kube and syncer/control): the write gate is checked there,
    once, never in a controller's package (no client write, no gate check)."""
    found = []
    for path in controller_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            method, owner = node.func.attr, receiver(node)
            if (method in client_writes() and owner in CLIENTS) or (method == "check" and owner == "gate"):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {owner}.{method}()")
    assert found == []


def test_no_controller_reads_leadership_or_dry_run() -> None:
    """The runner owns leadership (a follower reconciles nothing) and the writers own the dry run: no
    controller's package reads the gate, whether it leads, or whether it is a dry run."""
    found = []
    for path in controller_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in {"gate", "leading", "dry_run", "check"}:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
    assert found == []


def test_watches_are_declared_not_wired_by_hand() -> None:
    """A controller declares what it watches (`watches()`, syncer/runtime/watch.py) and its runner subscribes:
    no `subscribe(...)` call in a controller's package, but in a source's own `subscribe` that forwards."""
    found = []
    for path in controller_modules():
        tree = ast.parse(path.read_text(), str(path))
        forwarding = {
            id(call)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef) and f.name == "subscribe"
            for call in ast.walk(f)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith("subscribe")
                and id(node) not in forwarding
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {ast.unparse(node.func)}()")
    assert found == []


def test_serve_is_the_only_run_loop_of_a_controller() -> None:
    """A controller is run by its ControllerRunner's `serve` (queue, resync, leadership) under the
    Manager: no task group, task, `while True` or `run` method of its own in a controller's package.
    (Writes that run beside a reconcile go through `runner.beside`.)"""
    found = []
    for path in controller_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in OWN_LOOPS
                and receiver(node) == "asyncio"
            ):
                found.append(f"{where} asyncio.{node.func.attr}")
            if isinstance(node, ast.AsyncFunctionDef):  # a loop that awaits for ever: a run loop
                found += [
                    f"{path.relative_to(REPO)}:{w.lineno} while True in {node.name}"
                    for w in ast.walk(node)
                    if isinstance(w, ast.While) and isinstance(w.test, ast.Constant) and w.test.value is True
                ]
    for name, path in controllers().items():
        tree = ast.parse(path.read_text(), str(path))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name):
            found += [
                f"{path.relative_to(REPO)}:{f.lineno} {name}.{f.name}"
                for f in cls.body
                if isinstance(f, ast.AsyncFunctionDef | ast.FunctionDef) and f.name in {"run", "serve"}
            ]
    assert found == []


def test_the_service_builds_the_registered_controllers_and_names_none() -> None:
    """`app/service.py` builds every controller through its registration (the registry, syncer/controllers/
    __init__.py) from the one ControllerContext and hands the Manager each runner's `serve`: it calls no
    controller class, so a new controller is one folder and one registration line."""
    tree = ast.parse((REPO / "syncer/app/service.py").read_text())
    calls = [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert [c for c in calls if c in controllers()] == []
    assert "registration.build" in calls and "self.context.runner" in calls
    assert "runner.serve" in ast.unparse(tree)


def test_a_local_tool_missing_from_the_installation_says_where_to_get_it() -> None:
    """In the container image syncer/testing is absent: `slurm-syncer sandbox ...` answers with where
    the tools live instead of an ImportError (tests/e2e/test_image.py runs it in the real image)."""
    code = (
        "import sys\n"
        "import importlib.util\n"
        "real = importlib.util.find_spec\n"
        "hide = lambda name, *a: None if name.startswith('syncer.testing') else real(name, *a)\n"
        "importlib.util.find_spec = hide\n"
        "from syncer.app.cli import main\n"
        "sys.exit(main(['demo', '--anything', 'goes']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert "slurm-syncer demo: not in this installation" in done.stderr
    assert "Traceback" not in done.stderr


def broken_contracts(tmp: Path, extra: dict[str, str]) -> str:
    """lint-imports' verdict on a copy of the package with `extra` files added ({path: text})."""
    shutil.copytree(REPO / "syncer", tmp / "syncer", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp / "pyproject.toml")
    for path, text in extra.items():
        (tmp / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp / path).write_text(text)
    lint = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run(
        [str(lint), "--no-cache"], cwd=tmp, env={**os.environ, "PYTHONPATH": str(tmp)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return "\n".join(line for line in out.stdout.splitlines() if line.endswith("BROKEN"))


def test_import_contracts_are_exhaustive(tmp_path: Path) -> None:
    """docs/architecture.md: every package under syncer/ has its row (a new one fails until placed), and a
    new controller package is held to the controllers' independence without an edit of the contract."""
    assert broken_contracts(tmp_path / "a", {}) == ""
    assert broken_contracts(tmp_path / "b", {"syncer/unplaced/__init__.py": ""}) == "Layers BROKEN"
    toy = {"syncer/controllers/toy/__init__.py": "from syncer.controllers.sync import plan as plan\n"}
    assert broken_contracts(tmp_path / "c", toy) == "Controllers do not import each other BROKEN"
