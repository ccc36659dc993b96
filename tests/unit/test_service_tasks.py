"""The Manager's task list as docs/architecture.md gives it is the service's, with every option that adds a
loop turned on (leader election, node attributes, NodeSets, SlurmPartitions and Slinky's, the scheduler):
the same names."""

from __future__ import annotations

import re
from pathlib import Path

from syncer.app.service import ServiceConfig, SyncerService
from syncer.controllers.attributes.features import FeatureLabel
from syncer.controllers.attributes.options import AttributeOptions
from syncer.controllers.partitions.options import PartitionOptions
from syncer.controllers.scheduler.options import SchedulerOptions
from syncer.kube.client import KubeClient
from syncer.slurm.auth import NoToken
from syncer.slurm.client import SlurmClient

REPO = Path(__file__).resolve().parents[2]


def documented() -> list[str]:
    text = (REPO / "docs/architecture.md").read_text()
    bullet = text[text.index("- **Manager** (`manager.py`)") :]
    bullet = bullet[: bullet.index("A loop\n") if "A loop\n" in bullet else bullet.index(". A loop")]
    return re.findall(r"`([a-z][a-z-]*)`", bullet)


async def test_the_documented_tasks_are_the_services() -> None:
    slurm, kube = SlurmClient("http://127.0.0.1:9", NoToken()), KubeClient("http://127.0.0.1:9")
    config = ServiceConfig(listen_port=None).replace(
        partitions=PartitionOptions(enabled=True, slinky=True),
        attributes=AttributeOptions(feature_labels=(FeatureLabel.parse("example.com/rack"),)),
        scheduler=SchedulerOptions(name="slurm-syncer"),  # every namespace: one informer
    )
    service = SyncerService(slurm, kube, config)  # never started: no I/O
    try:
        assert sorted(name for name, _loop in service.tasks()) == sorted(documented())
    finally:
        await service.stop()
