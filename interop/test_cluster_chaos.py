"""Acknowledged writes survive the cluster faults of issue 20, checked as a Jepsen-style history.

A bounded form of `python -m interop.faults` (see interop/faults/campaign.py): 10 faults of every
kind, in a shuffled order, against 3 brokers with RF 3 and min.insync.replicas=2 while idempotent
acks=all producers write and a consumer reads: pauses of a broker past its ZooKeeper session and of
ZooKeeper itself, broker-broker and broker-ZooKeeper partitions, a full and a slow disk, a SIGKILL.
Each fault is held until its effect shows (a session expired, an ISR shrank, ENOSPC met and the
full disk's broker halted, as Kafka's does with no log dir left, writes throttled) and the cluster
is whole again before the next. Then nothing acknowledged may be lost, duplicated or reordered,
and nothing read that was not sent.

Needs root (loop devices, mounts, blkio cgroups), ZooKeeper and confluent-kafka; skipped otherwise.
"""
from __future__ import annotations

import pytest
from cluster_support import skip_without_cluster
from faults.campaign import missing, run_campaign

pytestmark = [*skip_without_cluster(), pytest.mark.skipif(missing() is not None, reason=str(missing()))]

PLAN = {"pause-broker": 2, "pause-zookeeper": 1, "partition-brokers": 2, "isolate-zookeeper": 2, "full-disk": 1,
        "slow-disk": 1, "kill": 1}


def test_ten_mixed_cluster_faults_lose_nothing_acknowledged(tmp_path):
    result = run_campaign(PLAN, seed=20, history_path=str(tmp_path / "history.jsonl"))
    print(result.summary())
    assert result.faults == PLAN
    assert result.effects == PLAN                 # every fault did what it is for
    report = result.report
    assert report.acked > 1000
    assert result.produce_errors == []            # idempotent acks=all: retried until written, never failed
    assert report.lost == [] and report.duplicates == [] and report.reordered == []
    assert report.ok, report.summary()           # nothing lost, nor deleted before any reader saw it
    assert result.stalls == []                    # no client stopped making progress


def test_a_restarted_broker_keeps_its_topics_overrides(tmp_path):
    """The campaign's restarted broker ran its existing logs with the broker's defaults (one segment growing
    past segment.bytes, no retention) until its disk was full: a topic's overrides must hold across a restart."""
    import glob
    import os
    import time

    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafka_compat.testing import EmbeddedCluster

    with EmbeddedCluster(1, {"offsets.topic.replication.factor": 1, "default.replication.factor": 1},
                         data_dir=str(tmp_path / "cluster")) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        deadline = time.monotonic() + 120
        while True:     # the broker may not know the controller yet
            try:
                admin.create_topics([NewTopic("t", 1, 1, config={"segment.bytes": str(1 << 20)})],
                                    request_timeout=30)["t"].result(60)
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        cluster.wait_for_leader("t", 0, 120)
        cluster.restart(0)
        cluster.wait_for_leader("t", 0, 120)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 3})
        for _ in range(4000):
            producer.produce("t", b"x" * 1000, partition=0)
            producer.poll(0)
        assert producer.flush(120) == 0
        segments = glob.glob(os.path.join(cluster.brokers[0].log_dir, "t-0", "*.log"))
        assert len(segments) >= 3 and all(os.path.getsize(s) <= 1 << 20 for s in segments)
