"""Layout run decoders (protocol/layouts.py) give exactly what the general path gives."""
from __future__ import annotations

import random

import pytest

from kafka_compat.protocol import layouts
from kafka_compat.protocol.messages import metadata
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.metadata import MetadataResponse
from kafka_compat.protocol.primitives import DecodeError

Partition = MetadataResponse.MetadataResponsePartition
LAYOUT_V12 = metadata._L_MetadataResponse_MetadataResponsePartition_12


def _response(parts) -> MetadataResponse:
    return MetadataResponse(cluster_id="c", topics=[MetadataResponse.MetadataResponseTopic(
        name="t", topic_id=bytes(range(16)), partitions=parts)])


def _mixed_partitions(rng: random.Random, count: int) -> list:
    """Runs of one layout broken by other layouts, long arrays, nulls and tagged fields."""
    parts = []
    for i in range(count):
        shape = rng.choice([(3, 3, 0)] * 6 + [(3, 2, 1), (1, 1, 0), (0, 0, 0), (20, 20, 0), (16, 17, 0)])
        part = Partition(error_code=rng.choice([0, 0, 6]), partition_index=i, leader_id=rng.randrange(-1, 5),
                         leader_epoch=rng.randrange(-1, 1 << 31), replica_nodes=[rng.randrange(1 << 31)
                                                                                for _ in range(shape[0])],
                         isr_nodes=[rng.randrange(-5, 5) for _ in range(shape[1])],
                         offline_replicas=[rng.randrange(5) for _ in range(shape[2])])
        if rng.random() < 0.05:
            part.unknown_tags = [(7, b"xyz")]
        parts.append(part)
    return parts


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("version", [1, 5, 9, 12, 13])
def test_mixed_layouts_decode_as_encoded(seed, version):
    rng = random.Random(seed)
    resp = _response(_mixed_partitions(rng, rng.choice([8, 9, 50, 300])))
    if version < 9:
        for part in resp.topics[0].partitions:
            part.unknown_tags = None
    frame = resp.encode(version)
    back, end = MetadataResponse.decode(frame, version)
    assert end == len(frame)
    assert back.encode(version) == frame
    for got, sent in zip(back.topics[0].partitions, resp.topics[0].partitions):
        assert got.partition_index == sent.partition_index
        assert got.replica_nodes == sent.replica_nodes and got.isr_nodes == sent.isr_nodes
        if version >= 5:
            assert got.offline_replicas == sent.offline_replicas
        if version >= 7:
            assert got.leader_epoch == sent.leader_epoch
        else:
            assert got.leader_epoch == -1     # the default where the version has no such field
        if version >= 9:
            assert got.unknown_tags == sent.unknown_tags
    assert len(back.topics[0].partitions) == len(resp.topics[0].partitions)


def test_runs_are_decoded_by_a_layout_decoder_and_lists_are_fresh():
    parts = [Partition(partition_index=i, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2]) for i in range(100)]
    frame = _response(parts).encode(12)
    back = MetadataResponse.decode(frame, 12)[0].topics[0].partitions
    assert (3, 3, 0) in LAYOUT_V12.runs
    assert [p.partition_index for p in back] == list(range(100))
    back[0].replica_nodes.append(9)
    back[1].offline_replicas.append(9)
    assert back[2].replica_nodes == [0, 1, 2] and back[2].offline_replicas == []


def test_truncated_runs_raise_decode_error_only():
    parts = [Partition(partition_index=i, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2]) for i in range(40)]
    frame = _response(parts).encode(12)
    for cut in range(0, len(frame), 7):
        with pytest.raises(DecodeError):
            MetadataResponse.decode(frame[:cut], 12)


def test_hostile_layouts_do_not_grow_the_cache():
    """Every partition with its own layout: each decodes right, the compiled decoders stay bounded."""
    layout = metadata._L_MetadataResponse_MetadataResponsePartition_11
    parts = [Partition(partition_index=i, replica_nodes=[i] * (i % 17), isr_nodes=[i] * (i // 17 % 17))
             for i in range(400)]
    frame = _response(parts).encode(11)
    back = MetadataResponse.decode(frame, 11)[0].topics[0].partitions
    assert [p.replica_nodes for p in back] == [p.replica_nodes for p in parts]
    assert [p.isr_nodes for p in back] == [p.isr_nodes for p in parts]
    assert len(layout.runs) <= layouts.MAX_LAYOUTS


def test_fixed_width_elements_go_by_runs_too():
    """Fetch partitions (all fixed-width) decode a run per request, with this version's defaults."""
    parts = [FetchRequest.FetchPartition(partition=i, fetch_offset=i * 1000, partition_max_bytes=1 << 20,
                                         current_leader_epoch=3, log_start_offset=-1) for i in range(64)]
    req = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, topics=[
        FetchRequest.FetchTopic(topic="t", partitions=parts)])
    frame = req.encode(12)
    back, end = FetchRequest.decode(frame, 12)
    assert end == len(frame) and back == req
    assert back.topics[0].partitions[63].fetch_offset == 63000
    assert back.topics[0].partitions[5].high_watermark == (1 << 63) - 1   # not in v12: its default
