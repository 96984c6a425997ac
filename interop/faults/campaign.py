"""A fault campaign against a 3-broker cluster, checked as a Jepsen history (kafka_compat.history).

The cluster: 3 brokers, a topic of 3 partitions with RF 3 and min.insync.replicas=2, brokers
reaching ZooKeeper and each other through cuttable links (EmbeddedCluster network_faults) and
one broker (``DISK_BROKER``) with its log directory on a small filesystem of its own (disks=).
Idempotent acks=all producers (confluent-kafka) send unique values the whole time and a consumer
reads the partitions from the beginning; every send, acknowledgement and read goes into a
History. Faults run one after another; after each the campaign waits until the cluster is whole
again (every broker registered, every partition led with its 3 replicas in sync) before the next.
At the end the producers are flushed, every partition is read to its end, and the history is
checked: no acknowledged record lost, none duplicated, each producer's order kept, nothing read
that was not sent.

Fault kinds (KINDS), each injected, held past the timeout it is meant to trigger, then healed:
- pause-broker: SIGSTOP of a partition leader or the controller, longer than its ZooKeeper session;
- pause-zookeeper: SIGSTOP of ZooKeeper, longer than the sessions;
- partition-brokers: a leader and one of its followers (not the controller) cut off from each other
  (blackhole or reset);
- isolate-zookeeper: a leader or the controller cut off from ZooKeeper past its session;
- full-disk: DISK_BROKER's filesystem (its only log directory) filled while writes go on: the first
  write that fails takes the directory offline and, none being left, the broker halts as Kafka's does;
  the controller moves its leadership once its session ends; then the space is freed and the broker
  restarted (an offline log directory comes back only with a restart, in Kafka too);
- slow-disk: DISK_BROKER's device throttled to a few writes a second (blkio), then unthrottled;
- kill: SIGKILL of a leader or the controller, then a restart.
"""
from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from typing import Callable

from kafka_compat.history import History, Report, check
from kafka_compat.testing import EmbeddedCluster

TOPIC = "chaos"
PARTITIONS = 3
DISK_BROKER = 2
DISK_BYTES = 96 << 20
SESSION_MS = 4000
WAIT = 120.0
STALL = 60.0        # seconds without progress after which a client counts as stalled
KINDS = ("pause-broker", "pause-zookeeper", "partition-brokers", "isolate-zookeeper", "full-disk", "slow-disk", "kill")

SETTINGS = {"min.insync.replicas": 2, "default.replication.factor": 3, "zookeeper.session.timeout.ms": SESSION_MS,
            "replica.lag.time.max.ms": 6000, "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": False,
            "offsets.topic.num.partitions": 3, "log.retention.check.interval.ms": 5000}
# small segments, so that a filled disk is felt soon (each segment reserves its blocks ahead, up to its
# size), and retention, so that a long campaign does not fill DISK_BROKER's small disk by itself
TOPIC_CONFIG = {"segment.bytes": str(1 << 20), "retention.bytes": str(12 << 20)}


def missing() -> str | None:
    """Why a campaign cannot run here, or None."""
    from kafka_compat.faults import disk
    from kafka_compat.testing import zookeeper_missing
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed"
    return zookeeper_missing() or disk.missing() or disk.throttling_missing()


@dataclasses.dataclass
class CampaignResult:
    faults: dict[str, int]
    effects: dict[str, int]            # of the faults, those whose effect was seen
    report: Report
    restarts_after_full_disk: int = 0
    seconds: float = 0.0
    produce_errors: list = dataclasses.field(default_factory=list)
    stuck: str | None = None           # why the campaign stopped early: the cluster never became whole again
    stalls: list = dataclasses.field(default_factory=list)    # clients renewed after making no progress

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n} ({self.effects[k]} with effect)" for k, n in self.faults.items())
        return (f"{sum(self.faults.values())} faults ({kinds}) in {self.seconds:.0f}s; {self.report.summary()}; "
                f"produce errors {len(self.produce_errors)}; restarts after a full disk {self.restarts_after_full_disk}"
                + (f"; clients renewed after stalling {len(self.stalls)}" if self.stalls else "")
                + (f"; STOPPED EARLY: {self.stuck}" if self.stuck else ""))

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.produce_errors and self.stuck is None and not self.stalls


def value_of(msg) -> str:
    """The unique value a record carries (before its padding)."""
    return msg.value().split(b"|", 1)[0].decode(errors="replace")


class Producers:
    """Idempotent acks=all producers writing p<i>-<n> round robin over the partitions, each logging to the history."""

    def __init__(self, bootstrap: str, history: History, count: int = 2, rate: float = 100.0, padding: int = 1000):
        import confluent_kafka as ck
        self.history = history
        self.errors: list = []
        self.stop = threading.Event()
        self.rate = rate
        self.padding = b"|" + b"x" * padding    # bulk, so that a filled disk is soon felt
        self.ck = ck
        self.config = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                       "delivery.timeout.ms": 900000, "request.timeout.ms": 10000, "log_level": 3}
        self.producers = [ck.Producer(self.config) for _ in range(count)]
        self.retired: list = []                 # producers a fatal error ended, flushed at the end too
        self.fatal: list[str] = []              # those fatal errors
        self.names = [f"p{i}" for i in range(count)]
        self.last_ack = [time.monotonic()] * count     # when each producer's current generation last had one
        self.renew = [False] * count
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(count)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _delivered(self, err, msg) -> None:
        value = value_of(msg)
        if err is None:
            self.history.ack(value, msg.partition(), msg.offset())
            i = int(value[1:].split("-", 1)[0].split(".", 1)[0])
            if value.startswith(self.names[i] + "-"):
                self.last_ack[i] = time.monotonic()
        else:
            self.errors.append((value, str(err)))
            self.history.fail(value, str(err))

    def _run(self, i: int) -> None:
        generation = 0
        while not self.stop.is_set():
            self.names[i] = f"p{i}" if not generation else f"p{i}.{generation}"
            self.last_ack[i] = time.monotonic()
            try:
                self._produce(i, self.names[i])
            except self.ck.KafkaException as e:
                # a fatal error (the idempotent producer cannot go on): counted as a produce error; a new
                # producer (a new producer id, new values) carries on so the campaign still checks the rest
                self.fatal.append(str(e))
                self.errors.append((f"p{i}", str(e)))
            if self.stop.is_set():
                break
            self.retired.append(self.producers[i])
            self.producers[i] = self.ck.Producer(self.config)
            generation += 1

    def stalled(self, seconds: float) -> list[int]:
        """The producers without an acknowledgement for ``seconds`` while another had one since."""
        now, newest = time.monotonic(), max(self.last_ack)
        return [i for i, t in enumerate(self.last_ack) if now - t > seconds and newest > t and not self.renew[i]]

    def _produce(self, i: int, name: str) -> None:
        producer, n = self.producers[i], 0
        pause = 1.0 / self.rate
        while not self.stop.is_set() and not self.renew[i]:
            value = f"{name}-{n}"
            try:
                producer.produce(TOPIC, value.encode() + self.padding, partition=n % PARTITIONS, on_delivery=self._delivered)
            except BufferError:
                producer.poll(0.1)
                continue
            self.history.send(name, value)       # after produce: a BufferError sent nothing
            n += 1
            producer.poll(pause)
        self.renew[i] = False        # renewed (what it still holds is flushed at the end)

    @property
    def acked(self) -> int:
        return sum(1 for e in self.history.events if e[0] == "ack")

    def finish(self, timeout: float = 600.0) -> int:
        """Stop sending; wait for every outstanding record. Returns how many are still outstanding."""
        self.stop.set()
        for t in self.threads:
            t.join()
        return sum(p.flush(timeout) for p in self.producers) + sum(p.flush(10) for p in self.retired)


class Reader:
    """A consumer reading every partition from the beginning (read_committed), logging each read."""

    def __init__(self, bootstrap: str, history: History, name: str, start: dict[int, int] | None = None):
        import confluent_kafka as ck
        self.ck = ck
        self.history = history
        self.name = name
        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{name}-{time.monotonic_ns()}",
                                     "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
                                     "isolation.level": "read_committed", "log_level": 3})
        start = start or {}
        self.consumer.assign([ck.TopicPartition(TOPIC, p, start.get(p, ck.OFFSET_BEGINNING)) for p in range(PARTITIONS)])
        self.next = {p: start.get(p, 0) for p in range(PARTITIONS)}
        self.progress = time.monotonic()         # when it last read a record
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def poll(self, timeout: float = 0.5) -> None:
        for m in self.consumer.consume(500, timeout):
            if m.error():
                continue
            self.history.read(self.name, m.partition(), m.offset(), value_of(m))
            self.next[m.partition()] = m.offset() + 1
            self.progress = time.monotonic()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.poll()

    def read_to(self, ends: dict[int, int], timeout: float = WAIT) -> bool:
        """Poll until every partition has been read up to ``ends`` (exclusive); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.next[p] >= end for p, end in ends.items()):
                return True
            self.poll()
        return False

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        self.consumer.close()


def make_cluster(data_dir: str | None = None) -> EmbeddedCluster:
    return EmbeddedCluster(3, SETTINGS, network_faults=True, disks={DISK_BROKER: DISK_BYTES}, data_dir=data_dir)


class Campaign:
    def __init__(self, cluster: EmbeddedCluster, seed: int, log: Callable[[str], None] = print):
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.log = log
        self.restarts_after_full_disk = 0

    # -- waits
    def whole(self) -> bool:
        c = self.cluster
        if c.registered() != set(range(len(c.brokers))) or c.controller() is None:
            return False
        for p in range(PARTITIONS):
            state = c.partition_state(TOPIC, p)
            if state is None or state["leader"] < 0 or len(state["isr"]) < 3:
                return False
        return True

    def wait_whole(self, timeout: float = WAIT) -> None:
        try:
            self.cluster.wait_until(self.whole, timeout, "the cluster to be whole again")
        except TimeoutError as e:
            raise TimeoutError(f"{e}: {[self.cluster.partition_state(TOPIC, p) for p in range(PARTITIONS)]}, "
                               f"registered {self.cluster.registered()}\n{self.cluster.logs()}") from None

    def victim(self) -> tuple[int, str]:
        """A partition leader (two times in three) or the controller."""
        c = self.cluster
        if self.rng.random() < 1 / 3:
            return c.wait_for_controller(WAIT), "controller"
        p = self.rng.randrange(PARTITIONS)
        return c.wait_for_leader(TOPIC, p, WAIT), f"leader of {p}"

    def hold(self, lo: float, hi: float, effect: Callable[[], bool] | None = None) -> bool:
        """Keep a fault for at least ``lo`` seconds and until ``effect()`` holds, at most ``hi``;
        whether the effect was seen."""
        start = time.monotonic()
        seen = False
        while True:
            elapsed = time.monotonic() - start
            if effect is not None and not seen:
                seen = bool(effect())
            if elapsed >= hi or (elapsed >= lo and (effect is None or seen)):
                return seen
            time.sleep(0.2)

    def _gone(self, b: int) -> Callable[[], bool]:
        return lambda: b not in self.cluster.registered()

    def _sessions(self) -> dict[int, int]:
        owners = {}
        for b in range(len(self.cluster.brokers)):
            try:
                stat = self.cluster.zk.exists(f"/brokers/ids/{b}")
            except Exception:
                stat = None
            if stat is not None:
                owners[b] = stat.ephemeralOwner
        return owners

    def _broker_log_mentions(self, b: int, text: str) -> Callable[[], bool]:
        """Whether broker ``b``'s log says ``text`` from now on (read from the log's present end)."""
        path = self.cluster.brokers[b].log_path
        start = os.path.getsize(path)

        def said() -> bool:
            with open(path, "rb") as f:
                f.seek(start)
                return text.encode() in f.read()
        return said

    # -- faults: each returns (what it did, whether its effect was seen)
    def pause_broker(self) -> tuple[str, bool]:
        """Effect: the paused broker's session expired (its registration went)."""
        b, role = self.victim()
        self.cluster.pause(b)
        try:
            seen = self.hold(SESSION_MS / 1000 * 1.2, 30, self._gone(b))
        finally:
            self.cluster.resume(b)
        return f"paused broker {b} ({role})", seen

    def pause_zookeeper(self) -> tuple[str, bool]:
        """Effect: every broker lost its ZooKeeper connection for longer than it may lead without one (it
        stopped acting as leader). Whether ZooKeeper then expires the sessions is its own affair (clients
        that reconnect at once may keep them); the sessions that were replaced are counted."""
        before = self._sessions()
        said = [self._broker_log_mentions(b, "not acting as leader until") for b in range(len(self.cluster.brokers))]
        self.cluster.pause_zookeeper()
        try:
            seen = self.hold(SESSION_MS / 1000 * 1.5, SESSION_MS / 1000 * 2.5, lambda: all(s() for s in said))
        finally:
            self.cluster.resume_zookeeper()
        self.hold(0, 10, lambda: len(self._sessions()) == len(self.cluster.brokers))
        expired = sum(1 for b, o in self._sessions().items() if before.get(b) not in (None, o))
        return f"paused ZooKeeper ({expired} sessions expired)", seen

    def partition_brokers(self) -> tuple[str, bool]:
        """Effect: the cut-off follower left the partition's ISR (or the leader changed). The follower
        cut off is not the controller, so that the leader's AlterPartition can still shrink the ISR
        (a leader cut off from the controller keeps its ISR and waits: no acknowledgement, no progress)."""
        p = self.rng.randrange(PARTITIONS)
        leader = self.cluster.wait_for_leader(TOPIC, p, WAIT)
        controller = self.cluster.wait_for_controller(WAIT)
        other = self.rng.choice([b for b in range(3) if b not in (leader, controller)])
        mode = self.rng.choice(("blackhole", "reset"))

        def shrunk() -> bool:
            state = self.cluster.partition_state(TOPIC, p)
            return state is not None and (other not in state["isr"] or state["leader"] != leader)
        self.cluster.partition(leader, other, mode)
        try:
            seen = self.hold(4, 15, shrunk)
        finally:
            self.cluster.heal()
        return f"cut brokers {leader} (leader of {p}) and {other} apart ({mode})", seen

    def isolate_zookeeper(self) -> tuple[str, bool]:
        """Effect: the cut-off broker's session expired (its registration went)."""
        b, role = self.victim()
        mode = self.rng.choice(("blackhole", "reset"))
        self.cluster.isolate_from_zookeeper(b, mode)
        try:
            seen = self.hold(SESSION_MS / 1000 * 1.2, 30, self._gone(b))
        finally:
            self.cluster.heal()
        return f"cut broker {b} ({role}) off ZooKeeper ({mode})", seen

    def full_disk(self) -> tuple[str, bool]:
        """Effect: the broker met ENOSPC, its only log dir went offline and it halted, and none of the
        partitions is led by it any more (the controller moved their leadership)."""
        c = self.cluster
        b = c.brokers[DISK_BROKER]
        role = "leader" if DISK_BROKER in {c.leader(TOPIC, p) for p in range(PARTITIONS)} else "follower"
        enospc = self._broker_log_mentions(DISK_BROKER, "No space left on device")
        halted = self._broker_log_mentions(DISK_BROKER, "Shutdown broker because all log dirs in")

        def moved() -> bool:
            return all(c.leader(TOPIC, p) not in (None, -1, DISK_BROKER) for p in range(PARTITIONS))
        def halting() -> bool:
            c.fill_disk(DISK_BROKER)    # again: retention deletes segments and would free blocks meanwhile
            return not b.running
        try:
            seen = self.hold(3, WAIT, halting) and enospc() and halted()
            seen = self.hold(0, WAIT, moved) and seen
        finally:
            c.free_disk(DISK_BROKER)
        role += f", {c.disks[DISK_BROKER].free_bytes >> 20} MiB free again"
        if b.running:                   # it did not halt (no write failed): stop it before the restart
            c.stop(DISK_BROKER)
        self.hold(0, WAIT, self._gone(DISK_BROKER))    # its old session must end before it registers again
        c.start_broker(DISK_BROKER)
        self.restarts_after_full_disk += 1
        return f"filled broker {DISK_BROKER}'s disk ({role}); it halted; restarted it", seen

    def slow_disk(self) -> tuple[str, bool]:
        """Effect: the broker wrote through the throttled device meanwhile (the cgroup's count of writes grew)."""
        disk = self.cluster.disks[DISK_BROKER]
        iops = self.rng.choice((5, 10, 20))
        self.cluster.slow_disk(DISK_BROKER, write_iops=iops)
        before = disk.writes()
        try:
            self.hold(4, 10)
            writes = disk.writes() - before
        finally:
            self.cluster.fast_disk(DISK_BROKER)
        return f"slowed broker {DISK_BROKER}'s disk to {iops} writes/s ({writes} writes meanwhile)", writes > 0

    def kill(self) -> tuple[str, bool]:
        """Effect: another broker leads or controls (the killed one's registration went)."""
        b, role = self.victim()
        self.cluster.kill(b)
        seen = self.hold(0, WAIT, self._gone(b))
        self.cluster.wait_for_controller(WAIT, exclude={b})
        self.cluster.start_broker(b)
        return f"killed broker {b} ({role})", seen

    def inject(self, kind: str) -> tuple[str, bool]:
        return getattr(self, kind.replace("-", "_"))()


def run_campaign(faults_per_kind: int | dict[str, int] = 1, *, kinds: tuple[str, ...] = KINDS, seed: int = 0,
                 log: Callable[[str], None] = print, history_path: str | None = None,
                 deadline: float | None = None, rate: float = 100.0, data_dir: str | None = None) -> CampaignResult:
    """Run the faults (``faults_per_kind`` of each of ``kinds``, shuffled) and check the history.
    ``data_dir``: the cluster's, kept afterwards (the brokers' logs and data) for a look.
    ``deadline`` (time.monotonic()): start no new fault after it."""
    counts = faults_per_kind if isinstance(faults_per_kind, dict) else {k: faults_per_kind for k in kinds}
    plan = [k for k, n in counts.items() for _ in range(n)]
    rng = random.Random(seed)
    rng.shuffle(plan)
    history = History()
    done = {k: 0 for k in counts}
    effects = {k: 0 for k in counts}
    started = time.monotonic()
    stuck = None
    stalls: list[str] = []
    with make_cluster(data_dir) as cluster:
        _create_topic(cluster)
        campaign = Campaign(cluster, seed, log)
        producers = Producers(cluster.bootstrap, history, rate=rate)
        reader = Reader(cluster.bootstrap, history, "live")
        producers.start()
        reader.thread.start()
        try:
            cluster.wait_until(lambda: producers.acked > 50, WAIT, "the first acknowledgements")
            for i, kind in enumerate(plan):
                if deadline is not None and time.monotonic() > deadline:
                    log(f"deadline reached after {i} faults")
                    break
                t = time.monotonic()
                what, seen = campaign.inject(kind)
                try:
                    campaign.wait_whole()
                except TimeoutError as e:     # a failure of its own; the history is still checked below
                    stuck = f"after fault {i + 1} ({what}): {e}"
                    log(f"[{i + 1}/{len(plan)}] {what}; STUCK: {e}")
                    break
                done[kind] += 1
                effects[kind] += seen
                log(f"[{i + 1}/{len(plan)}] {what}; {'effect seen' if seen else 'NO EFFECT SEEN'}; "
                    f"whole again after {time.monotonic() - t:.1f}s; "
                    f"{producers.acked} acknowledged so far"
                    + (f"; FATAL producer errors so far: {producers.fatal}" if producers.fatal else ""))
                reader = _renew_stalled(cluster, history, producers, reader, stalls, log)
            if stuck is None:
                before = producers.acked
                cluster.wait_until(lambda: producers.acked > before + 50, WAIT, "writes after the last fault")
        finally:
            outstanding = producers.finish()
            reader.close()
        if outstanding:
            log(f"{outstanding} records never answered")
        final = Reader(cluster.bootstrap, history, "final")
        try:
            _, ends = _watermarks(final)
            if not final.read_to(ends):
                log(f"the final read did not reach {ends}: at {final.next}")
            starts, _ = _watermarks(final)     # after the read: retention may have moved them meanwhile
        finally:
            final.close()
    if history_path:
        history.dump(history_path)
    report = check(history, read_all=True, log_start=starts)
    return CampaignResult(done, effects, report, campaign.restarts_after_full_disk, time.monotonic() - started,
                          producers.errors, stuck, stalls)


def _renew_stalled(cluster, history: History, producers: Producers, reader: Reader, stalls: list[str],
                   log: Callable[[str], None]) -> Reader:
    """A client that made no progress for STALL seconds while the others did is named in the log and
    the result (a failure: the cause is in the kept brokers' logs) and replaced, so the rest of the run
    is still checked: a live reader that stopped would otherwise let retention delete unread records."""
    for i in producers.stalled(STALL):
        stalls.append(f"producer {producers.names[i]}: no acknowledgement for {STALL:.0f}s")
        log(f"STALLED: {stalls[-1]}; renewed")
        producers.renew[i] = True
    if time.monotonic() - reader.progress > STALL and max(producers.last_ack) > reader.progress:
        stalls.append(f"live reader: nothing read for {STALL:.0f}s, at {reader.next}")
        log(f"STALLED: {stalls[-1]}; renewed")
        reader.close()
        reader = Reader(cluster.bootstrap, history, "live", start=reader.next)
        reader.thread.start()
    return reader


def _create_topic(cluster: EmbeddedCluster) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + WAIT
    while True:     # the brokers may not know the controller yet ("Failed while waiting for controller")
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=TOPIC_CONFIG)], request_timeout=15)[TOPIC].result(30)
            break
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    Campaign(cluster, 0).wait_whole()


def _watermarks(reader: Reader) -> tuple[dict[int, int], dict[int, int]]:
    """Per partition, the log start offset and the high watermark."""
    ck = reader.ck
    starts, ends = {}, {}
    deadline = time.monotonic() + WAIT
    for p in range(PARTITIONS):
        while p not in ends:
            try:
                starts[p], ends[p] = reader.consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, p), timeout=10)
            except ck.KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    return starts, ends
