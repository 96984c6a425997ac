"""The seed frames: every request the golden clients sent, without its size prefix."""
from __future__ import annotations

import struct
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[2] / "tests" / "golden" / "frames"


def load_requests(root: Path = GOLDEN) -> list[tuple[str, bytes]]:
    """(name, frame) for every recorded request of every client, codec variants included."""
    out = []
    for path in sorted(root.glob("*/*-request.bin")) + sorted(root.glob("*/variants/*-request-*.bin")):
        data = path.read_bytes()
        if len(data) >= 8:
            out.append((f"{path.parent.name if path.parent.name != 'variants' else path.parent.parent.name}/"
                        f"{path.name}", data))
    if not out:
        raise FileNotFoundError(f"no golden request frames under {root}")
    return out


def api_key_of(frame: bytes) -> int:
    return struct.unpack_from(">h", frame, 0)[0]


SASL_USER, SASL_PASSWORD = "fuzz", "fuzz-secret"


def request_frame(api_key: int, version: int, body, correlation_id: int = 1, client_id: str = "fuzz") -> bytes:
    """A request frame (no size prefix) made with our own codecs."""
    from kafka_compat.protocol.frames import request_header_version
    from kafka_compat.protocol.messages import APIS
    from kafka_compat.protocol.messages.headers import RequestHeader

    b = bytearray()
    RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                  client_id=client_id).encode_into(b, request_header_version(APIS[api_key], version))
    body.encode_into(b, version)
    return bytes(b)


def sasl_plain_handshake() -> list[bytes]:
    """The two frames of a SASL/PLAIN login as a Kafka client sends them (KIP-152: SaslHandshake v1, then
    SaslAuthenticate v2 with the PLAIN message), the seeds of the handshake fuzzing."""
    from kafka_compat.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from kafka_compat.protocol.messages.sasl_handshake import SaslHandshakeRequest

    message = f"\0{SASL_USER}\0{SASL_PASSWORD}".encode()
    return [request_frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN")),
            request_frame(36, 2, SaslAuthenticateRequest(auth_bytes=message), correlation_id=2)]
