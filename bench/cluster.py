"""Cluster benchmark: what replication costs, how fast failover is, what a second broker adds.

    python bench/cluster.py [--records N] [--rounds R] [--trials T] [--only replication e2e failover scale kafka]

Every comparison runs side by side in one run (the order alternating between rounds), on this machine:

  replication  N x 1 KiB records, acks=all to a topic of replication factor 3 (min.insync.replicas=2)
               on three brokers, against acks=1 on one broker (the single node): MB/s, and the brokers'
               CPU seconds per GB produced (all three brokers' CPU added up for the cluster)
  e2e          1,000 records/s for 10 s, acks=all, replication factor 3, the clients' default settings:
               p50/p99/p99.9 from produce() to the consumer (which sees a record once the ISR has it),
               p50/p99 from produce() to the acknowledgement, and the brokers' mean CPU share (a core = 1.0) over the run; against the single node with
               acks=1 in the same round, and the ratio of the p99s (the machine's load weighs on both)
  failover     an idempotent acks=all producer writes every 5 ms while the partition's leader is
               SIGKILLed (zookeeper.session.timeout.ms=6000): time from the kill to the first
               acknowledgement of a record produced after it; and SIGTERMed (controlled shutdown):
               the longest time without an acknowledgement around the stop. Each trial starts once the
               cluster is whole again (every replica in the ISR) and the producer has delivered to every
               broker since the restart: otherwise the client may still be in its reconnect backoff
               (reconnect.backoff.ms doubling up to reconnect.backoff.max.ms) towards the broker restarted
               a moment before, and controlled shutdown, which may hand leadership to that broker, would be
               timed together with the client's wait. --failover-kinds picks SIGKILL, SIGTERM or both;
               --keep-logs DIR keeps the broker logs of each trial over its target
  scale        N x 1 KiB acks=1 over 4 partitions: two brokers (replication factor 1, partitions spread
               over both) against one broker, aggregate MB/s, with the client's busiest thread
  kafka        our three brokers against three Apache Kafka 4.x brokers (KRaft, every node broker and
               controller, started by interop/reference.py), both with min.insync.replicas=2 and
               default.replication.factor=3, in alternating order, each freshly started: N x 1 KiB
               acks=all to a topic of replication factor 3 (MB/s, CPU per GB of the three brokers, for
               ours with ZooKeeper's added since it does the work Kafka's in-process controllers do)
               after an untimed produce of N/2 records to another topic (the JVMs' JIT), then e2e as
               above on the same cluster (its brokers_cpu_share, as e2e's, over the nominal seconds),
               and each side's start-up: from the start (ZooKeeper's for ours, the storage format for
               Kafka) until every broker answers Metadata listing all three. Ratios are kafka-compat /
               Kafka. Left out, with a message, where Kafka is not resolved (bash interop/maven.sh
               kafka) or there is no java

Brokers are kafka-compat processes (kafka_compat.testing: EmbeddedBroker, EmbeddedCluster with a real
ZooKeeper), and for `kafka` Kafka's JVMs. Prints a line per measurement as it goes, then one JSON line per
scenario with medians and ratios. Timing never runs in CI; tests/test_bench_scripts.py only checks that a
tiny run completes.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import workloads  # noqa: E402
from bench.contenders import first_answer, wait_quiet  # noqa: E402
from interop import reference  # noqa: E402
from kafka_compat.testing import EmbeddedBroker, EmbeddedCluster  # noqa: E402

KIB = 1024
PARTITIONS = 4
BROKERS_TOPIC = "failover-brokers"      # one partition led by each broker (replication factor 1)
WAIT = 120.0
CLUSTER = {"min.insync.replicas": 2, "default.replication.factor": 3, "zookeeper.session.timeout.ms": 6000,
           "group.initial.rebalance.delay.ms": 0}
# Kafka's three nodes get the same durability settings (reference.py adds no rebalance delay, internal topics
# at replication factor 3, and its JVM and thread settings)
KAFKA_CLUSTER = {"min.insync.replicas": 2, "default.replication.factor": 3}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        t = psutil.Process(pid).cpu_times()
        total += t.user + t.system
    return total


def cpu_split(pids: list[int]) -> tuple[float, float]:
    """(user, system) CPU seconds of ``pids``: what the brokers' Python costs apart from what the kernel does
    for them (copies into the page cache and sockets)."""
    times = [psutil.Process(pid).cpu_times() for pid in pids]
    return sum(t.user for t in times), sum(t.system for t in times)


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS, replication_factor: int = 1,
                 assignment: list[list[int]] | None = None, configs: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = (NewTopic(topic, len(assignment), replica_assignment=assignment, config=configs or {}) if assignment
           else NewTopic(topic, partitions, replication_factor, config=configs or {}))
    admin.create_topics([new], operation_timeout=60)[topic].result(WAIT)


def wait_for_isr(cluster: EmbeddedCluster, topic: str, partitions: int, size: int) -> None:
    def full():
        states = [cluster.partition_state(topic, p) for p in range(partitions)]
        return all(s and s["leader"] >= 0 and cluster.brokers[s["leader"]].running and len(s["isr"]) >= size
                   for s in states)
    cluster.wait_until(full, WAIT, f"{topic} to have {size} in-sync replicas everywhere")


def wait_for_isr_metadata(bootstrap: str, topic: str, partitions: int, size: int) -> None:
    """wait_for_isr for brokers whose state is not in our ZooKeeper (Kafka's): what Metadata says."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + WAIT
    while True:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 and len(p.isrs) >= size for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} does not have {size} in-sync replicas everywhere after {WAIT} s")
        time.sleep(0.2)


def timed_produce(bootstrap: str, topic: str, values: list[bytes], acks: str, pids: list[int]) -> dict:
    wait_quiet()
    user0, sys0 = cpu_split(pids)
    r = workloads.produce(bootstrap, topic, values, acks=acks, compression="none")
    user1, sys1 = cpu_split(pids)
    gb = len(values) * len(values[0]) / 1e9
    return {"mb_per_s": gb * 1e3 / r["seconds"], "cpu_s_per_gb": (user1 - user0 + sys1 - sys0) / gb,
            "user_s_per_gb": (user1 - user0) / gb, "sys_s_per_gb": (sys1 - sys0) / gb,
            "client_busiest_thread": r["client_busiest_thread"], "client_busiest_share": r["client_busiest_share"]}


class Single:
    """The single node (no ZooKeeper), as `kafka-compat serve` runs by default."""

    def __enter__(self):
        self.broker = EmbeddedBroker().start()
        self.bootstrap = self.broker.bootstrap
        self.pids = [self.broker.proc.pid]
        return self

    def __exit__(self, *exc):
        self.broker.close()


class Cluster:
    name = "kafka_compat"

    def __init__(self, brokers: int, overrides: dict | None = None):
        self.cluster = EmbeddedCluster(brokers, {**CLUSTER, **(overrides or {})})

    def __enter__(self):
        self.cluster.start()
        # clients' admin calls need every broker to know the controller
        self.cluster.wait_for_controller(WAIT)
        self.bootstrap = self.cluster.bootstrap
        self.pids = [b.proc.pid for b in self.cluster.brokers]
        self.control_pids = [self.cluster.zookeeper.proc.pid]      # what keeps the cluster's metadata
        return self

    def wait_for_isr(self, topic: str, partitions: int, size: int) -> None:
        wait_for_isr(self.cluster, topic, partitions, size)

    def __exit__(self, *exc):
        self.cluster.close()


class KafkaCluster:
    """Apache Kafka 4.x in KRaft mode (interop/reference.py's start_kraft: every node broker and controller,
    a voter each; its fixed 512 MiB G1 heap and 2 network and 2 I/O threads per node), the same face as
    Cluster: bootstrap, the brokers' pids (the controllers are in those JVMs, so no control_pids)."""

    name = "kafka"

    def __init__(self, brokers: int, overrides: dict | None = None):
        self.brokers, self.overrides = brokers, {**KAFKA_CLUSTER, **(overrides or {})}

    @staticmethod
    def available() -> bool:
        return reference.available()

    def __enter__(self):
        self.ref = reference.start_kraft(self.brokers, self.overrides)
        self.bootstrap = self.ref.bootstrap
        self.pids = [p.pid for p in self.ref.procs]
        self.control_pids: list[int] = []
        return self

    def wait_for_isr(self, topic: str, partitions: int, size: int) -> None:
        wait_for_isr_metadata(self.bootstrap, topic, partitions, size)

    def __exit__(self, *exc):
        self.ref.stop()


def create_when_ready(bootstrap: str, topic: str, **kwargs) -> None:
    """CreateTopics, again while the cluster's brokers are still hearing of the controller."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return create_topic(bootstrap, topic, **kwargs)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


# ---------------------------------------------------------------- scenarios
def versus_one_broker(values: list[bytes], rnd: int, brokers: int, acks: str, topic: dict, isr: int,
                      overrides: dict | None = None) -> dict:
    """The same 1 KiB produce against the single node (acks=1) and a cluster, in alternating order."""
    out = {}
    for which in (("single", "cluster") if rnd % 2 == 0 else ("cluster", "single")):
        if which == "single":
            with Single() as s:
                create_when_ready(s.bootstrap, "bench", partitions=PARTITIONS)
                out["one_broker"] = timed_produce(s.bootstrap, "bench", values, "1", s.pids)
        else:
            with Cluster(brokers, overrides) as c:
                create_when_ready(c.bootstrap, "bench", **topic)
                wait_for_isr(c.cluster, "bench", PARTITIONS, isr)
                out["cluster"] = timed_produce(c.bootstrap, "bench", values, acks, c.pids)
    for key in ("mb_per_s", "cpu_s_per_gb"):      # a tiny run may measure no CPU tick on one side
        a, b = out["cluster"][key], out["one_broker"][key]
        out[f"ratio_{key}"] = a / b if b else float("nan")
    return out


def replication(values: list[bytes], rnd: int) -> dict:
    """acks=all, replication factor 3 on three brokers ("cluster") against acks=1 on one ("one_broker")."""
    return versus_one_broker(values, rnd, 3, "all", {"partitions": PARTITIONS, "replication_factor": 3}, 3)


def scale(values: list[bytes], rnd: int) -> dict:
    """acks=1 on two brokers, replication factor 1 and partitions alternating between them, against one broker."""
    return versus_one_broker(values, rnd, 2, "1", {"assignment": [[p % 2] for p in range(PARTITIONS)]}, 1,
                             {"min.insync.replicas": 1, "default.replication.factor": 1})


def make_group_coordinator(bootstrap: str, group: str) -> None:
    """Have the group's coordinator (and so __consumer_offsets) exist before anything is timed.

    The e2e consumer has a group.id, so librdkafka looks up its coordinator, which creates
    __consumer_offsets: 50 partitions made leader or follower on every broker. Unprepared, that
    lands in the first second of the measurement and stalls every broker's loop for ~0.2 s.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                consumer.committed([TopicPartition("e2e", 0)], timeout=10)
                return
            except KafkaException:          # COORDINATOR_NOT_AVAILABLE while the topic is made
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def e2e(seconds: float, rnd: int = 0) -> dict:
    """acks=all on three brokers (replication factor 3, default client settings) against the single node
    with acks=1 ("one_broker"), in alternating order: the ratio of the p99s discounts the machine's load.
    Each side also gives ack_p50/p99_ms, produce() to the delivery report: the producer's share of the trip."""
    out = {"load_average_1m_start": os.getloadavg()[0]}
    for which in (("single", "cluster") if rnd % 2 == 0 else ("cluster", "single")):
        if which == "single":
            with Single() as s:
                create_when_ready(s.bootstrap, "e2e", partitions=PARTITIONS)
                make_group_coordinator(s.bootstrap, "e2e-e2e")
                wait_quiet()
                out["one_broker"] = workloads.end_to_end(s.bootstrap, "e2e", PARTITIONS, 1000, seconds,
                                                         producer_config={"acks": 1})
            continue
        with Cluster(3) as c:
            out["cluster"] = cluster_e2e(c, seconds)
    out["ratio_p99"] = out["cluster"]["p99_ms"] / out["one_broker"]["p99_ms"]
    out["load_average_1m"] = os.getloadavg()[0]
    return out


def cluster_e2e(c, seconds: float) -> dict:
    """1,000 records/s for ``seconds`` on a running three-broker Cluster or KafkaCluster: acks=all (the client's
    default settings) to a topic of replication factor 3, the group coordinator made before the clock starts."""
    create_when_ready(c.bootstrap, "e2e", partitions=PARTITIONS, replication_factor=3)
    c.wait_for_isr("e2e", PARTITIONS, 3)
    make_group_coordinator(c.bootstrap, "e2e-e2e")
    c.wait_for_isr("__consumer_offsets", 50, 3)
    wait_quiet()
    cpu0 = cpu_seconds(c.pids)
    r = workloads.end_to_end(c.bootstrap, "e2e", PARTITIONS, 1000, seconds, producer_config={})
    # the brokers' CPU for this trickle: on a shared machine their latency follows how much they need
    r["brokers_cpu_share"] = (cpu_seconds(c.pids) - cpu0) / seconds / len(c.pids)
    return r


def versus_kafka(values: list[bytes], rnd: int, e2e_seconds: float) -> dict:
    """Our three brokers ("kafka_compat") against Kafka's three ("kafka"), in alternating order, each freshly
    started: the start-up, acks=all produce to replication factor 3, then e2e on the same cluster."""
    out = {}
    for side in ((Cluster, KafkaCluster) if rnd % 2 == 0 else (KafkaCluster, Cluster)):
        t0 = time.monotonic()
        with side(3) as c:
            first_answer(c.bootstrap, brokers=3)
            startup = time.monotonic() - t0
            for topic in ("warm-up", "bench"):
                create_when_ready(c.bootstrap, topic, partitions=PARTITIONS, replication_factor=3)
                c.wait_for_isr(topic, PARTITIONS, 3)
            # untimed, on both sides: a JVM fresh from its start interprets the produce path until its JIT
            # has compiled it, and the client's first produce touches a cold heap (bench/run.py's warm_up)
            workloads.produce(c.bootstrap, "warm-up", values[: max(len(values) // 2, 1)], acks="all",
                              compression="none")
            # ours: ZooKeeper's CPU added, it keeps the metadata that Kafka's in-process controllers keep
            r = timed_produce(c.bootstrap, "bench", values, "all", c.pids + c.control_pids)
            r["startup_s"] = startup
            r["e2e"] = cluster_e2e(c, e2e_seconds)
            out[side.name] = r
    ours, theirs = out["kafka_compat"], out["kafka"]
    for key in ("mb_per_s", "cpu_s_per_gb", "startup_s"):
        out[f"ratio_{key}"] = ours[key] / theirs[key] if theirs[key] else float("nan")
    out["ratio_e2e_p99"] = ours["e2e"]["p99_ms"] / theirs["e2e"]["p99_ms"]
    out["load_average_1m"] = os.getloadavg()[0]
    return out


class Acks:
    """An idempotent acks=all producer writing every 5 ms, remembering when each record was sent and acked."""

    def __init__(self, bootstrap: str, topic: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 0})
        self.topic = topic
        self.acks: list[tuple[float, float]] = []        # (sent, acked), monotonic seconds
        self.errors: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            sent = time.monotonic()
            self.producer.produce(self.topic, b"x" * 100, partition=0,
                                  on_delivery=lambda e, m, sent=sent: self.errors.append(e) if e
                                  else self.acks.append((sent, time.monotonic())))
            self.producer.poll(0.005)
        self.producer.flush(60)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()

    def deliver_to_every_broker(self, brokers: int) -> None:
        """One acknowledged record on each broker (BROKERS_TOPIC has a partition led by each): the client
        is connected to all of them again, with no reconnect backoff left from an earlier trial."""
        delivered: list = []
        for p in range(brokers):
            self.producer.produce(BROKERS_TOPIC, b"x", partition=p, on_delivery=lambda e, m: delivered.append(e))
        deadline = time.monotonic() + WAIT
        while len(delivered) < brokers or any(delivered):
            if any(delivered):
                raise RuntimeError(f"a broker refused the record: {[e for e in delivered if e]}")
            if time.monotonic() > deadline:
                raise TimeoutError("the producer did not reach every broker")
            time.sleep(0.01)

    def wait_for_acks(self, after: float, count: int = 20) -> None:
        deadline = time.monotonic() + WAIT
        while sum(1 for s, _ in self.acks if s > after) < count:
            if time.monotonic() > deadline:
                raise TimeoutError("the producer was not acknowledged again")
            time.sleep(0.05)


def keep_logs(cluster: EmbeddedCluster, directory: str | None, name: str) -> None:
    """Copy every broker's log (all its runs so far) to directory/name-b<i>.log, so a slow trial can be explained
    after the cluster's data directories are gone."""
    if directory is None:
        return
    os.makedirs(directory, exist_ok=True)
    for i, broker in enumerate(cluster.brokers):
        shutil.copyfile(broker.log_path, os.path.join(directory, f"{name}-b{i}.log"))
    log(f"  kept the broker logs in {directory}/{name}-b*.log")


def failover(trials: int, kinds: tuple[str, ...] = ("sigkill", "sigterm"), keep_logs_dir: str | None = None,
             keep_over: dict | None = None) -> dict:
    """keep_over: {kind: seconds} over which a trial's broker logs are kept in keep_logs_dir (the targets)."""
    keep_over = {"sigkill": 8.0, "sigterm": 1.0, **(keep_over or {})}
    kill, term = [], []
    with Cluster(3) as c:
        cluster = c.cluster
        create_when_ready(c.bootstrap, "failover", partitions=1, replication_factor=3)
        create_when_ready(c.bootstrap, BROKERS_TOPIC, assignment=[[b] for b in range(3)],
                          configs={"min.insync.replicas": "1"})
        wait_for_isr(cluster, "failover", 1, 3)
        producer = Acks(c.bootstrap, "failover")
        try:
            producer.wait_for_acks(0.0, 100)
            for k in range(len(kinds) * trials):
                kind = kinds[k % len(kinds)]
                producer.deliver_to_every_broker(3)
                leader = cluster.wait_for_leader("failover", 0, WAIT)
                t0 = time.monotonic()
                if kind == "sigkill":
                    cluster.kill(leader)
                    producer.wait_for_acks(t0)
                    first = min(a for s, a in producer.acks if s > t0)
                    kill.append(first - t0)
                    log(f"  SIGKILL leader {leader}: next acknowledged produce after {first - t0:.2f} s")
                    if first - t0 > keep_over["sigkill"]:
                        keep_logs(cluster, keep_logs_dir, f"sigkill-trial{k + 1}")
                else:
                    assert cluster.stop(leader) == 0
                    t1 = time.monotonic()
                    producer.wait_for_acks(t1)
                    times = [t0] + sorted(a for _, a in producer.acks if a > t0)
                    gap = max(b - a for a, b in zip(times, times[1:]) if a <= t1 + 1)
                    term.append(gap)
                    log(f"  SIGTERM leader {leader} (stopped in {t1 - t0:.2f} s): longest time without an "
                        f"acknowledgement {gap:.3f} s (load average {os.getloadavg()[0]:.2f})")
                    if gap > keep_over["sigterm"]:
                        keep_logs(cluster, keep_logs_dir, f"sigterm-trial{k + 1}")
                cluster.start_broker(leader)
                wait_for_isr(cluster, "failover", 1, 3)
                wait_for_isr(cluster, BROKERS_TOPIC, 3, 1)
        finally:
            producer.close()
    if producer.errors:
        raise RuntimeError(f"the producer saw errors: {producer.errors[:3]}")
    out = {"load_average_1m": os.getloadavg()[0]}
    if kill:
        out.update(sigkill_s=kill, sigkill_median_s=statistics.median(kill), sigkill_max_s=max(kill))
    if term:
        out.update(sigterm_gap_s=term, sigterm_gap_median_s=statistics.median(term), sigterm_gap_max_s=max(term),
                   sigterm_gaps_over_1s=sum(1 for g in term if g > 1.0))
    return out


def medians(rounds: list[dict]) -> dict:
    """The median of every number over the rounds (nested one level), strings as in the first round."""
    out = {}
    for k, v in rounds[0].items():
        if isinstance(v, dict):
            out[k] = medians([r[k] for r in rounds])
        elif isinstance(v, (int, float)):
            out[k] = round(statistics.median(r[k] for r in rounds), 4)
        else:
            out[k] = v
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="1 KiB records per produce run (default 200,000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the replication, e2e and scale comparisons")
    ap.add_argument("--trials", type=int, default=3, help="failovers of each kind (SIGKILL, SIGTERM)")
    ap.add_argument("--e2e-seconds", type=float, default=10.0)
    ap.add_argument("--failover-kinds", nargs="+", default=["sigkill", "sigterm"], choices=["sigkill", "sigterm"])
    ap.add_argument("--only", nargs="*", default=[], choices=["replication", "e2e", "failover", "scale", "kafka"],
                    help="scenarios to run (default all; kafka only where Apache Kafka 4.x is resolved)")
    ap.add_argument("--keep-logs", metavar="DIR", help="failover: copy the broker logs of every trial over its "
                    "target (SIGTERM gap over 1 s, SIGKILL over 8 s) to DIR")
    ap.add_argument("--keep-logs-over", type=float, metavar="S", help="with --keep-logs: keep those of every trial "
                    "over S seconds instead (both kinds)")
    args = ap.parse_args(argv)
    chosen = args.only or ["replication", "e2e", "failover", "scale", "kafka"]
    if "kafka" in chosen and not KafkaCluster.available():
        log("Apache Kafka 4.x is not resolved, or there is no java (bash interop/maven.sh kafka): no kafka scenario")
        chosen.remove("kafka")
    values = workloads.values(args.records, KIB)
    results = {}
    for name in ("replication", "e2e", "failover", "scale", "kafka"):
        if name not in chosen:
            continue
        if name == "failover":
            over = None if args.keep_logs_over is None else dict.fromkeys(("sigkill", "sigterm"), args.keep_logs_over)
            results[name] = failover(args.trials, tuple(args.failover_kinds), args.keep_logs, over)
        else:
            rounds = []
            for r in range(args.rounds):
                if name == "e2e":
                    rounds.append(e2e(args.e2e_seconds, r))
                elif name == "kafka":
                    rounds.append(versus_kafka(values, r, args.e2e_seconds))
                else:
                    rounds.append((replication if name == "replication" else scale)(values, r))
                log(f"{name} round {r + 1}: {json.dumps(rounds[-1])}")
            results[name] = medians(rounds)
        log(f"{name}: {json.dumps(results[name])}")
    for name, r in results.items():
        print(json.dumps({"scenario": name, "records": args.records, "record_bytes": KIB, **r}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
