"""Coverage-guided fuzzing of the request decoders and the frame reader with atheris (libFuzzer).

One input is a byte stream as a client would send it: the frame reader splits it
(at the chunk sizes the input's first byte picks) and every frame goes through
`parse_request` with the broker's advertised versions. The only acceptable
outcomes are frames, a decoded request, `FrameError`, `InvalidRequest` or
`UnsupportedApiVersionsRequest`; anything else is a crash, and a decode that
takes longer than libFuzzer's -timeout a hang. Seeds are the golden frames.

    python -m interop.fuzz.atheris_target -runs=200000 [-max_total_time=600] [corpus_dir]
"""
from __future__ import annotations

import os
import struct
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["kafka_compat.protocol"]):
    from kafka_compat.protocol.frames import (
        FrameError,
        FrameReader,
        InvalidRequest,
        UnsupportedApiVersionsRequest,
        parse_request,
    )
from kafka_compat.server.broker import advertised_api_versions  # noqa: E402  (not instrumented)

SUPPORTED = advertised_api_versions()
CHUNKS = (1, 3, 7, 64, 4096, 1 << 20)
MAX_FRAME = 1 << 20


def one_input(data: bytes) -> None:
    if not data:
        return
    chunk = CHUNKS[data[0] % len(CHUNKS)]
    if chunk < 64 and len(data) > 4096:
        chunk = 4096                    # byte-at-a-time splitting of large inputs costs runs, not coverage
    stream = memoryview(data)[1:]
    reader = FrameReader(MAX_FRAME, small=256, initial=1024)
    try:
        for i in range(0, len(stream), chunk):
            reader.feed(stream[i:i + chunk])
            for frame in reader.frames():
                try:
                    parse_request(frame, SUPPORTED)
                except (InvalidRequest, UnsupportedApiVersionsRequest):
                    pass
    except FrameError:
        pass


def seed_corpus() -> str:
    """A directory of seeds: each golden request with its size prefix, behind a chunking byte."""
    from .corpus import load_requests

    d = tempfile.mkdtemp(prefix="atheris-seeds-")
    for i, (_, frame) in enumerate(load_requests()):
        with open(os.path.join(d, f"seed-{i}"), "wb") as f:
            f.write(bytes([i % len(CHUNKS)]) + struct.pack(">i", len(frame)) + frame)
    return d


def main(argv=None) -> None:
    argv = list(sys.argv if argv is None else argv)
    if not any(not a.startswith("-") for a in argv[1:]):
        argv.append(seed_corpus())
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
