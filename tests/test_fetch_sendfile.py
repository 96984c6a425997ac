"""Fetch responses larger than the socket buffer: sendfile straight out, then the rest once writable.

A consumer reads 4 partitions x 2 MiB of 64 KiB records; every byte must
arrive intact and in order, whatever split the direct os.sendfile and the
event loop's sendfile made of each slice.
"""
import os

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

RECORD = 64 * 1024
PER_PARTITION = 32


def test_large_fetch_responses_arrive_intact():
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("big", 4, 1)])["big"].result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        sent = {}
        for part in range(4):
            for i in range(PER_PARTITION):
                value = os.urandom(RECORD)
                sent[(part, i)] = value
                p.produce("big", value, partition=part)
        assert p.flush(60) == 0
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
        c.assign([TopicPartition("big", part, 0) for part in range(4)])
        got = {}
        for _ in range(600):
            for m in c.consume(100, 0.1):
                assert m.error() is None
                got[(m.partition(), m.offset())] = m.value()
            if len(got) == len(sent):
                break
        c.close()
    assert len(got) == len(sent)
    assert all(got[k] == v for k, v in sent.items())
