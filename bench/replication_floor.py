"""The replication floor: what moving the bytes alone costs, one broker against three on one machine.

    python bench/replication_floor.py [--mib 512] [--frame-kib 256] [--rounds 3] [--dir DIR]

bench/cluster.py's replication figure compares kafka-compat's CPU per GB produced with acks=all and
replication factor 3 on three brokers against acks=1 on one. Part of that is the kernel's, whatever
the broker is written in: this script measures that part. Stand-ins for the brokers, one process each,
do only the system calls a broker must make for every byte, in a plain loop without a protocol:

  one broker   receive a frame from the producer's socket, pwrite it to its log file, answer 8 bytes;
  three        the leader does the same, then sendfile()s the frame from its log to each of two
               followers and waits for their 8-byte answers before answering the producer; each
               follower receives the frame and pwrites it to its own log.

Each stand-in counts its own CPU time (user + system, getrusage) over its loop. The figure is
CPU seconds per GB produced for the one broker, for the three together, and their ratio, median
over rounds (the two alternate which goes first). After each round the followers' logs are compared
with the leader's, so the floor moved every byte. Frames stand for produce requests and fetch
answers (--frame-kib: librdkafka's requests at full speed are some hundreds of KiB).
"""
from __future__ import annotations

import argparse
import filecmp
import json
import multiprocessing
import os
import resource
import socket
import statistics
import sys
import tempfile
import threading

ACK = b"\0" * 8
GB = 1 << 30


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError("peer closed")
        got += n


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _broker(listener: socket.socket, path: str, total: int, frame: int, followers: list, out) -> None:
    """A leader (followers: their addresses) or a follower (followers: None, answers every frame)."""
    peers = [socket.create_connection(a) for a in followers or ()]
    conn, _ = listener.accept()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    view = memoryview(bytearray(frame))
    ack = memoryview(bytearray(len(ACK)))
    start = _cpu()
    offset = 0
    while offset < total:
        n = min(frame, total - offset)
        _recv_exactly(conn, view[:n])
        os.pwrite(fd, view[:n], offset)
        for peer in peers:
            sent = 0
            while sent < n:
                sent += os.sendfile(peer.fileno(), fd, offset + sent, n - sent)
        for peer in peers:
            _recv_exactly(peer, ack)
        conn.sendall(ACK)
        offset += n
    out.send(_cpu() - start)
    os.close(fd)
    for s in peers + [conn]:
        s.close()


def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


def run(replicas: int, total: int, frame: int, workdir: str) -> dict:
    """One producer run against `replicas` stand-ins: their CPU seconds per GB, added up."""
    ctx = multiprocessing.get_context("fork")
    listeners = [_listener() for _ in range(replicas)]
    paths = [os.path.join(workdir, f"replica-{i}.log") for i in range(replicas)]
    pipes, procs = [], []
    for i, (listener, path) in enumerate(zip(listeners, paths)):
        mine, theirs = ctx.Pipe()
        followers = [ls.getsockname() for ls in listeners[1:]] if i == 0 else None
        p = ctx.Process(target=_broker, args=(listener, path, total, frame, followers, theirs), daemon=True)
        p.start()
        pipes.append(mine)
        procs.append(p)
    payload = memoryview(os.urandom(frame))
    producer = socket.create_connection(listeners[0].getsockname())
    acks = threading.Thread(target=_drain_acks, args=(producer, -(-total // frame)), daemon=True)
    acks.start()
    sent = 0
    while sent < total:
        n = min(frame, total - sent)
        producer.sendall(payload[:n])
        sent += n
    acks.join()
    cpu = [pipe.recv() for pipe in pipes]
    for p in procs:
        p.join(30)
    producer.close()
    for ls in listeners:
        ls.close()
    same = all(filecmp.cmp(paths[0], p, shallow=False) for p in paths[1:])
    for path in paths:
        os.unlink(path)
    return {"replicas": replicas, "cpu_s_per_gb": sum(cpu) / (total / GB),
            "per_broker_cpu_s_per_gb": [c / (total / GB) for c in cpu], "followers_match_leader": same}


def _drain_acks(sock: socket.socket, frames: int) -> None:
    view = memoryview(bytearray(len(ACK)))
    for _ in range(frames):
        _recv_exactly(sock, view)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=512, help="MiB produced per run (default 512)")
    ap.add_argument("--frame-kib", type=int, default=256, help="bytes per produce request / fetch answer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the stand-ins' logs go (deleted after each run)")
    args = ap.parse_args(argv)
    total, frame = args.mib << 20, args.frame_kib << 10
    results: dict[int, list[dict]] = {1: [], 3: []}
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="replication-floor-") as workdir:
        for r in range(args.rounds):
            for replicas in ((1, 3) if r % 2 == 0 else (3, 1)):
                res = run(replicas, total, frame, workdir)
                results[replicas].append(res)
                print(f"round {r + 1}: {json.dumps(res)}", file=sys.stderr, flush=True)
    one = statistics.median(x["cpu_s_per_gb"] for x in results[1])
    three = statistics.median(x["cpu_s_per_gb"] for x in results[3])
    ratios = [t["cpu_s_per_gb"] / o["cpu_s_per_gb"] for o, t in zip(results[1], results[3]) if o["cpu_s_per_gb"]]
    summary = {"scenario": "replication-floor", "mib": args.mib, "frame_kib": args.frame_kib, "rounds": args.rounds,
               "one_broker_cpu_s_per_gb": round(one, 4), "three_brokers_cpu_s_per_gb": round(three, 4),
               "ratio_cpu_s_per_gb": round(statistics.median(ratios), 3) if ratios else None,
               "followers_match_leader": all(x["followers_match_leader"] for x in results[3])}
    print(f"one broker {one:.3f} CPU s/GB, three {three:.3f} CPU s/GB, ratio {summary['ratio_cpu_s_per_gb']}",
          file=sys.stderr)
    print(json.dumps(summary))
    return 0 if summary["followers_match_leader"] else 1


if __name__ == "__main__":
    sys.exit(main())
