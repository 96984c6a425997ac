"""The stored golden frames are what their manifests say, and the recorder pairs frames right.

No broker or client is needed: the proxy test uses an in-process fake upstream.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import struct
import threading

import capture
import pytest

MANIFESTS = sorted(capture.FRAMES_DIR.glob("*/manifest.json"))
REQUEST_HEAD = struct.Struct(">hhi")


def _entries():
    for path in MANIFESTS:
        manifest = json.loads(path.read_text())
        for entry in manifest["files"] + manifest.get("variants", []):
            yield pytest.param(path.parent, entry, id=f"{path.parent.name}/{entry['file']}")


def test_frames_were_recorded():
    clients = {p.parent.name for p in MANIFESTS}
    assert {"kafka-python", "confluent-kafka", "aiokafka", "kcat", "kafkajs"} <= clients


@pytest.mark.parametrize("folder,entry", list(_entries()))
def test_file_matches_manifest(folder, entry):
    data = (folder / entry["file"]).read_bytes()
    assert len(data) == entry["size"] <= capture.MAX_FIXTURE_BYTES
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert entry["file"].split("/")[-1].startswith(
        f"{entry['api_key']:02d}-{entry['api_name']}-v{entry['api_version']}-{entry['direction']}")
    if entry["direction"] == "request":
        assert REQUEST_HEAD.unpack_from(data) == (entry["api_key"], entry["api_version"], entry["correlation_id"])
    else:
        assert struct.unpack_from(">i", data)[0] == entry["correlation_id"]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.parent.name)
def test_every_file_is_listed_and_pairs_share_a_correlation_id(path):
    manifest = json.loads(path.read_text())
    listed = {e["file"] for e in manifest["files"] + manifest.get("variants", [])}
    on_disk = {str(p.relative_to(path.parent)) for p in path.parent.rglob("*.bin")}
    assert listed == on_disk
    by_key = {}
    for e in manifest["files"]:
        by_key.setdefault((e["api_key"], e["api_version"]), {})[e["direction"]] = e
    for pair in by_key.values():
        assert "request" in pair
        if "response" in pair:
            assert pair["response"]["correlation_id"] == pair["request"]["correlation_id"]
        else:
            assert pair["request"]["response_omitted"]


def _request(api_key: int, version: int, correlation_id: int, client_id: bytes, body: bytes) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id + body


def test_proxy_forwards_untouched_and_pairs_by_correlation_id():
    """Two pipelined requests whose replies come back in reverse order still pair up."""

    async def upstream(reader, writer):
        frames = [await capture.read_frame(reader) for _ in range(2)]
        for frame in reversed(frames):
            reply = frame[4:8] + b"reply-to-" + frame[:2]
            writer.write(struct.pack(">i", len(reply)) + reply)
        await writer.drain()
        await reader.read()  # until the proxy closes
        writer.close()

    async def main():
        server = await asyncio.start_server(upstream, "127.0.0.1", 0)
        recorder = capture.Recorder()
        proxy = capture.CaptureProxy(server.sockets[0].getsockname()[1], recorder)
        started, stop = threading.Event(), asyncio.Event()
        serving = asyncio.create_task(proxy.serve(0, started, stop))
        while not started.is_set():
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        sent = [_request(3, 12, 7, b"c", b"\x00\x01"), _request(18, 3, 8, b"c", b"\x00")]
        for frame in sent:
            writer.write(struct.pack(">i", len(frame)) + frame)
        replies = [await capture.read_frame(reader) for _ in range(2)]
        writer.close()
        stop.set()
        await serving
        server.close()
        return sent, replies, recorder.snapshot()

    sent, replies, exchanges = asyncio.run(main())
    assert replies == [struct.pack(">i", 8) + b"reply-to-\x00\x12", struct.pack(">i", 7) + b"reply-to-\x00\x03"]
    assert [(e.api_key, e.api_version, e.correlation_id, e.client_id) for e in exchanges] == [
        (3, 12, 7, "c"), (18, 3, 8, "c")]
    assert [e.request for e in exchanges] == sent
    assert [e.response for e in exchanges] == [replies[1], replies[0]]


def _api_versions_v3(tagged: bytes) -> bytes:
    entry = struct.pack(">hhh", 18, 0, 4) + b"\x00"
    return struct.pack(">ih", 5, 0) + b"\x02" + entry + struct.pack(">i", 0) + tagged


def test_api_versions_tags_are_dropped_for_v3_only():
    tansu_tags = b"\x04\x00\x01\x01\x01\x08" + b"\xff" * 8 + b"\x02\x01\x01\x03\x01\x00"
    ex = capture.Exchange(1, 18, 3, 5, "kcat", b"")
    frame, why = capture.drop_api_versions_tags(ex, _api_versions_v3(tansu_tags))
    assert frame == _api_versions_v3(b"\x00") and why
    assert capture.drop_api_versions_tags(ex, _api_versions_v3(b"\x00")) == (_api_versions_v3(b"\x00"), None)
    v0 = capture.Exchange(1, 18, 0, 5, "kcat", b"")
    assert capture.drop_api_versions_tags(v0, b"anything") == (b"anything", None)


def test_selection_prefers_clean_round_trips_and_skips_setup():
    def ex(version, response=b"r", failed=None, client="c"):
        e = capture.Exchange(1, 0, version, 1, client, b"q", response)
        e.failed_step = failed
        return e

    first_v3 = ex(3, response=None)
    clean_v3 = ex(3)
    failed_v4 = ex(4, failed="step: boom")
    later_v4 = ex(4, response=None)
    setup_v5 = ex(5, client=capture.drivers.SETUP_CLIENT_ID)
    chosen = capture.select_fixtures([first_v3, clean_v3, failed_v4, later_v4, setup_v5])
    assert chosen == [clean_v3, later_v4]
