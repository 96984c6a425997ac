"""KafkaZkClient: the ZooKeeper operations of a ZooKeeper-mode Kafka broker and controller, over kazoo.

Each method does what Kafka's KafkaZkClient method of the same name does, with the same fencing:

- every write the controller makes is one ZooKeeper multi of `check(/controller_epoch, epoch_zk_version)`
  and the write, so a controller that has been replaced cannot change anything (a failed check raises
  ControllerMovedError); pass `expected_controller_epoch_zk_version=MATCH_ANY_VERSION` (-1) for an
  unfenced write, as Kafka's admin paths do;
- the controller is elected with one multi that creates the ephemeral /controller and bumps
  /controller_epoch at the version just read;
- a broker registers with a checked ephemeral create: a NODEEXISTS for a znode our own session owns is the
  earlier try of the same registration and counts as success. Its czxid is the broker epoch.

Threading: every method blocks on ZooKeeper round trips. Call them from a worker thread (Kafka's
controller event thread, or a thread pool), never from the asyncio loop and never from a kazoo callback
(state listeners and watch callbacks run on kazoo's threads and must only hand the event over: a queue
put or `loop.call_soon_threadsafe`). Requests are pipelined where a method touches many znodes, and one
lost to a connection loss is sent again once the session is connected again (Kafka's
retryRequestsUntilConnected); a session expiry is not retried: it raises SessionExpiredError.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
    ZookeeperError,
)

from ..leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from . import zk_data as zd
from .zk_data import MATCH_ANY_VERSION, UNKNOWN_VERSION, TopicPartition

__all__ = ["KafkaZkClient", "ControllerMovedError", "BrokerRegistrationError", "ZkRequestTimeoutError",
           "UpdateLeaderAndIsrResult", "BrokerAndEpoch", "ZkWatch", "ZkState", "INITIAL_CONTROLLER_EPOCH",
           "BadVersionError", "NodeExistsError", "NoNodeError", "NotEmptyError", "SessionExpiredError",
           "ConnectionClosedError"]

log = logging.getLogger(__name__)

ZkState = KazooState              # the listener's states: "CONNECTED", "SUSPENDED", "LOST"
INITIAL_CONTROLLER_EPOCH = 0      # /controller_epoch as first created, so the first controller's epoch is 1
DEFAULT_SESSION_TIMEOUT_MS = 18000


class ControllerMovedError(Exception):
    """Another broker is (or became) the controller: our election lost, or a fenced write found
    /controller_epoch at another version. The controller must resign."""


class BrokerRegistrationError(NodeExistsError):
    """/brokers/ids/<id> exists and belongs to another session: another broker uses this id."""


class ZkRequestTimeoutError(Exception):
    """No answer within the client's request timeout (ZooKeeper unreachable). A write may still be
    applied later, when the connection comes back: as after a connection loss, re-read before retrying."""


class UpdateLeaderAndIsrResult(NamedTuple):
    """`finished`: the written state (with its new partition epoch) or the error of each partition;
    `partitions_to_retry`: those whose state znode had moved on (BADVERSION), to re-read and retry."""

    finished: dict[TopicPartition, LeaderAndIsr | Exception]
    partitions_to_retry: list[TopicPartition]


class BrokerAndEpoch(NamedTuple):
    broker: zd.BrokerInfo
    epoch: int                    # the czxid of its registration


class ZkWatch:
    """A registered data or children watch; cancel() stops further callbacks."""

    def __init__(self, path: str):
        self.path = path
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


# An operation for _write: ("create", path, data, ephemeral, sequence) | ("set", path, data, version)
# | ("delete", path, version).
_Op = tuple


def _split_chroot(connect_string: str) -> tuple[str, str]:
    i = connect_string.find("/")
    return (connect_string, "") if i < 0 else (connect_string[:i], connect_string[i:].rstrip("/"))


class KafkaZkClient:
    def __init__(self, connect_string: str, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 connection_timeout_ms: int | None = None, *, create_chroot: bool = True,
                 request_timeout_ms: int | None = None):
        """`connect_string` is zookeeper.connect: `host:port[,host:port...][/chroot]`. The chroot is
        created when missing (as Kafka's broker does) unless create_chroot is False. The connection
        timeout defaults to the session timeout, as zookeeper.connection.timeout.ms does.
        `request_timeout_ms` bounds how long a request waits for an answer, connection losses
        included; None waits as long as the session lives, as Kafka does."""
        self.connect_string = connect_string
        self.session_timeout_ms = int(session_timeout_ms)
        self.connection_timeout_ms = int(connection_timeout_ms or session_timeout_ms)
        self.create_chroot = create_chroot
        self.request_timeout_ms = request_timeout_ms
        self._zk: KazooClient | None = None
        self._connected = threading.Event()
        self._closed = False
        self._listeners: list[Callable[[str], Any]] = []
        self._registration_session_id: int | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "KafkaZkClient":
        """From broker configs: zookeeper.connect, zookeeper.session.timeout.ms, zookeeper.connection.timeout.ms."""
        connect = config.get("zookeeper.connect")
        if not connect:
            raise ValueError("zookeeper.connect is not set")
        session = config.get("zookeeper.session.timeout.ms") or DEFAULT_SESSION_TIMEOUT_MS
        connection = config.get("zookeeper.connection.timeout.ms")
        return cls(str(connect), int(session), int(connection) if connection else None)

    # -- connection ---------------------------------------------------------------------------

    def start(self) -> "KafkaZkClient":
        hosts, chroot = _split_chroot(self.connect_string)
        if chroot and self.create_chroot:
            bootstrap = self._new_kazoo(hosts)
            try:
                bootstrap.start(timeout=self.connection_timeout_ms / 1000)
                if not bootstrap.exists(chroot):
                    self._create_parents(bootstrap, chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        self._zk = self._new_kazoo(self.connect_string)
        self._zk.add_listener(self._on_state)
        self._zk.start(timeout=self.connection_timeout_ms / 1000)
        self._connected.set()
        return self

    def _new_kazoo(self, hosts: str) -> KazooClient:
        # reconnect forever, at most a second apart (kazoo's default backoff grows to an hour)
        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000,
                           connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0})

    @staticmethod
    def _create_parents(zk: KazooClient, path: str) -> None:
        prefix = ""
        for part in path.strip("/").split("/"):
            prefix += "/" + part
            try:
                zk.create(prefix, None)
            except NodeExistsError:
                pass

    def close(self) -> None:
        self._closed = True
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    def __enter__(self) -> "KafkaZkClient":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def zk(self) -> KazooClient:
        """The kazoo client, for what this class does not wrap (tests, tools)."""
        if self._zk is None:
            raise RuntimeError("KafkaZkClient is not started")
        return self._zk

    @property
    def session_id(self) -> int | None:
        cid = self._zk.client_id if self._zk is not None else None
        return cid[0] if cid else None

    @property
    def connected(self) -> bool:
        return self._zk is not None and self._zk.connected

    def add_state_listener(self, listener: Callable[[str], Any]) -> None:
        """`listener(state)` with state "CONNECTED", "SUSPENDED" (connection lost, the session may live:
        pause controller work) or "LOST" (the session expired: our ephemerals are gone; kazoo opens a new
        session and reports CONNECTED again, after which the broker re-registers and re-runs the election,
        as Kafka's RegisterBrokerAndReelect). Runs on kazoo's connection thread: it must not block or
        call ZooKeeper."""
        self._listeners.append(listener)

    def remove_state_listener(self, listener: Callable[[str], Any]) -> None:
        self._listeners.remove(listener)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("ZooKeeper state listener failed on %s", state)

    def _await_connection(self, deadline: float | None) -> None:
        while not self._connected.wait(0.1):
            if self._closed:
                raise ConnectionClosedError("KafkaZkClient is closed")
            if deadline is not None and time.monotonic() > deadline:
                raise self._timed_out()

    def _timed_out(self) -> ZkRequestTimeoutError:
        return ZkRequestTimeoutError(f"no answer from ZooKeeper within {self.request_timeout_ms} ms"
                                     " (a write may still be applied)")

    # -- request plumbing ----------------------------------------------------------------------

    def _run(self, starts: Sequence[Callable[[], Any]]) -> list[Any]:
        """Start every request, then collect each result or ZooKeeper error; the ones a connection loss
        swallowed are sent again when connected. A session expiry or a closed client raises, and so
        does the request timeout, if one is set."""
        results: list[Any] = [None] * len(starts)
        todo = list(range(len(starts)))
        deadline = None if self.request_timeout_ms is None else time.monotonic() + self.request_timeout_ms / 1000
        while todo:
            started = [(i, starts[i]()) for i in todo]
            todo = []
            for i, pending in started:
                try:
                    # a request made while disconnected waits in kazoo's queue for the connection
                    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                    results[i] = pending.get(timeout=wait)
                except self.zk.handler.timeout_exception:
                    raise self._timed_out() from None
                except (ConnectionLoss, OperationTimeoutError):
                    todo.append(i)
                except SessionExpiredError:
                    raise
                except ZookeeperError as e:
                    results[i] = e
            if todo:
                self._await_connection(deadline)
        return results

    def _one(self, start: Callable[[], Any]) -> Any:
        result = self._run([start])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def _start_op(self, op: _Op, expected_controller_epoch_zk_version: int) -> Callable[[], Any]:
        zk = self.zk
        kind, path = op[0], op[1]
        if expected_controller_epoch_zk_version == MATCH_ANY_VERSION:
            if kind == "create":
                return lambda: zk.create_async(path, op[2], ephemeral=op[3], sequence=op[4])
            if kind == "set":
                return lambda: zk.set_async(path, op[2], op[3])
            return lambda: zk.delete_async(path, op[2])
        if expected_controller_epoch_zk_version < 0:
            raise ValueError(f"expected controller epoch zkVersion {expected_controller_epoch_zk_version} "
                             f"must be >= 0 or {MATCH_ANY_VERSION}")

        def start():
            t = zk.transaction()
            t.check(zd.CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
            if kind == "create":
                # a multi cannot create a znode with null data: empty data it is (nothing reads these znodes' data)
                t.create(path, b"" if op[2] is None else op[2], ephemeral=op[3], sequence=op[4])
            elif kind == "set":
                t.set_data(path, op[2], op[3])
            else:
                t.delete(path, op[2])
            return t.commit_async()
        return start

    def _write(self, ops: Sequence[_Op], expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> list[Any]:
        """Each op's result (created path, new ZnodeStat, True) or ZooKeeper error. With an expected
        controller epoch zkVersion, each op runs in a multi behind the epoch check (Kafka's
        wrapRequestWithControllerEpochCheck), and a failed check raises ControllerMovedError."""
        fenced = expected_controller_epoch_zk_version != MATCH_ANY_VERSION
        results = self._run([self._start_op(op, expected_controller_epoch_zk_version) for op in ops])
        if not fenced:
            return results
        out = []
        for op, result in zip(ops, results):
            if isinstance(result, Exception):            # the multi itself failed (not an op in it)
                out.append(result)
                continue
            check, op_result = result
            if isinstance(check, BadVersionError):
                raise ControllerMovedError(f"controller epoch zkVersion check failed: expected "
                                           f"{expected_controller_epoch_zk_version}, writing {op[1]}")
            if isinstance(check, Exception) and not isinstance(check, RolledBackError):
                raise type(check)(f"checking {zd.CONTROLLER_EPOCH_PATH}")
            out.append(op_result)
        return out

    def _write_one(self, op: _Op, expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> Any:
        return self._write([op], expected_controller_epoch_zk_version)[0]

    # -- generic znode operations --------------------------------------------------------------

    def get_data_and_stat(self, path: str) -> tuple[bytes | None, Any]:
        """(data, ZnodeStat), or (None, None) when there is no such znode."""
        result = self._run([lambda: self.zk.get_async(path)])[0]
        if isinstance(result, NoNodeError):
            return None, None
        if isinstance(result, Exception):
            raise result
        return result

    def get_data_and_version(self, path: str) -> tuple[bytes | None, int]:
        """(data, zkVersion); (None, UNKNOWN_VERSION) when there is no such znode."""
        data, stat = self.get_data_and_stat(path)
        return data, stat.version if stat is not None else UNKNOWN_VERSION

    def get_children(self, path: str) -> list[str]:
        """The children's names; none when the znode does not exist."""
        result = self._run([lambda: self.zk.get_children_async(path)])[0]
        if isinstance(result, NoNodeError):
            return []
        if isinstance(result, Exception):
            raise result
        return list(result)

    def path_exists(self, path: str) -> bool:
        return self._one(lambda: self.zk.exists_async(path)) is not None

    def create_recursive(self, path: str, data: bytes | None = None, throw_if_path_exists: bool = True) -> None:
        """Create `path` with `data`, and any missing parents with no data. NodeExistsError if it exists
        and throw_if_path_exists."""
        result = self._write_one(("create", path, data, False, False))
        if isinstance(result, NoNodeError):
            self._create_parent_paths(path)
            result = self._write_one(("create", path, data, False, False))
        if isinstance(result, NodeExistsError):
            if throw_if_path_exists:
                raise NodeExistsError(path)
        elif isinstance(result, Exception):
            raise result

    def _create_parent_paths(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        if not parent:
            return
        result = self._write_one(("create", parent, None, False, False))
        if isinstance(result, NoNodeError):
            self._create_parent_paths(parent)
            result = self._write_one(("create", parent, None, False, False))
        if isinstance(result, Exception) and not isinstance(result, NodeExistsError):
            raise result

    def make_sure_persistent_path_exists(self, path: str) -> None:
        self.create_recursive(path, None, throw_if_path_exists=False)

    def create_top_level_paths(self) -> None:
        """The persistent znodes a broker ensures at startup (Kafka's ZkData.PersistentZkPaths)."""
        for path in zd.PERSISTENT_ZK_PATHS:
            self.make_sure_persistent_path_exists(path)

    def delete_recursive(self, path: str, expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> bool:
        """Delete `path` and everything below it, each delete fenced when an epoch zkVersion is given.
        False when `path` did not exist."""
        children = self._run([lambda: self.zk.get_children_async(path)])[0]
        if isinstance(children, NoNodeError):
            return False
        if isinstance(children, Exception):
            raise children
        for child in children:
            self.delete_recursive(f"{path}/{child}", expected_controller_epoch_zk_version)
        result = self._write_one(("delete", path, MATCH_ANY_VERSION), expected_controller_epoch_zk_version)
        if isinstance(result, NotEmptyError):            # a child appeared meanwhile: go again
            return self.delete_recursive(path, expected_controller_epoch_zk_version)
        if isinstance(result, Exception) and not isinstance(result, NoNodeError):
            raise result
        return True

    def conditional_update_path(self, path: str, data: bytes, expected_version: int,
                                expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> tuple[bool, int]:
        """Set `path` if it is at `expected_version`: (True, new version), or (False, UNKNOWN_VERSION) when
        it had moved on. NoNodeError if there is no such znode."""
        result = self._write_one(("set", path, data, expected_version), expected_controller_epoch_zk_version)
        if isinstance(result, BadVersionError):
            return False, UNKNOWN_VERSION
        if isinstance(result, Exception):
            raise result
        return True, result.version

    def _get_many(self, paths: Sequence[str]) -> list[tuple[bytes | None, Any] | None]:
        """(data, stat) for each path, None where there is no such znode."""
        zk = self.zk
        results = self._run([lambda p=p: zk.get_async(p) for p in paths])
        out = []
        for result in results:
            if isinstance(result, NoNodeError):
                out.append(None)
            elif isinstance(result, Exception):
                raise result
            else:
                out.append(result)
        return out

    # -- cluster id ---------------------------------------------------------------------------

    def get_cluster_id(self) -> str | None:
        data, stat = self.get_data_and_stat(zd.CLUSTER_ID_PATH)
        return None if stat is None else zd.decode_cluster_id(data)

    def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        """The cluster id: `proposed_cluster_id` if this call created /cluster/id, else the one stored."""
        try:
            self.create_recursive(zd.CLUSTER_ID_PATH, zd.encode_cluster_id(proposed_cluster_id))
            return proposed_cluster_id
        except NodeExistsError:
            cluster_id = self.get_cluster_id()
            if cluster_id is None:
                raise RuntimeError(f"{zd.CLUSTER_ID_PATH} was deleted while being read") from None
            return cluster_id

    # -- brokers ------------------------------------------------------------------------------

    def register_broker(self, broker: zd.BrokerInfo) -> int:
        """Create /brokers/ids/<id> (ephemeral) and return the broker epoch: the znode's czxid, new at
        every registration."""
        stat = self._checked_ephemeral_create(broker.path, broker.encode())
        log.info("registered broker %d at %s, broker epoch (czxid) %d", broker.id, broker.path, stat.czxid)
        return stat.czxid

    def _checked_ephemeral_create(self, path: str, data: bytes) -> Any:
        zk = self.zk

        def start():
            # create-then-set in one multi, as Kafka does: the set's stat carries the czxid
            t = zk.transaction()
            t.create(path, b"", ephemeral=True)
            t.set_data(path, data, 0)
            return t.commit_async()

        while True:
            result = self._one(start)
            session = self.session_id
            if not isinstance(result[0], Exception):
                self._registration_session_id = session
                return result[1]
            error = next(r for r in result if not isinstance(r, RolledBackError))
            if not isinstance(error, NodeExistsError):
                raise type(error)(path)
            _, stat = self.get_data_and_stat(path)
            if stat is None:
                continue                                   # it went away while we looked: create again
            if stat.ephemeralOwner == session:
                self._registration_session_id = session    # our earlier try, whose answer a connection loss ate
                return stat
            if stat.ephemeralOwner == self._registration_session_id and session != self._registration_session_id:
                # Left by our previous, expired session and not yet removed by the server (Kafka's workaround
                # for ZOOKEEPER-2985): delete it and register under the current session.
                log.info("%s is still owned by our expired session 0x%x; re-creating it under 0x%x",
                         path, stat.ephemeralOwner, session)
                result = self._write_one(("delete", path, stat.version))
                if isinstance(result, Exception) and not isinstance(result, (NoNodeError, BadVersionError)):
                    raise result
                continue
            raise BrokerRegistrationError(
                f"{path} already exists, owned by session 0x{stat.ephemeralOwner:x}, not ours (0x{session or 0:x}):"
                " another broker is registered with this id")

    def update_broker_info(self, broker: zd.BrokerInfo) -> None:
        result = self._write_one(("set", broker.path, broker.encode(), MATCH_ANY_VERSION))
        if isinstance(result, Exception):
            raise result

    def get_broker(self, broker_id: int) -> zd.BrokerInfo | None:
        data, stat = self.get_data_and_stat(zd.broker_id_path(broker_id))
        return None if stat is None else zd.BrokerInfo.decode(broker_id, data)

    def get_sorted_broker_list(self) -> list[int]:
        ids = []
        for name in self.get_children(zd.BROKER_IDS_PATH):
            if not name.lstrip("-").isdigit():
                raise zd.ZkDataError(f"{zd.BROKER_IDS_PATH}: child {name!r} is not a broker id")
            ids.append(int(name))
        return sorted(ids)

    def get_all_broker_and_epochs_in_cluster(self) -> dict[int, BrokerAndEpoch]:
        """Every registered broker with its epoch, read in one round of pipelined reads."""
        ids = self.get_sorted_broker_list()
        out = {}
        for broker_id, got in zip(ids, self._get_many([zd.broker_id_path(i) for i in ids])):
            if got is not None:
                out[broker_id] = BrokerAndEpoch(zd.BrokerInfo.decode(broker_id, got[0]), got[1].czxid)
        return out

    def get_all_brokers_in_cluster(self) -> list[zd.BrokerInfo]:
        return [b.broker for b in self.get_all_broker_and_epochs_in_cluster().values()]

    # -- controller ---------------------------------------------------------------------------

    def get_controller_id(self) -> int | None:
        data, stat = self.get_data_and_stat(zd.CONTROLLER_PATH)
        return None if stat is None else zd.decode_controller(data).broker_id

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion of /controller_epoch), or None before any controller was elected."""
        data, stat = self.get_data_and_stat(zd.CONTROLLER_EPOCH_PATH)
        return None if stat is None else (zd.decode_controller_epoch(data), stat.version)

    def _maybe_create_controller_epoch_znode(self) -> tuple[int, int]:
        result = self._write_one(("create", zd.CONTROLLER_EPOCH_PATH,
                                  zd.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH), False, False))
        if not isinstance(result, Exception):
            return INITIAL_CONTROLLER_EPOCH, 0
        if isinstance(result, NodeExistsError):
            current = self.get_controller_epoch()
            if current is None:
                raise RuntimeError(f"{zd.CONTROLLER_EPOCH_PATH} existed but went away while being read")
            return current
        raise result

    def register_controller_and_increment_controller_epoch(self, controller_id: int) -> tuple[int, int]:
        """Become the controller: (new controller epoch, its zkVersion, the fencing token of every later
        controller write). ControllerMovedError when another broker won."""
        current = self.get_controller_epoch() or self._maybe_create_controller_epoch_znode()
        epoch, epoch_zk_version = current
        new_epoch = epoch + 1
        zk = self.zk
        controller_data = zd.encode_controller(controller_id)

        def start():
            t = zk.transaction()
            t.create(zd.CONTROLLER_PATH, controller_data, ephemeral=True)
            t.set_data(zd.CONTROLLER_EPOCH_PATH, zd.encode_controller_epoch(new_epoch), epoch_zk_version)
            return t.commit_async()

        result = self._one(start)
        if not isinstance(result[0], Exception):
            return new_epoch, result[1].version
        error = next(r for r in result if not isinstance(r, RolledBackError))
        if not isinstance(error, (NodeExistsError, BadVersionError)):
            raise type(error)(zd.CONTROLLER_PATH)
        # Someone else won, or this was our own earlier try (its answer lost to a connection loss): re-read.
        current_controller = self.get_controller_id()
        if current_controller != controller_id:
            raise ControllerMovedError(f"broker {current_controller} is the controller, not {controller_id}")
        current = self.get_controller_epoch()
        if current is not None and current[0] == new_epoch:
            return current
        raise ControllerMovedError(f"the controller epoch moved on to {current and current[0]}")

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        """Remove /controller (fenced), which makes every broker run the election again."""
        result = self._write_one(("delete", zd.CONTROLLER_PATH, MATCH_ANY_VERSION),
                                 expected_controller_epoch_zk_version)
        if isinstance(result, Exception) and not isinstance(result, NoNodeError):
            raise result

    # -- topics and partition states -------------------------------------------------------------

    def get_all_topics_in_cluster(self) -> set[str]:
        return set(self.get_children(zd.TOPICS_PATH))

    def topic_exists(self, topic: str) -> bool:
        return self.path_exists(zd.topic_path(topic))

    def create_topic_assignment(self, topic: str, topic_id: bytes | None,
                                assignment: Mapping[int, Sequence[int]]) -> None:
        """Create /brokers/topics/<topic>; NodeExistsError when the topic exists. This is what the
        controller's child watch on /brokers/topics picks up as a new topic."""
        self.create_recursive(zd.topic_path(topic), zd.encode_topic(topic_id, assignment))

    def set_topic_assignment(self, topic: str, topic_id: bytes | None,
                             assignment: Mapping[int, zd.ReplicaAssignment | Sequence[int]],
                             expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> None:
        result = self._write_one(("set", zd.topic_path(topic), zd.encode_topic(topic_id, assignment),
                                  MATCH_ANY_VERSION), expected_controller_epoch_zk_version)
        if isinstance(result, Exception):
            raise result

    def get_replica_assignment_and_topic_ids_for_topics(self, topics: Iterable[str]) -> dict[str, zd.TopicAssignment]:
        """Each existing topic's id and partition assignment."""
        topics = list(topics)
        out = {}
        for topic, got in zip(topics, self._get_many([zd.topic_path(t) for t in topics])):
            if got is not None:
                out[topic] = zd.decode_topic(topic, got[0])
        return out

    def get_topic_assignment(self, topic: str) -> zd.TopicAssignment | None:
        return self.get_replica_assignment_and_topic_ids_for_topics([topic]).get(topic)

    def get_topic_partition_count(self, topic: str) -> int | None:
        assignment = self.get_topic_assignment(topic)
        return None if assignment is None else len(assignment.partitions)

    def set_topic_ids(self, assignments: Mapping[str, zd.TopicAssignment],
                      expected_controller_epoch_zk_version: int) -> dict[str, zd.TopicAssignment]:
        """Give topics created without a topic id (before Kafka 2.8) a new one, as the controller does
        at failover."""
        updated = {}
        for topic, assignment in assignments.items():
            if assignment.topic_id is not None:
                raise ValueError(f"topic {topic} already has a topic id")
            updated[topic] = zd.TopicAssignment(zd.random_uuid(), assignment.partitions)
        results = self._write([("set", zd.topic_path(t), zd.encode_topic(a.topic_id, a.partitions), MATCH_ANY_VERSION)
                               for t, a in updated.items()], expected_controller_epoch_zk_version)
        for result in results:
            if isinstance(result, Exception):
                raise result
        return updated

    def get_topic_partition_states(self, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The state of each partition that has a state znode; partition_epoch is the znode's zkVersion."""
        partitions = [TopicPartition(*tp) for tp in partitions]
        paths = [zd.topic_partition_state_path(*tp) for tp in partitions]
        out = {}
        for tp, path, got in zip(partitions, paths, self._get_many(paths)):
            if got is not None:
                out[tp] = zd.decode_partition_state(got[0], got[1].version, path)
        return out

    def get_topic_partition_state(self, partition: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self.get_topic_partition_states([partition]).get(TopicPartition(*partition))

    def create_topic_partition_states(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
                                      expected_controller_epoch_zk_version: int
                                      ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Create each partition's state znode (and the partitions/<p> znodes above it), all fenced. Each
        partition gets its LeaderAndIsr with partition epoch 0, or the error (NodeExistsError: the state
        exists already)."""
        tps = [TopicPartition(*tp) for tp in states]
        topics = sorted({tp.topic for tp in tps})
        # The parents first; they usually exist after the first partition, so their errors do not matter.
        self._write([("create", zd.topic_partitions_path(t), None, False, False) for t in topics],
                    expected_controller_epoch_zk_version)
        self._write([("create", zd.topic_partition_path(*tp), None, False, False) for tp in tps],
                    expected_controller_epoch_zk_version)
        results = self._write([("create", zd.topic_partition_state_path(*tp),
                                zd.encode_partition_state(states[tp]), False, False) for tp in tps],
                              expected_controller_epoch_zk_version)
        return {tp: result if isinstance(result, Exception) else states[tp].leader_and_isr.with_partition_epoch(0)
                for tp, result in zip(tps, results)}

    def update_leader_and_isr(self, leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int,
                              expected_controller_epoch_zk_version: int) -> UpdateLeaderAndIsrResult:
        """Write each partition's new state if its state znode is still at the LeaderAndIsr's partition epoch
        (the zkVersion it was read at). Fenced by the controller epoch: ControllerMovedError when we are
        no longer the controller."""
        tps = [TopicPartition(*tp) for tp in leader_and_isrs]
        results = self._write(
            [("set", zd.topic_partition_state_path(*tp),
              zd.encode_partition_state(LeaderIsrAndControllerEpoch(leader_and_isrs[tp], controller_epoch)),
              leader_and_isrs[tp].partition_epoch) for tp in tps],
            expected_controller_epoch_zk_version)
        finished: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        retry = []
        for tp, result in zip(tps, results):
            if isinstance(result, BadVersionError):
                retry.append(tp)
            elif isinstance(result, Exception):
                finished[tp] = result
            else:
                finished[tp] = leader_and_isrs[tp].with_partition_epoch(result.version)
        return UpdateLeaderAndIsrResult(finished, retry)

    def delete_topic_znode(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        self.delete_recursive(zd.topic_path(topic), expected_controller_epoch_zk_version)

    def delete_topic_configs(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        self._raise_unless_gone(self._write([("delete", zd.config_entity_path("topics", t), MATCH_ANY_VERSION)
                                             for t in topics], expected_controller_epoch_zk_version))

    @staticmethod
    def _raise_unless_gone(results: list[Any]) -> None:
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, NoNodeError):
                raise result

    # -- topic deletion -----------------------------------------------------------------------

    def create_delete_topic_path(self, topic: str) -> None:
        """Ask the controller to delete `topic`; NodeExistsError when it is already marked."""
        self.create_recursive(zd.delete_topic_path(topic))

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self.path_exists(zd.delete_topic_path(topic))

    def get_topic_deletions(self) -> list[str]:
        return self.get_children(zd.DELETE_TOPICS_PATH)

    def delete_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        self._raise_unless_gone(self._write([("delete", zd.delete_topic_path(t), MATCH_ANY_VERSION) for t in topics],
                                            expected_controller_epoch_zk_version))

    # -- notifications: ISR changes, log dir events ------------------------------------------------

    def _create_sequential(self, directory: str, prefix: str, data: bytes) -> str:
        """The created node's name (prefix + ZooKeeper's 10-digit counter)."""
        self.make_sure_persistent_path_exists(directory)
        result = self._write_one(("create", f"{directory}/{prefix}", data, False, True))
        if isinstance(result, Exception):
            raise result
        return result.rsplit("/", 1)[1]

    def _sequence_numbers(self, directory: str, prefix: str) -> list[str]:
        return sorted(zd.sequence_number(c, prefix) for c in self.get_children(directory) if c.startswith(prefix))

    def _read_sequence(self, directory: str, prefix: str, sequence_numbers: Iterable[str]) -> list[bytes | None]:
        got = self._get_many([f"{directory}/{prefix}{s}" for s in sequence_numbers])
        return [g[0] for g in got if g is not None]

    def _delete_sequence(self, directory: str, prefix: str, sequence_numbers: Iterable[str] | None,
                         expected_controller_epoch_zk_version: int) -> None:
        if sequence_numbers is None:
            sequence_numbers = self._sequence_numbers(directory, prefix)
        self._raise_unless_gone(self._write([("delete", f"{directory}/{prefix}{s}", MATCH_ANY_VERSION)
                                             for s in sequence_numbers], expected_controller_epoch_zk_version))

    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        """What a leader on the pre-AlterPartition path writes after changing ISRs itself."""
        return self._create_sequential(zd.ISR_CHANGE_NOTIFICATION_PATH, zd.ISR_CHANGE_PREFIX,
                                       zd.encode_partitions_notification(partitions))

    def get_all_isr_change_notifications(self) -> list[str]:
        """The pending notifications' sequence numbers, oldest first."""
        return self._sequence_numbers(zd.ISR_CHANGE_NOTIFICATION_PATH, zd.ISR_CHANGE_PREFIX)

    def get_partitions_from_isr_change_notifications(self, sequence_numbers: Iterable[str]) -> list[TopicPartition]:
        out = []
        for data in self._read_sequence(zd.ISR_CHANGE_NOTIFICATION_PATH, zd.ISR_CHANGE_PREFIX, sequence_numbers):
            out.extend(zd.decode_partitions_notification(data))
        return out

    def delete_isr_change_notifications(self, expected_controller_epoch_zk_version: int,
                                        sequence_numbers: Iterable[str] | None = None) -> None:
        """Delete the given notifications, or all of them (as a new controller does)."""
        self._delete_sequence(zd.ISR_CHANGE_NOTIFICATION_PATH, zd.ISR_CHANGE_PREFIX, sequence_numbers,
                              expected_controller_epoch_zk_version)

    def propagate_log_dir_event(self, broker_id: int) -> str:
        return self._create_sequential(zd.LOG_DIR_EVENT_NOTIFICATION_PATH, zd.LOG_DIR_EVENT_PREFIX,
                                       zd.encode_log_dir_event(broker_id))

    def get_all_log_dir_event_notifications(self) -> list[str]:
        return self._sequence_numbers(zd.LOG_DIR_EVENT_NOTIFICATION_PATH, zd.LOG_DIR_EVENT_PREFIX)

    def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        return [zd.decode_log_dir_event(data) for data in
                self._read_sequence(zd.LOG_DIR_EVENT_NOTIFICATION_PATH, zd.LOG_DIR_EVENT_PREFIX, sequence_numbers)]

    def delete_log_dir_event_notifications(self, expected_controller_epoch_zk_version: int,
                                           sequence_numbers: Iterable[str] | None = None) -> None:
        self._delete_sequence(zd.LOG_DIR_EVENT_NOTIFICATION_PATH, zd.LOG_DIR_EVENT_PREFIX, sequence_numbers,
                              expected_controller_epoch_zk_version)

    # -- admin requests: preferred election, reassignment (the legacy znode API) --------------------

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        """NodeExistsError while an election request is pending."""
        self.create_recursive(zd.PREFERRED_REPLICA_ELECTION_PATH, zd.encode_partitions_notification(partitions))

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        data, stat = self.get_data_and_stat(zd.PREFERRED_REPLICA_ELECTION_PATH)
        return set() if stat is None else zd.decode_partitions_notification(data, zd.PREFERRED_REPLICA_ELECTION_PATH)

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        self._raise_unless_gone([self._write_one(("delete", zd.PREFERRED_REPLICA_ELECTION_PATH, MATCH_ANY_VERSION),
                                                 expected_controller_epoch_zk_version)])

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]]) -> None:
        self.create_recursive(zd.REASSIGN_PARTITIONS_PATH, zd.encode_reassignment(reassignment))

    def get_partition_reassignment(self) -> dict[TopicPartition, list[int]]:
        """A znode that does not parse is ignored (logged), as Kafka does."""
        data, stat = self.get_data_and_stat(zd.REASSIGN_PARTITIONS_PATH)
        if stat is None:
            return {}
        try:
            return zd.decode_reassignment(data)
        except zd.ZkDataError as e:
            log.warning("ignoring partition reassignment: %s", e)
            return {}

    def reassign_partitions_in_progress(self) -> bool:
        return self.path_exists(zd.REASSIGN_PARTITIONS_PATH)

    def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> None:
        self.delete_recursive(zd.REASSIGN_PARTITIONS_PATH, expected_controller_epoch_zk_version)

    # -- configs ------------------------------------------------------------------------------

    def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """The dynamic overrides of one entity (a topic's, a broker's...); none when the znode is missing."""
        path = zd.config_entity_path(entity_type, entity_name)
        data, _ = self.get_data_and_stat(path)
        return zd.decode_config(data, path)

    def get_entities_configs(self, entity_type: str, entity_names: Iterable[str]) -> dict[str, dict[str, str]]:
        names = list(entity_names)
        paths = [zd.config_entity_path(entity_type, n) for n in names]
        got = self._get_many(paths)
        return {n: zd.decode_config(g[0] if g else None, p) for n, p, g in zip(names, paths, got)}

    def get_all_entities_with_config(self, entity_type: str) -> list[str]:
        return self.get_children(zd.config_entity_type_path(entity_type))

    def set_or_create_entity_configs(self, entity_type: str, entity_name: str, config: Mapping[str, str]) -> None:
        """Replace the entity's overrides (all of them: a missing key reverts to the default)."""
        path, data = zd.config_entity_path(entity_type, entity_name), zd.encode_config(config)
        result = self._write_one(("set", path, data, MATCH_ANY_VERSION))
        if isinstance(result, NoNodeError):
            try:
                self.create_recursive(path, data)
                return
            except NodeExistsError:                       # created meanwhile: set it after all
                result = self._write_one(("set", path, data, MATCH_ANY_VERSION))
        if isinstance(result, Exception):
            raise result

    def create_config_change_notification(self, entity_path: str) -> str:
        """Tell every broker that `<type>/<name>`'s configs changed; returns the notification's name."""
        return self._create_sequential(zd.CONFIG_CHANGES_PATH, zd.CONFIG_CHANGE_PREFIX,
                                       zd.encode_config_change(entity_path))

    def change_entity_config(self, entity_type: str, entity_name: str, config: Mapping[str, str]) -> str:
        """Kafka's AdminZkClient.changeEntityConfig: write the overrides, then the change notification."""
        self.set_or_create_entity_configs(entity_type, entity_name, config)
        return self.create_config_change_notification(f"{entity_type}/{entity_name}")

    # -- producer ids ---------------------------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int) -> zd.ProducerIdsBlock:
        """Claim the next block of PRODUCER_ID_BLOCK_SIZE producer ids (the first is 0..999): a
        conditional set of /latest_producer_id_block, retried on a conflict, so that no two claims,
        from any brokers, overlap."""
        path = zd.PRODUCER_ID_BLOCK_PATH
        while True:
            data, version = self.get_data_and_version(path)
            if version == UNKNOWN_VERSION:
                self.make_sure_persistent_path_exists(path)
                continue
            if data:
                current = zd.decode_producer_id_block(data)
                if current.last_producer_id > zd.INT64_MAX - zd.PRODUCER_ID_BLOCK_SIZE:
                    raise RuntimeError("all producer ids have been allocated")
                block = zd.ProducerIdsBlock(broker_id, current.next_block_first_id, zd.PRODUCER_ID_BLOCK_SIZE)
            else:
                block = zd.ProducerIdsBlock(broker_id, 0, zd.PRODUCER_ID_BLOCK_SIZE)
            ok, _ = self.conditional_update_path(path, zd.encode_producer_id_block(block), version)
            if ok:
                return block

    # -- features -------------------------------------------------------------------------------

    def get_feature_znode(self) -> tuple[zd.FeatureZNode | None, int]:
        data, version = self.get_data_and_version(zd.FEATURE_PATH)
        return (None if version == UNKNOWN_VERSION else zd.decode_feature(data)), version

    def create_feature_znode(self, node: zd.FeatureZNode,
                             expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> int:
        """Create /feature (NodeExistsError when it is there); its version, 0, is the features' epoch."""
        result = self._write_one(("create", zd.FEATURE_PATH, zd.encode_feature(node), False, False),
                                 expected_controller_epoch_zk_version)
        if isinstance(result, Exception):
            raise result
        return 0

    def update_feature_znode(self, node: zd.FeatureZNode, expected_version: int = MATCH_ANY_VERSION,
                             expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> int:
        """Replace /feature (BadVersionError when it changed since `expected_version`); its new version."""
        result = self._write_one(("set", zd.FEATURE_PATH, zd.encode_feature(node), expected_version),
                                 expected_controller_epoch_zk_version)
        if isinstance(result, Exception):
            raise result
        return result.version

    # -- ACLs (Kafka's ZooKeeper authorizer) -------------------------------------------------------

    def create_acl_paths(self) -> None:
        """The ACL stores and change logs, each resource type's folder included (createAclPathsIfNeeded)."""
        for path in zd.acl_zk_paths():
            self.make_sure_persistent_path_exists(path)

    def get_resource_names(self, resource_type: str, pattern_type: str = "LITERAL") -> list[str]:
        return self.get_children(zd.acl_path(resource_type, None, pattern_type))

    def get_versioned_acls_for_resource(self, resource_type: str, resource_name: str,
                                        pattern_type: str = "LITERAL") -> tuple[set[zd.AclEntry], int]:
        """(ACLs, zkVersion); (empty, UNKNOWN_VERSION) when the resource has no znode."""
        path = zd.acl_path(resource_type, resource_name, pattern_type)
        data, version = self.get_data_and_version(path)
        return zd.decode_acls(data, path), version

    def conditional_set_acls_for_resource(self, resource_type: str, resource_name: str, pattern_type: str,
                                          acls: Iterable[zd.AclEntry], expected_version: int) -> tuple[bool, int]:
        """Kafka's updateResourceAcls step: create the znode when it was missing (expected UNKNOWN_VERSION),
        else set it at `expected_version`; (False, UNKNOWN_VERSION) when someone else got there first."""
        path, data = zd.acl_path(resource_type, resource_name, pattern_type), zd.encode_acls(acls)
        if expected_version == UNKNOWN_VERSION:
            result = self._write_one(("create", path, data, False, False))
            if isinstance(result, NodeExistsError):
                return False, UNKNOWN_VERSION
            if isinstance(result, Exception):
                raise result
            return True, 0
        return self.conditional_update_path(path, data, expected_version)

    def conditional_delete_resource(self, resource_type: str, resource_name: str, pattern_type: str,
                                    expected_version: int) -> bool:
        """Delete a resource's ACL znode at `expected_version`; False when it moved on meanwhile."""
        result = self._write_one(("delete", zd.acl_path(resource_type, resource_name, pattern_type),
                                  expected_version))
        if isinstance(result, (BadVersionError, NotEmptyError)):
            return False
        if isinstance(result, Exception) and not isinstance(result, NoNodeError):
            raise result
        return True

    def create_acl_change_notification(self, resource_type: str, resource_name: str,
                                       pattern_type: str = "LITERAL") -> str:
        """Tell every broker that a resource's ACLs changed; the notification's name."""
        extended = pattern_type.upper() != "LITERAL"
        return self._create_sequential(zd.EXTENDED_ACL_CHANGES_PATH if extended else zd.LITERAL_ACL_CHANGES_PATH,
                                       zd.ACL_CHANGE_PREFIX,
                                       zd.encode_acl_change(resource_type, resource_name, pattern_type))

    def get_acl_change_notifications(self, extended: bool, after: str = "") -> list[tuple[str, str, str, str]]:
        """(sequence number, resource type, name, pattern type) of each notification newer than `after`."""
        directory = zd.EXTENDED_ACL_CHANGES_PATH if extended else zd.LITERAL_ACL_CHANGES_PATH
        numbers = [n for n in self._sequence_numbers(directory, zd.ACL_CHANGE_PREFIX) if n > after]
        got = self._get_many([f"{directory}/{zd.ACL_CHANGE_PREFIX}{n}" for n in numbers])
        return [(n, *zd.decode_acl_change(g[0], extended)) for n, g in zip(numbers, got) if g is not None]

    # -- watches --------------------------------------------------------------------------------

    def watch_data(self, path: str, callback: Callable[[str, bytes | None, Any], Any]) -> ZkWatch:
        """`callback(path, data, stat)` now (on this thread) and after every change of the znode,
        including its creation and deletion ((None, None) while it does not exist) and after a session
        is re-established. Changes in quick succession may arrive as one call: treat it as "re-read".
        Later calls run on kazoo's watch thread: hand the event over, do not block."""
        watch = ZkWatch(path)

        def on_change(data, stat, event=None):
            if watch.cancelled:
                return False
            callback(path, data, stat)
            return None

        self.zk.DataWatch(path, on_change)
        return watch

    def watch_children(self, path: str, callback: Callable[[str, list[str]], Any]) -> ZkWatch:
        """`callback(path, children)` now and after every change of `path`'s children, and after a
        session is re-established. The znode must exist (NoNodeError otherwise), as the controller's
        watched paths do once create_top_level_paths() has run. Later calls run on kazoo's watch thread."""
        if not self.path_exists(path):
            raise NoNodeError(path)
        watch = ZkWatch(path)

        def on_change(children):
            if watch.cancelled:
                return False
            callback(path, list(children))
            return None

        self.zk.ChildrenWatch(path, on_change)
        return watch
