"""ACLs and SCRAM credentials in a real ZooKeeper, as Kafka's ZooKeeper mode keeps them.

Two stores on two clients stand for two brokers: what one writes is in Kafka's znodes and formats,
the other learns of it through the change notifications and applies it, concurrent changes to one
resource from both survive, and a store opened later loads everything. Then two broker processes
sharing one ZooKeeper: a SCRAM user and an ACL made on one hold on the other.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from secure_broker import (
    READ,
    WRITE,
    TlsFiles,
    acl,
    connect,
    create_acls,
    create_scram_users,
    create_topics,
    run,
    start_broker,
)
from test_acl_matrix import produce_body

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.sasl import ScramMechanism
from kafka_compat.sanitizer import sanitize
from kafka_compat.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka_compat.security.authorizer import AclAuthorizer
from kafka_compat.security.principal import KafkaPrincipal
from kafka_compat.security.scram import credential_from_password, format_credential, parse_credential
from kafka_compat.security.zk_stores import ZkAclStore, ZkCredentialStore
from kafka_compat.testing import EmbeddedZooKeeper, zookeeper_missing
from kafka_compat.zk.kafka_zk_client import KafkaZkClient

pytestmark = pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))

WAIT = 20.0
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
ALICE = KafkaPrincipal("User", "alice")


@pytest.fixture(scope="module")
def server():
    with EmbeddedZooKeeper() as zk:
        yield zk


@pytest.fixture
def chroot(server):
    return server.connect_string(f"/sec-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def clients(chroot):
    made = [KafkaZkClient(chroot).start() for _ in range(3)]
    yield made
    for c in made:
        c.close()


def eventually(check, what: str):
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"not within {WAIT}s: {what}"
        time.sleep(0.05)


def binding(name: str, op: AclOperation, principal: str = "User:alice", pattern=PatternType.LITERAL,
            permission=AclPermissionType.ALLOW, rtype=ResourceType.TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", op, permission))


def authorizer(zk: KafkaZkClient) -> tuple[AclAuthorizer, ZkAclStore]:
    store = ZkAclStore(zk)
    auth = AclAuthorizer(store=store)
    store.listen(auth.refresh)
    return auth, store


def test_acls_in_kafkas_znodes_and_followed_by_another_broker(clients):
    zk1, zk2, raw = clients
    (a1, s1), (a2, s2) = authorizer(zk1), authorizer(zk2)
    try:
        assert a1.create_acls([binding("orders", AclOperation.READ),
                               binding("team-", AclOperation.WRITE, pattern=PatternType.PREFIXED),
                               binding("g1", AclOperation.READ, rtype=ResourceType.GROUP)]) == [None] * 3
        literal = json.loads(raw.zk.get("/kafka-acl/Topic/orders")[0])
        assert literal == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                   "operation": "Read", "host": "*"}]}
        assert json.loads(raw.zk.get("/kafka-acl-extended/prefixed/Topic/team-")[0])["acls"][0]["operation"] == \
            "Write"
        assert raw.zk.exists("/kafka-acl/Group/g1")
        changes = sorted(raw.zk.get_children("/kafka-acl-changes"))
        assert all(c.startswith("acl_changes_") for c in changes)
        assert {raw.zk.get(f"/kafka-acl-changes/{c}")[0] for c in changes} == {b"TOPIC:orders", b"GROUP:g1"}
        extended = raw.zk.get_children("/kafka-acl-extended-changes")
        assert json.loads(raw.zk.get(f"/kafka-acl-extended-changes/{extended[0]}")[0]) == {
            "version": 1, "resourceType": "TOPIC", "name": "team-", "patternType": "PREFIXED"}
        # the other broker learns of it, and decides the same
        eventually(lambda: a2.authorize(ALICE, "1.2.3.4", AclOperation.WRITE, ResourceType.TOPIC, "team-x"),
                   "broker 2 sees the prefixed ACL")
        eventually(lambda: a2.authorize(ALICE, "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "orders"),
                   "broker 2 sees the literal ACL")
        # and a deletion there reaches broker 1; the znode goes with the last ACL
        a2.delete_acls([AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL))])
        assert not raw.zk.exists("/kafka-acl/Topic/orders")
        eventually(lambda: not a1.authorize(ALICE, "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "orders"),
                   "broker 1 sees the deletion")
    finally:
        s1.close()
        s2.close()


def test_concurrent_changes_to_one_resource_from_two_brokers_both_survive(clients):
    zk1, zk2, raw = clients
    (a1, s1), (a2, s2) = authorizer(zk1), authorizer(zk2)
    try:
        a1.create_acls([binding("shared", AclOperation.READ)])
        # broker 2 has not caught up when it adds its own ACL to the same resource: ZooKeeper's copy is merged
        a2.create_acls([binding("shared", AclOperation.WRITE, "User:bob")])
        stored = {(a["principal"], a["operation"]) for a in json.loads(raw.zk.get("/kafka-acl/Topic/shared")[0])["acls"]}
        assert stored == {("User:alice", "Read"), ("User:bob", "Write")}
        bob = KafkaPrincipal("User", "bob")
        for auth in (a1, a2):
            eventually(lambda auth=auth: auth.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "shared")
                       and auth.authorize(bob, "h", AclOperation.WRITE, ResourceType.TOPIC, "shared"),
                       "both ACLs on both brokers")
    finally:
        s1.close()
        s2.close()


def test_a_store_opened_later_loads_every_acl(clients):
    zk1, zk2, _ = clients
    a1, s1 = authorizer(zk1)
    a1.create_acls([binding("t", AclOperation.DESCRIBE), binding("p-", AclOperation.ALL, pattern=PatternType.PREFIXED),
                    binding("kafka-cluster", AclOperation.ALTER, rtype=ResourceType.CLUSTER,
                            permission=AclPermissionType.DENY)])
    s1.close()
    later = AclAuthorizer(store=ZkAclStore(zk2))
    assert [(b.pattern.name, b.entry.operation) for b in later.acls()] == \
        [(b.pattern.name, b.entry.operation) for b in a1.acls()]


def test_scram_credentials_in_config_users_and_followed_by_another_broker(clients):
    zk1, zk2, raw = clients
    c1, c2 = ZkCredentialStore(zk1), ZkCredentialStore(zk2)
    c2.listen()
    try:
        zk1.change_entity_config("users", "alice", {"producer_byte_rate": "1024"})     # a quota beside them
        cred = credential_from_password(SHA256, "alice-secret", 4096)
        c1.alter(upserts=[("alice", SHA256, cred), ("alice", SHA512, credential_from_password(SHA512, "pw")),
                          ("user with space*", SHA256, cred)])
        config = json.loads(raw.zk.get("/config/users/alice")[0])["config"]
        assert config["producer_byte_rate"] == "1024"
        assert parse_credential(config["SCRAM-SHA-256"]) == cred
        assert raw.zk.exists(f"/config/users/{sanitize('user with space*')}")
        assert sanitize("user with space*") == "user%20with%20space%2A"
        notes = [json.loads(raw.zk.get(f"/config/changes/{c}")[0]) for c in raw.zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/alice"} in notes
        eventually(lambda: c2.lookup(SHA256, "alice") == cred and c2.lookup(SHA256, "user with space*") == cred,
                   "broker 2 sees the credentials")
        c1.alter(deletions=[("alice", SHA512)])
        config = json.loads(raw.zk.get("/config/users/alice")[0])["config"]
        assert "SCRAM-SHA-512" not in config and config["producer_byte_rate"] == "1024"
        eventually(lambda: c2.lookup(SHA512, "alice") is None, "broker 2 sees the deletion")
        assert ZkCredentialStore(raw).lookup(SHA256, "alice") == cred          # a store opened later
    finally:
        c2.close()


def test_credentials_written_under_the_old_encoding_are_read_and_moved_to_kafkas(clients):
    """Earlier releases wrote /config/users/a~b (Python's quote keeps '~'); Kafka's Sanitizer writes
    a%7Eb. The old znode is still read; the next change writes Kafka's name and retires the old copy,
    which neither this broker nor another then reads back, on a notification or a restart."""
    zk1, zk2, raw = clients
    old = credential_from_password(SHA256, "old-secret", 4096)
    zk1.change_entity_config("users", "a~b", {"SCRAM-SHA-256": format_credential(old), "producer_byte_rate": "7"})
    c1, c2 = ZkCredentialStore(zk1), ZkCredentialStore(zk2)
    c2.listen()
    try:
        assert c1.lookup(SHA256, "a~b") == old and c2.lookup(SHA256, "a~b") == old
        new = credential_from_password(SHA256, "new-secret", 4096)
        c1.alter(upserts=[("a~b", SHA256, new)])
        config = json.loads(raw.zk.get("/config/users/a%7Eb")[0])["config"]
        assert parse_credential(config["SCRAM-SHA-256"]) == new
        assert json.loads(raw.zk.get("/config/users/a~b")[0])["config"] == {"producer_byte_rate": "7"}
        eventually(lambda: c2.lookup(SHA256, "a~b") == new, "broker 2 sees the new credential")
        c1.alter(upserts=[("zed", SHA256, new)])     # notifications are handled in order: past the old znode's
        eventually(lambda: c2.lookup(SHA256, "zed") == new, "broker 2 sees a later change")
        assert c2.lookup(SHA256, "a~b") == new
        assert ZkCredentialStore(raw).lookup(SHA256, "a~b") == new
    finally:
        c2.close()


def test_two_brokers_sharing_zookeeper_share_users_and_acls(server, tmp_path):
    """A SCRAM user and an ACL made through broker 1's APIs hold on broker 2, and after it restarts.
    (One restart: a restarted broker takes its old ports again, which a loaded machine's outgoing
    connections may have taken meanwhile.)

    The two brokers form a ZooKeeper cluster: their own requests to each other go over the PLAINTEXT
    listener (the inter-broker one) as User:ANONYMOUS, which is a super user here, as a cluster's
    inter-broker principal must be. A topic has one leader: the other broker answers a write it
    authorized with NOT_LEADER_OR_FOLLOWER."""
    tls = TlsFiles(str(tmp_path / "tls"))
    chroot = f"/brokers-{uuid.uuid4().hex[:8]}"
    connect_string = server.connect_string(chroot)
    brokers = [start_broker(tls, data_dir=str(tmp_path / f"b{i}"), **{
        "zookeeper.connect": connect_string, "broker.id": str(i), "super.users": "User:admin;User:ANONYMOUS",
        "offsets.topic.replication.factor": "1"}) for i in (1, 2)]
    raw = KafkaZkClient(server.connect_string(chroot)).start()
    try:
        eventually(lambda: raw.get_sorted_broker_list() == [1, 2] and raw.get_controller_id() in (1, 2),
                   "both brokers registered and a controller elected")
        controller = brokers[raw.get_controller_id() - 1]
        eventually(lambda: _creates(controller, "erin-topic", "other-topic"), "the controller to create topics")
        run(create_scram_users(brokers[0], {"erin": "erin-secret"}))
        run(create_acls(brokers[0], acl("User:erin", WRITE, "erin-topic"), acl("User:erin", READ, "erin-topic")))

        async def produce_as_erin(broker, topic: str) -> int:
            deadline = time.monotonic() + WAIT
            while True:
                try:
                    client = await connect(broker, "SASL_SSL", "erin", "erin-secret", mechanism="SCRAM-SHA-256")
                    break
                except Exception:
                    assert time.monotonic() < deadline, "erin cannot log in on this broker"
                    await asyncio.sleep(0.1)
            code = (await client.call(0, 9, produce_body(topic))).responses[0].partition_responses[0].error_code
            await client.close()
            return code

        allowed = {0, ErrorCode.NOT_LEADER_OR_FOLLOWER}

        def erin_writes() -> bool:
            codes = [run(produce_as_erin(b, "erin-topic")) for b in brokers]
            return set(codes) <= allowed and 0 in codes

        # broker 2 learns of the user and the ACLs from ZooKeeper's notifications
        eventually(erin_writes, "erin may write erin-topic through either broker, and its leader takes it")
        for b in brokers:
            assert run(produce_as_erin(b, "other-topic")) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        brokers[1].restart()    # and loads both from ZooKeeper when it starts again
        eventually(erin_writes, "erin may write erin-topic after the restart")
        for b in brokers:
            assert run(produce_as_erin(b, "other-topic")) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert not (tmp_path / "b1" / "logs" / "kafka-compat-acls.json").exists()   # in ZooKeeper, not in files
    finally:
        raw.close()
        for b in brokers:
            b.close()


def _creates(broker, *topics: str) -> bool:
    """CreateTopics through this broker worked (or the topics exist); False while it is not yet the
    controller its metadata knows (NOT_CONTROLLER) or the creation timed out."""
    try:
        run(create_topics(broker, *topics))
        return True
    except AssertionError:
        return False

