"""socket.send.buffer.bytes / socket.receive.buffer.bytes reach the accepted sockets (Kafka applies
them per connection; -1 leaves the OS's autotuned default)."""
from __future__ import annotations

import re
import shutil
import socket
import subprocess

import pytest
from wire import WireClient

from kafka_compat.network.connection import set_buffer_sizes
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.testing import EmbeddedBroker


def test_configured_sizes_are_set_and_minus_one_keeps_the_default():
    a, b = socket.socketpair()
    try:
        default_snd = b.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        set_buffer_sizes(a, 65536, 32768)
        set_buffer_sizes(b, -1, -1)
        # Linux reports twice the requested size (it counts its bookkeeping too).
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) in (65536, 2 * 65536)
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) in (32768, 2 * 32768)
        assert b.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == default_snd
    finally:
        a.close()
        b.close()


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to look at the broker's socket")
def test_the_broker_applies_them_to_accepted_connections():
    with EmbeddedBroker({"socket.send.buffer.bytes": 65536, "socket.receive.buffer.bytes": 49152}) as b:
        c = WireClient("127.0.0.1", b.port)
        try:
            c.call(18, 3, ApiVersionsRequest(client_software_name="buf", client_software_version="1"))
            out = subprocess.run(["ss", "-tmnH", "state", "established", f"( sport = :{b.port} )"],
                                 capture_output=True, text=True, check=True).stdout
        finally:
            c.close()
    rb = [int(x) for x in re.findall(r"\brb(\d+)", out)]
    tb = [int(x) for x in re.findall(r"\btb(\d+)", out)]
    assert rb == [2 * 49152] and tb == [2 * 65536], out
