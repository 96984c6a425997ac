"""The real client beside the fuzzer: a confluent-kafka idempotent producer (acks=all), a
transactional producer that commits some transactions and aborts others, and a
read_committed consumer, all logging to a `History` that `kafka_compat.history.check`
judges at the end."""
from __future__ import annotations

import threading
import time
import uuid

from kafka_compat.history import History

PARTITIONS = 3


class Companion:
    def __init__(self, bootstrap: str, history: History | None = None, *, rate: float = 200.0,
                 transactions: bool = True):
        self.bootstrap = bootstrap
        self.history = history or History()
        self.rate = rate
        self.transactions = transactions
        self.topic = f"companion-{uuid.uuid4().hex[:12]}"
        self.sent = 0
        self.errors: list[str] = []
        self.produce_stalls: list[float] = []        # ack waits over 10 s (the symptom)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- lifecycle
    def start(self) -> "Companion":
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(self.topic, PARTITIONS, 1)])[self.topic].result(30)
        for target in (self._produce, self._produce_transactions if self.transactions else None):
            if target is not None:
                t = threading.Thread(target=target, daemon=True)
                t.start()
                self._threads.append(t)
        return self

    def wait_for_acks(self, count: int, timeout: float) -> bool:
        """Let the producers run until `count` records are acknowledged (a fast fuzzer may finish first)."""
        deadline = time.monotonic() + timeout
        while sum(1 for e in list(self.history.events) if e[0] == "ack") < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)

    # -- producers
    def _config(self, **extra) -> dict:
        return {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "message.timeout.ms": 120000,
                "socket.keepalive.enable": True, **extra}

    def _produce(self) -> None:
        from confluent_kafka import Producer

        h = self.history
        p = Producer(self._config(**{"enable.idempotence": True, "acks": "all"}))
        sent_at: dict[str, float] = {}

        def delivered(err, msg):
            value = msg.value().decode()
            if err is None:
                h.ack(value, msg.partition(), msg.offset())
                waited = time.monotonic() - sent_at.pop(value, time.monotonic())
                if waited > 10:
                    self.produce_stalls.append(waited)
            else:
                h.fail(value, str(err))
                self.errors.append(f"produce {value}: {err}")

        i = 0
        interval = 1.0 / self.rate
        while not self._stop.is_set():
            value = f"i-{i}"
            h.send("idempotent", value)
            sent_at[value] = time.monotonic()
            p.produce(self.topic, value.encode(), key=str(i % 17).encode(), on_delivery=delivered)
            self.sent += 1
            i += 1
            p.poll(interval)
        p.flush(120)

    def _produce_transactions(self) -> None:
        from confluent_kafka import KafkaException, Producer

        h = self.history
        p = Producer(self._config(**{"transactional.id": f"{self.topic}-txn", "transaction.timeout.ms": 60000,
                                     "message.timeout.ms": 60000}))
        try:
            p.init_transactions(60)
        except KafkaException as e:
            self.errors.append(f"init_transactions: {e}")
            return
        n = 0
        while not self._stop.is_set():
            txn = f"t-{n}"
            commit = n % 2 == 0
            try:
                p.begin_transaction()
                for j in range(5):
                    value = f"{txn}-{j}"
                    h.send("transactional", value, txn=txn)
                    p.produce(self.topic, value.encode(), partition=j % PARTITIONS,
                              on_delivery=lambda err, msg: err is None and h.ack(
                                  msg.value().decode(), msg.partition(), msg.offset()))
                if commit:
                    p.commit_transaction(60)
                    h.commit(txn)
                else:
                    p.abort_transaction(60)
                    h.abort(txn)
            except KafkaException as e:
                self.errors.append(f"transaction {txn}: {e}")
                return
            n += 1
            time.sleep(0.05)

    # -- consumer
    def read_all(self, timeout: float = 120.0) -> None:
        """Read the topic from the start with read_committed until every acknowledged record of the
        idempotent producer and every committed transaction is in, or `timeout` passes."""
        from confluent_kafka import Consumer, TopicPartition

        h = self.history
        acked = {e[1] for e in h.events if e[0] == "ack"}
        committed = {e[1] for e in h.events if e[0] == "commit"}
        txn_of = {e[2]: e[4] for e in h.events if e[0] == "send"}
        want = {v for v in acked if txn_of.get(v) is None or txn_of[v] in committed}
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.topic}-reader",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(self.topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        try:
            while want - seen and time.monotonic() < deadline:
                for m in c.consume(500, 1.0):
                    if m.error():
                        continue
                    value = m.value().decode()
                    h.read("reader", m.partition(), m.offset(), value)
                    seen.add(value)
        finally:
            c.close()
