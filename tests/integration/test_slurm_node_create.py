"""`POST /new/node/` on the real slurmrestd, per API version: a powered-down CLOUD node from v0.0.44 on
(False when it exists), SlurmVersionError before (24.11 has no such call; 26.05's v0.0.42/43 neither)."""

from __future__ import annotations

import itertools

import pytest

from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmVersionError
from syncer.testing.sandbox import Sandbox

_names = itertools.count(1)


async def test_create_node_where_the_version_has_it(
    client_per_version: SlurmClient, slurm_sandbox: Sandbox
) -> None:
    client = client_per_version
    assert client.version is not None
    name = f"newnode{client.version.name.replace('.', '')[-2:]}x{next(_names)}"
    conf = f"NodeName={name} CPUs=2 RealMemory=300 State=CLOUD Features=pwtest"
    if not client.version.node_create:
        with pytest.raises(SlurmVersionError, match="cannot create nodes"):
            await client.create_node(conf)
        assert slurm_sandbox.node_state(name) == set()
        return
    try:
        assert await client.create_node(conf) is True
        node = await client.get_node(name)
        assert {"IDLE", "CLOUD", "POWERED_DOWN"} <= node.state
        assert (node.cpus, node.real_memory_mb, node.features) == (2, 300, ("pwtest",))
        assert await client.create_node(conf) is False  # exists already
    finally:
        slurm_sandbox.run("scontrol", "delete", f"nodename={name}")
