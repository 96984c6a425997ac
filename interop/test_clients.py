"""Six real clients round-trip records through one broker, with every compression codec.

For each client (kafka-python, confluent-kafka, aiokafka, kcat, KafkaJS, the Java
client) and each codec (none, gzip, snappy, lz4, zstd): a topic of 3 partitions
made with the client's admin API; 10,000 records with keys, a header and every
7th value null, record i sent to partition i % 3 with create time base + i
(where the client can set one); read back with assign() and held against what
was sent: partition, offset, key, value, headers and timestamp of every record.
Then, once per client, ListOffsets by timestamp, a topic config described,
altered and described again, and the topics deleted.

One broker serves the whole module; one topic per codec keeps codecs apart
without a broker start each.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import struct
import subprocess
import time
from pathlib import Path

import peers
import pytest

from kafka_compat.testing import EmbeddedBroker

PARTITIONS = 3
COUNT = 10_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
NULL_EVERY = 7
WAIT = 60.0                 # a hang guard for consuming everything back, not a timing assertion
ALTERED = ("retention.ms", "123456789")
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def key_of(i: int) -> str:
    return f"k{i}"


def value_of(i: int) -> str | None:
    """Every NULL_EVERY'th value is null (a tombstone), as the Java and KafkaJS harnesses make them."""
    return None if (i + 1) % NULL_EVERY == 0 else f"v{i}"


def base_timestamp() -> int:
    """Create times a little in the past: within any message.timestamp.*.max.ms default."""
    return int(time.time() * 1000) - 600_000


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"group.initial.rebalance.delay.ms": "100"}) as b:
        yield b


# ---------------------------------------------------------------- checks shared by every client
def expected(count: int = COUNT, base_ts: int | None = None, headers=lambda i: (("h", str(i)),),
             start: int = 0) -> list[tuple]:
    """What a round trip must give back, as (partition, offset, key, value, headers, timestamp) in
    partition-then-offset order. Record i sits in partition i % 3 at offset i // 3."""
    out = [(i % PARTITIONS, (i - start) // PARTITIONS, key_of(i), value_of(i), tuple(headers(i)),
            None if base_ts is None else base_ts + i) for i in range(start, start + count)]
    out.sort(key=lambda r: (r[0], r[1]))
    return out


def check_records(got: list[tuple], want: list[tuple], ts_window: tuple[int, int] | None = None) -> None:
    """Every record came back once, exactly as sent. When the client could not set create
    times (want's timestamps are None), each must lie in ts_window, the time of the produce."""
    got = sorted(got, key=lambda r: (r[0], r[1]))
    assert len(got) == len(want), f"{len(got)} records back, {len(want)} sent"
    if ts_window is not None:
        lo, hi = ts_window
        bad = [r for r in got if not lo <= r[5] <= hi]
        assert not bad, f"timestamps outside the produce {ts_window}: {bad[:3]}"
        got = [r[:5] + (None,) for r in got]
    if got != want:
        diff = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
        raise AssertionError(f"record {diff} differs: got {got[diff]}, sent {want[diff]}")


def offset_for_time(records: list[tuple], partition: int, ts: int) -> int:
    """ListOffsets' answer: the first offset in the partition whose timestamp is at least ts."""
    return min(r[1] for r in records if r[0] == partition and r[5] >= ts)


def time_probes(records: list[tuple]) -> list[list[tuple[int, int, int]]]:
    """Rounds of ListOffsets-by-time questions, one per partition in each round (a request names a
    partition once): (partition, timestamp, expected offset) for the first, a middle and the last
    timestamp, and one just after a middle record, whose answer is the record after it."""
    rounds: list[list] = [[], [], [], []]
    for p in range(PARTITIONS):
        ts = sorted(r[5] for r in records if r[0] == p)
        mid = ts[len(ts) // 2]
        for k, t in enumerate((ts[0], mid, mid + 1, ts[-1])):
            if t <= ts[-1]:              # (a client that cannot set create times may leave no gap)
                rounds[k].append((p, t, offset_for_time(records, p, t)))
    return [r for r in rounds if r]


def partition_dir(broker, topic: str, partition: int) -> Path:
    """Where the partition's segments are: the broker's log dir, or (a cluster) its leader's."""
    if hasattr(broker, "partition_dir"):
        return broker.partition_dir(topic, partition)
    return Path(broker.data_dir, "logs", f"{topic}-{partition}")


def stored_batches(broker, topic: str, partition: int = 0) -> list[tuple[int, int]]:
    """(magic, producer id) of every batch the broker stored for one partition, read from its segment
    files. Magic sits at byte 16 in every format; only magic 2 batches carry a producer id (byte 43):
    an idempotent producer's id, or -1. Legacy (magic 0/1) entries get None."""
    out = []
    for seg in sorted(partition_dir(broker, topic, partition).glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 17 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            if length <= 0 or pos + 12 + length > len(data):     # preallocated zeros or a torn tail
                break
            magic = data[pos + 16]
            out.append((magic, struct.unpack_from(">q", data, pos + 43)[0] if magic == 2 else None))
            pos += 12 + length
    return out


def still_listed(list_topics, topics) -> set[str]:
    """Which of ``topics`` list_topics() still shows, asked until none or WAIT: in a cluster a broker other
    than the one that answered DeleteTopics learns of the deletion a moment later, from its own UpdateMetadata."""
    deadline = time.monotonic() + WAIT
    while True:
        remaining = set(list_topics()) & set(topics)
        if not remaining or time.monotonic() > deadline:
            return remaining
        time.sleep(0.2)


def stored_producer_ids(broker, topic: str, partition: int = 0) -> set[int]:
    return {pid for _, pid in stored_batches(broker, topic, partition)}


# ---------------------------------------------------------------- kafka-python
kafka_python_codecs = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


def test_kafka_python(broker):
    pytest.importorskip("kafka")
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    topics = {codec: unique(f"kafka-python-{codec}") for codec in CODECS}
    admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics.values()])
    base = base_timestamp()
    try:
        for codec, topic in topics.items():
            # the defaults: kafka-python 3.x is idempotent with acks=all unless told otherwise
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5,
                                     compression_type=kafka_python_codecs[codec])
            assert producer.config["enable_idempotence"] is True and producer.config["acks"] == -1
            futures = [producer.send(topic, key=key_of(i).encode(),
                                     value=None if value_of(i) is None else value_of(i).encode(),
                                     headers=[("h", str(i).encode())], partition=i % PARTITIONS,
                                     timestamp_ms=base + i) for i in range(COUNT)]
            producer.flush()
            acked = [(f.get().partition, f.get().offset) for f in futures]
            producer.close()
            assert acked == [(i % PARTITIONS, i // PARTITIONS) for i in range(COUNT)]
            assert min(stored_producer_ids(broker, topic)) >= 0, "kafka-python did not produce idempotently"

            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            got = []
            deadline = time.monotonic() + WAIT
            while len(got) < COUNT and time.monotonic() < deadline:
                for tp, msgs in consumer.poll(timeout_ms=500).items():
                    got.extend((m.partition, m.offset, m.key.decode(), None if m.value is None else m.value.decode(),
                                tuple((k, v.decode()) for k, v in m.headers), m.timestamp) for m in msgs)
            check_records(got, expected(base_ts=base))

            # ListOffsets by timestamp
            for probes in time_probes(got):
                found = consumer.offsets_for_times({TopicPartition(topic, p): t for p, t, _ in probes})
                assert [found[TopicPartition(topic, p)].offset for p, _, _ in probes] == [w for _, _, w in probes]
            consumer.close()

        # describe, alter, describe a topic config
        topic = topics["none"]
        res = ConfigResource(ConfigResourceType.TOPIC, topic)
        before = admin.describe_configs([res], config_filter="all")["topic"][topic]
        assert before[ALTERED[0]]["config_source"] == "DEFAULT_CONFIG"
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={ALTERED[0]: ALTERED[1]})])
        after = admin.describe_configs([res])["topic"][topic]         # only the modified ones
        assert after[ALTERED[0]]["value"] == ALTERED[1]
        assert after[ALTERED[0]]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    finally:
        admin.delete_topics(list(topics.values()))
        remaining = still_listed(admin.list_topics, topics.values())
        admin.close()
    assert not remaining, f"not deleted: {remaining}"



# ---------------------------------------------------------------- confluent-kafka (librdkafka)
def test_confluent_kafka(broker):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = {codec: unique(f"confluent-{codec}") for codec in CODECS}
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics.values()]).values():
        f.result(30)
    base = base_timestamp()
    try:
        for codec, topic in topics.items():
            producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                                    "linger.ms": 5})
            acked = []

            def delivered(err, msg):
                assert err is None, err
                acked.append((msg.partition(), msg.offset()))
            for i in range(COUNT):
                while True:
                    try:
                        producer.produce(topic, key=key_of(i), value=value_of(i), partition=i % PARTITIONS,
                                         headers=[("h", str(i))], timestamp=base + i, on_delivery=delivered)
                        break
                    except BufferError:          # the local queue is full: let deliveries drain it
                        producer.poll(0.1)
            assert producer.flush(WAIT) == 0
            assert sorted(acked) == sorted((i % PARTITIONS, i // PARTITIONS) for i in range(COUNT))

            consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"),
                                    "enable.auto.commit": False})
            try:
                confluent_check(consumer, topic, base)
            finally:
                consumer.close()

        topic = topics["none"]
        res = ConfigResource("topic", topic)
        (before,) = admin.describe_configs([res]).values()
        assert before.result(30)[ALTERED[0]].is_default
        altered = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry(ALTERED[0], ALTERED[1], incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([altered]).values():
            f.result(30)
        (after,) = admin.describe_configs([res]).values()
        entry = after.result(30)[ALTERED[0]]
        assert entry.value == ALTERED[1] and not entry.is_default
    finally:
        for f in admin.delete_topics(list(topics.values())).values():
            f.result(30)
    remaining = still_listed(lambda: admin.list_topics(timeout=30).topics, topics.values())
    assert not remaining, f"not deleted: {remaining}"


def confluent_check(consumer, topic: str, base: int) -> None:
    """assign() every partition from the beginning, check all records, then ListOffsets by time."""
    import confluent_kafka as ck

    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = []
    deadline = time.monotonic() + WAIT
    while len(got) < COUNT and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=1000, timeout=0.5):
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.key().decode(),
                        None if m.value() is None else m.value().decode(),
                        tuple((k, v.decode()) for k, v in m.headers() or ()), m.timestamp()[1]))
    check_records(got, expected(base_ts=base))
    for probes in time_probes(got):
        found = consumer.offsets_for_times([ck.TopicPartition(topic, p, t) for p, t, _ in probes], 30)
        assert [(tp.partition, tp.offset) for tp in found] == [(p, w) for p, _, w in probes]


# ---------------------------------------------------------------- aiokafka
def test_aiokafka(broker):
    pytest.importorskip("aiokafka")
    asyncio.run(aiokafka_roundtrip(broker))


async def aiokafka_roundtrip(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    topics = {codec: unique(f"aiokafka-{codec}") for codec in CODECS}
    await admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics.values()])
    base = base_timestamp()
    try:
        for codec, topic in topics.items():
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5,
                                        compression_type=None if codec == "none" else codec)
            await producer.start()
            try:
                futures = [await producer.send(topic, key=key_of(i).encode(),
                                               value=None if value_of(i) is None else value_of(i).encode(),
                                               partition=i % PARTITIONS, timestamp_ms=base + i,
                                               headers=[("h", str(i).encode())]) for i in range(COUNT)]
                acked = [(md.partition, md.offset) for md in await asyncio.gather(*futures)]
            finally:
                await producer.stop()
            assert acked == [(i % PARTITIONS, i // PARTITIONS) for i in range(COUNT)]

            consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
            await consumer.start()
            try:
                tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                got = []
                deadline = time.monotonic() + WAIT
                while len(got) < COUNT and time.monotonic() < deadline:
                    for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                        got.extend((m.partition, m.offset, m.key.decode(),
                                    None if m.value is None else m.value.decode(),
                                    tuple((k, v.decode()) for k, v in m.headers), m.timestamp) for m in msgs)
                check_records(got, expected(base_ts=base))
                for probes in time_probes(got):
                    found = await consumer.offsets_for_times({TopicPartition(topic, p): t for p, t, _ in probes})
                    assert [found[TopicPartition(topic, p)].offset for p, _, _ in probes] == [w for _, _, w in probes]
            finally:
                await consumer.stop()

        topic = topics["none"]
        assert aiokafka_config(await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]),
                               ALTERED[0]) != ALTERED[1]
        # aiokafka's admin has AlterConfigs (the whole-set kind), not IncrementalAlterConfigs
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {ALTERED[0]: ALTERED[1]})])
        assert aiokafka_config(await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]),
                               ALTERED[0]) == ALTERED[1]
    finally:
        await admin.delete_topics(list(topics.values()))
        remaining = set(topics.values())
        deadline = time.monotonic() + WAIT          # as still_listed, awaiting each answer
        while remaining and time.monotonic() < deadline:
            remaining = set(await admin.list_topics()) & set(topics.values())
            await asyncio.sleep(0.2 if remaining else 0)
        await admin.close()
    assert not remaining, f"not deleted: {remaining}"


def aiokafka_config(responses, name: str) -> str | None:
    """One config's value out of aiokafka's raw DescribeConfigs responses (it returns them undecoded)."""
    for resp in responses:
        for resource in resp.resources:
            for entry in resource[4]:
                if entry[0] == name:
                    return entry[1]
    return None


# ---------------------------------------------------------------- kcat
def kcat(*args: str, stdin: str | None = None) -> str:
    out = subprocess.run([peers.kcat_binary(), *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_kcat(broker):
    """kcat has no admin API: its topics are made, configured and deleted with kafka-python's admin
    client here (test_kafka_python covers those calls; what kcat itself sends is Produce, Fetch,
    Metadata and ListOffsets). Its producer cannot set create times or per-record headers: every
    record of a partition carries the header p=<partition>, and timestamps are checked to lie
    within the produce. -p makes its consumer assign() the partition (no group)."""
    peers.require(peers.kcat_binary(), "kcat")
    pytest.importorskip("kafka")
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    topics = {codec: unique(f"kcat-{codec}") for codec in CODECS}
    admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics.values()])
    try:
        for codec, topic in topics.items():
            start = int(time.time() * 1000)
            for p in range(PARTITIONS):
                # key:value lines; an empty value with -Z is a null value
                lines = "".join(f"{key_of(i)}:{value_of(i) or ''}\n" for i in range(p, COUNT, PARTITIONS))
                kcat("-P", "-b", broker.bootstrap, "-t", topic, "-p", str(p), "-K", ":", "-Z",
                     "-H", f"p={p}", "-X", f"compression.codec={codec}", "-X", "linger.ms=5", stdin=lines)
            end = int(time.time() * 1000)
            got = []
            for p in range(PARTITIONS):
                for line in kcat("-C", "-b", broker.bootstrap, "-t", topic, "-p", str(p), "-o", "beginning",
                                 "-e", "-J", "-q").splitlines():
                    m = json.loads(line)
                    hs = m.get("headers") or []
                    got.append((m["partition"], m["offset"], m["key"], m["payload"],
                                tuple(zip(hs[::2], hs[1::2])), m["ts"]))
            check_records(got, expected(headers=lambda i: (("p", str(i % PARTITIONS)),)), ts_window=(start, end))

            # ListOffsets by timestamp: kcat's query mode, -t topic:partition:timestamp
            for probes in time_probes(got):
                answer = kcat("-Q", "-b", broker.bootstrap, *(a for p, t, _ in probes for a in ("-t", f"{topic}:{p}:{t}")))
                assert sorted(line for line in answer.splitlines() if line) == [
                    f"{topic} [{p}] offset {w}" for p, _, w in probes], answer
    finally:
        admin.delete_topics(list(topics.values()))
        admin.close()


# ---------------------------------------------------------------- the Java client and KafkaJS, through their harnesses
def harness_runner(command: list[str]):
    def run(*args: str) -> list[dict]:
        proc = subprocess.run([*command, *args], capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, f"{' '.join(args[:2])} exited {proc.returncode}: {proc.stderr[-3000:]}"
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return run


def harness_roundtrip(run, broker, name: str, codecs) -> dict[str, str]:
    """Both harnesses take the same commands (see their usage text). Returns codec -> topic, deleted."""
    bs = ("--bootstrap", broker.bootstrap)
    topics = {codec: unique(f"{name}-{codec}") for codec in codecs}
    run("admin", "create", *bs, *(a for t in topics.values() for a in ("--topic", t)),
        "--partitions", str(PARTITIONS))
    base = base_timestamp()
    try:
        for codec, topic in topics.items():
            acked = run("produce", *bs, "--topic", topic, "--partitions", str(PARTITIONS), "--count", str(COUNT),
                        "--compression", codec, "--null-every", str(NULL_EVERY), "--timestamp-base", str(base))
            if "offset" in acked[0]:        # Java: one line per record
                assert [(a["partition"], a["offset"]) for a in acked] == [
                    (i % PARTITIONS, i // PARTITIONS) for i in range(COUNT)]
            else:                           # KafkaJS: one line per partition, with its base offset
                assert sorted((a["partition"], a["baseOffset"]) for a in acked) == [(p, 0) for p in range(PARTITIONS)]
            got = run("consume", *bs, "--topic", topic, *(a for p in range(PARTITIONS) for a in ("--partition", str(p))),
                      "--count", str(COUNT), "--timeout-ms", str(int(WAIT * 1000)))
            check_records([(r["partition"], r["offset"], r["key"], r["value"], tuple(map(tuple, r["headers"])),
                            r["timestamp"]) for r in got], expected(base_ts=base))
            got = [(r["partition"], r["offset"], None, None, (), r["timestamp"]) for r in got]
            probes = [probe for rnd in time_probes(got) for probe in rnd]      # the harness asks one at a time
            answers = run("list-offsets", *bs, "--topic", topic,
                          *(a for p, t, _ in probes for a in ("--partition", str(p), "--timestamp", str(t))))
            assert [(a["partition"], a["offset"]) for a in answers] == [(p, w) for p, _, w in probes], codec

        topic = topics["none"]
        (before,) = run("admin", "describe", *bs, "--topic", topic)
        assert before["configs"][ALTERED[0]] != ALTERED[1]
        assert [p["partition"] for p in before["partitions"]] == list(range(PARTITIONS))
        run("admin", "alter-config", *bs, "--topic", topic, "--config", "=".join(ALTERED))
        (after,) = run("admin", "describe", *bs, "--topic", topic)
        assert after["configs"][ALTERED[0]] == ALTERED[1]
    finally:
        run("admin", "delete", *bs, *(a for t in topics.values() for a in ("--topic", t)))
    remaining = still_listed(lambda: [t["topic"] for t in run("admin", "list-topics", *bs)], topics.values())
    assert not remaining, f"not deleted: {remaining}"
    return topics


def test_java_client(broker):
    """Kafka's own client 3.9.1, its producer with its defaults: idempotent, acks=all. assign() in
    the consumer; the admin calls are IncrementalAlterConfigs, DescribeConfigs, ListOffsets."""
    cp = peers.require(peers.java_harness_classpath(), "the Java client")
    assert peers.java_client_version() == "3.9.1"
    pids = {}           # producer ids in each topic's stored batches, read before the topics are deleted
    run = harness_runner(["java", "-cp", cp, "ClientHarness"])

    def run_and_look(*args):
        out = run(*args)
        if args[0] == "produce":
            topic = args[args.index("--topic") + 1]
            pids[topic] = set().union(*(stored_producer_ids(broker, topic, p) for p in range(PARTITIONS)))
        return out
    harness_roundtrip(run_and_look, broker, "java", CODECS)
    assert len(pids) == len(CODECS)
    for topic, ids in pids.items():
        assert ids and min(ids) >= 0, f"{topic}: the Java producer's default is idempotent, stored ids {ids}"


def test_kafkajs(broker):
    """KafkaJS has no assign(): its harness's consume joins a throw-away group, reads only the named
    partitions from the beginning and commits nothing. Its alter-config is AlterConfigs (KafkaJS
    has no IncrementalAlterConfigs). lz4 and zstd are the harness's plug-ins over pure-JS codecs."""
    peers.require(peers.node_dir(), "KafkaJS")
    harness_roundtrip(harness_runner([peers.node_binary(), str(peers.NODE_DIR / "harness.js")]), broker,
                      "kafkajs", CODECS)
