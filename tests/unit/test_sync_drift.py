"""Drift, as `slurm-syncer status`, the demo and the engine's metric all judge it: a node being
scaled in by a NodeSet is judged with its scale-in cause, never as an undrain the syncer would not do."""

from __future__ import annotations

import msgspec

from syncer.controllers.sync.drift import describe, scale_in_of
from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.plan import decide, drift
from syncer.model.keys import Keys
from syncer.model.kube import Condition, KubeNode, KubePod
from syncer.model.slurm import SlurmNode

NOW = 1_700_000_000.0
OPTS = SyncOptions()
READY = Condition(type="Ready", status="True", last_transition_time=NOW - 3600)
NODE = KubeNode(name="k1", conditions=(READY,))
DRAINED = SlurmNode(name="gpu-3", state=frozenset({"IDLE", "DRAIN"}), reason="k8s: scale-in of NodeSet gpu")


def member(**annotations: str) -> KubePod:
    return KubePod(
        namespace="hpc",
        name="gpu-3",
        node_name="k1",
        phase="Running",
        labels={Keys.NODE_NAME_LABEL: "gpu-3", Keys.NODESET_LABEL: "gpu"},
        annotations=annotations,
        owner_kind="NodeSet",
        owner_name="gpu",
        owner_uid="u1",
    )


def synced(pod: KubePod, node: KubeNode) -> tuple[KubePod, KubeNode]:
    """The pod and Node as the engine leaves them once it has written what Slurm says."""
    wanted = decide(DRAINED, pod, node, now=NOW, opts=OPTS, slurm_fresh=True, scale_in_of="gpu")
    pod = msgspec.structs.replace(
        pod, annotations={**pod.annotations, **wanted.annotations}, conditions=wanted.pod_conditions
    )
    return pod, msgspec.structs.replace(node, conditions=(READY, *wanted.node_conditions))


def test_a_node_being_scaled_in_is_not_drift_and_agrees_with_the_engine() -> None:
    pod, node = synced(member(**{Keys.REMOVAL: "scale-in"}), NODE)
    assert scale_in_of(pod) == "gpu"
    # what the engine decides (the NodeSet reconciler told it which NodeSet scales the node in) ...
    engine = decide(DRAINED, pod, node, now=NOW, opts=OPTS, slurm_fresh=True, scale_in_of="gpu")
    assert not engine.acts
    # ... is what status and the demo now report, from the pod's own removal annotation
    assert not drift(DRAINED, pod, node, OPTS, NOW, scale_in_of=scale_in_of(pod))
    # without the scale-in cause (how status judged it before) the same node looked like drift: an
    # undrain the engine never makes
    assert drift(DRAINED, pod, node, OPTS, NOW)


def test_a_member_that_stays_has_no_scale_in_cause() -> None:
    assert scale_in_of(member()) is None
    assert scale_in_of(None) is None
    assert drift(DRAINED, member(), NODE, OPTS, NOW, scale_in_of=scale_in_of(member()))  # ours, no cause


def test_status_says_what_the_syncer_would_write() -> None:
    pod, node = synced(member(**{Keys.REMOVAL: "scale-in"}), NODE)
    wrong = decide(DRAINED, pod, node, now=NOW, opts=OPTS, slurm_fresh=True)  # without its scale-in cause
    assert describe(wrong).startswith("undrain in Slurm (lift 'k8s: scale-in of NodeSet gpu')"), describe(
        wrong
    )
    cordoned = msgspec.structs.replace(NODE, unschedulable=True)
    fresh = SlurmNode(name="gpu-3", state=frozenset({"IDLE"}))
    would = describe(decide(fresh, member(), cordoned, now=NOW, opts=OPTS, slurm_fresh=True))
    assert would.startswith("drain in Slurm (k8s: "), would
