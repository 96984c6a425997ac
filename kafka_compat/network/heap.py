"""Keep freed request buffers in the process heap instead of handing them back to the kernel.

A large Produce frame is received into its own buffer (protocol.frames.FrameReader).
glibc serves allocations of 128 KiB and up with a fresh mmap and unmaps them on
free, so each ~1 MiB request paid a page fault and a zeroed page for every 4 KiB
it carried -- and on a VM that reports freed memory to its host (virtio page
reporting), each of those pages is a host fault as well. With the mmap threshold
above the largest frame we expect and the heap trimmed only past a bound, the
buffer freed by one request is the next request's, already mapped.
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20     # glibc's ceiling for the threshold (HEAP_MAX/2 on 64-bit)
TRIM_THRESHOLD = 256 << 20    # free heap kept beyond this is returned


def retain_freed_buffers() -> bool:
    """Tune glibc malloc as above; False where there is no glibc mallopt (nothing changes)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
