"""LeaderEpochFileCache: Kafka's leader-epoch-checkpoint file, its assign/truncate rules and
OffsetForLeaderEpoch's answers, epochs stamped on appended batches, and a cache rebuilt from
the batches when its file is missing or damaged."""

import os

import pytest
from kafka_compat.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from logtools import append_committed, batch, read_views

from kafka_compat.protocol.records import build_batch


def checkpoint_bytes(directory) -> bytes:
    with open(os.path.join(directory, LEADER_EPOCH_CHECKPOINT), "rb") as f:
        return f.read()


def cache_with(tmp_path, *entries):
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_the_file_is_kafkas_text_format(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (3, 150), (4, 1500))
    assert checkpoint_bytes(tmp_path) == b"0\n3\n0 0\n3 150\n4 1500\n"
    assert not os.path.exists(os.path.join(tmp_path, LEADER_EPOCH_CHECKPOINT + ".tmp"))
    again = LeaderEpochFileCache(str(tmp_path))
    assert again.loaded and again.entries == [EpochEntry(0, 0), EpochEntry(3, 150), EpochEntry(4, 1500)]
    assert again.latest_epoch == 4 and cache.latest_epoch == 4


def test_kafka_writes_are_read_whatever_the_whitespace(tmp_path):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n2\n1  10\n2\t20\n")
    assert LeaderEpochFileCache(str(tmp_path)).entries == [EpochEntry(1, 10), EpochEntry(2, 20)]


def test_assign_takes_a_new_epoch_and_ignores_a_repeat(tmp_path):
    cache = cache_with(tmp_path, (1, 0))
    inode = os.stat(tmp_path / LEADER_EPOCH_CHECKPOINT).st_ino
    assert not cache.assign(1, 0)
    assert not cache.assign(1, 50)          # same epoch, later start: nothing new
    assert os.stat(tmp_path / LEADER_EPOCH_CHECKPOINT).st_ino == inode   # not rewritten
    assert cache.assign(2, 50)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 50)]
    assert os.stat(tmp_path / LEADER_EPOCH_CHECKPOINT).st_ino != inode   # rewritten by rename


def test_assign_drops_conflicting_later_entries_as_kafka_does(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 50), (3, 80))
    assert cache.assign(2, 40)              # an earlier start for epoch 2: 2 and 3 conflict
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 40)]
    assert cache.assign(4, 40)              # same start as epoch 2: it goes
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(4, 40)]
    assert checkpoint_bytes(tmp_path) == b"0\n2\n1 0\n4 40\n"
    with pytest.raises(ValueError):
        cache.assign(-1, 5)
    with pytest.raises(ValueError):
        cache.assign(5, -1)


@pytest.mark.parametrize("requested, expected", [
    (UNDEFINED_EPOCH, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),   # undefined
    (7, (7, 1000)),                                                  # the latest: the log end
    (0, (0, 10)),                                                    # below the first: its start
    (2, (2, 20)),                                                    # known: start of the next one
    (3, (2, 20)),                                                    # unknown, between: floor epoch
    (5, (4, 100)),
    (6, (4, 100)),
    (8, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),                  # above every epoch known
])
def test_end_offset_for_follows_kafkas_rules(tmp_path, requested, expected):
    cache = cache_with(tmp_path, (1, 10), (2, 15), (4, 20), (7, 100))
    assert cache.end_offset_for(requested, 1000) == expected


def test_end_offset_for_an_empty_cache_is_undefined(tmp_path):
    assert LeaderEpochFileCache(str(tmp_path)).end_offset_for(3, 50) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_truncations_and_clear(tmp_path):
    cache = cache_with(tmp_path, (1, 10), (2, 15), (4, 20), (7, 100))
    cache.truncate_from_end(20)             # entries starting at or after 20 go
    assert cache.entries == [EpochEntry(1, 10), EpochEntry(2, 15)] and cache.latest_epoch == 2
    cache.truncate_from_end(500)            # nothing at or after 500
    assert len(cache) == 2
    cache.truncate_from_start(12)           # epoch 1 now starts at the log start
    assert cache.entries == [EpochEntry(1, 12), EpochEntry(2, 15)]
    cache.truncate_from_start(30)           # both below: the last kept, moved to 30
    assert cache.entries == [EpochEntry(2, 30)]
    assert checkpoint_bytes(tmp_path) == b"0\n1\n2 30\n"   # no scheduler: written at once
    cache.clear()
    assert cache.entries == [] and cache.latest_epoch is None
    assert checkpoint_bytes(tmp_path) == b"0\n0\n"


class HeldTasks:
    """A scheduler that runs its tasks only when the test says so."""

    def __init__(self):
        self.tasks = []

    def schedule(self, name, fn, delay_ms=0, period_ms=None):
        self.tasks.append(fn)

    def run(self):
        tasks, self.tasks = self.tasks, []
        for fn in tasks:
            fn()


def test_truncations_are_written_in_the_background_when_there_is_a_scheduler(tmp_path):
    tasks = HeldTasks()
    cache = LeaderEpochFileCache(str(tmp_path), tasks)
    cache.assign(1, 0)
    cache.assign(2, 10)                      # a new epoch: written at once
    assert checkpoint_bytes(tmp_path) == b"0\n2\n1 0\n2 10\n" and tasks.tasks == []
    cache.truncate_from_end(10)
    cache.truncate_from_start(3)
    assert len(tasks.tasks) == 1             # one write pending for both
    assert checkpoint_bytes(tmp_path) == b"0\n2\n1 0\n2 10\n"
    tasks.run()
    assert checkpoint_bytes(tmp_path) == b"0\n1\n1 3\n"
    cache.truncate_from_end(3)
    cache.flush()                            # a clean close writes what is pending
    assert checkpoint_bytes(tmp_path) == b"0\n0\n"


def test_appends_stamp_the_leader_epoch_and_record_where_it_began(make_log):
    lg = make_log()
    append_committed(lg, batch(3), 5)
    append_committed(lg, batch(2), 5)
    append_committed(lg, batch(1), 8)
    assert [v.partition_leader_epoch for v in read_views(lg)] == [5, 5, 8]
    assert lg.leader_epoch_cache.entries == [EpochEntry(5, 0), EpochEntry(8, 5)]
    assert checkpoint_bytes(lg.dir) == b"0\n2\n5 0\n8 5\n"
    assert lg.latest_epoch == 8
    assert lg.end_offset_for_epoch(5) == (5, 5)
    assert lg.end_offset_for_epoch(8) == (8, 6)
    assert lg.end_offset_for_epoch(2) == (2, 0)
    assert lg.end_offset_for_epoch(9) is None


def test_the_same_epoch_writes_no_checkpoint(make_log):
    lg = make_log()
    append_committed(lg, batch(1), 3)
    inode = os.stat(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT)).st_ino
    for _ in range(20):
        append_committed(lg, batch(1), 3)
    assert os.stat(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT)).st_ino == inode


def test_maybe_assign_epoch_start_offset_before_any_append(make_log):
    lg = make_log()
    append_committed(lg, batch(4), 1)
    lg.maybe_assign_epoch_start_offset(2, lg.log_end_offset)   # what a new leader does
    assert lg.end_offset_for_epoch(1) == (1, 4)
    append_committed(lg, batch(1), 2)
    assert lg.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(2, 4)]


DAMAGE = [None, b"", b"\xff\xd8 not text", b"0\n3\n1 0\n", b"7\n1\n1 0\n", b"0\n1\n-1 0\n", b"0\n1\n1 0 9\n"]


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_missing_or_damaged_file_is_rebuilt_from_the_batches(make_log, damage):
    lg = make_log("t-0", segment_bytes=300)
    for epoch in (0, 0, 2, 2, 2, 5, 9, 9):
        append_committed(lg, batch(2, value=b"z" * 40), epoch)
    assert len(lg.segments) > 2
    expected = [EpochEntry(0, 0), EpochEntry(2, 4), EpochEntry(5, 10), EpochEntry(9, 12)]
    assert lg.leader_epoch_cache.entries == expected
    lg.close()
    path = os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT)
    if damage is None:
        os.unlink(path)
    else:
        with open(path, "wb") as f:
            f.write(damage)
    again = make_log("t-0", segment_bytes=300, had_clean_shutdown=True)
    # an empty file is a valid empty checkpoint (Kafka writes one for a new log), but not for a log
    # whose batches carry epochs: that one is rebuilt too
    assert again.leader_epoch_cache.entries == expected
    assert checkpoint_bytes(again.dir) == b"0\n4\n0 0\n2 4\n5 10\n9 12\n"


def test_loading_drops_epochs_beyond_the_log_end_and_below_its_start(make_log):
    lg = make_log("t-0", segment_bytes=300)
    for epoch in (1, 1, 3, 3, 3, 3):
        append_committed(lg, batch(2, value=b"z" * 40), epoch)
    lg.maybe_increment_log_start_offset(2)
    lg.close()
    # a leader that wrote its epoch but crashed before any batch of it reached the log
    with open(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT), "wb") as f:
        f.write(b"0\n3\n1 0\n3 4\n6 12\n")
    again = make_log("t-0", segment_bytes=300, log_start_offset=2, had_clean_shutdown=True)
    assert again.leader_epoch_cache.entries == [EpochEntry(1, 2), EpochEntry(3, 4)]


def test_recovery_adds_the_epochs_of_the_batches_it_checks(make_log):
    lg = make_log("t-0", segment_bytes=300)
    for epoch in (1, 1, 3, 3, 4):
        append_committed(lg, batch(2, value=b"z" * 40), epoch)
    lg.close()
    with open(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT), "wb") as f:
        f.write(b"0\n1\n1 0\n")                       # a valid file that lacks the later epochs
    clean = make_log("t-0", segment_bytes=300, had_clean_shutdown=True)
    # not trusted as it is: its latest epoch is not the last batch's, so it is rebuilt from the log
    assert clean.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(3, 4), EpochEntry(4, 8)]
    clean.close()
    recovered = make_log("t-0", segment_bytes=300)     # unclean: every segment is checked
    assert recovered.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(3, 4), EpochEntry(4, 8)]


def _compacted_follower_log(make_log):
    """A compacted log as a follower copies it: epoch 1 began at 10 and epoch 2 at 30, but the cleaner
    removed the first batches of both (the gaps 2-11 and 22-29); the checkpoint says where they began."""
    lg = make_log("kv-0", cleanup_policy="compact", segment_bytes=300)
    for base, epoch in ((0, 0), (12, 1), (20, 1), (30, 2), (40, 2)):
        lg.append_as_follower(bytearray(build_batch([(b"k%d" % base, b"v", (), 1), (b"x%d" % base, b"v", (), 1)],
                                                    base_offset=base, partition_leader_epoch=epoch)))
    lg.close()
    with open(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT), "wb") as f:
        f.write(b"0\n3\n0 0\n1 10\n2 30\n")
    return lg


def test_epoch_starts_in_a_compaction_gap_are_kept(make_log):
    """Where the cleaner removed an epoch's first batches the log cannot say where it began: the
    checkpoint's word is kept (Kafka keeps it too), not moved to the first surviving batch."""
    _compacted_follower_log(make_log)
    again = make_log("kv-0", cleanup_policy="compact", segment_bytes=300, had_clean_shutdown=True)
    assert again.leader_epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(2, 30)]


@pytest.mark.parametrize("damaged", [b"1 15", b"1 22", b"2 35"])
def test_an_epoch_start_moved_past_a_batch_of_its_epoch_is_rebuilt(make_log, damaged):
    """A checkpoint damaged into valid text whose epoch starts after a surviving batch of that epoch
    (behind a compaction gap, so the batch at its offset is a later one of the same epoch): the
    batches before it would answer to the older epoch, so the cache is rebuilt from the log."""
    lg = _compacted_follower_log(make_log)
    with open(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT), "rb") as f:
        text = f.read()
    old = b"1 10" if damaged.startswith(b"1") else b"2 30"
    with open(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT), "wb") as f:
        f.write(text.replace(old, damaged))
    again = make_log("kv-0", cleanup_policy="compact", segment_bytes=300, had_clean_shutdown=True)
    entries = again.leader_epoch_cache.entries
    # every surviving batch answers to its own epoch (the starts in the gaps are the log's: the first
    # surviving batch of each epoch)
    assert entries == [EpochEntry(0, 0), EpochEntry(1, 12), EpochEntry(2, 30)]
    for view in read_views(again):
        assert again.leader_epoch_cache.epoch_for_offset(view.base_offset) == view.partition_leader_epoch


def test_an_epoch_field_flipped_up_in_a_segments_last_batch_does_not_hide_the_later_epochs(make_log):
    """The PartitionLeaderEpoch lies outside the checksum. Raised by damage in the last batch of a segment, the
    fall that gives it away is the next segment's first batch: the rebuilt cache drops the raised epoch, as
    Kafka's assign drops conflicting entries, and keeps every real one."""
    lg = make_log(segment_bytes=250)
    for epoch in (0, 0, 0, 1, 1, 1, 2, 2, 2):
        lg.append_as_leader(batch(1, value=b"v" * 20), epoch)
    want = lg.leader_epoch_cache.entries
    segments = lg._local.segments
    assert len(segments) > 2 and [e.epoch for e in want] == [0, 1, 2]
    starts = {e.start_offset for e in want}
    seg, last = next((s, list(s.batches())[-1]) for s in segments[:-1]
                     if list(s.batches())[-1].base_offset not in starts)   # the field of a later batch of its epoch
    path = seg.log_path
    lg.close()
    with open(path, "r+b") as f:                  # PartitionLeaderEpoch: header bytes 12-15
        f.seek(last.position + 12)
        f.write((65).to_bytes(4, "big"))
    again = make_log(segment_bytes=250)           # unclean: every segment is recovered
    assert again.leader_epoch_cache.entries == want
