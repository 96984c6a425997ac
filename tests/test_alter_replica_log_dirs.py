"""Moving a replica between the log dirs of one broker (AlterReplicaLogDirs, Kafka's ReplicaAlterLogDirsThread).

In-process first (a ReplicaManager over real logs in two temporary dirs): the move copies while the
partition takes appends, DescribeLogDirs shows the future replica and its lag, the checks answer Kafka's
errors, cordoned.log.dirs keeps new partitions out, and a swap cut short by a crash is finished at the
next start. Then real broker processes: a move under an idempotent producer's load, throttled so that it
is seen under way, with a SIGKILL in the middle of the copy.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import types
from pathlib import Path

import pytest
from kafka_compat.storage import checkpoint
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from wire import WireClient

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from kafka_compat.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kafka_compat.protocol.records import batches, build_batch
from kafka_compat.server.describe_log_dirs import DescribeLogDirsApi
from kafka_compat.server.metadata_cache import PartitionLeadership
from kafka_compat.server.replica_manager import ReplicaManager
from kafka_compat.testing import EmbeddedBroker, EmbeddedCluster, wait_until, zookeeper_missing

ME = 1
T = "t"
TOPIC_ID = b"\x01" * 16
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35


def leader(epoch: int = 0) -> PartitionLeadership:
    return PartitionLeadership(ME, epoch, (ME,), (ME,))


def produce(rm: ReplicaManager, index: int, values) -> None:
    for value in values:
        assert rm.append_records(1000, 1, [(T, index, bytearray(build_batch([(b"k", value, [], 1000)])))])[0] \
            .error_code == ErrorCode.NONE


def values_of(data: bytes) -> list[bytes]:
    return [r.value for b in batches(data) for r in b.records()]


def read_all(rm: ReplicaManager, index: int) -> list[bytes]:
    partition = rm.get_partition(T, index)
    return values_of(rm.read_local(T, index, partition.log_start_offset, 1 << 30).records.read_bytes())


def request(moves: dict[str, dict[str, list[int]]]) -> AlterReplicaLogDirsRequest:
    R = AlterReplicaLogDirsRequest
    return R(dirs=[R.AlterReplicaLogDir(path=d, topics=[R.AlterReplicaLogDirTopic(name=t, partitions=ps)
                                                        for t, ps in topics.items()])
                   for d, topics in moves.items()])


def errors_of(response) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


async def until(check, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def hosting(dirs: list[str], config: LogConfig, **kwargs):
    """A ReplicaManager over real logs in ``dirs`` (on the running loop), shut down cleanly after."""
    logs = LogManager(dirs, config, topic_config=lambda topic: config, cleaner_enabled=False)
    logs.startup(background=False)
    rm = ReplicaManager(ME, logs, lambda topic: config, hw_checkpoint_interval_ms=3_600_000, **kwargs)
    rm.startup()
    try:
        yield logs, rm
    finally:
        rm.shutdown()
        logs.shutdown()


def two_dirs(tmp_path) -> tuple[str, str, LogConfig]:
    return str(tmp_path / "a"), str(tmp_path / "b"), LogConfig({"segment.bytes": "65536"})


def test_a_replica_moves_while_it_takes_appends_and_describe_shows_the_future_replica(tmp_path):
    a, b, config = two_dirs(tmp_path)

    async def main():
        rate = [20_000]       # bytes/s: slow enough to see the move under way
        async with hosting([a, b], config, alter_log_dirs_rate=lambda: rate[0]) as (logs, rm):
            api = DescribeLogDirsApi(rm)
            assert rm.apply_local_leadership(T, TOPIC_ID, {0: leader()}) == {0: 0}
            assert os.path.isdir(os.path.join(a, "t-0"))
            sent = [b"%06d" % i + b"x" * 200 for i in range(600)]
            produce(rm, 0, sent[:500])
            moved = api.handle_alter_replica_log_dirs(types.SimpleNamespace(body=request({b: {T: [0]}})))
            assert errors_of(moved) == {(T, 0): ErrorCode.NONE}
            [future] = [n for n in os.listdir(b) if n.startswith("t-0.")]
            assert future.endswith("-future") and len(future) == len("t-0.") + 32 + len("-future")

            def described():
                out = api.handle_describe_log_dirs(types.SimpleNamespace(body=DescribeLogDirsRequest(topics=None)))
                return {(r.log_dir, p.is_future_key): p for r in out.results for t in r.topics for p in t.partitions}
            await until(lambda: described().get((b, True)) and described()[(b, True)].partition_size > 0,
                        "the future replica to get data")
            during = described()
            assert during[(a, False)].offset_lag == 0
            assert 0 < during[(b, True)].offset_lag <= 500
            assert during[(b, True)].partition_size < during[(a, False)].partition_size
            produce(rm, 0, sent[500:])          # appends go on while the copy runs
            rate[0] = 1 << 62
            await until(lambda: os.path.isdir(os.path.join(b, "t-0")), "the swap")
            assert not os.path.exists(os.path.join(a, "t-0")) and not any(n.endswith("-future") for n in os.listdir(b))
            assert os.path.dirname(rm.get_partition(T, 0).log_dir) == b
            assert read_all(rm, 0) == sent
            assert set(described()) == {(b, False)}
            produce(rm, 0, [b"after"])
            assert read_all(rm, 0) == sent + [b"after"]
        # the moved log loads from its new dir, whole; a high watermark the old dir's file still names is not used
        checkpoint.write_offsets(os.path.join(a, checkpoint.REPLICATION_OFFSET_CHECKPOINT), {(T, 0): 7})
        async with hosting([b, a], config) as (logs, rm):      # the old dir's file read last
            assert logs.log_dir_of(T, 0) == b and logs.get_future_log(T, 0) is None
            assert logs.get_log(T, 0).log_end_offset == 601
            # as a follower (a leader would raise it to its log end anyway): the checkpointed high watermark
            rm.apply_local_leadership(T, TOPIC_ID, {0: PartitionLeadership(2, 1, (ME, 2), (ME, 2))})
            assert rm.get_partition(T, 0).high_watermark == 601 and read_all(rm, 0) == sent + [b"after"]
    asyncio.run(main())


def test_alter_replica_log_dirs_answers_kafkas_errors(tmp_path):
    a, b, config = two_dirs(tmp_path)

    async def main():
        async with hosting([a, b], config) as (logs, rm):
            api = DescribeLogDirsApi(rm)

            def alter(moves):
                return errors_of(api.handle_alter_replica_log_dirs(types.SimpleNamespace(body=request(moves))))
            rm.apply_local_leadership(T, TOPIC_ID, {0: leader()})
            assert alter({str(tmp_path / "c"): {T: [0]}, a + "/": {T: [1]}}) == {
                (T, 0): ErrorCode.LOG_DIR_NOT_FOUND, (T, 1): ErrorCode.LOG_DIR_NOT_FOUND}
            assert alter({a: {T: [0]}}) == {(T, 0): ErrorCode.NONE}        # already there: nothing to do
            assert logs.get_future_log(T, 0) is None
            # a partition not hosted yet: its dir is remembered, and it is created there
            assert alter({b: {T: [5]}, a: {"x" * 250: [0]}}) == {
                (T, 5): ErrorCode.REPLICA_NOT_AVAILABLE, ("x" * 250, 0): ErrorCode.INVALID_TOPIC_EXCEPTION}
            rm.apply_local_leadership(T, TOPIC_ID, {5: leader()})
            assert logs.log_dir_of(T, 5) == b
            logs.cordoned_log_dirs = frozenset({b})
            assert alter({b: {T: [0]}}) == {(T, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
            rm.apply_local_leadership(T, TOPIC_ID, {i: leader() for i in (6, 7, 8)})
            assert {logs.log_dir_of(T, i) for i in (6, 7, 8)} == {a}     # new partitions avoid the cordoned dir
            logs.cordoned_log_dirs = frozenset({a, b})
            rm.apply_local_leadership(T, TOPIC_ID, {9: leader()})
            assert logs.log_dir_of(T, 9) == a                              # all cordoned: the first, as Kafka
            described = api.handle_describe_log_dirs(types.SimpleNamespace(body=DescribeLogDirsRequest(topics=None)))
            assert {r.log_dir: r.is_cordoned for r in described.results} == {a: True, b: True}
            denied = DescribeLogDirsApi(rm, types.SimpleNamespace(authorize_cluster=lambda request, op: False))
            out = denied.handle_alter_replica_log_dirs(types.SimpleNamespace(body=request({b: {T: [0, 1]}})))
            assert errors_of(out) == {(T, 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                      (T, 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    asyncio.run(main())


def test_a_move_to_another_dir_replaces_the_one_under_way(tmp_path):
    a, b, config = two_dirs(tmp_path)
    c = str(tmp_path / "c")

    async def main():
        # a byte a second: the move never finishes here
        async with hosting([a, b, c], config, alter_log_dirs_rate=lambda: 1) as (logs, rm):
            rm.apply_local_leadership(T, TOPIC_ID, {0: leader()})
            produce(rm, 0, [b"v"] * 10)
            assert rm.alter_replica_log_dirs({(T, 0): b}) == {(T, 0): ErrorCode.NONE}
            assert logs.log_dir_of(T, 0, future=True) == b
            assert rm.alter_replica_log_dirs({(T, 0): c}) == {(T, 0): ErrorCode.NONE}
            assert logs.log_dir_of(T, 0, future=True) == c
            assert not any(n.endswith("-future") for n in os.listdir(b))
            assert rm.alter_replica_log_dirs({(T, 0): a}) == {(T, 0): ErrorCode.NONE}    # back home: the move stops
            assert logs.get_future_log(T, 0) is None and rm.get_partition(T, 0).future_log is None
    asyncio.run(main())


def test_a_followers_truncation_during_a_move_truncates_what_the_future_log_copied(tmp_path):
    """The copy steps and the swap are driven by hand here (no mover thread), around a follower's truncation."""
    a, b, config = two_dirs(tmp_path)

    async def main():
        async with hosting([a, b], config) as (logs, rm):
            rm.apply_local_leadership(T, TOPIC_ID, {0: PartitionLeadership(2, 1, (ME, 2), (ME, 2))})

            def follow(start: int, values: list[bytes], epoch: int) -> None:
                data = bytearray()
                for i, value in enumerate(values):
                    data += build_batch([(b"k", value, [], 1000)], base_offset=start + i, partition_leader_epoch=epoch)
                rm.append_to_follower(T, 0, start, data, start + len(values), 0)
            first, second = [b"old-%d" % i for i in range(100)], [b"new-%d" % i for i in range(40)]
            follow(0, first, 1)
            partition = rm.get_partition(T, 0)
            logs.maybe_update_preferred_log_dir(T, 0, b)
            partition.set_future_log(logs.create_future_log(T, 0))
            while partition.copy_to_future_log(1 << 20) > 0:
                pass
            assert partition.future_log_end_offset == 100
            rm.truncate_follower(T, 0, 60)              # the leader diverged: our log, and the copy, lose 60..99
            assert partition.future_log_end_offset == 60
            follow(60, second, 2)
            while partition.copy_to_future_log(1 << 20) > 0:
                pass
            assert rm._replace_current_with_future_log(partition)
            assert os.path.dirname(partition.log_dir) == b and read_all(rm, 0) == first[:60] + second
            assert partition.end_offset_for_epoch(1) == (1, 60) and partition.latest_epoch == 2
    asyncio.run(main())


def test_a_swap_cut_short_by_a_crash_is_finished_at_the_next_start(tmp_path):
    """The current dir renamed `-delete` with the future's id, the future not renamed yet: the future is whole."""
    a, b, config = two_dirs(tmp_path)
    logs = LogManager([a, b], config, topic_config=lambda topic: config, cleaner_enabled=False)
    logs.startup(background=False)
    lg = logs.get_or_create_log(T, 0)
    lg.append_as_leader(bytearray(build_batch([(b"k", b"v", [], 1000)])), 0)
    logs.shutdown()
    unique = "ab" * 16
    os.rename(os.path.join(a, "t-0"), os.path.join(b, f"t-0.{unique}-future"))
    os.makedirs(os.path.join(a, f"t-0.{unique}-delete"))
    os.makedirs(os.path.join(a, f"u-0.{'cd' * 16}-future"))      # a future log with no current log and no twin
    again = LogManager([a, b], config, topic_config=lambda topic: config, cleaner_enabled=False)
    again.startup(background=False)
    try:
        assert again.log_dir_of(T, 0) == b and again.get_log(T, 0).log_end_offset == 1
        assert not os.path.exists(os.path.join(a, f"t-0.{unique}-delete"))
        assert os.path.isdir(os.path.join(a, f"u-0.{'cd' * 16}-future")) and again.get_log("u", 0) is None
        assert again.get_future_log("u", 0) is None       # not loaded either: a new log of u-0 cannot overwrite it
    finally:
        again.shutdown()


# ---------------------------------------------------------------- real brokers

def alter_dir(broker: EmbeddedBroker, topic: str, destination: str) -> int:
    c = WireClient("127.0.0.1", broker.port)
    try:
        return errors_of(c.call(ALTER_REPLICA_LOG_DIRS, 2, request({destination: {topic: [0]}})))[(topic, 0)]
    finally:
        c.close()


def describe(broker: EmbeddedBroker, version: int = 5):
    c = WireClient("127.0.0.1", broker.port)
    try:
        return c.call(DESCRIBE_LOG_DIRS, version, DescribeLogDirsRequest(topics=None))
    finally:
        c.close()


def replicas(broker: EmbeddedBroker, topic: str) -> dict[tuple[str, bool], tuple[int, int]]:
    """(log dir, is future) -> (size, offset lag) of the topic's partition 0."""
    return {(r.log_dir, p.is_future_key): (p.partition_size, p.offset_lag) for r in describe(broker).results
            for t in r.topics if t.name == topic for p in t.partitions}


def wait_for(check, what: str, timeout: float = 60.0):
    return wait_until(check, timeout, what, interval=0.05)


def set_broker_config(broker: EmbeddedBroker, name: str, value: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[ConfigEntry(
        name, value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def set_throttle(broker: EmbeddedBroker, rate: int) -> None:
    set_broker_config(broker, "replica.alter.log.dirs.io.max.bytes.per.second", str(rate))


class Load:
    """An idempotent producer sending numbered values until stopped; the acknowledged ones, in order."""

    def __init__(self, bootstrap: str, topic: str, start: int = 0, pause: float = 0.0):
        """``pause``: seconds between bursts of 100 records (0.1: some 110 KB/s at most; 0: as fast as it goes)."""
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120000,
                                  "batch.size": 65536})
        self.topic, self.next, self.acked, self.failed, self.pause = topic, start, [], [], pause
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err, msg):
        (self.failed if err is not None else self.acked).append(msg.value())

    def _run(self):
        while not self.stopping.is_set():
            for _ in range(100):
                try:
                    self.producer.produce(self.topic, b"%08d" % self.next + b"." * 100, partition=0,
                                          on_delivery=self._delivered)
                    self.next += 1
                except BufferError:
                    break
            self.producer.poll(0.005)
            if self.pause:
                self.stopping.wait(self.pause)
        self.producer.flush(60)

    def stop(self) -> list[bytes]:
        self.stopping.set()
        self.thread.join(90)
        return self.acked


def consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error() is None:
                    out.append(m.value())
    finally:
        c.close()
    return out


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


@pytest.fixture
def two_dir_broker(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    broker = EmbeddedBroker({"log.segment.bytes": 256 * 1024}, data_dir=str(tmp_path / "data"),
                            log_dir=",".join(dirs))
    broker.start()
    yield broker, dirs
    broker.close()


def test_a_move_under_produce_load_survives_a_sigkill_in_the_middle_of_the_copy(two_dir_broker):
    broker, dirs = two_dir_broker
    topic = "moving"
    create_topic(broker.bootstrap, topic)
    source = next(d for d in dirs if Path(d, f"{topic}-0").exists())
    destination = next(d for d in dirs if d != source)
    load = Load(broker.bootstrap, topic)
    wait_for(lambda: len(load.acked) > 30000, "a log of a few MB")
    set_throttle(broker, 300_000)
    assert alter_dir(broker, topic, destination) == ErrorCode.NONE
    during = wait_for(lambda: (r := replicas(broker, topic)).get((destination, True), (0, 0))[0] > 0 and r,
                      "the future replica under way")
    assert during[(destination, True)][1] > 0 and during[(source, False)][1] == 0     # its lag, and none for the log
    assert during[(destination, True)][0] < during[(source, False)][0]
    assert any(n.endswith("-future") for n in os.listdir(destination))
    broker.kill()                        # in the middle of the copy
    broker.start()
    first = load.stop()                  # what it had in flight goes to the restarted broker
    resumed = wait_for(lambda: replicas(broker, topic), "DescribeLogDirs after the restart")
    # the current log is still the partition's, and the move goes on from what the future log had
    assert {(source, False), (destination, True)} <= set(resumed)
    assert resumed[(destination, True)][0] >= during[(destination, True)][0]
    load = Load(broker.bootstrap, topic, start=10_000_000)
    set_throttle(broker, 1 << 40)
    wait_for(lambda: set(replicas(broker, topic)) == {(destination, False)}, "the move to complete")
    second = load.stop()
    assert not Path(source, f"{topic}-0").exists() and Path(destination, f"{topic}-0").is_dir()
    assert not any(n.endswith("-future") for n in os.listdir(destination))
    acked = first + second
    got = consume_all(broker.bootstrap, topic, len(acked))
    # every acknowledged record is there, once, in the order it was sent; nothing unacknowledged was invented
    assert len(got) == len(set(got))
    acked_set = set(acked)
    assert [v for v in got if v in acked_set] == acked


def test_cordoned_log_dirs_take_no_new_replica_and_describe_log_dirs_v5_says_so(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with EmbeddedBroker({"cordoned.log.dirs": dirs[0]}, data_dir=str(tmp_path / "data"),
                        log_dir=",".join(dirs)) as broker:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("spread", 4, 1)])["spread"].result(timeout=30)
        wait_for(lambda: len(os.listdir(dirs[1])) and all(Path(dirs[1], f"spread-{i}").is_dir() for i in range(4)),
                 "the partitions")
        assert not any(n.startswith("spread-") for n in os.listdir(dirs[0]))
        assert {r.log_dir: r.is_cordoned for r in describe(broker, 5).results} == {dirs[0]: True, dirs[1]: False}
        assert {r.log_dir: r.is_cordoned for r in describe(broker, 4).results} == {dirs[0]: False, dirs[1]: False}
        assert alter_dir(broker, "spread", dirs[0]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        # dynamic, per broker: every dir cordoned, no new topic can be placed; uncordoned, the move is allowed
        set_broker_config(broker, "cordoned.log.dirs", "*")
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic("nowhere", 1, 1)])["nowhere"].result(timeout=30)
        assert refused.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
        assert all(r.is_cordoned for r in describe(broker, 5).results)
        set_broker_config(broker, "cordoned.log.dirs", "")
        admin.create_topics([NewTopic("nowhere", 1, 1)])["nowhere"].result(timeout=30)
        assert alter_dir(broker, "spread", dirs[0]) == ErrorCode.NONE
        wait_for(lambda: Path(dirs[0], "spread-0").is_dir(), "the move into the uncordoned dir")


@pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))
def test_one_broker_of_a_zookeeper_cluster_moves_its_replica_while_it_follows(tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    with EmbeddedCluster(3, data_dir=str(tmp_path / "cluster")) as cluster:
        mover = cluster.brokers[1]
        dirs = [str(tmp_path / "b1-a"), str(tmp_path / "b1-b")]
        mover.stop()
        mover.log_dir = ",".join(dirs)           # broker 1 gets two log dirs
        mover.start()
        cluster.wait_until(lambda: cluster.registered() == {0, 1, 2}, 30, "broker 1 to register again")
        cluster.wait_for_controller()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        # a loaded machine can take a while to answer the first CreateTopics after a restart
        admin.create_topics([NewTopic("jbod", 1, replica_assignment=[[0, 1, 2]])])["jbod"].result(timeout=120)
        cluster.wait_for_leader("jbod", 0)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
        sent = [b"%05d" % i for i in range(2000)]
        for value in sent[:1000]:
            producer.produce("jbod", value, partition=0)
        assert producer.flush(30) == 0
        wait_for(lambda: any(Path(d, "jbod-0").is_dir() for d in dirs), "broker 1's replica of jbod-0")
        source = next(d for d in dirs if Path(d, "jbod-0").is_dir())
        destination = next(d for d in dirs if d != source)
        assert alter_dir(mover, "jbod", destination) == ErrorCode.NONE
        for value in sent[1000:]:               # the follower fetches on while its replica moves
            producer.produce("jbod", value, partition=0)
        assert producer.flush(30) == 0
        wait_for(lambda: set(replicas(mover, "jbod")) == {(destination, False)}, "the move on broker 1")
        assert not Path(source, "jbod-0").exists()
        # broker 1 back in the ISR (a busy machine can slow the moving follower past the lag limit) before
        # the others go, so that it is elected
        cluster.wait_until(lambda: set(cluster.partition_state("jbod", 0)["isr"]) == {0, 1, 2}, 60,
                           "broker 1 in jbod-0's ISR")
        cluster.stop(0)
        cluster.stop(2)                        # broker 1 alone serves it now, from its new dir
        cluster.wait_for_leader("jbod", 0, exclude={0, 2})
        assert consume_all(cluster.brokers[1].bootstrap, "jbod", len(sent)) == sent
