"""Hostile and broken clients on the secured listeners: each connection is closed cleanly, nothing
leaks, and real clients logged in meanwhile carry on without a single disconnect.

While a confluent-kafka producer and consumer (SASL_SSL, SCRAM-SHA-512) and a kafka-python
producer (SASL_PLAINTEXT, PLAIN) keep producing and consuming, we throw at the broker: a flood of
logins with wrong passwords (PLAIN and both SCRAMs), garbage SASL tokens (SCRAM, OAUTHBEARER, a raw
v0 token), a frame larger than sasl.server.max.receive.size before authentication, clients that
stop in the middle of the handshake (gone mid-frame, gone after the handshake, silent until the
idle timeout), a TLS ClientHello on plaintext listeners and a plaintext request on TLS listeners.
Afterwards the broker holds exactly the file descriptors it held before.
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import struct
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
psutil = pytest.importorskip("psutil")

from secure_broker import (  # noqa: E402
    PLAIN_USERS,
    SCRAM_USERS,
    TlsFiles,
    create_acls_for,
    create_scram_users,
    create_topics,
    run,
    security,
    start_broker,
)
from test_bad_input import Traffic  # noqa: E402
from test_clients import WAIT, unique  # noqa: E402
from wire import AsyncWireClient, encode_request  # noqa: E402

from kafka_compat.protocol.errors import ErrorCode  # noqa: E402
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from kafka_compat.protocol.messages.sasl_authenticate import SaslAuthenticateRequest  # noqa: E402
from kafka_compat.protocol.messages.sasl_handshake import SaslHandshakeRequest  # noqa: E402

FLOOD = 150                 # wrong-password logins
CONCURRENT = 25
IDLE_MS = 1000


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return TlsFiles(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture(scope="module")
def broker(tls):
    b = start_broker(tls)
    try:
        run(create_scram_users(b))
        yield b
    finally:
        b.close()


def address(broker, listener: str) -> tuple[str, int]:
    host, port = broker.bootstrap_for(listener).split(":")
    return host, int(port)


async def closed(reader: asyncio.StreamReader, wait: float = WAIT) -> bool:
    """True when the broker closes the connection (whatever it sent before)."""
    try:
        while await asyncio.wait_for(reader.read(65536), wait):
            pass
        return True
    except (ConnectionResetError, ssl.SSLError):
        return True
    except asyncio.TimeoutError:
        return False


async def open_raw(broker, listener: str, tls: bool = False):
    host, port = address(broker, listener)
    context = security(broker, "SSL").ssl_context if tls else None
    return await asyncio.open_connection(host, port, ssl=context, server_hostname="localhost" if tls else None)


async def wrong_password(broker, i: int) -> int:
    """One failed login; the error code the broker answered with (the connection must then close)."""
    listener = ("SASL_PLAINTEXT", "SASL_SSL")[i % 2]
    user, mechanism = [("alice", "PLAIN"), ("bob", "SCRAM-SHA-256"), ("carol", "SCRAM-SHA-512")][i % 3]
    sec = security(broker, listener, user, f"wrong-{i}", mechanism)
    reader, writer = await open_raw(broker, listener, sec.ssl_context is not None)
    client = AsyncWireClient(reader, writer)
    auth = sec.authenticator()
    request = auth.handshake_response(await client.call(17, 1, auth.handshake_request()))
    answer = await client.call(36, 1, request)
    while answer.error_code == 0:
        answer = await client.call(36, 1, auth.authenticate_response(answer))
    assert await closed(reader)
    writer.close()
    return answer.error_code


async def flood(broker) -> list[int]:
    gate = asyncio.Semaphore(CONCURRENT)

    async def one(i):
        async with gate:
            return await wrong_password(broker, i)
    return await asyncio.gather(*(one(i) for i in range(FLOOD)))


async def garbage_tokens(broker) -> None:
    for mechanism, token in (("SCRAM-SHA-256", os.urandom(300)), ("SCRAM-SHA-512", b"n,,n=bob,r=" + b"\xff" * 40),
                             ("OAUTHBEARER", b"n,,\x01auth=Bearer !!!\x01\x01"), ("PLAIN", b"\0" * 5000)):
        reader, writer = await open_raw(broker, "SASL_PLAINTEXT")
        client = AsyncWireClient(reader, writer)
        assert (await client.call(17, 1, SaslHandshakeRequest(mechanism=mechanism))).error_code == 0
        answer = await client.call(36, 1, SaslAuthenticateRequest(auth_bytes=token))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, mechanism
        assert await closed(reader), mechanism
        writer.close()
    # v0: the token is a bare frame; garbage there fails the same way, without a Kafka answer
    reader, writer = await open_raw(broker, "SASL_PLAINTEXT")
    client = AsyncWireClient(reader, writer)
    assert (await client.call(17, 0, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))).error_code == 0
    writer.write(struct.pack(">i", 64) + os.urandom(64))
    assert await closed(reader)
    writer.close()
    # not a Kafka request at all, and a frame over sasl.server.max.receive.size (512 KiB), before the handshake
    for payload in (b"\x00\x00\x00\x08" + os.urandom(8), struct.pack(">i", 600_000) + b"x" * 1000):
        for listener, tls in (("SASL_PLAINTEXT", False), ("SASL_SSL", True)):
            reader, writer = await open_raw(broker, listener, tls)
            writer.write(payload)
            assert await closed(reader), (listener, payload[:8])
            writer.close()


async def stopped_mid_handshake(broker) -> None:
    handshake = encode_request(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    for cut in (3, len(handshake) - 1, len(handshake)):          # mid size, mid frame, after the handshake
        reader, writer = await open_raw(broker, "SASL_SSL", tls=True)
        writer.write(handshake[:cut])
        await writer.drain()
        writer.close()


async def silent_mid_handshake(broker) -> None:
    """Silent after the handshake: the idle timeout closes it (as Kafka's selector does)."""
    reader, writer = await open_raw(broker, "SASL_PLAINTEXT")
    client = AsyncWireClient(reader, writer)
    assert (await client.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))).error_code == 0
    assert await closed(reader, IDLE_MS / 1000 * 4)
    # a TCP connection to a TLS listener that never says hello: closed too
    reader, writer = await open_raw(broker, "SSL")
    assert await closed(reader, IDLE_MS / 1000 * 4)
    writer.close()


def tls_on_plaintext(broker) -> None:
    """A TLS ClientHello on listeners without TLS: the 'length' it makes is absurd, the broker closes."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    for listener in ("PLAINTEXT", "SASL_PLAINTEXT"):
        with socket.create_connection(address(broker, listener), timeout=WAIT) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                context.wrap_socket(raw, server_hostname="localhost")


async def plaintext_on_tls(broker) -> None:
    request = encode_request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    for listener in ("SSL", "SASL_SSL", "MTLS"):
        reader, writer = await open_raw(broker, listener)
        writer.write(request)
        assert await closed(reader), listener
        writer.close()


def broker_fds(broker) -> int:
    return psutil.Process(broker.proc.pid).num_fds()


def test_hostile_clients_are_closed_and_real_ones_carry_on(broker):
    topic = unique("secure-bad-input")
    run(create_topics(broker, topic))
    run(create_acls_for(broker, topic, ["User:bob", "User:carol", "User:alice"]))
    errors, stats = [], {}

    def on_stats(raw):
        doc = json.loads(raw)
        stats[doc["type"]] = doc
    scram = {"bootstrap.servers": broker.bootstrap_for("SASL_SSL"), "security.protocol": "SASL_SSL",
             "ssl.ca.location": broker.tls.ca_path, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
             "sasl.password": SCRAM_USERS["carol"], "error_cb": errors.append, "stats_cb": on_stats,
             "statistics.interval.ms": 100}
    producer = ck.Producer({**scram, "linger.ms": 5})
    consumer = ck.Consumer({**scram, "group.id": unique("unused"), "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    other = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_for("SASL_PLAINTEXT"),
                                security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                sasl_plain_username="alice", sasl_plain_password=PLAIN_USERS["alice"])
    traffic = Traffic(topic, producer, other, consumer, count=100)
    produce_round, consume_all = traffic.produce_round, traffic.consume_all
    try:
        produce_round("before")
        consume_all()
        baseline = broker_fds(broker)
        codes = run(flood(broker))
        assert codes == [ErrorCode.SASL_AUTHENTICATION_FAILED] * FLOOD
        produce_round("flood")
        run(garbage_tokens(broker))
        produce_round("garbage")
        run(stopped_mid_handshake(broker))
        produce_round("stopped")
        tls_on_plaintext(broker)
        run(plaintext_on_tls(broker))
        produce_round("crossed")
        consume_all()
        deadline = time.monotonic() + WAIT
        while broker_fds(broker) != baseline and time.monotonic() < deadline:
            time.sleep(0.1)
        assert broker_fds(broker) == baseline
        stats.clear()
        deadline = time.monotonic() + WAIT
        while len(stats) < 2 and time.monotonic() < deadline:
            producer.poll(0.1)
            consumer.poll(0.1)
    finally:
        consumer.close()
        other.close()
    assert traffic.got == traffic.sent
    assert not traffic.failed and not errors, (traffic.failed, errors)
    assert set(stats) == {"producer", "consumer"}
    for name, s in stats.items():
        for b in s["brokers"].values():
            if b["nodeid"] >= 0:
                assert b["disconnects"] == 0, (name, b["name"], b["disconnects"])


def test_silent_clients_are_closed_by_the_idle_timeout(tls):
    """connections.max.idle.ms applies before authentication and before the TLS handshake completes."""
    b = start_broker(tls, **{"connections.max.idle.ms": str(IDLE_MS)})
    try:
        baseline = broker_fds(b)
        run(silent_mid_handshake(b))
        deadline = time.monotonic() + WAIT
        while broker_fds(b) > baseline and time.monotonic() < deadline:
            time.sleep(0.1)
        assert broker_fds(b) <= baseline
    finally:
        b.close()
