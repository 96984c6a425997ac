"""`__consumer_offsets` stays compact: 100,000 commits by one group shrink to a handful of records.

Every commit appends a record keyed (group, topic, partition); the log cleaner
keeps the newest per key. The broker here has small offsets-topic segments (the
cleaner never touches the active one) and a short cleaner backoff. The commits
are pipelined over one connection with our own codecs; the partition is then
read back with kafka-python as any client would read a topic.
"""
from __future__ import annotations

import socket
import struct
import time

import pytest

kafka = pytest.importorskip("kafka")

from kafka import KafkaConsumer, TopicPartition  # noqa: E402

from kafka_compat.group.coordinator_records import GROUP_METADATA_TOPIC_NAME, partition_for, read_key, read_offset_value  # noqa: E402
from kafka_compat.protocol.errors import ErrorCode  # noqa: E402
from kafka_compat.protocol.frames import request_header_version, response_header_version  # noqa: E402
from kafka_compat.protocol.messages import APIS  # noqa: E402
from kafka_compat.protocol.messages.find_coordinator import FindCoordinatorRequest  # noqa: E402
from kafka_compat.protocol.messages.headers import RequestHeader, ResponseHeader  # noqa: E402
from kafka_compat.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kafka_compat.protocol.messages.offset_commit import OffsetCommitRequest  # noqa: E402
from kafka_compat.protocol.messages.offset_fetch import OffsetFetchRequest  # noqa: E402
from kafka_compat.testing import EmbeddedBroker  # noqa: E402

COMMITS = 100_000
OFFSETS_PARTITIONS = 3
SEGMENT_BYTES = 64 * 1024      # ~600 commits per segment
FEW = 1000                     # what "few" means: 1% of the commits (the active segment holds ~600)
GROUP, TOPIC = "compact-me", "compacted-commits"


class Pipe:
    """Requests written back to back on one socket; responses read in order afterwards."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.file = self.sock.makefile("rb")
        self.correlation = 0

    def frame(self, api_key: int, version: int, body) -> bytes:
        self.correlation += 1
        b = bytearray(4)
        RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=self.correlation,
                      client_id="compaction").encode_into(b, request_header_version(APIS[api_key], version))
        body.encode_into(b, version)
        struct.pack_into(">i", b, 0, len(b) - 4)
        return bytes(b)

    def send(self, frames: list[bytes]) -> list[bytes]:
        self.sock.sendall(b"".join(frames))
        out = []
        for _ in frames:
            size, = struct.unpack(">i", self.file.read(4))
            out.append(self.file.read(size))
        return out

    @staticmethod
    def decode(api_key: int, version: int, answer: bytes):
        info = APIS[api_key]
        _, pos = ResponseHeader.decode(answer, response_header_version(info, version))
        return info.response.decode(answer, version, pos)[0]

    def call(self, api_key: int, version: int, body):
        return self.decode(api_key, version, self.send([self.frame(api_key, version, body)])[0])

    def close(self):
        self.file.close()
        self.sock.close()


def commit(pipe: Pipe, offset: int) -> bytes:
    return pipe.frame(8, 8, OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                                    name=TOPIC, partitions=[
                                                        OffsetCommitRequest.OffsetCommitRequestPartition(
                                                            partition_index=0, committed_offset=offset,
                                                            committed_metadata=f"commit {offset}")])]))


def committed(pipe: Pipe) -> tuple[int, str]:
    """The group's committed offset and metadata, once the coordinator has loaded the group."""
    deadline = time.monotonic() + 30
    while True:
        resp = pipe.call(9, 5, OffsetFetchRequest(group_id=GROUP, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]))
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert resp.error_code == 0
    p = resp.topics[0].partitions[0]
    return p.committed_offset, p.metadata


def records_in(broker, partition: int) -> list:
    """Every record of one `__consumer_offsets` partition, read with kafka-python."""
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=2000)
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        out = []
        while consumer.position(tp) < end:
            for batch in consumer.poll(timeout_ms=1000).values():
                out.extend(batch)
        return out
    finally:
        consumer.close()


def test_100k_commits_by_one_group_compact_to_a_few_records(tmp_path):
    overrides = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
                 "offsets.topic.segment.bytes": str(SEGMENT_BYTES), "log.cleaner.backoff.ms": "100"}
    with EmbeddedBroker(overrides) as broker:
        pipe = Pipe(broker.port)
        pipe.call(3, 4, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                        allow_auto_topic_creation=True))
        assert pipe.call(10, 1, FindCoordinatorRequest(key=GROUP)).error_code == 0
        for start in range(0, COMMITS, 2000):
            answers = pipe.send([commit(pipe, i) for i in range(start, start + 2000)])
            errors = {p.error_code for a in answers for t in pipe.decode(8, 8, a).topics for p in t.partitions}
            assert errors == {0}
        assert committed(pipe) == (COMMITS - 1, f"commit {COMMITS - 1}")

        partition = partition_for(GROUP, OFFSETS_PARTITIONS)
        deadline = time.monotonic() + 60
        while True:
            records = records_in(broker, partition)
            if len(records) <= FEW or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(records) <= FEW, f"{len(records)} records left after the cleaner ran"
        # what is left is still this group's offset commit, ending with the newest one
        assert {read_key(r.key) for r in records} == {(GROUP, TOPIC, 0)}
        assert read_offset_value(records[-1].value).offset == COMMITS - 1

        # the compacted partition is what a restarted coordinator loads
        pipe.close()
        broker.restart()
        pipe = Pipe(broker.port)
        assert committed(pipe) == (COMMITS - 1, f"commit {COMMITS - 1}")
        pipe.close()
