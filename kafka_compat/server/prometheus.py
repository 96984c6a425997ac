"""The Prometheus endpoint: Kafka's broker metrics, named as the JMX exporter's Kafka rules name them.

`prometheus.listener=http://HOST:PORT` serves them at /metrics (prometheus_client's
WSGI server, on its own thread; the text format is written by `exposition`, ten
times cheaper than the library's generic renderer). The names follow the JMX exporter's
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
import gzip
import logging
import sys
import threading
import time
from wsgiref.simple_server import make_server

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, ThreadingWSGIServer, _SilentHandler, gzip_accepted
from prometheus_client.utils import floatToGoString

from .broker_topic_stats import ALL_TOPICS_METERS, METERS, REMOTE_GAUGES, REMOTE_METERS
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
                 group_coordinator, controller_metrics, quotas, fetch_sessions=None, client_metrics=None):
        self.broker_id = broker_id
        self.request_channel = request_channel
        self.broker_topic_stats = broker_topic_stats
        self.replica_manager = replica_manager
        self.socket_server = socket_server
        self.group_coordinator = group_coordinator
        self.controller_metrics = controller_metrics
        self.quotas = quotas
        self.fetch_sessions = fetch_sessions
        self.client_metrics = client_metrics
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
        ss = self.socket_server
        now = ss.connection_quotas.clock()
        per_listener = {listener: (ss.created.get(listener, 0), ss.closed_connections.get(listener, 0),
                                   _average(ss.accept_throttle.get(listener), now),
                                   _average(ss.ip_throttle.get(listener), now)) for listener in connections}
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
            "listeners": per_listener,
            "idle": min(max(1.0 - busy, 0.0), 1.0),
            "groups": groups,
            "offsets": offsets,
            "offset_commits": offset_commits,
            "purgatories": {n: (p.watched(), p.delayed()) for n, p in purgatories.items() if p is not None},
            "controller": (cm.active_controller_count, cm.offline_partitions_count,
                           cm.preferred_replica_imbalance_count),
            "quotas": {m.quota_type: (m.metric_name, m.snapshot()) for m in self.quotas.all() if m.enabled},
            "fetch_sessions": (len(fs), fs.partitions_cached(), fs.evictions) if (fs := self.fetch_sessions)
            else (0, 0, 0),
            "client_metrics": self.client_metrics.snapshot() if self.client_metrics is not None else [],
            "remote_gauges": rlm.topic_gauges() if (rlm := rm.remote_log_manager) is not None else {},
        }


def _average(stat, now: int) -> float:
    return stat.average(now) if stat is not None else 0.0


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


def exposition(s: dict) -> bytes:
    """One snapshot in Prometheus's text format (0.0.4), in the exporter's names.

    Written straight from the snapshot: prometheus_client's generic renderer
    (metric family objects, then `generate_latest`) spent ~8 µs a line, 20 ms of
    the scraping thread's GIL per scrape of a busy broker (bench/scrape_cost.py).
    The bytes are the ones `generate_latest` gives for the same families:
    sorted label names, its float formatting; tests/test_metrics.py checks it."""
    out: list[str] = []
    add = out.append
    # BrokerTopicMetrics: per topic and for all topics (no label)
    topics = sorted(s["topics"].items())
    for field, meter in METERS + ALL_TOPICS_METERS:
        name = "kafka_server_brokertopicmetrics_" + meter[:-len("PerSec")].lower() + "_total"
        add(_head(name, f"Kafka's BrokerTopicMetrics {meter}", "counter"))
        add(f"{name} {_go(s['all_topics'][field])}\n")
        if (field, meter) in METERS:
            out.extend(f'{name}{{topic="{_esc(topic)}"}} {_go(values[field])}\n' for topic, values in topics)
    if any(s["all_topics"].get(field) for field, _ in REMOTE_METERS):
        tiered = [(t, v) for t, v in topics if any(v.get(field) for field, _ in REMOTE_METERS)]
        for field, meter in REMOTE_METERS:
            name = "kafka_server_brokertopicmetrics_" + meter[:-len("PerSec")].lower() + "_total"
            add(_head(name, f"Kafka's BrokerTopicMetrics {meter}", "counter"))
            add(f"{name} {_go(s['all_topics'][field])}\n")
            out.extend(f'{name}{{topic="{_esc(topic)}"}} {_go(values[field])}\n' for topic, values in tiered)
    if gauges := s.get("remote_gauges"):
        for i, gauge in enumerate(REMOTE_GAUGES):
            name = "kafka_server_brokertopicmetrics_" + gauge.lower()
            add(_head(name, f"Kafka's BrokerTopicMetrics {gauge}", "gauge"))
            add(f"{name} {_go(sum(v[i] for v in gauges.values()))}\n")
            out.extend(f'{name}{{topic="{_esc(topic)}"}} {_go(v[i])}\n' for topic, v in sorted(gauges.items()))
    # RequestMetrics
    requests = sorted(s["requests"].items())
    name = "kafka_network_requestmetrics_requests_total"
    add(_head(name, "Kafka's RequestMetrics RequestsPerSec", "counter"))
    for request, m in requests:
        out.extend(f'{name}{{request="{request}",version="{version}"}} {_go(count)}\n'
                   for version, count in sorted(m["requests"].items()))
    for hist in TIMES:
        name = "kafka_network_requestmetrics_" + hist.lower()
        add(_head(name, f"Kafka's RequestMetrics {hist}", "histogram"))
        bucket = name + '_bucket{le="'
        for request, m in requests:
            counts, total = m["histograms"][hist]
            tail = f'",request="{request}"}} '
            running = 0
            for le, c in zip(_BOUNDS, counts):
                running += c
                add(f"{bucket}{le}{tail}{_go(running)}\n")
            add(f'{name}_count{{request="{request}"}} {_go(running)}\n'
                f'{name}_sum{{request="{request}"}} {_go(total)}\n')
    # SocketServer
    add(_gauge("kafka_network_socketserver_networkprocessoravgidlepercent",
               "Share of time the network (event loop) thread was idle since the last scrape", s["idle"]))
    name = "kafka_server_socket_server_metrics_connections"
    add(_head(name, "Open client connections", "gauge"))
    out.extend(f'{name}{{listener="{listener}"}} {_go(count)}\n'
               for listener, count in sorted(s["connections"].items()))
    for attr, index, kind, doc in (
            ("connection_creation_total", 0, "counter", "Connections taken"),
            ("connection_close_total", 1, "counter", "Connections closed after they were taken"),
            ("connection_accept_throttle_time", 2, "gauge",
             "Average ms a new connection waited for the listener's or the broker's creation rate"),
            ("ip_connection_accept_throttle_time", 3, "gauge",
             "Average ms a connection over its address's creation rate was held before it was closed")):
        name = "kafka_server_socket_server_metrics_" + attr
        add(_head(name, doc, kind))
        out.extend(f'{name}{{listener="{listener}"}} {_go(values[index])}\n'
                   for listener, values in sorted(s.get("listeners", {}).items()))
    # ReplicaManager
    parts = s["partitions"]
    for attr, value in replica_manager_gauges(parts).items():
        add(_gauge("kafka_server_replicamanager_" + attr, f"Kafka's ReplicaManager {attr}", value))
    for attr, value in zip(("isrshrinks", "isrexpands", "failedisrupdates"), s["isr"]):
        name = f"kafka_server_replicamanager_{attr}_total"
        add(_head(name, f"Kafka's ReplicaManager {attr} (PerSec meter)", "counter") + f"{name} {_go(value)}\n")
    # KafkaController
    for attr, value in zip(("activecontrollercount", "offlinepartitionscount", "preferredreplicaimbalancecount"),
                           s["controller"]):
        add(_gauge("kafka_controller_kafkacontroller_" + attr, f"Kafka's KafkaController {attr}", value))
    # Log, per partition
    labels = [f'{{partition="{p[1]}",topic="{_esc(p[0])}"}} ' for p in parts]
    for i, attr in ((6, "size"), (7, "logstartoffset"), (8, "logendoffset")):
        name = "kafka_log_log_" + attr
        add(_head(name, f"Kafka's Log {attr}, per partition", "gauge"))
        out.extend(f"{name}{label}{_go(p[i])}\n" for label, p in zip(labels, parts))
    # group coordinator
    groups = s["groups"]
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    add(_gauge(prefix + "numgroups", "Consumer groups this coordinator owns", sum(groups.values())))
    for attr, state in GROUP_STATES:
        add(_gauge(prefix + attr, f"Groups in state {state}", groups.get(state, 0)))
    add(_gauge(prefix + "numoffsets", "Committed offsets this coordinator holds", s["offsets"]))
    name = "kafka_server_group_coordinator_metrics_offset_commit_total"
    add(_head(name, "Offsets committed", "counter") + f"{name} {_go(s['offset_commits'])}\n")
    # FetchSessionCache
    prefix = "kafka_server_fetchsessioncache_"
    sessions, cached, evictions = s["fetch_sessions"]
    add(_gauge(prefix + "numincrementalfetchsessions", "Incremental fetch sessions cached", sessions))
    add(_gauge(prefix + "numincrementalfetchpartitionscached", "Partitions in the fetch sessions", cached))
    name = prefix + "incrementalfetchsessionevictions_total"
    add(_head(name, "Fetch sessions evicted to make room (PerSec meter)", "counter") + f"{name} {_go(evictions)}\n")
    # purgatories
    for attr, index in (("purgatorysize", 0), ("numdelayedoperations", 1)):
        name = "kafka_server_delayedoperationpurgatory_" + attr
        add(_head(name, f"Kafka's DelayedOperationPurgatory {attr}", "gauge"))
        out.extend(f'{name}{{delayed_operation="{op}"}} {_go(values[index])}\n'
                   for op, values in sorted(s["purgatories"].items()))
    # client quotas (only the types with a quota configured, as in Kafka)
    quotas: dict[str, list[str]] = {}
    for resource, (metric_name, entries) in sorted(s["quotas"].items()):
        for user, client_id, rate, throttle in entries:
            labels = f'{{client_id="{_esc(client_id)}",resource="{resource}",user="{_esc(user)}"}} '
            for attr, value in ((metric_name, rate), ("throttle-time", throttle)):
                quotas.setdefault(attr, []).append(f"{labels}{_go(value)}\n")
    for attr in sorted(quotas, key=lambda a: a.replace("-", "_")):
        name = "kafka_server_quota_" + attr.replace("-", "_")
        add(_head(name, f"Client quota {attr}", "gauge"))
        out.extend(name + line for line in quotas[attr])
    # what clients pushed (KIP-714), under their own names and labels
    families: dict[str, tuple[str, str, list[str]]] = {}
    for name, kind, doc, labels, value in s.get("client_metrics", ()):
        text = ",".join(f'{k}="{_esc(v)}"' for k, v in labels)
        families.setdefault(name, (kind, doc, []))[2].append(f"{name}{{{text}}} {_go(value)}\n")
    for name, (kind, doc, samples) in sorted(families.items()):
        add(_head(name, doc.replace("\\", r"\\").replace("\n", r"\n"), kind))
        out.extend(sorted(samples))
    return "".join(out).encode()


_BOUNDS = [floatToGoString(b) for b in BUCKETS_MS] + ["+Inf"]


def _go(value: float) -> str:
    """A sample's value as prometheus_client (and Go) print it: a float, in exponent form from 1e+06 up."""
    if type(value) is int and 0 <= value < 1_000_000:
        return f"{value}.0"                     # most values: what floatToGoString gives, without its work
    return floatToGoString(value)


def _esc(label_value: str) -> str:
    """Backslash, newline and double quote escaped, as the text format wants them in a label value."""
    return label_value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _head(name: str, doc: str, typ: str) -> str:
    return f"# HELP {name} {doc}\n# TYPE {name} {typ}\n"


def _gauge(name: str, doc: str, value: float) -> str:
    return f"{_head(name, doc, 'gauge')}{name} {_go(value)}\n"


def take_snapshot(metrics: BrokerMetrics, loop: asyncio.AbstractEventLoop) -> dict:
    """`metrics.snapshot()`, run on the event loop for a scraping thread."""
    done: concurrent.futures.Future = concurrent.futures.Future()

    def take() -> None:
        try:
            done.set_result(metrics.snapshot())
        except Exception as e:      # reported to the scraper as a failed scrape
            done.set_exception(e)

    loop.call_soon_threadsafe(take)
    return done.result(SCRAPE_TIMEOUT_S)


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
    """prometheus_client's WSGI server on its own thread, answering GET /metrics (404 elsewhere)."""

    def __init__(self, listener: str, metrics: BrokerMetrics):
        self.host, self.port = parse_http_listener(listener)
        self.metrics = metrics
        self._server = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def metrics_app(environ, start_response):
            if environ.get("PATH_INFO") != "/metrics":
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"metrics are at /metrics\n"]
            if environ.get("REQUEST_METHOD") != "GET":
                start_response("405 Method Not Allowed", [("Allow", "GET"), ("Content-Type", "text/plain")])
                return [b"use GET\n"]
            with _yielding_gil():
                body = exposition(take_snapshot(self.metrics, loop))
            headers = [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)]
            if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING")):    # Prometheus asks for it
                body = gzip.compress(body, 1)
                headers.append(("Content-Encoding", "gzip"))
            start_response("200 OK", headers)
            return [body]

        self._server = make_server(self.host, self.port, metrics_app, ThreadingWSGIServer,
                                   handler_class=_SilentHandler)
        self.port = self._server.server_port
        threading.Thread(target=self._server.serve_forever, name="prometheus-endpoint", daemon=True).start()
        log.info("Prometheus metrics at http://%s:%d/metrics", self.host, self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
