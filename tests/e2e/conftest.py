from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox
from tests.e2e.rig import Rig


@pytest.fixture
async def rig(slurm_sandbox: Sandbox, kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[Rig]:
    reader = SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file))
    await reader.start()
    test_rig = Rig(slurm_sandbox, kube_api, kubeconfig, reader)
    try:
        yield test_rig
    finally:
        await reader.close()
        test_rig.restore()
