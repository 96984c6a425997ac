"""Helpers for the transaction interop tests; run as a script it is a confluent-kafka process.

`copy`: a consume-transform-produce loop. It reads the input topic in group G with
read_committed, writes "t-<value>" to the same partition of the output topic and
sends its consumer offsets in the same transaction. Transactions 2, 5, 8, ... are
flushed (so their records really reach the log) and then aborted; the consumer
is then rewound to the offsets the last committed transaction stored, so those
records are copied again by a later, committed transaction. It stops once every
input record has been committed and prints {"committed": n, "aborted": m}.

`hang`: begins a transaction, writes records, flushes, prints "ready" and waits
(to be SIGKILLed: a producer that dies in the middle of a transaction).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

WAIT = 60.0


def copy(args) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
                         "linger.ms": 5})
    producer.init_transactions(WAIT)
    consumer.subscribe([args.input])
    committed_pos: dict[int, int] = {}
    committed = aborted = txn = 0
    deadline = time.time() + WAIT * 3
    while committed < args.count:
        if time.time() > deadline:
            print(json.dumps({"error": "timed out", "committed": committed}), flush=True)
            return 3
        msgs = [m for m in consumer.consume(args.batch, 1.0) if m.error() is None]
        if not msgs:
            continue
        txn += 1
        producer.begin_transaction()
        for m in msgs:
            producer.produce(args.output, value=b"t-" + m.value(), key=m.key(), partition=m.partition())
        positions = {m.partition(): m.offset() + 1 for m in msgs}
        offsets = [TopicPartition(args.input, p, o) for p, o in sorted(positions.items())]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), WAIT)
        if txn % 3 == 2:
            producer.flush(WAIT)
            producer.abort_transaction(WAIT)
            aborted += len(msgs)
            for tp in consumer.assignment():
                consumer.seek(TopicPartition(args.input, tp.partition,
                                             committed_pos.get(tp.partition, OFFSET_BEGINNING)))
        else:
            producer.commit_transaction(WAIT)
            committed += len(msgs)
            committed_pos.update(positions)
    consumer.close()
    print(json.dumps({"committed": committed, "aborted": aborted}), flush=True)
    return 0


def hang(args) -> int:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
                         "transaction.timeout.ms": args.timeout_ms, "message.timeout.ms": args.timeout_ms})
    producer.init_transactions(WAIT)
    producer.begin_transaction()
    for i in range(args.count):
        producer.produce(args.output, value=f"doomed-{i}".encode(), partition=0)
    producer.flush(WAIT)
    print("ready", flush=True)
    time.sleep(3600)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["copy", "hang"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input")
    ap.add_argument("--output", required=True)
    ap.add_argument("--group")
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--batch", type=int, default=7)
    ap.add_argument("--timeout-ms", type=int, default=60000)
    args = ap.parse_args(argv)
    return copy(args) if args.command == "copy" else hang(args)


if __name__ == "__main__":
    sys.exit(main())
