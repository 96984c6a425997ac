"""Storage benchmarks, side by side in one run:

1. append throughput of UnifiedLog.append_as_leader (what a produce runs: validation, offsets,
   leader epoch, producer state, the write) with 1 MiB, 16 KiB and 1 KiB batches against a
   plain os.write loop of the same bytes to a file (target: at least 70% of it);
2. p99 time to locate an offset in a 100-segment log (target: at most 50 us), and of
   a whole UnifiedLog.read for the same offsets;
3. recovery time of a 1 GiB segment after an unclean shutdown.

    python bench/storage.py [--dir DIR] [--mib-per-size N] [--recovery-gib G] [--quick] [--floor] [--spread]

Each append case alternates the two contenders for several rounds, each starting
from synced page cache, and keeps each one's best round. Prints a table with two
ratios: by wall-clock time, and by the appending thread's CPU time (user + system),
which a busy shared machine disturbs much less.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka_compat.storage.fetch_data_info import FetchIsolation  # noqa: E402
from kafka_compat.storage.log_config import LogConfig  # noqa: E402
from kafka_compat.storage.scheduler import Scheduler  # noqa: E402
from kafka_compat.storage.unified_log import UnifiedLog  # noqa: E402

from kafka_compat.protocol.records import build_batch  # noqa: E402

_BASE_OFFSET = struct.Struct(">q")


def client_batch(size: int) -> bytearray:
    """One magic-2 batch of exactly ``size`` bytes, one record, incompressible value."""
    overhead = len(build_batch([(None, b"", (), 1_700_000_000_000)]))
    value = os.urandom(size - overhead - 2)   # varint length of the value grows by up to 2 bytes
    data = build_batch([(None, value, (), 1_700_000_000_000)])
    while len(data) != size:
        value = value[: len(value) - (len(data) - size)] if len(data) > size else value + b"x"
        data = build_batch([(None, value, (), 1_700_000_000_000)])
    return bytearray(data)


def time_log_appends(directory: str, data: bytearray, count: int) -> tuple[float, float]:
    """(wall seconds, thread CPU seconds) of ``count`` UnifiedLog.append_as_leader calls."""
    lg = UnifiedLog(directory, LogConfig(), scheduler=Scheduler("bench"))
    lg.maybe_assign_epoch_start_offset(0, 0)   # done when the partition becomes leader, not per append
    reset = _BASE_OFFSET.pack_into
    append = lg.append_as_leader
    cpu, start = time.thread_time(), time.perf_counter()
    for _ in range(count):
        reset(data, 0, 0)           # a fresh client frame says BaseOffset 0
        append(data, 0)
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
    lg.close()
    return elapsed, cpu


def time_plain_writes(path: str, data: bytearray, count: int) -> tuple[float, float]:
    """(wall seconds, thread CPU seconds) of ``count`` os.write calls of the same bytes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    write = os.write
    cpu, start = time.thread_time(), time.perf_counter()
    for _ in range(count):
        write(fd, data)
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
    os.close(fd)
    return elapsed, cpu


def time_floor_appends(path: str, data: bytearray, count: int) -> tuple[float, float]:
    """(wall, thread CPU) of the least an append can do in Python: a view of the batch, the log's
    lock, one header unpack, the CRC-32C, the offset rewrite and one pwrite per batch. No
    validation rules, index, roll or flush checks; with --floor it shows how much of the gap to
    os.write is the interpreter's cost of merely touching each batch."""
    import threading

    from crc32c import crc32c
    header = struct.Struct(">qi4xbI").unpack_from
    rewrite = struct.Struct(">qi").pack_into
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    lock, pwrite, position, offset = threading.Lock(), os.pwrite, 0, 0
    reset = _BASE_OFFSET.pack_into
    cpu, start = time.thread_time(), time.perf_counter()
    for _ in range(count):
        reset(data, 0, 0)
        mv = memoryview(data)
        lock.acquire()
        try:
            base, length, magic, crc = header(mv)
            if magic != 2 or crc != crc32c(mv[21:]):
                raise ValueError("bad batch")
            rewrite(mv, 0, offset, length)
            position += pwrite(fd, mv, position)
            offset += 1
        finally:
            lock.release()
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
    os.close(fd)
    return elapsed, cpu


def bench_appends(root: str, mib: int, rounds: int, floor: bool = False) -> list[tuple]:
    rows = []
    for size, label in ((1 << 20, "1 MiB"), (16 << 10, "16 KiB"), (1 << 10, "1 KiB")):
        data = client_batch(size)
        count = max(mib * (1 << 20) // size, 1)
        best = {"raw": [float("inf")] * 2, "log": [float("inf")] * 2, "floor": [float("inf")] * 2}  # [wall, cpu]
        for r in range(rounds):
            work = os.path.join(root, f"append-{size}-{r}")
            os.makedirs(work)
            # Alternate who goes first, and start each from a clean page cache (os.sync), so
            # neither pays for the other's dirty-page writeback.
            order = ("raw", "log", "floor") if r % 2 == 0 else ("floor", "log", "raw")
            for contender in order if floor else [c for c in order if c != "floor"]:
                os.sync()
                if contender == "raw":
                    times = time_plain_writes(os.path.join(work, "plain.bin"), data, count)
                elif contender == "floor":
                    times = time_floor_appends(os.path.join(work, "floor.bin"), data, count)
                else:
                    times = time_log_appends(os.path.join(work, "bench-0"), data, count)
                best[contender] = [min(a, b) for a, b in zip(best[contender], times)]
            shutil.rmtree(work)
        total = count * size / (1 << 20)
        (log_wall, log_cpu), (raw_wall, raw_cpu) = best["log"], best["raw"]
        rows.append((label, count, total / log_wall, total / raw_wall, raw_wall / log_wall, raw_cpu / log_cpu,
                     log_wall / count * 1e6, raw_wall / count * 1e6, log_cpu / count * 1e6, raw_cpu / count * 1e6,
                     raw_wall / best["floor"][0], raw_cpu / best["floor"][1]))
    return rows


def time_spread_writes(root: str, files: int, chunk: int, total: int) -> tuple[float, float]:
    """(wall, thread CPU) of plain os.pwrite calls of ``chunk`` bytes dealt round-robin over
    ``files`` files, ``total`` bytes in all: no Python beyond the loop."""
    directory = os.path.join(root, f"spread-{files}-{chunk}")
    os.makedirs(directory)
    fds = [os.open(os.path.join(directory, f"{i}.log"), os.O_WRONLY | os.O_CREAT, 0o644) for i in range(files)]
    positions = [0] * files
    data, pwrite = os.urandom(chunk), os.pwrite
    os.sync()
    cpu, start = time.thread_time(), time.perf_counter()
    for i in range(total // chunk):
        k = i % files
        positions[k] += pwrite(fds[k], data, positions[k])
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
    for fd in fds:
        os.close(fd)
    shutil.rmtree(directory)
    return elapsed, cpu


def bench_spread(root: str, mib: int, rounds: int) -> list[tuple]:
    """bench/run.py's 4-partition produce writes ~256 KiB per partition per request; with
    1,000 partitions each request carries about one 1 KiB record per partition. This times
    just the kernel's side of those two patterns, with the best of ``rounds`` each."""
    total = mib << 20
    rows = []
    for files, chunk in ((4, 256 << 10), (1000, 1 << 10)):
        best = min(time_spread_writes(root, files, chunk, total) for _ in range(rounds))
        rows.append((files, chunk, total / (1 << 20) / best[0], best[1] / (total / 1e9)))
    return rows


def bench_lookup(root: str, samples: int) -> tuple:
    directory = os.path.join(root, "lookup-0")
    data = client_batch(1 << 10)
    config = LogConfig(segment_bytes=256 * 1024)
    lg = UnifiedLog(directory, config, scheduler=Scheduler("bench"))
    while len(lg.segments) < 100:
        _BASE_OFFSET.pack_into(data, 0, 0)
        lg.append_as_leader(data, 0)
    while lg.active_segment.size < config.segment_bytes // 2:
        _BASE_OFFSET.pack_into(data, 0, 0)
        lg.append_as_leader(data, 0)
    rng = random.Random(7)
    offsets = [rng.randrange(lg.log_end_offset) for _ in range(samples)]
    locate, read = [], []
    clock = time.perf_counter_ns
    for offset in offsets:
        t0 = clock()
        segment = lg.segment_for(offset)
        info = segment.translate_offset(offset)
        t1 = clock()
        assert info is not None and info.base_offset <= offset <= info.last_offset
        lg.read(offset, 1 << 20, FetchIsolation.LOG_END, True)
        t2 = clock()
        locate.append(t1 - t0)
        read.append(t2 - t1)
    lg.close()
    locate.sort()
    read.sort()

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))] / 1000.0
    return len(lg.segments), pct(locate, 0.5), pct(locate, 0.99), pct(read, 0.5), pct(read, 0.99)


def bench_recovery(root: str, gib: float) -> tuple:
    directory = os.path.join(root, "recovery-0")
    data = client_batch(16 << 10)
    target = int(gib * (1 << 30))
    lg = UnifiedLog(directory, LogConfig(segment_bytes=max(target + (1 << 20), 1 << 20)),
                    scheduler=Scheduler("bench"))
    while lg.active_segment.size + len(data) <= target:
        _BASE_OFFSET.pack_into(data, 0, 0)
        lg.append_as_leader(data, 0)
    size = lg.active_segment.size
    lg.flush()
    lg.close()
    start = time.perf_counter()
    again = UnifiedLog(directory, LogConfig(segment_bytes=max(target + (1 << 20), 1 << 20)),
                       scheduler=Scheduler("bench"), had_clean_shutdown=False, recovery_point=0)
    elapsed = time.perf_counter() - start
    assert again.log_end_offset == lg.log_end_offset
    again.close()
    return size / (1 << 30), elapsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    parser.add_argument("--mib-per-size", type=int, default=256, help="MiB appended per batch size and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lookups", type=int, default=20000)
    parser.add_argument("--recovery-gib", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--spread", action="store_true", help="also time plain pwrite of 256 KiB over 4 files "
                                                             "against 1 KiB over 1,000 files")
    parser.add_argument("--floor", action="store_true", help="also time a bare append loop (view, lock, unpack, "
                                                            "CRC, offset rewrite, pwrite) against os.write")
    args = parser.parse_args(argv)
    if args.quick:
        args.mib_per_size, args.rounds, args.lookups, args.recovery_gib = 16, 1, 2000, 0.05
    root = tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir)
    try:
        print(f"storage benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} cpus, dir {root}")
        print()
        print("Append throughput (UnifiedLog.append_as_leader vs os.write of the same bytes; target >= 70%)")
        print(f"{'batch':>7} {'appends':>9} {'Log MiB/s':>10} {'write MiB/s':>12} {'ratio':>6} {'cpu ratio':>9} "
              f"{'us/append':>10} {'us/write':>9} {'cpu us/append':>14} {'cpu us/write':>13}")
        for (label, count, log_rate, raw_rate, ratio, cpu_ratio, us_log, us_raw, cpu_log,
             cpu_raw, floor_ratio, floor_cpu_ratio) in bench_appends(root, args.mib_per_size, args.rounds, args.floor):
            print(f"{label:>7} {count:>9} {log_rate:>10.0f} {raw_rate:>12.0f} {ratio:>6.0%} {cpu_ratio:>9.0%} "
                  f"{us_log:>10.2f} {us_raw:>9.2f} {cpu_log:>14.2f} {cpu_raw:>13.2f}"
                  + (f"   floor loop: {floor_ratio:.0%} (cpu {floor_cpu_ratio:.0%})" if args.floor else ""))
        if args.spread:
            print()
            print("Plain os.pwrite, the write patterns of a 4- and a 1,000-partition produce")
            for files, chunk, rate, cpu_per_gb in bench_spread(root, args.mib_per_size, args.rounds):
                print(f"  {files:>5} files x {chunk >> 10:>3} KiB writes: {rate:6.0f} MiB/s, {cpu_per_gb:.2f} CPU s/GB")
        print()
        segments, l50, l99, r50, r99 = bench_lookup(root, args.lookups)
        print(f"Offset lookup in a {segments}-segment log (target p99 <= 50 us)")
        print(f"  locate (segment + index + scan): p50 {l50:.1f} us, p99 {l99:.1f} us")
        print(f"  UnifiedLog.read up to 1 MiB:     p50 {r50:.1f} us, p99 {r99:.1f} us")
        print()
        gib, seconds = bench_recovery(root, args.recovery_gib)
        print(f"Recovery of a {gib:.2f} GiB segment (16 KiB batches, checksums and indexes rebuilt): "
              f"{seconds:.2f} s ({gib / seconds:.2f} GiB/s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
