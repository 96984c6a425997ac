"""Tiered storage (KIP-405) against a real S3 server (SeaweedFS, tests/test_s3_server.py's fixture): Kafka's
settings and their checks, segments copied with their indexes, local retention, reads of tiered offsets."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from controller_cluster import wait_until
from wire import WireClient

from kafka_compat.protocol.messages.list_offsets import ListOffsetsRequest
from kafka_compat.testing import EmbeddedBroker, free_port, s3_server  # noqa: F401  (the fixture)


def _create(admin: AdminClient, name: str, config: dict) -> None:
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)


def _refusal(admin: AdminClient, name: str, config: dict) -> str:
    with pytest.raises(KafkaException) as info:
        _create(admin, name, config)
    error = info.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    return error.str()


def test_a_tiered_topic_needs_the_brokers_remote_storage_system():
    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        message = _refusal(admin, "tiered", {"remote.storage.enable": "true"})
        assert "Tiered Storage functionality is disabled in the broker" in message
        _create(admin, "plain", {"remote.storage.enable": "false", "local.retention.ms": "1000"})


def test_kafkas_rules_for_a_tiered_topic(s3_server):  # noqa: F811
    with EmbeddedBroker({"remote.log.storage.system.enable": "true", **s3_server.rsm_config()}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert "compacted" in _refusal(admin, "c", {"remote.storage.enable": "true", "cleanup.policy": "compact"})
        assert "must not be more than retention.ms" in _refusal(
            admin, "r", {"remote.storage.enable": "true", "retention.ms": "60000", "local.retention.ms": "120000"})
        assert "must not be more than retention.bytes" in _refusal(
            admin, "b", {"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "2000"})
        _create(admin, "ok", {"remote.storage.enable": "true", "local.retention.ms": "1000"})


TIERED_BROKER = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "500",
                 "log.retention.check.interval.ms": "500", "log.segment.delete.delay.ms": "0",
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "5",
                 "rlmm.config.remote.log.metadata.topic.replication.factor": "1"}
RECORDS = 3000


def _list_offset_raw(bootstrap: str, topic: str, timestamp: int) -> int:
    """ListOffsets v9 with a sentinel (-4 EARLIEST_LOCAL, -5 LATEST_TIERED), on the wire."""
    host, port = bootstrap.rsplit(":", 1)
    c = WireClient(host, int(port))
    try:
        resp = c.call(2, 9, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]))
    finally:
        c.close()
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0, part
    return part.offset


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50})
    for i in range(start, start + count):
        producer.produce(topic, key=str(i).encode(), value=b"v%06d" % i + b"x" * 200)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _consume_all(bootstrap: str, topic: str, count: int, start: int = 0) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-reader", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, start)])
    seen, deadline = [], time.monotonic() + 60
    try:
        while len(seen) < count and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            assert not msg.error(), msg.error()
            assert msg.value().startswith(b"v%06d" % int(msg.key()))
            seen.append(msg.offset())
    finally:
        consumer.close()
    return seen


def _local_segments(broker: EmbeddedBroker, topic: str) -> list[str]:
    directory = os.path.join(broker.log_dir, f"{topic}-0")
    return sorted(f for f in os.listdir(directory) if f.endswith(".log"))


def _metric(port: int, line_start: str) -> float:
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = [float(line.rsplit(" ", 1)[1]) for line in page.splitlines() if line.startswith(line_start + " ")]
    assert found, f"no {line_start} on the metrics page"
    return found[0]


def test_segments_go_to_s3_leave_the_disk_and_are_read_back_from_offset_zero(s3_server):  # noqa: F811
    metrics = free_port()
    with EmbeddedBroker({**TIERED_BROKER, **s3_server.rsm_config(key_prefix="tiered/"),
                         "prometheus.listener": f"http://127.0.0.1:{metrics}"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "t", {"remote.storage.enable": "true", "segment.bytes": "65536",
                             "local.retention.bytes": "131072", "retention.ms": "-1"})
        _produce(broker.bootstrap, "t", 0, RECORDS)

        def tiered():
            keys = s3_server.keys("tiered/")
            return keys if sum(k.endswith(".rsm-manifest") for k in keys) >= 5 else None
        keys = wait_until(tiered, 60, "segments in the bucket")
        segment_dirs = {k.rsplit("/", 1)[0] for k in keys}
        assert len(segment_dirs) == 1 and segment_dirs.pop().startswith("tiered/t-")
        one = next(k for k in keys if k.endswith(".log")).rsplit(".", 1)[0]
        for suffix in ("log", "index", "timeindex", "snapshot", "leader-epoch-checkpoint", "txnindex", "rsm-manifest"):
            assert f"{one}.{suffix}" in keys, (suffix, keys[:10])

        local_start = wait_until(lambda: _list_offset_raw(broker.bootstrap, "t", -4) or None, 60, "local deletion")
        assert not any(name.startswith("00000000000000000000") for name in _local_segments(broker, "t"))
        assert _list_offset_raw(broker.bootstrap, "t", -2) == 0            # EARLIEST: the remote part's start
        assert _list_offset_raw(broker.bootstrap, "t", -1) == RECORDS
        highest_tiered = _list_offset_raw(broker.bootstrap, "t", -5)
        assert local_start - 1 <= highest_tiered < RECORDS

        assert _consume_all(broker.bootstrap, "t", RECORDS) == list(range(RECORDS))
        # Kafka's BrokerTopicMetrics Remote* meters, per topic
        copied = _metric(metrics, 'kafka_server_brokertopicmetrics_remotecopybytes_total{topic="t"}')
        assert copied >= 5 * 60000
        assert _metric(metrics, 'kafka_server_brokertopicmetrics_remotefetchbytes_total{topic="t"}') >= local_start * 200
        assert _metric(metrics, 'kafka_server_brokertopicmetrics_remotecopyrequests_total{topic="t"}') >= 5
        # and its gauges: what is remote, and what may be copied and is not yet
        assert _metric(metrics, 'kafka_server_brokertopicmetrics_remotelogsizebytes{topic="t"}') >= 5 * 60000
        assert _metric(metrics, 'kafka_server_brokertopicmetrics_remotelogmetadatacount{topic="t"}') >= 5
        assert _metric(metrics, 'kafka_server_brokertopicmetrics_remotecopylagsegments{topic="t"}') >= 0

        broker.restart()           # what is remote is read back from __remote_log_metadata
        assert _list_offset_raw(broker.bootstrap, "t", -2) == 0
        assert _list_offset_raw(broker.bootstrap, "t", -5) >= highest_tiered
        assert _consume_all(broker.bootstrap, "t", RECORDS) == list(range(RECORDS))

        # the metadata topic's records, decoded as Kafka's dump tool decodes them
        files = [os.path.join(broker.log_dir, d, f) for d in os.listdir(broker.log_dir)
                 if d.startswith("__remote_log_metadata-") for f in os.listdir(os.path.join(broker.log_dir, d))
                 if f.endswith(".log")]
        dump = subprocess.run([sys.executable, "-m", "kafka_compat", "dump-log", "--remote-log-metadata-decoder",
                               *files], capture_output=True, text=True, timeout=60, check=True).stdout
        assert "RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition=" in dump
        assert ":t-0, id=" in dump and "startOffset=0, endOffset=" in dump and "state=COPY_SEGMENT_STARTED" in dump
        assert "RemoteLogSegmentMetadataUpdate{" in dump and "state=COPY_SEGMENT_FINISHED" in dump


def test_total_retention_deletes_remote_segments_from_the_bucket(s3_server):  # noqa: F811
    with EmbeddedBroker({**TIERED_BROKER, **s3_server.rsm_config()}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "r", {"remote.storage.enable": "true", "segment.bytes": "65536", "retention.ms": "-1",
                             "retention.bytes": "262144", "local.retention.bytes": "131072"})
        _produce(broker.bootstrap, "r", 0, RECORDS)
        wait_until(lambda: _list_offset_raw(broker.bootstrap, "r", -2) > 0, 60, "the log start to move")

        def starts():          # the start offsets of the segments in the bucket, once the oldest is gone
            found = sorted({int(k.rsplit("/", 1)[1].split("-")[0]) for k in s3_server.keys()
                            if k.endswith(".rsm-manifest")})
            return found if found and found[0] > 0 else None
        wait_until(starts, 60, "remote expiration")
        # the bucket's first segment is the log start offset: nothing listed that is gone, nothing kept unlisted
        earliest = wait_until(lambda: (s := starts()) and s[0] == _list_offset_raw(broker.bootstrap, "r", -2)
                              and s[0], 30, "the bucket and the log start to agree")
        local_start = _list_offset_raw(broker.bootstrap, "r", -4)
        assert earliest < local_start <= _list_offset_raw(broker.bootstrap, "r", -5) + 1
        assert (RECORDS - earliest) * 220 <= 262144 + 65536 + 8192
        assert _consume_all(broker.bootstrap, "r", RECORDS - earliest, earliest) == list(range(earliest, RECORDS))

        # DeleteRecords into the remote part: the log starts there, and the segments below it leave the bucket
        from confluent_kafka import TopicPartition
        target = earliest + 300
        result = admin.delete_records([TopicPartition("r", 0, target)])
        assert list(result.values())[0].result(30).low_watermark == target
        assert _list_offset_raw(broker.bootstrap, "r", -2) == target
        wait_until(lambda: (s := starts()) and s[0] > earliest, 60, "the deleted records' segment to go")
        assert _consume_all(broker.bootstrap, "r", RECORDS - target, target) == list(range(target, RECORDS))
        # and past the local start: the whole remote part is below the log start then
        target = _list_offset_raw(broker.bootstrap, "r", -4) + 10
        assert list(admin.delete_records([TopicPartition("r", 0, target)]).values())[0].result(30).low_watermark == target
        assert _list_offset_raw(broker.bootstrap, "r", -2) == _list_offset_raw(broker.bootstrap, "r", -4) == target

        # deleting the topic deletes its remote data too, as Kafka does
        admin.delete_topics(["r"])["r"].result(30)
        wait_until(lambda: not s3_server.keys(), 60, "the deleted topic's objects to go")


def test_remote_log_metadata_records_are_kafkas():
    """murmur2 gives Kafka's own test vectors (Utils.murmur2), and a record reads back as written."""
    from kafka_compat.storage.remote_storage_manager import RemoteLogSegmentMetadata

    from kafka_compat.server.remote_log_metadata import deserialize, murmur2, segment_record
    assert [murmur2(s) for s in (b"21", b"foobar", b"abc", b"a-little-bit-long-string")] == [
        -973932308, -790332482, 479470107, -985981536]
    m = RemoteLogSegmentMetadata.new("t", bytes(range(16)), 3, start_offset=100, end_offset=199, max_timestamp_ms=7,
                                     broker_id=2, event_timestamp_ms=8, segment_leader_epochs={0: 100, 4: 150},
                                     segment_size=4096, broker_leader_epoch=4)
    value = segment_record(m)
    assert value[:3] == bytes([1, 0, 1])          # frame version 1, api key 0, version 1
    api_key, record = deserialize(value)
    assert api_key == 0 and (record.start_offset, record.end_offset, record.segment_size_in_bytes) == (100, 199, 4096)
    assert record.remote_log_segment_id.topic_id_partition.partition == 3
    assert [(e.leader_epoch, e.offset) for e in record.segment_leader_epochs] == [(0, 100), (4, 150)]


def test_a_remote_batch_that_fails_its_crc_is_never_served():
    from kafka_compat.protocol.records import build_batch
    from kafka_compat.server.remote_log_manager import whole_batches
    first = bytes(build_batch([(b"k", b"v" * 100, (), 1)], base_offset=10))
    second = bytes(build_batch([(b"k", b"w" * 100, (), 1)], base_offset=11))
    data = first + second
    assert whole_batches(data, 11, 1 << 20, True) == (second, 0)          # from the batch holding the offset
    assert whole_batches(data, 10, len(first), True) == (first, 0)        # whole batches within max bytes
    assert whole_batches(data[:len(first) + 20], 11, 1 << 20, True) == (b"", len(data))   # needs more bytes
    bad = bytearray(data)
    bad[len(first) + 70] ^= 0xFF
    with pytest.raises(ValueError, match="CRC"):
        whole_batches(bytes(bad), 11, 1 << 20, True)


def test_with_the_store_down_local_data_stays_until_it_is_copied(s3_server):  # noqa: F811
    metrics = free_port()
    overrides = {**TIERED_BROKER, "remote.log.manager.task.retry.backoff.max.ms": "1000", **s3_server.rsm_config(),
                 "prometheus.listener": f"http://127.0.0.1:{metrics}"}
    with EmbeddedBroker(overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "d", {"remote.storage.enable": "true", "segment.bytes": "65536", "retention.ms": "-1",
                             "local.retention.bytes": "65536"})
        s3_server.stop()
        _produce(broker.bootstrap, "d", 0, RECORDS)
        wait_until(lambda: broker.log().count("d-0: tiered storage task failed") >= 2, 60, "failed copies")
        assert _list_offset_raw(broker.bootstrap, "d", -4) == 0          # nothing copied, nothing deleted
        assert _list_offset_raw(broker.bootstrap, "d", -5) == -1
        assert "00000000000000000000.log" in _local_segments(broker, "d")
        # the backlog shows in Kafka's copy lag gauges, and the failures in its error meter
        lag = 'kafka_server_brokertopicmetrics_remotecopylagbytes{topic="d"}'
        assert wait_until(lambda: _metric(metrics, lag) >= 5 * 60000, 30, "the copy lag to show")
        assert _metric(metrics, 'kafka_server_brokertopicmetrics_remotecopylagsegments{topic="d"}') >= 5
        assert _metric(metrics, 'kafka_server_brokertopicmetrics_remotecopyerrors_total{topic="d"}') >= 2
        s3_server.start()
        wait_until(lambda: _list_offset_raw(broker.bootstrap, "d", -4) > 0, 60, "copies once the store is back")
        assert _consume_all(broker.bootstrap, "d", RECORDS) == list(range(RECORDS))


def test_a_segment_sliced_where_the_copied_offsets_end_is_a_segment_of_its_own(tmp_path):
    """A new leader whose segment began below the highest copied offset uploads only the rest: the slice starts
    at that batch, and its indexes, relative to it, lead to the batches they name."""
    import struct

    from kafka_compat.storage.log_config import LogConfig
    from kafka_compat.storage.segment import LogSegment

    from kafka_compat.protocol.records import batches, build_batch
    segment = LogSegment(str(tmp_path), 100, LogConfig({"index.interval.bytes": 1000}))
    for i in range(50):           # batches of two records, offsets 100 + 2i and 101 + 2i
        batch = bytes(build_batch([(b"k", b"v" * 300, (), 1000 + i), (b"k", b"w" * 300, (), 1000 + i)],
                                  base_offset=100 + 2 * i))
        segment.append(batch, 101 + 2 * i, 1000 + i, 101 + 2 * i)
    base, data, offsets, times = segment.slice_from(140)
    assert base == 140
    found = list(batches(data))
    assert found[0].base_offset == 140 and found[-1].last_offset == 199 and len(found) == 30
    starts = {}
    position = 0
    for b in found:
        starts[position] = b
        position += 12 + struct.unpack_from(">i", data, position + 8)[0]
    entries = [struct.unpack_from(">ii", offsets, i) for i in range(0, len(offsets), 8)]
    assert entries and all(starts[pos].last_offset == base + rel for rel, pos in entries)
    stamps = [struct.unpack_from(">qi", times, i) for i in range(0, len(times), 12)]
    assert len(stamps) == len(entries) and all(ts >= 1020 and rel >= 0 for ts, rel in stamps)
    assert segment.slice_from(500) is None
    segment.close()
