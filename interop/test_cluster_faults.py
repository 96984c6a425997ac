"""Acknowledged writes survive leaders and controllers being SIGKILLed, again and again.

Three brokers, a topic of 3 partitions with RF=3 and min.insync.replicas=2. Two idempotent acks=all producers
write the whole time: confluent-kafka (librdkafka) in a thread, and Kafka's own Java client
(interop/java/ClientHarness, `produce --stream`, which prints every acknowledgement). Meanwhile the test
kills a partition's leader, or every third time the controller, waits until ZooKeeper names a new one,
starts the killed broker again and waits until every partition has its three in-sync replicas back.
Then every partition is read from the beginning: every acknowledged record must be there exactly once,
and each producer's records in the order it sent them.

20 faults by default (a few minutes); `KAFKA_COMPAT_FAULTS=100 python -m pytest interop/test_cluster_faults.py`
runs a longer storm.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading

import peers
import pytest
from cluster_support import WAIT, create_topic, new_cluster, read_all, skip_without_cluster, wait_for_full_isr

pytestmark = skip_without_cluster()
ck = pytest.importorskip("confluent_kafka")

TOPIC = "faults"
PARTITIONS = 3
FAULTS = int(os.environ.get("KAFKA_COMPAT_FAULTS", "20"))


class ConfluentProducer:
    """Writes c-<i> to partition i % 3 until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str):
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                     "linger.ms": 5, "delivery.timeout.ms": 300000})
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed.append(err)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, b"c-%d" % i, partition=i % PARTITIONS, on_delivery=self._done)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.003)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()
        self.producer.flush(300)


class JavaProducer:
    """Kafka's Java client writing v<i> (idempotent, acks=all), each acknowledgement read from its output."""

    def __init__(self, bootstrap: str, classpath: str):
        self.proc = subprocess.Popen(
            ["java", "-cp", classpath, "ClientHarness", "produce", "--bootstrap", bootstrap, "--topic", TOPIC,
             "--partitions", str(PARTITIONS), "--count", "10000000", "--rate", "150", "--stream", "--idempotent",
             "--acks", "all"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list[dict] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            ack = json.loads(line)
            if "error" in ack:
                self.failed.append(ack)
            else:
                self.acked.append((ack["partition"], ack["offset"], ack["value"].encode()))

    def finish(self) -> None:
        self.proc.terminate()               # only what it printed counts as acknowledged
        self.proc.wait(60)
        self.thread.join(60)


def check_exactly_once_in_order(log: dict[int, list[tuple[int, bytes]]], acked, prefix: bytes) -> None:
    where = {}
    for partition, records in log.items():
        for offset, value in records:
            assert (value, partition) not in where, f"{value!r} is in partition {partition} twice"
            where[(value, partition)] = offset
    for partition, offset, value in acked:
        # offset None: librdkafka acknowledged it implicitly (a request timed out with the killed broker, a
        # later one of the same idempotent producer succeeded, so the earlier records were written; its
        # rd_kafka_dr_implicit_ack reports them without an offset): it must still be in the log, once
        found = where.get((value, partition))
        assert found is not None and (offset is None or found == offset), \
            f"acknowledged {value!r} at {partition}:{offset}, the log has it at {found}"
    for partition in log:
        mine = [(o, int(v[len(prefix):])) for o, v in log[partition] if v.startswith(prefix)]
        assert [i for _, i in mine] == sorted(i for _, i in mine), f"{prefix!r} out of order in {partition}"


def test_acknowledged_records_survive_leader_and_controller_kills():
    classpath = peers.java_harness_classpath()
    with new_cluster() as cluster:
        create_topic(cluster, TOPIC, PARTITIONS)
        confluent = ConfluentProducer(cluster.bootstrap)
        confluent.thread.start()
        java = JavaProducer(cluster.bootstrap, classpath) if classpath else None
        faults = []
        try:
            cluster.wait_until(lambda: len(confluent.acked) > 100 and (java is None or len(java.acked) > 20), WAIT,
                               "both producers to be acknowledged")
            for k in range(FAULTS):
                if k % 3 == 2:
                    victim = cluster.wait_for_controller()
                else:
                    victim = cluster.wait_for_leader(TOPIC, k % PARTITIONS)
                faults.append(victim)
                cluster.kill(victim)
                for p in range(PARTITIONS):
                    cluster.wait_for_leader(TOPIC, p, WAIT, exclude={victim})
                cluster.wait_for_controller(WAIT, exclude={victim})
                cluster.start_broker(victim)
                for p in range(PARTITIONS):
                    wait_for_full_isr(cluster, TOPIC, p)
            before = (len(confluent.acked), len(java.acked) if java else 0)
            cluster.wait_until(lambda: len(confluent.acked) > before[0] + 100 and
                               (java is None or len(java.acked) > before[1] + 20), WAIT, "writes after the last fault")
        finally:
            confluent.finish()
            if java is not None:
                java.finish()
        log = read_all(cluster, TOPIC, PARTITIONS)
        epochs = sum(cluster.partition_state(TOPIC, p)["leader_epoch"] for p in range(PARTITIONS))

    assert len(faults) == FAULTS
    assert epochs >= FAULTS - FAULTS // 3               # every leader kill made the controller elect again
    assert len(confluent.acked) > 1000
    assert confluent.failed == []                       # idempotent acks=all: retried until written, never failed
    check_exactly_once_in_order(log, confluent.acked, b"c-")
    if java is not None:
        assert java.failed == []
        check_exactly_once_in_order(log, java.acked, b"v")
    else:
        pytest.skip("the Java client is not installed: checked confluent-kafka only")
