"""Bad input on one connection closes that connection only: real clients carry on undisturbed.

While a confluent-kafka producer and consumer and a kafka-python producer keep
working, raw sockets send garbage, an oversized length, a negative length and an
unknown API key. Each bad connection is closed by the broker without an answer;
the real clients see no error and, by librdkafka's own statistics, never lose a
connection, and every record they produced is consumed in order.
(tests/test_broker.py checks the closing itself with a raw client on both sides.)
"""
from __future__ import annotations

import json
import socket
import struct
import time

import pytest

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

from test_clients import WAIT, unique  # noqa: E402

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

BAD = {
    "garbage": b"\x00\x00\x00\x08" + b"\xde\xad\xbe\xef" * 2,
    "oversized length": struct.pack(">i", 200 * 1024 * 1024),   # above socket.request.max.bytes
    "negative length": struct.pack(">i", -1),
    # a well-formed header naming API key 9999: length, api_key, api_version, correlation_id, client_id
    "unknown api key": struct.pack(">ihhih", 10, 9999, 0, 7, -1),
}
PER_ROUND = 200


def closed_without_answer(port: int, payload: bytes) -> bool:
    """Send payload on a fresh connection; True when the broker closes it without sending a byte."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(payload)
        try:
            return s.recv(1) == b""
        except ConnectionResetError:
            return True


class Traffic:
    """Rounds of records from a confluent-kafka producer (`count`) and a kafka-python one (one record),
    all to partition 0 of `topic`, and a consumer reading them back in order: `sent`, `got`, `failed`."""

    def __init__(self, topic: str, producer, other, consumer, count: int = PER_ROUND):
        self.topic, self.producer, self.other, self.consumer, self.count = topic, producer, other, consumer, count
        self.sent, self.got, self.failed = [], [], []

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.failed.append(err)

    def produce_round(self, tag: str) -> None:
        values = [f"{tag}-{i}".encode() for i in range(self.count)]
        for v in values:
            self.producer.produce(self.topic, value=v, partition=0, on_delivery=self._delivered)
        assert self.producer.flush(WAIT) == 0
        self.sent.extend(values)
        v = f"{tag}-kafka-python".encode()
        self.other.send(self.topic, value=v, partition=0).get(WAIT)
        self.sent.append(v)

    def consume_all(self) -> None:
        deadline = time.monotonic() + WAIT
        while len(self.got) < len(self.sent) and time.monotonic() < deadline:
            for m in self.consumer.consume(num_messages=500, timeout=0.2):
                assert m.error() is None, m.error()
                self.got.append(m.value())


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as b:
        yield b


def test_bad_connections_leave_real_clients_undisturbed(broker):
    topic = unique("bad-input")
    errors, stats = [], {}

    def on_error(err):
        errors.append(err)

    def on_stats(raw):
        for name in ("producer", "consumer"):
            if json.loads(raw)["type"] == name:
                stats[name] = json.loads(raw)
    common = {"bootstrap.servers": broker.bootstrap, "error_cb": on_error, "stats_cb": on_stats,
              "statistics.interval.ms": 100}
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
    admin.close()
    producer = ck.Producer({**common, "linger.ms": 5})
    consumer = ck.Consumer({**common, "group.id": unique("unused"), "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    other = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)     # a second client library
    traffic = Traffic(topic, producer, other, consumer)
    try:
        traffic.produce_round("before")
        traffic.consume_all()
        for name, payload in BAD.items():
            assert closed_without_answer(broker.port, payload), name
            traffic.produce_round(name)
            traffic.consume_all()
        # let both clients report statistics taken after the last bad connection
        stats.clear()
        deadline = time.monotonic() + WAIT
        while len(stats) < 2 and time.monotonic() < deadline:
            producer.poll(0.1)
            consumer.poll(0.1)
    finally:
        consumer.close()
        other.close()
    assert traffic.got == traffic.sent
    assert not traffic.failed and not errors, (traffic.failed, errors)
    for name, s in stats.items():
        for b in s["brokers"].values():
            if b["nodeid"] >= 0:
                assert b["disconnects"] == 0 and b["connects"] == 1, (name, b["name"], b["connects"], b["disconnects"])
    assert set(stats) == {"producer", "consumer"}
