"""network.heap: request-sized buffers come from the reused heap, not a fresh mmap each."""
from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, sys
if sys.argv[1] == "tuned":
    from kafka_compat.network.heap import retain_freed_buffers
    assert retain_freed_buffers()
buf = bytearray(1 << 20)                     # one Produce frame's worth
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
for line in open("/proc/self/maps"):
    if line.rstrip().endswith("[heap]"):
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        print("heap" if lo <= addr < hi else "mmap")
        break
else:
    print("mmap")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc/self/maps")
@pytest.mark.parametrize("mode, where", [("tuned", "heap"), ("default", "mmap")])
def test_a_one_mib_buffer_lives_in_the_heap_only_when_tuned(mode, where):
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == where
