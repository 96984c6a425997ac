"""A secured three-broker ZooKeeper cluster, set up as a Kafka user sets one up.

Every listener is SASL_SSL with SCRAM-SHA-512: CLIENT for clients, INTERNAL for the brokers themselves
(inter.broker.listener.name=INTERNAL, sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512, the broker's
login in listener.name.internal.scram-sha-512.sasl.jaas.config). The ACL authorizer runs with
allow.everyone.if.no.acl.found=false and super.users User:broker and User:admin. Before any broker
starts, `kafka-compat configs --zookeeper` writes those two users' SCRAM credentials into ZooKeeper,
as `kafka-configs.sh --zookeeper` does for Kafka.

Then, as the tests check: users and ACLs made through broker 0 are in Kafka's znodes and hold on
brokers 1 and 2 without a restart; records produced with acks=all reach all three replicas byte for
byte over the secured inter-broker listener and are consumed through brokers 1 and 2 by
confluent-kafka and kafka-python; a user without ACLs is refused on every broker, for data and for the
brokers' own requests; killing a leader (and the controller) loses no acknowledged record, and the
restarted brokers log in again and rejoin the ISR.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cluster_support import WAIT, read_all, segment_bytes, skip_without_cluster, wait_for_full_isr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from secure_broker import (  # noqa: E402
    ALL,
    GROUP,
    LITERAL,
    PREFIXED,
    READ,
    WRITE,
    TlsFiles,
    acl,
    connect,
    scram_upsertion,
)
from secure_broker import TOPIC as TOPIC_TYPE  # noqa: E402
from test_cluster_faults import check_exactly_once_in_order  # noqa: E402

from kafka_compat.protocol.errors import ErrorCode  # noqa: E402
from kafka_compat.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest  # noqa: E402
from kafka_compat.protocol.messages.create_acls import CreateAclsRequest  # noqa: E402
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kafka_compat.protocol.messages.delete_acls import DeleteAclsRequest  # noqa: E402
from kafka_compat.protocol.messages.elect_leaders import ElectLeadersRequest  # noqa: E402
from kafka_compat.protocol.messages.fetch import FetchRequest  # noqa: E402
from kafka_compat.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kafka_compat.protocol.messages.produce import ProduceRequest  # noqa: E402
from kafka_compat.protocol.messages.update_metadata import UpdateMetadataRequest  # noqa: E402
from kafka_compat.protocol.records import build_batch  # noqa: E402
from kafka_compat.protocol.sasl import ScramMechanism  # noqa: E402
from kafka_compat.testing import EmbeddedCluster, EmbeddedZooKeeper  # noqa: E402

pytestmark = skip_without_cluster()
ck = pytest.importorskip("confluent_kafka")

E = ErrorCode
MECHANISM = "SCRAM-SHA-512"
LISTENERS = {"CLIENT": "SASL_SSL", "INTERNAL": "SASL_SSL"}
BROKER_USER, ADMIN = ("broker", "broker-secret"), ("admin", "admin-secret")
USERS = {"alice": "alice-secret", "mallory": "mallory-secret"}
TOPIC, PARTITIONS, COUNT = "sec-t", 3, 300


def scram_jaas(user: str, password: str) -> str:
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
            f'password="{password}";')


def broker_settings(tls: TlsFiles) -> dict:
    return {
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "sasl.enabled.mechanisms": MECHANISM,
        "listener.name.internal.scram-sha-512.sasl.jaas.config": scram_jaas(*BROKER_USER),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": tls.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": tls.ca_path,     # whom brokers trust as clients
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{BROKER_USER[0]};User:{ADMIN[0]}",
        "allow.everyone.if.no.acl.found": "false",
        "min.insync.replicas": 2, "default.replication.factor": 3, "zookeeper.session.timeout.ms": 4000,
        "replica.lag.time.max.ms": 10000, "group.initial.rebalance.delay.ms": 0,
    }


def run(coro):
    return asyncio.run(coro)


async def call(broker, user: str, password: str, api_key: int, version: int, body):
    client = await connect(broker, "CLIENT", user, password, mechanism=MECHANISM)
    try:
        return await client.call(api_key, version, body)
    finally:
        await client.close()


def can_log_in(broker, user: str, password: str) -> bool:
    async def go():
        try:
            await (await connect(broker, "CLIENT", user, password, mechanism=MECHANISM)).close()
            return True
        except Exception:
            return False
    return run(go())


def controller_known(broker) -> bool:
    try:
        return run(call(broker, *ADMIN, 3, 12, MetadataRequest(topics=[]))).controller_id >= 0
    except Exception:
        return False


def librdkafka(cluster, broker: int, user: str) -> dict:
    return {"bootstrap.servers": cluster.brokers[broker].bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": cluster.tls.ca_path, "sasl.mechanism": MECHANISM, "sasl.username": user,
            "sasl.password": USERS[user]}


def kafka_python(cluster, broker: int, user: str) -> dict:
    return {"bootstrap_servers": cluster.brokers[broker].bootstrap, "security_protocol": "SASL_SSL",
            "ssl_cafile": cluster.tls.ca_path, "sasl_mechanism": MECHANISM, "sasl_plain_username": user,
            "sasl_plain_password": USERS[user]}


def create_topic(cluster, name: str) -> None:
    """By admin through broker 0 (CreateTopics goes on to the controller), then until every replica is in sync."""
    response = run(call(cluster.brokers[0], *ADMIN, 19, 7, CreateTopicsRequest(timeout_ms=30000, topics=[
        CreateTopicsRequest.CreatableTopic(name=name, num_partitions=PARTITIONS, replication_factor=3)])))
    assert [t.error_code for t in response.topics] == [E.NONE], response
    for p in range(PARTITIONS):
        wait_for_full_isr(cluster, name, p)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tls = TlsFiles(str(tmp_path_factory.mktemp("tls")))
    zookeeper = EmbeddedZooKeeper().start()
    c = EmbeddedCluster(3, broker_settings(tls), zookeeper=zookeeper, listeners=LISTENERS)
    c.tls = tls
    try:
        for user, password in (BROKER_USER, ADMIN):     # the users brokers and the operator log in with
            subprocess.run([sys.executable, "-m", "kafka_compat", "configs", "--zookeeper", c.zookeeper_connect,
                            "--alter", "--entity-type", "users", "--entity-name", user,
                            "--add-config", f"{MECHANISM}=[iterations=4096,password={password}]"],
                           check=True, timeout=WAIT, capture_output=True)
        c.start(WAIT)
        for b in c.brokers:
            b.tls = tls
        try:
            c.wait_until(lambda: all(controller_known(b) for b in c.brokers), WAIT, "every broker to know the "
                         "controller")
            # users and ACLs, all through broker 0
            response = run(call(c.brokers[0], *ADMIN, 51, 0, AlterUserScramCredentialsRequest(
                deletions=[], upsertions=[scram_upsertion(u, p, ScramMechanism.SCRAM_SHA_512) for u, p in
                                          USERS.items()])))
            assert [r.error_code for r in response.results] == [E.NONE] * len(USERS), response
            creations = [acl("User:alice", ALL, "sec-", pattern=PREFIXED), acl("User:alice", READ, "sec-g", GROUP,
                                                                               pattern=PREFIXED)]
            response = run(call(c.brokers[0], *ADMIN, 30, 3, CreateAclsRequest(creations=creations)))
            assert [r.error_code for r in response.results] == [E.NONE] * len(creations), response
            create_topic(c, TOPIC)
        except BaseException:
            print(c.logs())
            raise
        yield c
    finally:
        c.close()
        zookeeper.close()


def test_users_and_acls_made_through_one_broker_are_kafkas_znodes_and_hold_on_every_broker(cluster):
    """/config/users/<user> (with a /config/changes notification) and /kafka-acl-extended/prefixed/Topic/sec-
    as Kafka's ZooKeeper mode writes them; brokers 1 and 2 let alice in without a restart."""
    users = json.loads(cluster.zk.get("/config/users/alice")[0])
    assert users["version"] == 1 and set(users["config"]) == {MECHANISM}
    assert "iterations=4096" in users["config"][MECHANISM] and "stored_key=" in users["config"][MECHANISM]
    changes = [json.loads(cluster.zk.get(f"/config/changes/{c}")[0]) for c in cluster.zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "users/alice"} in changes
    acls = json.loads(cluster.zk.get("/kafka-acl-extended/prefixed/Topic/sec-")[0])
    assert acls == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                            "operation": "All", "host": "*"}]}
    for b in cluster.brokers:
        cluster.wait_until(lambda: can_log_in(b, "alice", USERS["alice"]), WAIT, "alice's login on every broker")
        assert not can_log_in(b, "alice", "wrong")


def test_acks_all_records_replicate_over_the_secured_listener_and_are_consumed_through_other_brokers(cluster):
    """confluent-kafka produces acks=all through broker 0; confluent-kafka (in a group) and kafka-python
    consume everything through brokers 1 and 2; every replica's log is the same bytes, all in sync."""
    producer = ck.Producer({**librdkafka(cluster, 0, "alice"), "acks": "all", "linger.ms": 5})
    failed = []
    for i in range(COUNT):
        producer.produce(TOPIC, b"v-%d" % i, partition=i % PARTITIONS,
                         on_delivery=lambda err, msg: failed.append(err) if err else None)
    assert producer.flush(WAIT) == 0 and failed == []

    consumer = ck.Consumer({**librdkafka(cluster, 1, "alice"), "group.id": "sec-g-1", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got = []
    deadline = time.monotonic() + WAIT
    while len(got) < COUNT and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=500, timeout=0.5):
            assert m.error() is None, m.error()
            got.append(m.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == sorted(b"v-%d" % i for i in range(COUNT))

    from kafka import KafkaConsumer, TopicPartition
    kp = KafkaConsumer(**kafka_python(cluster, 2, "alice"), enable_auto_commit=False)
    try:
        kp.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        kp.seek_to_beginning()
        read = []
        deadline = time.monotonic() + WAIT
        while len(read) < COUNT and time.monotonic() < deadline:
            for msgs in kp.poll(timeout_ms=500).values():
                read.extend(m.value for m in msgs)
    finally:
        kp.close()
    assert sorted(read) == sorted(got)

    for p in range(PARTITIONS):
        assert sorted(wait_for_full_isr(cluster, TOPIC, p)) == [0, 1, 2]
        cluster.wait_until(lambda: len({segment_bytes(cluster, b, TOPIC, p) for b in range(3)}) == 1, WAIT,
                           f"every replica of {TOPIC}-{p} to hold the leader's bytes")
        assert segment_bytes(cluster, 0, TOPIC, p).count(b"v-") == COUNT // PARTITIONS


def produce_body(topic: str) -> ProduceRequest:
    return ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(
            index=0, records=bytes(build_batch([(None, b"x")])))])])


def produce_error(broker, user: str, topic: str) -> int:
    response = run(call(broker, user, USERS[user], 0, 9, produce_body(topic)))
    return response.responses[0].partition_responses[0].error_code


def test_a_user_without_acls_is_refused_on_every_broker(cluster):
    """mallory logs in everywhere but may not write, read or see sec-t, nor send what only brokers send
    (UpdateMetadata: CLUSTER_ACTION) or what only operators do (ElectLeaders: ALTER); librdkafka reports
    TOPIC_AUTHORIZATION_FAILED. Nothing she tried reached the log."""
    fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
        topic=TOPIC, partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    for b in cluster.brokers:
        cluster.wait_until(lambda: can_log_in(b, "mallory", USERS["mallory"]), WAIT, "mallory's login")
        assert produce_error(b, "mallory", TOPIC) == E.TOPIC_AUTHORIZATION_FAILED
        fetched = run(call(b, "mallory", USERS["mallory"], 1, 12, fetch))
        assert fetched.responses[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        metadata = run(call(b, "mallory", USERS["mallory"], 3, 12, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)])))
        assert [t.error_code for t in metadata.topics] == [E.TOPIC_AUTHORIZATION_FAILED]
        update = run(call(b, "mallory", USERS["mallory"], 6, 8, UpdateMetadataRequest(
            controller_id=0, controller_epoch=99, broker_epoch=-1, topic_states=[], live_brokers=[])))
        assert update.error_code == E.CLUSTER_AUTHORIZATION_FAILED
        elect = run(call(b, "mallory", USERS["mallory"], 43, 2, ElectLeadersRequest(
            election_type=0, topic_partitions=None, timeout_ms=1000)))
        assert elect.error_code == E.CLUSTER_AUTHORIZATION_FAILED

    errors = []
    producer = ck.Producer({**librdkafka(cluster, 2, "mallory"), "acks": "all", "message.timeout.ms": 30000})
    producer.produce(TOPIC, b"mallory", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(WAIT)
    assert [e.code() for e in errors] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    for b in range(3):
        assert b"mallory" not in segment_bytes(cluster, b, TOPIC, 0)


def test_an_acl_made_through_one_broker_is_enforced_by_all(cluster):
    """WRITE on sec-m for mallory, created through broker 2, lets her produce on every broker: the leader
    takes the record, the others now answer as for anyone allowed (not the leader), not with an ACL error."""
    topic = "sec-m"
    create_topic(cluster, topic)
    response = run(call(cluster.brokers[2], *ADMIN, 30, 3, CreateAclsRequest(creations=[
        acl("User:mallory", WRITE, topic)])))
    assert [r.error_code for r in response.results] == [E.NONE]
    leader = cluster.leader(topic, 0)
    for i, b in enumerate(cluster.brokers):
        expected = E.NONE if i == leader else E.NOT_LEADER_OR_FOLLOWER
        cluster.wait_until(lambda: produce_error(b, "mallory", topic) == expected, WAIT,
                           f"broker {i} to apply the ACL made through broker 2")

    any_acl_on_topic = DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=TOPIC_TYPE, resource_name_filter=topic, pattern_type_filter=LITERAL, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)
    response = run(call(cluster.brokers[1], *ADMIN, 31, 3, DeleteAclsRequest(filters=[any_acl_on_topic])))
    assert [len(r.matching_acls) for r in response.filter_results] == [1], response
    assert not cluster.zk.exists(f"/kafka-acl/Topic/{topic}")
    for i, b in enumerate(cluster.brokers):         # deleted through broker 1: refused everywhere again
        cluster.wait_until(lambda: produce_error(b, "mallory", topic) == E.TOPIC_AUTHORIZATION_FAILED, WAIT,
                           f"broker {i} to apply the deletion made through broker 1")


def test_a_password_changed_or_a_user_deleted_through_one_broker_holds_on_every_broker(cluster):
    """trudy, made through broker 2, logs in everywhere; her new password set through broker 0 replaces the
    old one on every broker; once deleted through broker 1 she logs in nowhere (her znode's config is empty)."""
    def alter(broker: int, upsert: str | None = None, delete: bool = False) -> None:
        response = run(call(cluster.brokers[broker], *ADMIN, 51, 0, AlterUserScramCredentialsRequest(
            deletions=[AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                name="trudy", mechanism=ScramMechanism.SCRAM_SHA_512.type)] if delete else [],
            upsertions=[scram_upsertion("trudy", upsert, ScramMechanism.SCRAM_SHA_512)] if upsert else [])))
        assert [r.error_code for r in response.results] == [E.NONE], response

    def everywhere(password: str, expected: bool, what: str) -> None:
        for i, b in enumerate(cluster.brokers):
            cluster.wait_until(lambda: can_log_in(b, "trudy", password) == expected, WAIT, f"{what} on broker {i}")

    alter(2, upsert="first")
    everywhere("first", True, "trudy's login")
    alter(0, upsert="second")
    everywhere("first", False, "the old password to be refused")
    everywhere("second", True, "the new password")
    alter(1, delete=True)
    everywhere("second", False, "the deleted user to be refused")
    assert json.loads(cluster.zk.get("/config/users/trudy")[0]) == {"version": 1, "config": {}}   # as Kafka leaves it


class SecuredProducer:
    """alice's idempotent acks=all producer writing p-<i> to partition i % 3 until stopped, in a thread."""

    def __init__(self, cluster, topic: str):
        self.producer = ck.Producer({**librdkafka(cluster, 0, "alice"), "acks": "all", "enable.idempotence": True,
                                     "linger.ms": 5, "delivery.timeout.ms": 300000})
        self.topic = topic
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _done(self, err, msg) -> None:
        (self.failed.append(err) if err else self.acked.append((msg.partition(), msg.offset(), msg.value())))

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, b"p-%d" % i, partition=i % PARTITIONS, on_delivery=self._done)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.005)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()
        self.producer.flush(WAIT)


def test_killing_a_leader_and_the_controller_loses_no_acknowledged_record(cluster):
    """Each killed broker comes back, logs in over INTERNAL again and rejoins every ISR; then every
    acknowledged record is in the log exactly once and in order."""
    topic = "sec-f"
    create_topic(cluster, topic)
    producer = SecuredProducer(cluster, topic)
    try:
        for fault in range(2):
            before = len(producer.acked)
            cluster.wait_until(lambda: len(producer.acked) > before + 100, WAIT, "acknowledged writes")
            victim = cluster.leader(topic, 0) if fault == 0 else cluster.wait_for_controller()
            cluster.kill(victim)
            for p in range(PARTITIONS):
                cluster.wait_for_leader(topic, p, WAIT, exclude={victim})
            cluster.wait_for_controller(WAIT, exclude={victim})
            # its ZooKeeper session must end before the same broker id can register again (as in Kafka)
            cluster.wait_until(lambda: victim not in cluster.registered(), WAIT, "the killed broker's session to end")
            cluster.restart(victim)
            for p in range(PARTITIONS):
                assert len(wait_for_full_isr(cluster, topic, p)) == 3
        before = len(producer.acked)
        cluster.wait_until(lambda: len(producer.acked) > before + 100, WAIT, "writes after the last fault")
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        producer.finish()
    assert producer.failed == [] and len(producer.acked) > 300
    log = read_all(cluster, topic, PARTITIONS, {**librdkafka(cluster, 1, "alice"), "group.id": "sec-g-read"})
    check_exactly_once_in_order(log, producer.acked, b"p-")
