"""The budget of open segment files: descriptors and index mappings, shared by every log.

Kafka keeps one descriptor per segment and asks operators for a limit to match; a broker
here may hold tens of thousands of partitions under the limit it was given, so a segment
opens its ``.log`` descriptor and maps its indexes only when used, and the least recently
used segments past the budget let theirs go (second-chance "clock" order: a use only sets a
flag, so the hot path takes no lock).

A descriptor is a ``SegmentFd``: an int that closes itself when its last holder lets go. A
read hands the same object to the network layer inside its file slices, so a segment that
is evicted while a response still waits for sendfile keeps its descriptor until that send
is done, and the number can never be reused for another file under it.
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict

#: descriptors left for sockets, checkpoints and snapshots when the budget comes from the limit
RESERVED_FDS = 256
#: the kernel's vm.max_map_count default; each open segment may map two indexes
_MAX_MAP_COUNT_PATH = "/proc/sys/vm/max_map_count"
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


class SegmentFd(int):
    """An open file descriptor that closes itself once nothing refers to it."""

    __slots__ = ()

    def __del__(self):
        try:
            os.close(self)
        except OSError:
            pass


def open_fd(path: str, flags: int, mode: int = 0o644) -> SegmentFd:
    """``os.open`` that, out of descriptors, lets the least recently used segments go and retries once."""
    try:
        return SegmentFd(os.open(path, flags, mode))
    except OSError as exc:
        if exc.errno not in OUT_OF_FILES:
            raise
    POOL.evict(max(len(POOL) // 4, 16))
    return SegmentFd(os.open(path, flags, mode))


def default_budget() -> int:
    """Half of what RLIMIT_NOFILE leaves after RESERVED_FDS, and no more than a quarter of
    vm.max_map_count (two index maps per segment, half the maps kept for everything else)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    budget = (soft - RESERVED_FDS) // 2
    try:
        with open(_MAX_MAP_COUNT_PATH) as f:
            budget = min(budget, int(f.read()) // 4)
    except (OSError, ValueError):
        pass
    return max(budget, 16)


class OpenSegmentFiles:
    """Segments whose files are open, in use order; past ``limit`` the oldest unused ones release."""

    def __init__(self, limit: int | None = None):
        self.limit = limit or default_budget()
        self._open: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, segment) -> None:
        """``segment`` opened a descriptor or mapped an index: count it, make room past the limit."""
        with self._lock:
            self._open[segment] = None
            over = len(self._open) - self.limit
        if over > 0:
            self.evict(over)

    def closed(self, segment) -> None:
        with self._lock:
            self._open.pop(segment, None)

    def evict(self, count: int) -> int:
        """Release the files of up to ``count`` segments, skipping (once) those used since the last pass."""
        victims = []
        with self._lock:
            passes = len(self._open)
            while len(victims) < count and self._open and passes > 0:
                segment, _ = self._open.popitem(last=False)
                passes -= 1
                if segment.recently_used:
                    segment.recently_used = False
                    self._open[segment] = None
                else:
                    victims.append(segment)
            while len(victims) < count and self._open:   # everything was in use: take the oldest anyway
                victims.append(self._open.popitem(last=False)[0])
        for segment in victims:
            segment.release_files()
        self.evictions += len(victims)
        return len(victims)


#: one budget per process: descriptors and mappings are the process's, whichever log holds them
POOL = OpenSegmentFiles()
