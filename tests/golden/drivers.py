"""One scenario per client library, run against a bootstrap address.

Each driver walks its client through what our broker must serve: create topic,
metadata, produce with every compression the client has, consume by assign,
group consume with commit, list offsets (by timestamp too), describe/alter
configs, delete topic. Steps a broker may refuse (Tansu lacks some APIs) are
`optional`: their frames are still recorded, the failure is only printed.
The core produce/consume steps check their counts, so a capture that did
not really round-trip records fails loudly.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import time

from interop import peers

TOPIC = "golden"
GROUP = "golden-group"
#: client_id of requests made to prepare a scenario (not part of the client's own traffic).
SETUP_CLIENT_ID = "golden-setup"
PER_BATCH = 3  # records per produce call: key k<i>, value "v<i> " + FILLER (the last one null), header h=<i>
#: Kafka's minimum session timeout: Tansu holds a new group's JoinGroup for about half of it.
SESSION_TIMEOUT_MS = 6000
GROUP_TIMEOUTS = {"session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": SESSION_TIMEOUT_MS // 5}
#: Makes values compressible: librdkafka sends a batch uncompressed when compressing does not shrink it.
FILLER = b"golden frame " * 4


def records(batch: int) -> list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]]:
    """Small records with keys, headers and one null value per batch."""
    out = []
    for i in range(PER_BATCH):
        n = batch * PER_BATCH + i
        value = None if i == PER_BATCH - 1 else b"v%d " % n + FILLER
        out.append((b"k%d" % n, value, [("h", b"%d" % n)]))
    return out


class StepObserver:
    """Told when an optional step starts and fails; capture.py plugs its recorder in."""

    def step_begin(self):
        return None

    def step_failed(self, token, step: str, error: str) -> None:
        pass

    def step_label(self, token, label: str) -> None:
        pass


observer = StepObserver()


@contextlib.contextmanager
def optional(step: str):
    """Run a step a broker may not support; report instead of failing.

    The observer learns of the failure, so the responses of that step (which
    the client may have rejected) do not become fixtures.
    """
    token = observer.step_begin()
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - any refusal is just reported
        error = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
        print(f"    optional step {step!r} failed: {error}")
        observer.step_failed(token, step, error)


@contextlib.contextmanager
def labelled(label: str):
    """Tag the traffic of a step (e.g. "gzip") so capture can keep one frame per label."""
    token = observer.step_begin()
    try:
        yield
    finally:
        observer.step_label(token, label)


def check(what: str, got: int, want: int) -> None:
    if got != want:
        raise AssertionError(f"{what}: got {got}, want {want}")


def setup_topic(bootstrap: str, topic: str = TOPIC, partitions: int = 1) -> None:
    """Create a topic for clients without admin (kcat), as SETUP_CLIENT_ID."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=SETUP_CLIENT_ID)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


# --- kafka-python -------------------------------------------------------------

def kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic, OffsetSpec

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="golden-kafka-python")
    admin.create_topics([NewTopic(TOPIC, 1, 1)])
    admin.describe_topics([TOPIC])
    with optional("describe_cluster"):
        admin.describe_cluster()
    resource = ConfigResource(ConfigResourceType.TOPIC, TOPIC)
    with optional("describe_configs"):
        admin.describe_configs([resource], config_filter="all")
    with optional("alter_configs incremental"):
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"retention.ms": "3600000"})],
                            incremental=True, raise_on_unknown=False)
    with optional("alter_configs legacy"):
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"retention.ms": "7200000"})],
                            incremental=False, raise_on_unknown=False)

    batch = 0
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        with labelled(codec or "none"):
            producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                                     client_id="golden-kafka-python")
            for key, value, headers in records(batch):
                producer.send(TOPIC, key=key, value=value, headers=headers, partition=0)
            producer.flush(30)
            producer.close()
        batch += 1
    with optional("idempotent producer"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        for key, value, headers in records(batch):
            producer.send(TOPIC, key=key, value=value, headers=headers, partition=0).get(30)
        producer.close()
        batch += 1
    with optional("transactional producer"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="golden-tx-kp")
        producer.init_transactions()
        producer.begin_transaction()
        for key, value, headers in records(batch):
            producer.send(TOPIC, key=key, value=value, headers=headers, partition=0)
        producer.commit_transaction()
        producer.close()
        batch += 1
    total = batch * PER_BATCH

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             client_id="golden-kafka-python")
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = _drain_sync(consumer, total)
    check("kafka-python assign consume", got, total)
    consumer.offsets_for_times({tp: int(time.time() * 1000) - 3_600_000})
    consumer.beginning_offsets([tp])
    consumer.end_offsets([tp])
    consumer.close()

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                             enable_auto_commit=False, **GROUP_TIMEOUTS)
    got = _drain_sync(consumer, total)
    check("kafka-python group consume", got, total)
    consumer.commit()
    consumer.committed(tp)
    consumer.close()

    with optional("list_partition_offsets earliest"):
        admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})
    with optional("list_partition_offsets by timestamp"):
        admin.list_partition_offsets({tp: int(time.time() * 1000) - 3_600_000})
    with optional("list_groups"):
        admin.list_groups()
    with optional("describe_groups"):
        admin.describe_groups([GROUP])
    with optional("list_group_offsets"):
        admin.list_group_offsets({GROUP: None})
    with optional("delete_records"):
        admin.delete_records({tp: 1})
    with optional("delete_groups"):
        admin.delete_groups([GROUP])
    admin.delete_topics([TOPIC])
    admin.close()


def _drain_sync(consumer, want: int, timeout: float = 30) -> int:
    got, deadline = 0, time.monotonic() + timeout
    while got < want and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got += len(batch)
    return got


# --- confluent-kafka -----------------------------------------------------------

def confluent_kafka(bootstrap: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, OffsetSpec

    base = {"bootstrap.servers": bootstrap, "client.id": "golden-confluent"}
    admin = AdminClient(base)
    for fut in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        fut.result(30)
    admin.list_topics(TOPIC, timeout=10)
    with optional("describe_topics"):
        from confluent_kafka import TopicCollection
        for fut in admin.describe_topics(TopicCollection([TOPIC])).values():
            fut.result(10)
    with optional("describe_cluster"):
        admin.describe_cluster().result(10)
    resource = ConfigResource("topic", TOPIC)
    with optional("describe_configs"):
        for fut in admin.describe_configs([resource]).values():
            fut.result(10)
    with optional("incremental_alter_configs"):
        res = ConfigResource("topic", TOPIC, incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
        for fut in admin.incremental_alter_configs([res]).values():
            fut.result(10)
    with optional("alter_configs"):
        for fut in admin.alter_configs([ConfigResource("topic", TOPIC, set_config={"retention.ms": "7200000"})]).values():
            fut.result(10)

    batch = 0
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        with labelled(codec):
            producer = Producer({**base, "compression.type": codec, "linger.ms": 5})
            for key, value, headers in records(batch):
                producer.produce(TOPIC, key=key, value=value, headers=headers, partition=0)
            check(f"confluent flush {codec}", producer.flush(30), 0)
        batch += 1
    with optional("idempotent producer"):
        producer = Producer({**base, "enable.idempotence": True})
        for key, value, headers in records(batch):
            producer.produce(TOPIC, key=key, value=value, headers=headers, partition=0)
        check("confluent flush idempotent", producer.flush(30), 0)
        batch += 1
    with optional("transactional producer"):
        producer = Producer({**base, "transactional.id": "golden-tx-confluent"})
        producer.init_transactions(30)
        producer.begin_transaction()
        for key, value, headers in records(batch):
            producer.produce(TOPIC, key=key, value=value, headers=headers, partition=0)
        producer.commit_transaction(30)
        batch += 1
    total = batch * PER_BATCH

    consumer = Consumer({**base, "group.id": "golden-assign", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    check("confluent assign consume", _drain_confluent(consumer, total), total)
    consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    consumer.offsets_for_times([TopicPartition(TOPIC, 0, int(time.time() * 1000) - 3_600_000)], timeout=10)
    consumer.close()

    consumer = Consumer({**base, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS})
    consumer.subscribe([TOPIC])
    check("confluent group consume", _drain_confluent(consumer, total), total)
    consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
    consumer.close()

    tp = TopicPartition(TOPIC, 0)
    with optional("list_offsets"):
        for fut in admin.list_offsets({tp: OffsetSpec.earliest()}).values():
            fut.result(10)
        for fut in admin.list_offsets({tp: OffsetSpec.for_timestamp(int(time.time() * 1000) - 3_600_000)}).values():
            fut.result(10)
    with optional("list_consumer_groups"):
        admin.list_consumer_groups().result(10)
    with optional("describe_consumer_groups"):
        for fut in admin.describe_consumer_groups([GROUP]).values():
            fut.result(10)
    with optional("list_consumer_group_offsets"):
        from confluent_kafka import ConsumerGroupTopicPartitions
        for fut in admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)]).values():
            fut.result(10)
    with optional("delete_records"):
        for fut in admin.delete_records([TopicPartition(TOPIC, 0, 1)]).values():
            fut.result(10)
    with optional("delete_consumer_groups"):
        for fut in admin.delete_consumer_groups([GROUP]).values():
            fut.result(10)
    for fut in admin.delete_topics([TOPIC]).values():
        fut.result(30)


def _drain_confluent(consumer, want: int, timeout: float = 30) -> int:
    got, deadline = 0, time.monotonic() + timeout
    while got < want and time.monotonic() < deadline:
        for msg in consumer.consume(want - got, 0.5):
            if msg.error() is None:
                got += 1
    return got


# --- aiokafka ----------------------------------------------------------------

def aiokafka(bootstrap: str) -> None:
    asyncio.run(_aiokafka(bootstrap))


async def _aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="golden-aiokafka")
    await admin.start()
    await admin.create_topics([NewTopic(TOPIC, 1, 1)])
    with optional("describe_topics"):
        await admin.describe_topics([TOPIC])
    with optional("describe_configs"):
        await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    with optional("alter_configs"):
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"retention.ms": "3600000"})])

    batch = 0
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        with labelled(codec or "none"):
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                                        client_id="golden-aiokafka")
            await producer.start()
            try:
                futs = [await producer.send(TOPIC, key=k, value=v, headers=h, partition=0)
                        for k, v, h in records(batch)]
                await asyncio.gather(*futs)
            finally:
                await producer.stop()
        batch += 1
    with optional("idempotent producer"):
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for k, v, h in records(batch):
                await producer.send_and_wait(TOPIC, key=k, value=v, headers=h, partition=0)
        finally:
            await producer.stop()
        batch += 1
    with optional("transactional producer"):
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="golden-tx-aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                for k, v, h in records(batch):
                    await producer.send(TOPIC, key=k, value=v, headers=h, partition=0)
        finally:
            await producer.stop()
        batch += 1
    total = batch * PER_BATCH

    tp = TopicPartition(TOPIC, 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, client_id="golden-aiokafka")
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        check("aiokafka assign consume", await _drain_async(consumer, total), total)
        await consumer.offsets_for_times({tp: int(time.time() * 1000) - 3_600_000})
        await consumer.beginning_offsets([tp])
        await consumer.end_offsets([tp])
    finally:
        await consumer.stop()

    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                                enable_auto_commit=False, **GROUP_TIMEOUTS)
    await consumer.start()
    try:
        check("aiokafka group consume", await _drain_async(consumer, total), total)
        await consumer.commit()
        await consumer.committed(tp)
    finally:
        await consumer.stop()

    with optional("list_consumer_groups"):
        await admin.list_consumer_groups()
    with optional("describe_consumer_groups"):
        await admin.describe_consumer_groups([GROUP])
    with optional("list_consumer_group_offsets"):
        await admin.list_consumer_group_offsets(GROUP)
    with optional("delete_records"):
        from aiokafka.admin import RecordsToDelete
        await admin.delete_records({tp: RecordsToDelete(before_offset=1)})
    await admin.delete_topics([TOPIC])
    await admin.close()


async def _drain_async(consumer, want: int, timeout: float = 30) -> int:
    got, deadline = 0, time.monotonic() + timeout
    while got < want and time.monotonic() < deadline:
        for batch in (await consumer.getmany(timeout_ms=500)).values():
            got += len(batch)
    return got


# --- kcat ---------------------------------------------------------------------

def kcat(bootstrap: str) -> None:
    binary = peers.kcat_binary()

    def run(*args: str, stdin: str | None = None) -> str:
        proc = subprocess.run([binary, "-b", bootstrap, "-X", "client.id=golden-kcat", *args],
                              input=stdin, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
        return proc.stdout

    setup_topic(bootstrap)
    run("-L", "-J")
    run("-L", "-t", TOPIC, "-J")
    batch = 0
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        # -K: key delimiter, -Z: an empty value is sent as null, -H: header on every record
        lines = "".join(f"{k.decode()}:{(v or b'').decode()}\n" for k, v, _ in records(batch))
        with labelled(codec):
            run("-P", "-t", TOPIC, "-p", "0", "-z", codec, "-K", ":", "-Z", "-H", f"h={batch}", stdin=lines)
        batch += 1
    total = batch * PER_BATCH
    out = run("-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-J")
    check("kcat assign consume", len(out.splitlines()), total)
    # no -o: kcat would then assign explicit offsets and skip OffsetFetch
    out = run("-G", GROUP, "-e", "-J", "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100",
              "-X", f"session.timeout.ms={SESSION_TIMEOUT_MS}", TOPIC)
    check("kcat group consume", sum(1 for line in out.splitlines() if line.startswith("{")), total)
    ts = int(time.time() * 1000) - 3_600_000
    run("-Q", "-t", f"{TOPIC}:0:{ts}")
    run("-Q", "-t", f"{TOPIC}:0:-1")


# --- KafkaJS and the Java client, through their harnesses -------------------------

def _harness(run, name: str) -> None:
    """The same scenario for both harnesses (see their usage text)."""
    topic = ["--bootstrap", "{b}", "--topic", TOPIC]
    run("admin", "create", *topic, "--partitions", "1")
    run("admin", "describe", *topic)
    with optional("admin alter-config"):
        run("admin", "alter-config", *topic, "--config", "retention.ms=3600000")
    codecs = ("none", "gzip", "snappy") if name == "kafkajs" else ("none", "gzip", "snappy", "lz4", "zstd")
    for codec in codecs:
        with labelled(codec):
            run("produce", *topic, "--partition", "0", "--count", str(PER_BATCH), "--compression", codec,
                "--null-every", str(PER_BATCH))
    extra = 0
    with optional("idempotent produce"):
        run("produce", *topic, "--partition", "0", "--count", str(PER_BATCH), "--idempotent")
        extra += PER_BATCH
    with optional("transactional produce"):
        run("produce", *topic, "--partition", "0", "--count", str(PER_BATCH),
            "--transactional-id", f"golden-tx-{name}")
        extra += PER_BATCH
    total = len(codecs) * PER_BATCH + extra
    out = run("consume", *topic, "--partition", "0", "--offset", "earliest", "--count", str(total))
    check(f"{name} assign consume", len(out.splitlines()), total)
    run("list-offsets", *topic, "--partition", "0", "--timestamp", str(int(time.time() * 1000) - 3_600_000))
    run("list-offsets", *topic, "--partition", "0", "--timestamp", "earliest")
    out = run("group-consume", *topic, "--group", GROUP, "--count", str(total))
    check(f"{name} group consume", len(out.splitlines()), total)
    with optional("describe-group"):
        run("admin", "describe-group", "--bootstrap", "{b}", "--group", GROUP, "--topic", TOPIC)
    run("admin", "delete", *topic)


def _harness_runner(command: list[str], bootstrap: str):
    def run(*args: str) -> str:
        argv = [a.replace("{b}", bootstrap) for a in args]
        proc = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
        return proc.stdout
    return run


def kafkajs(bootstrap: str) -> None:
    _harness(_harness_runner([peers.node_binary(), str(peers.NODE_DIR / "harness.js")], bootstrap), "kafkajs")


def java(bootstrap: str) -> None:
    cp = peers.java_harness_classpath()
    _harness(_harness_runner(["java", "-cp", cp, "ClientHarness"], bootstrap), "java")


DRIVERS = {
    "kafka-python": kafka_python,
    "confluent-kafka": confluent_kafka,
    "aiokafka": aiokafka,
    "kcat": kcat,
    "kafkajs": kafkajs,
    "java": java,
}


def client_version(client: str) -> str | None:
    """Version string of an installed client, None when it is missing."""
    if client in peers.PYTHON_CLIENTS:
        version = peers.python_client_version(client)
        if version and client == "confluent-kafka":
            import confluent_kafka
            version += f" (librdkafka {confluent_kafka.libversion()[0]})"
        return version
    if client == "kcat":
        return peers.kcat_version()
    if client == "kafkajs":
        return peers.kafkajs_version()
    if client == "java":
        return peers.java_client_version() if peers.java_classpath() else None
    raise KeyError(client)


def tansu_version() -> str | None:
    binary = peers.tansu_binary()
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split()
    return out[-1] if out else None
