"""The corruption campaign's engine: damage one file of a log dir, load it again, judge what it serves.

    python tests/storage/corruption.py --corruptions 1000 [--seed N]     # the full run

A pristine log dir is written once through LogManager (plain, idempotent and transactional
batches, an abort, three leader epochs, many segments with index entries, a compacted log, a
cleaner checkpoint) and shut down cleanly. Each corruption copies it, damages one file (segment
bytes, truncation, an index, a time index, a transaction index, a producer snapshot, the
leader-epoch checkpoint, a per-dir checkpoint, the clean-shutdown marker), with or without the
marker, then loads the copy and checks:

- loading never raises;
- every batch served has a valid checksum and every record served is the pristine record at
  that offset, contiguous from the log start (so nothing invalid is ever served);
- damage to a derived file loses nothing: every record is still there, and the producer state,
  the leader epochs and the aborted transactions equal the pristine ones (rebuilt from the log);
- damage to the log keeps every batch before the damage: recovery truncates at the first invalid
  batch at or after the recovery point, never below it;
- offset lookups land on the batch holding the offset, and the log takes a new append.

Log damage lands where Kafka's model puts it: at or after the recovery point without the marker
(bytes a crash may have torn), and in the part of each segment the clean load checks (from its
last index entry to its end) with it. Flushed bytes below the recovery point changed by the disk
itself are not looked at on load, by Kafka either; a consumer's checksum catches those.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field

from kafka_compat.storage import checkpoint
from kafka_compat.storage.fetch_data_info import FetchIsolation
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.validator import COORDINATOR

from kafka_compat.protocol.batch_header import crc_valid
from kafka_compat.protocol.records import ControlRecordType, batches, build_batch, build_control_batch

TS = int(time.time() * 1000)   # now: producers idle for a day would expire on one load path and not the other
CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=300, segment_index_bytes=4096)
COMPACT = CONFIG.updated(cleanup_policy="compact", min_cleanable_dirty_ratio=0.01, segment_bytes=1500)
PARTITIONS = ("plain-0", "plain-1", "txn-0", "kv-0")

#: file kinds the campaign damages (per partition, then per log dir)
DERIVED = ("index", "timeindex", "txnindex", "snapshot", "leader-epoch-checkpoint")
LOG = ("log-bytes", "log-truncate")
DIR_FILES = (checkpoint.RECOVERY_POINT_CHECKPOINT, checkpoint.LOG_START_OFFSET_CHECKPOINT,
             checkpoint.CLEANER_OFFSET_CHECKPOINT, checkpoint.REPLICATION_OFFSET_CHECKPOINT, "marker")
KINDS = LOG + DERIVED + DIR_FILES
SUFFIX = {"index": ".index", "timeindex": ".timeindex", "txnindex": ".txnindex", "snapshot": ".snapshot"}
MUTATIONS = ("flip", "garbage", "truncate", "extend", "zero", "empty", "delete", "random")


def _topic_config(topic: str) -> LogConfig:
    return COMPACT if topic == "kv" else CONFIG


def manager(directory: str) -> LogManager:
    return LogManager([directory], CONFIG, topic_config=_topic_config, cleaner_backoff_ms=0)


def _batch(values, **kw) -> bytearray:
    return bytearray(build_batch([(k, v, (), TS + i) for i, (k, v) in enumerate(values)], **kw))


def write_pristine(directory: str, rng: random.Random) -> None:
    """The log dir every corruption starts from (closed cleanly)."""
    m = manager(directory)
    m.startup(background=False)
    seq = {}
    for name in PARTITIONS:
        topic, _, p = name.rpartition("-")
        lg = m.get_or_create_log(topic, int(p))
        for epoch in range(3):
            for n in range(25):
                count = rng.randint(1, 4)
                values = [(f"k{rng.randint(0, 30)}".encode(), os.urandom(rng.randint(5, 90))) for _ in range(count)]
                if topic == "plain" and n % 3 == 0:      # an idempotent producer
                    s = seq.get(name, 0)
                    lg.append_as_leader(_batch(values, producer_id=7, producer_epoch=0, base_sequence=s), epoch)
                    seq[name] = s + count
                elif topic == "txn" and n % 5 == 0:      # a transaction, aborted or committed
                    pid = 20 + epoch * 100 + n
                    lg.append_as_leader(_batch(values, producer_id=pid, producer_epoch=0, base_sequence=0,
                                               is_transactional=True), epoch)
                    kind = ControlRecordType.ABORT if n % 10 == 0 else ControlRecordType.COMMIT
                    lg.append_as_leader(bytearray(build_control_batch(kind, producer_id=pid, producer_epoch=0,
                                                                      timestamp=TS)), epoch, COORDINATOR)
                else:
                    lg.append_as_leader(_batch(values), epoch)
            lg.update_high_watermark(lg.log_end_offset)
    _clean(m)
    m.shutdown()


def _clean(m: LogManager) -> None:
    """A few cleaner passes (the cleaner thread's work, done here so the outcome is decided)."""
    for _ in range(4):
        if not m.cleaner.clean_once():
            return


@dataclass
class Snapshot:
    """What a log serves, and what it derived, as comparable values."""

    records: dict                    # name -> [(offset, key, value)]
    batches: dict                    # name -> [(segment file, position, size, base, last)]
    start: dict
    end: dict
    producers: dict
    epochs: dict
    aborted: dict
    bad: list = field(default_factory=list)   # what was served that is not valid
    batch_epochs: dict = field(default_factory=dict)   # name -> [(base, last, PartitionLeaderEpoch)]


def observe(m: LogManager) -> Snapshot:
    snap = Snapshot({}, {}, {}, {}, {}, {}, {})
    for (topic, p), lg in sorted(m.logs.items()):
        name = f"{topic}-{p}"
        lg.update_high_watermark(lg.log_end_offset)
        # a read stops at the end of a segment that compaction emptied, as a fetch may: read on from
        # the next offset until the log end, as a consumer does
        data, offset = b"", lg.log_start_offset
        while offset < lg.log_end_offset:
            chunk = lg.read(offset, 1 << 30, FetchIsolation.LOG_END, True).records.read_bytes()
            last = None
            for last in batches(chunk):
                pass
            if last is None:
                break
            data += chunk
            offset = last.last_offset + 1
        recs, pos = [], 0
        for view in batches(data):
            size = view.size if hasattr(view, "size") else None
            if size is not None and not crc_valid(data, pos, size):
                snap.bad.append(f"{name}: checksum mismatch in the batch at offset {view.base_offset}")
            try:
                recs += [(r.offset, bytes(r.key or b""), bytes(r.value or b"")) for r in view.records()]
            except Exception as exc:  # noqa: BLE001 - anything undecodable that was served is the finding
                snap.bad.append(f"{name}: undecodable batch at {view.base_offset}: {exc}")
            pos += size or 0
        if pos != len(data):
            snap.bad.append(f"{name}: {len(data) - pos} bytes served that are not whole batches")
        snap.records[name] = recs
        snap.batches[name] = [(os.path.basename(s.log_path), i.position, i.size, i.base_offset, i.last_offset)
                              for s in lg.segments for i in s.batches()]
        snap.batch_epochs[name] = [(i.base_offset, i.last_offset, i.partition_leader_epoch)
                                   for s in lg.segments for i in s.batches()]
        snap.start[name], snap.end[name] = lg.log_start_offset, lg.log_end_offset
        snap.producers[name] = sorted((pid, e.producer_epoch, e.last_seq, e.last_data_offset)
                                      for pid, e in lg.producer_state_manager.producers.items())
        snap.epochs[name] = [tuple(e) for e in lg.leader_epoch_cache.entries]
        snap.aborted[name] = [(a.producer_id, a.first_offset) for a in lg.read(
            lg.log_start_offset, 1 << 30, FetchIsolation.TXN_COMMITTED, True).aborted_transactions or ()]
    return snap


def _mutate(path: str, mutation: str, rng: random.Random, lo: int = 0, hi: int | None = None) -> str:
    """Damage ``path`` (only bytes in [lo, hi) where that applies); returns what was done."""
    size = os.path.getsize(path)
    hi = size if hi is None else min(hi, size)
    if mutation == "delete":
        os.unlink(path)
        return "deleted"
    if mutation == "empty":
        open(path, "wb").close()
        return "emptied"
    if mutation == "extend":
        with open(path, "ab") as f:
            f.write(os.urandom(rng.randint(1, 200)))
        return "extended"
    if mutation == "random":
        with open(path, "wb") as f:
            f.write(os.urandom(max(size, rng.randint(1, 200))))
        return "replaced with random bytes"
    if hi <= lo:
        with open(path, "ab") as f:
            f.write(os.urandom(rng.randint(1, 64)))
        return "extended (nothing to change)"
    if mutation == "truncate":
        cut = rng.randrange(lo, hi)
        os.truncate(path, cut)
        return f"truncated to {cut}"
    at = rng.randrange(lo, hi)
    with open(path, "r+b") as f:
        if mutation == "flip":
            f.seek(at)
            b = f.read(1)[0]
            f.seek(at)
            f.write(bytes([b ^ (1 << rng.randrange(8))]))
            return f"bit flipped at {at}"
        n = min(rng.randint(1, 64), hi - at)
        f.seek(at)
        f.write(os.urandom(n) if mutation == "garbage" else bytes(n))
        return f"{n} bytes {'garbled' if mutation == 'garbage' else 'zeroed'} at {at}"


def _epochs_within(entries: list, start: int, end: int) -> list:
    """The pristine epochs as a log holding [start, end) must keep them (Kafka's truncations on
    load): none from the end on (an empty log keeps the one starting at its end), and the last one
    at or below the start moved to begin there."""
    kept = [(e, s) for e, s in entries if s < end or (end == start and s <= end)]
    below = [x for x in kept if x[1] <= start]
    return ([(below[-1][0], start)] if below else []) + [x for x in kept if x[1] > start]


def _hits_epoch_field(pristine_batches: list, damage_at: tuple, base: int) -> bool:
    """Whether the damage changed the PartitionLeaderEpoch (header bytes 12-15) of the batch at ``base``."""
    seg, at = damage_at
    return any(b[0] == seg and b[3] == base and b[1] + 12 <= at < b[1] + 16 for b in pristine_batches)


def _segment_end_riser(pristine: "Snapshot", part: str, damage_at: tuple) -> tuple | None:
    """(base, last, pristine epoch) of the batch whose PartitionLeaderEpoch the damage hit, if it is the last
    batch of its segment; else None."""
    seg, at = damage_at
    mine = [b for b in pristine.batches[part] if b[0] == seg]
    hit = [b for b in mine if b[1] + 12 <= at < b[1] + 16]
    if not hit or hit[0] is not max(mine, key=lambda b: b[1]):
        return None
    return next((e for e in pristine.batch_epochs[part] if e[0] == hit[0][3]), None)


def _with_epoch(snap: "Snapshot", part: str, batch: tuple) -> "Snapshot":
    """``snap`` with that batch's PartitionLeaderEpoch back at its pristine value."""
    fixed = dataclasses.replace(snap, batch_epochs=dict(snap.batch_epochs))
    fixed.batch_epochs[part] = [batch if b[0] == batch[0] else b for b in snap.batch_epochs[part]]
    return fixed


def _base_offset_shifted_within_gap(pristine_batches: list, damage_at: tuple, got: list, expect: list) -> bool:
    """Whether the damage changed one batch's BaseOffset (header bytes 0-7, outside the checksum)
    and all that differs is that batch's records served at offsets shifted by one amount, still
    between its neighbours: in a compacted log that is a gap moved, which no check of batches can
    see (Kafka neither). A jump the next batch falls back from is cut (LogSegment.recover)."""
    seg, at = damage_at
    hit = [b for b in pristine_batches if b[0] == seg and b[1] <= at < b[1] + 8]
    if not hit or len(got) != len(expect):
        return False
    first, last = hit[0][3], hit[0][4]
    differ = [i for i, (g, e) in enumerate(zip(got, expect)) if g != e]
    return bool(differ) and all(first <= expect[i][0] <= last and got[i][1:] == expect[i][1:] and
                                got[i][0] - expect[i][0] == got[differ[0]][0] - expect[differ[0]][0]
                                for i in differ)


def _epochs_fit(part: str, snap: Snapshot, expected: list) -> list:
    """Epochs of a compacted log that differ from the expected ones must still say the truth about
    every batch left. Where the cleaner removed an epoch's first batches, no file but the checkpoint
    knows where in that gap the epoch began: a rebuild puts it at the first surviving batch, and a
    checkpoint damaged into another offset of the same gap cannot be told from the true one (by
    Kafka neither). So: only expected epochs, starts ascending within the log, and each batch served
    (from the log start) answering to its own PartitionLeaderEpoch, the last one to the latest
    epoch: that puts each start in the gap its pristine start is in."""
    entries, start, end = snap.epochs[part], snap.start[part], snap.end[part]
    known = dict(expected)
    starts = [s for _, s in entries]
    if any(e not in known for e, _ in entries) or starts != sorted(set(starts)) or \
            any(s < start or (s >= end and not s == start == end) for s in starts):
        return [f"{part}: epochs {entries} do not fit the expected {expected} (log [{start}, {end}))"]
    served = [b for b in snap.batch_epochs[part] if b[1] >= start]
    for base, last, epoch in served:
        held = [e for e, s in entries if s <= max(base, start)][-1:]
        if held != [epoch]:
            return [f"{part}: epochs {entries} put the batch {base}-{last} of epoch {epoch} in epoch "
                    f"{held or None} (expected {expected})"]
    if served and entries[-1][0] != served[-1][2]:
        return [f"{part}: epochs {entries} end with another epoch than the last batch's {served[-1][2]}"]
    return []


def reference(pristine: str, work: str, name: str, start: int, end: int) -> Snapshot:
    """The pristine log dir with ``name`` cut to [start, end) by the ordinary paths (a follower's
    truncation, DeleteRecords' new log start): what a load that lost the tail or moved the start
    must derive too (producer state, aborted transactions), found another way than recovery."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    m = manager(work)
    try:
        m.startup(background=False)
        topic, _, p = name.rpartition("-")
        lg = m.get_log(topic, int(p))
        if start > lg.log_start_offset and start >= lg.log_end_offset:
            lg.truncate_fully_and_start_at(start)
        else:
            if end < lg.log_end_offset:
                lg.truncate_to(end)
            lg.update_high_watermark(lg.log_end_offset)
            if start > lg.log_start_offset:
                lg.maybe_increment_log_start_offset(start)
        _clean(m)
        return observe(m)
    finally:
        m.shutdown()
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class Outcome:
    case: str
    problems: list
    warnings: int
    truncated: bool


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):
        self.count += 1


def corrupt_and_check(pristine: str, pristine_snap: Snapshot, work: str, rng: random.Random,
                      limits: list | None = None) -> Outcome:
    limits = [] if limits is None else limits
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    kind = rng.choice(KINDS)
    clean = rng.random() < 0.5
    name = rng.choice(PARTITIONS)
    pdir = os.path.join(work, name)
    marker = os.path.join(work, checkpoint.CLEAN_SHUTDOWN_FILE)
    damage_at = None          # (segment file, position): log damage starts here
    rp_offset = pristine_snap.end[name]
    if not clean:
        os.unlink(marker)
        # a crash leaves the recovery point somewhere behind the log end
        rp_offset = rng.randint(0, pristine_snap.end[name])
        points = checkpoint.read_offsets(os.path.join(work, checkpoint.RECOVERY_POINT_CHECKPOINT))
        topic, _, p = name.rpartition("-")
        points[(topic, int(p))] = rp_offset
        checkpoint.write_offsets(os.path.join(work, checkpoint.RECOVERY_POINT_CHECKPOINT), points)
    mutation = rng.choice(MUTATIONS)
    if kind in LOG:
        segs = sorted(f for f in os.listdir(pdir) if f.endswith(".log"))
        if clean:
            # the clean load checks each segment from its last index entry to its end
            seg = rng.choice(segs)
            index = os.path.join(pdir, seg[:-4] + ".index")
            lo = 0
            if os.path.exists(index) and os.path.getsize(index) >= 8:
                with open(index, "rb") as f:
                    f.seek(os.path.getsize(index) // 8 * 8 - 8)
                    lo = int.from_bytes(f.read(8)[4:], "big")
        else:
            held = [b for b in pristine_snap.batches[name] if b[4] >= rp_offset]
            if not held:
                kind = "log-truncate"
                seg, lo = segs[-1], os.path.getsize(os.path.join(pdir, segs[-1]))
            else:
                first = held[0]
                seg = rng.choice(sorted({b[0] for b in held}))
                lo = first[1] if seg == first[0] else 0
        mutation = "truncate" if kind == "log-truncate" else rng.choice(("flip", "garbage", "zero"))
        path = os.path.join(pdir, seg)
        old_size = os.path.getsize(path)
        did = _mutate(path, mutation, rng, lo)
        if did.startswith("extended"):
            damage_at = (seg, old_size)
        elif mutation != "truncate":
            damage_at = (seg, int(did.rsplit(" ", 1)[1]))
        else:
            damage_at = (seg, os.path.getsize(path))
        target = f"{name}/{seg}"
    elif kind in DERIVED:
        if kind == "leader-epoch-checkpoint":
            files = ["leader-epoch-checkpoint"]
        else:
            files = sorted(f for f in os.listdir(pdir) if f.endswith(SUFFIX[kind]))
        if not files:
            return Outcome(f"{kind} of {name}: none to damage", [], 0, False)
        target = f"{name}/{rng.choice(files)}"
        did = _mutate(os.path.join(work, target), mutation, rng)
    elif kind == "marker":
        target = checkpoint.CLEAN_SHUTDOWN_FILE
        if clean:
            did = _mutate(marker, rng.choice(("garbage", "empty", "random", "extend")), rng)
        else:
            did = "absent"
    else:
        target = kind
        path = os.path.join(work, kind)
        if not os.path.exists(path):
            checkpoint.write_offsets(path, {})
        did = _mutate(path, mutation, rng)
    case = f"{target}: {did} ({'clean' if clean else f'unclean, recovery point {rp_offset}'})"

    handler = _Warnings()
    logging.getLogger("kafka_compat.storage").addHandler(handler)
    storage_log = logging.getLogger("kafka_compat.storage")
    storage_log.setLevel(logging.WARNING)
    propagate, storage_log.propagate = storage_log.propagate, False   # counted here, not printed
    problems = []
    m = manager(work)
    try:
        try:
            m.startup(background=False)
            _clean(m)
            snap = observe(m)
        except Exception as exc:  # noqa: BLE001 - a crash is the finding
            return Outcome(case, [f"load failed: {type(exc).__name__}: {exc}"], handler.count, False)
        problems += snap.bad
        truncated = False
        for part in PARTITIONS:
            want = pristine_snap.records[part]
            start = snap.start[part]
            # a start inside a batch serves the whole batch; a client skips what is below its offset
            got = [r for r in snap.records[part] if r[0] >= start]
            expect = [r for r in want if r[0] >= start][: len(got)]
            if got != expect and kind in LOG and part == name and _base_offset_shifted_within_gap(
                    pristine_snap.batches[part], damage_at, got, expect):
                limits.append(f"{case}: {part} a BaseOffset flipped within a compaction gap")
                continue
            if got != expect:
                problems.append(f"{part}: served records differ from the pristine ones from offset {start}")
                continue
            lost = [r for r in want if r[0] >= start][len(got):]
            if kind in LOG and part == name:
                truncated = bool(lost)
                seg, at = damage_at
                before = [b for b in pristine_snap.batches[part]
                          if (b[0], b[1] + b[2]) <= (seg, at) or b[0] < seg]
                keep_to = before[-1][4] + 1 if before else 0
                if snap.end[part] < min(keep_to, pristine_snap.end[part]):
                    problems.append(f"{part}: truncated to {snap.end[part]}, below the damage at {seg}:{at} "
                                    f"(offsets below {keep_to} were valid)")
            elif lost and not (kind == checkpoint.LOG_START_OFFSET_CHECKPOINT):
                problems.append(f"{part}: {len(lost)} records lost after damage to {target}")
            # the leader epochs, whatever was damaged: truncated to what the log holds, never
            # invented, none lost for a batch that is left
            expected = _epochs_within(pristine_snap.epochs[part], start, snap.end[part])
            last = snap.batch_epochs[part][-1:]
            if kind in LOG and part == name and last and snap.epochs[part] == expected + [(last[0][2], last[0][0])] \
                    and _hits_epoch_field(pristine_snap.batches[part], damage_at, last[0][0]):
                # the PartitionLeaderEpoch of the log's last batch lies outside the checksum, and a
                # rise there looks like a new leader's first batch: Kafka takes it as it is too
                limits.append(f"{case}: {part} the last batch's PartitionLeaderEpoch flipped to {last[0][2]}")
            elif snap.epochs[part] != expected:
                if not part.startswith("kv"):
                    problems.append(f"{part}: epochs {snap.epochs[part]} != {expected}, the pristine ones "
                                    f"within [{start}, {snap.end[part]})")
                elif not (found := _epochs_fit(part, snap, expected)):
                    if any(s < dict(expected).get(e, -1) for e, s in snap.epochs[part]):
                        limits.append(f"{case}: {part} epochs {snap.epochs[part]} for {expected}, a start "
                                      f"moved earlier within a compaction gap")
                elif kind in LOG and part == name and (riser := _segment_end_riser(
                        pristine_snap, part, damage_at)) is not None and not _epochs_fit(
                        part, _with_epoch(snap, part, riser), expected):
                    # the PartitionLeaderEpoch of a segment's last batch lies outside the checksum; the fall
                    # that gives it away is in the next segment, which recovers on its own. The epoch cache
                    # takes the fall as Kafka's assign does (it is right); the batch keeps its field
                    limits.append(f"{case}: {part} the PartitionLeaderEpoch of the batch at {riser[0]}, last in "
                                  f"its segment, flipped")
                else:
                    problems += found
            if lost or start != pristine_snap.start[part]:
                # what survived must derive what the same log cut by the ordinary paths derives
                ref = reference(pristine, work + "-ref", part, start, snap.end[part])
                for what in ("producers", "aborted"):
                    if getattr(snap, what)[part] != getattr(ref, what)[part]:
                        problems.append(f"{part}: {what} differ from the pristine log's cut to "
                                        f"[{start}, {snap.end[part]}): {getattr(snap, what)[part]} != "
                                        f"{getattr(ref, what)[part]}")
            else:
                if kind == "txnindex" and part == name and mutation != "extend" and \
                        snap.aborted[part] != pristine_snap.aborted[part]:
                    # entries gone from a .txnindex, or changed to other plausible ones (the sanity check
                    # refuses the rest), cannot be told from the truth without scanning every batch at
                    # load; Kafka does not look either (docs/storage.md says so)
                    snap.aborted[part] = pristine_snap.aborted[part]
                    limits.append(case)
                for what in ("producers", "aborted"):
                    if getattr(snap, what)[part] != getattr(pristine_snap, what)[part]:
                        problems.append(f"{part}: {what} differ from the pristine ones: "
                                        f"{getattr(snap, what)[part]} != {getattr(pristine_snap, what)[part]}")
        for (topic, p), lg in m.logs.items():
            for r in rng.sample(snap.records[f"{topic}-{p}"], min(3, len(snap.records[f"{topic}-{p}"]))):
                got = lg.read(r[0], 1, FetchIsolation.LOG_END, True).records.read_bytes()
                views = list(batches(got))
                if not views or not views[0].base_offset <= r[0] <= views[0].last_offset:
                    problems.append(f"{topic}-{p}: a read at {r[0]} did not start with the batch holding it")
            end = lg.log_end_offset
            lg.append_as_leader(_batch([(b"after", b"damage")]), 5)
            tail = lg.read(end, 1 << 20, FetchIsolation.LOG_END, True).records.read_bytes()
            if [bytes(r.value) for v in batches(tail) for r in v.records()] != [b"damage"]:
                problems.append(f"{topic}-{p}: an append after loading did not read back")
        return Outcome(case, problems, handler.count, truncated)
    finally:
        storage_log.removeHandler(handler)
        storage_log.propagate = propagate
        m.shutdown()


def campaign(count: int, seed: int, root: str | None = None, progress=None) -> dict:
    """Run ``count`` corruptions; returns the figures and every case that went wrong."""
    rng = random.Random(seed)
    if root is None and os.path.isdir("/dev/shm"):
        root = "/dev/shm"   # thousands of copies of a small log dir: memory, not the shared disk
    base = tempfile.mkdtemp(prefix="corruption-", dir=root)
    try:
        pristine = os.path.join(base, "pristine")
        write_pristine(pristine, rng)
        m = manager(pristine)
        m.startup(background=False)
        pristine_snap = observe(m)
        m.shutdown()
        os.unlink(os.path.join(pristine, checkpoint.REPLICATION_OFFSET_CHECKPOINT)) \
            if os.path.exists(os.path.join(pristine, checkpoint.REPLICATION_OFFSET_CHECKPOINT)) else None
        assert not pristine_snap.bad, pristine_snap.bad
        failures, warned, truncated, kinds, limits = [], 0, 0, {}, []
        t0 = time.monotonic()
        for i in range(count):
            out = corrupt_and_check(pristine, pristine_snap, os.path.join(base, "work"), rng, limits)
            kind = out.case.split(":")[0].split("/")[-1].split(".")[-1]
            kinds[kind] = kinds.get(kind, 0) + 1
            warned += out.warnings > 0
            truncated += out.truncated
            if out.problems:
                failures.append((out.case, out.problems))
            if progress:
                progress(i, out)
        return {"corruptions": count, "failures": failures, "with_warnings": warned, "log_truncated": truncated,
                "seconds": round(time.monotonic() - t0, 1), "by_file": kinds, "known_limits": limits}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description="damage log dir files, reload, check what is served")
    ap.add_argument("--corruptions", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    # `timeout` and kill send SIGTERM: leave through campaign()'s finally, which removes the copies
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def progress(i, out):
        if args.verbose or out.problems:
            print(f"{i:5d} {out.case}{': ' + '; '.join(out.problems) if out.problems else ''}", flush=True)
    result = campaign(args.corruptions, args.seed, progress=progress)
    print(f"{result['corruptions']} corruptions in {result['seconds']} s: {len(result['failures'])} failed, "
          f"{result['with_warnings']} loads warned, {result['log_truncated']} logs truncated, "
          f"{len(result['known_limits'])} hit a known limit (a .txnindex losing entries, an epoch start "
          f"or a batch's offsets moved within a compaction gap); "
          f"by file: {result['by_file']}")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
