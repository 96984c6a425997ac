"""Kafka 4.4's own command-line tools (bin/kafka-*.sh, run by interop/kafka_tools.py) against kafka-compat.

Every test runs a tool as an operator would and checks what it printed (parsed, not only its exit
status) and what it did, seen with another client: our wire client (tests/wire.py), confluent-kafka,
or ZooKeeper's znodes in the cluster. Tests are named by tool, so a CI log names each one; most run
against one broker and against a three-broker ZooKeeper cluster (`[broker]` / `[cluster]`), both
started once for the module, each test on topics and groups of its own.

A tool that needs an API kafka-compat does not serve yet asks the broker's ApiVersions first and skips
with the API's name and key, so that it runs by itself once the API lands. Where a tool shows a
kafka-compat bug the test is a strict xfail whose reason names it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import kafka_tools
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from wire import WireClient  # noqa: E402

from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from kafka_compat.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest  # noqa: E402
from kafka_compat.protocol.messages.produce import ProduceRequest  # noqa: E402
from kafka_compat.protocol.records import build_batch  # noqa: E402
from kafka_compat.testing import EmbeddedBroker, zookeeper_missing  # noqa: E402

pytestmark = pytest.mark.skipif(kafka_tools.missing() is not None, reason=str(kafka_tools.missing()))
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

WAIT = 120.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ---------------------------------------------------------------- where the tools point

class Target:
    """One broker or the cluster, as the tests see them: bootstrap, broker ids, replication factor."""

    def __init__(self, name: str, broker: EmbeddedBroker | None = None, cluster=None):
        self.name, self.broker, self.cluster = name, broker, cluster
        self.brokers = cluster.brokers if cluster else [broker]
        self.bootstrap = cluster.bootstrap if cluster else broker.bootstrap
        self.ids = list(range(len(self.brokers)))
        self.rf = min(3, len(self.brokers))

    @property
    def port(self) -> int:
        """A running broker's port (any of them answers ApiVersions, Metadata and the admin calls)."""
        return next(b.port for b in self.brokers if b.running)

    def admin(self) -> AdminClient:
        """One confluent-kafka AdminClient per target (its futures need the client alive)."""
        if getattr(self, "_admin", None) is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def close(self) -> None:
        """Drop the admin client before its brokers stop (else librdkafka reports them gone)."""
        self._admin = None

    def create_topic(self, topic: str, partitions: int = 1, configs: dict | None = None) -> str:
        self.admin().create_topics([NewTopic(topic, partitions, self.rf, config=configs or {})])[topic].result(WAIT)
        wait_for(lambda: all(p.leader >= 0 for p in topic_metadata(self, topic).partitions.values())
                 if topic in self.admin().list_topics(timeout=10).topics else False, f"leaders of {topic}")
        if self.cluster:
            from cluster_support import wait_for_full_isr
            for p in range(partitions):
                wait_for_full_isr(self.cluster, topic, p, self.rf)
        return topic


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


@pytest.fixture(scope="module")
def cluster():
    missing = zookeeper_missing()
    if missing:
        pytest.skip(missing)
    from cluster_support import new_cluster
    # no automatic leader rebalance: kafka-leader-election is what moves leadership back
    with new_cluster(**{"auto.leader.rebalance.enable": "false"}) as c:
        yield c


@pytest.fixture(scope="module", params=["broker", "cluster"])
def target(request):
    if request.param == "broker":
        t = Target("broker", broker=request.getfixturevalue("broker"))
    else:
        t = Target("cluster", cluster=request.getfixturevalue("cluster"))
    yield t
    t.close()


@pytest.fixture(scope="module")
def single(broker):
    t = Target("broker", broker=broker)
    yield t
    t.close()


@pytest.fixture(scope="module")
def clustered(cluster):
    t = Target("cluster", cluster=cluster)
    yield t
    t.close()


# ---------------------------------------------------------------- running tools and reading what they print

def tool(name: str, *args, input: str | None = None, timeout: float = WAIT,
         expect: int | None = 0) -> subprocess.CompletedProcess:
    t0 = time.monotonic()
    out = kafka_tools.run(name, *args, input=input, timeout=timeout)
    if os.environ.get("KAFKA_TOOLS_TIMES"):          # each run's wall time, to stderr
        print(f"TIME {time.monotonic() - t0:6.2f} {name} {' '.join(map(str, args))[:100]}", file=sys.stderr)
    assert out is not None, kafka_tools.missing()
    if expect is not None:
        assert out.returncode == expect, (f"{name} {' '.join(map(str, args))} exited {out.returncode}, not {expect}\n"
                                          f"stdout:\n{out.stdout}\nstderr:\n{out.stderr[-6000:]}")
    return out


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def fields(line: str) -> dict[str, str]:
    """`Key: value<TAB>Key: value...` (kafka-topics --describe) as a dict."""
    out = {}
    for part in line.strip().split("\t"):
        if ":" in part:
            key, _, value = part.partition(":")
            out[key.strip()] = value.strip()
    return out


def table(text: str, first: str) -> list[dict[str, str]]:
    """A whitespace-aligned table whose header line starts with `first` (kafka-consumer-groups)."""
    rows, header = [], None
    for line in lines(text):
        words = line.split()
        if words[0] == first:
            header = words
        elif header and len(words) == len(header):
            rows.append(dict(zip(header, words)))
    return rows


def tsv(text: str) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated table: a header line, then rows, cells padded with spaces."""
    rows = [[cell.strip() for cell in line.rstrip("\t").split("\t")] for line in lines(text)]
    return [dict(zip(rows[0], row)) for row in rows[1:]] if rows else []


def wait_for(predicate, what: str, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


# ---------------------------------------------------------------- what the broker says, by other clients

def api_versions(target: Target) -> dict[int, tuple[int, int]]:
    c = WireClient("127.0.0.1", target.port)
    try:
        r = c.call(18, 3, ApiVersionsRequest(client_software_name="kafka-tools-test", client_software_version="1"))
    finally:
        c.close()
    assert r.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def require_api(target: Target, key: int, name: str, version: int = 0) -> None:
    """Skip unless the broker advertises API `key` up to `version` (so the test turns on by itself when it lands)."""
    served = api_versions(target).get(key)
    if served is None:
        pytest.skip(f"needs {name} ({key}), not served yet")
    if served[1] < version:
        pytest.skip(f"needs {name} ({key}) v{version}, served up to v{served[1]}")


def topic_metadata(target: Target, topic: str):
    return target.admin().list_topics(topic, timeout=30).topics[topic]


def topic_config(target: Target, topic: str) -> dict:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return target.admin().describe_configs([resource])[resource].result(WAIT)


def broker_config(target: Target, broker_id: int | str) -> dict:
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    return target.admin().describe_configs([resource])[resource].result(WAIT)


def produce(target: Target, topic: str, records: list[tuple[bytes | None, bytes]], partition: int = 0,
            **config) -> list:
    """confluent-kafka, acks=all; the delivery errors (None: delivered), in order."""
    p = ck.Producer({"bootstrap.servers": target.bootstrap, "acks": "all", "linger.ms": 5, **config})
    errors: list = []
    for key, value in records:
        p.produce(topic, key=key, value=value, partition=partition, on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(WAIT) == 0
    return errors


def read(target: Target, topic: str, partitions: int = 1, committed: bool = False) -> dict[int, list]:
    """Every record from the log start to the end: {partition: [(offset, key, value, headers)]}."""
    c = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                     "enable.partition.eof": True, "isolation.level": "read_committed" if committed else
                     "read_uncommitted"})
    try:
        ends = {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30) for p in range(partitions)}
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        got: dict[int, list] = {p: [] for p in range(partitions)}
        done = {p for p, (low, high) in ends.items() if low >= high}
        deadline = time.monotonic() + WAIT
        while len(done) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                continue
            got[m.partition()].append((m.offset(), m.key(), m.value(), m.headers() or []))
        assert len(done) == partitions, f"could not read {topic} to its end {ends}"
        return got
    finally:
        c.close()


def committed(target: Target, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed([ck.TopicPartition(topic, p) for p in range(partitions)],
                                                                timeout=30)}
    finally:
        c.close()


def wire_produce(port: int, topic: str, value: bytes, partition: int = 0) -> int:
    """One record with our own client (acks=1); the partition's error code."""
    c = WireClient("127.0.0.1", port)
    try:
        r = c.call(0, 9, ProduceRequest(acks=1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.PartitionProduceData(
                index=partition, records=build_batch([(None, value)]))])]))
    finally:
        c.close()
    return r.responses[0].partition_responses[0].error_code


# ================================================================ kafka-topics

def test_kafka_topics_create_describe_alter_delete(target):
    b, rf = target.bootstrap, target.rf
    topic = unique("topics")
    out = tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", 3,
               "--replication-factor", rf, "--config", "retention.ms=123456", "--config", "cleanup.policy=compact")
    assert out.stdout.strip() == f"Created topic {topic}."
    assert topic in lines(tool("kafka-topics", "--bootstrap-server", b, "--list").stdout)

    # again: Kafka's TopicExistsException, reported as the tool reports it
    again = tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", 1,
                 "--replication-factor", rf, expect=1)
    assert f"Topic '{topic}' already exists." in again.stdout + again.stderr

    def describe():
        text = tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", topic).stdout
        head, *parts = [fields(line) for line in lines(text)]
        return head, parts
    head, parts = describe()
    assert head["Topic"] == topic and head["PartitionCount"] == "3" and head["ReplicationFactor"] == str(rf)
    configs = dict(c.split("=", 1) for c in head["Configs"].split(","))
    assert configs["retention.ms"] == "123456" and configs["cleanup.policy"] == "compact"
    assert [p["Partition"] for p in parts] == ["0", "1", "2"]
    meta = topic_metadata(target, topic)
    for p in parts:
        replicas = [int(r) for r in p["Replicas"].split(",")]
        isr = [int(r) for r in p["Isr"].split(",")]
        assert len(replicas) == rf and sorted(isr) == sorted(replicas) and int(p["Leader"]) in replicas
        assert replicas == meta.partitions[int(p["Partition"])].replicas     # what Metadata says
        if target.cluster:                                                  # and the partition's znode
            assert int(p["Leader"]) == target.cluster.leader(topic, int(p["Partition"]))
    if target.cluster:
        assert len({int(p["Leader"]) for p in parts}) == 3                  # leaders spread over the brokers
    got = topic_config(target, topic)
    assert got["retention.ms"].value == "123456" and got["cleanup.policy"].value == "compact"
    assert not lines(tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", topic,
                          "--under-replicated-partitions").stdout)

    tool("kafka-topics", "--bootstrap-server", b, "--alter", "--topic", topic, "--partitions", 5)
    wait_for(lambda: len(topic_metadata(target, topic).partitions) == 5, "5 partitions in Metadata")
    head, parts = describe()
    assert head["PartitionCount"] == "5" and [p["Partition"] for p in parts] == ["0", "1", "2", "3", "4"]
    assert all(int(p["Leader"]) >= 0 for p in parts)
    shrink = tool("kafka-topics", "--bootstrap-server", b, "--alter", "--topic", topic, "--partitions", 2, expect=1)
    assert "InvalidPartitionsException" in shrink.stdout + shrink.stderr

    out = tool("kafka-topics", "--bootstrap-server", b, "--delete", "--topic", topic)
    wait_for(lambda: topic not in target.admin().list_topics(timeout=10).topics, f"{topic} to go from Metadata")
    assert topic not in lines(tool("kafka-topics", "--bootstrap-server", b, "--list").stdout)
    gone = tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", topic, expect=1)
    assert f"Topic '{topic}' does not exist" in gone.stdout + gone.stderr


# ================================================================ kafka-configs

def described(text: str) -> dict[str, tuple[str, str]]:
    """`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` lines: {name: (value, first source)}."""
    out = {}
    for line in lines(text):
        m = re.match(r"\s+([\w.-]+)=(.*?) sensitive=(?:true|false) synonyms=\{([A-Z_]+):", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def test_kafka_configs_topics(target):
    b = target.bootstrap
    topic = target.create_topic(unique("configs"))
    entity = ("--bootstrap-server", b, "--entity-type", "topics", "--entity-name", topic)
    out = tool("kafka-configs", *entity, "--alter", "--add-config", "retention.ms=1000,max.message.bytes=2000")
    assert out.stdout.strip() == f"Completed updating config for topic {topic}."
    text = tool("kafka-configs", *entity, "--describe").stdout
    assert text.startswith(f"Dynamic configs for topic {topic} are:")
    assert described(text) == {"retention.ms": ("1000", "DYNAMIC_TOPIC_CONFIG"),
                               "max.message.bytes": ("2000", "DYNAMIC_TOPIC_CONFIG")}
    got = topic_config(target, topic)
    assert got["retention.ms"].value == "1000" and got["max.message.bytes"].value == "2000"
    # the effect: a record over max.message.bytes is refused, one under it is stored
    [big] = produce(target, topic, [(None, b"x" * 3000)])
    assert big is not None and big.code() == ck.KafkaError.MSG_SIZE_TOO_LARGE
    assert produce(target, topic, [(None, b"small")]) == [None]
    assert [r[2] for r in read(target, topic)[0]] == [b"small"]
    # --all: every config with its value, defaults included
    every = described(tool("kafka-configs", *entity, "--describe", "--all").stdout)
    assert every["retention.ms"] == ("1000", "DYNAMIC_TOPIC_CONFIG") and every["cleanup.policy"][0] == "delete"

    tool("kafka-configs", *entity, "--alter", "--delete-config", "retention.ms")
    assert described(tool("kafka-configs", *entity, "--describe").stdout) == {
        "max.message.bytes": ("2000", "DYNAMIC_TOPIC_CONFIG")}
    assert topic_config(target, topic)["retention.ms"].value == "604800000"    # the broker default again
    bad = tool("kafka-configs", *entity, "--alter", "--add-config", "retention.ms=soon", expect=1)
    assert "InvalidConfigurationException" in bad.stdout + bad.stderr or "Invalid value" in bad.stdout + bad.stderr


def test_kafka_configs_brokers(target):
    b = target.bootstrap
    entity = ("--bootstrap-server", b, "--entity-type", "brokers")
    for i in target.ids:
        out = tool("kafka-configs", *entity, "--entity-name", i, "--alter", "--add-config",
                   f"log.retention.ms={3600000 + i}")
        assert out.stdout.strip() == f"Completed updating config for broker {i}."
    # no --entity-name: every broker, each under its own heading
    sections = re.split(r"^Dynamic configs for broker (\d+) are:$", tool("kafka-configs", *entity, "--describe").stdout,
                        flags=re.M)[1:]
    by_broker = {int(i): described(text) for i, text in zip(sections[::2], sections[1::2])}
    assert by_broker == {i: {"log.retention.ms": (str(3600000 + i), "DYNAMIC_BROKER_CONFIG")} for i in target.ids}
    for i in target.ids:
        assert broker_config(target, i)["log.retention.ms"].value == str(3600000 + i)
    if target.cluster:                  # kept where Kafka's ZooKeeper mode keeps them
        znode = json.loads(target.cluster.zk.get("/config/brokers/1")[0])
        assert znode["config"]["log.retention.ms"] == "3600001"

    out = tool("kafka-configs", *entity, "--entity-default", "--alter", "--add-config", "log.retention.ms=7200000")
    assert out.stdout.strip() == "Completed updating default config for brokers in the cluster."
    text = tool("kafka-configs", *entity, "--entity-default", "--describe").stdout
    assert text.startswith("Default configs for brokers in the cluster are:")
    assert described(text)["log.retention.ms"] == ("7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    for i in target.ids:
        tool("kafka-configs", *entity, "--entity-name", i, "--alter", "--delete-config", "log.retention.ms")
    # with the per-broker values gone, a topic without its own retention follows the cluster default
    topic = target.create_topic(unique("retention"))
    for i in target.ids:
        wait_for(lambda: broker_config(target, i)["log.retention.ms"].value == "7200000", f"broker {i}'s default")
    every = described(tool("kafka-configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", topic,
                           "--describe", "--all").stdout)
    assert every["retention.ms"] == ("7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    tool("kafka-configs", *entity, "--entity-default", "--alter", "--delete-config", "log.retention.ms")
    assert "log.retention.ms" not in described(tool("kafka-configs", *entity, "--entity-default", "--describe").stdout)
    assert broker_config(target, 0)["log.retention.ms"].value is None


def client_quotas(target: Target, **entity: str) -> dict[str, float]:
    """DescribeClientQuotas (our wire client), an exact match on each of `entity` ({"user": ..., "client-id": ...})."""
    c = WireClient("127.0.0.1", target.port)
    try:
        r = c.call(48, 1, DescribeClientQuotasRequest(strict=True, components=[
            DescribeClientQuotasRequest.ComponentData(entity_type=kind, match_type=0, match=name)
            for kind, name in entity.items()]))
    finally:
        c.close()
    assert r.error_code == 0, r
    return {v.key: v.value for e in r.entries for v in e.values}


def quota_line(text: str, what: str) -> dict[str, float]:
    """`Quota configs for <what> are a=1.0, b=2.0` as {a: 1.0, b: 2.0} ({} when the line is absent)."""
    m = re.search(rf"^Quota configs for {re.escape(what)} are (.*)$", text, re.M)
    return {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split(", "))} if m else {}


def test_kafka_configs_clients_and_users(target):
    b = target.bootstrap
    client, user = unique("client"), unique("user")
    clients = ("--bootstrap-server", b, "--entity-type", "clients", "--entity-name", client)
    users = ("--bootstrap-server", b, "--entity-type", "users", "--entity-name", user)

    out = tool("kafka-configs", *clients, "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert out.stdout.strip() == f"Completed updating config for client {client}."
    assert quota_line(tool("kafka-configs", *clients, "--describe").stdout, f"client-id '{client}'") == {
        "producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    assert client_quotas(target, **{"client-id": client}) == {"producer_byte_rate": 1024.0,
                                                               "consumer_byte_rate": 2048.0}
    tool("kafka-configs", *clients, "--alter", "--delete-config", "producer_byte_rate")
    assert client_quotas(target, **{"client-id": client}) == {"consumer_byte_rate": 2048.0}

    # users: a quota, a SCRAM credential (two alters: the tool will not mix them), and a (user, client) quota
    tool("kafka-configs", *users, "--alter", "--add-config", "request_percentage=50")
    tool("kafka-configs", *users, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=secret]")
    tool("kafka-configs", *users, "--entity-type", "clients", "--entity-name", client, "--alter",
         "--add-config", "producer_byte_rate=999")
    text = tool("kafka-configs", *users, "--describe").stdout
    assert quota_line(text, f"user-principal '{user}'") == {"request_percentage": 50.0}
    assert re.search(rf"^SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192$",
                     text, re.M), text
    both = tool("kafka-configs", *users, "--entity-type", "clients", "--entity-name", client, "--describe").stdout
    assert quota_line(both, f"user-principal '{user}', client-id '{client}'") == {"producer_byte_rate": 999.0}
    assert client_quotas(target, user=user) == {"request_percentage": 50.0}
    assert client_quotas(target, user=user, **{"client-id": client}) == {"producer_byte_rate": 999.0}
    scram = target.admin().describe_user_scram_credentials([user])[user].result(WAIT)
    assert [(i.mechanism.name, i.iterations) for i in scram.scram_credential_infos] == [("SCRAM_SHA_256", 8192)]
    if target.cluster:      # Kafka's ZooKeeper mode keeps both in /config/users/<user>
        znode = json.loads(target.cluster.zk.get(f"/config/users/{user}")[0])["config"]
        assert znode["request_percentage"] == "50.0" and "iterations=8192" in znode["SCRAM-SHA-256"]

    tool("kafka-configs", *users, "--alter", "--delete-config", "SCRAM-SHA-256")
    tool("kafka-configs", *users, "--alter", "--delete-config", "request_percentage")
    text = tool("kafka-configs", *users, "--describe").stdout
    assert "SCRAM" not in text and not quota_line(text, f"user-principal '{user}'")
    assert client_quotas(target, user=user) == {}
    with pytest.raises(ck.KafkaException):      # RESOURCE_NOT_FOUND: no credential left
        target.admin().describe_user_scram_credentials([user])[user].result(WAIT)


def test_kafka_configs_groups(target):
    b, group = target.bootstrap, unique("group")
    entity = ("--bootstrap-server", b, "--entity-type", "groups", "--entity-name", group)
    out = tool("kafka-configs", *entity, "--alter", "--add-config",
               "consumer.session.timeout.ms=50000,share.auto.offset.reset=earliest")
    assert out.stdout.strip() == f"Completed updating config for group {group}."
    text = tool("kafka-configs", *entity, "--describe").stdout
    assert described(text)["consumer.session.timeout.ms"] == ("50000", "DYNAMIC_GROUP_CONFIG")
    assert described(text)["share.auto.offset.reset"] == ("earliest", "DYNAMIC_GROUP_CONFIG")
    refused = tool("kafka-configs", *entity, "--alter", "--add-config", "share.delivery.count.limit=50",
                   expect=None)
    assert refused.returncode != 0
    assert "share.delivery.count.limit must be in the range 2 to 10 inclusive." in refused.stderr + refused.stdout
    tool("kafka-configs", *entity, "--alter", "--delete-config", "consumer.session.timeout.ms")
    text = tool("kafka-configs", *entity, "--describe").stdout
    assert "consumer.session.timeout.ms" not in described(text)
    assert described(text)["share.auto.offset.reset"] == ("earliest", "DYNAMIC_GROUP_CONFIG")


def test_kafka_configs_client_metrics(target):
    """A KIP-714 subscription made, listed (ListConfigResources), described and removed with kafka-configs."""
    name = unique("sub")
    entity = ("--bootstrap-server", target.bootstrap, "--entity-type", "client-metrics")
    out = tool("kafka-configs", *entity, "--entity-name", name, "--alter", "--add-config",
               "metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.],interval.ms=1000")
    assert out.stdout.strip() == f"Completed updating config for client-metric {name}."
    text = tool("kafka-configs", *entity, "--describe").stdout        # every subscription: ListConfigResources
    assert f"Dynamic configs for client-metric {name} are:" in text
    assert described(text)["interval.ms"] == ("1000", "DYNAMIC_CLIENT_METRICS_CONFIG")
    text = tool("kafka-configs", *entity, "--entity-name", name, "--describe").stdout
    assert described(text)["metrics"] == ("org.apache.kafka.producer.,org.apache.kafka.consumer.",
                                          "DYNAMIC_CLIENT_METRICS_CONFIG")
    refused = tool("kafka-configs", *entity, "--entity-name", name, "--alter", "--add-config", "interval.ms=5",
                   expect=None)
    assert refused.returncode != 0 and "interval must be between 100 and 3600000" in refused.stderr + refused.stdout
    tool("kafka-configs", *entity, "--entity-name", name, "--alter", "--delete-config", "metrics,interval.ms")
    assert name not in tool("kafka-configs", *entity, "--describe").stdout


def test_the_java_client_pushes_its_metrics_to_the_metrics_endpoint():
    """kafka-producer-perf-test's producer (the Java client 4.4) is matched by a subscription, pushes its
    metrics (KIP-714), and they show on /metrics under its client id and software name."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from kafka_compat.testing import free_ports
    port, = free_ports(1)
    with EmbeddedBroker({"prometheus.listener": f"http://127.0.0.1:{port}"}) as b:
        tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--entity-type", "client-metrics",
             "--entity-name", "java", "--alter", "--add-config",
             "metrics=org.apache.kafka.producer.,interval.ms=500,match=[client_id=java-telemetry]")
        perf = kafka_tools.start("kafka-producer-perf-test", "--topic", "telemetry", "--num-records", 100000,
                                 "--record-size", 100, "--throughput", 200, "--producer-props",
                                 f"bootstrap.servers={b.bootstrap}", "client.id=java-telemetry")
        found: dict = {}
        try:
            deadline = time.monotonic() + 90
            while not found and time.monotonic() < deadline:
                time.sleep(0.5)
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
                found = {s.name: dict(s.labels) for f in text_string_to_metric_families(text) for s in f.samples
                         if s.labels.get("client_id") == "java-telemetry"}
        finally:
            perf.terminate()
            perf.wait(30)
        assert found, "the Java client never pushed its metrics"
        assert all(n.startswith("org_apache_kafka_producer_") for n in found), sorted(found)
        assert {labels["client_software_name"] for labels in found.values()} == {"apache-kafka-java"}


def test_kafka_delegation_tokens_and_the_java_client_logging_in_with_one(tmp_path):
    """kafka-delegation-tokens creates, describes, renews and expires a token; Kafka's console producer
    (the Java client 4.4) logs in with it over SCRAM (tokenauth=true) and writes as its owner; once
    expired, the token no longer logs in."""
    from secure_broker import TlsFiles, start_broker
    b = start_broker(TlsFiles(str(tmp_path / "tls")), authorizer=False, plain_users={"renewer": "renewer-pw"},
                     **{"delegation.token.secret.key": "java-token-secret"})
    try:
        sasl = b.bootstrap_for("SASL_PLAINTEXT")
        alice = tmp_path / "alice.properties"
        alice.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                         "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" "
                         "password=\"alice-secret\";\n")
        cmd = ("kafka-delegation-tokens", "--bootstrap-server", sasl, "--command-config", alice)
        out = tool(*cmd, "--create", "--max-life-time-period", -1, "--renewer-principal", "User:renewer").stdout
        token_id = re.search(r"tokenId\s*:\s*(\S+)", out).group(1)
        row = next(line.split() for line in out.splitlines() if line.startswith(token_id))
        hmac, owner = row[1], row[2]
        assert owner == "User:alice"
        described = tool(*cmd, "--describe", "--owner-principal", "User:alice").stdout
        assert "Total number of tokens : 1" in described and token_id in described and "User:renewer" in described
        renewed = tool(*cmd, "--renew", "--hmac", hmac, "--renew-time-period", -1).stdout
        assert "Completed renew operation" in renewed

        token = tmp_path / "token.properties"
        token.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
                         "org.apache.kafka.common.security.scram.ScramLoginModule required "
                         f"username=\"{token_id}\" password=\"{hmac}\" tokenauth=\"true\";\n")
        produced = tool("kafka-console-producer", "--bootstrap-server", sasl, "--topic", "token-topic",
                        "--producer.config", token, "--producer-property", "acks=all", input="with a token\n")
        assert "ERROR" not in produced.stderr, produced.stderr
        target = Target("broker", broker=b)
        got = read(target, "token-topic", 1)
        assert [v for records in got.values() for _, _, v, _ in records] == [b"with a token"]

        assert "Completed expire operation" in tool(*cmd, "--expire", "--hmac", hmac, "--expiry-time-period",
                                                    -1).stdout
        refused = tool("kafka-console-producer", "--bootstrap-server", sasl, "--topic", "token-topic",
                       "--producer.config", token, "--producer-property", "max.block.ms=10000",
                       input="after expiry\n", expect=None)
        assert "Authentication failed" in refused.stderr, refused.stderr[-2000:]
        target.close()
    finally:
        b.close()


# ================================================================ kafka-console-producer, kafka-console-consumer

def console_consume(target: Target, topic: str, count: int, *args) -> list[str]:
    out = tool("kafka-console-consumer", "--bootstrap-server", target.bootstrap, "--topic", topic,
               "--max-messages", count, "--timeout-ms", 60000, *args)
    assert f"Processed a total of {count} messages" in out.stderr
    return out.stdout.splitlines()


def test_kafka_console_producer_and_consumer(target):
    topic = target.create_topic(unique("console"), partitions=2)
    stdin = "".join(f"key{i}:value {i}\n" for i in range(6))
    out = tool("kafka-console-producer", "--bootstrap-server", target.bootstrap, "--topic", topic,
               "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
               "--producer-property", "acks=all", input=stdin)
    assert "ERROR" not in out.stderr, out.stderr
    # what the log holds, read by confluent-kafka: every line once, its key split off
    got = read(target, topic, 2)
    assert sorted((k, v) for records in got.values() for _, k, v, _ in records) == [
        (f"key{i}".encode(), f"value {i}".encode()) for i in range(6)]
    where = {v.decode(): (p, o) for p, records in got.items() for o, _, v, _ in records}

    # and what the console consumer prints of it: key, partition and offset as asked, one record a line
    printed = console_consume(target, topic, 6, "--from-beginning", "--formatter-property", "print.key=true",
                              "--formatter-property", "print.partition=true", "--formatter-property",
                              "print.offset=true", "--formatter-property", "key.separator=|")
    seen = {}
    for line in printed:
        partition, offset, key, value = line.split("|")
        assert key == "key" + value.split()[1]
        seen[value] = (int(partition.removeprefix("Partition:")), int(offset.removeprefix("Offset:")))
    assert seen == where

    # headers (parse.headers), read back from the partition and offset confluent-kafka finds the record at
    tool("kafka-console-producer", "--bootstrap-server", target.bootstrap, "--topic", topic, "--reader-property",
         "parse.headers=true", "--reader-property", "parse.key=true", input="h1:a,h2:b\tk\tv-with-headers\n")
    [(partition, offset, key, headers)] = [(p, o, k, h) for p, records in read(target, topic, 2).items()
                                           for o, k, v, h in records if v == b"v-with-headers"]
    assert (key, headers) == (b"k", [("h1", b"a"), ("h2", b"b")])
    [line] = console_consume(target, topic, 1, "--partition", partition, "--offset", offset, "--formatter-property",
                             "print.headers=true", "--formatter-property", "print.key=true")
    assert line.split("\t") == ["h1:a,h2:b", "k", "v-with-headers"]


# ================================================================ kafka-consumer-groups

def test_kafka_consumer_groups_list_describe_reset_delete(target):
    b = target.bootstrap
    topic, group = target.create_topic(unique("groups"), partitions=2), unique("group")
    for p in range(2):
        assert produce(target, topic, [(None, b"%d" % i) for i in range(3 + p)], partition=p) == [None] * (3 + p)
    console_consume(target, topic, 7, "--from-beginning", "--group", group)
    cmd = ("kafka-consumer-groups", "--bootstrap-server", b)

    assert group in lines(tool(*cmd, "--list").stdout)
    states = table(tool(*cmd, "--list", "--state").stdout, "GROUP")
    assert {"GROUP": group, "STATE": "Empty"} in states
    offsets = table(tool(*cmd, "--describe", "--group", group).stdout, "GROUP")
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in offsets] == [
        (topic, "0", "3", "3", "0"), (topic, "1", "4", "4", "0")]
    state = tool(*cmd, "--describe", "--group", group, "--state").stdout
    m = re.search(rf"^{re.escape(group)}\s+127\.0\.0\.1:(\d+)\s+\((\d+)\)\s+\S+\s+Empty\s+0$", state, re.M)
    assert m, state
    coordinator = target.admin().describe_consumer_groups([group])[group].result(WAIT).coordinator
    assert (int(m.group(1)), int(m.group(2))) == (coordinator.port, coordinator.id)

    # a running member: shown with its client id; the group cannot be deleted while it is there
    member = kafka_tools.start("kafka-console-consumer", "--bootstrap-server", b, "--topic", topic, "--group", group,
                               "--consumer-property", "client.id=tools-member", stderr=subprocess.DEVNULL)
    try:
        def members():
            rows = table(tool(*cmd, "--describe", "--group", group, "--members").stdout, "GROUP")
            return rows if rows and rows[0]["#PARTITIONS"] == "2" else None
        [row] = wait_for(members, "the console consumer to join and be assigned both partitions")
        assert row["CLIENT-ID"] == "tools-member" and row["HOST"] == "/127.0.0.1"
        busy = tool(*cmd, "--delete", "--group", group, expect=None)
        assert "The group is not empty" in busy.stdout + busy.stderr, busy
        refused = tool(*cmd, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute",
                       expect=None)
        assert "inactive" in refused.stdout + refused.stderr, refused
    finally:
        member.terminate()
        member.wait(30)
    wait_for(lambda: {"GROUP": group, "STATE": "Empty"} in table(tool(*cmd, "--list", "--state").stdout, "GROUP"),
             "the group to be empty again")

    # reset: a dry run changes nothing, --execute commits the earliest offsets
    plan = table(tool(*cmd, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest").stdout, "GROUP")
    assert sorted((r["PARTITION"], r["NEW-OFFSET"]) for r in plan) == [("0", "0"), ("1", "0")]
    assert committed(target, group, topic, 2) == {0: 3, 1: 4}
    done = table(tool(*cmd, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                      "--execute").stdout, "GROUP")
    assert sorted((r["PARTITION"], r["NEW-OFFSET"]) for r in done) == [("0", "0"), ("1", "0")]
    assert committed(target, group, topic, 2) == {0: 0, 1: 0}
    lag = table(tool(*cmd, "--describe", "--group", group).stdout, "GROUP")
    assert [(r["CURRENT-OFFSET"], r["LAG"]) for r in lag] == [("0", "3"), ("0", "4")]
    tool(*cmd, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", 2, "--execute")
    assert committed(target, group, topic, 2) == {0: 0, 1: 2}

    # --delete-offsets (OffsetDelete) of one partition of an empty group
    out = tool(*cmd, "--delete-offsets", "--group", group, "--topic", f"{topic}:1").stdout
    assert out.startswith(f"Request succeeded for deleting offsets from group {group}.")
    assert table(out, "TOPIC") == [{"TOPIC": topic, "PARTITION": "1", "STATUS": "Successful"}]
    assert committed(target, group, topic, 2) == {0: 0, 1: ck.OFFSET_INVALID}

    out = tool(*cmd, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out.stdout
    assert group not in lines(tool(*cmd, "--list").stdout)
    assert group not in {g.group_id for g in target.admin().list_consumer_groups().result(WAIT).valid}
    missing = tool(*cmd, "--describe", "--group", group, expect=None)    # Kafka 4: GROUP_ID_NOT_FOUND (KIP-1043)
    assert f"GroupIdNotFoundException: Group {group} not found." in missing.stdout, missing


def test_kafka_consumer_groups_consumer_protocol(target):
    """A KIP-848 group (a console consumer with group.protocol=consumer): described from ConsumerGroupDescribe."""
    b = target.bootstrap
    topic, group = target.create_topic(unique("kip848"), partitions=2), unique("kip848")
    cmd = ("kafka-consumer-groups", "--bootstrap-server", b)
    member = kafka_tools.start("kafka-console-consumer", "--bootstrap-server", b, "--topic", topic, "--group", group,
                               "--consumer-property", "group.protocol=consumer", "--consumer-property",
                               "client.id=kip848-member", stderr=subprocess.DEVNULL)
    try:
        def assigned():
            rows = table(tool(*cmd, "--describe", "--group", group, "--members", "--verbose").stdout, "GROUP")
            return rows if rows and rows[0]["#PARTITIONS"] == "2" else None
        [row] = wait_for(assigned, "the member's assignment")
        assert (row["CLIENT-ID"], row["CURRENT-ASSIGNMENT"], row["TARGET-ASSIGNMENT"]) == (
            "kip848-member", f"{topic}:0,1", f"{topic}:0,1")
        assert row["CURRENT-EPOCH"] == row["TARGET-EPOCH"] != "0"
        assert {"GROUP": group, "TYPE": "Consumer"} in table(tool(*cmd, "--list", "--type").stdout, "GROUP")
        state = tool(*cmd, "--describe", "--group", group, "--state", "--verbose").stdout
        assert re.search(rf"^{re.escape(group)}\s+127\.0\.0\.1:\d+\s+\(\d+\)\s+uniform\s+Stable\s+(\d+)\s+\1\s+1$",
                         state, re.M), state
        described = target.admin().describe_consumer_groups([group])[group].result(WAIT)
        assert described.type.name == "CONSUMER"
        assert [m.client_id for m in described.members] == ["kip848-member"]
        assert [m.member_id for m in described.members] == [row["CONSUMER-ID"]]
    finally:
        member.terminate()
        member.wait(30)
    wait_for(lambda: {"GROUP": group, "STATE": "Empty"} in table(tool(*cmd, "--list", "--state").stdout, "GROUP"),
             "the member to leave")
    assert f"Deletion of requested consumer groups ('{group}') was successful." in tool(
        *cmd, "--delete", "--group", group).stdout


# ================================================================ kafka-get-offsets, kafka-delete-records

def get_offsets(target: Target, *args) -> dict[tuple[str, int], int]:
    """kafka-get-offsets' `topic:partition:offset` lines."""
    out = tool("kafka-get-offsets", "--bootstrap-server", target.bootstrap, *args).stdout
    found = {}
    for line in lines(out):
        topic, partition, offset = line.rsplit(":", 2)
        found[(topic, int(partition))] = int(offset)
    return found


def listed_offsets(target: Target, topic: str, partitions: int, spec) -> dict[tuple[str, int], int]:
    """confluent-kafka's ListOffsets for the same question."""
    from confluent_kafka.admin import OffsetSpec  # noqa: F401  (spec is built by the caller)
    result = target.admin().list_offsets({ck.TopicPartition(topic, p): spec for p in range(partitions)})
    return {(tp.topic, tp.partition): f.result(WAIT).offset for tp, f in result.items()}


def test_kafka_get_offsets(target):
    from confluent_kafka.admin import OffsetSpec
    topic = target.create_topic(unique("offsets"), partitions=2)
    p = ck.Producer({"bootstrap.servers": target.bootstrap, "acks": "all"})
    for ts in (1000, 5000, 2000, 3000, 4000):           # the largest timestamp is at offset 1
        p.produce(topic, value=b"%d" % ts, partition=0, timestamp=ts)
    for ts in (1000, 1100, 1200):
        p.produce(topic, value=b"%d" % ts, partition=1, timestamp=ts)
    assert p.flush(WAIT) == 0

    latest = get_offsets(target, "--topic", topic)
    assert latest == {(topic, 0): 5, (topic, 1): 3} == listed_offsets(target, topic, 2, OffsetSpec.latest())
    assert get_offsets(target, "--topic", topic, "--time", -2) == {(topic, 0): 0, (topic, 1): 0}
    assert get_offsets(target, "--topic", topic, "--time", "earliest") == {(topic, 0): 0, (topic, 1): 0}
    assert get_offsets(target, "--topic", topic, "--time", -3) == {(topic, 0): 1, (topic, 1): 2} == listed_offsets(
        target, topic, 2, OffsetSpec.max_timestamp())
    # by time: the first offset whose timestamp is at or after it (none: no line for the partition)
    assert get_offsets(target, "--topic", topic, "--time", 2500) == {(topic, 0): 1}
    assert get_offsets(target, "--topic-partitions", f"{topic}:1", "--time", 1100) == {(topic, 1): 1}
    assert get_offsets(target, "--topic", topic, "--partitions", "0", "--time", -4) == {(topic, 0): 0}   # earliest-local
    # latest-tiered (KIP-1005): no tiered storage, so offset -1, which the tool leaves out as Kafka's does
    assert get_offsets(target, "--topic", topic, "--partitions", "0", "--time", "latest-tiered") == {}


def test_kafka_delete_records(target, tmp_path):
    topic = target.create_topic(unique("delete-records"), partitions=2)
    for p in range(2):
        assert produce(target, topic, [(None, b"%d" % i) for i in range(5)], partition=p) == [None] * 5
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 2},
                                                            {"topic": topic, "partition": 1, "offset": -1}]}))
    out = tool("kafka-delete-records", "--bootstrap-server", target.bootstrap, "--offset-json-file", plan).stdout
    assert "Records delete operation completed:" in out
    marks = dict(re.findall(r"^partition: (\S+)\tlow_watermark: (\d+)$", out, re.M))
    assert set(marks) == {f"{topic}-0", f"{topic}-1"}, out
    # the effect: the log start offsets moved (-1: up to the high watermark), the records below them are gone
    assert get_offsets(target, "--topic", topic, "--time", -2) == {(topic, 0): 2, (topic, 1): 5}
    got = read(target, topic, 2)
    assert [(o, v) for o, _, v, _ in got[0]] == [(2, b"2"), (3, b"3"), (4, b"4")] and got[1] == []
    # an offset past the high watermark: Kafka's OFFSET_OUT_OF_RANGE, reported per partition
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 99}]}))
    bad = tool("kafka-delete-records", "--bootstrap-server", target.bootstrap, "--offset-json-file", plan,
               expect=None).stdout
    assert re.search(rf"^partition: {topic}-0\terror: .*OffsetOutOfRangeException", bad, re.M), bad
    # and what the tool printed for the first request: the low watermarks it asked for
    assert marks == {f"{topic}-0": "2", f"{topic}-1": "5"}, out


# ================================================================ kafka-transactions

def transactions(target: Target, *args, expect: int | None = 0) -> list[dict[str, str]]:
    return tsv(tool("kafka-transactions", "--bootstrap-server", target.bootstrap, *args, expect=expect).stdout)


def test_kafka_transactions_list_describe(single):
    topic, txn = single.create_topic(unique("txn")), unique("txn-id")
    p = ck.Producer({"bootstrap.servers": single.bootstrap, "transactional.id": txn,
                     "transaction.timeout.ms": 120000})
    p.init_transactions(WAIT)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(WAIT) == 0

    [row] = [r for r in transactions(single, "list") if r["TransactionalId"] == txn]
    assert row["Coordinator"] == "0" and row["TransactionState"] == "Ongoing"
    pid = row["ProducerId"]
    assert [r["TransactionalId"] for r in transactions(single, "list", "--duration-filter", 3600000)
            if r["TransactionalId"] == txn] == []                   # not running for an hour yet
    [d] = transactions(single, "describe", "--transactional-id", txn)
    assert (d["CoordinatorId"], d["ProducerId"], d["TransactionState"], d["TransactionTimeoutMs"],
            d["TopicPartitions"]) == ("0", pid, "Ongoing", "120000", f"{topic}-0")
    assert 0 <= int(d["TransactionDurationMs"]) < 120000
    [producer] = transactions(single, "describe-producers", "--topic", topic, "--partition", 0)
    assert (producer["ProducerId"], producer["LastSequence"], producer["CurrentTransactionStartOffset"]) == (pid, "2", "0")
    # open, but its coordinator knows it and the partition: not hanging, even with no time allowed
    assert transactions(single, "find-hanging", "--broker-id", 0, "--max-transaction-timeout", 0) == []

    p.commit_transaction(WAIT)
    wait_for(lambda: [r["TransactionState"] for r in transactions(single, "list") if r["TransactionalId"] == txn] ==
             ["CompleteCommit"], "the transaction to complete")
    [producer] = transactions(single, "describe-producers", "--topic", topic, "--partition", 0)
    assert producer["CurrentTransactionStartOffset"] == "None"
    assert [v for _, _, v, _ in read(single, topic, committed=True)[0]] == [b"0", b"1", b"2"]
    missing = tool("kafka-transactions", "--bootstrap-server", single.bootstrap, "describe", "--transactional-id",
                   unique("nobody"), expect=1)
    assert "failed because the ID could not be found" in missing.stderr, missing      # TRANSACTIONAL_ID_NOT_FOUND


def test_kafka_transactions_list_by_pattern(single):
    require_api(single, 66, "ListTransactions", version=2)       # KIP-1152's TransactionalIdPattern
    txn = unique("patterned")
    p = ck.Producer({"bootstrap.servers": single.bootstrap, "transactional.id": txn})
    p.init_transactions(WAIT)
    rows = transactions(single, "list", "--transactional-id-pattern", "patterned-.*")
    assert txn in [r["TransactionalId"] for r in rows]
    assert all(r["TransactionalId"].startswith("patterned-") for r in rows)


@pytest.fixture(scope="module")
def unverified():
    """A broker without KIP-890's check, where a producer can still leave a transaction hanging."""
    with EmbeddedBroker({"transaction.partition.verification.enable": "false"}) as b:
        t = Target("broker", broker=b)
        yield t
        t.close()


def hang_a_transaction(target: Target, topic: str, txn: str) -> int:
    """A transaction its coordinator knows nothing of: a producer writes again after its abort completed
    (same epoch, no AddPartitionsToTxn), as a late retry could before KIP-890. Returns its first offset."""
    from kafka_compat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
    from kafka_compat.protocol.messages.describe_transactions import DescribeTransactionsRequest
    from kafka_compat.protocol.messages.end_txn import EndTxnRequest
    from kafka_compat.protocol.messages.find_coordinator import FindCoordinatorRequest
    from kafka_compat.protocol.messages.init_producer_id import InitProducerIdRequest
    c = WireClient("127.0.0.1", target.port)
    try:
        wait_for(lambda: c.call(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[txn]))
                 .coordinators[0].error_code == 0, "a transaction coordinator")
        init = wait_for(lambda: (r := c.call(22, 4, InitProducerIdRequest(
            transactional_id=txn, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))).error_code == 0
            and r, "InitProducerId")
        pid, epoch = init.producer_id, init.producer_epoch

        def write(seq: int, n: int):
            batch = build_batch([(None, b"hanging %d" % i) for i in range(seq, seq + n)], producer_id=pid,
                                producer_epoch=epoch, base_sequence=seq, is_transactional=True)
            r = c.call(0, 9, ProduceRequest(transactional_id=txn, acks=-1, timeout_ms=10000, topic_data=[
                ProduceRequest.TopicProduceData(name=topic, partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
            part = r.responses[0].partition_responses[0]
            assert part.error_code == 0, part
            return part.base_offset
        added = c.call(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        write(0, 2)
        assert c.call(26, 3, EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                          committed=False)).error_code == 0
        wait_for(lambda: c.call(65, 0, DescribeTransactionsRequest(transactional_ids=[txn])).transaction_states[0]
                 .transaction_state == "CompleteAbort", "the abort to complete")
        return write(2, 1)
    finally:
        c.close()


def test_kafka_transactions_find_hanging_and_abort(unverified):
    topic, txn = unverified.create_topic(unique("hanging")), unique("hanging-id")
    start = hang_a_transaction(unverified, topic, txn)
    end = get_offsets(unverified, "--topic", topic)[(topic, 0)]
    from confluent_kafka.admin import OffsetSpec
    lso = unverified.admin().list_offsets({ck.TopicPartition(topic, 0): OffsetSpec.latest()},
                                          isolation_level=ck.IsolationLevel.READ_COMMITTED)
    assert next(iter(lso.values())).result(WAIT).offset == start < end       # read_committed consumers are stuck

    [producer] = transactions(unverified, "describe-producers", "--topic", topic, "--partition", 0)
    assert producer["CurrentTransactionStartOffset"] == str(start)
    # found by broker and by topic, once no time is allowed for it (its timestamp is from now)
    assert transactions(unverified, "find-hanging", "--broker-id", 0) == []
    for scope in (("--broker-id", 0), ("--topic", topic)):
        [hanging] = transactions(unverified, "find-hanging", *scope, "--max-transaction-timeout", 0)
        assert (hanging["Topic"], hanging["Partition"], hanging["ProducerId"], hanging["StartOffset"]) == (
            topic, "0", producer["ProducerId"], str(start))

    tool("kafka-transactions", "--bootstrap-server", unverified.bootstrap, "abort", "--topic", topic, "--partition", 0,
         "--start-offset", start)
    [producer] = transactions(unverified, "describe-producers", "--topic", topic, "--partition", 0)
    assert producer["CurrentTransactionStartOffset"] == "None"
    assert transactions(unverified, "find-hanging", "--topic", topic, "--max-transaction-timeout", 0) == []
    lso = unverified.admin().list_offsets({ck.TopicPartition(topic, 0): OffsetSpec.latest()},
                                          isolation_level=ck.IsolationLevel.READ_COMMITTED)
    assert next(iter(lso.values())).result(WAIT).offset == end + 1          # past the ABORT marker the tool wrote
    assert read(unverified, topic, committed=True)[0] == []                  # both transactions aborted


# ================================================================ kafka-leader-election

def test_kafka_leader_election(single, tmp_path):
    topic = single.create_topic(unique("election"), partitions=2)
    b = single.bootstrap
    out = tool("kafka-leader-election", "--bootstrap-server", b, "--election-type", "preferred", "--topic", topic,
               "--partition", 0).stdout
    assert out.strip() == f"Valid replica already elected for partitions {topic}-0"     # one node: always preferred
    plan = tmp_path / "partitions.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": p} for p in range(2)]}))
    out = tool("kafka-leader-election", "--bootstrap-server", b, "--election-type", "unclean", "--path-to-json-file",
               plan).stdout
    assert re.fullmatch(rf"Valid replica already elected for partitions ({topic}-[01]), ({topic}-[01])",
                        out.strip()) and {f"{topic}-0", f"{topic}-1"} == set(re.findall(rf"{topic}-\d", out))
    bad = tool("kafka-leader-election", "--bootstrap-server", b, "--election-type", "preferred", "--topic",
               unique("missing"), "--partition", 0, expect=1)
    assert "UnknownTopicOrPartitionException" in bad.stdout + bad.stderr


def test_kafka_leader_election_on_cluster(clustered):
    from cluster_support import wait_all_registered, wait_for_full_isr
    cluster = clustered.cluster
    topic = clustered.create_topic(unique("election"), partitions=1)
    preferred = topic_metadata(clustered, topic).partitions[0].replicas[0]
    assert cluster.leader(topic, 0) == preferred
    cluster.stop(preferred)                             # a controlled shutdown moves the leadership away
    moved = cluster.wait_for_leader(topic, 0, exclude={preferred})
    cluster.restart(preferred)
    wait_all_registered(cluster)
    wait_for_full_isr(cluster, topic, 0)
    assert cluster.leader(topic, 0) == moved != preferred   # no automatic rebalance in this cluster

    out = tool("kafka-leader-election", "--bootstrap-server", clustered.bootstrap, "--election-type", "preferred",
               "--topic", topic, "--partition", 0).stdout
    assert out.strip() == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"
    assert cluster.leader(topic, 0) == preferred
    wait_for(lambda: topic_metadata(clustered, topic).partitions[0].leader == preferred, "Metadata's new leader")
    out = tool("kafka-leader-election", "--bootstrap-server", clustered.bootstrap, "--election-type", "preferred",
               "--all-topic-partitions").stdout
    assert f"{topic}-0" not in out                  # nothing left to elect for it
    assert produce(clustered, topic, [(None, b"after the election")]) == [None]


# ================================================================ kafka-log-dirs

def logical_size(log_dir: str, topic: str, partition: int) -> int:
    """The bytes of whole batches in a partition's segment files (a preallocated tail not counted)."""
    total = 0
    directory = Path(log_dir, f"{topic}-{partition}")
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        end = 0
        while end + 12 <= len(data):
            length = int.from_bytes(data[end + 8:end + 12], "big", signed=True)
            if length <= 0 or end + 12 + length > len(data):
                break
            end += 12 + length
        total += end
    return total


def test_kafka_log_dirs_describe(target):
    topic = target.create_topic(unique("log-dirs"), partitions=2)
    assert produce(target, topic, [(None, b"x" * 100)] * 10) == [None] * 10
    if target.cluster:
        wait_for(lambda: len({logical_size(b.log_dir, topic, 0) for b in target.brokers}) == 1, "the followers")
    out = tool("kafka-log-dirs", "--bootstrap-server", target.bootstrap, "--describe", "--topic-list", topic).stdout
    assert lines(out)[:2] == ["Querying brokers for log directories information",
                              "Received log directory information from brokers " + ",".join(map(str, target.ids))]
    report = json.loads(lines(out)[2])
    assert report["version"] == 1 and sorted(b["broker"] for b in report["brokers"]) == target.ids
    for entry in report["brokers"]:
        broker = target.brokers[entry["broker"]]
        [log_dir] = entry["logDirs"]
        assert log_dir["logDir"] == broker.log_dir and log_dir["error"] is None
        sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
        assert sizes == {f"{topic}-0": logical_size(broker.log_dir, topic, 0), f"{topic}-1": 0}
        assert sizes[f"{topic}-0"] > 1000
        assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])
    one = json.loads(lines(tool("kafka-log-dirs", "--bootstrap-server", target.bootstrap, "--describe",
                                "--broker-list", target.ids[-1], "--topic-list", topic).stdout)[2])
    assert [b["broker"] for b in one["brokers"]] == [target.ids[-1]]


# ================================================================ kafka-acls

@pytest.fixture(scope="module")
def authorized():
    """A broker with Kafka's AclAuthorizer, open to anyone on resources without ACLs."""
    with EmbeddedBroker({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                         "allow.everyone.if.no.acl.found": "true"}) as b:
        t = Target("broker", broker=b)
        yield t
        t.close()


def acl_listing(text: str) -> dict[tuple[str, str, str], set[tuple[str, str, str, str]]]:
    """kafka-acls' `Current ACLs for resource ResourcePattern(...)` blocks:
    {(type, name, pattern): {(principal, host, operation, permission)}}."""
    out: dict = {}
    resource = None
    for line in lines(text):
        m = re.match(r"Current ACLs for resource `ResourcePattern\(resourceType=(\w+), name=(.*), "
                     r"patternType=(\w+)\)`:", line)
        if m:
            resource = m.groups()
            out[resource] = set()
            continue
        m = re.match(r"\s*\(principal=(.*), host=(.*), operation=(\w+), permissionType=(\w+)\)", line)
        if m and resource:
            out[resource].add(m.groups())
    return out


def test_kafka_acls_add_list_remove(authorized):
    b, port = authorized.bootstrap, authorized.port
    topic, group, prefix = authorized.create_topic(unique("acl")), unique("acl-group"), unique("acl-prefix")
    acls = ("kafka-acls", "--bootstrap-server", b)
    assert wire_produce(port, topic, b"before") == 0

    out = tool(*acls, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
               "--topic", topic, "--group", group).stdout
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`" in out
    tool(*acls, "--add", "--allow-principal", "User:bob", "--producer", "--topic", prefix,
         "--resource-pattern-type", "prefixed")
    listed = acl_listing(tool(*acls, "--list").stdout)
    assert listed[("TOPIC", topic, "LITERAL")] == {("User:alice", "*", "READ", "ALLOW"),
                                                   ("User:alice", "*", "DESCRIBE", "ALLOW")}
    assert listed[("GROUP", group, "LITERAL")] == {("User:alice", "*", "READ", "ALLOW"),
                                                   ("User:alice", "*", "DESCRIBE", "ALLOW")}
    assert listed[("TOPIC", prefix, "PREFIXED")] == {("User:bob", "*", op, "ALLOW")       # --producer's three
                                                     for op in ("WRITE", "DESCRIBE", "CREATE")}
    # the effect: with ACLs on the topic and none for ANONYMOUS, this connection may no longer write
    assert wire_produce(port, topic, b"after") == 29                                         # TOPIC_AUTHORIZATION_FAILED
    only = acl_listing(tool(*acls, "--list", "--topic", f"{prefix}-and-more", "--resource-pattern-type",
                            "match").stdout)
    assert list(only) == [("TOPIC", prefix, "PREFIXED")]                                     # what matches the name

    tool(*acls, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
         "Describe", "--topic", topic, "--group", group)
    tool(*acls, "--remove", "--force", "--topic", prefix, "--resource-pattern-type", "prefixed")
    assert acl_listing(tool(*acls, "--list").stdout) == {}
    assert wire_produce(port, topic, b"again") == 0


# ================================================================ kafka-features, kafka-broker-api-versions

def finalized_on(broker) -> tuple[int, dict[str, int]]:
    """A broker's finalized features (ApiVersions v4) and their epoch."""
    c = WireClient("127.0.0.1", broker.port)
    try:
        r = c.call(18, 4, ApiVersionsRequest(client_software_name="kafka-tools-test", client_software_version="1"))
    finally:
        c.close()
    return r.finalized_features_epoch, {f.name: f.max_version_level for f in r.finalized_features}


def feature_lines(text: str) -> dict[str, dict[str, str]]:
    """kafka-features describe: `Feature: name  SupportedMinVersion: 0  ...` per line (padded with spaces)."""
    rows = [dict(re.findall(r"(\w+): (\S+)", line)) for line in lines(text)]
    return {row["Feature"]: row for row in rows}


def test_kafka_features_describe(target):
    c = WireClient("127.0.0.1", target.port)
    try:       # v4: the tool's Admin client sees the features whose minimum is 0 too
        r = c.call(18, 4, ApiVersionsRequest(client_software_name="kafka-tools-test", client_software_version="1"))
    finally:
        c.close()
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    advertised = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    out = tool("kafka-features", "--bootstrap-server", target.bootstrap, "describe").stdout
    printed = feature_lines(out)
    assert set(printed) == set(advertised) == {"metadata.version", "transaction.version", "group.version",
                                               "share.version", "streams.version"}
    # metadata.version is printed by its release name, as Kafka 4's tool knows the levels
    assert (printed["metadata.version"]["SupportedMinVersion"], printed["metadata.version"]["SupportedMaxVersion"],
            printed["metadata.version"]["FinalizedVersionLevel"]) == ("3.3-IV3", "4.4-IV2", "4.4-IV2")
    for name, f in printed.items():
        assert int(f["Epoch"]) == r.finalized_features_epoch
        if name != "metadata.version":
            assert (int(f["SupportedMinVersion"]), int(f["SupportedMaxVersion"])) == advertised[name]
            assert int(f["FinalizedVersionLevel"]) == finalized.get(name, 0)


def test_kafka_features_upgrade_and_downgrade(target):
    """Each change through the tool (Admin.updateFeatures, sent to the controller) shows on every broker without a
    restart; a refused one exits 1 with the controller's reason. group.version=1 again at the end (the consumer
    protocol tests share these brokers)."""
    require_api(target, 57, "UpdateFeatures")
    features = ("kafka-features", "--bootstrap-server", target.bootstrap)

    def everywhere(expected: dict[str, int]) -> int:
        """Wait until every broker finalizes `expected`; their common epoch."""
        def agreed():
            shown = [finalized_on(b) for b in target.brokers if b.running]
            return shown if all(levels == expected for _, levels in shown) else None
        epochs = {epoch for epoch, _ in wait_for(agreed, f"every broker to finalize {expected}")}
        assert len(epochs) == 1
        return epochs.pop()

    def describe() -> dict[str, str]:
        return {n: f["FinalizedVersionLevel"] for n, f in feature_lines(tool(*features, "describe").stdout).items()}

    defaults = {"metadata.version": 33, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1}
    start = everywhere(defaults)
    try:
        assert tool(*features, "upgrade", "--feature", "group.version=1").stdout.strip() == \
            "group.version was upgraded to 1."
        out = tool(*features, "downgrade", "--feature", "group.version=0", "--dry-run").stdout
        assert out.strip() == "group.version can be downgraded to 0."
        assert tool(*features, "downgrade", "--feature", "group.version=0").stdout.strip() == \
            "group.version was downgraded to 0."
        assert everywhere({"metadata.version": 33, "transaction.version": 2, "share.version": 1, "streams.version": 1}) > start
        assert wait_for(lambda: describe()["group.version"] == "0", "describe to show group.version 0")
        assert tool(*features, "downgrade", "--unsafe", "--feature", "transaction.version=0").stdout.strip() == \
            "transaction.version was downgraded to 0."
        assert everywhere({"metadata.version": 33, "share.version": 1, "streams.version": 1}) > start
        refused = tool(*features, "upgrade", "--feature", "transaction.version=3", expect=1)
        assert "Could not upgrade transaction.version to 3." in refused.stdout
        assert "only supports versions 0-2" in refused.stdout
        out = tool(*features, "upgrade", "--feature", "group.version=1", "--feature", "transaction.version=2").stdout
        assert lines(out) == ["group.version was upgraded to 1.", "transaction.version was upgraded to 2."]
        everywhere(defaults)
        assert tool(*features, "disable", "--feature", "group.version").stdout.strip() == "group.version was disabled."
        everywhere({"metadata.version": 33, "transaction.version": 2, "share.version": 1, "streams.version": 1})
    finally:
        tool(*features, "upgrade", "--feature", "group.version=1", "--feature", "transaction.version=2")
    everywhere(defaults)


def test_kafka_broker_api_versions(target):
    out = tool("kafka-broker-api-versions", "--bootstrap-server", target.bootstrap).stdout
    blocks = re.findall(r"^127\.0\.0\.1:(\d+) \(id: (\d+) rack: \S+ isFenced: false\) -> \((.*?)^\)", out, re.M | re.S)
    assert sorted(int(i) for _, i, _ in blocks) == target.ids
    advertised = api_versions(target)
    for port, _, body in blocks:
        supported = {int(k): (int(lo), int(hi or lo)) for k, lo, hi in      # `0 [usable: 0]` when min == max
                     re.findall(r"^\s+\w+\((\d+)\): (\d+)(?: to (\d+))? \[usable: \d+\]", body, re.M)}
        unsupported = {int(k) for k in re.findall(r"^\s+\w+\((\d+)\): UNSUPPORTED", body, re.M)}
        assert supported and all(advertised[k] == v for k, v in supported.items())
        assert not unsupported & set(advertised)
        assert set(advertised) - set(supported) - unsupported <= {4, 5, 6, 7}   # broker-only, hidden by the tool


# ================================================================ kafka-producer-perf-test, kafka-consumer-perf-test

def test_kafka_producer_perf_test(target):
    topic = target.create_topic(unique("perf"), partitions=2)
    out = tool("kafka-producer-perf-test", "--topic", topic, "--num-records", 5000, "--record-size", 100,
               "--throughput", -1, "--command-property", f"bootstrap.servers={target.bootstrap}", "acks=all").stdout
    m = re.search(r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency", out, re.M)
    assert m and int(m.group(1)) == 5000, out
    c = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": unique("count")})
    try:
        assert sum(c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1] for p in range(2)) == 5000
    finally:
        c.close()
    target.perf_topic = topic


def test_kafka_consumer_perf_test(target):
    topic = getattr(target, "perf_topic", None) or target.create_topic(unique("perf"), partitions=2)
    if not getattr(target, "perf_topic", None):
        assert produce(target, topic, [(None, b"x" * 100)] * 5000) == [None] * 5000
    out = tool("kafka-consumer-perf-test", "--bootstrap-server", target.bootstrap, "--topic", topic, "--num-records",
               5000, "--timeout", 60000).stdout
    header, row = lines(out)[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")]))
    assert int(stats["data.consumed.in.nMsg"]) == 5000
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(5000 * 100 / 1024 / 1024, rel=0.01)


# ================================================================ kafka-reassign-partitions

def json_after(text: str, heading: str):
    """The JSON line that follows `heading` in kafka-reassign-partitions' output."""
    rest = text.split(heading, 1)[1]
    return json.loads(next(line for line in rest.splitlines() if line.startswith("{")))


def test_kafka_reassign_partitions_generate_execute_verify(clustered, tmp_path):
    from cluster_support import wait_for_full_isr
    cluster, b = clustered.cluster, clustered.bootstrap
    topic = unique("reassign")
    before = [[0, 1], [1, 2], [2, 0]]
    clustered.admin().create_topics([NewTopic(topic, len(before), replica_assignment=before)])[topic].result(WAIT)
    for p in range(3):
        wait_for_full_isr(cluster, topic, p, 2)
        assert produce(clustered, topic, [(None, b"%d-%d" % (p, i)) for i in range(20)], partition=p) == [None] * 20
    cmd = ("kafka-reassign-partitions", "--bootstrap-server", b)

    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    out = tool(*cmd, "--generate", "--topics-to-move-json-file", move, "--broker-list", "1,2").stdout
    current = json_after(out, "Current partition replica assignment")
    proposed = json_after(out, "Proposed partition reassignment configuration")
    assert {p["partition"]: p["replicas"] for p in current["partitions"]} == dict(enumerate(before))
    plan = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
    assert sorted(plan) == [0, 1, 2] and all(sorted(r) == [1, 2] for r in plan.values())

    reassignment = tmp_path / "reassignment.json"
    reassignment.write_text(json.dumps(proposed))
    out = tool(*cmd, "--execute", "--reassignment-json-file", reassignment, "--throttle", 50000000).stdout
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    assert re.search(rf"Successfully started partition reassignments for {topic}-\d,{topic}-\d,{topic}-\d", out), out
    # --verify until every move is done; it then clears the throttles --execute set
    verified = wait_for(lambda: (text := tool(*cmd, "--verify", "--reassignment-json-file", reassignment).stdout)
                        .count("is completed.") == 3 and text, "the reassignment to complete")
    assert sorted(re.findall(rf"Reassignment of partition ({topic}-\d) is completed\.", verified)) == [
        f"{topic}-{p}" for p in range(3)]
    assert "Clearing broker-level throttles on brokers 0,1,2" in verified
    assert f"Clearing topic-level throttles on topic {topic}" in verified
    assert tool(*cmd, "--list").stdout.strip() == "No partition reassignments found."

    # the effect: the assignment in ZooKeeper and Metadata, the throttles gone, every record on the new replicas
    znode = json.loads(cluster.zk.get(f"/brokers/topics/{topic}")[0])
    assert {int(p): r for p, r in znode["partitions"].items()} == plan
    for p in range(3):
        wait_for_full_isr(cluster, topic, p, 2)
    assert {p: m.replicas for p, m in topic_metadata(clustered, topic).partitions.items()} == plan
    configs = topic_config(clustered, topic)
    assert not configs["leader.replication.throttled.replicas"].value
    assert not configs["follower.replication.throttled.replicas"].value
    assert all("leader.replication.throttled.rate" not in broker_config(clustered, i) for i in range(3))
    got = read(clustered, topic, 3)
    assert {p: [v for _, _, v, _ in records] for p, records in got.items()} == {
        p: [b"%d-%d" % (p, i) for i in range(20)] for p in range(3)}
    for p, replicas in plan.items():
        sizes = wait_for(lambda: (s := {logical_size(cluster.brokers[r].log_dir, topic, p) for r in replicas})
                         and len(s) == 1 and s, f"{topic}-{p}'s replicas to hold the same bytes")
        assert sizes.pop() > 0
    wait_for(lambda: not any(Path(cluster.brokers[0].log_dir, f"{topic}-{p}").exists() for p in range(3)),
             "broker 0 to delete its replicas")


def test_kafka_reassign_partitions_generate(single, tmp_path):
    """One node: --generate needs only Metadata, and can only propose the one broker there is."""
    topic = single.create_topic(unique("reassign"), partitions=2)
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    out = tool("kafka-reassign-partitions", "--bootstrap-server", single.bootstrap, "--generate",
               "--topics-to-move-json-file", move, "--broker-list", "0").stdout
    current = json_after(out, "Current partition replica assignment")
    assert [(p["partition"], p["replicas"], p["log_dirs"]) for p in current["partitions"]] == [
        (0, [0], [single.broker.log_dir]), (1, [0], [single.broker.log_dir])]
    proposed = json_after(out, "Proposed partition reassignment configuration")
    assert [(p["partition"], p["replicas"]) for p in proposed["partitions"]] == [(0, [0]), (1, [0])]


def test_kafka_reassign_partitions_execute_verify(single, tmp_path):
    """One node: a plan naming the replicas a partition already has, executed and verified."""
    require_api(single, 45, "AlterPartitionReassignments")
    require_api(single, 46, "ListPartitionReassignments")
    topic = single.create_topic(unique("reassign"))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [0]}]}))
    cmd = ("kafka-reassign-partitions", "--bootstrap-server", single.bootstrap)
    assert f"Successfully started partition reassignment for {topic}-0" in tool(
        *cmd, "--execute", "--reassignment-json-file", plan).stdout
    wait_for(lambda: f"Reassignment of partition {topic}-0 is completed." in tool(
        *cmd, "--verify", "--reassignment-json-file", plan).stdout, "the reassignment to complete")
    assert tool(*cmd, "--list").stdout.strip() == "No partition reassignments found."


def test_kafka_reassign_partitions_between_log_dirs(single, tmp_path):
    """A replica moved to another log directory of its broker (a plan's log_dirs)."""
    require_api(single, 34, "AlterReplicaLogDirs")
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with EmbeddedBroker({"group.initial.rebalance.delay.ms": 0}, log_dir=",".join(dirs)) as b:
        two = Target("broker", broker=b)
        topic = two.create_topic(unique("log-dir-move"))
        assert produce(two, topic, [(None, b"moved")]) == [None]
        source = next(d for d in dirs if Path(d, f"{topic}-0").exists())
        destination = next(d for d in dirs if d != source)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": [destination]}]}))
        cmd = ("kafka-reassign-partitions", "--bootstrap-server", two.bootstrap)
        tool(*cmd, "--execute", "--reassignment-json-file", plan)
        wait_for(lambda: f"Reassignment of replica {topic}-0-0 completed" in tool(
            *cmd, "--verify", "--reassignment-json-file", plan).stdout.replace("is completed", "completed"),
            "the replica's move")
        assert Path(destination, f"{topic}-0").exists() and not Path(source, f"{topic}-0").exists()
        assert [v for _, _, v, _ in read(two, topic)[0]] == [b"moved"]
        # kafka-log-dirs sees the replica in its new dir, whole, and no future replica left
        report = json.loads(lines(tool("kafka-log-dirs", "--bootstrap-server", two.bootstrap, "--describe",
                                       "--topic-list", topic).stdout)[2])
        [entry] = report["brokers"]
        by_dir = {d["logDir"]: d["partitions"] for d in entry["logDirs"]}
        assert set(by_dir) == set(dirs) and by_dir[source] == []
        assert by_dir[destination] == [{"partition": f"{topic}-0", "size": logical_size(destination, topic, 0),
                                        "offsetLag": 0, "isFuture": False}]
        two.close()


def test_kafka_reassign_partitions_moves_a_log_dir_under_load_through_a_sigkill(tmp_path):
    """The plan's log_dirs with --replica-alter-log-dirs-throttle, an idempotent producer writing all along,
    the broker SIGKILLed in the middle of the copy: the move resumes and completes, and every acknowledged
    record is read back once, in order, from the new dir."""
    import test_alter_replica_log_dirs as jbod
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with EmbeddedBroker({"group.initial.rebalance.delay.ms": 0, "log.segment.bytes": 256 * 1024},
                        log_dir=",".join(dirs)) as b:
        two = Target("broker", broker=b)
        topic = two.create_topic(unique("log-dir-load"))
        source = next(d for d in dirs if Path(d, f"{topic}-0").exists())
        destination = next(d for d in dirs if d != source)
        load = jbod.Load(b.bootstrap, topic)
        wait_for(lambda: len(load.acked) > 20000, "a log of a few MB")
        filled = load.stop()
        # from now on slower than the throttle, or the copy would never catch up (as in Kafka)
        load = jbod.Load(b.bootstrap, topic, start=5_000_000, pause=0.1)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": [destination]}]}))
        cmd = ("kafka-reassign-partitions", "--bootstrap-server", two.bootstrap)
        out = tool(*cmd, "--execute", "--reassignment-json-file", plan, "--replica-alter-log-dirs-throttle",
                   "1000000").stdout
        assert "The replica-alter-dir throttle limit was set to 1000000 B/s" in out
        wait_for(lambda: jbod.replicas(b, topic).get((destination, True), (0, 0))[0] > 0, "the copy under way")
        b.kill()
        b.start()
        first = load.stop()
        load = jbod.Load(b.bootstrap, topic, start=10_000_000, pause=0.1)
        wait_for(lambda: f"Reassignment of replica {topic}-0-0 completed" in tool(
            *cmd, "--verify", "--reassignment-json-file", plan).stdout.replace("is completed", "completed"),
            "the replica's move")
        second = load.stop()
        assert not Path(source, f"{topic}-0").exists() and Path(destination, f"{topic}-0").is_dir()
        assert "replica.alter.log.dirs.io.max.bytes.per.second" not in broker_config(two, 0)   # verify cleared it
        acked = filled + first + second
        got = jbod.consume_all(b.bootstrap, topic, len(acked))
        wanted = set(acked)
        assert len(got) == len(set(got)) and [v for v in got if v in wanted] == acked
        two.close()


# ================================================================ kafka-verifiable-producer, kafka-verifiable-consumer

class JsonLines:
    """A running verifiable tool's stdout, one JSON event a line, collected by a thread."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.events, self.other = proc, [], []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    self.other.append(line)
                self.cond.notify_all()

    def named(self, name: str) -> list[dict]:
        with self.cond:
            return [e for e in self.events if e["name"] == name]

    def wait(self, predicate, what: str, timeout: float = WAIT):
        with self.cond:
            assert self.cond.wait_for(lambda: predicate(self) or self.proc.poll() is not None and predicate(self)
                                      is None, timeout), f"gave up waiting for {what}"
            assert predicate(self), f"{what}: the tool exited ({self.proc.returncode}) first:\n" + "".join(self.other)

    def finish(self, timeout: float = WAIT) -> int:
        code = self.proc.wait(timeout)
        self.thread.join(timeout)
        return code

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()              # the JVM's shutdown hook closes the client, then exits
        return self.finish()


def verifiable_producer(target: Target, topic: str, count: int, throughput: int = -1,
                        config: Path | None = None) -> JsonLines:
    """`config`: a --command-config file (the tool sets retries=0 unless one says otherwise)."""
    extra = ("--command-config", config) if config else ()
    return JsonLines(kafka_tools.start("kafka-verifiable-producer", "--bootstrap-server", target.bootstrap, "--topic",
                                       topic, "--max-messages", count, "--throughput", throughput, "--acks", -1,
                                       *extra, stderr=subprocess.DEVNULL))


def verifiable_consumer(target: Target, topic: str, group: str, *args) -> JsonLines:
    return JsonLines(kafka_tools.start("kafka-verifiable-consumer", "--bootstrap-server", target.bootstrap, "--topic",
                                       topic, "--group-id", group, "--reset-policy", "earliest", "--verbose", *args,
                                       stderr=subprocess.DEVNULL))


def consumed(consumer: JsonLines) -> dict[tuple[int, int], str]:
    """What the consumer printed: {(partition, offset): value}, each delivery of an offset with the same value."""
    seen: dict[tuple[int, int], str] = {}
    for e in consumer.named("record_data"):
        assert seen.setdefault((e["partition"], e["offset"]), e["value"]) == e["value"], e
    return seen


def test_kafka_verifiable_producer_and_consumer(single):
    topic, group = single.create_topic(unique("verifiable"), partitions=2), unique("verifiable")
    producer = verifiable_producer(single, topic, 500)
    assert producer.finish() == 0
    [data] = producer.named("tool_data")
    assert (data["sent"], data["acked"]) == (500, 500) and not producer.named("producer_send_error")
    acked = {(e["partition"], e["offset"]): e["value"] for e in producer.named("producer_send_success")}
    assert sorted(acked.values(), key=int) == [str(i) for i in range(500)]

    consumer = verifiable_consumer(single, topic, group, "--max-messages", 500)
    assert consumer.finish() == 0
    assert consumed(consumer) == acked and len(consumer.named("record_data")) == 500       # each once
    assert consumer.named("partitions_assigned")[0]["partitions"] == [{"topic": topic, "partition": p}
                                                                      for p in range(2)]
    commits = consumer.named("offsets_committed")
    assert commits and all(c["success"] for c in commits)
    ends = {p: max(o for q, o in acked if q == p) + 1 for p, _ in acked}
    assert {p: o for p, o in committed(single, group, topic, 2).items() if p in ends} == ends
    log = read(single, topic, 2)
    assert {(p, o): v.decode() for p, records in log.items() for o, _, v, _ in records} == acked


def test_kafka_verifiable_producer_and_consumer_through_a_leader_kill(clustered, tmp_path):
    """The partition leader is SIGKILLed while both tools run (acks=all, RF 3, min.insync.replicas 2), then restarted:
    every record is acknowledged (an idempotent producer retrying, as Kafka's system tests configure the tool), is in
    the log exactly once, where the producer was told, and is read by the consumer."""
    from cluster_support import wait_all_registered, wait_for_full_isr
    cluster, count = clustered.cluster, 3000
    config = tmp_path / "producer.properties"
    config.write_text("enable.idempotence=true\nretries=2147483647\ndelivery.timeout.ms=120000\n")
    topic, group = clustered.create_topic(unique("verifiable-kill"), partitions=3), unique("verifiable-kill")
    consumer = verifiable_consumer(clustered, topic, group)
    try:
        consumer.wait(lambda c: c.named("partitions_assigned") and
                      sum(len(e["partitions"]) for e in c.named("partitions_assigned")) >= 3, "the consumer's assignment")
        producer = verifiable_producer(clustered, topic, count, throughput=400, config=config)
        try:
            producer.wait(lambda p: len(p.named("producer_send_success")) >= count // 4, "a quarter acknowledged")
            victim = cluster.leader(topic, 0)
            cluster.kill(victim)
            cluster.wait_for_leader(topic, 0, exclude={victim})
            producer.wait(lambda p: len(p.named("producer_send_success")) >= count // 2, "half acknowledged")
            cluster.restart(victim)
            assert producer.finish(2 * WAIT) == 0
        finally:
            producer.stop()
        [data] = producer.named("tool_data")
        errors = producer.named("producer_send_error")
        acked = {(e["partition"], e["offset"]): e["value"] for e in producer.named("producer_send_success")}
        assert (data["sent"], data["acked"], len(acked), errors) == (count, count, count, [])
        consumer.wait(lambda c: set(acked.values()) <= set(consumed(c).values()), "every acked record consumed",
                      timeout=2 * WAIT)
    finally:
        consumer.stop()
    wait_all_registered(cluster)
    for p in range(3):
        wait_for_full_isr(cluster, topic, p)

    log = read(clustered, topic, 3)
    values = [v.decode() for records in log.values() for _, _, v, _ in records]
    in_log = {(p, o): v.decode() for p, records in log.items() for o, _, v, _ in records}
    assert all(in_log.get(where) == value for where, value in acked.items())    # where the producer was told
    assert all(values.count(v) == 1 for v in acked.values())                    # exactly once (idempotence)
    seen = consumed(consumer)
    assert all(in_log.get(where) == value for where, value in seen.items())     # the consumer saw only the log
    assert set(acked.values()) <= set(seen.values())
    print(f"verifiable through a kill of broker {victim}: {len(acked)} acked, "
          f"{len(consumer.named('record_data')) - len(seen)} redeliveries")
