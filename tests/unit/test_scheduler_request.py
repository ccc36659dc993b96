"""Pod -> what its Slurm job asks of a node (Kubernetes' PodRequests, CPUs rounded up, GRES by table) and
the job's settings from annotations (the pod's over its Namespace's, only where the Namespace allows)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from syncer.controllers.scheduler import settings as st
from syncer.controllers.scheduler.request import (
    NO_CPU,
    NO_MEMORY,
    POD_LEVEL,
    UNMAPPED,
    JobRequest,
    PerNode,
    canonical_requests,
    extended,
    per_node,
    pod_requests,
    tres_per_node,
)
from syncer.controllers.scheduler.settings import Refusal, Settings, resolve
from syncer.controllers.scheduler.slurmtime import UNLIMITED
from syncer.controllers.scheduler.values import Container, Pod
from syncer.model.keys import Keys

BASIC = {"cpu": "2", "memory": "1Gi"}


def pod(*containers: Container, init: tuple[Container, ...] = (), **more: object) -> Pod:
    return Pod(namespace="ns", name="p", uid="u", containers=containers, init_containers=init, **more)  # type: ignore[arg-type]


def c(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, sidecar: bool = False
) -> Container:
    return Container(requests=requests or {}, limits=limits or {}, sidecar=sidecar)


# --- requests as Kubernetes counts them


def test_app_containers_sum() -> None:
    counted = pod_requests(pod(c({"cpu": "1", "memory": "1Gi"}), c({"cpu": "500m", "memory": "512Mi"})))
    assert counted == {"cpu": Fraction(3, 2), "memory": 1536 * 1024**2}


def test_an_init_container_larger_than_the_app_sets_the_request() -> None:
    counted = pod_requests(
        pod(c({"cpu": "1", "memory": "1Gi"}), init=(c({"cpu": "4"}), c({"memory": "2Gi"})))
    )
    assert counted == {"cpu": Fraction(4), "memory": Fraction(2 * 1024**3)}


def test_sidecars_add_to_the_app_and_to_later_init_steps() -> None:
    # sidecar 1 CPU runs beside everything after it: app 2 + 1 = 3; the init step after it 3 + 1 = 4 wins
    counted = pod_requests(
        pod(
            c({"cpu": "2"}),
            init=(c({"cpu": "1"}, sidecar=True), c({"cpu": "3"}), c({"cpu": "1"}, sidecar=True)),
        )
    )
    assert counted == {"cpu": Fraction(4)}
    # an init step before the sidecar does not carry it
    assert pod_requests(pod(c({"cpu": "2"}), init=(c({"cpu": "3"}), c({"cpu": "1"}, sidecar=True)))) == {
        "cpu": Fraction(3)
    }


def test_an_init_container_counts_for_what_the_app_does_not_request() -> None:
    counted = pod_requests(pod(c({"memory": "1Gi"}), init=(c({"cpu": "500m"}),)))
    assert counted == {"memory": Fraction(1024**3), "cpu": Fraction(1, 2)}


def test_overhead_is_added() -> None:
    assert pod_requests(pod(c({"cpu": "1"}), overhead={"cpu": "250m"})) == {"cpu": Fraction(5, 4)}


def test_a_limit_stands_in_for_a_missing_request() -> None:
    counted = pod_requests(pod(c({"cpu": "1"}, {"cpu": "4", "nvidia.com/gpu": "2"})))
    assert counted == {"cpu": Fraction(1), "nvidia.com/gpu": Fraction(2)}


def test_bad_quantity_names_its_field() -> None:
    refused = pod_requests(pod(c(BASIC), c({"cpu": "lots"})))
    assert refused == Refusal(
        field="spec.containers[1].resources.requests[cpu]",
        message="'lots' is not a Kubernetes quantity (such as 500m, 2, 1.5Gi, 4e3); give a Kubernetes "
        "quantity",
    )
    refused = pod_requests(pod(c(BASIC), init=(c(limits={"memory": "-1"}),)))
    assert isinstance(refused, Refusal)
    assert refused.field == "spec.initContainers[0].resources.limits[memory]"
    assert refused.message == "'-1' is negative; give a Kubernetes quantity"
    assert isinstance(pod_requests(pod(c(BASIC), overhead={"cpu": "x"})), Refusal)
    assert pod_requests(pod(c(BASIC), overhead={"cpu": "x"})).field == "spec.overhead[cpu]"  # type: ignore[union-attr]


def test_extended_resources() -> None:
    assert extended("nvidia.com/gpu")
    assert extended("example.org/fpga")
    assert not extended("cpu")
    assert not extended("hugepages-2Mi")
    assert not extended("kubernetes.io/something")
    assert not extended("foo.kubernetes.io/bar")
    assert not extended("requests.nvidia.com/gpu")


def test_unmapped_and_fractional_gres_are_refused() -> None:
    refused = per_node(pod(c({**BASIC, "example.org/fpga": "1"})))
    assert refused == Refusal(
        field="spec.containers[0].resources.requests[example.org/fpga]",
        message="example.org/fpga is not in the scheduler's GRES table, so Slurm cannot allocate it; ask the "
        'admin to map it to a GRES (or to "" if Kubernetes alone counts it)',
    )
    refused = per_node(pod(c({**BASIC, "nvidia.com/gpu": "500m"})))
    assert refused == Refusal(
        field="spec.containers[0].resources.requests[nvidia.com/gpu]",
        message="1/2 nvidia.com/gpu: Slurm allocates whole GRES; request a whole number",
    )


def test_per_node_in_slurm_units() -> None:
    asks = per_node(
        pod(c({"cpu": "3500m", "memory": "1000Mi", "nvidia.com/gpu": "2", "example.org/nic": "1"})),
        gres={"nvidia.com/gpu": "gpu:a100", "example.org/nic": ""},
    )
    assert asks == PerNode(
        cpus=4,
        memory_mib=1000,
        gres=(("gpu:a100", 2),),
        requests={"cpu": 3500, "memory": 1000 * 1024**2, "nvidia.com/gpu": 2, "example.org/nic": 1},
        cpu_note="CPU request 3500m rounded up to 4: Slurm allocates whole CPUs",
    )


def test_gres_of_two_resources_on_one_name_add_up_and_sort() -> None:
    asks = per_node(
        pod(c({**BASIC, "nvidia.com/gpu": "1", "amd.com/gpu": "2", "x.io/shard": "3"})),
        gres={"nvidia.com/gpu": "gpu", "amd.com/gpu": "gpu", "x.io/shard": "shard"},
    )
    assert isinstance(asks, PerNode)
    assert asks.gres == (("gpu", 3), ("shard", 3))
    assert asks.cpu_note == ""
    assert asks.memory_mib == 1024


def test_memory_rounds_up_to_mib() -> None:
    asks = per_node(pod(c({"cpu": "1", "memory": "1000001"})))
    assert isinstance(asks, PerNode)
    assert asks.memory_mib == 1
    one_byte = per_node(pod(c({"cpu": "1", "memory": "1"})))
    assert isinstance(one_byte, PerNode)
    assert one_byte.memory_mib == 1


def test_only_extended_resources_become_gres() -> None:
    asks = per_node(pod(c({**BASIC, "ephemeral-storage": "1Gi"})), gres={"ephemeral-storage": "tmp"})
    assert isinstance(asks, PerNode)
    assert asks.gres == ()


def test_zero_gres_is_not_asked() -> None:
    asks = per_node(pod(c({**BASIC, "nvidia.com/gpu": "0"})))
    assert isinstance(asks, PerNode)
    assert asks.gres == ()
    assert "nvidia.com/gpu" not in asks.requests


def test_cpu_and_memory_are_required() -> None:
    assert per_node(pod(c({"memory": "1Gi"}))) == Refusal(
        field="spec.containers[0].resources.requests[cpu]", message=NO_CPU
    )
    assert per_node(pod(c({"cpu": "1"}))) == Refusal(
        field="spec.containers[0].resources.requests[memory]", message=NO_MEMORY
    )
    assert per_node(pod(c({"cpu": "0", "memory": "0"}))) == Refusal(
        field="spec.containers[0].resources.requests[cpu]", message=NO_CPU
    )
    assert NO_CPU == (
        "no container requests CPU; Slurm allocates CPUs to the job: request at least 1 (a fraction is "
        "rounded up to whole CPUs)"
    )
    assert (
        NO_MEMORY
        == "no container requests memory; Slurm allocates memory to the job: request it (in whole MiB)"
    )


def test_pod_level_resources_are_refused() -> None:
    assert per_node(pod(c(BASIC), pod_resources={"cpu": "2"})) == Refusal(
        field="spec.resources", message=POD_LEVEL
    )
    assert POD_LEVEL == "pod-level resources are not supported yet; set the requests on the containers"


def test_bad_quantity_reaches_per_node() -> None:
    refused = per_node(pod(c({"cpu": "1", "memory": "1 Gi"})))
    assert isinstance(refused, Refusal)
    assert refused.field == "spec.containers[0].resources.requests[memory]"


def test_canonical_requests_count_everything() -> None:
    assert canonical_requests(
        pod(c({"cpu": "100m", "memory": "1Mi", "x.io/any": "1", "ephemeral-storage": "0"}))
    ) == {
        "cpu": 100,
        "memory": 1024**2,
        "x.io/any": 1,
    }
    assert canonical_requests(pod(c({"cpu": "bad"}))) == {}


def test_requests_the_edge_summed() -> None:
    summed = Pod(namespace="ns", name="p", uid="u", requests={"cpu": 4100, "memory": 5 * 1024**2 + 1,
                 "nvidia.com/gpu": 2, "ephemeral-storage": 7}, pod_resources={"cpu": "1"})  # fmt: skip
    assert per_node(summed) == PerNode(
        cpus=5,
        memory_mib=6,
        gres=(("gpu", 2),),
        requests={"cpu": 4100, "memory": 5 * 1024**2 + 1, "nvidia.com/gpu": 2, "ephemeral-storage": 7},
        cpu_note="CPU request 4100m rounded up to 5: Slurm allocates whole CPUs",
    )
    assert pod_requests(summed)["cpu"] == Fraction(41, 10)  # type: ignore[index]
    assert canonical_requests(replace(summed, requests={"cpu": 100, "memory": 0})) == {"cpu": 100}
    assert canonical_requests(replace(summed, requests={}, containers=(c({"cpu": "1"}),))) == {}


def test_refusals_of_summed_requests() -> None:
    summed = Pod(namespace="ns", name="p", uid="u", requests={"memory": 1})
    assert per_node(summed) == Refusal(field="spec.containers[*].resources.requests[cpu]", message=NO_CPU)
    assert per_node(replace(summed, requests={"cpu": 1})) == Refusal(
        field="spec.containers[*].resources.requests[memory]", message=NO_MEMORY
    )
    fpga = replace(summed, requests={"cpu": 1000, "memory": 1, "x.io/fpga": 1, "a.io/nic": 1})
    assert per_node(fpga) == Refusal(
        field="spec.containers[*].resources.requests[a.io/nic]",
        message=f"a.io/nic is not in the scheduler's GRES table, {UNMAPPED}",
    )
    bad = replace(
        summed, resources_error='spec.containers[1].resources.requests[cpu]: "lots" is not a quantity'
    )
    assert per_node(bad) == Refusal(
        field="spec.containers[1].resources.requests[cpu]",
        message='"lots" is not a quantity; give a Kubernetes quantity',
    )
    two = replace(summed, resources_error="a[cpu]: bad; b[memory]: worse")  # the first names the field
    assert per_node(two) == Refusal(
        field="a[cpu]", message="bad; b[memory]: worse; give a Kubernetes quantity"
    )


def test_tres_per_node() -> None:
    assert tres_per_node((("gpu", 2), ("gpu:a100", 1))) == "gres/gpu:2,gres/gpu:a100:1"
    assert tres_per_node(()) == ""
    request = JobRequest(
        key="k",
        name="n",
        comment="c",
        pods=(),
        nodes=1,
        cpus_per_node=1,
        memory_mib_per_node=1,
        gres_per_node=(("gpu", 1),),
    )
    assert request.tres_per_node == "gres/gpu:1"
    assert request.settings == Settings()


# --- settings from annotations


def test_pod_annotations_over_namespace_defaults() -> None:
    ns = {
        Keys.JOB_PARTITION: "batch",
        Keys.JOB_TIME_LIMIT: "1:00:00",
        Keys.JOB_NICE: "-10",
        Keys.POD_OVERRIDES: "*",
    }
    pod_ann = {
        Keys.JOB_PARTITION: "gpu,batch",
        Keys.JOB_TIME_LIMIT: "30",
        Keys.JOB_QOS: "high",
        Keys.JOB_ACCOUNT: "ml",
        Keys.JOB_CONSTRAINT: "a100&ib",
        Keys.JOB_RESERVATION: "r1",
    }
    assert resolve("team", pod_ann, ns) == Settings(
        partition="gpu,batch", account="ml", qos="high", time_limit_min=30, nice=-10, constraint="a100&ib",
        reservation="r1",
    )  # fmt: skip
    assert resolve("team", {}, {}) == Settings()
    assert resolve("team", {Keys.JOB_TIME_LIMIT: " UNLIMITED "}, {}) == Settings(time_limit_min=UNLIMITED)


def test_default_overrides_let_pods_choose_only_harmless_settings() -> None:
    assert frozenset({"time-limit", "nice", "constraint"}) == st.DEFAULT_POD_OVERRIDES
    assert resolve(
        "t", {Keys.JOB_NICE: "5", Keys.JOB_CONSTRAINT: "x", Keys.JOB_TIME_LIMIT: "1"}, {}
    ) == Settings(nice=5, constraint="x", time_limit_min=1)
    refused = resolve("team", {Keys.JOB_ACCOUNT: "other"}, {})
    assert refused == Refusal(
        field="metadata.annotations[slurm-syncer.dev/account]",
        message="Namespace team does not let its pods choose account (they may choose: constraint, nice, "
        "time-limit); remove the annotation, or ask the Namespace's admin to set it there or list it in "
        "slurm-syncer.dev/pod-overrides",
    )


def test_namespace_lists_what_its_pods_may_choose() -> None:
    ns = {Keys.POD_OVERRIDES: " partition , qos,"}
    assert resolve("t", {Keys.JOB_PARTITION: "p", Keys.JOB_QOS: "q"}, ns) == Settings(partition="p", qos="q")
    refused = resolve("t", {Keys.JOB_NICE: "1"}, ns)
    assert isinstance(refused, Refusal)
    assert "(they may choose: partition, qos)" in refused.message
    refused = resolve("t", {Keys.JOB_NICE: "1"}, {Keys.POD_OVERRIDES: ""})
    assert isinstance(refused, Refusal)
    assert "(they may choose: none)" in refused.message
    assert resolve("t", {Keys.JOB_NICE: "1"}, {}, default_overrides=frozenset()) == Refusal(
        field="metadata.annotations[slurm-syncer.dev/nice]",
        message="Namespace t does not let its pods choose nice (they may choose: none); remove the "
        "annotation, or ask the Namespace's admin to set it there or list it in "
        "slurm-syncer.dev/pod-overrides",
    )


def test_misspelt_override_names_the_namespace() -> None:
    refused = resolve("t", {}, {Keys.POD_OVERRIDES: "partition,acount,zone"})
    assert refused == Refusal(
        field="metadata.annotations[slurm-syncer.dev/pod-overrides]",
        message="acount, zone is not a setting; name some of partition, account, qos, time-limit, nice, "
        "constraint, reservation, or *",
        object="Namespace t",
    )
    assert isinstance(refused, Refusal)
    assert refused.text == (
        "Namespace t metadata.annotations[slurm-syncer.dev/pod-overrides]: acount, zone is not a setting; "
        "name some of partition, account, qos, time-limit, nice, constraint, reservation, or *"
    )


def test_a_pod_may_not_raise_its_priority() -> None:
    refused = resolve("t", {Keys.JOB_NICE: "-1"}, {})
    assert refused == Refusal(
        field="metadata.annotations[slurm-syncer.dev/nice]",
        message="a pod may only lower its priority (nice >= 0); a negative nice is set on its Namespace "
        "(slurm-syncer.dev/nice)",
    )
    assert resolve("t", {Keys.JOB_NICE: "0"}, {}) == Settings(nice=0)
    assert resolve("t", {}, {Keys.JOB_NICE: "-2147483645"}) == Settings(nice=-2147483645)


NAME = "(letters, digits, '.', '_', '-')"
NICE = "a whole number, -2147483645 to 2147483645"
TIME = "minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]] or UNLIMITED"


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        (Keys.JOB_TIME_LIMIT, "1h", f"'1h' is not a Slurm time limit ({TIME})"),
        (Keys.JOB_NICE, "1.5", f"'1.5' is not a Slurm nice value ({NICE})"),
        (Keys.JOB_NICE, "2147483646", f"'2147483646' is not a Slurm nice value ({NICE})"),
        (
            Keys.JOB_CONSTRAINT,
            "a b",
            "'a b' is not a Slurm feature expression (as sbatch --constraint takes)",
        ),
        (Keys.JOB_PARTITION, "a,,b", f"'a,,b' is not a comma list of Slurm names {NAME}"),
        (Keys.JOB_ACCOUNT, "a,b", f"'a,b' is not a Slurm name {NAME}"),
        (Keys.JOB_QOS, "q/1", f"'q/1' is not a Slurm name {NAME}"),
        (Keys.JOB_RESERVATION, "r 1", f"'r 1' is not a Slurm name {NAME}"),
        (Keys.JOB_PARTITION, "  ", "empty: give a value or remove the annotation"),
    ],
)
def test_bad_values_name_the_annotation(key: str, text: str, message: str) -> None:
    everything = {Keys.POD_OVERRIDES: "*"}
    assert resolve("t", {key: text}, everything) == Refusal(
        field=f"metadata.annotations[{key}]", message=message
    )
    assert resolve("t", {}, {key: text}) == Refusal(
        field=f"metadata.annotations[{key}]", message=message, object="Namespace t"
    )


def test_accepted_values() -> None:
    everything = {Keys.POD_OVERRIDES: "*"}
    good = {
        Keys.JOB_CONSTRAINT: "[rack1*2&rack2*4]|(a100,!old):x-y_z.1",
        Keys.JOB_PARTITION: "a.b_c-1,d",
        Keys.JOB_NICE: "+7",
    }
    assert resolve("t", good, everything) == Settings(
        constraint="[rack1*2&rack2*4]|(a100,!old):x-y_z.1", partition="a.b_c-1,d", nice=7
    )


def test_refusal_text() -> None:
    assert Refusal(field="f", message="m").text == "f: m"
    assert Refusal(field="f", message="m", object="Job a/b").text == "Job a/b f: m"
