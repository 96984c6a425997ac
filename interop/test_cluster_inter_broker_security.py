"""Inter-broker security other than SASL_SSL + SCRAM (test_cluster_security.py has that one): a three-broker
ZooKeeper cluster whose brokers reach each other over

  ssl    security.inter.broker.protocol=SSL with mutual TLS: each broker presents its own certificate
         (subject CN=broker,OU=brokers,O=kafka-compat) and is that principal to the others. It is not a
         super user: CLUSTER_ACTION on the cluster is granted by an ACL written into ZooKeeper before the
         brokers start, in Kafka's /kafka-acl/Cluster/kafka-cluster layout, as kafka-acls.sh does.
  plain  inter.broker.listener.name=INTERNAL on SASL_PLAINTEXT with sasl.mechanism.inter.broker.protocol=PLAIN,
         the broker's login (and the users it accepts) in listener.name.internal.plain.sasl.jaas.config;
         User:broker is a super user.

Clients use a SASL_PLAINTEXT/PLAIN CLIENT listener, with allow.everyone.if.no.acl.found=false. Every
inter-broker request must carry the brokers' principal through the ACL check: the controller's
UpdateMetadata and LeaderAndIsr (a topic gets leaders and a full ISR), the replica fetchers (acks=all
records reach every replica byte for byte) and AlterPartition (a stopped follower comes back into the ISR once
restarted and caught up). And the login is enforced: a broker whose own inter-broker password is wrong
is refused by the leaders, stays out of every ISR and holds none of the acks=all records until it is
restarted with the right one.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

import pytest
from cluster_support import WAIT, segment_bytes, skip_without_cluster, wait_for_full_isr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from secure_broker import TlsFiles, connect, plain_jaas  # noqa: E402
from tls_certs import issue, name  # noqa: E402

from kafka_compat.protocol.errors import ErrorCode  # noqa: E402
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kafka_compat.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kafka_compat.testing import EmbeddedCluster, EmbeddedZooKeeper  # noqa: E402

pytestmark = skip_without_cluster()
ck = pytest.importorskip("confluent_kafka")
NameOID = pytest.importorskip("cryptography.x509.oid").NameOID

ADMIN = ("admin", "admin-secret")
BROKER_DN = "CN=broker,OU=brokers,O=kafka-compat"
TOPIC, PARTITIONS = "ib-t", 2
CHROOT = "/kafka"


def broker_certificate(tls: TlsFiles) -> str:
    """A PEM key store whose certificate serves TLS (localhost, 127.0.0.1) and also logs in to other brokers."""
    subject = name((NameOID.ORGANIZATION_NAME, "kafka-compat"), (NameOID.ORGANIZATIONAL_UNIT_NAME, "brokers"),
                   (NameOID.COMMON_NAME, "broker"))
    cert = issue(tls.ca, subject, server=True, client=True)
    return tls._write("broker.pem", cert.key_pem() + cert.cert_pem + tls.ca.cert_pem)


def settings(variant: str, tls: TlsFiles) -> tuple[dict, dict]:
    """(listeners, broker properties) of the variant."""
    common = {
        "listener.name.client.plain.sasl.jaas.config": plain_jaas({"admin": ADMIN[1]}),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "min.insync.replicas": 2, "default.replication.factor": 3, "zookeeper.session.timeout.ms": 4000,
        "replica.lag.time.max.ms": 10000,
    }
    if variant == "ssl":
        return {"CLIENT": "SASL_PLAINTEXT", "SSL": "SSL"}, {
            **common, "security.inter.broker.protocol": "SSL", "sasl.enabled.mechanisms": "PLAIN",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": broker_certificate(tls),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": tls.ca_path,
            "listener.name.ssl.ssl.client.auth": "required", "super.users": "User:admin"}
    return {"CLIENT": "SASL_PLAINTEXT", "INTERNAL": "SASL_PLAINTEXT"}, {
        **common, "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": plain_jaas({"broker": "broker-secret"}, "broker",
                                                                    "broker-secret"),
        "super.users": "User:broker;User:admin"}


def grant_cluster_action_in_zookeeper(zookeeper: EmbeddedZooKeeper, principal: str) -> None:
    """What `kafka-acls.sh --authorizer-properties zookeeper.connect=... --add --allow-principal <p>
    --operation ClusterAction --cluster` leaves in ZooKeeper."""
    from kazoo.client import KazooClient
    zk = KazooClient(zookeeper.connect_string())
    zk.start(timeout=30)
    try:
        zk.create(f"{CHROOT}/kafka-acl/Cluster/kafka-cluster", json.dumps({"version": 1, "acls": [
            {"principal": principal, "permissionType": "Allow", "operation": "ClusterAction", "host": "*"}]}).encode(),
            makepath=True)
    finally:
        zk.stop()
        zk.close()


async def admin_call(broker, api_key: int, version: int, body):
    client = await connect(broker, "CLIENT", *ADMIN, mechanism="PLAIN")
    try:
        return await client.call(api_key, version, body)
    finally:
        await client.close()


def controller_known(broker) -> bool:
    try:
        return asyncio.run(admin_call(broker, 3, 12, MetadataRequest(topics=[]))).controller_id >= 0
    except Exception:
        return False


def produce(cluster, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.brokers[0].bootstrap, "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "PLAIN", "sasl.username": ADMIN[0], "sasl.password": ADMIN[1],
                            "acks": "all", "linger.ms": 5})
    failed = []
    for i, v in enumerate(values):
        producer.produce(TOPIC, v, partition=i % PARTITIONS, on_delivery=lambda err, msg: failed.append(err) if err
                         else None)
    assert producer.flush(WAIT) == 0 and failed == []


@contextlib.contextmanager
def running(cluster: EmbeddedCluster, zookeeper: EmbeddedZooKeeper):
    """The cluster's logs printed when the test fails; cluster and ZooKeeper closed either way."""
    try:
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.close()
        zookeeper.close()


def rejoined(cluster, broker: int) -> list[bytes]:
    """Once every partition's ISR is full again and every replica holds the same bytes: `broker`'s bytes."""
    out = []
    for p in range(PARTITIONS):
        assert sorted(wait_for_full_isr(cluster, TOPIC, p)) == [0, 1, 2]
        cluster.wait_until(lambda: len({segment_bytes(cluster, b, TOPIC, p) for b in range(3)}) == 1, WAIT,
                           f"every replica of {TOPIC}-{p} to hold the leader's bytes")
        out.append(segment_bytes(cluster, broker, TOPIC, p))
    return out


@pytest.mark.parametrize("variant", ["ssl", "plain"])
def test_brokers_replicate_and_control_each_other_over_the_secured_inter_broker_listener(tmp_path, variant):
    tls = TlsFiles(str(tmp_path / "tls"))
    listeners, props = settings(variant, tls)
    zookeeper = EmbeddedZooKeeper().start()
    cluster = EmbeddedCluster(3, props, zookeeper=zookeeper, chroot=CHROOT, listeners=listeners)
    with running(cluster, zookeeper):
        if variant == "ssl":
            grant_cluster_action_in_zookeeper(zookeeper, f"User:{BROKER_DN}")
        cluster.start(WAIT)
        for b in cluster.brokers:
            b.tls = tls
        # UpdateMetadata from the controller reached every broker
        cluster.wait_until(lambda: all(controller_known(b) for b in cluster.brokers), WAIT,
                           "every broker to hear from the controller")
        controller = cluster.brokers[cluster.wait_for_controller()]     # CreateTopics goes to the controller
        response = asyncio.run(admin_call(controller, 19, 7, CreateTopicsRequest(timeout_ms=30000, topics=[
            CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=PARTITIONS, replication_factor=3)])))
        assert [t.error_code for t in response.topics] == [ErrorCode.NONE], response
        for p in range(PARTITIONS):                     # LeaderAndIsr reached every replica
            assert sorted(wait_for_full_isr(cluster, TOPIC, p)) == [0, 1, 2]
        produce(cluster, [b"a-%d" % i for i in range(100)])

        # a follower of partition 0 that is not the controller leaves the ISR when stopped
        controller = cluster.wait_for_controller()
        victim = next(b for b in cluster.partition_state(TOPIC, 0)["isr"]
                      if b not in (controller, cluster.leader(TOPIC, 0)))
        cluster.stop(victim)
        cluster.wait_until(lambda: all(victim not in cluster.partition_state(TOPIC, p)["isr"]
                                       for p in range(PARTITIONS)), WAIT, "the stopped broker to leave every ISR")
        produce(cluster, [b"b-%d" % i for i in range(100)])     # acks=all with two in sync
        cluster.start_broker(victim)
        for data in rejoined(cluster, victim):          # AlterPartition from the leaders brought it back
            assert data.count(b"a-") == data.count(b"b-") == 100 // PARTITIONS


def test_a_broker_with_the_wrong_inter_broker_password_never_replicates_until_given_the_right_one(tmp_path):
    """Broker 2's own login (listener.name.internal.plain.sasl.jaas.config) has a wrong password while it
    accepts the others' logins: the leaders (0 and 1) refuse its fetches, drop it from the ISR and go on
    taking acks=all writes with two replicas; it holds none of them. Restarted with the right password, it
    catches up and rejoins every ISR byte for byte."""
    listeners, props = settings("plain", TlsFiles(str(tmp_path / "tls")))
    key = "listener.name.internal.plain.sasl.jaas.config"
    wrong = plain_jaas({"broker": "broker-secret"}, "broker", "not-the-secret")
    zookeeper = EmbeddedZooKeeper().start()
    cluster = EmbeddedCluster(3, props, zookeeper=zookeeper, chroot=CHROOT, listeners=listeners,
                              broker_overrides={2: {key: wrong}})
    with running(cluster, zookeeper):
        for b in cluster.brokers:
            b.overrides["zookeeper.connect"] = cluster.zookeeper_connect
        for i in range(3):              # 0 first: it becomes the controller, whose own login is right
            cluster.start_broker(i, WAIT)
            if i == 0:
                cluster.wait_for_controller(WAIT)
        cluster.wait_until(lambda: cluster.registered() == {0, 1, 2}, WAIT, "every broker to register")
        controller = cluster.wait_for_controller()
        assert controller != 2
        cluster.wait_until(lambda: controller_known(cluster.brokers[controller]), WAIT, "the controller's metadata")
        response = asyncio.run(admin_call(cluster.brokers[controller], 19, 7, CreateTopicsRequest(
            timeout_ms=30000, topics=[CreateTopicsRequest.CreatableTopic(
                name=TOPIC, num_partitions=-1, replication_factor=-1, assignments=[
                    CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=[p, 1 - p, 2])
                    for p in range(PARTITIONS)])])))
        assert [t.error_code for t in response.topics] == [ErrorCode.NONE], response
        cluster.wait_until(lambda: "SASL/PLAIN login as broker to node" in cluster.brokers[2].log(), WAIT,
                           "broker 2's refused login")
        for p in range(PARTITIONS):
            cluster.wait_until(lambda: sorted(cluster.partition_state(TOPIC, p)["isr"]) == [0, 1], WAIT,
                               f"{TOPIC}-{p}'s leader to drop broker 2 from the ISR")
        produce(cluster, [b"a-%d" % i for i in range(100)])
        assert all(b"a-" not in segment_bytes(cluster, 2, TOPIC, p) for p in range(PARTITIONS))

        cluster.stop(2)
        cluster.brokers[2].overrides[key] = props[key]
        cluster.start_broker(2, WAIT)
        for data in rejoined(cluster, 2):
            assert data.count(b"a-") == 100 // PARTITIONS
