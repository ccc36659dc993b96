"""Hostile bytes into the decoders: the Slurm response decoders (one node; a full list, decoded a chunk at
a time) and the Kubernetes list/watch decoders either return well-formed structs or raise their one
documented error; nothing else escapes, and what they return converts to the syncer's model without error."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.kube.decode import Codec
from syncer.model.slurm import SlurmNode
from syncer.slurm.client import SlurmClient, decode_nodes
from syncer.slurm.errors import SlurmDecodeError
from syncer.slurm.models import NodeListResponse, NodesResponse

SAMPLE_NODE: dict[str, Any] = {
    "name": "node00001",
    "state": ["IDLE", "DRAIN"],
    "reason": "k8s: cordoned",
    "reason_set_by": "slurm",
    "reason_changed_at": {"set": True, "infinite": False, "number": 1700000000},
    "features": ["gpu"],
    "partitions": ["main"],
    "cpus": 64,
    "alloc_cpus": 0,
    "real_memory": 512000,
    "gres": "gpu:8",
}
SAMPLE = json.dumps(
    {"nodes": [SAMPLE_NODE], "last_update": {"set": True, "number": 1}, "errors": []}
).encode()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


def slurm_decode(payload: bytes) -> NodesResponse | None:
    """The single-node shape (GET /node); the full list's shape (nodes decoded a chunk at a time) must agree
    with it on every payload: the same nodes, or a SlurmDecodeError from both."""
    try:
        listed: list[SlurmNode] | None = decode_nodes(
            _nodes_of(SlurmClient._decode(payload, NodeListResponse, "nodes", 200))
        )
    except SlurmDecodeError:
        listed = None
    try:
        decoded = SlurmClient._decode(payload, NodesResponse, "nodes", 200)
    except SlurmDecodeError:
        assert listed is None, "the list's decoder took what the node decoder refused"
        raise
    assert listed is not None and decoded is not None, "the list's decoder refused what the node decoder took"
    assert listed == [raw.to_node() for raw in decoded.nodes]
    return decoded


def _nodes_of(decoded: NodeListResponse | None) -> list[msgspec.Raw]:
    assert decoded is not None
    return decoded.nodes


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_give_a_decode_error_or_nodes(payload: bytes) -> None:
    try:
        decoded = slurm_decode(payload)
    except SlurmDecodeError:
        return
    assert decoded is not None
    for raw in decoded.nodes:
        raw.to_node()


@settings(max_examples=400, deadline=None)
@given(field=st.sampled_from(sorted(SAMPLE_NODE)), value=json_values)
def test_any_field_of_any_type(field: str, value: Any) -> None:
    node = {**SAMPLE_NODE, field: value}
    payload = json.dumps({"nodes": [node]}).encode()
    try:
        decoded = slurm_decode(payload)
    except SlurmDecodeError:
        return
    assert decoded is not None
    converted = [raw.to_node() for raw in decoded.nodes]
    assert converted[0].name == node["name"]


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(SAMPLE)), flip=st.integers(min_value=0, max_value=255))
def test_truncated_or_corrupted_bodies(cut: int, flip: int) -> None:
    for payload in (SAMPLE[:cut], SAMPLE[:cut] + bytes([flip]) + SAMPLE[cut + 1 :]):
        try:
            decoded = slurm_decode(payload)
        except SlurmDecodeError:
            continue
        assert decoded is not None
        for raw in decoded.nodes:
            raw.to_node()


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["Pod", "Node", "NodeSet", "SchedulerPod", "PodUsage", "Job"]),
    body=json_values,
    raw=st.binary(max_size=200),
)
def test_kubernetes_decoders_raise_only_decode_errors(kind: str, body: Any, raw: bytes) -> None:
    codec = Codec(kind)
    for payload in (json.dumps(body).encode(), raw, json.dumps({"type": "ADDED", "object": body}).encode()):
        for decode in (codec.decode_list, codec.decode_object, codec.decode_event):
            # invalid UTF-8 surfaces as UnicodeDecodeError (a ValueError); the informer re-lists on any error
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                decode(payload)
