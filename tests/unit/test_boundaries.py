"""Boundaries import-linter cannot see: the daemon loads no test code, and the cordon-owner value is
written in one place only."""

from __future__ import annotations

import ast
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


# The calls that write: to slurmrestd, to the Kubernetes API, Events, and the gate that admits them.
WRITE_CALLS = frozenset(
    {"update_node", "update_nodes", "delete_node", "create", "patch", "replace", "delete", "record", "check"}
)
# Each controller decides and hands its writes to the one path of that kind; only these modules write.
CONTROLLERS = ("syncer/sync/engine.py", "syncer/nodeset/reconciler.py")


def test_controllers_write_only_through_their_one_path() -> None:
    """The engine writes through its Applier, the NodeSet reconciler through NodeSetWrites (and the
    KubeWriter / EventRecorder those use): the write gate is checked where the write is made, once."""
    found = []
    for relative in CONTROLLERS:
        tree = ast.parse((REPO / relative).read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in WRITE_CALLS:
                continue
            owner = node.func.value
            # self.<client>.<write>(...): a write made in the controller itself
            if (
                isinstance(owner, ast.Attribute)
                and isinstance(owner.value, ast.Name)
                and owner.value.id == "self"
                and owner.attr in {"slurm", "kube", "events", "gate", "client"}
            ):
                found.append(f"{relative}:{node.lineno} self.{owner.attr}.{node.func.attr}()")
    assert found == []


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
