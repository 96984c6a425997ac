"""Group members in their own processes, for the consumer-group interop tests.

Run as a script, this is one member of a consumer group, written with one of
the Python clients (kafka-python, confluent-kafka, aiokafka). It subscribes,
and after every poll that returned records it commits synchronously and only
then reports the records, so a record the test sees was committed: after any
rebalance or restart its next owner starts past it, and "each record consumed
by exactly one member" can be checked exactly. A member may also report a poll
as "fetched" before committing it: if it is killed before the commit's report,
that poll still counts as consumed (its commit may have happened, so nobody
else reads those records again). Every assignment the client is
given is reported too. Output is JSON lines on stdout; "close" on stdin closes
the consumer gracefully (a LeaveGroup), and SIGKILL is a crash.

Imported, `Member` starts such a process (or a member written with another
client that reports the same way) and follows what it reports. The module holds
no tests itself.
"""
from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve()
WAIT = 45.0         # seconds any expected outcome may take before a test gives up (a hang, not timing)


# ---------------------------------------------------------------- the member process
def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


def watch_stdin(stop: threading.Event) -> None:
    def run():
        for line in sys.stdin:
            if line.strip() == "close":
                break
        stop.set()
    threading.Thread(target=run, daemon=True).start()


def reporting_listener(base):
    """A rebalance listener (kafka-python's and aiokafka's share the interface) that reports."""
    class Listener(base):
        def on_partitions_revoked(self, revoked):
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))
    return Listener()


def run_kafka_python(args, stop: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.errors import KafkaError

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, group_instance_id=args.instance,
        client_id=args.name, auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.session_ms // 4,
        partition_assignment_strategy=[RangePartitionAssignor])
    consumer.subscribe([args.topic], listener=reporting_listener(ConsumerRebalanceListener))
    while not stop.is_set():
        batches = consumer.poll(timeout_ms=100)
        records = [(tp.partition, m.offset, m.value.decode()) for tp, ms in batches.items() for m in ms]
        if records:
            try:
                consumer.commit()
            except KafkaError as e:
                emit("commit-failed", error=repr(e), count=len(records))
                continue
            emit("records", records=records)
    consumer.close()


def run_confluent(args, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if args.protocol == "consumer":
        # KIP-848: the broker sets timeouts and assigns; the client only names what it consumes.
        conf["group.protocol"] = "consumer"
        if args.assignor.startswith("server:"):
            conf["group.remote.assignor"] = args.assignor.removeprefix("server:")
    else:
        conf.update({"session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.session_ms // 4,
                     "partition.assignment.strategy": args.assignor})
    if args.instance:
        conf["group.instance.id"] = args.instance
    consumer = Consumer(conf)
    # Incremental protocols (cooperative-sticky, KIP-848) hand over only what changes.
    incremental = args.protocol == "consumer" or args.assignor == "cooperative-sticky"
    held: set[int] = set()

    def on_assign(c, ps):
        held.update(p.partition for p in ps)
        emit("assigned", partitions=sorted(held))

    def on_revoke(c, ps):
        held.difference_update(p.partition for p in ps)
        if incremental and held:
            emit("assigned", partitions=sorted(held))
        else:
            held.clear()
            emit("revoked", partitions=sorted(p.partition for p in ps))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop.is_set():
        msgs = [m for m in consumer.consume(num_messages=500, timeout=0.1) if m.error() is None]
        if msgs:
            records = [(m.partition(), m.offset(), m.value().decode()) for m in msgs]
            emit("fetched", records=records)
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as e:
                emit("commit-failed", error=str(e), count=len(msgs))
                rewind(consumer, msgs)
                continue
            emit("records", records=records)
    consumer.close()


def rewind(consumer, msgs) -> None:
    """Records whose commit failed were not reported: read them again (or let their next owner)."""
    from confluent_kafka import KafkaException, TopicPartition

    first: dict[int, int] = {}
    for m in msgs:
        first.setdefault(m.partition(), m.offset())
    for partition, offset in first.items():
        try:
            consumer.seek(TopicPartition(msgs[0].topic(), partition, offset))
        except KafkaException:
            pass        # no longer assigned


def run_aiokafka(args, stop: threading.Event) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.errors import KafkaError

    async def main():
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group, group_instance_id=args.instance,
            client_id=args.name, auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.session_ms // 4,
            partition_assignment_strategy=(RangePartitionAssignor,))
        consumer.subscribe([args.topic], listener=reporting_listener(ConsumerRebalanceListener))
        await consumer.start()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                records = [(tp.partition, m.offset, m.value.decode()) for tp, ms in batches.items() for m in ms]
                if records:
                    try:
                        await consumer.commit()
                    except KafkaError as e:
                        emit("commit-failed", error=repr(e), count=len(records))
                        continue
                    emit("records", records=records)
        finally:
            await consumer.stop()

    asyncio.run(main())


RUNNERS = {"kafka-python": run_kafka_python, "confluent-kafka": run_confluent, "aiokafka": run_aiokafka}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="one consumer-group member, for the interop tests")
    ap.add_argument("--client", choices=sorted(RUNNERS), required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--name", default="member")
    ap.add_argument("--instance", default=None, help="group.instance.id (static membership)")
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--protocol", choices=("classic", "consumer"), default="classic", help="group.protocol")
    ap.add_argument("--assignor", default="range", help="partition.assignment.strategy (classic); server:NAME is the consumer protocol's group.remote.assignor")
    args = ap.parse_args(argv)
    stop = threading.Event()
    watch_stdin(stop)
    RUNNERS[args.client](args, stop)
    emit("closed")
    return 0


# ---------------------------------------------------------------- the test side
def python_member(client: str, bootstrap: str, topic: str, group: str, name: str, log_dir: str | os.PathLike,
                  instance: str | None = None, session_ms: int = 3000, protocol: str = "classic",
                  assignor: str = "range") -> "Member":
    """A member written with one of the Python clients: this file run as a script."""
    args = [sys.executable, str(HERE), "--client", client, "--bootstrap", bootstrap, "--topic", topic,
            "--group", group, "--name", name, "--session-ms", str(session_ms), "--protocol", protocol,
            "--assignor", assignor]
    if instance:
        args += ["--instance", instance]
    return Member(client, args, name, log_dir)


class Member:
    """A member process (any client that speaks this module's JSON lines) and what it has reported."""

    def __init__(self, client: str, command: list[str], name: str, log_dir: str | os.PathLike,
                 env: dict | None = None):
        self.client, self.name = client, name
        self.log_path = Path(log_dir) / f"{name}.log"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, bufsize=1, env=env)
        self.lock = threading.Lock()
        self.events: list[dict] = []
        self.assignment: list[int] | None = None      # None while it holds no assignment
        self.assignments: list[list[int]] = []        # every assignment it was given, in order
        self.records: list[tuple[int, int, str]] = []
        self.fetched: list[tuple[int, int, str]] = []     # the last "fetched" poll not yet reported committed
        self.polls: list[tuple[float, list]] = []     # (wall time, records) of every reported poll
        self.commit_failures = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(e)
                if e["event"] == "assigned":
                    self.assignment = e["partitions"]
                    self.assignments.append(e["partitions"])
                elif e["event"] == "revoked":
                    self.assignment = None
                elif e["event"] == "fetched":
                    self.fetched = [tuple(r) for r in e["records"]]
                elif e["event"] == "records":
                    self.fetched = []
                    self.records.extend(tuple(r) for r in e["records"])
                    self.polls.append((e.get("t", 0.0), [tuple(r) for r in e["records"]]))
                elif e["event"] == "commit-failed":
                    self.commit_failures += 1

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout: float = WAIT) -> None:
        """Graceful: the client closes its consumer, which leaves the group."""
        if self.alive:
            self.proc.stdin.write("close\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout)
        self._reader.join(5)

    def kill(self) -> None:
        """A crash: no LeaveGroup, no commit; the coordinator notices when the session expires."""
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        try:
            self.close(10)
        except subprocess.TimeoutExpired:
            self.kill()
        self._log.close()
        with self.lock, open(self.log_path.with_suffix(".events"), "w") as out:     # kept for a post-mortem
            out.writelines(json.dumps(e) + "\n" for e in self.events)

    def history(self) -> str:
        """Its group events in order (records as counts per partition), for failure messages."""
        lines = []
        with self.lock:
            for e in self.events:
                if e["event"] == "fetched":
                    continue
                if e["event"] == "records":
                    per: dict[int, list[int]] = {}
                    for p, o, _ in e["records"]:
                        per.setdefault(p, []).append(o)
                    lines.append(f"{e['t']:.3f} records " + " ".join(f"p{p}:{min(o)}-{max(o)}"
                                                                    for p, o in sorted(per.items())))
                else:
                    lines.append(f"{e['t']:.3f} {e['event']} {e.get('partitions', e.get('error', ''))}")
        return "\n".join(lines[-60:])

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def wait_until(predicate, what: str, members=(), timeout: float = WAIT, why=None):
    """Wait for `predicate`; on giving up, say what each member was given and logged (and `why()`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        dead = [m for m in members if not m.alive]
        if time.monotonic() > deadline or dead:
            detail = "\n".join(f"--- {m.name} ({m.client}) {'exited' if not m.alive else ''}: "
                               f"assignment={m.assignment}\n{m.history()}\n{m.log()}" for m in members)
            raise AssertionError(f"gave up waiting for {what}\n{why() if why else ''}\n{detail}")
        time.sleep(0.05)


def balanced(members, partitions: int) -> bool:
    """Every member holds a non-empty assignment, they do not overlap, and together they cover the topic."""
    held = []
    for m in members:
        with m.lock:
            if not m.assignment:
                return False
            held.extend(m.assignment)
    return sorted(held) == list(range(partitions))


def consumed(members) -> list[tuple[int, int, str]]:
    out = []
    for m in members:
        with m.lock:
            out.extend(m.records)
    return out



# ---------------------------------------------------------------- broker-side helpers and scenarios
PARTITIONS = 6
# Short group timeouts, so a crashed member is noticed in seconds (members use 3 s sessions).
BROKER = {"group.initial.rebalance.delay.ms": "100", "group.min.session.timeout.ms": "1000",
          "offsets.topic.num.partitions": "5"}
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def new_topic(broker, partitions: int = PARTITIONS) -> str:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    name = unique("groups")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def produce(broker, topic: str, tag: str, count: int = 60, partitions: int = PARTITIONS) -> set[str]:
    """`count` records spread over every partition; returns their values."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    values = [f"{tag}-{i}" for i in range(count)]
    for i, v in enumerate(values):
        producer.send(topic, value=v.encode(), partition=i % partitions)
    producer.flush()
    producer.close()
    return set(values)


def group_description(broker, group: str) -> dict:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return admin.describe_groups([group])[group]
    finally:
        admin.close()


def expect_each_once(members, produced: set[str]) -> None:
    """Wait until every produced record was reported, then check none was reported twice."""
    # A killed member's last poll may have been committed without being reported.
    lost_in_crash = {v for m in members if not m.alive for _, _, v in m.fetched}

    def seen() -> set[str]:
        return lost_in_crash | {v for _, _, v in consumed(members)}

    def missing() -> str:
        gone = sorted(produced - seen())
        return f"{len(gone)} of {len(produced)} not consumed, e.g. {gone[:20]}"
    wait_until(lambda: produced <= seen(), "every record to be consumed", [m for m in members if m.alive],
               why=missing)
    counts = collections.Counter(v for _, _, v in consumed(members))
    dupes = {v for v, n in counts.items() if n > 1}
    assert not dupes, f"consumed more than once: {sorted(dupes)[:10]}"
    assert set(counts) | lost_in_crash == produced


def membership_scenario(broker, topic: str, start_member, per_member: int = 2) -> None:
    """Three members share the topic; one leaves, one crashes, one joins: each change is a
    rebalance after which every new record is consumed by exactly one member."""
    members = [start_member() for _ in range(3)]
    everyone = list(members)
    produced: set[str] = set()
    try:
        wait_until(lambda: balanced(members, PARTITIONS), "three members to share the partitions", members)
        assert all(len(m.assignment) == per_member for m in members)
        produced |= produce(broker, topic, "three")
        expect_each_once(everyone, produced)

        # a member leaves (LeaveGroup): the other two take over its partitions
        leaving, members = members[0], members[1:]
        leaving.close()
        wait_until(lambda: balanced(members, PARTITIONS), "two members to take over", members)
        produced |= produce(broker, topic, "after-leave")
        expect_each_once(everyone, produced)

        # a member crashes (no LeaveGroup): its session expires and the survivor takes everything
        crashed, members = members[0], members[1:]
        crashed.kill()
        wait_until(lambda: balanced(members, PARTITIONS), "the survivor to own every partition", members)
        produced |= produce(broker, topic, "after-crash")
        expect_each_once(everyone, produced)

        # a member joins: the group splits the partitions again
        joined = start_member()
        everyone.append(joined)
        members.append(joined)
        wait_until(lambda: balanced(members, PARTITIONS), "the newcomer to get a share", members)
        produced |= produce(broker, topic, "after-join")
        expect_each_once(everyone, produced)
        # the survivor went through a rebalance at every change
        assert len(members[0].assignments) >= 4
    finally:
        for m in everyone:
            m.stop()


def consume_alone(start_member, broker, topic: str, produced: set[str]) -> None:
    """One member consumes exactly `produced`, commits, and closes."""
    m = start_member()
    try:
        expect_each_once([m], produced)
    finally:
        m.stop()


def resume_scenario(broker, topic: str, start_member) -> None:
    """A consumer commits and closes; the next one in the group starts from the committed offsets."""
    consume_alone(start_member, broker, topic, produce(broker, topic, "first"))
    # auto.offset.reset=earliest: without the committed offsets it would read "first" again
    consume_alone(start_member, broker, topic, produce(broker, topic, "second"))


def restart_scenario(broker, topic: str, start_member) -> None:
    """Offsets committed before a broker restart are where a new consumer starts after it."""
    consume_alone(start_member, broker, topic, produce(broker, topic, "before"))
    broker.restart()
    consume_alone(start_member, broker, topic, produce(broker, topic, "after"))


def static_restart_scenario(broker, topic: str, group: str, start_static) -> None:
    """`start_static(instance_id)` starts a static member. One of two crashes and comes back within
    its session: it gets its partitions back, and the other member sees no rebalance."""
    static, other = start_static("static-1"), start_static("static-2")
    members = [static, other]
    everyone = list(members)
    try:
        wait_until(lambda: balanced(members, PARTITIONS), "two static members to share the partitions", members)
        held = list(static.assignment)
        seen_by_other = len(other.assignments)
        produced = produce(broker, topic, "before")
        expect_each_once(everyone, produced)
        before = {m["member_id"] for m in group_description(broker, group)["members"]}

        static.kill()       # static members never send LeaveGroup; here it crashes outright
        back = start_static("static-1")
        everyone.append(back)
        wait_until(lambda: back.assignment is not None, "the restarted member to get its assignment", [back])
        assert back.assignment == held
        produced |= produce(broker, topic, "after")
        expect_each_once(everyone, produced)
        # no rebalance: the other member was never given a new assignment
        assert len(other.assignments) == seen_by_other
        after = {m["member_id"] for m in group_description(broker, group)["members"]}
        assert len(after) == 2 and after != before
    finally:
        for m in everyone:
            m.stop()

if __name__ == "__main__":
    sys.exit(main())
