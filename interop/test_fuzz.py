"""The bounded fuzzing campaign CI runs on every change (the full one: `python -m interop.fuzz`).

50,000 mutated golden frames over 16 connections at a real broker process (a quarter of the
connections in or after a SASL/PLAIN login, itself sometimes damaged), while a
confluent-kafka idempotent producer, a transactional producer and a read_committed
consumer work beside them. Fails on a broker crash or unclean shutdown, a handler
exception in the broker's log, an ApiVersions probe that waited more than a second (the
bound the issue asks CI to enforce: sampled every 100 ms, the maximum asserted), a probe
connection lost, memory beyond 400 MiB, or any anomaly in the companion's history (lost
acknowledged records, duplicates, reordering, aborted reads). Also: atheris over the
decoders and the frame reader, and every golden frame split at every byte.
"""
from __future__ import annotations

import importlib.util
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("psutil")

from fuzz.campaign import run_campaign  # noqa: E402
from fuzz.corpus import load_requests  # noqa: E402

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

FRAMES = 50_000
ROOT = Path(__file__).resolve().parents[1]


def test_bounded_campaign():
    result = run_campaign(FRAMES, connections=16, seed=20)
    print(result.summary())
    assert result.frames == FRAMES
    assert result.problems(stall_limit=1.0) == []
    assert result.max_rss < 400 * 2**20
    assert result.history.acked > 100 and result.history.ok
    # the probe answered all through the run: every 100 ms, so at least half the nominal count (a fast
    # machine finishes the 50,000 frames in 4 s, which is only 40 to 50 samples)
    assert result.probe_count >= 5 * result.seconds, (result.probe_count, result.seconds)


def test_every_golden_frame_split_at_every_byte_is_answered():
    """Frames that arrive a byte per segment are put together again: each golden request the broker
    accepts is answered, with its correlation id, on one connection, in order."""
    frames = [f for name, f in load_requests() if "/03-Metadata" in name or "/18-ApiVersions" in name]
    assert len(frames) >= 6
    with EmbeddedBroker({"auto.create.topics.enable": "false"}) as b:
        for frame in frames:
            with socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                wire = struct.pack(">i", len(frame)) + frame
                for i in range(len(wire)):
                    s.sendall(wire[i:i + 1])
                head = _read(s, 4)
                body = _read(s, struct.unpack(">i", head)[0])
                assert body[:4] == frame[4:8]            # the correlation id comes back


def _read(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "broker closed the connection"
        buf += chunk
    return buf


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris is not installed")
def test_atheris_over_decoders_and_frame_reader():
    """Coverage-guided: 10,000 inputs from the golden seeds; any exception other than the decoders'
    own (a crash) or a decode slower than 10 s fails libFuzzer, which exits non-zero."""
    out = subprocess.run([sys.executable, "-m", "fuzz.atheris_target", "-runs=10000", "-timeout=10",
                          "-rss_limit_mb=1024"], cwd=Path(__file__).parent, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    assert "Done 10000 runs" in out.stderr
