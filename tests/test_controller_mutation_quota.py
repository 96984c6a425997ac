"""The controller mutation quota (KIP-599) and the per-request partition cap, on a real broker.

With controller.mutation.rate.default=0.1 and ten one-second windows the bucket holds one
partition and refills in 10 s a partition: a first creation may take it below zero, the next strict request (CreateTopics
v6+, CreatePartitions v3+, DeleteTopics v5+) is refused with THROTTLING_QUOTA_EXCEEDED and a
throttle time, an older version is let through but told to back off, and Metadata does not
auto-create topics for a client over its quota."""
from __future__ import annotations

import pytest
from wire import WireClient

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.create_partitions import CreatePartitionsRequest
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.delete_topics import DeleteTopicsRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.server.controller_mutation_quota import ControllerMutationQuotaManager, default_user_quota
from kafka_compat.testing import EmbeddedBroker

QUOTA = {"controller.mutation.rate.default": 0.1, "controller.quota.window.num": 10,
         "controller.quota.window.size.seconds": 1}


def create(c: WireClient, version: int, *topics: tuple[str, int]):
    return c.call(19, version, CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
        for n, p in topics], timeout_ms=30000, validate_only=False))


def metadata_names(c: WireClient) -> set[str]:
    return {t.name for t in c.call(3, 1, MetadataRequest(topics=None)).topics}


class FakeRequest:
    def __init__(self, api_key, api_version, client_id="c"):
        self.api_key, self.api_version, self.client_id, self.connection = api_key, api_version, client_id, None


def test_token_bucket_refills_at_the_rate_and_is_shared_by_a_users_client_ids():
    now = [0.0]
    m = ControllerMutationQuotaManager(default_user_quota(2.0), window_num=2, window_size_seconds=1,
                                       clock=lambda: now[0])
    q = m.quota_for_request(FakeRequest(19, 6, "a"))
    q.record(7)                                      # burst 4: accepted, bucket at -3
    assert q.throttle_time_ms == 1501                # 3 tokens at 2/s
    other = m.quota_for_request(FakeRequest(19, 6, "b"))   # another client id, same (ANONYMOUS) user
    with pytest.raises(Exception, match="throttling quota"):
        other.record(1)
    m.quota_for_request(FakeRequest(19, 5, "b")).record(1)  # permissive: recorded, not refused (-4)
    m.quota_for_request(FakeRequest(19, 5, "b")).record(1)  # (-5)
    with pytest.raises(Exception, match="throttling quota"):    # but not beyond a whole burst below zero
        m.quota_for_request(FakeRequest(19, 5, "b")).record(1)
    now[0] = 2.5                                     # -5 + 5 = 0: strict requests pass again
    m.quota_for_request(FakeRequest(19, 6, "a")).record(1)
    assert ControllerMutationQuotaManager(default_user_quota(None)).quota_for_request(
        FakeRequest(19, 6)).throttle_time_ms == 0


def test_strict_and_permissive_quota_on_a_broker():
    with EmbeddedBroker(QUOTA) as b:
        c = WireClient("127.0.0.1", b.port)
        first = create(c, 6, ("q1", 2))             # 1 token: accepted, the bucket goes to -1 (10 s)
        assert first.topics[0].error_code == ErrorCode.NONE
        r = create(c, 6, ("q2", 1), ("q3", 1))
        assert [t.error_code for t in r.topics] == [ErrorCode.THROTTLING_QUOTA_EXCEEDED] * 2
        assert "throttling quota" in r.topics[0].error_message
        assert r.throttle_time_ms > 0
        old = create(c, 5, ("q4", 1))               # v5 is permissive: created, with a throttle time
        assert old.topics[0].error_code == ErrorCode.NONE and old.throttle_time_ms > 0
        grown = c.call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="q1", count=4, assignments=None)], timeout_ms=30000, validate_only=False))
        assert grown.results[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        deleted = c.call(20, 5, DeleteTopicsRequest(topic_names=["q4"], timeout_ms=30000))
        assert deleted.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        auto = c.call(3, 4, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto1")],
                                            allow_auto_topic_creation=True))
        assert auto.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert metadata_names(c) == {"q1", "q4"}
        again = create(c, 5, ("q5", 1))             # permissive, but now a whole burst below zero
        assert again.topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        c.sock.close()


def test_no_quota_by_default_and_the_partition_cap():
    with EmbeddedBroker() as b:
        c = WireClient("127.0.0.1", b.port)
        for i in range(3):
            assert create(c, 6, (f"n{i}", 4)).topics[0].error_code == ErrorCode.NONE
        r = create(c, 6, ("big", 9999), ("big2", 2))      # Kafka refuses the whole request
        assert [t.error_code for t in r.topics] == [ErrorCode.POLICY_VIOLATION] * 2
        assert r.topics[0].error_message == "Excessively large number of partitions per request."
        grown = c.call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="n0", count=20000, assignments=None)], timeout_ms=30000, validate_only=False))
        assert grown.results[0].error_code == ErrorCode.POLICY_VIOLATION
        assert metadata_names(c) == {"n0", "n1", "n2"}
        c.sock.close()
