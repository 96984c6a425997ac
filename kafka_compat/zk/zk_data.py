"""Kafka's ZooKeeper layout (ZkData): every znode path a ZooKeeper-mode cluster uses and the exact
bytes stored in it.

Real Kafka brokers, Kafka's tools and test harnesses (ducktape reads /controller and the partition
state znodes directly) share these znodes with us, so each encoder writes what Kafka 3.8 writes
(compact JSON, the same keys and value types: timestamps and producer-id bounds are strings,
/cluster/id's version is the string "1") and each decoder reads every version Kafka reads,
ignoring keys it does not know. Malformed data raises ZkDataError naming what was being read.
Pure code: no I/O.
"""
from __future__ import annotations

import base64
import enum
import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..configdef import ConfigError
from ..endpoint import EndPoint, SecurityProtocol, connection_string
from ..endpoint import parse_endpoint as _parse_endpoint
from ..leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState

# ZooKeeper's "any version" for conditional writes, and Kafka's marker for "no such znode".
MATCH_ANY_VERSION = -1
UNKNOWN_VERSION = -2

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class ZkDataError(ValueError):
    """A znode held data that Kafka's decoder for it would refuse."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int


# -- paths -------------------------------------------------------------------------------------

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
FEATURE_PATH = "/feature"
CONSUMERS_PATH = "/consumers"                      # the pre-0.9 consumer's; still ensured at startup
DELEGATION_TOKEN_PATH = "/delegation_token"
MIGRATION_PATH = "/migration"
LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"

# /config/<type>/<name>: the entity types Kafka's ConfigType.ALL lists
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips", "groups", "client-metrics")
# the config entity types whose /config/<type> a broker creates at startup (Kafka 3.9's PersistentZkPaths);
# `groups` (KIP-848/932 group configs) and `client-metrics` (KIP-714 subscriptions), which Kafka 4 keeps in
# KRaft's metadata, are created at their first write
PERSISTENT_CONFIG_TYPES = CONFIG_TYPES[:5]

# What a broker creates (if missing) when it starts: Kafka's ZkData.PersistentZkPaths.
PERSISTENT_ZK_PATHS = (CONSUMERS_PATH, BROKER_IDS_PATH, TOPICS_PATH, CONFIG_CHANGES_PATH, DELETE_TOPICS_PATH,
                       BROKER_SEQUENCE_ID_PATH, ISR_CHANGE_NOTIFICATION_PATH, PRODUCER_ID_BLOCK_PATH,
                       LOG_DIR_EVENT_NOTIFICATION_PATH) + tuple(f"{CONFIG_PATH}/{t}" for t in PERSISTENT_CONFIG_TYPES)

# Every top-level znode Kafka owns (ZkData.SecureRootPaths): what zookeeper-security-migration touches.
SECURE_ROOT_PATHS = (ADMIN_PATH, BROKERS_PATH, CLUSTER_PATH, CONFIG_PATH, CONTROLLER_PATH, CONTROLLER_EPOCH_PATH,
                     ISR_CHANGE_NOTIFICATION_PATH, PRODUCER_ID_BLOCK_PATH, LOG_DIR_EVENT_NOTIFICATION_PATH,
                     DELEGATION_TOKEN_PATH, EXTENDED_ACL_PATH, MIGRATION_PATH, FEATURE_PATH, LITERAL_ACL_PATH,
                     LITERAL_ACL_CHANGES_PATH, f"{EXTENDED_ACL_PATH}/prefixed", EXTENDED_ACL_CHANGES_PATH)


def _segment(name: str, what: str) -> str:
    """One path component: a name that would climb or split the path is refused here, whatever
    validated it before."""
    if not isinstance(name, str) or not name or "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError(f"invalid {what} for a znode path: {name!r}")
    return name


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{_segment(topic, 'topic')}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{int(partition)}"


def topic_partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{_segment(entity_type, 'config entity type')}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """`entity_name` is Kafka's sanitized name; a user's client-id config is `<user>/clients/<client-id>`."""
    for part in entity_name.split("/"):
        _segment(part, "config entity name")
    return f"{config_entity_type_path(entity_type)}/{entity_name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{_segment(topic, 'topic')}"


def sequence_number(child_name: str, prefix: str) -> str:
    """The 10-digit counter ZooKeeper appended to a sequential znode's name."""
    return child_name[child_name.rfind(prefix) + len(prefix):]


# -- JSON ------------------------------------------------------------------------------------


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, as Kafka's Jackson writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _loads(data: bytes | None, what: str) -> Any:
    if data is None:
        raise ZkDataError(f"{what}: the znode holds no data")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ZkDataError(f"{what}: not valid JSON ({e}): {bytes(data[:200])!r}") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Obj:
    """A decoded JSON object read field by field, each miss or wrong type a ZkDataError naming the field."""

    _REQUIRED = object()

    def __init__(self, value: Any, what: str):
        if not isinstance(value, dict):
            raise ZkDataError(f"{what}: expected a JSON object, got {type(value).__name__}")
        self.value, self.what = value, what

    def _get(self, key: str, default: Any) -> Any:
        if key in self.value:
            return self.value[key]
        if default is self._REQUIRED:
            raise ZkDataError(f"{self.what}: missing '{key}'")
        return default

    def _bad(self, key: str, expected: str) -> ZkDataError:
        return ZkDataError(f"{self.what}: '{key}' must be {expected}, got {self.value.get(key)!r}")

    def integer(self, key: str, default: Any = _REQUIRED, lo: int = INT32_MIN, hi: int = INT32_MAX) -> Any:
        v = self._get(key, default)
        if v is default and default is not self._REQUIRED:
            return v
        if not _is_int(v) or not lo <= v <= hi:
            raise self._bad(key, f"an integer in [{lo}, {hi}]")
        return v

    def string(self, key: str, default: Any = _REQUIRED, nullable: bool = False) -> Any:
        v = self._get(key, default)
        if (v is default and default is not self._REQUIRED) or (v is None and nullable):
            return v
        if not isinstance(v, str):
            raise self._bad(key, "a string")
        return v

    def ints(self, key: str, default: Any = _REQUIRED) -> Any:
        v = self._get(key, default)
        if v is default and default is not self._REQUIRED:
            return v
        return _int_list(v, f"{self.what}: '{key}'")

    def object(self, key: str, default: Any = _REQUIRED) -> Any:
        v = self._get(key, default)
        if v is default and default is not self._REQUIRED:
            return v
        return _Obj(v, f"{self.what}: '{key}'")

    def array(self, key: str) -> list:
        v = self._get(key, self._REQUIRED)
        if not isinstance(v, list):
            raise self._bad(key, "a JSON array")
        return v


def _int_list(v: Any, what: str) -> list[int]:
    if not isinstance(v, list) or not all(_is_int(x) and INT32_MIN <= x <= INT32_MAX for x in v):
        raise ZkDataError(f"{what} must be a list of integers, got {v!r}")
    return list(v)


def _number_string(v: str, what: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """A decimal number held in a JSON string (Kafka's timestamps and producer-id bounds): Java's
    Long.parseLong, so no spaces, underscores or a '+' that int() would let through."""
    if not re.fullmatch(r"-?[0-9]{1,20}", v) or not lo <= int(v) <= hi:
        raise ZkDataError(f"{what}: {v!r} is not a number in [{lo}, {hi}]")
    return int(v)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- topic ids and cluster ids: Kafka's Uuid ---------------------------------------------------


def uuid_to_string(uuid_bytes: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding, 22 characters."""
    if len(uuid_bytes) != 16:
        raise ValueError(f"a Kafka Uuid has 16 bytes, not {len(uuid_bytes)}")
    return base64.urlsafe_b64encode(uuid_bytes).decode().rstrip("=")


def uuid_from_string(text: str, what: str = "uuid") -> bytes:
    if not isinstance(text, str) or len(text) > 24:
        raise ZkDataError(f"{what}: {text!r} is not a base64 Kafka Uuid")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise ZkDataError(f"{what}: {text!r} is not a base64 Kafka Uuid") from None
    if len(raw) != 16:
        raise ZkDataError(f"{what}: {text!r} decodes to {len(raw)} bytes, not 16")
    return raw


def random_uuid() -> bytes:
    """Kafka's Uuid.randomUuid: a version-4 UUID that is neither of the reserved ones (all zeros,
    the metadata topic's 0...01) and whose string form does not start with '-' (it would read as an option)."""
    while True:
        raw = bytearray(os.urandom(16))
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        if bytes(raw) not in (bytes(16), bytes(15) + b"\x01") and not uuid_to_string(bytes(raw)).startswith("-"):
            return bytes(raw)


# -- /controller and /controller_epoch -----------------------------------------------------------


class ControllerRegistration(NamedTuple):
    broker_id: int
    kraft_controller_epoch: int | None       # None in a version-1 znode (Kafka before 3.4)


def encode_controller(broker_id: int, timestamp_ms: int | None = None, kraft_controller_epoch: int = -1) -> bytes:
    """Version 2 (KIP-866, Kafka 3.4+): a ZooKeeper-mode controller writes kraftControllerEpoch -1."""
    return dumps({"version": 2, "brokerid": broker_id,
                  "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms),
                  "kraftControllerEpoch": kraft_controller_epoch})


def decode_controller(data: bytes | None) -> ControllerRegistration:
    obj = _Obj(_loads(data, CONTROLLER_PATH), CONTROLLER_PATH)
    return ControllerRegistration(obj.integer("brokerid"), obj.integer("kraftControllerEpoch", None))


def encode_controller_epoch(epoch: int) -> bytes:
    """Plain decimal text, not JSON."""
    return str(int(epoch)).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    text = (data or b"").decode("ascii", errors="replace")
    if not re.fullmatch(r"-?[0-9]{1,10}", text) or not INT32_MIN <= int(text) <= INT32_MAX:
        raise ZkDataError(f"{CONTROLLER_EPOCH_PATH}: expected a decimal integer, got {bytes(data or b'')[:50]!r}")
    return int(text)


# -- /brokers/ids/<id> -------------------------------------------------------------------------

def parse_endpoint(text: str, protocol_map: Mapping[str, str] | None, what: str = "endpoint") -> EndPoint:
    """An endpoint string of a registration. Without a listener-to-protocol map (registrations before
    version 4) the listener name must itself be a security protocol."""
    protocols = protocol_map if protocol_map is not None else {p.value: p.value for p in SecurityProtocol}
    try:
        return _parse_endpoint(text, {k: v for k, v in protocols.items() if v in SecurityProtocol.__members__},
                               what)
    except ConfigError as e:
        raise ZkDataError(f"{what}: {e}") from None


class VersionRange(NamedTuple):
    min_version: int
    max_version: int


@dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration: what /brokers/ids/<id> holds. `version` is the JSON version
    (5 from IBP 2.7: with features); `features` are the broker's *supported* version ranges."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    features: Mapping[str, VersionRange] = field(default_factory=dict)
    jmx_port: int = -1
    version: int = 5
    timestamp_ms: int | None = None          # as read back; encode() stamps the current time

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoints", tuple(self.endpoints))

    @property
    def path(self) -> str:
        return broker_id_path(self.id)

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    def encode(self, timestamp_ms: int | None = None) -> bytes:
        # The top-level host/port serve clients that predate listeners: the first PLAINTEXT endpoint, if any.
        plain = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        out: dict[str, Any] = {
            "version": self.version,
            "host": plain.host if plain else None,
            "port": plain.port if plain else -1,
            "jmx_port": self.jmx_port,
            "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms),
            "endpoints": [connection_string(e) for e in self.endpoints],
        }
        if self.rack is not None and self.version >= 3:
            out["rack"] = self.rack
        if self.version >= 4:
            out["listener_security_protocol_map"] = {e.listener_name: e.security_protocol for e in self.endpoints}
        if self.version >= 5:
            out["features"] = {name: {"min_version": r[0], "max_version": r[1]} for name, r in self.features.items()}
        return dumps(out)

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None) -> "BrokerInfo":
        what = broker_id_path(broker_id)
        obj = _Obj(_loads(data, what), what)
        version = obj.integer("version")
        jmx_port = obj.integer("jmx_port")
        if version < 1:
            raise ZkDataError(f"{what}: unsupported version {version} of a broker registration")
        if version == 1:
            endpoints = [EndPoint("PLAINTEXT", obj.string("host", nullable=True), obj.integer("port"),
                                  SecurityProtocol.PLAINTEXT)]
        else:
            pmap = obj.object("listener_security_protocol_map", None)
            protocols = None if pmap is None else {k: pmap.string(k) for k in pmap.value}
            endpoints = [parse_endpoint(s, protocols, what) for s in obj.array("endpoints")]
        features = {}
        fobj = obj.object("features", None)
        if fobj is not None:
            for name in fobj.value:
                r = fobj.object(name)
                features[name] = VersionRange(r.integer("min_version", lo=-32768, hi=32767),
                                              r.integer("max_version", lo=-32768, hi=32767))
        ts = obj.string("timestamp", None, nullable=True)
        return cls(broker_id, tuple(endpoints), obj.string("rack", None, nullable=True), features, jmx_port, version,
                   None if ts is None else _number_string(ts, f"{what}: 'timestamp'"))


# -- /brokers/topics/<t> and partition state ---------------------------------------------------


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas in preference order (the first is the preferred leader), and the
    replicas a reassignment is adding and removing (both already included in `replicas`)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("replicas", "adding_replicas", "removing_replicas"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where a reassignment is going: replicas minus those being removed."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: Iterable[int]) -> "ReplicaAssignment":
        """The state of a reassignment from this assignment's origin replicas to `target`: every replica of
        both (target first, in its order), adding what the origin lacks and removing what the target lacks."""
        target = tuple(target)
        origin = self.origin_replicas
        full = tuple(dict.fromkeys(target + origin))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))

    def remove_replica(self, replica: int) -> "ReplicaAssignment":
        return ReplicaAssignment(tuple(r for r in self.replicas if r != replica),
                                 tuple(r for r in self.adding_replicas if r != replica),
                                 tuple(r for r in self.removing_replicas if r != replica))


@dataclass(frozen=True)
class TopicAssignment:
    topic_id: bytes | None                   # 16 bytes; None for topics created before Kafka 2.8
    partitions: Mapping[int, ReplicaAssignment]


def encode_topic(topic_id: bytes | None, partitions: Mapping[int, ReplicaAssignment | Iterable[int]]) -> bytes:
    """Version 3 (Kafka 2.8+). A plain replica list is taken as a partition that is not being reassigned;
    topic_id is written only when known, as Kafka does."""
    assignments = {p: a if isinstance(a, ReplicaAssignment) else ReplicaAssignment(tuple(a))
                   for p, a in partitions.items()}
    out: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(a.replicas) for p, a in sorted(assignments.items())},
        "adding_replicas": {str(p): list(a.adding_replicas)
                            for p, a in sorted(assignments.items()) if a.adding_replicas},
        "removing_replicas": {str(p): list(a.removing_replicas)
                              for p, a in sorted(assignments.items()) if a.removing_replicas},
    }
    if topic_id is not None:
        out["topic_id"] = uuid_to_string(topic_id)
    return dumps(out)


def _partition_id(key: str, what: str) -> int:
    if not re.fullmatch(r"-?[0-9]{1,10}", key) or not INT32_MIN <= int(key) <= INT32_MAX:
        raise ZkDataError(f"{what}: partition key {key!r} is not an integer")
    return int(key)


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    """Versions 1 (partitions only), 2 (+ adding/removing replicas) and 3 (+ topic_id). A znode
    without data reads as a topic with no partitions, as in Kafka."""
    what = topic_path(topic)
    if data is None:
        return TopicAssignment(None, {})
    obj = _Obj(_loads(data, what), what)
    topic_id = obj.string("topic_id", None)
    parts = obj.object("partitions", None)
    adding = obj.object("adding_replicas", None)
    removing = obj.object("removing_replicas", None)
    partitions = {}
    for key in (parts.value if parts else ()):
        partitions[_partition_id(key, what)] = ReplicaAssignment(
            tuple(parts.ints(key)),
            tuple(adding.ints(key, [])) if adding else (),
            tuple(removing.ints(key, [])) if removing else ())
    return TopicAssignment(None if topic_id is None else uuid_from_string(topic_id, f"{what}: 'topic_id'"),
                           partitions)


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """`leader_recovery_state` appears only while RECOVERING, so brokers before 3.2 can still read the znode."""
    lai = state.leader_and_isr
    out: dict[str, Any] = {"version": 1, "leader": lai.leader, "leader_epoch": lai.leader_epoch,
                           "controller_epoch": state.controller_epoch, "isr": list(lai.isr)}
    if lai.leader_recovery_state != LeaderRecoveryState.RECOVERED:
        out["leader_recovery_state"] = int(lai.leader_recovery_state)
    return dumps(out)


def decode_partition_state(data: bytes | None, zk_version: int,
                           what: str = "partition state") -> LeaderIsrAndControllerEpoch:
    """`zk_version` (the znode's stat version) becomes the partition epoch."""
    obj = _Obj(_loads(data, what), what)
    recovery = obj.integer("leader_recovery_state", 0, lo=-128, hi=127)
    try:
        recovery = LeaderRecoveryState(recovery)
    except ValueError:
        raise ZkDataError(f"{what}: unknown leader_recovery_state {recovery}") from None
    lai = LeaderAndIsr(obj.integer("leader"), obj.integer("leader_epoch"), tuple(obj.ints("isr")), recovery, zk_version)
    return LeaderIsrAndControllerEpoch(lai, obj.integer("controller_epoch"))


# -- /cluster/id ---------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return dumps({"version": "1", "id": cluster_id})       # the version really is a string here


def decode_cluster_id(data: bytes | None) -> str:
    return _Obj(_loads(data, CLUSTER_ID_PATH), CLUSTER_ID_PATH).string("id")


# -- /config -------------------------------------------------------------------------------------


def encode_config(config: Mapping[str, str]) -> bytes:
    return dumps({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})


def decode_config(data: bytes | None, what: str = "config") -> dict[str, str]:
    """Kafka reads a missing or non-object "config" as no overrides; each value must be a string."""
    if not data:
        return {}
    value = _loads(data, what)
    config = value.get("config") if isinstance(value, dict) else None
    if not isinstance(config, dict):
        return {}
    obj = _Obj(config, f"{what}: 'config'")
    return {k: obj.string(k) for k in config}


def encode_config_change(entity_path: str) -> bytes:
    """`entity_path` is `<type>/<sanitized name>`, e.g. `topics/foo`."""
    return dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None) -> tuple[str, str]:
    """(entity type, sanitized entity name) from a version 1 or 2 notification."""
    what = CONFIG_CHANGES_PATH
    obj = _Obj(_loads(data, what), what)
    version = obj.integer("version")
    if version == 1:
        entity_type = obj.string("entity_type", None, nullable=True)
        if entity_type not in ("topics", "clients"):
            raise ZkDataError(f"{what}: a version 1 notification needs entity_type 'topics' or 'clients'")
        name = obj.string("entity_name", None, nullable=True)
        if name is None:
            raise ZkDataError(f"{what}: a version 1 notification needs entity_name")
        return entity_type, name
    if version == 2:
        entity_path = obj.string("entity_path", None, nullable=True) or ""
        entity_type, sep, name = entity_path.partition("/")
        if not sep or entity_type not in CONFIG_TYPES:
            raise ZkDataError(f"{what}: entity_path must start with one of {', '.join(CONFIG_TYPES)} and '/',"
                              f" got {entity_path!r}")
        return entity_type, name
    raise ZkDataError(f"{what}: unsupported notification version {version}")


# -- /admin and notifications --------------------------------------------------------------------


def _partitions_list(obj: _Obj, what: str) -> list[_Obj]:
    return [_Obj(p, f"{what}: partition") for p in obj.array("partitions")]


def encode_partitions_notification(partitions: Iterable[TopicPartition]) -> bytes:
    """/isr_change_notification/isr_change_<seq> and /admin/preferred_replica_election."""
    return dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_partitions_notification(data: bytes | None, what: str = ISR_CHANGE_NOTIFICATION_PATH) -> set[TopicPartition]:
    obj = _Obj(_loads(data, what), what)
    return {TopicPartition(p.string("topic"), p.integer("partition")) for p in _partitions_list(obj, what)}


def encode_reassignment(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    """/admin/reassign_partitions (deprecated since 2.4, still read by the controller)."""
    return dumps({"version": 1, "partitions": [{"topic": tp[0], "partition": tp[1], "replicas": list(r)}
                                               for tp, r in reassignment.items()]})


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, list[int]]:
    what = REASSIGN_PARTITIONS_PATH
    obj = _Obj(_loads(data, what), what)
    return {TopicPartition(p.string("topic"), p.integer("partition")): p.ints("replicas")
            for p in _partitions_list(obj, what)}


LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    return dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int:
    return _Obj(_loads(data, LOG_DIR_EVENT_NOTIFICATION_PATH), LOG_DIR_EVENT_NOTIFICATION_PATH).integer("broker")


# -- /latest_producer_id_block ------------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdsBlock(NamedTuple):
    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def encode_producer_id_block(block: ProducerIdsBlock) -> bytes:
    return dumps({"version": 1, "broker": block.assigned_broker_id,
                  "block_start": str(block.first_producer_id), "block_end": str(block.last_producer_id)})


def decode_producer_id_block(data: bytes | None) -> ProducerIdsBlock:
    what = PRODUCER_ID_BLOCK_PATH
    obj = _Obj(_loads(data, what), what)
    start = _number_string(obj.string("block_start"), f"{what}: 'block_start'")
    end = _number_string(obj.string("block_end"), f"{what}: 'block_end'")
    if not 0 < end - start + 1 <= INT32_MAX:
        raise ZkDataError(f"{what}: block {start}..{end} is empty or too large")
    return ProducerIdsBlock(obj.integer("broker"), start, end - start + 1)


# -- /feature -------------------------------------------------------------------------------------


class FeatureZNodeStatus(enum.IntEnum):
    DISABLED = 0
    ENABLED = 1


@dataclass(frozen=True)
class FeatureZNode:
    """Cluster-wide finalized feature levels (KIP-584). Version 2 (IBP 3.3+) dropped min_version_level."""

    version: int
    status: FeatureZNodeStatus
    features: Mapping[str, int]


def encode_feature(node: FeatureZNode) -> bytes:
    if node.version == 1:
        features = {f: {"max_version_level": v, "min_version_level": v} for f, v in node.features.items()}
    else:
        features = {f: {"max_version_level": v} for f, v in node.features.items()}
    return dumps({"version": node.version, "status": int(node.status), "features": features})


def decode_feature(data: bytes | None) -> FeatureZNode:
    what = FEATURE_PATH
    obj = _Obj(_loads(data, what), what)
    version = obj.integer("version")
    if version not in (1, 2):
        raise ZkDataError(f"{what}: unsupported version {version}")
    status = obj.integer("status", None)
    if status not in (0, 1):
        raise ZkDataError(f"{what}: status must be 0 or 1, got {status!r}")
    fobj = obj.object("features")
    features = {}
    for name in fobj.value:
        levels = fobj.object(name)
        top = levels.integer("max_version_level", lo=-32768, hi=32767)
        if version == 1:
            low = levels.integer("min_version_level", lo=-32768, hi=32767)
            if low < 1 or top < low:
                raise ZkDataError(f"{what}: feature {name} has levels {low}..{top}")
        if top < 1:
            raise ZkDataError(f"{what}: feature {name} has max_version_level {top} < 1")
        features[name] = top
    return FeatureZNode(version, FeatureZNodeStatus(status), features)


# -- ACLs ------------------------------------------------------------------------------------------

# Names as Kafka stores them (PascalCase); lookups also take the enum spelling (e.g. DESCRIBE_CONFIGS).
RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
ACL_OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
                  "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens")
ACL_PERMISSION_TYPES = ("Deny", "Allow")


def _pascal_name(name: str, known: Iterable[str]) -> str:
    """Kafka's SecurityUtils lookup: the stored PascalCase form, or its upper-case/enum spelling; else Unknown."""
    flat = name.replace("_", "").upper()
    return next((k for k in known if k == name or k.upper() == flat), "Unknown")


def _enum_name(pascal: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", pascal).upper()


class AclEntry(NamedTuple):
    principal: str            # "User:alice"
    permission_type: str      # "Allow" / "Deny"
    operation: str            # "Read", "DescribeConfigs", ...
    host: str                 # "*" or an address


def acl_path(resource_type: str, resource_name: str | None = None, pattern_type: str = "LITERAL") -> str:
    """/kafka-acl/<Type>[/<name>] for literal patterns, /kafka-acl-extended/prefixed/<Type>[/<name>] for prefixed."""
    rtype = _pascal_name(resource_type, RESOURCE_TYPES)
    if rtype == "Unknown":
        raise ValueError(f"unknown resource type {resource_type!r}")
    pattern = pattern_type.upper()
    if pattern == "LITERAL":
        base = f"{LITERAL_ACL_PATH}/{rtype}"
    elif pattern == "PREFIXED":
        base = f"{EXTENDED_ACL_PATH}/prefixed/{rtype}"
    else:
        raise ValueError(f"ACLs are stored for LITERAL and PREFIXED patterns, not {pattern_type!r}")
    return base if resource_name is None else f"{base}/{_segment(resource_name, 'resource name')}"


def acl_zk_paths() -> list[str]:
    """What a ZooKeeper authorizer creates at startup: each store, one child per resource type, the change logs."""
    paths = []
    for pattern in ("LITERAL", "PREFIXED"):
        paths.append(LITERAL_ACL_PATH if pattern == "LITERAL" else f"{EXTENDED_ACL_PATH}/prefixed")
        paths += [acl_path(t, None, pattern) for t in RESOURCE_TYPES]
    return paths + [LITERAL_ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH]


def encode_acls(acls: Iterable[AclEntry]) -> bytes:
    return dumps({"version": 1, "acls": [
        {"principal": a.principal, "permissionType": _pascal_name(a.permission_type, ACL_PERMISSION_TYPES),
         "operation": _pascal_name(a.operation, ACL_OPERATIONS), "host": a.host} for a in acls]})


def decode_acls(data: bytes | None, what: str = "acls") -> set[AclEntry]:
    if not data:
        return set()
    obj = _Obj(_loads(data, what), what)
    if obj.integer("version") != 1:
        raise ZkDataError(f"{what}: unsupported ACL version {obj.value['version']}")
    out = set()
    for item in obj.array("acls"):
        a = _Obj(item, f"{what}: acl")
        principal = a.string("principal")
        if ":" not in principal:
            raise ZkDataError(f"{what}: principal {principal!r} is not in the form Type:name")
        out.add(AclEntry(principal, _pascal_name(a.string("permissionType"), ACL_PERMISSION_TYPES),
                         _pascal_name(a.string("operation"), ACL_OPERATIONS), a.string("host")))
    return out


def encode_acl_change(resource_type: str, resource_name: str, pattern_type: str = "LITERAL") -> bytes:
    """A literal pattern's change is the text `TOPIC:foo` (Kafka 3.x writes the enum name); any other
    pattern's is JSON with enum names."""
    rtype = _enum_name(_pascal_name(resource_type, RESOURCE_TYPES))
    if pattern_type.upper() == "LITERAL":
        return f"{rtype}:{resource_name}".encode()
    return dumps({"version": 1, "resourceType": rtype, "name": resource_name, "patternType": pattern_type.upper()})


def decode_acl_change(data: bytes | None, extended: bool) -> tuple[str, str, str]:
    """(resource type as PascalCase, resource name, pattern type) from /kafka-acl-changes (extended=False)
    or /kafka-acl-extended-changes (extended=True)."""
    if not extended:
        text = (data or b"").decode(errors="replace")
        rtype, sep, name = text.partition(":")
        if not sep:
            raise ZkDataError(f"{LITERAL_ACL_CHANGES_PATH}: expected ResourceType:ResourceName, got {text!r}")
        return _pascal_name(rtype, RESOURCE_TYPES), name, "LITERAL"
    obj = _Obj(_loads(data, EXTENDED_ACL_CHANGES_PATH), EXTENDED_ACL_CHANGES_PATH)
    if obj.integer("version") > 1:
        raise ZkDataError(f"{EXTENDED_ACL_CHANGES_PATH}: unsupported version {obj.value['version']}")
    rtype = _pascal_name(obj.string("resourceType"), RESOURCE_TYPES)
    return rtype, obj.string("name"), obj.string("patternType").upper()
