"""The applier's Kubernetes writes for one decision, in the order it makes them: the pod's /status, the
Node's, then the Node's cordon; the annotations on the object the decision names (the Node when there is
no pod)."""

from __future__ import annotations

from syncer.control.binding import Binding
from syncer.controllers.sync.apply import KubeWrite, kube_writes
from syncer.controllers.sync.plan import Decision
from syncer.model import Condition, KubeNode, KubePod
from syncer.model.keys import Keys

POD = KubePod(namespace="slurm", name="slurmd-1", node_name="k8s-a")
NODE = KubeNode(name="k8s-a")
DRAINED = Condition(type=Keys.CONDITION_DRAINED, status="True", reason="Drained")
STATE: dict[str, str | None] = {Keys.STATE: "IDLE+DRAIN"}


def test_pod_status_then_node_status_then_cordon() -> None:
    decision = Decision(
        annotations=STATE, annotations_on="pod", pod_conditions=(DRAINED,), node_conditions=(DRAINED,),
        cordon="cordon",
    )  # fmt: skip
    assert kube_writes(Binding("n1", POD, NODE), decision) == [
        KubeWrite(POD, (DRAINED,), STATE),
        KubeWrite(NODE, (DRAINED,), {}),
        KubeWrite(NODE, cordon="cordon"),
    ]


def test_annotations_alone_write_only_the_object_they_go_on() -> None:
    on_pod = Decision(annotations=STATE, annotations_on="pod")
    assert kube_writes(Binding("n1", POD, NODE), on_pod) == [KubeWrite(POD, (), STATE)]
    on_node = Decision(annotations=STATE, annotations_on="node")
    assert kube_writes(Binding("n1", POD, NODE), on_node) == [KubeWrite(NODE, (), STATE)]
    # a pod-bound decision whose pod is gone from the binding: the annotations go on the Node
    assert kube_writes(Binding("n1", None, NODE), on_pod) == [KubeWrite(NODE, (), STATE)]


def test_nothing_to_write_and_nothing_without_its_object() -> None:
    assert kube_writes(Binding("n1", POD, NODE), Decision(annotations_on="pod")) == []
    # a pod not yet on a Node: its conditions still go out, the Node's and the cordon cannot
    decision = Decision(
        annotations_on="pod", pod_conditions=(DRAINED,), node_conditions=(DRAINED,), cordon="uncordon"
    )
    assert kube_writes(Binding("n1", POD, None), decision) == [KubeWrite(POD, (DRAINED,), {})]
