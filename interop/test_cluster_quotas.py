"""The controller mutation quota (KIP-599) in a two-broker ZooKeeper cluster.

The quota is set through the broker that is not the controller, with AlterClientQuotas: it lands in
ZooKeeper (/config/users/<default>, as Kafka's kafka-configs writes it), the controller learns it
from the change notification, and its CreateTopics then throttles: a creation that takes the
bucket below zero is let through, the next strict one is refused with THROTTLING_QUOTA_EXCEEDED
and a throttle time. Removing the quota, again through the other broker, lifts the limit.
"""
from __future__ import annotations

import itertools
import json
import socket
import struct
import sys
from pathlib import Path

import pytest
from cluster_support import WAIT, ReadyCluster, skip_without_cluster

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from wire import WireClient  # noqa: E402

from kafka_compat.protocol.errors import ErrorCode  # noqa: E402
from kafka_compat.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as A  # noqa: E402
from kafka_compat.protocol.messages.create_partitions import CreatePartitionsRequest  # noqa: E402
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402

pytestmark = skip_without_cluster()
RATE = "controller_mutation_rate"


@pytest.fixture(scope="module")
def cluster():
    # ten one-second windows at 0.1 partitions/s: a bucket of one partition, refilled in 10 s
    settings = {"controller.quota.window.num": 10, "controller.quota.window.size.seconds": 1,
                "default.replication.factor": 1, "group.initial.rebalance.delay.ms": 0}
    with ReadyCluster(2, settings) as c:
        yield c


def alter_default_user(broker, value: float | None) -> None:
    c = WireClient("127.0.0.1", broker.port)
    try:
        r = c.call(49, 1, A(validate_only=False, entries=[A.EntryData(
            entity=[A.EntityData(entity_type="user", entity_name=None)],
            ops=[A.OpData(key=RATE, value=value or 0.0, remove=value is None)])]))
    finally:
        c.close()
    assert (r.entries[0].error_code, r.entries[0].error_message) == (ErrorCode.NONE, None)


def call(broker, api_key: int, version: int, body):
    """One request on a new connection: a throttled one is muted (KIP-219)."""
    c = WireClient("127.0.0.1", broker.port, timeout=WAIT)
    try:
        return c.call(api_key, version, body)
    finally:
        c.close()


def create(broker, name: str, partitions: int, replication_factor: int = 1):
    """CreateTopics v6: strict."""
    return call(broker, 19, 6, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[], configs=[])],
        timeout_ms=30000, validate_only=False))


def test_a_quota_set_through_another_broker_throttles_the_controllers_create_topics(cluster):
    controller = cluster.brokers[cluster.controller()]
    other = next(b for b in cluster.brokers if b is not controller)
    names = (f"t{i}" for i in itertools.count())
    assert create(controller, next(names), 4).topics[0].error_code == ErrorCode.NONE     # no quota yet

    alter_default_user(other, 0.1)
    assert json.loads(cluster.zk.get("/config/users/<default>")[0]) == {"version": 1, "config": {RATE: "0.1"}}
    refused = []

    def throttled():
        # each accepted creation takes the bucket further below zero, once the controller has the quota
        r = create(controller, next(names), 2)
        if r.topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED:
            refused.append(r)
        else:
            assert r.topics[0].error_code == ErrorCode.NONE
        return refused
    cluster.wait_until(throttled, WAIT, "the controller to apply the quota set through the other broker")
    assert refused[0].throttle_time_ms > 0 and "throttling quota" in refused[0].topics[0].error_message

    # the bucket stays below zero for about 10 s. The controller checks a change before it charges the
    # quota, as ZkAdminManager does, so a change that fails its checks is told why, not to back off
    wide = create(controller, "wide", 2, replication_factor=3)
    assert wide.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR, wide
    grown = call(controller, 37, 3, CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name="t0", count=5, assignments=[CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=[99])])],
        timeout_ms=30000, validate_only=False))
    assert grown.results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT, grown
    assert create(controller, "valid", 1).topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED

    alter_default_user(other, None)
    assert json.loads(cluster.zk.get("/config/users/<default>")[0])["config"] == {}
    cluster.wait_until(lambda: create(controller, next(names), 2).topics[0].error_code == ErrorCode.NONE, WAIT,
                       "the controller to drop the quota")
    r = create(controller, next(names), 8)
    assert r.topics[0].error_code == ErrorCode.NONE and r.throttle_time_ms == 0


def answered(broker, source: str) -> bool:
    """ApiVersions on a new connection from `source`: answered, or closed unanswered."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=WAIT, source_address=(source, 0)) as s:
        s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
        try:
            return len(s.recv(8)) == 8
        except ConnectionResetError:
            return False


def test_an_ip_quota_set_through_one_broker_holds_off_connections_to_another(cluster):
    """/config/ips/<ip>, as kafka-configs --entity-type ips writes it; every broker applies it from the
    change notification, for connections to any of its listeners."""
    first, second = cluster.brokers[0], cluster.brokers[1]
    c = WireClient("127.0.0.1", first.port, timeout=WAIT)
    try:
        r = c.call(49, 1, A(validate_only=False, entries=[A.EntryData(
            entity=[A.EntityData(entity_type="ip", entity_name="127.0.0.9")],
            ops=[A.OpData(key="connection_creation_rate", value=1.0, remove=False)])]))
        assert r.entries[0].error_code == ErrorCode.NONE
        assert json.loads(cluster.zk.get("/config/ips/127.0.0.9")[0]) == {
            "version": 1, "config": {"connection_creation_rate": "1"}}
        # at 1 a second over Kafka's ten-window minimum, ten connections pass before the first is held off
        cluster.wait_until(lambda: not answered(second, "127.0.0.9"), WAIT, "the second broker to apply the quota")
        assert answered(second, "127.0.0.10")                  # other addresses are not held up
        r = c.call(49, 1, A(validate_only=False, entries=[A.EntryData(
            entity=[A.EntityData(entity_type="ip", entity_name="127.0.0.9")],
            ops=[A.OpData(key="connection_creation_rate", value=0.0, remove=True)])]))
        assert r.entries[0].error_code == ErrorCode.NONE
    finally:
        c.close()
    cluster.wait_until(lambda: answered(second, "127.0.0.9"), WAIT, "the second broker to drop the quota")
