"""The outbound client against small scripted servers on loopback and a real broker: pipelining by
correlation id, timeouts that close the connection, bounded frames, reconnecting, the thread bridge."""
from __future__ import annotations

import asyncio
import struct
import threading

import pytest

from kafka_compat.network.client import (
    DisconnectedError,
    InvalidResponse,
    NetworkClient,
    Node,
    RequestTimeoutError,
    ThreadSafeSender,
)
from kafka_compat.protocol.frames import FrameReader, frame_response, parse_request
from kafka_compat.protocol.messages import APIS
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka_compat.protocol.messages.fetch import FetchRequest, FetchResponse
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.testing import EmbeddedBroker

API_VERSIONS = 18


def answer(correlation_id: int, error: int = 0) -> bytes:
    body = ApiVersionsResponse(error_code=error, api_keys=[])
    return bytes(frame_response(APIS[API_VERSIONS], 3, correlation_id, body))


class ScriptedServer:
    """A loopback server: every request frame goes to ``script(requests, writer)``, which may answer."""

    def __init__(self, script):
        self.script = script
        self.requests = []
        self.connections = 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.node = Node(1, "127.0.0.1", self.server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader, writer):
        self.connections += 1
        frames = FrameReader()
        try:
            while data := await reader.read(65536):
                frames.feed(data)
                for frame in frames.frames():
                    self.requests.append(parse_request(frame))
                    await self.script(self.requests, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def run(coro):
    return asyncio.run(coro)


def test_pipelined_answers_are_matched_by_correlation_id_not_order():
    async def reverse_pairs(requests, writer):
        if len(requests) % 2 == 0:          # answer each pair of requests in reverse, with distinct errors
            for r in reversed(requests[-2:]):
                writer.write(answer(r.correlation_id, error=r.correlation_id))
            await writer.drain()

    async def main():
        async with ScriptedServer(reverse_pairs) as server:
            client = NetworkClient()
            sends = [client.send(server.node, API_VERSIONS, 3, ApiVersionsRequest()) for _ in range(4)]
            answers = await asyncio.gather(*sends)
            sent = [r.correlation_id for r in server.requests]
            await client.close()
            return sent, [a.error_code for a in answers], server.connections

    sent, errors, connections = run(main())
    assert errors == sent and len(set(sent)) == 4     # each caller got the answer to its own request
    assert connections == 1                           # all four on one connection


def test_large_answers_arriving_in_pieces_come_whole_and_small_ones_after_them_are_not_held_back():
    """A fetch response of a few MiB trickles in (the client waits for a low-water mark of its bytes, never
    for more than the frame still needs); answers of every size after it still arrive."""
    sizes = [3 * 1024 * 1024 + 17, 0, 1_500_000, 70_000, 0]

    async def fetch_answers(requests, writer):
        r = requests[-1]
        size = sizes[len(requests) - 1]
        if not size:
            writer.write(answer(r.correlation_id))
        else:
            records = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
            body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
                FetchResponse.PartitionData(partition_index=0, high_watermark=size, records=records)])])
            frame = bytes(frame_response(APIS[1], 12, r.correlation_id, body))
            for i in range(0, len(frame), 100_000):          # in pieces, with pauses between them
                writer.write(frame[i:i + 100_000])
                await writer.drain()
                await asyncio.sleep(0.001)
        await writer.drain()

    async def main():
        async with ScriptedServer(fetch_answers) as server:
            client = NetworkClient(max_response_bytes=8 * 1024 * 1024)
            got = []
            for size in sizes:
                if size:
                    response = await client.send(server.node, 1, 12, FetchRequest(), timeout_ms=10_000)
                    part = response.responses[0].partitions[0]
                    got.append((part.high_watermark, bytes(part.records)))
                else:
                    got.append((await client.send(server.node, API_VERSIONS, 3, ApiVersionsRequest(),
                                                  timeout_ms=10_000)).error_code)
            await client.close()
            return got, server.connections

    got, connections = run(main())
    assert connections == 1
    for size, answered in zip(sizes, got):
        if size:
            assert answered[0] == size and len(answered[1]) == size
            assert answered[1][:512] == bytes(range(256)) * 2 and answered[1][-(size % 256 or 1):] != b""
        else:
            assert answered == 0


def test_a_request_without_answer_times_out_and_closes_its_connection():
    async def silent_once(requests, writer):
        if len(requests) > 1:
            writer.write(answer(requests[-1].correlation_id))
            await writer.drain()

    async def main():
        async with ScriptedServer(silent_once) as server:
            client = NetworkClient(reconnect_backoff_ms=1)
            with pytest.raises(RequestTimeoutError):
                await client.send(server.node, API_VERSIONS, 3, ApiVersionsRequest(), timeout_ms=200)
            closed = not client.is_ready(server.node.node_id)
            again = await client.send(server.node, API_VERSIONS, 3, ApiVersionsRequest())
            await client.close()
            return closed, again.error_code, server.connections

    closed, error, connections = run(main())
    assert closed and error == 0 and connections == 2     # the next request reconnected


@pytest.mark.parametrize("reply", [
    struct.pack(">i", 200_000) + b"\0" * 10,              # longer than the client allows
    struct.pack(">i", -5),                                # a negative length
    struct.pack(">ii", 4, 999_999),                       # a correlation id nobody sent
    struct.pack(">iih", 6, 1, 0),                         # the right id but a body cut short
])
def test_a_bad_answer_fails_the_request_and_drops_the_connection(reply):
    async def garbage(requests, writer):
        writer.write(reply)
        await writer.drain()

    async def main():
        async with ScriptedServer(garbage) as server:
            client = NetworkClient(max_response_bytes=100_000)
            with pytest.raises((InvalidResponse, DisconnectedError)):
                await client.send(server.node, API_VERSIONS, 3, ApiVersionsRequest(), timeout_ms=5000)
            ready = client.is_ready(server.node.node_id)
            await client.close()
            return ready

    assert run(main()) is False


def test_the_peer_closing_fails_every_request_in_flight():
    async def hang_up_after_two(requests, writer):
        if len(requests) == 2:
            writer.transport.abort()

    async def main():
        async with ScriptedServer(hang_up_after_two) as server:
            client = NetworkClient()
            results = await asyncio.gather(
                *[client.send(server.node, API_VERSIONS, 3, ApiVersionsRequest()) for _ in range(2)],
                return_exceptions=True)
            await client.close()
            return results

    assert all(isinstance(r, DisconnectedError) for r in run(main()))


def test_nobody_listening_is_a_disconnection_and_the_backoff_grows_to_its_cap():
    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        client = NetworkClient(reconnect_backoff_ms=1, reconnect_backoff_max_ms=5)
        for _ in range(2):
            with pytest.raises(DisconnectedError):
                await client.send(Node(7, "127.0.0.1", port), API_VERSIONS, 3, ApiVersionsRequest())
        await client.close()
        return client

    client = run(main())
    assert 0.8 <= client.backoff_ms(1) <= 1.2
    assert 1.6 <= client.backoff_ms(2) <= 2.4
    assert 4.0 <= client.backoff_ms(10) <= 6.0


def test_the_thread_bridge_reaches_a_real_broker_from_another_thread():
    with EmbeddedBroker() as broker:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        client = NetworkClient()
        send = ThreadSafeSender(client, loop, lambda broker_id: Node(broker_id, "127.0.0.1", broker.port))
        try:
            futures = [send(0, 3, 12, MetadataRequest(topics=None)) for _ in range(3)]
            answers = [f.result(timeout=10) for f in futures]
            assert all(a.brokers[0].port == broker.port for a in answers)
            failed = ThreadSafeSender(client, loop, lambda _: 1 / 0).send(0, 3, 12, MetadataRequest())
            with pytest.raises(ZeroDivisionError):
                failed.result(timeout=1)
        finally:
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=5)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()
