"""The Prometheus endpoint, scraped while real traffic runs: counters equal what was sent.

Produce and Fetch go over our wire client, so the test knows every byte and
request; a confluent-kafka producer and consumer group run beside it while the
endpoint is scraped again and again. `promtool check metrics` (Debian's
prometheus package, installed by interop/setup.sh) must accept the output.
"""
from __future__ import annotations

import asyncio
import gzip
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from wire import WireClient

from kafka_compat.configdef import ConfigError
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.records import build_batch
from kafka_compat.server.broker import Broker
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.server.metadata_cache import PartitionLeadership
from kafka_compat.server.prometheus import partition_states, replica_manager_gauges
from kafka_compat.testing import EmbeddedBroker, free_port

TOPIC = "metered"


@pytest.fixture(scope="module", name="broker")
def metrics_broker_fixture():
    """A broker with the metrics endpoint on (test_quotas uses it too)."""
    port = free_port()
    with EmbeddedBroker({"prometheus.listener": f"http://127.0.0.1:{port}", "num.partitions": 1}) as b:
        b.metrics_url = f"http://127.0.0.1:{port}/metrics"
        yield b


def scrape(broker) -> str:
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as r:
        return r.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(s: dict, name: str, **labels) -> float:
    return s.get((name, frozenset(labels.items())), 0.0)


def create_topic(client: WireClient, name: str) -> None:
    resp = client.call(19, 5, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])], timeout_ms=10000))
    assert resp.topics[0].error_code == 0


def produce(client: WireClient, topic: str, batch: bytes):
    return client.call(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]))


def fetch(client: WireClient, topic: str, offset: int):
    return client.call(1, 11, FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""))


def test_counters_equal_what_was_sent_while_clients_run(broker):
    client = WireClient("127.0.0.1", broker.port)
    create_topic(client, TOPIC)
    before = samples(scrape(broker))

    # real clients beside the wire traffic, scraped all along
    stop = threading.Event()
    scrapes: list[str] = []

    def background():
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metered-group",
                      "auto.offset.reset": "earliest"})
        c.subscribe(["metered-bg"])
        while not stop.is_set():
            for _ in range(100):
                p.produce("metered-bg", b"x" * 200)
            p.poll(0)
            c.poll(0.05)
            scrapes.append(scrape(broker))
        p.flush(10)
        c.close()

    bg = threading.Thread(target=background)
    bg.start()
    try:
        sent_bytes = records = 0
        requests = 40
        for i in range(requests):
            batch = build_batch([(b"k%d" % i, b"v" * (100 + i), [], 1000 + j) for j in range(i % 7 + 1)])
            resp = produce(client, TOPIC, batch)
            assert resp.responses[0].partition_responses[0].error_code == 0
            sent_bytes += len(batch)
            records += i % 7 + 1
        fetched, offset, fetches = 0, 0, 0
        while offset < records:
            part = fetch(client, TOPIC, offset).responses[0].partitions[0]
            fetches += 1
            fetched += len(part.records)
            offset = part.high_watermark
        time.sleep(1.0)                 # the background scrapes see the counters grow
        deadline = time.monotonic() + 30    # and the background consumer's group exists (a slow machine: later)
        while not value(samples(scrape(broker)), "kafka_coordinator_group_groupmetadatamanager_numgroups") \
                and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        bg.join(30)
    text = scrape(broker)
    after = samples(text)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == sent_bytes
    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == records
    assert delta("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=TOPIC) == requests
    assert delta("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) == fetched == sent_bytes
    assert delta("kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=TOPIC) == fetches
    assert delta("kafka_server_brokertopicmetrics_failedproducerequests_total", topic=TOPIC) == 0
    # all topics: at least this topic and the background clients' one
    assert delta("kafka_server_brokertopicmetrics_bytesin_total") > sent_bytes
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic="metered-bg") > 0
    # requests by API and version: our Produce v9 and Fetch v11 (the background clients use other versions)
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce", version="9") == requests
    assert delta("kafka_network_requestmetrics_requests_total", request="FetchConsumer", version="11") == fetches
    for hist in ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems"):
        name = f"kafka_network_requestmetrics_{hist}"
        count = value(after, name + "_count", request="Produce")
        assert count >= requests
        assert value(after, name + "_bucket", request="Produce", le="+Inf") == count
        assert value(after, name + "_sum", request="Produce") >= 0
    assert value(after, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
    # gauges computed at scrape time
    assert value(after, "kafka_log_log_size", topic=TOPIC, partition="0") == sent_bytes
    assert value(after, "kafka_log_log_logendoffset", topic=TOPIC, partition="0") == records
    assert value(after, "kafka_log_log_logstartoffset", topic=TOPIC, partition="0") == 0
    assert value(after, "kafka_server_replicamanager_partitioncount") >= 2
    assert value(after, "kafka_server_replicamanager_leadercount") == value(after,
                                                                            "kafka_server_replicamanager_partitioncount")
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(after, "kafka_server_socket_server_metrics_connections", listener="PLAINTEXT") >= 1
    assert 0 <= value(after, "kafka_network_socketserver_networkprocessoravgidlepercent") <= 1
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert ("kafka_server_delayedoperationpurgatory_purgatorysize",
            frozenset({("delayed_operation", "Fetch")})) in after
    # scraped during the run, every counter only grew
    assert len(scrapes) >= 3
    runs = [samples(t) for t in scrapes]
    for earlier, later in zip(runs, runs[1:]):
        key = ("kafka_server_brokertopicmetrics_bytesin_total", frozenset())
        assert later[key] >= earlier[key]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus; interop/setup.sh does)")
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_only_metrics_is_served(broker):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(broker.metrics_url.replace("/metrics", "/other"), timeout=10)
    assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(broker.metrics_url, data=b"x", method="POST"), timeout=10)
    assert e.value.code == 405


def library_rendering(text: str) -> bytes:
    """prometheus_client's own rendering (generate_latest) of the families it parses from `text`."""
    parsed = list(text_string_to_metric_families(text))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(type("Parsed", (), {"collect": lambda self: parsed})())
    return generate_latest(registry)


def test_a_scrape_is_the_text_prometheus_client_would_render(broker):
    """The endpoint writes the text format itself (prometheus_client's generic renderer cost ~8 µs a
    line); what it writes is byte for byte what the library renders for the same families, served as
    text format 0.0.4, gzipped when the scraper accepts it (Prometheus does)."""
    request = urllib.request.Request(broker.metrics_url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert r.headers["Content-Encoding"] == "gzip"
        text = gzip.decompress(r.read()).decode()
    assert "kafka_network_requestmetrics_totaltimems_bucket" in text
    assert library_rendering(text) == text.encode()


def test_label_values_and_large_numbers_render_as_prometheus_client_renders_them():
    """Client ids and user names are free text: escaped in labels. Counts of a million and more take Go's
    exponent form, as the library prints them."""
    from kafka_compat.server.prometheus import exposition
    from kafka_compat.server.request_metrics import RequestMetrics

    odd = 'a "quoted" \\ back\nslash ünïcode'
    m = RequestMetrics("Produce", 9)
    m.requests[9], m.counts[3], m.local_s = 2_500_000, 7, 1234.5678
    s = {"topics": {"t": {"messages_in": 10**12, "bytes_in": 999_999, "bytes_out": 1_000_000, "bytes_rejected": 0,
                          "total_produce_requests": 3, "failed_produce_requests": 0, "total_fetch_requests": 0,
                          "failed_fetch_requests": 0}},
         "all_topics": {"messages_in": 10**12, "bytes_in": 999_999, "bytes_out": 1_000_000, "bytes_rejected": 0,
                        "total_produce_requests": 3, "failed_produce_requests": 0, "total_fetch_requests": 0,
                        "failed_fetch_requests": 0, "replication_bytes_in": 0, "replication_bytes_out": 0},
         "requests": {"Produce": m.snapshot()}, "partitions": [("t", 0, True, 1, 1, 1, 123_456_789, 0, 42)],
         "isr": (0, 0, 0), "connections": {"PLAINTEXT": 1}, "idle": 1 / 3, "groups": {}, "offsets": 0,
         "offset_commits": 0, "purgatories": {"Produce": (0, 0)}, "controller": (1, 0, 0),
         "quotas": {"Produce": ("byte-rate", [(odd, odd, 1048576.0, 0.5)]),
                    "Request": ("request-time", [("", "plain", 12.5, 0.0)])},
         "fetch_sessions": (3, 2_000_000, 1)}
    text = exposition(s).decode()
    assert library_rendering(text) == text.encode()
    got = samples(text)
    assert value(got, "kafka_server_quota_byte_rate", resource="Produce", user=odd, client_id=odd) == 1048576.0
    assert 'kafka_server_brokertopicmetrics_messagesin_total 1e+12\n' in text
    assert 'kafka_log_log_size{partition="0",topic="t"} 1.23456789e+08\n' in text
    assert value(got, "kafka_network_requestmetrics_localtimems_count", request="Produce") == 2_500_000
    assert 'kafka_server_fetchsessioncache_numincrementalfetchpartitionscached 2e+06\n' in text


def test_off_unless_configured_and_a_bad_listener_is_refused(tmp_path):
    async def scenario():
        b = Broker(BrokerConfig.from_properties({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}))
        await b.start()
        try:
            assert b.prometheus is None and b.request_channel.metrics is None   # nothing timed, nothing served
        finally:
            await b.stop()
    asyncio.run(scenario())
    for bad in ("tcp://127.0.0.1:9", "http://127.0.0.1", "http://127.0.0.1:x", "http://h:1/path"):
        with pytest.raises(ConfigError, match="must be http://HOST:PORT"):
            BrokerConfig.from_properties({"prometheus.listener": bad})


def test_replica_manager_gauges_follow_the_partitions_isr(tmp_path):
    """UnderReplicatedPartitions / UnderMinIsrPartitionCount / AtMinIsrPartitionCount come from each
    leader's ISR against its replicas and min.insync.replicas, as the controller sets them."""
    from test_replica_manager import ME, OTHER, T, run

    async def scenario(h):
        state = PartitionLeadership
        h.rm.apply_local_leadership(T, b"\x01" * 16, {
            0: state(ME, 0, (ME,), (ME, OTHER)),             # leader, a follower out of the ISR
            1: state(ME, 0, (ME, OTHER), (ME, OTHER)),       # leader, full ISR (= min.insync.replicas)
            2: state(OTHER, 0, (OTHER,), (ME, OTHER))})      # follower: the leader counts it, not us
        before = replica_manager_gauges(partition_states(h.rm))
        h.rm.apply_local_leadership(T, b"\x01" * 16, {0: state(ME, 1, (ME, OTHER), (ME, OTHER))})
        return before, replica_manager_gauges(partition_states(h.rm))

    before, after = run(tmp_path, scenario, **{"min.insync.replicas": 2})
    assert before == {"partitioncount": 3, "leadercount": 2, "underreplicatedpartitions": 1,
                      "underminisrpartitioncount": 1, "atminisrpartitioncount": 1, "offlinereplicacount": 0}
    assert after == dict(before, underreplicatedpartitions=0, underminisrpartitioncount=0, atminisrpartitioncount=2)


def test_a_scrape_shortens_the_gil_switch_interval_only_while_it_renders():
    """Rendering a scrape is milliseconds of pure Python on the endpoint's thread; at the default 5 ms
    switch interval the event loop could wait that long for the GIL at each turn. Overlapping scrapes
    restore the interval when the last one ends."""
    import sys

    from kafka_compat.server.prometheus import SCRAPE_SWITCH_INTERVAL_S, _yielding_gil

    before = sys.getswitchinterval()
    assert before > SCRAPE_SWITCH_INTERVAL_S
    first, second = _yielding_gil(), _yielding_gil()
    with first:
        assert sys.getswitchinterval() == pytest.approx(SCRAPE_SWITCH_INTERVAL_S)
        second.__enter__()
    assert sys.getswitchinterval() == pytest.approx(SCRAPE_SWITCH_INTERVAL_S)   # the other scrape still renders
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == before
