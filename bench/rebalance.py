"""How long a group takes to consume every partition again after a member joins: classic against KIP-848.

One broker, one run, three contenders in turn on the same topic: the classic protocol with
eager `range`, the classic protocol with `cooperative-sticky`, and the consumer protocol
(the broker assigns, `uniform`). Each contender is a fresh group of MEMBERS confluent-kafka
consumers sharing PARTITIONS partitions while a producer writes to every partition all the
time; once they all consume, one more member joins (time t0).

Two figures. Recovery: for each partition, the first time its final owner consumes a record
written after t0; the largest of those, minus t0 (a partition that never stopped counts from
its first record after t0, one that moved from when its new owner reads it). Stall: for each
partition, the longest time after t0 that nobody consumed it (the gap between two consecutive
reads, by anyone); the largest of those, over the partitions that moved (read by another member
after t0) and, as a median, over those kept by the member reading them before t0, beside the
median gap of the steady state (the --settle seconds before t0). Every contender gets the same
heartbeat interval (`--heartbeat-ms`, default 1000: the classic clients' heartbeat.interval.ms
and the broker's group.consumer.heartbeat.interval.ms; group.consumer.min.heartbeat.interval.ms,
which kafka-compat also uses for a member waiting on partitions others still own, is the same value)
and auto-commits every 200 ms. With --waiting-heartbeat-ms a fourth contender, consumer-waiting, runs
the consumer protocol in the same run on a second broker whose waiting heartbeat is that (both
brokers have a producer writing all the time, so every contender runs under the same load).

Where the time goes (`--trace` prints every heartbeat of the consumer-protocol rounds): the
joiner's first heartbeat is answered at once (nothing is free: all 100 partitions are owned); each
member that gives up a partition hears of the new epoch at its next regular heartbeat, its own
phase in [0, interval), revokes and acknowledges within milliseconds, which frees its partition;
the joiner learns it at its own next heartbeat: one interval after it joined (Kafka answers every
heartbeat with the group's interval, and the protocol has no push), or the waiting heartbeat on
the consumer-waiting broker. Eager waits for the same phases (its JoinGroup barrier needs every
member's next heartbeat), then a JoinGroup/SyncGroup round of about 0.1-0.2 s. So at equal
intervals both recover in about the last member's phase plus a little: no broker can make the
consumer protocol a multiple faster than eager here. What it saves is that partitions that stay
put never stop (eager revokes all of them for the length of its JoinGroup/SyncGroup round).

    python bench/rebalance.py [--partitions 100] [--members 10] [--rounds 1] [--heartbeat-ms 1000] \\
        [--waiting-heartbeat-ms 100] [--trace]

Prints one JSON line per round and contender, then the medians and the ratios.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONTENDERS = {
    "classic-eager": {"partition.assignment.strategy": "range"},
    "classic-cooperative": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer": {"group.protocol": "consumer"},
}
# The consumer protocol again, on a broker that tells a member waiting for partitions to heartbeat sooner.
WAITING = "consumer-waiting"


class Producing:
    """One record per partition every `interval` seconds; the value is its wall-clock write time."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.05):
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions, self.interval = topic, partitions, interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            now = repr(time.time()).encode()
            for p in range(self.partitions):
                self.producer.produce(self.topic, value=now, partition=p)
            self.producer.poll(0)
        self.producer.flush(10)


class Member(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str, conf: dict, heartbeat_ms: int, name: str):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer
        c = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "auto.offset.reset": "latest",
             "enable.auto.commit": True, "auto.commit.interval.ms": 200, **conf}
        if "group.protocol" not in conf:
            c.update({"heartbeat.interval.ms": heartbeat_ms, "session.timeout.ms": 30000})
        self.consumer = Consumer(c)
        self.consumer.subscribe([topic])
        self.name = name
        self.seen: list[tuple[float, int, float]] = []      # (consumed at, partition, written at)
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            for m in self.consumer.consume(num_messages=1000, timeout=0.05):
                if m.error() is None:
                    self.seen.append((time.time(), m.partition(), float(m.value())))
        self.consumer.close()


def round_once(bootstrap: str, topic: str, partitions: int, members: int, name: str, conf: dict,
               heartbeat_ms: int, settle: float, limit: float) -> dict:
    group = f"bench-{name}-{time.time_ns()}"
    crew = [Member(bootstrap, topic, group, conf, heartbeat_ms, f"{name}-{i}") for i in range(members)]
    for m in crew:
        m.start()
    # everyone consumes: every partition seen recently
    deadline = time.time() + 120
    while time.time() < deadline:
        cut = time.time() - 1.0
        recent = {p for m in crew for t, p, _ in m.seen[-5000:] if t >= cut}
        if len(recent) == partitions:
            break
        time.sleep(0.2)
    else:
        raise RuntimeError(f"{name}: the group never consumed every partition")
    time.sleep(settle)
    t0 = time.time()
    late = Member(bootstrap, topic, group, conf, heartbeat_ms, f"{name}-late")
    late.start()
    crew.append(late)
    # wait until the newcomer consumes and every partition flows again, then a little more
    while time.time() < t0 + limit:
        if late.seen and all_flowing(crew, partitions, t0):
            break
        time.sleep(0.1)
    time.sleep(2.0)
    for m in crew:
        m.halt.set()
    for m in crew:
        m.join(30)
    owner: dict[int, tuple[float, Member]] = {}
    for m in crew:
        for t, p, _ in m.seen:
            if p not in owner or t > owner[p][0]:
                owner[p] = (t, m)
    first_after: list[float] = []
    for p in range(partitions):
        final = owner[p][1]
        times = [t for t, q, written in final.seen if q == p and written >= t0]
        first_after.append(min(times) - t0 if times else float("inf"))
    before: dict[int, tuple[float, Member]] = {}
    for m in crew:
        for t, p, _ in m.seen:
            if t < t0 and (p not in before or t > before[p][0]):
                before[p] = (t, m)
    moved = {p for p in range(partitions) if before[p][1] is not owner[p][1]}
    stalls = partition_stalls(crew, partitions, t0)
    steady = partition_stalls(crew, partitions, t0 - settle, t0)
    kept = [s for p, s in enumerate(stalls) if p not in moved] or [0.0]
    return {"contender": name, "recovery_s": round(max(first_after), 3),
            "median_partition_s": round(statistics.median(first_after), 3),
            "max_stall_s": round(max(stalls), 3), "moved": len(moved),
            "moved_max_stall_s": round(max([stalls[p] for p in moved] or [0.0]), 3),
            "kept_median_stall_s": round(statistics.median(kept), 3), "kept_max_stall_s": round(max(kept), 3),
            "steady_median_gap_s": round(statistics.median(steady), 3),
            "late_member_partitions": len({p for _, p, w in late.seen if w >= t0}),
            "late_first_read_s": round(min((t for t, _, w in late.seen if w >= t0), default=float("inf")) - t0, 3),
            "group": group, "t0": t0,
            "members": members + 1, "partitions": partitions}


def partition_stalls(crew, partitions: int, t0: float, end: float = float("inf")) -> list[float]:
    """Per partition, the longest time in [t0, end] between two consecutive reads of it (by any member)."""
    reads: dict[int, list[float]] = {p: [] for p in range(partitions)}
    for m in crew:
        for t, p, _ in m.seen:
            reads[p].append(t)
    out = []
    for p in range(partitions):
        times = sorted(reads[p])
        before = [t for t in times if t < t0]
        after = [t for t in times if t0 <= t <= end]
        points = before[-1:] + after
        out.append(max((b - max(a, t0) for a, b in zip(points, points[1:])), default=float("inf")))
    return out


HEARTBEAT_LOGGER = "kafka_compat.group.modern.consumer_group_protocol"


def trace_heartbeats(bootstrap: str) -> None:
    """Turn the broker's per-heartbeat debug line on (KIP-412: IncrementalAlterConfigs on a BROKER_LOGGER)."""
    import socket

    from kafka_compat.protocol.frames import FrameReader, decode_response, encode_request
    from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as Req
    body = Req(resources=[Req.AlterConfigsResource(resource_type=8, resource_name="0", configs=[
        Req.AlterableConfig(name=HEARTBEAT_LOGGER, config_operation=0, value="DEBUG")])])
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(encode_request(44, 1, body, 1))
        frames = FrameReader()
        while not (got := frames.frames()):
            frames.feed(sock.recv(65536))
    error = decode_response(44, 1, got[0])[1].responses[0].error_code
    if error:
        raise RuntimeError(f"the broker refused the log level: error {error}")


def print_trace(log_path: str, group: str, t0: float) -> None:
    """The group's heartbeats from t0 on, as seconds after t0 (the broker logs local wall time, in ms)."""
    import datetime
    with open(log_path, errors="replace") as f:
        for line in f:
            if f"heartbeat group {group} " not in line:
                continue
            stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if stamp >= t0 - 0.05:
                print(f"  {stamp - t0:+7.3f} {line[line.index('member '):].strip()}")


def all_flowing(crew, partitions: int, t0: float) -> bool:
    cut = time.time() - 0.5
    flowing = {p for m in crew for t, p, written in m.seen[-5000:] if t >= cut and written >= t0}
    return len(flowing) == partitions


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--consumer-heartbeat-ms", type=int, default=None,
                    help="the broker's group.consumer.heartbeat.interval.ms (default: --heartbeat-ms)")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds of steady state before the join")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds a rebalance may take")
    ap.add_argument("--waiting-heartbeat-ms", type=int, default=None,
                    help="also run the contender consumer-waiting: the consumer protocol on a second broker whose "
                         "group.consumer.min.heartbeat.interval.ms (how often a member waiting for released "
                         "partitions heartbeats) is this; the other contenders' broker has the consumer heartbeat")
    ap.add_argument("--only", action="append", choices=sorted(CONTENDERS) + [WAITING],
                    help="run only these contenders")
    ap.add_argument("--data-dir", default=None, help="keep the brokers' data and broker.log under here")
    ap.add_argument("--trace", action="store_true",
                    help="log every ConsumerGroupHeartbeat at the broker and print each consumer-protocol "
                         "round's heartbeats from t0 on (the broker's log level goes DEBUG through KIP-412)")
    ap.add_argument("--bootstrap", default=None,
                    help="use this running broker (its group.consumer.heartbeat.interval.ms applies)")
    args = ap.parse_args(argv)

    from confluent_kafka.admin import AdminClient, NewTopic

    from kafka_compat.testing import EmbeddedBroker
    consumer_hb = args.consumer_heartbeat_ms or args.heartbeat_ms
    waiting = {name: consumer_hb for name in CONTENDERS}     # contender -> its broker's waiting heartbeat
    if args.waiting_heartbeat_ms:
        waiting[WAITING] = args.waiting_heartbeat_ms
    contenders = [name for name in waiting if name in (args.only or waiting)]
    if args.bootstrap and len({waiting[name] for name in contenders}) > 1:
        ap.error(f"{WAITING} needs a broker of its own: drop --bootstrap or --waiting-heartbeat-ms")
    results: dict[str, list[dict]] = {name: [] for name in contenders}
    with contextlib.ExitStack() as stack:
        where: dict[int, tuple] = {}                          # waiting heartbeat -> (bootstrap, broker, topic)
        for ms in sorted({waiting[name] for name in contenders}):
            props = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 5,
                     "group.consumer.min.heartbeat.interval.ms": ms,
                     "group.consumer.heartbeat.interval.ms": consumer_hb}
            broker = None
            if not args.bootstrap:
                data_dir = args.data_dir and str(Path(args.data_dir) / f"waiting-{ms}ms")
                broker = stack.enter_context(EmbeddedBroker(props, data_dir=data_dir))
            bootstrap = args.bootstrap or broker.bootstrap
            topic = f"rebalance-bench-{time.time_ns()}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
            if args.trace:
                trace_heartbeats(bootstrap)
            producing = Producing(bootstrap, topic, args.partitions)     # every broker's, all the time
            stack.callback(producing.thread.join, 30)
            stack.callback(producing.stop.set)
            where[ms] = (bootstrap, broker, topic)
        for r in range(args.rounds):
            for name in contenders:
                bootstrap, broker, topic = where[waiting[name]]
                conf = CONTENDERS[name.split("-waiting")[0]]
                out = round_once(bootstrap, topic, args.partitions, args.members, name, conf,
                                 args.heartbeat_ms, args.settle, args.limit)
                out["round"] = r
                print(json.dumps(out), flush=True)
                if args.trace and broker is not None and conf.get("group.protocol") == "consumer":
                    time.sleep(0.5)
                    print_trace(broker.log_path, out["group"], out["t0"])
                results[name].append(out)
    medians = {name: statistics.median(o["recovery_s"] for o in rs) for name, rs in results.items()}
    stalls = {name: statistics.median(o["max_stall_s"] for o in rs) for name, rs in results.items()}
    kept = {name: statistics.median(o["kept_median_stall_s"] for o in rs) for name, rs in results.items()}
    steady = {name: statistics.median(o["steady_median_gap_s"] for o in rs) for name, rs in results.items()}
    print(json.dumps({"median_recovery_s": medians, "median_max_stall_s": stalls, "median_kept_stall_s": kept,
                      "median_steady_gap_s": steady, "classic_heartbeat_ms": args.heartbeat_ms,
                      "consumer_heartbeat_ms": consumer_hb, "waiting_heartbeat_ms": waiting}))
    print(f"\n{args.members} members + 1 joining, {args.partitions} partitions, classic heartbeat "
          f"{args.heartbeat_ms} ms, consumer-protocol heartbeat {consumer_hb} ms "
          f"(waiting for partitions: {consumer_hb} ms; {WAITING}: {args.waiting_heartbeat_ms} ms)")
    for name in medians:
        print(f"  {name:22s} recovery {medians[name]:6.2f} s, longest stall {stalls[name]:6.2f} s, "
              f"kept partitions' stall {kept[name]:5.2f} s (steady state {steady[name]:5.2f} s)")
    for label, figures in (("recovery", medians), ("stall", stalls), ("kept stall", kept)):
        for ours in ("consumer", WAITING):
            for name in ("classic-eager", "classic-cooperative"):
                if ours not in figures or name not in figures:
                    continue
                ratio = figures[name] / figures[ours] if figures[ours] else float("inf")
                print(f"  {label}: {name} / {ours} = {ratio:.2f}")
                print(json.dumps({"ratio": f"{label} {name}/{ours}", "value": round(ratio, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
