"""Crash test: a writer process is killed with SIGKILL at random moments, then the log recovers.

The writer (a forked child, so each round costs milliseconds, not an interpreter start)
appends batches whose record values name their own offsets, calls Log.flush() now and
then, and after each flush reports through a pipe what it has seen fsynced: the
recovery point and the active segment's base offset and size at that moment. The
parent kills it at a random moment, sometimes also plays the part of a power cut by
damaging the bytes past that point (cutting the last segment short, or leaving garbage
there), then reopens the log and checks that:
- every offset below the reported recovery point is present;
- the log is a valid prefix: checksums hold and offsets run on without gaps, and every
  record holds the value written for its offset;
- the indexes agree with the log.
Rounds chain: the next writer starts from the recovered log, so recovery of recovered
logs is exercised too.
"""

import os
import random
import signal
import struct
import time

from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.scheduler import Scheduler
from kafka_compat.storage.unified_log import UnifiedLog
from logtools import TS, assert_consistent, read_records

from kafka_compat.protocol.records import build_batch

ROUNDS = 60
CONFIG = LogConfig(segment_bytes=48 * 1024, index_interval_bytes=700, segment_index_bytes=400,
                   file_delete_delay_ms=0)
REPORT = struct.Struct(">qqq")


def writer(directory: str, report_fd: int, seed: int) -> None:
    """Runs in the child: append forever, report after each flush."""
    rng = random.Random(seed)
    lg = UnifiedLog(directory, CONFIG, scheduler=Scheduler("crash-writer"))
    while True:
        n = rng.randint(1, 8)
        start = lg.log_end_offset
        records = [(b"k%d" % (start + i), b"%d" % (start + i) * rng.randint(1, 30), (), TS + start + i)
                   for i in range(n)]
        lg.append_as_leader(bytearray(build_batch(records)), 0)
        if rng.random() < 0.15:
            lg.flush()
            active = lg.active_segment
            os.write(report_fd, REPORT.pack(lg.recovery_point, active.base_offset, active.size))


def run_round(directory: str, rng: random.Random) -> tuple[int, int, int]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:   # child
        os.close(read_fd)
        try:
            writer(directory, write_fd, rng.randrange(1 << 30))
        finally:
            os._exit(1)
    os.close(write_fd)
    time.sleep(rng.uniform(0.0, 0.04))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    data = b""
    while chunk := os.read(read_fd, 65536):
        data += chunk
    os.close(read_fd)
    usable = len(data) - len(data) % REPORT.size
    if not usable:
        return 0, -1, 0
    return REPORT.unpack_from(data, usable - REPORT.size)


def lose_unflushed_tail(directory: str, durable: list, rng: random.Random) -> None:
    """Simulate a power cut: only bytes past what is known durable may change.

    ``durable`` lists (segment base, size) pairs known fsynced: the log as the round
    found it, and the writer's last report.
    """
    logs = sorted(f for f in os.listdir(directory) if f.endswith(".log")) if os.path.isdir(directory) else []
    if not logs:
        return   # killed before its first segment existed
    last = os.path.join(directory, logs[-1])
    floor = max([size for base, size in durable if base == int(logs[-1][:20])], default=0)
    length = os.path.getsize(last)
    if length <= floor:
        return
    action = rng.choice(["cut", "garbage", "both"])
    if action in ("cut", "both"):
        length = rng.randint(floor, length)
        os.truncate(last, length)
    if action in ("garbage", "both"):
        with open(last, "ab") as f:
            f.write(rng.randbytes(rng.randint(1, 300)))


def test_sigkill_at_random_moments_loses_nothing_fsynced(tmp_path):
    rng = random.Random(20241025)
    directory = str(tmp_path / "crash-0")
    for round_no in range(ROUNDS):
        if round_no % 15 == 0:
            directory = str(tmp_path / f"crash-{round_no}")
        before, durable = 0, []
        if os.path.isdir(directory):
            probe = UnifiedLog(directory, CONFIG, scheduler=Scheduler("probe"))
            before = probe.log_end_offset
            durable.append((probe.active_segment.base_offset, probe.active_segment.size))
            probe.close()   # a clean close fsyncs: all of this is durable
        flushed, base, size = run_round(directory, rng)
        durable.append((base, size))
        if rng.random() < 0.5:
            lose_unflushed_tail(directory, durable, rng)
        scheduler = Scheduler("verify")
        lg = UnifiedLog(directory, CONFIG, scheduler=scheduler)
        try:
            assert lg.log_end_offset >= max(flushed, before), f"round {round_no}: lost fsynced data"
            assert_consistent(lg)
            records = read_records(lg)
            assert [r.offset for r in records] == list(range(lg.log_end_offset))
            assert all(bytes(r.value) == b"%d" % r.offset * (len(r.value) // len(b"%d" % r.offset))
                       for r in records)
        finally:
            lg.close()
            scheduler.shutdown()
