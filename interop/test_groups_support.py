"""Group members in their own processes, for the consumer-group interop tests.

Run as a script, this is one member of a consumer group, written with one of
the Python clients (kafka-python, confluent-kafka, aiokafka). It subscribes,
and after every poll that returned records it commits synchronously and only
then reports the records, so a record the test sees was committed: after any
rebalance or restart its next owner starts past it, and "each record consumed
by exactly one member" can be checked exactly. Every assignment the client is
given is reported too. Output is JSON lines on stdout; "close" on stdin closes
the consumer gracefully (a LeaveGroup), and SIGKILL is a crash.

Imported, `Member` starts such a process and follows what it reports. The module
holds no tests itself.
"""
from __future__ import annotations

import argparse
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
    print(json.dumps({"event": event, **fields}), flush=True)


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
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.session_ms // 4,
            "partition.assignment.strategy": "range"}
    if args.instance:
        conf["group.instance.id"] = args.instance
    consumer = Consumer(conf)
    consumer.subscribe([args.topic],
                       on_assign=lambda c, ps: emit("assigned", partitions=sorted(p.partition for p in ps)),
                       on_revoke=lambda c, ps: emit("revoked", partitions=sorted(p.partition for p in ps)))
    while not stop.is_set():
        msgs = [m for m in consumer.consume(num_messages=500, timeout=0.1) if m.error() is None]
        if msgs:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as e:
                emit("commit-failed", error=str(e), count=len(msgs))
                continue
            emit("records", records=[(m.partition(), m.offset(), m.value().decode()) for m in msgs])
    consumer.close()


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
    args = ap.parse_args(argv)
    stop = threading.Event()
    watch_stdin(stop)
    RUNNERS[args.client](args, stop)
    emit("closed")
    return 0


# ---------------------------------------------------------------- the test side
class Member:
    """A member process and what it has reported so far."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, name: str, log_dir: str | os.PathLike,
                 instance: str | None = None, session_ms: int = 3000):
        self.client, self.name = client, name
        self.log_path = Path(log_dir) / f"{name}.log"
        args = [sys.executable, str(HERE), "--client", client, "--bootstrap", bootstrap, "--topic", topic,
                "--group", group, "--name", name, "--session-ms", str(session_ms)]
        if instance:
            args += ["--instance", instance]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, bufsize=1)
        self.lock = threading.Lock()
        self.events: list[dict] = []
        self.assignment: list[int] | None = None      # None while it holds no assignment
        self.assignments: list[list[int]] = []        # every assignment it was given, in order
        self.records: list[tuple[int, int, str]] = []
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
                elif e["event"] == "records":
                    self.records.extend(tuple(r) for r in e["records"])
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

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def wait_until(predicate, what: str, members=(), timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        dead = [m for m in members if not m.alive]
        if time.monotonic() > deadline or dead:
            detail = "\n".join(f"--- {m.name} ({m.client}) {'exited' if not m.alive else ''}: "
                               f"assignment={m.assignment}\n{m.log()}" for m in members)
            raise AssertionError(f"gave up waiting for {what}\n{detail}")
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


if __name__ == "__main__":
    sys.exit(main())
