"""Differential conformance: the same requests to Apache Kafka and to kafka-compat, answers compared.

Both answers are decoded with our generated codecs and walked field by field. Elements of
an array are paired by their schema's map key (or, where the schema names none, by a
partition index), so only the order of keyed arrays goes unchecked. Each leaf that differs
must be on one of two lists, each entry with its reason:

- `ALLOWED`: differences that are right, because the two clusters are not the same cluster
  (ids, ports, clocks) or because Kafka 4 dropped something older clients still need.
- `KNOWN`: differences that are ours to remove, each naming the issue that removes it.

Any other difference fails the test that found it. `Tally` counts the leaves compared per
API; `interop/conftest.py` writes the counts to `.cache/conformance/report.json` and prints
the match rate per API at the end of the session.
"""
from __future__ import annotations

import fnmatch
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kafka_compat.codegen import model
from wire import WireClient  # noqa: E402

from kafka_compat.protocol.messages import APIS, api_versions, create_topics, metadata
from kafka_compat.protocol.primitives import KafkaStruct

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / ".cache" / "conformance" / "report.json"

# (API name or "*", path pattern, reason). A path is dotted attributes with [key] per element,
# for example `brokers[1].port` or `topics[t].partitions[0].error_code`. In patterns `*` matches
# anything and brackets are literal; a pattern without a dot may also match the last attribute.
ALLOWED: list[tuple[str, str, str]] = [
    # the two clusters are not the same cluster
    ("*", "throttle_time_ms", "a quota's throttle depends on each broker's own load"),
    ("*", "*topic_id", "topic ids are random UUIDs drawn by each cluster"),
    ("*", "cluster_id", "each cluster draws its own id"),
    ("*", "*port", "each broker listens on a port the OS picked"),
    ("*", "*log_append_time_ms", "LogAppendTime is each broker's clock"),
    ("*", "*member_id", "member ids carry a random UUID"),
    ("JoinGroup", "leader", "the leader is named by its member id, which carries a random UUID"),
    ("*", "*producer_id", "producer ids are drawn from each cluster's own blocks"),
    ("*", "*session_id", "fetch session ids are random"),
    ("*", "*error_message",
     "free text: the error code is the contract, and the words are ours (Kafka's own change between releases)"),
    # Kafka 4 dropped what older clients still need, and we keep it (KIP-896, KIP-724)
    ("ApiVersions", "api_keys[*].min_version",
     "Kafka 4 removed the oldest versions of 16 APIs (KIP-896); kafka-compat still serves them to older clients"),
    ("*", "*configs[message.format.version].*", "removed in Kafka 4; we keep it, since we still store v0/v1 batches"),
    ("*", "*configs[message.downconversion.enable].*", "removed in Kafka 4; we still down-convert for old clients"),
    ("*", "*configs[message.timestamp.difference.max.ms].*",
     "removed in Kafka 4 (KIP-937 replaced it); older tools still set it"),
    # KRaft against ZooKeeper: Kafka 4's quorum has no ZooKeeper-mode equivalent
    ("ApiVersions", "api_keys[55].*", "DescribeQuorum exists only for KRaft's quorum"),
    ("ApiVersions", "api_keys[64].*", "UnregisterBroker exists only for KRaft's quorum"),
    ("ApiVersions", "api_keys[80].*", "AddRaftVoter exists only for KRaft's quorum"),
    ("ApiVersions", "api_keys[81].*", "RemoveRaftVoter exists only for KRaft's quorum"),
    ("ApiVersions", "api_keys[94].*", "UnregisterController (Kafka 4.4) removes a KRaft controller's registration; "
                                      "there are no KRaft controllers here"),
    ("*@cluster", "controller_id", "each cluster elects its own controller"),
    ("DescribeConfigs@cluster", "results[*].configs[*].is_default",
     "DescribeConfigs v0's is_default: Kafka 3.9 says false for a default, Kafka 4.4 true, as we do"),
    *[("*@cluster", f"*configs[{name}].*", "a Kafka 4 topic config that Kafka 3.9 lacks")
      for name in ("max.decompressed.message.bytes", "remote.copy.lag.*", "errors.deadletterqueue.group.enable")],
    *[("*@cluster", f"*configs[{name}].*source",
       "the ZooKeeper-mode reference is given Kafka 4's default (reference.KAFKA4_DEFAULTS)")
      for name in ("message.timestamp.after.max.ms", "num.recovery.threads.per.data.dir")],
    ("CreateTopics@twice", "topics[1].*", "Kafka 3.9 answers a topic named twice in one request twice; Kafka 4 "
                                          "once, as we do"),
    ("CreateTopics@unknown broker", "topics[*]*",
     "Kafka 3.9 in ZooKeeper mode does not check the brokers of a validate-only assignment; Kafka 4 refuses "
     "it, as we do"),
    ("ApiVersions@cluster", "api_keys[*].max_version",
     "Kafka 3.9 is older than the Kafka 4.4 whose versions we serve; the highest version both accept is compared"),
    ("ApiVersions@cluster", "api_keys[*].*", "an API one release has and the other not (Kafka 3.9 against 4.4)"),
    *[("ApiVersions@cluster", f"{field}[*].*",
       "Kafka 3.9's ZooKeeper-mode brokers advertise and finalize no feature (metadata.version and the others are "
       "KRaft's there); ours advertise Kafka 4's, which Kafka 4 clients choose their protocols by")
      for field in ("supported_features", "finalized_features")],
    ("*", "controller_id", "KRaft's controller is a quorum node that clients never reach; ours is a broker"),
    ("*", "*configs[min.insync.replicas].*",
     "Kafka 4's storage format writes min.insync.replicas as a cluster default (ELR, KIP-966)"),
    ("ApiVersions", "supported_features[kraft.version].*", "the KRaft quorum's own feature"),
    ("DescribeConfigs", "results[*].configs[listeners].*value", "each broker listens on a port the OS picked"),
    ("DescribeConfigs", "results[*].configs[advertised.listeners].*value", "each broker listens on its own port"),
    ("DescribeConfigs", "results[*].configs[advertised.listeners].read_only",
     "KRaft registers a broker's endpoints once; ZooKeeper mode, ours, lets advertised.listeners change"),
    ("DescribeConfigs", "results[*].configs[broker.id].synonyms*",
     "broker.id's default: ours 0 (a single node needs none), Kafka's -1 (generated or required)"),
    ("DescribeConfigs", "results[*].configs[node.id].synonyms*",
     "node.id's default: ours 0 (a single node needs none), Kafka's none (KRaft requires it)"),
    ("DescribeConfigs", "results[*].configs[listener.security.protocol.map].*",
     "KRaft needs a CONTROLLER listener in the map; ZooKeeper mode has none"),
    ("DescribeConfigs", "results[*].configs[log.dirs].*value", "each broker's own directory"),
    ("DescribeLogDirs", "results[*].log_dir", "each broker's own directory"),
    ("DescribeLogDirs", "results[*].usable_bytes", "the free space of the disk both brokers share changes between "
                                                   "the two calls, as either writes"),
    *[("DescribeConfigs", f"results[*].configs[{name}].*", "a KRaft quorum setting; our cluster is ZooKeeper's")
      for name in ("process.roles", "controller.listener.names", "controller.quorum.*", "metadata.*",
                   "broker.heartbeat.interval.ms", "broker.session.timeout.ms", "initial.broker.registration.timeout.ms",
                   "early.start.listeners", "sasl.mechanism.controller.protocol")],
    *[("DescribeConfigs", f"results[*].configs[{name}].*",
       "a ZooKeeper-mode setting Kafka 4 removed; our cluster is ZooKeeper's")
      for name in ("zookeeper.*", "controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms",
                   "leader.imbalance.per.broker.percentage")],
    *[("DescribeConfigs", f"results[*].configs[{name}].*", "removed in Kafka 4; kept for the v0/v1 formats we serve")
      for name in ("log.message.downconversion.enable", "log.message.format.version",
                   "log.message.timestamp.difference.max.ms")],
    ("DescribeConfigs@errors", "results[2].*",
     "a broker resource with an empty name: ZooKeeper-mode Kafka described the cluster-wide defaults, as we do "
     "(kafka-configs --entity-default); KRaft refuses it"),
    ("DescribeConfigs", "results[*].configs[prometheus.listener].*", "ours: the /metrics endpoint without a plugin"),
    ("IncrementalAlterConfigs@unknown operation", "responses[*].error_code",
     "an unknown operation byte: Kafka answers UNKNOWN_SERVER_ERROR (an exception it did not expect), we "
     "INVALID_REQUEST"),
    ("ApiVersions", "supported_features[eligible.leader.replicas.version].*", "KRaft's ELR (KIP-966)"),
    *[("ApiVersions", f"api_keys[{k}].*", "client telemetry: Kafka serves it only with an exporter plugin "
                                          "configured; ours exports to /metrics, so it is always on")
      for k in (71, 72)],
    ("ApiVersions", "finalized_features[eligible.leader.replicas.version].*", "KRaft's ELR (KIP-966)"),
    ("ApiVersions", "finalized_features_epoch",
     "KRaft's epoch is an offset of its metadata log; ZooKeeper mode's, ours, the /feature znode's version (a "
     "single node's: its count of updates)"),
]

# (API name or "*", path pattern, reason with the issue that removes it)
KNOWN: list[tuple[str, str, str]] = [
    *[("ApiVersions", f"api_keys[{k}].*", f"{name} is not served yet (issue {issue})") for k, name, issue in [
        (83, "InitializeShareGroupState", 34), (84, "ReadShareGroupState", 34), (85, "WriteShareGroupState", 34),
        (86, "DeleteShareGroupState", 34), (87, "ReadShareGroupStateSummary", 34)]],
    *[("ApiVersions", f"api_keys[{k}].max_version", f"{name} (issue {issue})") for k, name, issue in [
        (78, "ShareFetch v2 is KIP-1222's renew acknowledgements, not built yet", 34),
        (79, "ShareAcknowledge v2 is KIP-1222's renew acknowledgements, not built yet", 34)]],
    ("Produce", "responses[conf-pr-gz].*",
     "a compressed batch is stored without being decompressed, so junk inside it is not seen; Kafka decompresses "
     "every batch it validates (issue 30)"),
    # the features' levels follow what is built (kafka_compat/server/features.py)
    *[("ApiVersions", f"{field}[{name}].{leaf}", why) for name, why in [
        ("share.version", "share.version 2 is KIP-1222's ShareFetch v2, not built yet: 0-1 (issue 34)")]
      for field, leaf in (("supported_features", "max_version"), ("finalized_features", "*"))],
    *[("DescribeConfigs", f"results[*].configs[{name}].*", f"{what} (issue {issue})") for name, what, issue in [
        ("group.share.*", "share groups are not built yet", 34), ("share.*", "share groups are not built yet", 34),
        ("errors.deadletterqueue.*", "share groups' dead-letter queue", 34),
        ("group.streams.assignment.interval.ms", "dynamic in Kafka 4.4; here the streams target assignment is "
                                                 "computed at each group epoch, without the interval", 31),
        ("remote.*", "tiered storage is not built yet", 33),
        ("follower.fetch.last.tiered.offset.enable", "tiered storage is not built yet", 33),
        ("group.consumer.assignment.interval.ms", "read_only: Kafka 4.4 batches consumer-group assignment "
         "updates at this interval and lets it change at runtime; ours assigns at each heartbeat", 30),
        ("principal.builder.class", "read_only: Kafka lets a listener change it at runtime", 30),
        ("sasl.mechanism.inter.broker.protocol", "read_only: Kafka lets a listener change it at runtime", 30),
        ("absent:*", "a Kafka 4 broker setting kafka-compat does not define yet", 30)]],
]


def _map_keys() -> dict[str, tuple[str, ...]]:
    """Struct qualname (`MetadataResponse.MetadataResponseBroker`) -> its map-key attributes."""
    keys: dict[str, tuple[str, ...]] = {}
    schemas = model.load(ROOT / "schemas")

    def walk(msg_name: str, fields: list[model.Field], structs: dict) -> None:
        for f in fields:
            if not f.is_struct:
                continue
            sub = f.fields or (structs[f.element].fields if f.element in structs else [])
            mk = tuple(s.attr for s in sub if s.map_key)
            if mk:
                keys[f"{msg_name}.{f.element}"] = mk
            walk(msg_name, sub, structs)

    for api in schemas.apis:
        for m in (api.request, api.response):
            walk(m.name, m.fields, m.structs)
    return keys


MAP_KEYS = _map_keys()
ABSENT = "(absent)"         # the value of a leaf whose element one side does not have
FALLBACK_KEYS = ("partition_index", "partition", "partition_id", "index", "api_key", "name", "group_id")
# map keys that each cluster draws at random: elements keyed by them are paired by position
RANDOM_KEYS = {"member_id", "producer_id", "topic_id"}


def _element_key(e) -> str | None:
    if not isinstance(e, KafkaStruct):
        return repr(e)
    attrs = MAP_KEYS.get(type(e).__qualname__) or tuple(a for a in FALLBACK_KEYS if a in e.__slots__)[:1]
    attrs = tuple(a for a in attrs if a not in RANDOM_KEYS)
    if not attrs:
        return None
    return ",".join(str(v) if v != "" else '""' for v in (getattr(e, a) for a in attrs))


def _leaves(value, path: str):
    """Every (path, leaf) below value: what a missing element would have been compared on."""
    if isinstance(value, KafkaStruct):
        for s in value.__slots__:
            if s != "unknown_tags":
                yield from _leaves(getattr(value, s), f"{path}.{s}" if path else s)
    elif isinstance(value, list) and value and isinstance(value[0], KafkaStruct):
        for e in value:
            yield from _leaves(e, f"{path}[{_element_key(e)}]")
    else:
        yield path, value


def diff(ours, theirs, path: str = ""):
    """Yield (path, ours, theirs) for each leaf that differs, and (path, same) markers for equal ones.

    Each yielded tuple is (path, ours, theirs, equal)."""
    if isinstance(ours, KafkaStruct) and isinstance(theirs, KafkaStruct) and type(ours) is type(theirs):
        for s in ours.__slots__:
            if s == "unknown_tags":
                continue
            yield from diff(getattr(ours, s), getattr(theirs, s), f"{path}.{s}" if path else s)
        return
    if (isinstance(ours, list) and isinstance(theirs, list)
            and any(isinstance(e, KafkaStruct) for e in ours + theirs)):
        keys_a, keys_b = [_element_key(e) for e in ours], [_element_key(e) for e in theirs]
        keyed = None not in keys_a + keys_b and len(set(keys_a)) == len(keys_a) and len(set(keys_b)) == len(keys_b)
        if keyed:
            a = {_element_key(e): e for e in ours}
            b = {_element_key(e): e for e in theirs}
        else:
            a = {str(i): e for i, e in enumerate(ours)}
            b = {str(i): e for i, e in enumerate(theirs)}
        for k in sorted(a.keys() | b.keys()):
            p = f"{path}[{k}]"
            if k in a and k in b:
                yield from diff(a[k], b[k], p)
            elif k in a:
                for lp, v in _leaves(a[k], p):
                    yield lp, v, ABSENT, False
            else:
                for lp, v in _leaves(b[k], p):
                    yield lp, ABSENT, v, False
        return
    if isinstance(ours, (bytes, bytearray, memoryview)):
        ours = bytes(ours)
    if isinstance(theirs, (bytes, bytearray, memoryview)):
        theirs = bytes(theirs)
    yield path, ours, theirs, ours == theirs


def _listed(table, api: str, path: str, ours=None, context: str = "") -> str | None:
    """The reason of the first entry whose pattern matches the path (or its last attribute).

    In a pattern `[` and `]` are literal, so `api_keys[57].*` names element 57; `*` matches anything.
    Inside brackets, `absent:` matches only where kafka-compat's answer has no such element; an API
    name `Api@words` only where the request's context (the test and the case) contains the words."""
    leaf = path.rsplit(".", 1)[-1]
    for name, pattern, reason in table:
        name, _, case = name.partition("@")
        if case not in context:
            continue
        if "absent:" in pattern:
            if ours != ABSENT:
                continue
            pattern = pattern.replace("absent:", "")
        literal = pattern.replace("[", "\0").replace("]", "[]]").replace("\0", "[[]")
        if name in ("*", api) and (fnmatch.fnmatchcase(path, literal) or fnmatch.fnmatchcase(leaf, literal)):
            return reason
    return None


@dataclass
class Counts:
    compared: int = 0
    identical: int = 0
    allowed: int = 0
    known: int = 0
    unexplained: int = 0
    examples: list = field(default_factory=list)


class Tally:
    """Leaves compared per API over a whole session."""

    def __init__(self):
        self.by_api: dict[str, Counts] = defaultdict(Counts)

    def compare(self, api_key: int, version: int, ours, theirs, context: str = "") -> list[str]:
        """Compare one answer; count it; return the unexplained differences as readable lines."""
        api = APIS[api_key].name
        counts = self.by_api[api]
        bad = []
        for path, a, b, equal in diff(ours, theirs):
            counts.compared += 1
            if equal:
                counts.identical += 1
                continue
            if _listed(ALLOWED, api, path, a, context):
                counts.allowed += 1
            elif _listed(KNOWN, api, path, a, context):
                counts.known += 1
            else:
                counts.unexplained += 1
                line = f"{api} v{version} {context}: {path}: ours={a!r} kafka={b!r}"
                bad.append(line)
                if len(counts.examples) < 20:
                    counts.examples.append(line)
        return bad

    def merge_into(self, path: Path = REPORT) -> dict:
        """Add this tally to the report file (pytest-xdist-free: one session writes at a time)."""
        report = json.loads(path.read_text()) if path.exists() else {}
        for api, c in self.by_api.items():
            r = report.setdefault(api, {"compared": 0, "identical": 0, "allowed": 0, "known": 0,
                                        "unexplained": 0, "examples": []})
            for k in ("compared", "identical", "allowed", "known", "unexplained"):
                r[k] += getattr(c, k)
            r["examples"] = (r["examples"] + c.examples)[:20]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1, sort_keys=True))
        return report


class Pair:
    """One connection to each broker; every call goes to both, and the answers are compared."""

    def __init__(self, ours, kafka, tally, context: str):
        """ours: an EmbeddedBroker; kafka: a reference.ReferenceKafka."""
        self.ours = WireClient("127.0.0.1", ours.port)
        self.kafka = WireClient(*kafka.address)
        self.tally = tally
        self.context = context
        self.unexplained: list[str] = []
        self.replication_factor = 1         # of the topics create() makes
        self._ranges: dict[int, range] | None = None

    def close(self) -> None:
        self.ours.close()
        self.kafka.close()

    def ranges(self) -> dict[int, range]:
        """API key -> the versions both brokers accept."""
        if self._ranges is None:
            hello = api_versions.ApiVersionsRequest(client_software_name="conformance", client_software_version="1")
            a = self.ours.call(18, 3, hello)
            b = self.kafka.call(18, 3, hello)
            assert a.error_code == b.error_code == 0, (a, b)
            ka = {k.api_key: (k.min_version, k.max_version) for k in a.api_keys}
            kb = {k.api_key: (k.min_version, k.max_version) for k in b.api_keys}
            self._ranges = {k: range(max(ka[k][0], kb[k][0]), min(ka[k][1], kb[k][1]) + 1)
                            for k in ka.keys() & kb.keys()}
        return self._ranges

    def versions(self, api_key: int, lo: int = 0, hi: int = 99) -> list[int]:
        """The versions both accept, within lo..hi; a test of an API neither side shares fails here."""
        found = [v for v in self.ranges().get(api_key, ()) if lo <= v <= hi]
        assert found, f"no version of API {api_key} in {lo}..{hi} that both brokers accept"
        return found

    def call(self, api_key: int, version: int, body, what: str = ""):
        """Send body to both; compare the answers; return (ours, kafka).

        body may be a function of the side ("ours" or "kafka"), for what each cluster draws
        itself: topic ids, producer ids."""
        ours = self.ours.call(api_key, version, body("ours") if callable(body) else body)
        theirs = self.kafka.call(api_key, version, body("kafka") if callable(body) else body)
        self.unexplained += self.tally.compare(api_key, version, ours, theirs, f"{self.context} {what}".strip())
        return ours, theirs

    def each(self, api_key: int, version: int, body) -> None:
        """Send to both without comparing (set-up steps such as creating a topic)."""
        self.ours.call(api_key, version, body)
        self.kafka.call(api_key, version, body)

    def client(self, side: str) -> WireClient:
        return self.ours if side == "ours" else self.kafka

    def topic_id(self, side: str, name: str) -> bytes:
        resp = self.client(side).call(3, 12, metadata.MetadataRequest(
            topics=[metadata.MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False))
        return resp.topics[0].topic_id

    def call_controller(self, api_key: int, version: int, body, what: str = ""):
        """As call, but to each side's controller (ZooKeeper-mode Kafka takes topic changes only there)."""
        clients = {side: self.controller(side) for side in ("ours", "kafka")}
        try:
            ours = clients["ours"].call(api_key, version, body("ours") if callable(body) else body)
            theirs = clients["kafka"].call(api_key, version, body("kafka") if callable(body) else body)
        finally:
            for side, c in clients.items():
                if c is not self.client(side):
                    c.close()
        self.unexplained += self.tally.compare(api_key, version, ours, theirs, f"{self.context} {what}".strip())
        return ours, theirs

    def controller(self, side: str) -> WireClient:
        """A connection to the side's controller: the pair's own when it is the broker the pair talks to."""
        client = self.client(side)
        m = client.call(3, 9, metadata.MetadataRequest(topics=[], allow_auto_topic_creation=False))
        own = client.sock.getpeername()[1]
        for b in m.brokers:
            if b.node_id == m.controller_id and b.port != own:
                return WireClient(b.host, b.port)
        return client

    def check(self) -> None:
        assert not self.unexplained, "answers differ from Kafka's:\n" + "\n".join(self.unexplained[:60])


def create(pair: Pair, *names: str, partitions: int = 1, configs: dict | None = None) -> None:
    """Each topic on both sides. On a cluster every partition is placed on brokers 0, 1, 2 in that order,
    so the broker the pair talks to leads it on both sides (each cluster would place replicas from a
    random start of its own)."""
    R = create_topics.CreateTopicsRequest
    rf = pair.replication_factor
    placed = [R.CreatableReplicaAssignment(partition_index=p, broker_ids=list(range(rf)))
              for p in range(partitions)] if rf > 1 else []
    topics = [R.CreatableTopic(
        name=n, num_partitions=-1 if placed else partitions, replication_factor=-1 if placed else rf,
        assignments=placed, configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        for n in names]
    body = create_topics.CreateTopicsRequest(topics=topics, timeout_ms=30000)
    for side in ("ours", "kafka"):
        controller = pair.controller(side)       # ZooKeeper-mode Kafka takes CreateTopics only there
        try:
            controller.call(19, 5, body)
        finally:
            if controller is not pair.client(side):
                controller.close()
    wait_for_leaders(pair, names)


def wait_for_leaders(pair: Pair, names) -> None:
    """Both brokers know every partition's leader (topic creation is asynchronous in KRaft)."""
    req = metadata.MetadataRequest(topics=[metadata.MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                                   allow_auto_topic_creation=False)
    for side, client in (("ours", pair.ours), ("kafka", pair.kafka)):
        deadline = time.monotonic() + 60
        while True:
            resp = client.call(3, 9, req)
            if all(t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
                   for t in resp.topics):
                break
            assert time.monotonic() < deadline, f"{side}: no leaders for {names}: {resp}"
            time.sleep(0.1)
        # KRaft's metadata cache names a leader a moment before that broker's replica manager leads the
        # partition (NOT_LEADER_OR_FOLLOWER meanwhile): wait until the leader answers ListOffsets too
        from kafka_compat.protocol.messages import list_offsets
        L = list_offsets.ListOffsetsRequest
        probe = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=t.name, partitions=[
            L.ListOffsetsPartition(partition_index=p.partition_index, timestamp=-1) for p in t.partitions])
            for t in resp.topics])
        leaders = {p.leader_id for t in resp.topics for p in t.partitions}
        own = {b.node_id for b in resp.brokers if b.port == client.sock.getpeername()[1]}
        if leaders <= own:
            answer = until(lambda: client.call(2, 7, probe),
                           lambda r: all(p.error_code == 0 for t in r.topics for p in t.partitions))
            assert all(p.error_code == 0 for t in answer.topics for p in t.partitions), f"{side}: {answer}"




def until(call, ok, timeout: float = 30.0):
    """call() until ok(answer), for at most timeout seconds; the last answer (coordinators still loading)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        if ok(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


LOADING = (14, 15, 16)      # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def coordinator_ready(pair: Pair, key: str, key_type: int = 0) -> None:
    """Both brokers have the coordinator of key loaded (its internal topic is created on the first ask)."""
    from kafka_compat.protocol.messages import describe_groups, describe_transactions, find_coordinator

    for side in ("ours", "kafka"):
        r = until(lambda: pair.client(side).call(10, 3, find_coordinator.FindCoordinatorRequest(
            key=key, key_type=key_type)), lambda r: r.error_code == 0)
        assert r.error_code == 0, (side, r)
        if key_type == 0:       # Kafka 4 loads the group shard after it answers FindCoordinator
            d = until(lambda: pair.client(side).call(15, 5, describe_groups.DescribeGroupsRequest(
                groups=[key], include_authorized_operations=False)), lambda d: d.groups[0].error_code not in LOADING)
            assert d.groups[0].error_code not in LOADING, (side, d)
        else:                   # and its transaction state partition after that
            t = until(lambda: pair.client(side).call(65, 0, describe_transactions.DescribeTransactionsRequest(
                transactional_ids=[key])), lambda t: t.transaction_states[0].error_code not in LOADING)
            assert t.transaction_states[0].error_code not in LOADING, (side, t)


def table(report: dict) -> str:
    """The match rate per API as a Markdown table (the conformance table of docs/compatibility.md)."""
    rows = ["| API | fields compared | identical | allowed | known | unexplained | match |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    total = Counts()
    for api in sorted(report):
        r = report[api]
        rate = r["identical"] / r["compared"] if r["compared"] else 1.0
        rows.append(f"| {api} | {r['compared']} | {r['identical']} | {r['allowed']} | {r['known']} | "
                    f"{r['unexplained']} | {rate:.1%} |")
        for k in ("compared", "identical", "allowed", "known", "unexplained"):
            setattr(total, k, getattr(total, k) + r[k])
    rate = total.identical / total.compared if total.compared else 1.0
    rows.append(f"| **all** | {total.compared} | {total.identical} | {total.allowed} | {total.known} | "
                f"{total.unexplained} | {rate:.1%} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(json.loads(REPORT.read_text())))
