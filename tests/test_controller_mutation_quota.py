"""The controller mutation quota (KIP-599) and the per-request partition cap, on a real broker.

The quota is the client quota `controller_mutation_rate`, set with AlterClientQuotas. With 0.1 for
the default user and ten one-second windows the bucket holds one partition and refills in 10 s a
partition: a first creation may take it below zero, the next strict request (CreateTopics v6+,
CreatePartitions v3+, DeleteTopics v5+) is refused with THROTTLING_QUOTA_EXCEEDED and a throttle
time, an older version is let through but told to back off, and Metadata does not auto-create
topics for a client over its quota. The quota is kept across a restart; a client-id quota slows
that client id alone."""
from __future__ import annotations

import pytest
from test_quotas import alter, describe
from wire import WireClient, encode_request

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.create_partitions import CreatePartitionsRequest
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.delete_topics import DeleteTopicsRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.server.client_quota_manager import CONTROLLER_MUTATION_RATE, DEFAULT, QuotaManagers
from kafka_compat.server.controller_mutation_quota import ControllerMutationQuotaManager
from kafka_compat.testing import EmbeddedBroker

WINDOWS = {"controller.quota.window.num": 10, "controller.quota.window.size.seconds": 1}
MATCH_DEFAULT = 1


def create_body(*topics: tuple[str, int]) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
        for n, p in topics], timeout_ms=30000, validate_only=False)


def create(c: WireClient, version: int, *topics: tuple[str, int]):
    return c.call(19, version, create_body(*topics))


def create_as(c: WireClient, client_id: str, *topics: tuple[str, int]):
    c.send_raw(encode_request(19, 6, create_body(*topics), 1, client_id))
    return c.receive(19, 6)[1]


def metadata_names(c: WireClient) -> set[str]:
    return {t.name for t in c.call(3, 1, MetadataRequest(topics=None)).topics}


class FakeRequest:
    def __init__(self, api_key, api_version, client_id="c"):
        self.api_key, self.api_version, self.client_id, self.connection = api_key, api_version, client_id, None
        self.throttle_time_ms = -1


def test_token_bucket_refills_at_the_rate_and_follows_the_most_specific_quota():
    now = [0]
    quotas = QuotaManagers(controller_samples=2, controller_window_seconds=1, clock=lambda: now[0])
    m = ControllerMutationQuotaManager(quotas.controller_mutation)
    assert m.quota_for_request(FakeRequest(19, 6)).bucket is None              # no quota configured: no bucket
    quotas.update_entity(DEFAULT, None, {CONTROLLER_MUTATION_RATE: "2.0"})      # every user: 2 partitions/s
    request = FakeRequest(19, 6, "a")
    q = m.quota_for_request(request)
    q.record(7)                                      # burst 4: accepted, bucket at -3
    assert q.throttle_time_ms == 1501 and request.throttle_time_ms == 1501      # 3 tokens at 2/s; muted as long
    other = m.quota_for_request(FakeRequest(19, 6, "b"))   # another client id, same (ANONYMOUS) user: same bucket
    with pytest.raises(Exception, match="throttling quota"):
        other.record(1)
    m.quota_for_request(FakeRequest(19, 5, "b")).record(1)  # permissive: recorded, not refused (-4)
    m.quota_for_request(FakeRequest(19, 5, "b")).record(1)  # (-5)
    with pytest.raises(Exception, match="throttling quota"):    # but not beyond a whole burst below zero
        m.quota_for_request(FakeRequest(19, 5, "b")).record(1)
    quotas.update_entity(None, "b", {CONTROLLER_MUTATION_RATE: "100"})   # user quotas outrank client-id ones...
    with pytest.raises(Exception, match="throttling quota"):
        m.quota_for_request(FakeRequest(19, 6, "b")).record(1)
    quotas.update_entity(DEFAULT, "b", {CONTROLLER_MUTATION_RATE: "100"})    # ...(user, client-id) ones do not
    m.quota_for_request(FakeRequest(19, 6, "b")).record(100)
    now[0] = 2500                                    # -5 + 5 = 0: strict requests pass again
    m.quota_for_request(FakeRequest(19, 6, "a")).record(1)
    quotas.update_entity(DEFAULT, None, {})          # quota removed: no bucket, no throttle
    assert m.quota_for_request(FakeRequest(19, 6, "a")).throttle_time_ms == 0


def test_strict_and_permissive_quota_on_a_broker_kept_across_a_restart():
    with EmbeddedBroker(WINDOWS) as b:
        def c():                                    # a throttled connection is muted (KIP-219): a new one each time
            return WireClient("127.0.0.1", b.port)
        assert alter(c(), {"user": None}, {CONTROLLER_MUTATION_RATE: 0.1}) == (ErrorCode.NONE, None)
        assert describe(c(), [("user", MATCH_DEFAULT, None)]) == {(("user", None),): {CONTROLLER_MUTATION_RATE: 0.1}}
        first = create(c(), 6, ("q1", 2))           # 1 token: accepted, the bucket goes to -1 (10 s)
        assert first.topics[0].error_code == ErrorCode.NONE
        r = create(c(), 6, ("q2", 1), ("q3", 1))
        assert [t.error_code for t in r.topics] == [ErrorCode.THROTTLING_QUOTA_EXCEEDED] * 2
        assert "throttling quota" in r.topics[0].error_message
        assert r.throttle_time_ms > 0
        old = create(c(), 5, ("q4", 1))             # v5 is permissive: created, with a throttle time
        assert old.topics[0].error_code == ErrorCode.NONE and old.throttle_time_ms > 0
        grown = c().call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="q1", count=4, assignments=None)], timeout_ms=30000, validate_only=False))
        assert grown.results[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        deleted = c().call(20, 5, DeleteTopicsRequest(topic_names=["q4"], timeout_ms=30000))
        assert deleted.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        auto = c().call(3, 4, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto1")],
                                              allow_auto_topic_creation=True))
        assert auto.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert metadata_names(c()) == {"q1", "q4"}
        again = create(c(), 5, ("q5", 1))           # permissive, but now a whole burst below zero
        assert again.topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        b.restart()                                 # a new, full bucket of one token: the quota is still there
        assert create(c(), 6, ("r1", 2)).topics[0].error_code == ErrorCode.NONE
        assert create(c(), 6, ("r2", 1)).topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_a_client_id_quota_slows_that_client_alone():
    with EmbeddedBroker(WINDOWS) as b:
        c = WireClient("127.0.0.1", b.port)
        assert alter(c, {"client-id": "greedy"}, {CONTROLLER_MUTATION_RATE: 0.1}) == (ErrorCode.NONE, None)
        greedy = create_as(c, "greedy", ("g1", 2))      # accepted, the bucket at -1: c is muted for 10 s
        assert greedy.topics[0].error_code == ErrorCode.NONE and greedy.throttle_time_ms > 0
        c = WireClient("127.0.0.1", b.port)
        assert create_as(c, "greedy", ("g2", 1)).topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        polite = WireClient("127.0.0.1", b.port)
        for i in range(3):                          # no quota for any other client id
            r = create_as(polite, "polite", (f"p{i}", 4))
            assert r.topics[0].error_code == ErrorCode.NONE and r.throttle_time_ms == 0
        polite.sock.close()


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


def test_a_topic_that_fails_its_checks_takes_no_tokens():
    """As Kafka, the tokens are taken once a topic passed its checks: a refused request with thousands of
    partitions would otherwise mute its client, and every client of its user, for hours."""
    with EmbeddedBroker(WINDOWS) as b:
        def c():
            return WireClient("127.0.0.1", b.port)
        assert create(c(), 6, ("before", 1)).topics[0].error_code == ErrorCode.NONE
        assert alter(c(), {"user": None}, {CONTROLLER_MUTATION_RATE: 0.1}) == (ErrorCode.NONE, None)   # 1 token
        bad = c().call(19, 6, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="bad", num_partitions=5000, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="not a number")])],
            timeout_ms=30000, validate_only=False))
        assert bad.topics[0].error_code == ErrorCode.INVALID_CONFIG and bad.throttle_time_ms == 0
        wide = c().call(19, 6, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="wide", num_partitions=5000, replication_factor=3, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False))          # the controller's own check: one broker
        assert wide.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR and wide.throttle_time_ms == 0
        grown = c().call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="before", count=5000, assignments=[CreatePartitionsRequest.CreatePartitionsAssignment(
                broker_ids=[0])])], timeout_ms=30000, validate_only=False))   # one assignment for 4999
        assert grown.results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and grown.throttle_time_ms == 0
        ok = create(c(), 6, ("ok", 1))                # the bucket is still full
        assert ok.topics[0].error_code == ErrorCode.NONE and ok.throttle_time_ms == 0
