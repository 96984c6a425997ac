"""Fixtures for the log engine's tests: a fake clock, a private scheduler, and log factories."""

import pytest
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.scheduler import Scheduler
from kafka_compat.storage.unified_log import UnifiedLog

from kafka_compat.configdef import LONG_MAX


class FakeClock:
    """Milliseconds that only move when a test says so."""

    def __init__(self, ms: int = 1_700_000_000_000):
        self.ms = ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def scheduler():
    s = Scheduler("test-scheduler")
    yield s
    s.shutdown()


@pytest.fixture
def make_log(tmp_path, clock, scheduler):
    """make_log(name="t-0", **config) -> UnifiedLog in tmp_path; the same name again reloads (recovers) it."""
    opened = []

    def factory(name="t-0", config=None, *, recovery_point=0, log_start_offset=0, had_clean_shutdown=False,
                **overrides):
        # the tests' clock stands still while their records carry real and made-up times: no future bound
        # unless a test sets one (Kafka 4's default of one hour is tested in test_storage_validator.py)
        overrides.setdefault("message_timestamp_after_max_ms", LONG_MAX)
        cfg = config if config is not None else LogConfig(**overrides)
        lg = UnifiedLog(str(tmp_path / name), cfg, scheduler=scheduler, clock=clock, recovery_point=recovery_point,
                 log_start_offset=log_start_offset, had_clean_shutdown=had_clean_shutdown)
        opened.append(lg)
        return lg

    yield factory
    for lg in opened:
        if not lg.closed:
            lg.close()
