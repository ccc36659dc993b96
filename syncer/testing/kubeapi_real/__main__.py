"""`python -m syncer.testing.kubeapi_real`: build the real API server now (or confirm the cached one),
so a test run does not spend its first test on a cold build. scripts/test calls it."""

from __future__ import annotations

import sys

from syncer.testing.kubeapi_real.build import ensure_built, say
from syncer.testing.kubeapi_real.errors import RealKubeApiError


def main() -> int:
    try:
        binaries = ensure_built()
    except RealKubeApiError as error:
        print(f"kubeapi-real: {error}", file=sys.stderr)
        return 1
    say(f"{binaries.version}: {binaries.apiserver} and {binaries.etcd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
