"""Client workloads for bench/run.py, driven through confluent-kafka (librdkafka).

Every record's value starts with its 8-byte sequence number, so a consumer can
prove that each record arrived exactly once (a seen-map plus a checksum, the sum
of the numbers) without hashing payloads. The rest of the value is cut from a
pool of word-like text, so lz4 has something to compress.
"""
from __future__ import annotations

import os
import random
import struct
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import schedstat

SEQ = struct.Struct(">Q")
STAMP = struct.Struct(">Qq")          # sequence number, perf_counter_ns at send
MIB = 1 << 20

# The client settings: linger.ms=5, 1 MiB batches.
PRODUCER = {"linger.ms": 5, "batch.size": MIB, "message.max.bytes": MIB + 12,
            "queue.buffering.max.messages": 500_000, "queue.buffering.max.kbytes": 1 << 20,
            "delivery.report.only.error": True}
# fetch.queue.backoff.ms (default 1000) lowered so the consumer does not stall itself.
CONSUMER = {"auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
            "fetch.queue.backoff.ms": 1}


def _pool(size: int, seed: int = 6) -> bytes:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(2048)]
    out = bytearray()
    while len(out) < size:
        out += " ".join(rng.choices(words, k=4096)).encode() + b" "
    return bytes(out[:size])


POOL = _pool(4 * MIB)


def value(i: int, size: int) -> bytes:
    off = (i * 40_961) % (len(POOL) - size)
    return SEQ.pack(i) + POOL[off:off + size - 8]


def values(count: int, size: int) -> list[bytes]:
    """Precomputed values, so the timed produce loop only produces."""
    return [value(i, size) for i in range(count)]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)
    futures[topic].result(60)
    # Wait until metadata shows every partition with a leader.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} has no leaders after 30 s")


class DeliveryErrors:
    """delivery.report.only.error: the callback runs only for failed records."""

    def __init__(self):
        self.count = 0
        self.first = None

    def __call__(self, err, msg):
        if err is not None:
            self.count += 1
            self.first = self.first or str(err)


def thread_cpu() -> dict[int, tuple[str, float]]:
    """Seconds on a CPU of every thread of this process, librdkafka's included."""
    return {tid: (name, ran / 1e9) for tid, (name, ran, _) in schedstat.threads().items()}


def busiest_thread(before: dict, after: dict, seconds: float) -> dict:
    """The client thread that used the most CPU between two thread_cpu() snapshots, as a share
    of the wall time. Near 1.0 the client, not the broker, set the pace: a librdkafka broker
    thread compresses every batch for its connection, and the Python thread makes every
    produce() and reads every record."""
    name, used = "", 0.0
    for tid, (n, cpu) in after.items():
        delta = cpu - before.get(tid, (n, 0.0))[1]
        if delta > used:
            name, used = n, delta
    return {"client_busiest_thread": name, "client_busiest_share": used / seconds if seconds else float("nan")}


def _produce_all(producer: Producer, topic: str, source) -> None:
    produce = producer.produce
    poll = producer.poll
    for v in source:
        while True:
            try:
                produce(topic, v)
                break
            except BufferError:
                poll(0.005)


def produce(bootstrap: str, topic: str, source, *, acks, compression: str, client: dict | None = None) -> dict:
    """`client`: more librdkafka settings (security.protocol, ssl.*, sasl.*)."""
    errors = DeliveryErrors()
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "compression.type": compression,
                  "on_delivery": errors, **PRODUCER, **(client or {})})
    p.list_topics(topic, timeout=10)          # connected before the clock starts
    threads = thread_cpu()
    start = time.perf_counter()
    _produce_all(p, topic, source)
    left = p.flush(120)
    seconds = time.perf_counter() - start
    busiest = busiest_thread(threads, thread_cpu(), seconds)
    if left or errors.count:
        raise RuntimeError(f"{left} records undelivered, {errors.count} failed: {errors.first}")
    return {"seconds": seconds, **busiest}


def consume(bootstrap: str, topic: str, count: int, group: str, idle_timeout: float = 30.0,
            client: dict | None = None) -> dict:
    """Read `count` records in a consumer group from the earliest offset; timed from assignment to last record."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER, **(client or {})})
    start = None
    threads = {}

    def on_assign(consumer, partitions):
        # The clock starts when the group hands out partitions: fetching begins here.
        nonlocal start, threads
        if start is None:
            threads, start = thread_cpu(), time.perf_counter()

    c.subscribe([topic], on_assign=on_assign)
    seen = bytearray(count)
    unpack = SEQ.unpack_from
    n = dups = nbytes = checksum = 0
    last = time.monotonic()
    try:
        while n - dups < count:
            batch = c.consume(1000, 0.01)   # returns at 1000 records or 10 ms, whichever first
            now = time.monotonic()
            if not batch:
                if now - last > idle_timeout:
                    break
                continue
            last = now
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"consume error: {err}")
                v = m.value()
                i = unpack(v)[0]
                if seen[i]:
                    dups += 1
                else:
                    seen[i] = 1
                    checksum += i
                n += 1
                nbytes += len(v)
        seconds = time.perf_counter() - (start or time.perf_counter())
        busiest = busiest_thread(threads, thread_cpu(), seconds)
    finally:
        c.close()
    unique = n - dups
    return {"seconds": seconds, "received": n, "duplicates": dups, "missing": count - unique,
            "checksum_ok": unique == count and checksum == count * (count - 1) // 2, "bytes": nbytes, **busiest}


def end_to_end(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float, size: int = 100,
               producer_config: dict | None = None) -> dict:
    """`rate` records/s for `seconds`, consumer with librdkafka's default fetch settings; the producer
    with acks=1 and linger.ms=5 unless ``producer_config`` says otherwise ({}: librdkafka's defaults)."""
    latencies: list[int] = []
    acked: list[float] = []              # produce() to the delivery report (librdkafka's own clock), seconds
    expected = int(rate * seconds)
    ready = threading.Event()
    done = threading.Event()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-e2e", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    warm = set()

    def consumer_loop():
        while not done.is_set():
            m = c.poll(0.1)
            if m is None or m.error() is not None:
                continue
            got = time.perf_counter_ns()
            seq, sent = STAMP.unpack_from(m.value())
            if sent < 0:                           # warm-up record: one per partition
                warm.add(m.partition())
                if len(warm) == partitions:
                    ready.set()
                continue
            latencies.append(got - sent)
            if len(latencies) >= expected:
                done.set()

    thread = threading.Thread(target=consumer_loop, daemon=True)
    thread.start()
    settings = {"acks": 1, "linger.ms": 5} if producer_config is None else producer_config
    p = Producer({"bootstrap.servers": bootstrap, **settings})
    pad = POOL[:size - STAMP.size]
    for part in range(partitions):
        p.produce(topic, STAMP.pack(0, -1) + pad, partition=part)
    p.flush(30)
    if not ready.wait(60):
        done.set()
        raise RuntimeError("consumer never saw the warm-up records")
    start = time.perf_counter()
    interval = 1.0 / rate
    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.latency())
    for i in range(expected):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        p.produce(topic, STAMP.pack(i, time.perf_counter_ns()) + pad, on_delivery=on_delivery)
        p.poll(0)
    p.flush(30)
    done.wait(30)
    done.set()
    thread.join()
    c.close()
    lat = sorted(latencies)
    acks = sorted(acked)

    def pct(q: float, values=lat, scale=1e6) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] / scale if values else float("nan")

    # the acknowledgement's share: produce() to the delivery report (linger, the leader, the replicas)
    return {"received": len(lat), "missing": expected - len(lat), "p50_ms": pct(0.50), "p99_ms": pct(0.99),
            "p999_ms": pct(0.999), "ack_p50_ms": pct(0.50, acks, 1e-3), "ack_p99_ms": pct(0.99, acks, 1e-3),
            "seconds": seconds}


def _own_cpu() -> float:
    import resource
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _producer_group(bootstrap: str, topic: str, connections: int, first: int, step: int, count: int,
                    size: int, pipe) -> None:
    """One client process of `ProducerFleet`: its share of the producers and of the records.

    Record i goes to this process when i % step == first, so the processes
    together send every sequence number once (the consume check still holds).
    """
    errors = DeliveryErrors()
    producers = [Producer({"bootstrap.servers": bootstrap, "acks": 1, "on_delivery": errors, **PRODUCER,
                           "queue.buffering.max.messages": 100_000})
                 for _ in range(connections)]
    for p in producers:
        p.list_topics(topic, timeout=30)
    mine = [value(i, size) for i in range(first, count, step)]
    pipe.send("ready")
    pipe.recv()                                      # go
    cpu0, threads, start = _own_cpu(), thread_cpu(), time.perf_counter()
    k = len(producers)
    for i, v in enumerate(mine):
        p = producers[i % k]
        while True:
            try:
                p.produce(topic, v)
                break
            except BufferError:
                p.poll(0.005)
    left = sum(p.flush(120) for p in producers)
    busiest = busiest_thread(threads, thread_cpu(), time.perf_counter() - start)
    pipe.send((left, errors.count, errors.first, _own_cpu() - cpu0, busiest))


class ProducerFleet:
    """`connections` producers (each its own librdkafka instance and connection) spread over
    `processes` client processes, connected before the clock starts.

    One Python thread dealing records to 200 librdkafka instances tops out far below
    what either broker takes, so the bench would measure the client; one process per
    core keeps the broker the thing measured.
    """

    def __init__(self, bootstrap: str, topic: str, connections: int, count: int, size: int,
                 processes: int | None = None):
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")   # no fork of a process holding librdkafka threads
        n = max(1, min(processes or os.cpu_count() or 1, connections))
        self.pipes, self.procs = [], []
        for w in range(n):
            ours, theirs = ctx.Pipe()
            share = connections // n + (w < connections % n)
            proc = ctx.Process(target=_producer_group, args=(bootstrap, topic, share, w, n, count, size, theirs),
                               daemon=True)
            proc.start()
            theirs.close()                           # so a dead child reads as EOF, not a hang
            self.pipes.append(ours)
            self.procs.append(proc)
        for pipe in self.pipes:
            if not pipe.poll(120) or pipe.recv() != "ready":
                self.close()
                raise RuntimeError("a producer process did not connect")

    def run(self) -> dict:
        start = time.perf_counter()
        for pipe in self.pipes:
            pipe.send("go")
        results = [pipe.recv() for pipe in self.pipes]
        seconds = time.perf_counter() - start
        processes = len(self.procs)
        self.close()
        left = sum(r[0] for r in results)
        failed = sum(r[1] for r in results)
        if left or failed:
            first = next((r[2] for r in results if r[2]), None)
            raise RuntimeError(f"{left} records undelivered, {failed} failed: {first}")
        busiest = max((r[4] for r in results), key=lambda b: b["client_busiest_share"])
        return {"seconds": seconds, "client_processes": processes, "client_cpu_s": sum(r[3] for r in results),
                **busiest}

    def close(self) -> None:
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.procs = []
