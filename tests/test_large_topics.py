"""A topic of many partitions is made and deleted a few per event-loop turn (see
server/local_controller.py): every partition comes online, other clients are answered
meanwhile, and a topic made again under a deleted one's name starts empty."""
from __future__ import annotations

import os
import time

from wire import WireClient

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.delete_topics import DeleteTopicsRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.testing import EmbeddedBroker

PARTITIONS = 67                         # more than one event-loop turn makes, however fast the disk


def leaders(c: WireClient, topic: str) -> list[int]:
    r = c.call(3, 1, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]))
    return [p.leader_id for p in sorted(r.topics[0].partitions, key=lambda p: p.partition_index)]


def wait_for(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout}s")


def test_many_partitions_come_online_in_chunks_and_go_away_the_same_way():
    with EmbeddedBroker() as b:
        c = WireClient("127.0.0.1", b.port, timeout=120)
        other = WireClient("127.0.0.1", b.port, timeout=120)
        r = c.call(19, 5, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="wide", num_partitions=PARTITIONS, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False))
        assert r.topics[0].error_code == ErrorCode.NONE
        # every partition is listed at once (some perhaps without a leader yet), and all get one
        assert len(leaders(c, "wide")) == PARTITIONS
        assert other.call(18, 3, ApiVersionsRequest(client_software_name="o", client_software_version="1")
                          ).error_code == 0
        wait_for(lambda: leaders(c, "wide") == [0] * PARTITIONS, "all partitions leading")
        logs = os.path.join(b.data_dir, "logs")
        assert len([d for d in os.listdir(logs) if d.startswith("wide-")]) == PARTITIONS
        # delete, then make it again at once: the new topic's partitions are new logs
        d = c.call(20, 4, DeleteTopicsRequest(topic_names=["wide"], timeout_ms=30000))
        assert d.responses[0].error_code == ErrorCode.NONE
        r = c.call(19, 5, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="wide", num_partitions=2, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False))
        assert r.topics[0].error_code == ErrorCode.NONE
        wait_for(lambda: leaders(c, "wide") == [0, 0], "the new topic leading")
        wait_for(lambda: sorted(d for d in os.listdir(logs) if d.startswith("wide-")) == ["wide-0", "wide-1"],
                 "the old logs gone")
        # a clean stop in the middle of a large creation leaves a broker that starts again
        c.call(19, 5, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="wide2", num_partitions=PARTITIONS, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False))
        c.sock.close()
        other.sock.close()
        assert b.stop() == 0
        b.start()
        c = WireClient("127.0.0.1", b.port, timeout=120)
        assert leaders(c, "wide2") == [0] * PARTITIONS and leaders(c, "wide") == [0, 0]
        c.sock.close()
