"""Transactional produce against plain idempotent produce, side by side on one broker (or, with
`--cluster`, on three brokers with topics of replication factor 3 and min.insync.replicas 2, where the
coordinator, the partition leaders and the markers are spread over the brokers).

Both sides use confluent-kafka (librdkafka) with acks=all and 1 KiB records, into
their own topic of the same shape; the transactional producer commits every
`--per-txn` records (1,000 by default: begin, produce, commit). Rounds alternate
between the two so that the shared machine's noise falls on both alike. Prints
each round and the medians in MB/s, and their ratio (transactional / idempotent).

    python bench/transactions.py [--records 50000] [--rounds 5] [--per-txn 1000] [--quick] [--cluster]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafka_compat.testing import EmbeddedBroker, EmbeddedCluster  # noqa: E402

RECORD = 1024
PARTITIONS = 4


def producer_config(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1 << 21}


def run_idempotent(bootstrap: str, topic: str, records: int, value: bytes) -> float:
    p = Producer(producer_config(bootstrap))
    p.produce(topic, value, partition=0)      # connected, with its producer id, before the clock starts
    assert p.flush(60) == 0
    start = time.perf_counter()
    for i in range(records):
        p.produce(topic, value, partition=i % PARTITIONS)
        if i % 10000 == 9999:
            p.poll(0)
    assert p.flush(120) == 0
    return time.perf_counter() - start


def run_transactional(bootstrap: str, topic: str, records: int, value: bytes, per_txn: int) -> float:
    p = Producer({**producer_config(bootstrap), "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(60)
    p.begin_transaction()                     # the same warm-up: one record, one transaction
    p.produce(topic, value, partition=0)
    p.commit_transaction(60)
    start = time.perf_counter()
    done = 0
    while done < records:
        p.begin_transaction()
        n = min(per_txn, records - done)
        for i in range(done, done + n):
            p.produce(topic, value, partition=i % PARTITIONS)
        p.commit_transaction(120)       # flushes the transaction's records, then EndTxn
        done += n
    return time.perf_counter() - start


def b_offsets(bootstrap: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check", "isolation.level": "read_committed"})
    out = [c.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(PARTITIONS)]
    c.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-txn", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="a tenth of the records, 3 rounds")
    ap.add_argument("--cluster", action="store_true", help="three brokers, replication factor 3")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.rounds = max(args.records // 10, args.per_txn), min(args.rounds, 3)
    value = os.urandom(RECORD)
    mib = args.records * RECORD / (1 << 20)
    settings = {"num.partitions": PARTITIONS, "log.flush.interval.messages": "9223372036854775807"}
    replicas = 3 if args.cluster else 1
    target = EmbeddedCluster(3, {**settings, "min.insync.replicas": 2}) if args.cluster else EmbeddedBroker(settings)
    with target as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        names = {"idempotent": "bench-idem", "transactional": "bench-txn"}
        for f in admin.create_topics([NewTopic(t, PARTITIONS, replicas) for t in names.values()]).values():
            f.result(60)
        rates: dict[str, list[float]] = {"idempotent": [], "transactional": []}
        for r in range(args.rounds):
            order = ("idempotent", "transactional") if r % 2 == 0 else ("transactional", "idempotent")
            for kind in order:
                if kind == "idempotent":
                    seconds = run_idempotent(b.bootstrap, names[kind], args.records, value)
                else:
                    seconds = run_transactional(b.bootstrap, names[kind], args.records, value, args.per_txn)
                rates[kind].append(mib / seconds)
                print(f"round {r + 1} {kind:13s} {mib / seconds:8.1f} MB/s ({args.records} x {RECORD} B in "
                      f"{seconds:.2f} s)", flush=True)
        ends = {}
        for kind, topic in names.items():
            ends[kind] = sum(b_offsets(b.bootstrap, topic))
    print(f"records in the log: {ends}")
    idem, txn = statistics.median(rates["idempotent"]), statistics.median(rates["transactional"])
    print(f"median idempotent {idem:.1f} MB/s, transactional {txn:.1f} MB/s "
          f"({args.per_txn} records per transaction): ratio {txn / idem:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
