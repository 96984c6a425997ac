"""Six real clients over every secured listener: SSL, SASL_PLAINTEXT with PLAIN and both SCRAM
mechanisms, and SASL_SSL. Each produces records and consumes them back; with a wrong password each
gets an authentication error and never a record.

kafka-python, confluent-kafka, aiokafka, kcat, KafkaJS and the Java client are configured the way
their users configure them (a PEM CA file to trust the broker; Kafka's sasl.jaas.config for the
Java client). The broker runs the ACL authorizer: every client principal may use topics and groups
named sec-*, everything else is refused, so a login that went wrong could not read data anyway
unless it really logged in as someone. One broker serves the module.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import peers
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from secure_broker import (  # noqa: E402
    GROUP,
    PLAIN_USERS,
    PREFIXED,
    SCRAM_USERS,
    TlsFiles,
    acl,
    create_acls,
    create_scram_users,
    create_topics,
    run,
    start_broker,
)
from test_clients import WAIT, unique  # noqa: E402

COUNT = 20
ALL = 2
# (listener, mechanism, user): how each client connects
SETUPS = [
    ("SSL", None, None),
    ("SASL_PLAINTEXT", "PLAIN", "alice"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "carol"),
    ("SASL_SSL", "SCRAM-SHA-512", "bob"),
]
SETUP_IDS = ["ssl", "sasl-plain", "sasl-scram-256", "sasl-scram-512", "sasl-ssl"]
CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka", "kcat", "kafkajs", "java"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_broker(TlsFiles(str(tmp_path_factory.mktemp("tls"))))
    try:
        run(create_scram_users(b))
        run(create_acls(b, acl("User:*", ALL, "sec-", pattern=PREFIXED), acl("User:*", ALL, "*", GROUP),
                        acl("User:writer", ALL, "mtls-", pattern=PREFIXED)))
        yield b
    finally:
        b.close()


def password(user: str) -> str:
    return PLAIN_USERS.get(user) or SCRAM_USERS[user]


class Setup:
    """One way to connect, written out in each client's own terms."""

    def __init__(self, broker, listener: str, mechanism: str | None, user: str | None, secret: str | None = None,
                 cert: str | None = None):
        self.listener, self.mechanism, self.user = listener, mechanism, user
        self.password = secret if secret is not None else (password(user) if user else None)
        self.bootstrap = broker.bootstrap_for(listener)
        self.protocol = broker.listeners[listener]
        self.tls = self.protocol in ("SSL", "SASL_SSL")
        self.ca = broker.tls.ca_path
        # the client certificate `cert` of the TlsFiles: its key file, its certificate file, and both in one
        # file (the Java client's PEM key store)
        self.key = self.cert = self.keystore = None
        if cert is not None:
            self.key, self.cert = broker.tls.clients[cert]
            self.keystore = self.key.replace("-key.pem", "-keystore.pem")
            with open(self.keystore, "w") as out, open(self.key) as k, open(self.cert) as c:
                out.write(k.read() + c.read())

    def librdkafka(self) -> dict[str, str]:
        conf = {"bootstrap.servers": self.bootstrap, "security.protocol": self.protocol}
        if self.tls:
            conf["ssl.ca.location"] = self.ca
        if self.cert:
            conf.update({"ssl.certificate.location": self.cert, "ssl.key.location": self.key})
        if self.mechanism:
            conf.update({"sasl.mechanism": self.mechanism, "sasl.username": self.user, "sasl.password": self.password})
        return conf

    def kafka_python(self) -> dict:
        conf = {"bootstrap_servers": self.bootstrap, "security_protocol": self.protocol, "bootstrap_timeout_ms": 4000}
        if self.tls:
            conf["ssl_cafile"] = self.ca
        if self.cert:
            conf.update({"ssl_certfile": self.cert, "ssl_keyfile": self.key})
        if self.mechanism:
            conf.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                         "sasl_plain_password": self.password})
        return conf

    def aiokafka(self) -> dict:
        from aiokafka.helpers import create_ssl_context
        conf = {"bootstrap_servers": self.bootstrap, "security_protocol": self.protocol}
        if self.tls:
            conf["ssl_context"] = create_ssl_context(cafile=self.ca, certfile=self.cert, keyfile=self.key)
        if self.mechanism:
            conf.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                         "sasl_plain_password": self.password})
        return conf

    def java(self) -> list[str]:
        conf = [f"security.protocol={self.protocol}"]
        if self.tls:
            conf += ["ssl.truststore.type=PEM", f"ssl.truststore.location={self.ca}"]
        if self.keystore:
            conf += ["ssl.keystore.type=PEM", f"ssl.keystore.location={self.keystore}"]
        if self.mechanism:
            module = "plain.PlainLoginModule" if self.mechanism == "PLAIN" else "scram.ScramLoginModule"
            conf += [f"sasl.mechanism={self.mechanism}",
                     f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
                     f'username="{self.user}" password="{self.password}";']
        return [a for c in conf for a in ("--client-config", c)]

    def kafkajs(self) -> list[str]:
        out = ["--ssl-ca", self.ca] if self.tls else []
        if self.cert:
            out += ["--ssl-cert", self.cert, "--ssl-key", self.key]
        if self.mechanism:
            out += ["--sasl-mechanism", self.mechanism, "--sasl-username", self.user, "--sasl-password", self.password]
        return out


# -- each client: produce COUNT records to partition 0, and read partition 0 back ----------------------

def values(n: int = COUNT) -> list[str]:
    return [f"value-{i}" for i in range(n)]


def kafka_python_produce(setup: Setup, topic: str) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(**setup.kafka_python())
    for v in values():
        producer.send(topic, value=v.encode(), partition=0)
    producer.flush(WAIT)
    producer.close()


def kafka_python_consume(setup: Setup, topic: str, wait: float = WAIT) -> list[str]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(**setup.kafka_python(), enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = []
        deadline = time.monotonic() + wait
        while len(got) < COUNT and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got.extend(m.value.decode() for m in msgs)
        return got
    finally:
        consumer.close()


def confluent_produce(setup: Setup, topic: str) -> None:
    import confluent_kafka as ck
    producer = ck.Producer(setup.librdkafka())
    for v in values():
        producer.produce(topic, value=v, partition=0)
    assert producer.flush(WAIT) == 0


def confluent_consume(setup: Setup, topic: str, wait: float = WAIT) -> list[str]:
    """Raises the first error librdkafka reported (an authentication failure) once the wait is over."""
    import confluent_kafka as ck
    errors = []
    consumer = ck.Consumer({**setup.librdkafka(), "group.id": unique("sec-unused"), "enable.auto.commit": False,
                            "error_cb": errors.append})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + wait
    while len(got) < COUNT and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=100, timeout=0.5):
            if m.error() is None:
                got.append(m.value().decode())
    consumer.close()
    if errors and not got:
        raise ck.KafkaException(errors[0])
    return got


async def aiokafka_produce_async(setup: Setup, topic: str) -> None:
    from aiokafka import AIOKafkaProducer
    producer = AIOKafkaProducer(**setup.aiokafka())
    await producer.start()
    try:
        for v in values():
            await producer.send_and_wait(topic, value=v.encode(), partition=0)
    finally:
        await producer.stop()


async def aiokafka_consume_async(setup: Setup, topic: str, wait: float) -> list[str]:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    consumer = AIOKafkaConsumer(**setup.aiokafka(), enable_auto_commit=False)
    await consumer.start()
    got = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + wait
        while len(got) < COUNT and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(m.value.decode() for m in msgs)
    finally:
        await consumer.stop()
    return got


def aiokafka_produce(setup: Setup, topic: str) -> None:
    asyncio.run(aiokafka_produce_async(setup, topic))


def aiokafka_consume(setup: Setup, topic: str, wait: float = WAIT) -> list[str]:
    return asyncio.run(aiokafka_consume_async(setup, topic, wait))


def kcat(setup: Setup, *args: str, stdin: str | None = None) -> str:
    binary = peers.require(peers.kcat_binary(), "kcat")
    conf = [a for k, v in setup.librdkafka().items() for a in (("-b", v) if k == "bootstrap.servers" else
                                                              ("-X", f"{k}={v}"))]
    done = subprocess.run([binary, *args, *conf], input=stdin, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise RuntimeError(done.stderr)
    return done.stdout


def kcat_produce(setup: Setup, topic: str) -> None:
    kcat(setup, "-P", "-t", topic, "-p", "0", stdin="".join(f"{v}\n" for v in values()))


def kcat_consume(setup: Setup, topic: str, wait: float = WAIT) -> list[str]:
    out = kcat(setup, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J")
    return [json.loads(line)["payload"] for line in out.splitlines() if line]


def harness(command: list[str], setup_args: list[str], setup: Setup, *args: str) -> list[dict]:
    proc = subprocess.run([*command, *args, "--bootstrap", setup.bootstrap, *setup_args],
                          capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr[-3000:]}", lines)
    return lines


def java(setup: Setup, *args: str) -> list[dict]:
    cp = peers.require(peers.java_harness_classpath(), "the Java client")
    return harness(["java", "-cp", cp, "ClientHarness"], setup.java(), setup, *args)


def kafkajs(setup: Setup, *args: str) -> list[dict]:
    peers.require(peers.node_dir(), "KafkaJS")
    return harness([peers.node_binary(), str(peers.NODE_DIR / "harness.js")], setup.kafkajs(), setup, *args)


def harness_produce(run_harness):
    def produce(setup: Setup, topic: str) -> None:
        run_harness(setup, "produce", "--topic", topic, "--partition", "0", "--count", str(COUNT))
    return produce


def harness_consume(run_harness):
    def consume(setup: Setup, topic: str, wait: float = WAIT) -> list[str]:
        got = run_harness(setup, "consume", "--topic", topic, "--partition", "0", "--count", str(COUNT),
                          "--timeout-ms", str(int(wait * 1000)))
        return [f"value-{r['value'][1:]}" for r in got]        # the harnesses' values are v<i>
    return consume


PRODUCE = {"kafka-python": kafka_python_produce, "confluent-kafka": confluent_produce, "aiokafka": aiokafka_produce,
           "kcat": kcat_produce, "kafkajs": harness_produce(kafkajs), "java": harness_produce(java)}
CONSUME = {"kafka-python": kafka_python_consume, "confluent-kafka": confluent_consume, "aiokafka": aiokafka_consume,
           "kcat": kcat_consume, "kafkajs": harness_consume(kafkajs), "java": harness_consume(java)}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("listener, mechanism, user", SETUPS, ids=SETUP_IDS)
def test_produce_and_consume(broker, client, listener, mechanism, user):
    topic = unique(f"sec-{client}")
    run(create_topics(broker, topic))
    setup = Setup(broker, listener, mechanism, user)
    PRODUCE[client](setup, topic)
    assert CONSUME[client](setup, topic) == values()


# -- a wrong password: an authentication error, never a record -------------------------------

# what each client says (its exception, or its own log for those that give up with a generic error)
AUTH_ERROR_TEXT = {
    "kafka-python": "SaslAuthenticationFailedError", "confluent-kafka": "Authentication failed",
    "aiokafka": "SaslAuthenticationFailed", "kcat": "Authentication failed", "kafkajs": "KafkaJSSASLAuthenticationError",
    "java": "SaslAuthenticationException",
}


@pytest.fixture(scope="module")
def full_topic(broker):
    """A topic holding COUNT records, produced by alice."""
    topic = unique("sec-full")
    run(create_topics(broker, topic))
    confluent_produce(Setup(broker, "SASL_PLAINTEXT", "PLAIN", "alice"), topic)
    return topic


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("listener, mechanism, user", [SETUPS[1], SETUPS[2], SETUPS[4]],
                         ids=["sasl-plain", "sasl-scram-256", "sasl-ssl-scram-512"])
def test_a_wrong_password_is_an_authentication_error_and_no_data(broker, full_topic, caplog, client, listener,
                                                                 mechanism, user):
    setup = Setup(broker, listener, mechanism, user, secret="not-the-password")
    got = []
    with pytest.raises(Exception) as failure:
        # the Java client fails its first poll once refused, but a JVM on a busy machine needs more than 3 s to get there
        got = CONSUME[client](setup, full_topic, wait=30 if client == "java" else 3)
    assert got == []
    said = f"{failure.value!r} {failure.value} {caplog.text}"
    assert AUTH_ERROR_TEXT[client] in said, said[-3000:]
    assert "value-" not in str(failure.value)


# -- mutual TLS: the client certificate's mapped name is the principal ----------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_mutual_tls_principal_is_the_certificates_mapped_name(broker, client):
    """On MTLS (client certificates required, ssl.principal.mapping.rules) the certificate
    CN=writer,OU=clients,O=kafka-compat is User:writer, the only principal allowed mtls-* topics;
    CN=reader (User:reader) reads nothing of them. (aiokafka logs the refused topic and retries it
    for 40 s before it gives up, so the five others try the reader's certificate here;
    tests/test_security_wire.py refuses it on the wire.)"""
    topic = unique(f"mtls-{client}")
    run(create_topics(broker, topic))
    writer = Setup(broker, "MTLS", None, None, cert="writer")
    PRODUCE[client](writer, topic)
    assert CONSUME[client](writer, topic) == values()
    if client == "aiokafka":
        return
    got = []
    try:
        got = CONSUME[client](Setup(broker, "MTLS", None, None, cert="reader"), topic, wait=3)
    except Exception as e:          # a client that gives up says why: not authorized, never a TLS failure
        if isinstance(e, RuntimeError) and len(e.args) == 2:
            assert e.args[1] == []      # a harness: it printed no record ("fewer records than --count")
        else:
            assert "uthoriz" in f"{e!r} {e}" or "AUTHORIZATION" in f"{e!r} {e}", e
    assert got == []
