"""LogManager: spreading partitions over log.dirs, checkpoints, clean-shutdown marker, recovery,
background retention and flush.ms."""

import os
import threading
import time

from kafka_compat.storage import checkpoint
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from logtools import TS, append_committed, batch, keyed, read_records

from kafka_compat.configdef import LONG_MAX


def manager(tmp_path, clock, dirs=2, **kwargs):
    return LogManager([str(tmp_path / f"d{i}") for i in range(dirs)], kwargs.pop("config", LogConfig()),
                      clock=clock, cleaner_enabled=kwargs.pop("cleaner_enabled", False), **kwargs)


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path, clock):
    m = manager(tmp_path, clock, dirs=3)
    m.startup(background=False)
    for p in range(6):
        m.get_or_create_log("t", p)
    counts = {d: len(logs) for d, logs in m.logs_by_dir().items()}
    assert sorted(counts.values()) == [2, 2, 2]
    assert os.path.isdir(os.path.join(m._dir_of[("t", 4)], "t-4"))
    m.shutdown()
    m2 = manager(tmp_path, clock, dirs=3)
    m2.startup(background=False)
    assert sorted(m2.logs) == [("t", p) for p in range(6)]
    # a fresh partition still goes to a least-loaded dir
    assert m2.next_log_dir() == m2.log_dirs[0]
    m2.shutdown()


def test_checkpoints_and_clean_shutdown_marker(tmp_path, clock):
    m = manager(tmp_path, clock, dirs=1)
    m.startup(background=False)
    lg = m.get_or_create_log("my-topic", 3)
    for _ in range(5):
        append_committed(lg, batch(2))
    lg.maybe_increment_log_start_offset(4)
    d = m.log_dirs[0]
    assert not checkpoint.had_clean_shutdown(d)
    m.shutdown()
    assert checkpoint.had_clean_shutdown(d)
    with open(os.path.join(d, checkpoint.RECOVERY_POINT_CHECKPOINT)) as f:
        assert f.read() == "0\n1\nmy-topic 3 10\n"
    with open(os.path.join(d, checkpoint.LOG_START_OFFSET_CHECKPOINT)) as f:
        assert f.read() == "0\n1\nmy-topic 3 4\n"
    with open(os.path.join(d, checkpoint.CLEAN_SHUTDOWN_FILE)) as f:
        assert f.read() == '{"version":0,"brokerEpoch":-1}'
    m2 = manager(tmp_path, clock, dirs=1)
    m2.startup(background=False)
    assert not checkpoint.had_clean_shutdown(d)          # removed while running
    lg2 = m2.get_log("my-topic", 3)
    assert (lg2.log_start_offset, lg2.log_end_offset, lg2.recovery_point) == (4, 10, 10)
    m2.shutdown()


def test_unclean_shutdown_recovers_from_the_recovery_point(tmp_path, clock):
    m = manager(tmp_path, clock, dirs=1, config=LogConfig(segment_bytes=400))
    m.startup(background=False)
    lg = m.get_or_create_log("t", 0)
    for _ in range(20):
        lg.append_as_leader(batch(2, value=b"x" * 30), 0)
    lg.flush()
    m.checkpoint_recovery_points()
    lg.append_as_leader(batch(2), 0)
    active = lg.active_segment.log_path
    # crash: no shutdown; the unflushed tail is torn
    with open(active, "r+b") as f:
        f.truncate(os.path.getsize(active) - 5)
    m2 = manager(tmp_path, clock, dirs=1, config=LogConfig(segment_bytes=400))
    m2.startup(background=False)
    lg2 = m2.get_log("t", 0)
    assert lg2.log_end_offset == 40
    assert [r.offset for r in read_records(lg2)] == list(range(40))
    m2.shutdown()


def test_unclean_shutdown_recovers_logs_on_the_recovery_threads(tmp_path, clock, caplog):
    """num.recovery.threads.per.data.dir: each torn log is recovered, on the recovery threads."""
    m = manager(tmp_path, clock, dirs=1)
    m.startup(background=False)
    for p in range(6):
        lg = m.get_or_create_log("t", p)
        for _ in range(p + 1):
            lg.append_as_leader(batch(2), 0)
    paths = [m.get_log("t", p).active_segment.log_path for p in range(6)]
    for path in paths:   # crash: no shutdown, every last batch torn
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 5)
    m2 = manager(tmp_path, clock, dirs=1, recovery_threads_per_data_dir=3)
    with caplog.at_level("WARNING", logger="kafka_compat.storage"):
        m2.startup(background=False)
    for p in range(6):
        assert [r.offset for r in read_records(m2.get_log("t", p))] == list(range(2 * p))
    torn = [r for r in caplog.records if "torn batch" in r.getMessage()]
    assert len(torn) == 6 and all(r.threadName.startswith("log-recovery") for r in torn)
    m2.shutdown()


def test_background_retention_and_flush_ms(tmp_path, clock):
    config = LogConfig(segment_bytes=400, retention_ms=1000, flush_ms=0, file_delete_delay_ms=0)
    m = manager(tmp_path, clock, dirs=1, config=config, retention_check_interval_ms=10,
                flush_check_interval_ms=10)
    m.startup()
    lg = m.get_or_create_log("t", 0)
    for i in range(20):
        append_committed(lg, batch(2, value=b"x" * 30, ts=TS + i))
    clock.ms = TS + 10 ** 7
    deadline = time.monotonic() + 10
    while (lg.log_start_offset < 40 or lg.recovery_point < 40) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lg.recovery_point == 40                        # flushed by the flush.ms check
    assert lg.log_start_offset == 40                      # everything expired by retention.ms
    m.shutdown()


def test_delete_log_renames_then_removes(tmp_path, clock):
    m = manager(tmp_path, clock, dirs=1, config=LogConfig(file_delete_delay_ms=600_000))
    m.startup(background=False)
    m.get_or_create_log("t", 0).append_as_leader(batch(1), 0)
    m.delete_log("t", 0)
    names = os.listdir(m.log_dirs[0])
    assert "t-0" not in names and any(n.startswith("t-0.") and n.endswith("-delete") for n in names)
    assert m.get_log("t", 0) is None
    m.shutdown()                                          # runs the delayed removal
    assert not any(n.endswith("-delete") for n in os.listdir(m.log_dirs[0]))


def test_malformed_checkpoint_means_full_recovery(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("0\n2\nt 0 5\n")
    assert checkpoint.read_offsets(str(path)) == {}
    path.write_text("0\n1\nt-x 0 5\n")
    assert checkpoint.read_offsets(str(path)) == {("t-x", 0): 5}


def test_deleting_one_topic_among_thousands_writes_each_checkpoint_once_off_the_callers_thread(
        tmp_path, clock, monkeypatch):
    m = manager(tmp_path, clock, dirs=1)
    m.startup(background=False)
    for t in range(20):
        for p in range(100):
            m.get_or_create_log(f"t{t}", p)
    writes = []
    real = checkpoint.write_offsets

    def counted(path, offsets):
        writes.append((os.path.basename(path), threading.current_thread().name, len(offsets)))
        real(path, offsets)
    monkeypatch.setattr(checkpoint, "write_offsets", counted)
    m.checkpoint_recovery_points()
    m.checkpoint_log_start_offsets()
    assert [w[0] for w in writes] == [checkpoint.RECOVERY_POINT_CHECKPOINT, checkpoint.LOG_START_OFFSET_CHECKPOINT]
    writes.clear()
    m.checkpoint_recovery_points()        # nothing changed: nothing written
    m.checkpoint_log_start_offsets()
    assert writes == []

    for p in range(100):
        m.delete_log("t0", p)
    path = os.path.join(m.log_dirs[0], checkpoint.RECOVERY_POINT_CHECKPOINT)
    deadline = time.monotonic() + 60
    while len(checkpoint.read_offsets(path)) != 1900 and time.monotonic() < deadline:
        time.sleep(0.05)
    while len(writes) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    # a write per file per batch of deletions (one batch unless the machine is very slow), never
    # one per deleted partition, and none on the caller's thread
    assert {w[0] for w in writes} == {checkpoint.RECOVERY_POINT_CHECKPOINT, checkpoint.LOG_START_OFFSET_CHECKPOINT}
    assert len(writes) <= 6, writes
    assert {w[1] for w in writes} == {"kafka-log-manager"}
    assert writes[-1][2] == 1900
    assert not any(t == "t0" for t, _ in checkpoint.read_offsets(path))
    before = len(writes)
    m.shutdown()
    assert len(writes) == before          # shutdown found the files current


def test_a_log_being_moved_to_another_dir_is_not_cleaned(tmp_path, clock):
    """As Kafka's abortAndPauseCleaning: the cleaner leaves a partition alone while it has a future log."""
    config = LogConfig(cleanup_policy="compact", segment_bytes=1200, message_timestamp_after_max_ms=LONG_MAX)
    m = manager(tmp_path, clock, config=config, cleaner_enabled=True)
    m.startup(background=False)
    try:
        lg = m.get_or_create_log("t", 0)
        for i in range(20):
            append_committed(lg, keyed([(b"k%d" % (i % 3), b"v" * 60)]))
        other = next(d for d in m.log_dirs if d != m.log_dir_of("t", 0))
        m.maybe_update_preferred_log_dir("t", 0, other)
        m.create_future_log("t", 0)
        assert not m.cleaner.clean_once()
        m.delete_future_log("t", 0)
        assert m.cleaner.clean_once()
    finally:
        m.shutdown()
