"""A log on a full filesystem: appends fail with ENOSPC (an OSError the broker answers as
KAFKA_STORAGE_ERROR) and never crash the process, and once space is back the log goes on where it
stopped, every acknowledged record in place. The indexes are memory-mapped: a store into a hole of a
full filesystem is a SIGBUS, so they allocate their blocks before they write.

Needs root (a small loop-mounted filesystem, kafka_compat.faults.disk.LoopDisk); skipped otherwise.
Runs the log in a child process, so that a crash fails the test rather than killing pytest."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kafka_compat.faults import disk

pytestmark = pytest.mark.skipif(disk.missing() is not None, reason=str(disk.missing()))

CHILD = r"""
import errno, json, sys
from kafka_compat.protocol.records import batches, build_batch
from kafka_compat.storage.fetch_data_info import FetchIsolation
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.scheduler import Scheduler
from kafka_compat.storage.unified_log import UnifiedLog
from kafka_compat.faults.disk import LoopDisk

mount = sys.argv[1]
scheduler = Scheduler("full-disk")
lg = UnifiedLog(mount + "/t-0", LogConfig(), scheduler=scheduler, recovery_point=0, log_start_offset=0,
                had_clean_shutdown=False)
acked, failures, n = [], 0, 0

def append():
    global n
    value = b"%06d|" % n + b"x" * 1000
    info = lg.append_as_leader(bytearray(build_batch([(None, value, (), 1_700_000_000_000 + n)])), 0)
    acked.append((info.first_offset, n))
    n += 1

append()
disk = LoopDisk(sys.argv[2], mount, 0)
disk.fill()
for _ in range(6000):           # past the blocks the segment reserved ahead, and past an index page
    try:
        append()
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        failures += 1
        n += 1                  # that value was never acknowledged
disk.free()
append()
lg.update_high_watermark(lg.log_end_offset)
data = lg.read(0, 1 << 30, FetchIsolation.LOG_END, True).records.read_bytes()
read = [(r.offset, int(r.value[:6])) for b in batches(data) for r in b.records()]
lg.close()
scheduler.shutdown()
print(json.dumps({"acked": acked, "failures": failures, "read": read}))
"""


@pytest.fixture
def small_disk(tmp_path):
    d = disk.LoopDisk(str(tmp_path / "disk.img"), str(tmp_path / "mnt"), 16 << 20).create()
    yield d
    d.close()


def test_a_full_disk_fails_appends_cleanly_and_loses_nothing_acknowledged(small_disk, tmp_path):
    done = subprocess.run([sys.executable, "-c", CHILD, small_disk.mount_point, small_disk.image],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the log's process died ({done.returncode}): {done.stderr[-3000:]}"
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["failures"] > 0                           # the disk was full for it
    acked = [tuple(a) for a in result["acked"]]
    assert len(acked) > 2
    assert [o for o, _ in acked] == list(range(len(acked)))  # offsets go on where they stopped
    assert [tuple(r) for r in result["read"]] == acked       # every acknowledged record, nothing else
