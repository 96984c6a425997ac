"""The latency probe, as its own process so that the fuzzer's CPU and GIL never delay it: ApiVersions
v0 on one connection every INTERVAL seconds, one line per round trip on stdout ("<seconds into the
run> <round trip seconds>", or "fail <seconds> <error>").

    python -m interop.fuzz.probe PORT [INTERVAL]
"""
from __future__ import annotations

import socket
import struct
import sys
import time

REQUEST = struct.pack(">ihhih", 10, 18, 0, 0, -1)     # ApiVersions v0, correlation 0, no client id


def read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the probe connection")
        buf += chunk
    return bytes(buf)


def main(port: int, interval: float = 0.1, timeout: float = 30.0) -> None:
    start = time.monotonic()
    sock = None
    while True:
        try:
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t0 = time.monotonic()
            sock.sendall(REQUEST)
            read_exact(sock, struct.unpack(">i", read_exact(sock, 4))[0])
            print(f"{t0 - start:.3f} {time.monotonic() - t0:.4f}", flush=True)
        except OSError as e:
            print(f"fail {time.monotonic() - start:.3f} {e!r}", flush=True)
            if sock is not None:
                sock.close()
            sock = None
        time.sleep(interval)


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.1)
