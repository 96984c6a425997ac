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
