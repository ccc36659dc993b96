"""The Slurm node names of a NodeSet: what a SlurmPartition's `nodes.nodeSets` puts in a partition (the
partition controller asks through `NodeSetController.members`, the one place that answers). No I/O.

- Every pod of the NodeSet contributes its own Slurm node, each once: two slurmd pods of it on one
  Kubernetes Node are two Slurm nodes.
- A power-managed NodeSet also contributes every member declared to Slurm that is its own, powered down or
  not: Slurm powers a node up only for a partition that holds it, so a member left out for having no pod
  could never be powered up for that partition's jobs. A member whose record is not in Slurm yet is left
  out (Slurm refuses a partition that names a node it does not know), as is a record under a member's name
  that is someone else's.
- Sorted, so the same NodeSet gives the same list whatever order the informers delivered it in.

An empty list means the NodeSet exists and has no Slurm node now (replicas 0, pods not created yet, members
not declared yet); None, from the controller, that there is no such NodeSet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from syncer.controllers.nodeset.plan import declaring_of, removal_stamp
from syncer.controllers.nodeset.power import declared_stamp, ours
from syncer.controllers.nodeset.spec import SpecError, parse
from syncer.model.kube import KubeNodeSet, KubePod
from syncer.model.slurm import SlurmNode


def slurm_names(
    nodeset: KubeNodeSet,
    pods: Iterable[KubePod],
    slurm_nodes: Mapping[str, SlurmNode],
    name_of: Callable[[KubePod], str],
) -> list[str]:
    """The NodeSet's Slurm nodes: its pods' (`name_of` each), and a power-managed NodeSet's declared members.
    `pods` are the NodeSet's own (by owner UID)."""
    pods = list(pods)
    names = {name_of(pod) for pod in pods}
    try:
        power = parse(nodeset.name, nodeset.spec).power
    except SpecError:
        power = None  # the reconciler reports it; its pods still run
    if power is not None:
        removal = removal_stamp(nodeset)
        mine, declaring = declared_stamp(removal), declaring_of(nodeset)
        for index in range(power.max_replicas):
            name = f"{nodeset.name}-{index}"
            record = slurm_nodes.get(name)
            # a record its own pod registered is counted with the pods above
            if record is not None and ours(record, name, mine, removal, declaring, has_pod=False):
                names.add(name)
    return sorted(n for n in names if n)
