"""Connection creation rates (KIP-612) and connection limits changed at runtime, on a real broker.

An `ip` client quota's connection_creation_rate (set with AlterClientQuotas, for one address or the
default ip) holds a connection over the rate unanswered for its throttle time and then closes it,
without counting it. max.connection.creation.rate makes the listener wait before it takes the next
connection; nothing is refused. With Kafka's default windows (11 of 1 s) a rate is measured over at
least 10 s, so a quota of 2 per second lets 20 connections through at once and holds off the 21st:
its rate is 21 / 10 s, and it waits (2.1 - 2) / 2 x 10 s = 500 ms (less as the window grows).
"""
from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from test_metrics import samples, scrape, value
from test_quotas import alter, describe
from wire import WireClient

from kafka_compat.endpoint import EndPoint, SecurityProtocol
from kafka_compat.network.connection_quotas import UNLIMITED, ConnectionQuotas
from kafka_compat.network.socket_server import SocketServer
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IAC
from kafka_compat.server.api_versions import ApiVersionsApi
from kafka_compat.server.kafka_apis import KafkaApis
from kafka_compat.testing import EmbeddedBroker, free_port

RATE = "connection_creation_rate"
API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 7, -1)      # ApiVersions v0, correlation id 7


def answered(port: int, source: str = "127.0.0.1") -> bool:
    """A new connection from `source` sends ApiVersions: True if answered, False if closed unanswered."""
    with socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0)) as s:
        s.sendall(API_VERSIONS_V0)
        try:
            head = s.recv(8)
        except ConnectionResetError:
            return False
        if not head:
            return False
        assert struct.unpack(">i", head[4:8])[0] == 7
        return True


def answers(port: int, n: int) -> list[bool]:
    """`n` connections made at once, each sending ApiVersions: which are answered (not closed unanswered)."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(n)]
    try:
        for s in socks:
            s.sendall(API_VERSIONS_V0)
        out = []
        for s in socks:
            try:
                out.append(len(s.recv(8)) == 8)
            except ConnectionResetError:
                out.append(False)
        return out
    finally:
        for s in socks:
            s.close()


def set_rate(broker, ip: str | None, rate: int | None, source: str | None = None) -> None:
    c = WireClient("127.0.0.1", broker.port, source=source)
    try:
        assert alter(c, {"ip": ip}, {RATE: rate}) == (ErrorCode.NONE, None)
    finally:
        c.close()


def alter_broker(broker, configs: dict[str, str], source: str = "127.0.0.2"):
    """IncrementalAlterConfigs SET on broker 0, from an address of its own (not the one under test)."""
    c = WireClient("127.0.0.1", broker.port, source=source)
    try:
        r = c.call(44, 0, IAC(resources=[IAC.AlterConfigsResource(resource_type=4, resource_name="0", configs=[
            IAC.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])],
            validate_only=False))
    finally:
        c.close()
    return r.responses[0].error_code, r.responses[0].error_message


def test_rates_measured_as_kafka_measures_a_quota():
    now = [0]
    q = ConnectionQuotas(samples=11, window_seconds=1, clock=lambda: now[0])
    assert not q.rate_limited and q.record_ip("10.0.0.1") == 0
    q.update_ip_connection_rate("10.0.0.1", 2)
    assert q.rate_limited
    assert [q.record_ip("10.0.0.1") for _ in range(20)] == [0] * 20       # 20 in the first 10 s: 2 per second
    assert q.record_ip("10.0.0.1") == 500                                 # 21 / 10 s: 500 ms brings it to 2
    assert q.record_ip("10.0.0.1") == 500                                 # the refused one was taken back
    assert q.record_ip("10.0.0.2") == 0                                   # another address: no quota
    q.update_ip_connection_rate(None, 1)                                  # the default ip entity
    assert [q.record_ip("10.0.0.2") for _ in range(10)] == [0] * 10
    assert q.record_ip("10.0.0.2") == 1000                                # (1.1 - 1) / 1 x 10 s, capped at a window
    assert q.record_ip("10.0.0.1") == 500                                 # its own quota outranks the default
    q.update_ip_connection_rate("10.0.0.1", None)                         # back to the default (1): further over
    assert q.record_ip("10.0.0.1") == 1000
    now[0] = 20_000                                                       # a quiet window: the rate has decayed
    assert q.record_ip("10.0.0.1") == 0
    q.update_ip_connection_rate(None, None)
    assert not q.rate_limited

    b = ConnectionQuotas(max_connection_rate=2, samples=11, window_seconds=1, clock=lambda: now[0])
    assert b.rate_limited and [b.record_connection() for _ in range(20)] == [0] * 20
    assert b.record_connection() == 500 and b.record_connection(protected=True) == 0
    b.update(max_connection_rate=UNLIMITED)
    assert b.record_connection() == 0 and not b.rate_limited


def metrics(b) -> dict:
    return samples(scrape(b))


def with_metrics(overrides: dict | None = None) -> EmbeddedBroker:
    port = free_port()
    b = EmbeddedBroker({**(overrides or {}), "prometheus.listener": f"http://127.0.0.1:{port}"})
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    return b


def test_an_ip_quota_holds_off_connections_over_its_rate_and_closes_them():
    """At 1 a second, 11 connections are over the rate however long the first 10 took (under 10 s)."""
    with with_metrics() as b:
        set_rate(b, "127.0.0.1", 1)
        before = value(metrics(b), "kafka_server_socket_server_metrics_connection_creation_total",
                       listener="PLAINTEXT")
        got = [answered(b.port) for _ in range(11)]
        assert got == [True] * 10 + [False], got
        after = metrics(b)                  # (a scrape is HTTP, on its own port: not rate-limited)
        assert value(after, "kafka_server_socket_server_metrics_connection_creation_total",
                     listener="PLAINTEXT") == before + 10                  # the held one was never taken
        assert value(after, "kafka_server_socket_server_metrics_ip_connection_accept_throttle_time",
                     listener="PLAINTEXT") > 0
        assert answered(b.port, source="127.0.0.2")           # another address is not held up
        assert describe(WireClient("127.0.0.1", b.port, source="127.0.0.2"), [("ip", 0, "127.0.0.1")]) == {
            (("ip", "127.0.0.1"),): {RATE: 1.0}}
        set_rate(b, "127.0.0.1", None, source="127.0.0.2")
        assert answered(b.port)


def test_the_default_ip_quota_is_kept_across_a_restart():
    with EmbeddedBroker() as b:
        set_rate(b, None, 1)
        assert [answered(b.port) for _ in range(10)] == [True] * 10
        assert not answered(b.port)
        b.restart()                                            # loaded from dynamic-config.json: a new rate
        assert [answered(b.port, source="127.0.0.3") for _ in range(10)] == [True] * 10
        assert not answered(b.port, source="127.0.0.3")
        c = WireClient("127.0.0.1", b.port, source="127.0.0.4")
        assert alter(c, {"ip": None}, {RATE: None}) == (ErrorCode.NONE, None)
        c.close()
        assert answered(b.port, source="127.0.0.3")


def test_the_broker_creation_rate_makes_the_listener_wait_and_refuses_nothing():
    """At 2 a second, with the broker's own readiness probe first, 22 connections cannot all be taken within
    1 s of each other, wherever the windows fall (a run over every offset with a stepped clock gives 1.004 s)."""
    with with_metrics({"max.connection.creation.rate": 2}) as b:
        start = time.monotonic()
        assert [answered(b.port) for _ in range(22)] == [True] * 22
        assert time.monotonic() - start >= 0.9
        got = metrics(b)
        assert value(got, "kafka_server_socket_server_metrics_connection_accept_throttle_time",
                     listener="PLAINTEXT") > 0
        assert value(got, "kafka_server_socket_server_metrics_connection_creation_total", listener="PLAINTEXT") \
            == value(got, "kafka_server_socket_server_metrics_connection_close_total", listener="PLAINTEXT") \
            + value(got, "kafka_server_socket_server_metrics_connections", listener="PLAINTEXT") >= 22


def test_connection_limits_change_at_runtime():
    with EmbeddedBroker() as b:
        held = [WireClient("127.0.0.1", b.port) for _ in range(3)]
        for c in held:                                         # answered: counted by the broker
            assert c.call(18, 0, ApiVersionsRequest()).error_code == ErrorCode.NONE
        assert answered(b.port)
        assert alter_broker(b, {"max.connections.per.ip.overrides": "127.0.0.1"})[0] == ErrorCode.INVALID_REQUEST
        assert alter_broker(b, {"max.connections.per.ip": "3"}) == (ErrorCode.NONE, None)
        assert not answered(b.port)                            # three open already: a fourth is over the limit
        assert answered(b.port, source="127.0.0.2")
        assert alter_broker(b, {"max.connections.per.ip.overrides": "127.0.0.1:10"}) == (ErrorCode.NONE, None)
        assert answered(b.port)
        assert alter_broker(b, {"max.connections": "3"}) == (ErrorCode.NONE, None)
        assert not answered(b.port, source="127.0.0.3")        # three held: the broker is full
        for c in held:
            c.close()


@pytest.mark.parametrize("value", ["0", "-1"])
def test_an_ip_quota_must_be_positive(value):
    with EmbeddedBroker() as b:
        c = WireClient("127.0.0.1", b.port)
        code, _ = alter(c, {"ip": "127.0.0.1"}, {RATE: int(value)})
        assert code == ErrorCode.INVALID_REQUEST
        c.close()
        assert answered(b.port)


def test_connections_waiting_their_turn_are_bounded_by_the_backlog():
    """Kafka's waiting acceptor leaves connections in the kernel's backlog, which drops what overflows;
    here they are accepted already, so once `max_waiting` wait, the next are closed at once, unread."""
    async def scenario():
        # two 1 s windows at 1 a second: the first connection passes, each later one waits up to a second
        quotas = ConnectionQuotas(max_connection_rate=1, samples=2, window_seconds=1)
        server = SocketServer([EndPoint("PLAINTEXT", "127.0.0.1", 0, SecurityProtocol.PLAINTEXT)],
                              KafkaApis([ApiVersionsApi({18: (0, 3)})]).handle, {18: (0, 3)}, max_request_bytes=1 << 20, max_waiting=3,
                              connection_quotas=quotas)
        await server.start()
        try:
            return await asyncio.to_thread(answers, server.bound[0].port, 8)
        finally:
            await server.stop()

    got = asyncio.run(scenario())
    # at most the first and the three that waited are served; the rest found the queue full
    assert 1 <= got.count(True) <= 4 and got.count(False) >= 4, got
