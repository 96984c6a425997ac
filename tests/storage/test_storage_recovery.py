"""Recovery after an unclean shutdown, with damage injected into segments and indexes.

Each test writes a log, closes it, damages files as a crash or a disk would, reopens
it and checks that the log is the longest valid prefix with indexes that agree.
"""

import os
import struct

import pytest
from kafka_compat.storage.segment import segment_paths
from logtools import TS, assert_consistent, batch, read_records


def write(make_log, count=30, **config):
    lg = make_log(**config)
    for i in range(count):
        lg.append_as_leader(batch(3, value=b"v%d" % i * 20, ts=TS + i), 0)
    bases = [s.base_offset for s in lg.segments]
    lg.close()
    return lg.dir, bases


def batch_starts(path):
    starts, pos, size = [], 0, os.path.getsize(path)
    with open(path, "rb") as f:
        data = f.read()
    while pos + 12 <= size:
        starts.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return starts


CONFIG = dict(segment_bytes=2000, index_interval_bytes=200)


def reopen(make_log, clean=False):
    return make_log(had_clean_shutdown=clean, **CONFIG)


def test_torn_tail_is_cut_at_the_last_whole_batch(make_log):
    directory, bases = write(make_log, **CONFIG)
    log_path = segment_paths(directory, bases[-1])[0]
    starts = batch_starts(log_path)
    with open(log_path, "r+b") as f:
        f.truncate(starts[-1] + 30)                  # the last batch lost its tail
    lg = reopen(make_log)
    assert os.path.getsize(log_path) == starts[-1]
    assert lg.log_end_offset == 87
    assert_consistent(lg)
    lg.append_as_leader(batch(1), 0)
    assert read_records(lg)[-1].offset == 87


def test_garbage_after_the_last_batch_is_cut(make_log):
    directory, bases = write(make_log, **CONFIG)
    log_path = segment_paths(directory, bases[-1])[0]
    good = os.path.getsize(log_path)
    with open(log_path, "ab") as f:
        f.write(os.urandom(333))
    lg = reopen(make_log)
    assert os.path.getsize(log_path) == good
    assert lg.log_end_offset == 90
    assert_consistent(lg)


def test_plausible_header_with_bad_checksum_is_cut(make_log):
    directory, bases = write(make_log, **CONFIG)
    log_path = segment_paths(directory, bases[-1])[0]
    good = os.path.getsize(log_path)
    forged = batch(3)
    struct.pack_into(">q", forged, 0, 90)
    forged[-1] ^= 0x55
    with open(log_path, "ab") as f:
        f.write(forged)
    lg = reopen(make_log)
    assert os.path.getsize(log_path) == good and lg.log_end_offset == 90
    assert_consistent(lg)


def test_offsets_going_backwards_are_cut(make_log):
    directory, bases = write(make_log, **CONFIG)
    log_path = segment_paths(directory, bases[-1])[0]
    good = os.path.getsize(log_path)
    stale = batch(3)
    struct.pack_into(">q", stale, 0, bases[-1])       # valid checksum, but offsets already used
    with open(log_path, "ab") as f:
        f.write(stale)
    lg = reopen(make_log)
    assert os.path.getsize(log_path) == good
    assert_consistent(lg)


def test_damage_in_an_earlier_segment_drops_everything_after_it(make_log):
    directory, bases = write(make_log, **CONFIG)
    assert len(bases) >= 3
    log_path = segment_paths(directory, bases[1])[0]
    starts = batch_starts(log_path)
    with open(log_path, "r+b") as f:
        f.seek(starts[2] + 70)
        f.write(b"\xff\xff\xff")
    lg = make_log(recovery_point=bases[1], **CONFIG)
    assert [s.base_offset for s in lg.segments] == bases[:2]
    assert lg.log_end_offset == bases[1] + 2 * 3
    assert_consistent(lg)
    assert not os.path.exists(segment_paths(directory, bases[2])[0])


@pytest.mark.parametrize("bit", [0, 1, 5, 20, 40, 62])
@pytest.mark.parametrize("where", ["middle", "first"])
def test_a_flipped_base_offset_is_cut_at_that_batch(make_log, bit, where):
    """The base offset lies outside the batch checksum: a flipped bit shows only in the offsets
    (going backwards, leaving a gap, not fitting the segment), and recovery cuts there."""
    directory, bases = write(make_log, **CONFIG)
    log_path = segment_paths(directory, bases[-1])[0]
    starts = batch_starts(log_path)
    n = 2 if where == "middle" else 0
    with open(log_path, "r+b") as f:
        f.seek(starts[n])
        base = struct.unpack(">q", f.read(8))[0]
        f.seek(starts[n])
        f.write(struct.pack(">q", base ^ (1 << bit)))
    lg = make_log(recovery_point=bases[-1], **CONFIG)
    assert os.path.getsize(log_path) == starts[n]
    assert lg.log_end_offset == bases[-1] + 3 * n
    assert [r.offset for r in read_records(lg)] == list(range(lg.log_end_offset))
    assert_consistent(lg)
    lg.append_as_leader(batch(1), 0)
    assert read_records(lg)[-1].offset == bases[-1] + 3 * n


def write_epochs(make_log, epochs):
    lg = make_log(**CONFIG)
    for epoch in epochs:
        lg.append_as_leader(batch(3, value=b"v" * 20), epoch)
    bases = [s.base_offset for s in lg.segments]
    lg.close()
    return lg.dir, bases


@pytest.mark.parametrize("bit, cut_at", [(4, 2), (30, 2), (1, 2)])
def test_a_flipped_leader_epoch_is_cut_where_the_epochs_stop_making_sense(make_log, bit, cut_at):
    """The partition leader epoch is outside the checksum as well. Epochs 3,3,3,5,5 with the third
    batch's flipped: up (bits 4, 30) it is a lone batch above the next one's and is cut; down (bit 1:
    3 -> 1) it is the fall that is cut. Either way no wrong epoch reaches the epoch cache."""
    directory, bases = write_epochs(make_log, [3, 3, 3, 5, 5])
    assert len(bases) == 1
    log_path = segment_paths(directory, bases[0])[0]
    starts = batch_starts(log_path)
    with open(log_path, "r+b") as f:
        f.seek(starts[2] + 12)
        epoch = struct.unpack(">i", f.read(4))[0]
        f.seek(starts[2] + 12)
        f.write(struct.pack(">i", epoch ^ (1 << bit)))
    lg = make_log(**CONFIG)
    assert lg.log_end_offset == 3 * cut_at and os.path.getsize(log_path) == starts[cut_at]
    assert [r.offset for r in read_records(lg)] == list(range(3 * cut_at))
    assert lg.latest_epoch == 3 and lg.leader_epoch_cache.entries == [(3, 0)]
    assert_consistent(lg)


def test_a_segment_cut_at_a_batch_boundary_drops_the_later_ones(make_log):
    """Whole batches but fewer offsets than the next segment's base: the offsets between are
    gone, so the later segments go too rather than serve a log with a hole in it."""
    directory, bases = write(make_log, **CONFIG)
    assert len(bases) >= 3
    log_path = segment_paths(directory, bases[1])[0]
    starts = batch_starts(log_path)
    with open(log_path, "r+b") as f:
        f.truncate(starts[2])
    lg = make_log(recovery_point=bases[1], **CONFIG)
    assert [s.base_offset for s in lg.segments] == bases[:2]
    assert lg.log_end_offset == bases[1] + 2 * 3
    assert [r.offset for r in read_records(lg)] == list(range(lg.log_end_offset))
    assert not os.path.exists(segment_paths(directory, bases[2])[0])


def test_a_log_the_cleaner_wrote_keeps_its_gaps(make_log):
    """Gaps are how compaction leaves a log: once the cleaner checkpoint names the partition
    (its policy may be delete now), recovery keeps batches that do not follow each other."""
    directory, bases = write(make_log, count=6, **CONFIG)
    log_path = segment_paths(directory, bases[-1])[0]
    with open(log_path, "rb") as f:
        data = f.read()
    starts = batch_starts(log_path) + [len(data)]
    with open(log_path, "wb") as f:   # the cleaner removed the second batch
        f.write(data[:starts[1]] + data[starts[2]:])
    with open(os.path.join(os.path.dirname(directory), "cleaner-offset-checkpoint"), "w") as f:
        f.write("0\n1\nt 0 9\n")
    lg = reopen(make_log)
    assert [r.offset for r in read_records(lg)] == [0, 1, 2] + list(range(6, 18))


COMPACT = dict(CONFIG, cleanup_policy="compact")


@pytest.mark.parametrize("flipped, bit, served", [
    (2, 16, 6),      # a jump of 65,536 the next batch falls back from: cut before the jumped batch
    (1, 3, 3),       # the batch after the gap jumps further: cut before it, the gap is no excuse
    (2, 40, 6),      # the jump leaves the segment's int32 range: cut there (as Kafka)
    (4, 40, 12),     # the same for the last batch
])
def test_a_base_offset_flipped_upward_in_a_compacted_log_is_not_served(make_log, flipped, bit, served):
    """Compacted logs have gaps, so a base offset flipped upward (outside the checksum) passes as
    one; the next batch then falls back below the jumped batch's offsets. Recovery must not serve
    the jumped batch at its wrong offsets: it cuts before it, and the log goes on from there."""
    lg = make_log(**COMPACT)
    for i in range(6):
        lg.append_as_leader(batch(3, key=b"k%d" % i, value=b"v" * 20, ts=TS + i), 0)
    assert len(lg.segments) == 1
    lg.close()
    log_path = segment_paths(lg.dir, 0)[0]
    with open(log_path, "rb") as f:
        data = f.read()
    starts = batch_starts(log_path) + [len(data)]
    with open(log_path, "wb") as f:   # the cleaner removed the second batch: offsets 0-2, 6-17
        f.write(data[:starts[1]] + data[starts[2]:])
    starts = batch_starts(log_path)
    pos = starts[flipped]            # batches left: 0-2, 6-8, 9-11, 12-14, 15-17
    with open(log_path, "r+b") as f:
        f.seek(pos)
        base = struct.unpack(">q", f.read(8))[0]
        f.seek(pos)
        f.write(struct.pack(">q", base ^ (1 << bit)))
    lg = make_log(**COMPACT)
    offsets = [r.offset for r in read_records(lg)]
    assert offsets == ([0, 1, 2] + list(range(6, 18)))[:served]
    assert os.path.getsize(log_path) == pos
    assert lg.log_end_offset == offsets[-1] + 1
    assert_consistent(lg, contiguous=False)
    lg.append_as_leader(batch(1), 0)
    assert read_records(lg, offsets[-1] + 1)[0].offset == offsets[-1] + 1


def test_a_lone_last_batch_with_a_plausible_jump_is_kept_as_kafka_does(make_log):
    """Nothing after it to compare with and the jump fits the segment: it cannot be told from a
    compaction gap, so it stays, as in Kafka (a known limit)."""
    lg = make_log(**COMPACT)
    for i in range(4):
        lg.append_as_leader(batch(3, key=b"k%d" % i, value=b"v" * 20, ts=TS + i), 0)
    lg.close()
    log_path = segment_paths(lg.dir, 0)[0]
    last = batch_starts(log_path)[-1]
    with open(log_path, "r+b") as f:
        f.seek(last)
        f.write(struct.pack(">q", 9 ^ (1 << 16)))
    lg = make_log(**COMPACT)
    assert [r.offset for r in read_records(lg)] == list(range(9)) + [65545, 65546, 65547]


@pytest.mark.parametrize("damage", ["garbage", "zeros", "partial", "missing", "missing-time"])
def test_damaged_or_missing_indexes_are_rebuilt(make_log, damage):
    directory, bases = write(make_log, **CONFIG)
    _, index_path, time_path = segment_paths(directory, bases[0])
    if damage == "garbage":
        with open(index_path, "r+b") as f:
            f.seek(8)
            f.write(b"\xff\xfe" * 8)                 # offsets no longer increase
    elif damage == "zeros":
        with open(index_path, "ab") as f:
            f.write(bytes(800))                      # a preallocated tail left by a crash
    elif damage == "partial":
        with open(index_path, "ab") as f:
            f.write(b"\x00\x01\x02")
    elif damage == "missing":
        os.unlink(index_path)
    else:
        os.unlink(time_path)
    lg = reopen(make_log, clean=True)                # even after a clean shutdown
    assert lg.log_end_offset == 90
    assert lg.segments[0].offset_index.entries > 0 and lg.segments[0].time_index.entries > 0
    assert_consistent(lg)
    assert [r.offset for r in read_records(lg)] == list(range(90))


def test_interrupted_cleaning_leftovers(make_log):
    directory, bases = write(make_log, **CONFIG)
    log_path = segment_paths(directory, bases[0])[0]
    with open(log_path + ".cleaned", "wb") as f:
        f.write(b"half-written cleaner output")
    with open(segment_paths(directory, bases[1])[0] + ".deleted", "wb") as f:
        f.write(b"old segment awaiting deletion")
    lg = reopen(make_log)
    assert not [f for f in os.listdir(directory) if f.endswith((".cleaned", ".deleted"))]
    assert lg.log_end_offset == 90
    assert_consistent(lg)


def test_interrupted_swap_is_completed(make_log):
    directory, bases = write(make_log, **CONFIG)
    # a finished cleaning of the first two segments: only the last batch of each survived
    first, second = (segment_paths(directory, b)[0] for b in bases[:2])
    keep = []
    for path in (first, second):
        with open(path, "rb") as f:
            data = f.read()
        last = batch_starts(path)[-1]
        keep.append(data[last:])
    with open(first + ".swap", "wb") as f:
        f.write(b"".join(keep))
    lg = reopen(make_log)
    assert lg.segments[0].base_offset == bases[0]
    assert bases[1] not in [s.base_offset for s in lg.segments]
    assert not [f for f in os.listdir(directory) if f.endswith(".swap")]
    assert_consistent(lg, contiguous=False)
    offsets = [r.offset for r in read_records(lg)]
    assert offsets == sorted(offsets) and offsets[-1] == 89

