"""Loading a partition directory: leftovers of interrupted work, segment files, recovery.

Kafka's LogLoader, in short:
- ``.deleted`` and ``.cleaned`` files are leftovers and go; a ``.swap`` segment is a
  finished cleaning whose swap was interrupted, so it replaces the segments it covers;
- without a clean shutdown every segment from the one holding the recovery point on is
  recovered (each batch checked, indexes rebuilt, the file cut at the first invalid byte,
  later segments dropped); otherwise only segments whose indexes fail their checks are.
"""

from __future__ import annotations

import logging
import os
import re

from .index import CorruptIndexError
from .log_config import LogConfig
from .producer_state import snapshot_offsets_in
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_paths,
    txn_index_path,
)

log = logging.getLogger(__name__)

_INDEX_KINDS = frozenset((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)(\.swap|\.cleaned|\.deleted)?$")


class LoadedLog:
    """What the loader hands to LocalLog: segments in offset order and the offsets it settled on."""

    def __init__(self, segments, next_offset, recovery_point, log_start_offset, truncated_bytes, dropped,
                 recovered=(), snapshot_offsets=()):
        self.segments = segments
        #: the producer snapshots found (the directory is listed once per load)
        self.snapshot_offsets = list(snapshot_offsets)
        #: base offsets of the segments recover() rebuilt (their transaction indexes are empty now)
        self.recovered = list(recovered)
        self.next_offset = next_offset
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.truncated_bytes = truncated_bytes
        self.dropped_segments = dropped


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _scan(directory: str):
    """Return ({base: present suffixes}, [swap base offsets], [snapshot offsets]) after dropping
    leftovers; a missing directory is made (a new log)."""
    found: dict[int, set] = {}
    swaps = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)
        return found, swaps, []
    for name in sorted(names):
        m = _SEGMENT_FILE.match(name)
        if not m:
            continue
        base, kind, extra = int(m.group(1)), m.group(2), m.group(3)
        if extra in (DELETED_SUFFIX, CLEANED_SUFFIX):
            _remove(os.path.join(directory, name))
        elif extra == SWAP_SUFFIX:
            if kind == LOG_SUFFIX:
                swaps.append(base)
        else:
            found.setdefault(base, set()).add(kind)
    return found, swaps, snapshot_offsets_in(names)


def _complete_swaps(directory: str, config: LogConfig, found: dict, swaps: list) -> set:
    """Put each interrupted swap in place; returns the base offsets of the cleaned segments."""
    for base in swaps:
        seg = LogSegment(directory, base, config, suffix=SWAP_SUFFIX, active=False)
        aborted = seg.txn_index.all_aborted_txns()   # the cleaner copied them; recovery would drop them
        seg.recover()
        end = seg.next_offset
        for txn in aborted:
            if txn.last_offset < end:
                seg.txn_index.append(txn)
        seg.close()
        for old in [b for b in found if base <= b < max(end, base + 1)]:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                _remove(os.path.join(directory, f"{old:020d}{suffix}"))
            del found[old]
        for path in segment_paths(directory, base, SWAP_SUFFIX) + (txn_index_path(directory, base, SWAP_SUFFIX),):
            if os.path.exists(path):
                os.replace(path, path[: -len(SWAP_SUFFIX)])
        found[base] = {LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX}
        log.info("%s: completed the interrupted swap of segment %d", directory, base)
    return set(swaps)


def load(directory: str, config: LogConfig, *, recovery_point: int, log_start_offset: int,
         had_clean_shutdown: bool) -> LoadedLog:
    found, swaps, snapshots = _scan(directory)
    cleaned = _complete_swaps(directory, config, found, swaps)
    for base, kinds in list(found.items()):
        if LOG_SUFFIX not in kinds:   # orphan indexes
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                _remove(os.path.join(directory, f"{base:020d}{suffix}"))
            del found[base]

    bases = sorted(found)
    segments: list[LogSegment] = []
    truncated = 0
    dropped = []
    recovered: list[int] = []
    recover_from = None
    if not had_clean_shutdown and bases:
        # the segment holding the recovery point, and everything after it
        below = [b for b in bases if b <= recovery_point]
        recover_from = below[-1] if below else bases[0]
    for i, base in enumerate(bases):
        kinds = found[base]
        seg = LogSegment(directory, base, config, active=False, lazy=True)
        seg.txn_index_on_disk = TXN_INDEX_SUFFIX in kinds
        seg.cleaned = base in cleaned
        needs_recovery = recover_from is not None and base >= recover_from
        if not needs_recovery and seg.size and (INDEX_SUFFIX not in kinds or TIME_INDEX_SUFFIX not in kinds):
            log.warning("%s: rebuilding the indexes of segment %d: index files missing", directory, base)
            needs_recovery = True   # an empty segment's indexes are created at their first entry
        if not seg.size and not kinds & _INDEX_KINDS and (
                not needs_recovery or (i == len(bases) - 1 and not seg.blocks)):
            # empty, no index files (and, to recover, last and without blocks reserved past its end):
            # nothing to check, rebuild or cut; next_offset is its base offset. Most partitions of a
            # broker with many are like this, and this spares each of them its index objects.
            needs_recovery = False
        elif not needs_recovery:
            try:
                seg.sanity_check()
            except CorruptIndexError as exc:
                log.warning("%s: rebuilding indexes: %s", directory, exc)
                needs_recovery = True
        if needs_recovery:
            recovered.append(base)
            limit = bases[i + 1] if i + 1 < len(bases) else None
            cut = seg.recover(limit)
            short = not cut and limit is not None and seg.next_offset < limit and not seg.gaps_possible()
            if short:
                # whole batches, but fewer than a roll left (the file lost its tail at a batch
                # boundary): the offsets up to the next segment are gone, so is what follows
                log.warning("%s: ends at offset %d, below the next segment's base offset %d; "
                            "the later segments are dropped", seg.log_path, seg.next_offset, limit)
            if cut or short:
                truncated += cut
                os.fsync(seg.fd)
                segments.append(seg)
                for later in bases[i + 1:]:
                    for path in segment_paths(directory, later):
                        _remove(path)
                    _remove(os.path.join(directory, f"{later:020d}{TXN_INDEX_SUFFIX}"))
                    dropped.append(later)
                break
        segments.append(seg)

    if segments:
        segments[-1].make_active()
        next_offset = segments[-1].next_offset
        if next_offset < log_start_offset:
            # everything on disk is below the checkpointed start: start afresh there
            for seg in segments:
                seg.delete()
            segments = []
    if not segments:
        start = max(log_start_offset, 0)
        segments = [LogSegment(directory, start, config)]
        next_offset = start
    log_start_offset = max(log_start_offset, segments[0].base_offset)
    if recover_from is not None or truncated or dropped:
        recovery_point = next_offset
    recovery_point = min(max(recovery_point, segments[0].base_offset), next_offset)
    kept = {s.base_offset for s in segments}
    recovered = [b for b in recovered if b in kept]
    return LoadedLog(segments, next_offset, recovery_point, log_start_offset, truncated, dropped, recovered,
                     snapshots)
