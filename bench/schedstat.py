"""Per-thread scheduler times from Linux's /proc/<pid>/task/<tid>/schedstat.

The benchmark asks two things of them: how long the broker sat runnable without a
CPU, and which client thread was busiest. Both read the same file; nanoseconds, so
short runs are not lost to a 10 ms clock tick.
"""
from __future__ import annotations

import os


def threads(pid: int | str = "self") -> dict[int, tuple[str, int, int]]:
    """{thread id: (name, ns on a CPU, ns runnable but waiting for one)} of every thread of
    ``pid``; empty where there is no /proc."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    out = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ran, waited = f.read().split()[:2]
        except (OSError, ValueError):     # the thread ended meanwhile
            continue
        out[int(tid)] = (name, int(ran), int(waited))
    return out
