"""The daemon's code never loads kubernetes_asyncio: its generated models cost 40 MB of resident memory."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
import syncer
for module in pkgutil.walk_packages(syncer.__path__, "syncer."):
    if not module.name.startswith("syncer.testing") and not module.name.endswith("__main__"):
        importlib.import_module(module.name)
print(len([m for m in sys.modules if m.startswith("syncer.")]))
print(sorted({m.split(".")[0] for m in sys.modules if m.startswith("kubernetes")}))
"""


def test_no_runtime_module_imports_kubernetes_asyncio() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True
    )
    imported, kubernetes = result.stdout.splitlines()
    assert int(imported) > 50  # the walk reached the whole daemon
    assert kubernetes == "[]"
