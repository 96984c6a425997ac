"""The generated codecs: fresh, round-trip exact for every message and version, and safe on bad bytes."""
from __future__ import annotations

import filecmp
import random
import subprocess
import sys
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_compat.codegen.emit import LAYOUT_MIN
from schema_values import ROOT, all_messages, make_value, value_strategy

from kafka_compat.protocol.messages import APIS
from kafka_compat.protocol.messages.fetch import FetchResponse
from kafka_compat.protocol.messages.metadata import MetadataResponse
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.primitives import DecodeError

MESSAGES = all_messages()
CASES = [(m, cls, v) for m, cls in MESSAGES for v in m.version_list()]


def test_generated_code_is_fresh(tmp_path):
    """`python -m kafka_compat.codegen` into a temporary folder reproduces the committed files exactly."""
    out = tmp_path / "protocol"
    # `-m codegen` from the checkout's root: this checkout's codegen and schemas, not an installed copy's
    subprocess.run([sys.executable, "-m", "codegen", "--out", str(out)], cwd=ROOT, check=True,
                   capture_output=True)
    committed = ROOT / "kafka_compat" / "protocol"
    generated = sorted(p.relative_to(out) for p in out.rglob("*.py"))
    assert generated, "codegen wrote nothing"
    stale = [str(rel) for rel in generated
             if not (committed / rel).exists() or not filecmp.cmp(out / rel, committed / rel, shallow=False)]
    assert not stale, f"regenerate with `python -m kafka_compat.codegen`: {stale}"
    extra = sorted(p.name for p in (committed / "messages").glob("*.py")
                   if not (out / "messages" / p.name).exists())
    assert not extra, f"generated modules without a schema: {extra}"


def test_every_api_key_from_0_to_92_is_covered():
    controller_only = {52, 53, 54, 56, 58, 59, 62, 63, 67, 70, 73, 82}
    missing = [k for k in range(93) if k not in controller_only and k not in APIS]
    assert missing == []


@pytest.mark.parametrize("m,cls,v", CASES, ids=[f"{m.name}-v{v}" for m, _, v in CASES])
def test_round_trip(m, cls, v):
    rng = random.Random(f"{m.name}{v}")
    for _ in range(4):
        value = make_value(rng, m, cls, v)
        data = value.encode(v)
        back, end = cls.decode(data, v)
        assert end == len(data)
        assert back == value
        assert back.encode(v) == data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_round_trip_property(data):
    """Any value the schemas allow, of any message at any version, encodes, decodes back equal and
    re-encodes to the same bytes (hypothesis draws it from strategies built from the schemas, and
    shrinks a failure to the smallest value that shows it)."""
    m, cls, v = data.draw(st.sampled_from(CASES), label="message and version")
    value = data.draw(value_strategy(m, cls, v), label=f"{m.name} v{v}")
    encoded = value.encode(v)
    back, end = cls.decode(encoded, v)
    assert end == len(encoded)
    assert back == value
    assert back.encode(v) == encoded


@pytest.mark.parametrize("m,cls,v", CASES[::7], ids=[f"{m.name}-v{v}" for m, _, v in CASES[::7]])
def test_mutated_frames_raise_only_decode_error(m, cls, v):
    rng = random.Random(f"fuzz{m.name}{v}")
    value = make_value(rng, m, cls, v)
    data = bytearray(value.encode(v))
    for i in range(60):
        mutated = bytearray(data)
        op = i % 4
        if op == 0 and mutated:
            mutated[rng.randrange(len(mutated))] = rng.getrandbits(8)
        elif op == 1:
            del mutated[rng.randrange(len(mutated) + 1):]
        elif op == 2 and mutated:
            pos = rng.randrange(len(mutated))
            mutated[pos:pos + 4] = b"\x7f\xff\xff\xff"
        else:
            pos = rng.randrange(len(mutated) + 1)
            mutated[pos:pos] = b"\xff\xff\xff\xff\x0f"
        try:
            cls.decode(bytes(mutated), v)
        except DecodeError as e:
            assert e.message_name == m.name and e.version == v
            assert 0 <= e.position <= len(mutated)


def test_huge_counts_do_not_allocate():
    """A count or length of 2**31-1 in a tiny frame is refused before anything is allocated."""
    # ProduceRequest v3: TransactionalId null, acks, timeout, then a topic array claiming 2**31-1 entries.
    frame = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x00\x10" + b"\x7f\xff\xff\xff"
    tracemalloc.start()
    with pytest.raises(DecodeError) as info:
        ProduceRequest.decode(frame, 3)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "longer than the frame" in info.value.reason
    assert peak < 64 * 1024
    # Flexible version: a compact string whose varint length overflows 32 bits.
    with pytest.raises(DecodeError) as info:
        ProduceRequest.decode(b"\xff\xff\xff\xff\xff\x7f", 9)
    assert info.value.position == 0


def test_invalid_utf8_is_a_decode_error():
    frame = b"\x00\x02\xc3\x28" + b"\x00\x01" + b"\x00\x00\x00\x10" + b"\x00\x00\x00\x00"
    with pytest.raises(DecodeError) as info:
        ProduceRequest.decode(frame, 3)
    assert info.value.reason == "invalid UTF-8"


def test_records_decode_as_views_into_the_frame():
    batch = bytes(range(200)) * 10
    req = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    frame = bytearray(req.encode(9))
    back, _ = ProduceRequest.decode(frame, 9)
    records = back.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records == batch
    records[0] = 0xEE                       # a view: writing through it changes the frame
    assert 0xEE in frame and frame.index(bytes([0xEE]) + batch[1:20]) > 0


def test_fetch_response_records_can_stay_out_of_the_buffer():
    """A records value that is not a byte buffer (a file slice) is left as a hole for sendfile."""

    class Slice:
        def __len__(self):
            return 1000

    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=0, high_watermark=5, records=Slice())])])
    b = bytearray()
    holes = []
    resp.encode_into(b, 12, holes)
    assert len(holes) == 1 and isinstance(holes[0][1], Slice)
    pos = holes[0][0]
    # the compact length before the hole says 1000 + 1
    assert b[pos - 2:pos] == bytes([(1001 & 0x7F) | 0x80, 1001 >> 7])
    with pytest.raises(TypeError):
        resp.encode(12)


def _python_calls(fn) -> int:
    """How many Python-level functions `fn` calls (builtins not counted)."""
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def _produce_frame(partitions: int, batch: bytes) -> bytes:
    return ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=i, records=batch)
                                  for i in range(partitions)])]).encode(9)


def _metadata_frame(partitions: int) -> bytes:
    parts = [MetadataResponse.MetadataResponsePartition(partition_index=i, replica_nodes=[0, 1, 2],
                                                        isr_nodes=[0, 1]) for i in range(partitions)]
    return MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name="t", partitions=parts)]).encode(12)


def test_array_elements_decode_inline_without_a_call_each():
    """The structs of an array are decoded in the loop that reads it: no function call per element."""
    batch = bytes(20000)                   # a three-byte compact length, read inline too
    few, many = _produce_frame(1, batch), _produce_frame(40, batch)
    assert _python_calls(lambda: ProduceRequest.decode(few, 9)) == \
        _python_calls(lambda: ProduceRequest.decode(many, 9))
    # Long arrays of one byte layout go by protocol/layouts.py: one run decoder per run,
    # so 120 partitions cost the calls 8 do (the layout's decoder is compiled by then).
    few, many = _metadata_frame(LAYOUT_MIN), _metadata_frame(120)   # one-byte counts
    MetadataResponse.decode(few, 12)
    assert _python_calls(lambda: MetadataResponse.decode(few, 12)) == \
        _python_calls(lambda: MetadataResponse.decode(many, 12))


@pytest.mark.parametrize("size", [0, 126, 127, 16384, 2 ** 21 + 5])
def test_records_lengths_of_every_varint_width(size):
    """Compact lengths of one to four bytes, on both sides of each fast path."""
    batch = bytes(range(256)) * (size // 256) + bytes(size % 256)
    frame = _produce_frame(2, batch)
    back, end = ProduceRequest.decode(frame, 9)
    assert end == len(frame)
    assert [bytes(p.records) for p in back.topic_data[0].partition_data] == [batch, batch]
    assert back.encode(9) == frame


@pytest.mark.parametrize("count", [0, 1, 63, 64, 65, 200])
def test_long_int_arrays_and_strings_take_the_general_path(count):
    """Past the one-byte fast path (an array of 64+ ints, a string of 127+ bytes) the result is the same."""
    name = "n" * (count * 2)
    resp = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(
        name=name, partitions=[MetadataResponse.MetadataResponsePartition(
            partition_index=7, replica_nodes=list(range(count)), isr_nodes=list(range(count, 0, -1)),
            offline_replicas=[-1] * count)])])
    frame = resp.encode(12)
    back, end = MetadataResponse.decode(frame, 12)
    assert end == len(frame) and back == resp
    part = back.topics[0].partitions[0]
    assert part.replica_nodes == list(range(count)) and back.topics[0].name == name
    with pytest.raises(DecodeError):
        MetadataResponse.decode(frame[:-3], 12)
