"""Client quotas: AlterClientQuotas / DescribeClientQuotas with Kafka's validation, and what a quota does.

The outcome test runs real clients against one shared broker for 20 s: a
producer and a consumer, each with a 1 MB/s quota and going as fast as it can,
measure about 1 MB/s (within 20%), are told to wait (throttle callbacks) and
see no error, while unquoted clients beside them run at full speed. The rate
is measured over the whole 20 s, the first second's burst included: Kafka's
quota window (11 samples of 1 s) lets a client start with up to ten seconds'
worth of its quota.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from test_metrics import metrics_broker_fixture, samples, scrape  # noqa: F401  (fixture "broker")
from wire import WireClient, decode_response, encode_request

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.records import build_batch

QUOTA = 1_000_000            # bytes/s
SECONDS = 20.0
VALUE = b"q" * 10_000
TOLERANCE = 0.2

A = AlterClientQuotasRequest
D = DescribeClientQuotasRequest


def wire(broker) -> WireClient:
    return WireClient("127.0.0.1", broker.port)


def alter(client, entity: dict, ops: dict, validate_only: bool = False, version: int = 1):
    """One entry; ops {key: value or None (remove)}; the entry's (error code, message)."""
    resp = client.call(49, version, A(entries=[A.EntryData(
        entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[A.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])],
        validate_only=validate_only))
    e = resp.entries[0]
    return e.error_code, e.error_message


def describe(client, components: list[tuple[str, int, str | None]], strict: bool = False, version: int = 1):
    resp = client.call(48, version, D(components=[D.ComponentData(entity_type=t, match_type=m, match=n)
                                                  for t, m, n in components], strict=strict))
    if resp.error_code:
        return resp.error_code, resp.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in resp.entries}


def test_alter_validates_as_kafka_does(broker):
    c = wire(broker)
    bad = [
        ({}, {"producer_byte_rate": 1}, "Invalid empty client quota entity"),
        ({"group": "g"}, {"producer_byte_rate": 1}, "Unhandled client quota entity type: group"),
        ({"user": ""}, {"producer_byte_rate": 1}, "Empty user not supported"),
        ({"ip": "127.0.0.1", "user": "u"}, {"connection_creation_rate": 1}, "Invalid quota entity combination"),
        ({"client-id": "c"}, {"bogus_rate": 1}, "Invalid configuration key bogus_rate"),
        ({"client-id": "c"}, {"connection_creation_rate": 1}, "Invalid configuration key connection_creation_rate"),
        ({"client-id": "c"}, {"producer_byte_rate": 0}, "Quota producer_byte_rate must be greater than 0"),
        ({"client-id": "c"}, {"consumer_byte_rate": -5}, "must be greater than 0"),
        ({"client-id": "c"}, {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
        ({"ip": "not a host name"}, {"connection_creation_rate": 1}, "is not a valid IP or resolvable host"),
    ]
    for entity, ops, message in bad:
        code, got = alter(c, entity, ops)
        assert code == ErrorCode.INVALID_REQUEST and message in got, (entity, ops, got)
    # validate_only stores nothing; a fractional percentage is fine
    assert alter(c, {"client-id": "v"}, {"request_percentage": 12.5}, validate_only=True) == (0, None)
    assert describe(c, [("client-id", 0, "v")]) == {}
    assert alter(c, {"client-id": "v"}, {"request_percentage": 12.5}, version=0) == (0, None)
    assert describe(c, [("client-id", 0, "v")], version=0) == {(("client-id", "v"),): {"request_percentage": 12.5}}
    assert alter(c, {"client-id": "v"}, {"request_percentage": None}) == (0, None)     # remove: entity gone
    assert describe(c, [("client-id", 0, "v")]) == {}


def test_describe_filters_as_kafka_does(broker):
    c = wire(broker)
    entities = [({"user": "alice"}, 100), ({"user": None}, 200), ({"client-id": "app 1*"}, 300),
                ({"client-id": None}, 400), ({"user": "alice", "client-id": "app 1*"}, 500),
                ({"user": None, "client-id": None}, 600), ({"ip": "127.0.0.1"}, 7)]
    for entity, rate in entities:
        key = "connection_creation_rate" if "ip" in entity else "consumer_byte_rate"
        assert alter(c, entity, {key: rate}) == (0, None)
    alice, default_user = (("user", "alice"),), (("user", None),)
    both = (("client-id", "app 1*"), ("user", "alice"))
    # exact user, not strict: the user and its user+client entities
    got = describe(c, [("user", 0, "alice")])
    assert got[alice] == {"consumer_byte_rate": 100.0} and both in got and len(got) == 2
    # strict: only the entity with exactly these types
    assert describe(c, [("user", 0, "alice")], strict=True) == {alice: {"consumer_byte_rate": 100.0}}
    # the default user (match type 1), and any client id (match type 2)
    assert describe(c, [("user", 1, None)], strict=True) == {default_user: {"consumer_byte_rate": 200.0}}
    got = describe(c, [("client-id", 2, None)], strict=True)
    assert set(got) == {(("client-id", "app 1*"),), (("client-id", None),)}
    assert describe(c, [("ip", 0, "127.0.0.1")]) == {(("ip", "127.0.0.1"),): {"connection_creation_rate": 7.0}}
    everything = describe(c, [])
    assert len([e for e in everything if not e[0][0].startswith("client-id") or e[0][1] != "v"]) >= 7
    assert describe(c, [], strict=True) == {}
    # Kafka's refusals
    assert describe(c, [("user", 0, "a"), ("user", 0, "b")])[0] == ErrorCode.INVALID_REQUEST
    assert describe(c, [("ip", 2, None), ("user", 2, None)])[0] == ErrorCode.INVALID_REQUEST
    assert describe(c, [("group", 2, None)])[0] == ErrorCode.UNSUPPORTED_VERSION
    assert describe(c, [("user", 9, None)])[0] == ErrorCode.INVALID_REQUEST
    for entity, _ in entities:         # clean up: the outcome tests share this broker
        key = "connection_creation_rate" if "ip" in entity else "consumer_byte_rate"
        assert alter(c, entity, {key: None}) == (0, None)


class Throttles:
    def __init__(self):
        self.events = 0
        self.total_s = 0.0

    def __call__(self, event):
        if event.throttle_time > 0:
            self.events += 1
            self.total_s += event.throttle_time


def run_quoted_producer(broker, out: dict) -> None:
    """A 1 MB/s producer going as fast as it can for SECONDS, an unquoted one beside it (50 MB, timed)."""
    throttles, free_throttles = Throttles(), Throttles()
    delivered, errors = [], []

    def on_delivery(err, msg):
        if err is None:
            delivered.append((time.monotonic(), len(msg.value())))
        elif err.code() not in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT):    # our own purge at the end
            errors.append(err)

    slow = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "quota-producer", "linger.ms": 5,
                     "batch.size": 65536, "queue.buffering.max.kbytes": 2048, "throttle_cb": throttles})
    fast = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "free-producer", "linger.ms": 5,
                     "throttle_cb": free_throttles})
    for p in (slow, fast):
        p.list_topics("quota-produce", timeout=10)
    free = {}

    def run_fast():
        t0 = time.monotonic()
        for _ in range(5000):
            while True:
                try:
                    fast.produce("quota-free", VALUE)
                    break
                except BufferError:
                    fast.poll(0.01)
        free["undelivered"] = fast.flush(60)
        free["rate"] = 5000 * len(VALUE) / (time.monotonic() - t0)

    t0 = time.monotonic()
    helper = threading.Thread(target=run_fast)
    helper.start()
    while time.monotonic() - t0 < SECONDS:
        try:
            slow.produce("quota-produce", VALUE, on_delivery=on_delivery)
        except BufferError:
            slow.poll(0.005)
        slow.poll(0)
    slow.poll(0.5)
    slow.purge()
    slow.flush(10)
    helper.join(120)
    out.update(rate=sum(n for t, n in delivered if t - t0 <= SECONDS) / SECONDS, errors=errors,
               throttles=throttles.events, free_rate=free.get("rate", 0.0), free_undelivered=free.get("undelivered"),
               free_throttles=free_throttles.events)


def run_quoted_consumer(broker, topic: str, count: int, out: dict) -> None:
    """A 1 MB/s consumer reading as fast as it can for SECONDS, an unquoted one beside it reading everything."""
    def consumer(client_id: str, throttles: Throttles, **extra) -> Consumer:
        cons = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": client_id, "client.id": client_id,
                         "enable.auto.commit": False, "throttle_cb": throttles, **extra})
        cons.assign([TopicPartition(topic, 0, 0)])
        return cons

    throttles, free_throttles = Throttles(), Throttles()
    slow = consumer("quota-consumer", throttles)
    fast = consumer("free-consumer", free_throttles, **{"max.partition.fetch.bytes": 8 << 20})
    free, errors = {}, []

    def run_fast():
        t0, got = time.monotonic(), 0
        while got < count and time.monotonic() - t0 < 60:
            for m in fast.consume(500, 1.0):
                if m.error():
                    errors.append(m.error())
                else:
                    got += 1
        free["rate"] = got * len(VALUE) / (time.monotonic() - t0)
        fast.close()

    received = 0
    t0 = time.monotonic()
    helper = threading.Thread(target=run_fast)
    helper.start()
    while (left := SECONDS - (time.monotonic() - t0)) > 0:
        for m in slow.consume(100, min(left, 0.5)):
            if m.error():
                errors.append(m.error())
            elif time.monotonic() - t0 <= SECONDS:
                received += len(m.value())
    slow.close()
    helper.join(90)
    out.update(rate=received / SECONDS, errors=errors, throttles=throttles.events, free_rate=free.get("rate", 0.0),
               free_throttles=free_throttles.events)


def test_produce_and_fetch_quotas_slow_only_their_clients(broker):
    """One 20 s run for both quotas (CI time): a quoted producer and a quoted consumer, each with an
    unquoted client of the same kind beside it."""
    c = wire(broker)
    topic, count = "quota-fetch", 3200                       # 32 MB: more than 20 s at the quota can take
    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "filler", "linger.ms": 5})
    for _ in range(count):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0
    assert alter(c, {"client-id": "quota-producer"}, {"producer_byte_rate": QUOTA}) == (0, None)
    assert alter(c, {"client-id": "quota-consumer"}, {"consumer_byte_rate": QUOTA}) == (0, None)
    produced, consumed = {}, {}
    runs = [threading.Thread(target=run_quoted_producer, args=(broker, produced)),
            threading.Thread(target=run_quoted_consumer, args=(broker, topic, count, consumed))]
    for t in runs:
        t.start()
    for t in runs:
        t.join(180)
    metrics = samples(scrape(broker))
    assert alter(c, {"client-id": "quota-producer"}, {"producer_byte_rate": None}) == (0, None)
    assert alter(c, {"client-id": "quota-consumer"}, {"consumer_byte_rate": None}) == (0, None)

    for what, r in (("producer", produced), ("consumer", consumed)):
        print(f"quoted {what} {r['rate'] / 1e6:.2f} MB/s, {r['throttles']} throttles; "
              f"free one {r['free_rate'] / 1e6:.1f} MB/s")
        assert r["errors"] == [], what
        assert abs(r["rate"] / QUOTA - 1) <= TOLERANCE, f"{what}: {r['rate'] / 1e6:.2f} MB/s under a 1 MB/s quota"
        assert r["throttles"] > 0, what
        assert r["free_rate"] > 5 * QUOTA and r["free_throttles"] == 0, (what, r)
    assert produced["free_undelivered"] == 0
    for resource, client_id in (("Produce", "quota-producer"), ("Fetch", "quota-consumer")):
        labels = frozenset({"resource": resource, "user": "", "client_id": client_id}.items())
        assert metrics[("kafka_server_quota_throttle_time", labels)] > 0, resource


def produce_frame(topic: str, size: int, correlation_id: int, client_id: str) -> bytes:
    batch = build_batch([(None, b"m" * size, [], 1000)])
    return encode_request(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]),
        correlation_id, client_id)


def test_a_throttled_connection_is_answered_then_muted(broker):
    """KIP-219: the answer comes at once with its throttle time; the next request waits until it passes,
    while another client's connection is answered as usual."""
    c = wire(broker)
    resp = c.call(19, 5, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name="quota-mute", num_partitions=1, replication_factor=1, assignments=[], configs=[])], timeout_ms=10000))
    assert resp.topics[0].error_code == 0
    assert alter(c, {"client-id": "muted"}, {"producer_byte_rate": 1000}) == (0, None)
    muted, other = wire(broker), wire(broker)
    muted.send_raw(produce_frame("quota-mute", 12_000, 1, "muted"))      # 1.2 kB/s over 10 s: 2 s of throttle
    _, first = decode_response(0, 9, muted.read_frame())
    assert first.responses[0].partition_responses[0].error_code == 0
    assert 1000 <= first.throttle_time_ms <= 3000
    muted.send_raw(produce_frame("quota-mute", 10, 2, "muted"))
    other.send_raw(produce_frame("quota-mute", 10, 1, "someone-else"))
    _, answer = decode_response(0, 9, other.read_frame())                 # not held up by the muted client
    assert answer.throttle_time_ms == 0
    muted.sock.settimeout(0.5)
    with pytest.raises(TimeoutError):
        muted.read_frame()                                                # still muted
    muted.sock.settimeout(10)
    _, second = decode_response(0, 9, muted.read_frame())                 # answered once the throttle passed
    assert second.responses[0].partition_responses[0].error_code == 0
    assert alter(c, {"client-id": "muted"}, {"producer_byte_rate": None}) == (0, None)


def test_a_request_quota_throttles_any_api(broker):
    c = wire(broker)
    # 0.0001% of a thread over the 10 s a fresh sensor's rate spans is 10 us of handler time in all, less
    # than one Metadata takes; at 0.01% it was 1 ms, which five Metadata requests on a fast machine stayed under
    assert alter(c, {"client-id": "busy"}, {"request_percentage": 0.0001}) == (0, None)
    busy = WireClient("127.0.0.1", broker.port)
    throttles = []
    for i in range(5):
        busy.send_raw(encode_request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False), i,
                                     "busy"))
        _, resp = decode_response(3, 12, busy.read_frame())
        throttles.append(resp.throttle_time_ms)
    assert alter(c, {"client-id": "busy"}, {"request_percentage": None}) == (0, None)
    # the first Metadata exceeds the quota, so every answer is throttled; a throttle is capped at one window
    assert all(t > 0 for t in throttles) and max(throttles) <= 1000, throttles
