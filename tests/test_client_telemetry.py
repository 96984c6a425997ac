"""Client telemetry (KIP-714): CLIENT_METRICS subscriptions, GetTelemetrySubscriptions, PushTelemetry,
and what clients push served on /metrics.

Kafka's own pacing and errors over the wire (a zero instance id is given a new one; a push before its
interval is throttled, with a wrong subscription id refused; an oversized or undecodable payload
answered as Kafka answers it); then librdkafka (confluent-kafka), which pushes by itself once a
subscription matches it, shows up on /metrics with its client id, and `promtool check metrics`
accepts the page.
"""
from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import Producer
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from prometheus_client.parser import text_string_to_metric_families
from wire import WireClient

from kafka_compat.configdef import ConfigSource
from kafka_compat.protocol.compression import compress
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.describe_configs import DescribeConfigsRequest
from kafka_compat.protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest
from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_compat.protocol.messages.list_config_resources import ListConfigResourcesRequest
from kafka_compat.protocol.messages.push_telemetry import PushTelemetryRequest
from kafka_compat.protocol.primitives import ZERO_UUID
from kafka_compat.server.client_metrics_manager import prometheus_name, subscription_id
from kafka_compat.testing import EmbeddedBroker, free_ports

CLIENT_METRICS, SET, DELETE, APPEND = 16, 0, 1, 2
A = IncrementalAlterConfigsRequest


@pytest.fixture(scope="module")
def broker():
    port, = free_ports(1)
    with EmbeddedBroker({"prometheus.listener": f"http://127.0.0.1:{port}", "telemetry.max.bytes": 4096}) as b:
        b.metrics_url = f"http://127.0.0.1:{port}/metrics"
        yield b


def alter(c: WireClient, name: str, *ops):
    r = c.call(44, 1, A(resources=[A.AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name=name, configs=[
        A.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=False))
    return r.responses[0].error_code, r.responses[0].error_message


def client(broker, client_id: str) -> WireClient:
    c = WireClient("127.0.0.1", broker.port, client_id=client_id)
    c.call(18, 3, ApiVersionsRequest(client_software_name="telemetry-test", client_software_version="1.0"))
    return c


def get(c: WireClient, instance_id: bytes = ZERO_UUID):
    return c.call(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=instance_id))


def push(c: WireClient, instance_id: bytes, subscription: int, payload: bytes | None, compression: int = 0,
         terminating: bool = False) -> int:
    return c.call(72, 0, PushTelemetryRequest(client_instance_id=instance_id, subscription_id=subscription,
                                              terminating=terminating, compression_type=compression,
                                              metrics=payload)).error_code


def otlp(**values) -> bytes:
    """A MetricsData with one gauge (`gauge=`) and one delta counter (`counter=`), as clients push them."""
    def point(v):
        return NumberDataPoint(as_double=v, attributes=[KeyValue(key="node.id", value=AnyValue(string_value="0"))])
    metrics = []
    if "gauge" in values:
        metrics.append(Metric(name="org.apache.kafka.producer.record.queue.time.avg", description="queue time",
                              gauge=Gauge(data_points=[point(values["gauge"])])))
    if "counter" in values:
        metrics.append(Metric(name="org.apache.kafka.producer.record.send.count", sum=Sum(
            data_points=[point(values["counter"])], is_monotonic=True, aggregation_temporality=1)))
    return MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])]) \
        .SerializeToString()


def scrape(broker) -> str:
    return urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()


def samples(text: str) -> dict:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_subscriptions_are_config_resources_validated_as_kafka_does(broker):
    c = WireClient("127.0.0.1", broker.port)
    assert alter(c, "bad", ("interval.ms", SET, "50")) == (
        ErrorCode.INVALID_REQUEST, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)")
    assert alter(c, "bad", ("nope", SET, "1")) == (ErrorCode.INVALID_REQUEST,
                                                   "Unknown client metrics configuration: nope")
    assert alter(c, "bad", ("match", SET, "bogus=1")) == (ErrorCode.INVALID_CONFIG,
                                                          "Illegal client matching pattern: bogus=1")
    assert alter(c, "bad", ("metrics", APPEND, "a")) == (ErrorCode.INVALID_CONFIG,
                                                         "Can't APPEND to key metrics because its type is not LIST.")
    assert alter(c, "", ("interval.ms", SET, "1000")) == (ErrorCode.INVALID_REQUEST,
                                                         "Subscription name can't be empty")
    assert alter(c, "listed", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000")) == (0, None)
    R = DescribeConfigsRequest.DescribeConfigsResource
    d = c.call(32, 4, DescribeConfigsRequest(resources=[R(resource_type=CLIENT_METRICS, resource_name="listed")],
                                             include_synonyms=True)).results[0]
    configs = {e.name: e for e in d.configs}
    assert (configs["interval.ms"].value, configs["interval.ms"].config_source) == (
        "1000", ConfigSource.DYNAMIC_CLIENT_METRICS_CONFIG)
    assert (configs["match"].value, configs["match"].config_source, configs["match"].synonyms) == (
        "", ConfigSource.DEFAULT_CONFIG, [])
    L = ListConfigResourcesRequest
    listed = c.call(74, 1, L(resource_types=[CLIENT_METRICS])).config_resources
    assert [(r.resource_type, r.resource_name) for r in listed] == [(CLIENT_METRICS, "listed")]
    assert [r.resource_name for r in c.call(74, 0, L()).config_resources] == ["listed"]
    assert c.call(74, 1, L(resource_types=[99])).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert alter(c, "listed", ("metrics", DELETE, None), ("interval.ms", DELETE, None)) == (0, None)
    assert c.call(74, 1, L(resource_types=[CLIENT_METRICS])).config_resources == []
    c.close()


def test_get_and_push_follow_kafkas_pacing_and_errors(broker):
    admin = WireClient("127.0.0.1", broker.port)
    c = client(broker, "pacing-app")
    first = get(c)
    assert first.error_code == 0 and first.client_instance_id != ZERO_UUID
    assert (first.requested_metrics, first.push_interval_ms, first.telemetry_max_bytes) == ([], 300000, 4096)
    assert first.accepted_compression_types == [4, 3, 1, 2] and first.delta_temporality
    me = first.client_instance_id
    assert get(c, me).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED     # again before its interval
    assert alter(admin, "pacing", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "200"),
                 ("match", SET, "client_id=pacing-.*,client_software_name=telemetry-test")) == (0, None)
    changed = get(c, me)                                  # a changed subscription is given out at once
    assert changed.error_code == 0 and changed.requested_metrics == ["org.apache.kafka.producer."]
    assert changed.push_interval_ms == 200
    assert changed.subscription_id == subscription_id(["org.apache.kafka.producer."], 200, me)
    sub = changed.subscription_id
    assert push(c, me, sub + 1, otlp(gauge=1.0)) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert push(c, me, sub, otlp(gauge=1.0)) == ErrorCode.THROTTLING_QUOTA_EXCEEDED     # the first push was it
    time.sleep(0.25)
    assert push(c, me, sub, b"\x00" * 5000) == ErrorCode.TELEMETRY_TOO_LARGE
    time.sleep(0.25)
    assert push(c, me, sub, b"\xff\xff not protobuf") == ErrorCode.INVALID_RECORD
    time.sleep(0.25)
    assert push(c, me, sub, otlp(gauge=2.5), compression=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    time.sleep(0.25)
    assert push(c, me, sub, compress(4, otlp(gauge=2.5, counter=3)), compression=4) == 0
    time.sleep(0.25)
    assert push(c, me, sub, compress(1, otlp(counter=4)), compression=1, terminating=True) == 0
    assert push(c, me, sub, otlp(counter=1), terminating=True) == ErrorCode.INVALID_REQUEST   # it said it stopped
    got = samples(scrape(broker))
    labels = {("client_id", "pacing-app"), ("client_software_name", "telemetry-test"),
              ("client_software_version", "1.0"), ("node_id", "0")}
    gauge = [(k, v) for k, v in got.items() if k[0] == "org_apache_kafka_producer_record_queue_time_avg"]
    assert len(gauge) == 1 and gauge[0][1] == 2.5 and labels <= gauge[0][0][1]
    counter = [v for k, v in got.items() if k[0] == "org_apache_kafka_producer_record_send_count_total"]
    assert counter == [7.0]                              # deltas add up
    # a client that does not match gets no metrics to send
    other = client(broker, "other-app")
    assert get(other).requested_metrics == []
    assert push(other, ZERO_UUID, 0, b"") == ErrorCode.INVALID_REQUEST
    assert alter(admin, "pacing", ("metrics", DELETE, None), ("interval.ms", DELETE, None),
                 ("match", DELETE, None)) == (0, None)
    for conn in (admin, c, other):
        conn.close()


def test_names_are_valid_prometheus_names():
    assert prometheus_name("org.apache.kafka.consumer.fetch.manager.fetch.latency.avg", False) == \
        "org_apache_kafka_consumer_fetch_manager_fetch_latency_avg"
    assert prometheus_name("org.apache.kafka.producer.record.retry.total", True) == \
        "org_apache_kafka_producer_record_retry_total"
    assert prometheus_name("org.apache.kafka.client.connection.count", False) == \
        "org_apache_kafka_client_connection_count_value"
    assert prometheus_name("1st.metric", True) == "_1st_metric_total"


def test_librdkafka_pushes_its_metrics_to_metrics(broker):
    admin = WireClient("127.0.0.1", broker.port)
    assert alter(admin, "rdkafka", ("metrics", SET, "*"), ("interval.ms", SET, "500"),
                 ("match", SET, "client_id=telemetry-rdkafka")) == (0, None)
    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "telemetry-rdkafka", "linger.ms": 5})
    deadline = time.monotonic() + 60
    found = {}
    while time.monotonic() < deadline:
        p.produce("telemetry-topic", b"value")
        p.poll(0.2)
        found = {k: v for k, v in samples(scrape(broker)).items()
                 if ("client_id", "telemetry-rdkafka") in k[1] and k[0].startswith("org_apache_kafka_")}
        if found:
            break
    p.flush(10)
    assert found, "librdkafka never pushed its metrics"
    names = {dict(k[1]).get("client_software_name") for k in found}
    assert names and all(n and n.startswith(("librdkafka", "confluent-kafka")) for n in names), names
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus; interop/setup.sh does)")
    check = subprocess.run([promtool, "check", "metrics"], input=scrape(broker), capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    alter(admin, "rdkafka", ("metrics", DELETE, None), ("interval.ms", DELETE, None), ("match", DELETE, None))
    admin.close()
