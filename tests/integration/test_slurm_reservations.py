"""Reservations over the real slurmrestd, per served API version: list everywhere; create, update and
delete where the version can (v0.0.43+, Slurm 25.05+); v0.0.42 refuses to write with a clear error."""

from __future__ import annotations

import time

import pytest

from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmApiError, SlurmVersionError

pytestmark = pytest.mark.slurm
FLAGS, USERS = ("MAINT", "IGNORE_JOBS"), ("root",)


@pytest.fixture
def client(client_per_version: SlurmClient) -> SlurmClient:
    return client_per_version


async def test_reservations_are_written_in_one_request_or_refused_clearly(client: SlurmClient) -> None:
    assert client.version is not None
    name = f"k8s-maint-itest-{client.version.name.replace('.', '')}"
    nodes = tuple(f"node{i:05d}" for i in range(1101, 1111))  # the session sandbox's high, unused nodes
    now = int(time.time())
    if not client.version.reservation_writes:
        with pytest.raises(SlurmVersionError, match=r"Slurm 25\.05"):
            await client.put_reservation(
                name, nodes=nodes, start=now + 600, end=now + 1200, flags=FLAGS, users=USERS, comment="x"
            )
        assert all(r.name != name for r in await client.list_reservations())
        return
    try:
        await client.put_reservation(
            name, nodes=nodes, start=now + 600, end=now + 1200, flags=FLAGS, users=USERS, comment="stamp"
        )
        [made] = [r for r in await client.list_reservations() if r.name == name]
        assert made.nodes == nodes and (made.start, made.end) == (now + 600, now + 1200)
        assert {"MAINT", "IGNORE_JOBS"} <= made.flags
        # the same name again: an update (times and nodes replaced)
        await client.put_reservation(
            name, nodes=nodes[:3], start=now + 900, end=now + 1800, flags=FLAGS, users=USERS, comment="stamp"
        )
        [changed] = [r for r in await client.list_reservations() if r.name == name]
        assert changed.nodes == nodes[:3] and (changed.start, changed.end) == (now + 900, now + 1800)
        # a start already past is taken: the reservation is active at once; its start cannot move then
        await client.put_reservation(
            name, nodes=nodes[:3], start=now - 5, end=now + 1800, flags=FLAGS, users=USERS, comment="stamp"
        )
        with pytest.raises(SlurmApiError) as refused:
            await client.put_reservation(
                name, nodes=nodes[:3], start=now + 60, end=now + 1800, flags=FLAGS, users=USERS, comment="s"
            )
        assert refused.value.has_error("Reservation already started"), refused.value.errors
        await client.put_reservation(  # leaving the start alone works
            name, nodes=nodes[:2], start=None, end=now + 2400, flags=FLAGS, users=USERS, comment="stamp"
        )
        [active] = [r for r in await client.list_reservations() if r.name == name]
        assert active.nodes == nodes[:2] and active.end == now + 2400 and active.start <= now
    finally:
        deleted = await client.delete_reservation(name)
    assert deleted and not await client.delete_reservation(name)  # the second: already gone, no error
