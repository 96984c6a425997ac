"""Real clients' bytes through our codecs: decode, re-encode, and get the very same bytes back.

The frames in tests/golden/frames were recorded from kafka-python, confluent-kafka,
aiokafka, kcat, KafkaJS and the Java client (requests), and from a broker whose
answers those clients accepted (responses).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_compat.protocol.frames import parse_request, request_header_version, response_header_version
from kafka_compat.protocol.messages import APIS
from kafka_compat.protocol.messages.headers import ResponseHeader

FRAMES = Path(__file__).parent / "golden" / "frames"


def entries():
    for manifest in sorted(FRAMES.glob("*/manifest.json")):
        data = json.loads(manifest.read_text())
        for e in data["files"] + data.get("variants", []):
            yield pytest.param(manifest.parent, e, id=f"{manifest.parent.name}/{e['file']}")


ENTRIES = list(entries())


def test_there_are_golden_frames():
    assert len(ENTRIES) > 100


@pytest.mark.parametrize("folder,entry", ENTRIES)
def test_golden_frame_round_trips(folder, entry):
    frame = (folder / entry["file"]).read_bytes()
    info = APIS[entry["api_key"]]
    v = entry["api_version"]
    out = bytearray()
    if entry["direction"] == "request":
        req = parse_request(frame)
        assert (req.api_key, req.api_version) == (info.key, v)
        req.header.encode_into(out, request_header_version(info, v))
        req.body.encode_into(out, v)
    else:
        header, pos = ResponseHeader.decode(frame, response_header_version(info, v))
        body, end = info.response.decode(frame, v, pos)
        assert end == len(frame), f"{len(frame) - end} bytes left undecoded"
        header.encode_into(out, response_header_version(info, v))
        body.encode_into(out, v)
    assert bytes(out) == frame
