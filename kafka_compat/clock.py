"""The broker's clocks, as Kafka's Time offers them: wall-clock and monotonic milliseconds.

`now_ms` is Kafka's `Time.milliseconds()`: epoch milliseconds, for everything that is written down
or compared with another machine's times (record and segment timestamps, group and transaction
expiry, znode timestamps). `monotonic_ms` is `Time.hiResClockMs()`: it never goes back, for
intervals measured inside this process (replica lag, quota windows, fetch session eviction).
Every module that reads a clock imports it from here, and takes a `clock=` argument where a test
must drive time.
"""
from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Milliseconds of a clock that never goes back (its origin is arbitrary)."""
    return time.monotonic_ns() // 1_000_000
