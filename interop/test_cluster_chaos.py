"""Acknowledged writes survive the cluster faults of issue 20, checked as a Jepsen-style history.

A bounded form of `python -m interop.faults` (see interop/faults/campaign.py): 10 faults of every
kind, in a shuffled order, against 3 brokers with RF 3 and min.insync.replicas=2 while idempotent
acks=all producers write and a consumer reads: pauses of a broker past its ZooKeeper session and of
ZooKeeper itself, broker-broker and broker-ZooKeeper partitions, a full and a slow disk, a SIGKILL.
Each fault is held until its effect shows (a session expired, an ISR shrank, ENOSPC met, writes
throttled) and the cluster is whole again before the next. Then nothing acknowledged may be
lost, duplicated or reordered, and nothing read that was not sent.

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
    assert report.ok, report.summary()
