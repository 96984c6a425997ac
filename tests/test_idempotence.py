"""Idempotent produce over the wire: retries are recognised, gaps and fenced epochs rejected,
and the producer state survives a restart because it is rebuilt from the log."""
from __future__ import annotations

import time

import pytest
from wire import WireClient

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.init_producer_id import InitProducerIdRequest
from kafka_compat.protocol.messages.list_offsets import ListOffsetsRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.records import build_batch
from kafka_compat.testing import EmbeddedBroker


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker({"num.partitions": 1}, data_dir=str(tmp_path / "data")) as b:
        yield b


def connect(broker) -> WireClient:
    return WireClient("127.0.0.1", broker.port)


def init_producer(c: WireClient) -> tuple[int, int]:
    resp = c.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
    assert resp.error_code == ErrorCode.NONE and resp.producer_id >= 0
    return resp.producer_id, resp.producer_epoch


def produce(c: WireClient, topic: str, pid: int, epoch: int, seq: int, n: int = 5):
    # current timestamps: a producer whose last write is older than producer.id.expiration.ms (a day)
    # is forgotten, as in Kafka
    now = int(time.time() * 1000)
    batch = build_batch([(b"k%d" % i, b"v%d" % i, [], now + i) for i in range(seq, seq + n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    resp = c.call(0, 9, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    (part,) = resp.responses[0].partition_responses
    return part.error_code, part.base_offset


def log_end(c: WireClient, topic: str) -> int:
    resp = c.call(2, 5, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    return resp.topics[0].partitions[0].offset


def create(c: WireClient, topic: str) -> None:
    c.call(3, 9, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                 allow_auto_topic_creation=True))


def test_a_retried_batch_is_acknowledged_with_its_first_offsets_and_not_written_again(broker):
    c = connect(broker)
    create(c, "idem")
    pid, epoch = init_producer(c)
    assert produce(c, "idem", pid, epoch, 0) == (ErrorCode.NONE, 0)
    assert produce(c, "idem", pid, epoch, 5) == (ErrorCode.NONE, 5)
    assert produce(c, "idem", pid, epoch, 0) == (ErrorCode.NONE, 0)      # a retry of the first batch
    assert log_end(c, "idem") == 10


def test_a_sequence_gap_and_a_fenced_epoch_are_rejected(broker):
    c = connect(broker)
    create(c, "gaps")
    pid, epoch = init_producer(c)
    assert produce(c, "gaps", pid, epoch, 0) == (ErrorCode.NONE, 0)
    assert produce(c, "gaps", pid, epoch, 20)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(c, "gaps", pid, epoch + 1, 0) == (ErrorCode.NONE, 5)   # a new epoch starts at 0
    assert produce(c, "gaps", pid, epoch, 5)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce(c, "gaps", pid, epoch + 2, 3)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_end(c, "gaps") == 10


def test_only_the_last_five_batches_are_remembered(broker):
    """As in Kafka: a duplicate older than the cached five batches is out of order, not a retry."""
    c = connect(broker)
    create(c, "five")
    pid, epoch = init_producer(c)
    for i in range(6):
        assert produce(c, "five", pid, epoch, 5 * i) == (ErrorCode.NONE, 5 * i)
    assert produce(c, "five", pid, epoch, 5) == (ErrorCode.NONE, 5)       # second batch: still cached
    assert produce(c, "five", pid, epoch, 0)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_end(c, "five") == 30


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_producer_state_is_rebuilt_from_the_log_after_a_restart(broker, how):
    c = connect(broker)
    create(c, "rebuilt")
    pid, epoch = init_producer(c)
    for seq in (0, 5, 10):
        assert produce(c, "rebuilt", pid, epoch, seq)[0] == ErrorCode.NONE
    c.close()
    if how == "sigkill":
        broker.kill()
    else:
        broker.stop()
    broker.start()
    c = connect(broker)
    assert produce(c, "rebuilt", pid, epoch, 10) == (ErrorCode.NONE, 10)  # a retry after the restart
    assert produce(c, "rebuilt", pid, epoch, 25)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(c, "rebuilt", pid, epoch, 15) == (ErrorCode.NONE, 15)  # the next batch follows on
    assert log_end(c, "rebuilt") == 20
