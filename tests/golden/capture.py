"""Record golden frames: the real bytes Kafka clients send, and replies they accept.

A small asyncio TCP proxy sits on loopback in front of an upstream broker
(Tansu, which advertises the proxy's address so that every connection a client
opens goes through it). It forwards bytes untouched and records each Kafka
frame in both directions, pairing responses with requests by correlation id.
Each client library is then driven through admin, metadata, produce (every
compression it has), assign-consume, group-consume with commit, list offsets,
configs and delete, and the first frame seen per (api, version, direction) is
stored under tests/golden/frames/<client>/.

Re-record everything:  python tests/golden/capture.py
Only some clients:     python tests/golden/capture.py kcat kafkajs
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import shutil
import struct
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from interop import peers  # noqa: E402
from kafka_compat.protocol.primitives import read_uvarint  # noqa: E402
from tests.golden import drivers  # noqa: E402

FRAMES_DIR = Path(__file__).resolve().parent / "frames"
VARIANTS = "variants"  # sub-folder: one Produce request per compression codec
PRODUCE = 0
MAX_FIXTURE_BYTES = 64 * 1024
SIZE = struct.Struct(">i")
REQUEST_HEAD = struct.Struct(">hhih")  # ApiKey, ApiVersion, CorrelationId, ClientId length
CORRELATION = struct.Struct(">i")
API_VERSIONS = 18


def api_names() -> dict[int, str]:
    """ApiKey -> Kafka's API name, read from our schema files' header lines."""
    names = {}
    for path in (ROOT / "schemas" / "apis").glob("*.schema"):
        with path.open() as f:
            m = re.match(r"api\s+(\w+)\s+key=(\d+)", f.readline())
        if m:
            names[int(m.group(2))] = m.group(1)
    return names


@dataclass
class Exchange:
    """One request and (unless acks=0 or the connection died) its response."""

    connection: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: bytes
    response: bytes | None = None
    rewritten: str | None = None  # why the proxy changed the response, if it did
    failed_step: str | None = None  # the driver step that failed while this was in flight
    label: str | None = None  # the driver step's label, e.g. the compression codec


@dataclass
class Recorder:
    """Exchanges in the order their requests arrived, across all connections."""

    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step_begin(self) -> int:
        with self.lock:
            return len(self.exchanges)

    def step_failed(self, token: int, step: str, error: str) -> None:
        """Taint what flowed during a failed step: the client may have rejected it."""
        with self.lock:
            for ex in self.exchanges[token:]:
                ex.failed_step = ex.failed_step or f"{step}: {error}"

    def step_label(self, token: int, label: str) -> None:
        with self.lock:
            for ex in self.exchanges[token:]:
                ex.label = ex.label or label

    def snapshot(self) -> list[Exchange]:
        with self.lock:
            return list(self.exchanges)


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One size-prefixed frame without its prefix; None at a clean EOF."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError:
        return None
    (size,) = SIZE.unpack(head)
    return await reader.readexactly(size)


class CaptureProxy:
    """Forward client <-> upstream, recording every frame both ways."""

    def __init__(self, upstream_port: int, recorder: Recorder, rewrite=None, host: str = peers.LOOPBACK):
        self.upstream = (host, upstream_port)
        self.recorder = recorder
        self.rewrite = rewrite
        self.host = host
        self.port: int | None = None
        self._connections = 0
        self._handlers: set[asyncio.Task] = set()

    async def serve(self, port: int, started: threading.Event, stop: asyncio.Event) -> None:
        server = await asyncio.start_server(self._handle, self.host, port)
        self.port = server.sockets[0].getsockname()[1]  # the real one when port was 0
        started.set()
        async with server:
            await stop.wait()
            server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._handlers.add(asyncio.current_task())
        self._connections += 1
        conn = self._connections
        up_w = None
        tasks = []
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
            pending: dict[int, Exchange] = {}
            tasks = [
                asyncio.create_task(self._requests(conn, client_r, up_w, pending)),
                asyncio.create_task(self._responses(up_r, client_w, pending)),
            ]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a cut connection or proxy shutdown ends this handler quietly
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in (client_w, up_w):
                if w is not None:
                    w.close()
            self._handlers.discard(asyncio.current_task())

    async def _requests(self, conn, reader, writer, pending) -> None:
        while (frame := await read_frame(reader)) is not None:
            api_key, api_version, correlation_id, n = REQUEST_HEAD.unpack_from(frame)
            client_id = None if n < 0 else frame[REQUEST_HEAD.size:REQUEST_HEAD.size + n].decode(errors="replace")
            ex = Exchange(conn, api_key, api_version, correlation_id, client_id, frame)
            pending[correlation_id] = ex
            with self.recorder.lock:
                self.recorder.exchanges.append(ex)
            writer.write(SIZE.pack(len(frame)) + frame)
            await writer.drain()

    async def _responses(self, reader, writer, pending) -> None:
        while (frame := await read_frame(reader)) is not None:
            (correlation_id,) = CORRELATION.unpack_from(frame)
            ex = pending.pop(correlation_id, None)
            if ex is not None:
                if self.rewrite is not None:
                    frame, ex.rewritten = self.rewrite(ex, frame)
                ex.response = frame
            writer.write(SIZE.pack(len(frame)) + frame)
            await writer.drain()


class ProxyThread:
    """Runs a CaptureProxy on its own event loop so blocking clients can use it."""

    def __init__(self, listen_port: int, upstream_port: int, recorder: Recorder, rewrite=None):
        self.proxy = CaptureProxy(upstream_port, recorder, rewrite)
        self.port = listen_port
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main():
            self._stop = asyncio.Event()
            await self.proxy.serve(self.port, self._started, self._stop)

        self._loop.run_until_complete(main())

    def __enter__(self) -> "ProxyThread":
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("capture proxy did not start")
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def drop_api_versions_tags(ex: Exchange, frame: bytes) -> tuple[bytes, str | None]:
    """Empty the top-level tagged fields of an ApiVersions v3+ response.

    Tansu sends SupportedFeatures/FinalizedFeaturesEpoch/FinalizedFeatures/
    ZkMigrationReady even at their defaults; Kafka omits tagged fields that
    hold their default. librdkafka 2.0.2 (Debian's kcat) mis-skips tagged
    field values and then fails the whole connection, so for kcat the proxy
    hands over the response Kafka itself would have sent.
    """
    if ex.api_key != API_VERSIONS or ex.api_version < 3:
        return frame, None
    pos = 4 + 2  # ResponseHeader v0 (CorrelationId), ErrorCode
    n, pos = read_uvarint(frame, pos)
    for _ in range(max(n - 1, 0)):
        pos = _skip_tagged_fields(frame, pos + 6)  # ApiKey, MinVersion, MaxVersion
    pos += 4  # ThrottleTimeMs
    if frame[pos:] == b"\x00":
        return frame, None
    return frame[:pos] + b"\x00", "dropped ApiVersions top-level tagged fields (librdkafka 2.0.2 misparses them)"


#: Per-client response rewrites that make Tansu's replies acceptable to that client.
REWRITES = {"kcat": drop_api_versions_tags}


def _rank(ex: Exchange) -> int:
    """0: a clean round trip; 1: no response (acks=0, cut); 2: its step failed."""
    if ex.failed_step:
        return 2
    return 0 if ex.response is not None else 1


def select_fixtures(exchanges: list[Exchange]) -> list[Exchange]:
    """The first best exchange per (api, version).

    A clean round trip wins over an earlier request that got no response, and
    both win over traffic of a step that failed; setup traffic and frames over
    the size cap are passed over.
    """
    chosen: dict[tuple[int, int], Exchange] = {}
    for ex in exchanges:
        if ex.client_id == drivers.SETUP_CLIENT_ID:
            continue
        if len(ex.request) > MAX_FIXTURE_BYTES or (ex.response and len(ex.response) > MAX_FIXTURE_BYTES):
            continue
        key = (ex.api_key, ex.api_version)
        if key not in chosen or _rank(ex) < _rank(chosen[key]):
            chosen[key] = ex
    return sorted(chosen.values(), key=lambda e: (e.api_key, e.api_version))


def select_variants(exchanges: list[Exchange]) -> list[Exchange]:
    """The first clean Produce exchange per (version, codec label), codecs other than none."""
    chosen: dict[tuple[int, str], Exchange] = {}
    for ex in exchanges:
        if (ex.api_key == PRODUCE and ex.label not in (None, "none") and _rank(ex) == 0
                and len(ex.request) <= MAX_FIXTURE_BYTES):
            chosen.setdefault((ex.api_version, ex.label), ex)
    return [chosen[k] for k in sorted(chosen)]


def _entry(path: str, ex: Exchange, name: str, direction: str, data: bytes) -> dict:
    return {
        "file": path,
        "api_key": ex.api_key,
        "api_name": name,
        "api_version": ex.api_version,
        "direction": direction,
        "correlation_id": ex.correlation_id,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def write_fixtures(client: str, client_version: str, exchanges: list[Exchange],
                   out_dir: Path = FRAMES_DIR) -> list[dict]:
    """Replace tests/golden/frames/<client>/ with the chosen frames and a manifest.

    The response of an exchange whose step failed is not stored (the client
    may have rejected it); its request entry says why. Compressed Produce
    requests go to variants/, listed under "variants" in the manifest.
    """
    names = api_names()
    target = out_dir / client
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    files = []
    for ex in select_fixtures(exchanges):
        name = names.get(ex.api_key, f"Api{ex.api_key}")
        stem = f"{ex.api_key:02d}-{name}-v{ex.api_version}"
        response = None if ex.failed_step else ex.response
        for direction, data in (("request", ex.request), ("response", response)):
            if data is None:
                continue
            entry = _entry(f"{stem}-{direction}.bin", ex, name, direction, data)
            if direction == "request" and response is None:
                entry["response_omitted"] = ex.failed_step or "no response (acks=0 or connection closed)"
            if direction == "response" and ex.rewritten:
                entry["rewritten"] = ex.rewritten
            (target / entry["file"]).write_bytes(data)
            files.append(entry)
    variants = []
    for ex in select_variants(exchanges):
        name = names.get(ex.api_key, f"Api{ex.api_key}")
        path = f"{VARIANTS}/{ex.api_key:02d}-{name}-v{ex.api_version}-request-{ex.label}.bin"
        (target / VARIANTS).mkdir(exist_ok=True)
        (target / path).write_bytes(ex.request)
        variants.append({**_entry(path, ex, name, "request", ex.request), "compression": ex.label})
    manifest = {"client": client, "client_version": client_version,
                "upstream": "tansu " + (drivers.tansu_version() or "?"), "files": files, "variants": variants}
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return files


def capture(client: str, log_dir: Path) -> list[Exchange]:
    """Run one client's scenario through a fresh proxy + Tansu; return what flowed."""
    tansu_port, proxy_port = peers.free_port(), peers.free_port()
    recorder = Recorder()
    proc = peers.start_tansu(tansu_port, advertised_port=proxy_port,
                             log_path=log_dir / f"tansu-{client}.log")
    if proc is None:
        raise SystemExit("tansu is not installed (run: bash interop/setup.sh)")
    try:
        with ProxyThread(proxy_port, tansu_port, recorder, REWRITES.get(client)):
            drivers.observer = recorder
            drivers.DRIVERS[client](f"{peers.LOOPBACK}:{proxy_port}")
    finally:
        drivers.observer = drivers.StepObserver()
        peers.stop(proc)
    return recorder.snapshot()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clients", nargs="*", help=f"default: all of {', '.join(drivers.DRIVERS)}")
    parser.add_argument("--out", type=Path, default=FRAMES_DIR)
    args = parser.parse_args(argv)
    failed = 0
    log_dir = Path(tempfile.mkdtemp(prefix="golden-capture-"))
    for client in args.clients or list(drivers.DRIVERS):
        version = drivers.client_version(client)
        if version is None:
            print(f"{client}: not installed, skipped")
            continue
        try:
            exchanges = capture(client, log_dir)
        except Exception:
            traceback.print_exc()
            print(f"{client}: driver failed; fixtures left as they were (logs in {log_dir})")
            failed += 1
            continue
        files = write_fixtures(client, version, exchanges, args.out)
        pairs = sorted({(f["api_name"], f["api_version"]) for f in files})
        print(f"{client} {version}: {len(exchanges)} exchanges, {len(pairs)} (api, version) pairs: "
              + ", ".join(f"{n} v{v}" for n, v in pairs))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
