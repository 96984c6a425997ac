"""The Prometheus endpoint: Kafka's broker metrics, named as the JMX exporter's Kafka rules name them.

`prometheus.listener=http://HOST:PORT` serves them at /metrics (prometheus_client's
WSGI server, on its own thread). The names follow the JMX exporter's
example_configs/kafka-2_0_0.yml, so dashboards and alerts written for Kafka
behind that exporter keep working:

- a meter `kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t` becomes the counter
  `kafka_server_brokertopicmetrics_messagesin_total{topic="t"}` (no topic label: all topics);
- a gauge `kafka.log:type=Log,name=Size,topic=t,partition=0` becomes `kafka_log_log_size{topic,partition}`;
- a quota sensor `kafka.server:type=Produce,user=u,client-id=c` attribute `throttle-time` becomes
  `kafka_server_quota_throttle_time{resource="Produce",user="u",client_id="c"}`.

Two departures, so that `promtool check metrics` passes its lint: label names are
snake_case (`client_id`, `delayed_operation` where the exporter copies Kafka's
`clientId`, `delayedOperation`), and no gauge ends in `_count`.

Where the exporter renders a Yammer histogram as quantile gauges plus `_count`,
these are real Prometheus histograms: `_count` keeps the exporter's name and
meaning, `_bucket` and `_sum` come with it (use histogram_quantile). Metrics
Kafka keeps outside Yammer, which those rules do not match, take the exporter's
plain naming: `kafka_server_socket_server_metrics_connections{listener}`,
`kafka_server_group_coordinator_metrics_offset_commit_total`.

Nothing here runs per request: counters are bumped where the work is done
(BrokerTopicStats, RequestChannel) and every gauge is computed at scrape time,
from a snapshot taken on the event loop (so it never races the broker's state).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
import time
from wsgiref.simple_server import make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

from .broker_topic_stats import ALL_TOPICS_METERS, METERS
from .kafka_config import parse_http_listener
from .request_metrics import BUCKETS_MS, TIMES

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 10.0
# While a scrape renders (milliseconds of pure Python in prometheus_client), the event loop must get the
# GIL back quickly: at the default 5 ms switch interval each of its turns could wait that long for it.
SCRAPE_SWITCH_INTERVAL_S = 0.0002
GROUP_STATES = (("numgroupspreparingrebalance", "PreparingRebalance"),
                ("numgroupscompletingrebalance", "CompletingRebalance"), ("numgroupsstable", "Stable"),
                ("numgroupsdead", "Dead"), ("numgroupsempty", "Empty"))


class BrokerMetrics:
    """What a scrape reports, read from the broker's collaborators on the event loop."""

    def __init__(self, *, broker_id: int, request_channel, broker_topic_stats, replica_manager, socket_server,
                 group_coordinator, controller_metrics, quotas):
        self.broker_id = broker_id
        self.request_channel = request_channel
        self.broker_topic_stats = broker_topic_stats
        self.replica_manager = replica_manager
        self.socket_server = socket_server
        self.group_coordinator = group_coordinator
        self.controller_metrics = controller_metrics
        self.quotas = quotas
        self._cpu = time.thread_time()
        self._wall = time.monotonic()

    def snapshot(self) -> dict:
        """Plain data (no live objects), taken on the event loop thread."""
        cpu, wall = time.thread_time(), time.monotonic()
        busy = (cpu - self._cpu) / (wall - self._wall) if wall > self._wall else 0.0
        self._cpu, self._wall = cpu, wall
        rm = self.replica_manager
        partitions = partition_states(rm)
        connections: dict[str, int] = {}
        for conn in list(self.socket_server.connections):
            connections[conn.listener] = connections.get(conn.listener, 0) + 1
        for endpoint in self.socket_server.endpoints:
            connections.setdefault(endpoint.listener_name, 0)
        groups: dict[str, int] = {}
        offsets = offset_commits = 0
        gc = self.group_coordinator
        purgatories = {"Produce": rm.produce_purgatory, "Fetch": rm.fetch_purgatory}
        if gc is not None:
            for g in list(gc.groups.groups.values()):
                groups[g.state_string] = groups.get(g.state_string, 0) + 1
            offsets = sum(len(o) for o in list(gc.offsets.offsets.values()))
            offset_commits = gc.offsets.offset_commit_count
            purgatories.update(Heartbeat=gc.classic.heartbeat_purgatory, Rebalance=gc.classic.rebalance_purgatory)
        cm = self.controller_metrics
        stats = self.broker_topic_stats
        return {
            "topics": {t: s.snapshot() for t, s in list(stats.topics.items())},
            "all_topics": stats.all_topics.snapshot(),
            "requests": self.request_channel.snapshot(),
            "partitions": partitions,
            "isr": (rm.isr_change_meters.shrinks, rm.isr_change_meters.expands, rm.isr_change_meters.failed),
            "connections": connections,
            "idle": min(max(1.0 - busy, 0.0), 1.0),
            "groups": groups,
            "offsets": offsets,
            "offset_commits": offset_commits,
            "purgatories": {n: (p.watched(), p.delayed()) for n, p in purgatories.items() if p is not None},
            "controller": (cm.active_controller_count, cm.offline_partitions_count,
                           cm.preferred_replica_imbalance_count),
            "quotas": {m.quota_type: (m.metric_name, m.snapshot()) for m in self.quotas.all() if m.enabled},
        }


def partition_states(replica_manager) -> list[tuple]:
    """Per hosted partition: (topic, index, is leader, ISR size, replicas, min.insync.replicas, size,
    log start offset, log end offset), as the ReplicaManager's Partitions have them now."""
    return [(topic, index, p.is_leader, len(p.isr), len(p.assignment), p.min_insync_replicas,
             p.log_size, p.log_start_offset, p.log_end_offset)
            for (topic, index), p in list(replica_manager.partitions.items())]


def replica_manager_gauges(partitions: list[tuple]) -> dict[str, int]:
    """Kafka's ReplicaManager gauges over `partition_states`: only a leader counts a partition as under
    replicated (ISR smaller than the replica set) or under/at its min ISR, as Kafka's Partition does."""
    leaders = [p for p in partitions if p[2]]
    return {"partitioncount": len(partitions), "leadercount": len(leaders),
            "underreplicatedpartitions": sum(1 for p in leaders if p[3] < p[4]),
            "underminisrpartitioncount": sum(1 for p in leaders if p[3] < p[5]),
            "atminisrpartitioncount": sum(1 for p in leaders if p[3] == p[5]),
            "offlinereplicacount": 0}


def _family(name: str, doc: str, typ: str) -> Metric:
    return Metric(name, doc, typ)


def families(s: dict) -> list[Metric]:
    """The metric families of one snapshot, in the exporter's names."""
    out: list[Metric] = []
    # BrokerTopicMetrics: per topic and for all topics (no label)
    for field, meter in METERS + ALL_TOPICS_METERS:
        name = "kafka_server_brokertopicmetrics_" + meter[:-len("PerSec")].lower()
        f = _family(name, f"Kafka's BrokerTopicMetrics {meter}", "counter")
        f.add_sample(name + "_total", {}, s["all_topics"][field])
        if (field, meter) in METERS:
            for topic, values in sorted(s["topics"].items()):
                f.add_sample(name + "_total", {"topic": topic}, values[field])
        out.append(f)
    # RequestMetrics
    f = _family("kafka_network_requestmetrics_requests", "Kafka's RequestMetrics RequestsPerSec", "counter")
    for request, m in sorted(s["requests"].items()):
        for version, count in sorted(m["requests"].items()):
            f.add_sample("kafka_network_requestmetrics_requests_total", {"request": request, "version": str(version)},
                         count)
    out.append(f)
    bounds = [_le(b) for b in BUCKETS_MS] + ["+Inf"]
    for hist in TIMES:
        h = HistogramMetricFamily("kafka_network_requestmetrics_" + hist.lower(), f"Kafka's RequestMetrics {hist}",
                                  labels=["request"])
        for request, m in sorted(s["requests"].items()):
            counts, total = m["histograms"][hist]
            cumulative, running = [], 0
            for le, c in zip(bounds, counts):
                running += c
                cumulative.append((le, running))
            h.add_metric([request], cumulative, total)
        out.append(h)
    # SocketServer
    out.append(_gauge("kafka_network_socketserver_networkprocessoravgidlepercent",
                      "Share of time the network (event loop) thread was idle since the last scrape", s["idle"]))
    f = _family("kafka_server_socket_server_metrics_connections", "Open client connections", "gauge")
    for listener, count in sorted(s["connections"].items()):
        f.add_sample("kafka_server_socket_server_metrics_connections", {"listener": listener}, count)
    out.append(f)
    # ReplicaManager
    parts = s["partitions"]
    for name, value in replica_manager_gauges(parts).items():
        out.append(_gauge("kafka_server_replicamanager_" + name, f"Kafka's ReplicaManager {name}", value))
    for name, value in zip(("isrshrinks", "isrexpands", "failedisrupdates"), s["isr"]):
        f = _family("kafka_server_replicamanager_" + name, f"Kafka's ReplicaManager {name} (PerSec meter)", "counter")
        f.add_sample(f"kafka_server_replicamanager_{name}_total", {}, value)
        out.append(f)
    # KafkaController
    for name, value in zip(("activecontrollercount", "offlinepartitionscount", "preferredreplicaimbalancecount"),
                           s["controller"]):
        out.append(_gauge("kafka_controller_kafkacontroller_" + name, f"Kafka's KafkaController {name}", value))
    # Log, per partition
    for i, attr in ((6, "size"), (7, "logstartoffset"), (8, "logendoffset")):
        f = _family("kafka_log_log_" + attr, f"Kafka's Log {attr}, per partition", "gauge")
        for p in parts:
            f.add_sample("kafka_log_log_" + attr, {"topic": p[0], "partition": str(p[1])}, p[i])
        out.append(f)
    # group coordinator
    groups = s["groups"]
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    out.append(_gauge(prefix + "numgroups", "Consumer groups this coordinator owns", sum(groups.values())))
    for name, state in GROUP_STATES:
        out.append(_gauge(prefix + name, f"Groups in state {state}", groups.get(state, 0)))
    out.append(_gauge(prefix + "numoffsets", "Committed offsets this coordinator holds", s["offsets"]))
    f = _family("kafka_server_group_coordinator_metrics_offset_commit", "Offsets committed", "counter")
    f.add_sample("kafka_server_group_coordinator_metrics_offset_commit_total", {}, s["offset_commits"])
    out.append(f)
    # purgatories
    for attr, index in (("purgatorysize", 0), ("numdelayedoperations", 1)):
        name = "kafka_server_delayedoperationpurgatory_" + attr
        f = _family(name, f"Kafka's DelayedOperationPurgatory {attr}", "gauge")
        for op, values in sorted(s["purgatories"].items()):
            f.add_sample(name, {"delayed_operation": op}, values[index])
        out.append(f)
    # client quotas (only the types with a quota configured, as in Kafka)
    quota_families: dict[str, Metric] = {}
    for resource, (metric_name, entries) in sorted(s["quotas"].items()):
        for user, client_id, rate, throttle in entries:
            labels = {"resource": resource, "user": user, "client_id": client_id}
            for attr, value in ((metric_name, rate), ("throttle-time", throttle)):
                name = "kafka_server_quota_" + attr.replace("-", "_")
                f = quota_families.get(name)
                if f is None:
                    f = quota_families[name] = _family(name, f"Client quota {attr}", "gauge")
                f.add_sample(name, labels, value)
    out.extend(quota_families[n] for n in sorted(quota_families))
    return out


def _le(bound: float) -> str:
    return repr(float(bound))


def _gauge(name: str, doc: str, value: float) -> Metric:
    f = _family(name, doc, "gauge")
    f.add_sample(name, {}, value)
    return f


class KafkaCollector:
    """A prometheus_client collector: a snapshot from the loop, families in the scraping thread."""

    def __init__(self, metrics: BrokerMetrics, loop: asyncio.AbstractEventLoop):
        self.metrics = metrics
        self.loop = loop

    def collect(self):
        done: concurrent.futures.Future = concurrent.futures.Future()

        def take() -> None:
            try:
                done.set_result(self.metrics.snapshot())
            except Exception as e:      # reported to the scraper as a failed scrape
                done.set_exception(e)

        self.loop.call_soon_threadsafe(take)
        yield from families(done.result(SCRAPE_TIMEOUT_S))


_scrapes = 0
_scrapes_lock = threading.Lock()
_switch_interval = 0.0


class _yielding_gil:
    """Shortens the interpreter's GIL switch interval while any scrape renders, so the event loop's
    requests wait microseconds, not milliseconds, behind it (bench/run.py's e2e p99.9 showed the wait)."""

    def __enter__(self):
        global _scrapes, _switch_interval
        with _scrapes_lock:
            if _scrapes == 0:
                _switch_interval = sys.getswitchinterval()
                sys.setswitchinterval(min(_switch_interval, SCRAPE_SWITCH_INTERVAL_S))
            _scrapes += 1

    def __exit__(self, *exc):
        global _scrapes
        with _scrapes_lock:
            _scrapes -= 1
            if _scrapes == 0:
                sys.setswitchinterval(_switch_interval)


class PrometheusEndpoint:
    """prometheus_client's WSGI server on its own thread, answering /metrics (404 elsewhere)."""

    def __init__(self, listener: str, metrics: BrokerMetrics):
        self.host, self.port = parse_http_listener(listener)
        self.metrics = metrics
        self._server = None

    def start(self) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(KafkaCollector(self.metrics, asyncio.get_running_loop()))
        app = make_wsgi_app(registry)

        def only_metrics(environ, start_response):
            if environ.get("PATH_INFO") != "/metrics":
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"metrics are at /metrics\n"]
            with _yielding_gil():
                return app(environ, start_response)        # renders the whole answer before returning

        self._server = make_server(self.host, self.port, only_metrics, ThreadingWSGIServer,
                                   handler_class=_SilentHandler)
        self.port = self._server.server_port
        threading.Thread(target=self._server.serve_forever, name="prometheus-endpoint", daemon=True).start()
        log.info("Prometheus metrics at http://%s:%d/metrics", self.host, self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
