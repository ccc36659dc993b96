"""scripts/mutation covers every pure planning core: each controller's plan.py is in pyproject's
[tool.mutmut], every file and test named there exists, and every declared equivalent names a file in scope."""

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
