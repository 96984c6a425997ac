"""KIP-368 re-authentication with real clients, on a broker whose SASL sessions last
connections.max.reauth.ms = 5 s.

Each client consumes, over SASL_SSL with SCRAM-SHA-512, records that a PLAINTEXT producer writes one
by one over three sessions' time. The clients that re-authenticate (confluent-kafka, kafka-python,
KafkaJS, the Java client) log in again on their live connections: the broker logs their
re-authentications and closes none of their connections for an expired session. aiokafka does not
re-authenticate: the broker closes its connection at the first request after the session ended, as
Kafka does; it connects again and still gets every record exactly once, in order.
"""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from secure_broker import (  # noqa: E402
    GROUP,
    PREFIXED,
    TlsFiles,
    acl,
    create_acls,
    create_scram_users,
    create_topics,
    run,
    start_broker,
)
from test_clients import unique  # noqa: E402
from test_security_clients import CONSUME, COUNT, Setup, harness_consume, kafkajs, values  # noqa: E402

ck = pytest.importorskip("confluent_kafka")
psutil = pytest.importorskip("psutil")

SESSION_MS = 5000       # the Java client logs in again at 85-95% of a session: leave it room on a busy machine
SPAN_S = 3 * SESSION_MS / 1000          # how long the records keep coming: three sessions
ALL = 2
REAUTHENTICATING = ["confluent-kafka", "kafka-python", "kafkajs", "java"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_broker(TlsFiles(str(tmp_path_factory.mktemp("tls"))), **{"connections.max.reauth.ms": str(SESSION_MS)})
    try:
        run(create_scram_users(b))
        run(create_acls(b, acl("User:*", ALL, "reauth-", pattern=PREFIXED), acl("User:*", ALL, "*", GROUP)))
        yield b
    finally:
        b.close()


def consumer_for(client: str):
    if client == "kafkajs":     # KafkaJS logs in again 10 s before the end by default: longer than a session here
        return harness_consume(lambda setup, *args: kafkajs(setup, *args, "--reauthentication-threshold-ms", "1000"))
    return CONSUME[client]


def trickle(broker, topic: str, harness: bool) -> threading.Thread:
    """Writes values() one by one over SPAN_S on the PLAINTEXT listener (its sessions never expire);
    for a harness, as the harnesses write them (v<i>). It starts once the consumer is connected (a JVM
    takes seconds to start), so the consumer lives through three sessions."""
    port = int(broker.bootstrap_for("SASL_SSL").rsplit(":", 1)[1])

    def produce():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
                c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED for c in psutil.Process(broker.proc.pid).net_connections("tcp")):
            time.sleep(0.05)
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap_for("PLAINTEXT"), "linger.ms": 0})
        for i, v in enumerate(values()):
            v = f"v{i}" if harness else v
            producer.produce(topic, value=v, partition=0)
            producer.flush(10)
            time.sleep(SPAN_S / COUNT)
        assert producer.flush(10) == 0
    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    return thread


def consume_while_produced(broker, client: str) -> tuple[list[str], str]:
    """What the client consumed, and the broker's log lines written meanwhile."""
    topic = unique(f"reauth-{client}")
    run(create_topics(broker, topic))
    with open(broker.log_path, "rb") as log:
        log.seek(0, 2)
        producer = trickle(broker, topic, client in ("kafkajs", "java"))
        got = consumer_for(client)(Setup(broker, "SASL_SSL", "SCRAM-SHA-512", "bob"), topic, wait=SPAN_S + 60)
        producer.join(30)
        return got, log.read().decode(errors="replace")


@pytest.mark.parametrize("client", REAUTHENTICATING)
def test_a_client_that_reauthenticates_keeps_its_connections(broker, client):
    got, log = consume_while_produced(broker, client)
    assert got == values()
    # the consumer lived three sessions: without logging in again it would have been closed
    assert "re-authenticated as User:bob with SASL/SCRAM-SHA-512" in log, log[-3000:]
    assert "SASL session expired" not in log, log[-3000:]


def test_a_client_that_does_not_is_closed_at_expiry_and_loses_nothing(broker):
    got, log = consume_while_produced(broker, "aiokafka")
    assert got == values()                      # exactly once, in order, across the reconnections
    assert "SASL session expired" in log, log[-3000:]
    assert "re-authenticated" not in log
