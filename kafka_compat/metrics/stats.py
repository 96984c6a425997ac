"""Kafka's sampled statistics (org.apache.kafka.common.metrics.stats): the windowed rate every quota
measures against, whether of bytes, request time, partitions or connections."""
from __future__ import annotations

# a sensor (a client's or an IP's quota window) unused this long is dropped (Kafka's
# InactiveSensorExpirationTimeSeconds, 3600 s, for client and connection quotas alike)
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000


class Sample:
    __slots__ = ("value", "count", "start_ms", "last_event_ms")

    def __init__(self, now: int) -> None:
        self.reset(now)

    def reset(self, now: int) -> None:
        self.value = 0.0
        self.count = 0
        self.start_ms = now
        self.last_event_ms = now


class SampledStat:
    """Kafka's SampledStat with a windowed sum: `samples` windows of `window_ms`, plus one that overlaps."""
    __slots__ = ("samples", "window_ms", "_samples", "_current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[Sample] = []
        self._current = 0

    def record(self, value: float, now: int) -> None:
        s = self._current_sample(now)
        if now - s.start_ms >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                s = Sample(now)
                self._samples.append(s)
            else:
                s = self._samples[self._current]
                s.reset(now)
        s.value += value
        s.count += 1
        s.last_event_ms = now

    def _current_sample(self, now: int) -> Sample:
        if not self._samples:
            self._samples.append(Sample(now))
        return self._samples[self._current]

    def purge(self, now: int) -> None:
        """Samples with no event within the whole window start over (they no longer count)."""
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now - s.last_event_ms >= expire:
                s.reset(now)

    def totals(self, now: int) -> tuple[float, int]:
        self.purge(now)
        return sum(s.value for s in self._samples), sum(s.count for s in self._samples)

    def window_size(self, now: int) -> int:
        """Kafka's Rate.windowSize: time since the oldest sample, but never less than samples-1 windows."""
        self.purge(now)
        if not self._samples:
            self._samples.append(Sample(now))
        elapsed = now - min(s.start_ms for s in self._samples)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now: int) -> float:
        """Per second over the window."""
        total, _ = self.totals(now)
        return total / (self.window_size(now) / 1000.0)

    def average(self, now: int) -> float:
        total, count = self.totals(now)
        return total / count if count else 0.0
