"""Broker restarts under real clients.

SIGTERM is a graceful shutdown: everything produced before it is read back
after the restart, with the topic's partitions and configs as they were. SIGKILL
is a crash: with a topic flushed at every message (`flush.messages=1`) and
acks=all, every record the producer saw acknowledged (counted in its delivery
callbacks) is there after the restart, at the offset it was acknowledged at.
"""
from __future__ import annotations

import threading
import time

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
from test_clients import PARTITIONS, WAIT, unique  # noqa: E402

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

COUNT = 3000


@pytest.fixture
def broker():
    with EmbeddedBroker() as b:
        yield b


def create_topic(broker, config: dict[str, str] | None = None) -> str:
    topic = unique("restart")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=config or {})]).values():
        f.result(30)
    return topic


def consume_all(broker, topic: str, count: int) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every record, read with assign() from the beginning."""
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"),
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = {}
    try:
        deadline = time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                assert m.error() is None, m.error()
                got[(m.partition(), m.offset())] = m.value()
    finally:
        consumer.close()
    return got


def test_sigterm_restart_keeps_everything(broker):
    topic = create_topic(broker, {"retention.ms": "86400000"})
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    acked = {}

    def delivered(err, msg):
        assert err is None, err
        acked[(msg.partition(), msg.offset())] = msg.value()
    for i in range(COUNT):
        producer.produce(topic, key=str(i), value=f"v{i}", partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(WAIT) == 0
    assert len(acked) == COUNT

    assert broker.stop() == 0                      # SIGTERM: a clean exit
    broker.start()
    assert consume_all(broker, topic, COUNT) == acked
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    meta = admin.list_topics(topic, timeout=30).topics[topic]
    assert sorted(meta.partitions) == list(range(PARTITIONS))
    (config,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    assert config.result(30)["retention.ms"].value == "86400000"


def test_sigkill_loses_no_acknowledged_record(broker):
    topic = create_topic(broker, {"flush.messages": "1"})
    acked, failed = {}, []
    lock = threading.Lock()

    def delivered(err, msg):
        with lock:
            if err is None:
                acked[(msg.partition(), msg.offset())] = msg.value()
            else:
                failed.append(err)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1,
                            "message.timeout.ms": 3000, "reconnect.backoff.max.ms": 100})
    i = 0
    # keep producing until a good share is acknowledged, then crash the broker mid-stream
    deadline = time.monotonic() + WAIT
    while len(acked) < COUNT // 2 and time.monotonic() < deadline:
        producer.produce(topic, value=f"v{i}", partition=i % PARTITIONS, on_delivery=delivered)
        i += 1
        producer.poll(0)
        if i % 100 == 0:
            producer.poll(0.001)
    for j in range(500):                           # a little more in flight as the crash comes
        producer.produce(topic, value=f"v{i + j}", partition=(i + j) % PARTITIONS, on_delivery=delivered)
    producer.poll(0)
    broker.kill()
    producer.flush(WAIT)                           # the rest fail after message.timeout.ms
    with lock:
        acknowledged = dict(acked)
    assert len(acknowledged) >= COUNT // 2

    broker.start()
    got = consume_all(broker, topic, len(acknowledged))
    missing = {k: v for k, v in acknowledged.items() if got.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {sorted(missing.items())[:5]}"
