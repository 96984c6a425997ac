"""connections.max.idle.ms: silent connections are closed, busy ones are not; a muted connection whose
client went away is closed too."""
from __future__ import annotations

import time

import psutil
import pytest
from test_controller_mutation_quota import WINDOWS, create
from test_quotas import alter
from wire import WireClient

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.server.client_quota_manager import CONTROLLER_MUTATION_RATE
from kafka_compat.testing import EmbeddedBroker

IDLE_MS = 400


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"num.partitions": 1, "connections.max.idle.ms": IDLE_MS}) as b:
        yield b


def test_a_silent_connection_is_closed_after_the_idle_time(broker):
    c = WireClient("127.0.0.1", broker.port)
    try:
        resp = c.call(18, 3, ApiVersionsRequest(client_software_name="idle", client_software_version="1"))
        assert resp.error_code == ErrorCode.NONE
        assert c.is_closed_by_peer(wait=30.0)
    finally:
        c.close()


def test_a_connection_waiting_in_a_long_poll_is_not_idle(broker):
    """The fetch waits longer than the idle time; its answer still arrives on the same connection."""
    c = WireClient("127.0.0.1", broker.port, timeout=30.0)
    try:
        c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="idle-lp")],
                                      allow_auto_topic_creation=True))
        body = FetchRequest(replica_id=-1, max_wait_ms=3 * IDLE_MS, min_bytes=1, max_bytes=1 << 20,
                            isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                topic="idle-lp", partitions=[FetchRequest.FetchPartition(
                                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
        resp = c.call(1, 12, body)
        (part,) = resp.responses[0].partitions
        assert part.error_code == ErrorCode.NONE and part.high_watermark == 0
        assert c.is_closed_by_peer(wait=30.0)           # and once silent, it is reaped like any other
    finally:
        c.close()


def test_a_muted_connection_whose_client_went_away_is_closed():
    """A throttled connection is muted (KIP-219): it reads nothing, so it cannot see its client close. The
    broker notices from the kernel (CLOSE_WAIT) and closes it long before the throttle of minutes ends."""
    with EmbeddedBroker(WINDOWS) as b:
        assert alter(WireClient("127.0.0.1", b.port), {"user": None},
                     {CONTROLLER_MUTATION_RATE: 0.01}) == (ErrorCode.NONE, None)     # a tenth of a token
        c = WireClient("127.0.0.1", b.port)
        r = create(c, 6, ("muted", 2))                # accepted; the bucket at -1.9 tokens: 190 s
        assert r.topics[0].error_code == ErrorCode.NONE and r.throttle_time_ms > 100_000
        port = c.sock.getsockname()[1]
        c.send(3, 1, MetadataRequest(topics=None))    # read ahead, never answered while muted
        c.close()
        broker = psutil.Process(b.proc.pid)

        def held() -> bool:
            return any(s.raddr and s.raddr.port == port for s in broker.net_connections("tcp"))
        deadline = time.monotonic() + 60
        while held() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not held(), "the broker still holds the connection of a client that went away"
