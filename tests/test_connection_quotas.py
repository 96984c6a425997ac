"""max.connections and max.connections.per.ip (Kafka's ConnectionQuotas): a connection over a limit is
closed before it is served, the others keep working, and a closed one frees its place."""
from __future__ import annotations

import time

import pytest
from wire import WireClient

from kafka_compat.network.connection_quotas import ConnectionQuotas, parse_overrides
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.testing import EmbeddedBroker


def _serves(c: WireClient) -> bool:
    try:
        return c.call(18, 3, ApiVersionsRequest(client_software_name="q", client_software_version="1")).error_code == 0
    except (ConnectionError, OSError):
        return False


def _served_connection(port: int) -> WireClient:
    """A served connection, once the broker has seen earlier ones (EmbeddedBroker's start probe) close."""
    for _ in range(100):
        c = WireClient("127.0.0.1", port)
        if _serves(c):
            return c
        c.sock.close()
    pytest.fail("no connection was served")


def test_overrides_parse_kafkas_host_count_pairs():
    assert parse_overrides("127.0.0.1:5, ::1:7,[::2]:0,localhost:3") == {
        "127.0.0.1": 3, "::1": 7, "::2": 0}          # localhost resolves to 127.0.0.1: the later entry wins
    assert parse_overrides("") == {}
    with pytest.raises(ValueError):
        parse_overrides("127.0.0.1")
    with pytest.raises(ValueError):
        parse_overrides("127.0.0.1:many")


def test_quota_counts_per_ip_and_in_total():
    q = ConnectionQuotas(max_connections=3, max_per_ip=2, per_ip_overrides={"10.0.0.9": 0})
    assert q.try_acquire("10.0.0.1") is None
    assert q.try_acquire("10.0.0.1") is None
    assert "max.connections.per.ip" in q.try_acquire("10.0.0.1")
    assert q.try_acquire("10.0.0.9") is not None          # its override allows none
    assert q.try_acquire("10.0.0.2") is None
    assert "max.connections" in q.try_acquire("10.0.0.3")
    q.release("10.0.0.1")
    assert q.try_acquire("10.0.0.3") is None
    assert q.total == 3 and q.by_ip == {"10.0.0.1": 1, "10.0.0.2": 1, "10.0.0.3": 1}


@pytest.mark.parametrize("limit", ["max.connections.per.ip", "max.connections"])
def test_broker_closes_connections_over_the_limit(limit):
    with EmbeddedBroker({limit: 3}) as b:
        kept = [_served_connection(b.port) for _ in range(3)]
        extra = WireClient("127.0.0.1", b.port)
        assert extra.is_closed_by_peer()
        assert all(_serves(c) for c in kept)            # the others are untouched
        kept.pop().sock.close()
        again = _served_connection(b.port)              # the broker sees the close soon; then a place is free
        for c in kept + [again, extra]:
            c.sock.close()


def test_bad_overrides_stop_the_broker_with_a_message():
    b = EmbeddedBroker({"max.connections.per.ip.overrides": "127.0.0.1"})
    try:
        with pytest.raises(RuntimeError, match="not host:count"):
            b.start()
    finally:
        b.close()


def test_the_inter_broker_listener_is_not_held_to_max_connections():
    """Clients that fill max.connections cannot lock the other brokers out: a connection on the
    inter-broker listener is taken anyway, and the client connection idle longest makes room (Kafka's
    protected listener)."""
    with EmbeddedBroker({"max.connections": 2, "inter.broker.listener.name": "INTERNAL",
                         "listener.security.protocol.map": "CLIENTS:PLAINTEXT,INTERNAL:PLAINTEXT"},
                        listeners={"CLIENTS": "PLAINTEXT", "INTERNAL": "PLAINTEXT"}) as b:
        older = _served_connection(b.ports["CLIENTS"])
        newer = _served_connection(b.ports["CLIENTS"])
        assert WireClient("127.0.0.1", b.ports["CLIENTS"]).is_closed_by_peer()      # the broker is full
        assert _serves(newer)                                                       # newer is the active one
        broker = WireClient("127.0.0.1", b.ports["INTERNAL"])
        assert _serves(broker)
        assert older.is_closed_by_peer() and _serves(newer)
        assert WireClient("127.0.0.1", b.ports["CLIENTS"]).is_closed_by_peer()      # still full: 2 of 2


def test_a_listeners_own_limits():
    """listener.name.<l>.max.connections caps that listener alone; listener.name.<l>.max.connection.creation.rate
    makes that listener wait, as the broker-wide rate does (22 connections at 2 a second span over 0.9 s,
    wherever the rate's windows fall)."""
    with EmbeddedBroker({"listener.name.capped.max.connections": 1,
                         "listener.name.slow.max.connection.creation.rate": 2,
                         "listener.security.protocol.map": "CAPPED:PLAINTEXT,SLOW:PLAINTEXT,OPEN:PLAINTEXT",
                         "inter.broker.listener.name": "OPEN"},
                        listeners={"CAPPED": "PLAINTEXT", "SLOW": "PLAINTEXT", "OPEN": "PLAINTEXT"}) as b:
        only = _served_connection(b.ports["CAPPED"])
        assert WireClient("127.0.0.1", b.ports["CAPPED"]).is_closed_by_peer()
        kept = [_served_connection(b.ports["OPEN"]) for _ in range(3)]          # no limit of its own
        assert _serves(only)
        start = time.monotonic()
        for _ in range(22):
            c = WireClient("127.0.0.1", b.ports["SLOW"])
            assert _serves(c)
            c.sock.close()
        assert time.monotonic() - start >= 0.9
        for c in [only, *kept]:
            c.sock.close()
