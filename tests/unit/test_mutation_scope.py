"""scripts/mutation covers every pure planning core: each controller's plan.py is in pyproject's
[tool.mutmut], so is every other module of a controller without asyncio unless LEFT_OUT says why, every file
and test named there exists, and every declared equivalent names a file in scope."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]


def test_every_controllers_plan_is_mutated() -> None:
    plans = {str(p.relative_to(REPO)) for p in (REPO / "syncer/controllers").glob("*/plan.py")}
    assert plans, "no plan.py found"
    assert plans - set(CONFIG["only_mutate"]) == set()


def test_every_file_and_test_named_exists() -> None:
    named = [*CONFIG["only_mutate"], *CONFIG["pytest_add_cli_args_test_selection"]]
    assert [path for path in named if not (REPO / path).is_file()] == []


def test_every_equivalent_names_a_module_in_scope() -> None:
    modules = {path.removesuffix(".py").replace("/", ".") for path in CONFIG["only_mutate"]}
    lines = (REPO / "benchmarks/mutation_equivalent.txt").read_text().splitlines()
    names = [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]
    outside = [name for name in names if not any(name.startswith(module + ".") for module in modules)]
    assert outside == []


# Modules of a controller package with no asyncio that are not mutated, and why: a new pure module is either
# mutated (pyproject's only_mutate, with the unit tests that cover it) or named here.
LEFT_OUT = {
    "options.py": "a controller's option rows and options_from: configuration read once at start",
    "__init__.py": "the package's docstring, and the registry's list of names",
    "sync/drift.py": "the status command's rows: a loop over plan.decide (mutated), and words",
    "sync/stats.py": "the engine's counters",
    "sync/written.py": "the memory of our own writes until the cache shows them, with a clock: no decision",
}


def test_every_pure_module_of_a_controller_is_mutated_or_left_out_with_why() -> None:
    root = REPO / "syncer/controllers"
    pure = [
        p for p in root.rglob("*.py") if "async def" not in (text := p.read_text()) and "await " not in text
    ]
    unlisted = [
        str(path.relative_to(REPO))
        for path in pure
        if str(path.relative_to(REPO)) not in CONFIG["only_mutate"]
        and path.name not in LEFT_OUT
        and str(path.relative_to(root)) not in LEFT_OUT
    ]
    assert sorted(unlisted) == []
