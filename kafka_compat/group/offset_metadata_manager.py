"""OffsetMetadataManager: the committed offsets of every group, of either kind.

Offsets live apart from membership, as in Kafka: a group id may hold offsets
with no group state at all (a "simple" group that only commits), and a group
may change kind (classic to consumer and back) keeping its offsets. The group
itself only says whether a commit, fetch or delete is valid and when its
offsets may expire (the `Group` interface). A TxnOffsetCommit's offsets are
written at once but wait, per producer, for the transaction's marker: they
count from a COMMIT and vanish at an ABORT (Kafka's pending transactional offsets).
"""
from __future__ import annotations

import logging

from ..clock import now_ms
from ..protocol.errors import ErrorCode
from .coordinator_records import (
    GROUP_METADATA_TOPIC_NAME,
    OffsetAndMetadata,
    offset_commit_key,
    offset_commit_value,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# How append failures reach committers (Kafka's OffsetMetadataManager conversions).
_STORE_OFFSET_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


class OffsetMetadataManager:
    def __init__(self, config, runtime, groups, on_commit, clock=now_ms):
        """`runtime` writes records; `groups` is the GroupMetadataManager, asked to validate;
        `on_commit(group, member_id)` learns of each valid commit (a classic member's proof of life)."""
        self.runtime = runtime
        self.groups = groups
        self.on_commit = on_commit
        self.clock = clock
        self.metadata_max_bytes = config["offset.metadata.max.bytes"]
        self.retention_ms = config["offsets.retention.minutes"] * 60 * 1000
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.offset_commit_count = 0        # offsets stored since startup (Kafka's offset-commit-count)
        # producer id -> group id -> offsets of its open transaction
        self.pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}

    # ------------------------------------------------------------ OffsetCommit
    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation_or_epoch: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata], api_version: int, callback) -> None:
        """Validate, append the commits in one batch (they land atomically), cache them once durable,
        then ``callback({(topic, partition): error})``."""
        def all_(code):
            callback({tp: code for tp in offsets})

        group = self.groups.get_group(group_id)
        if group is None:
            if generation_or_epoch >= 0:
                all_(ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION)
                return
            # No group management: a "simple" group that only stores offsets.
            log.info("creating simple consumer group %s via manual offset commit", group_id)
            group = self.groups.get_or_maybe_create_classic_group(group_id, True)
        error = group.validate_offset_commit(member_id, instance_id, generation_or_epoch, api_version)
        if error is not None:
            all_(error)
            return
        self.on_commit(group, member_id)
        ok, errors, records = self._offset_records(group_id, offsets)
        if not ok:
            callback(errors)
            return

        def stored(error: int) -> None:
            error = _STORE_OFFSET_ERRORS.get(error, error)
            if error == ErrorCode.NONE and not group.is_dead:
                self.offsets.setdefault(group_id, {}).update(ok)
                self.offset_commit_count += len(ok)
            errors.update((tp, error) for tp in ok)
            callback(errors)

        self.runtime.append(group_id, records, stored)

    def _offset_records(self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]):
        """(offsets to write, {partition: OFFSET_METADATA_TOO_LARGE} for the rest, their records)."""
        limit = self.metadata_max_bytes
        ok = {tp: o for tp, o in offsets.items() if o.metadata is None or len(o.metadata) <= limit}
        errors = {tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets if tp not in ok}
        records = [(offset_commit_key(group_id, t, p), offset_commit_value(o)) for (t, p), o in ok.items()]
        return ok, errors, records

    # ------------------------------------------------------------ TxnOffsetCommit
    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           instance_id: str | None, generation_or_epoch: int,
                           offsets: dict[TopicPartition, OffsetAndMetadata], callback, api_version: int = 5) -> None:
        """Validate, append as the producer's transactional batch, hold them pending until its marker.
        Before TxnOffsetCommit v6 (KIP-1319) a client knows neither GROUP_ID_NOT_FOUND nor STALE_MEMBER_EPOCH
        and is told ILLEGAL_GENERATION instead, as Kafka's OffsetMetadataManager does."""
        def all_(code):
            if api_version < 6 and code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.STALE_MEMBER_EPOCH):
                code = ErrorCode.ILLEGAL_GENERATION
            callback({tp: code for tp in offsets})

        group = self.groups.get_group(group_id)
        if group is None:
            if generation_or_epoch >= 0:
                all_(ErrorCode.GROUP_ID_NOT_FOUND)
                return
            group = self.groups.get_or_maybe_create_classic_group(group_id, True)
        error = group.validate_offset_commit(member_id, instance_id, generation_or_epoch, 9, transactional=True)
        if error is not None:
            all_(error)
            return
        ok, errors, records = self._offset_records(group_id, offsets)
        if not ok:
            callback(errors)
            return
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {}).update(ok)

        def stored(error: int) -> None:
            error = _STORE_OFFSET_ERRORS.get(error, error)
            if error != ErrorCode.NONE:
                held = self.pending.get(producer_id, {}).get(group_id, {})
                for tp in ok:
                    held.pop(tp, None)
                self._forget_empty(producer_id, group_id)
            errors.update((tp, error) for tp in ok)
            callback(errors)

        self.runtime.append(group_id, records, stored, producer=(producer_id, producer_epoch))

    def complete_txn(self, producer_id: int, offsets_partitions, committed: bool) -> None:
        """A marker reached these `__consumer_offsets` partitions: the producer's offsets there count
        (COMMIT) or vanish (ABORT)."""
        groups = self.pending.get(producer_id)
        if not groups:
            return
        partitions = set(offsets_partitions)
        for group_id in [g for g in groups if self.runtime.partition_for(g) in partitions]:
            held = groups.pop(group_id)
            if committed and held:
                self.offsets.setdefault(group_id, {}).update(held)
        if not groups:
            del self.pending[producer_id]

    def unstable_partitions(self, group_id: str, partitions) -> set[TopicPartition]:
        """Of `partitions`, those with a transactional commit still waiting for its marker."""
        held = [groups[group_id] for groups in self.pending.values() if group_id in groups]
        return {tp for tp in partitions if any(tp in h for h in held)} if held else set()

    def _forget_empty(self, producer_id: int, group_id: str) -> None:
        groups = self.pending.get(producer_id)
        if groups is not None and not groups.get(group_id, True):
            del groups[group_id]
        if groups is not None and not groups:
            del self.pending[producer_id]

    # ------------------------------------------------------------ OffsetFetch
    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[int, list[tuple[str, int, OffsetAndMetadata | None]]]:
        """(group error, [(topic, partition, committed or None)]); `partitions` None means all of them."""
        group = self.groups.get_group(group_id)
        if group is not None and not group.is_dead:
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error is not None:
                return error, []
        committed = self.offsets.get(group_id, {})
        if group is None and not committed or group is not None and group.is_dead:
            return ErrorCode.NONE, [(t, p, None) for t, p in partitions or ()]
        if partitions is None:
            return ErrorCode.NONE, [(t, p, o) for (t, p), o in committed.items()]
        return ErrorCode.NONE, [(t, p, committed.get((t, p))) for t, p in partitions]

    def has_offsets(self, group_id: str) -> bool:
        """Committed offsets, or offsets pending in a transaction (Kafka's hasOffsets counts both)."""
        return bool(self.offsets.get(group_id)) or any(group_id in groups for groups in self.pending.values())

    # ------------------------------------------------------------ deleting
    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                       ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: partitions of topics the group consumes are refused (GROUP_SUBSCRIBED_TO_TOPIC)."""
        group = self.groups.get_group(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        error = group.validate_offset_delete()
        if error is not None:
            return error, {}
        if group.is_empty:
            eligible, errors = list(partitions), {}
        else:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible}
        if eligible:
            self._remove(group_id, eligible)
            errors.update((tp, ErrorCode.NONE) for tp in eligible)
        return ErrorCode.NONE, errors

    def delete_all_offsets(self, group_id: str, records: list) -> int:
        """DeleteGroups: tombstones for every offset of the group go into `records`."""
        removed = self.offsets.pop(group_id, {})
        records.extend((offset_commit_key(group_id, t, p), None) for (t, p) in removed)
        return len(removed)

    def _remove(self, group_id: str, partitions) -> int:
        committed = self.offsets.get(group_id, {})
        removed = [tp for tp in partitions if committed.pop(tp, None) is not None]
        if not committed:
            self.offsets.pop(group_id, None)
        if removed and self.runtime.topic_exists():
            # As Kafka, not waiting for success: a lost tombstone is written again next round.
            self.runtime.append(group_id, [(offset_commit_key(group_id, t, p), None) for t, p in removed],
                                lambda error: None)
        return len(removed)

    def on_partitions_deleted(self, partitions: list[TopicPartition]) -> int:
        """A topic was deleted: forget the offsets every group committed for it; empty groups left
        without offsets go too."""
        partitions = [tp for tp in partitions if tp[0] != GROUP_METADATA_TOPIC_NAME]
        removed = 0
        for group_id in list(self.offsets):
            if self.runtime.is_group_loading(group_id):
                continue
            n = self._remove(group_id, partitions)
            if n:
                removed += n
                self.groups.maybe_delete_group(group_id, self.has_offsets(group_id))
        return removed

    # ------------------------------------------------------------ expiration
    def cleanup_expired_offsets(self, group_id: str, now: int) -> tuple[int, bool]:
        """Drop the group's expired offsets (tombstones written); (how many, whether none are left).

        An explicit expire timestamp (OffsetCommit v2-4) wins; otherwise the group says from
        when retention counts, and offsets of topics it still consumes never expire.
        """
        committed = self.offsets.get(group_id, {})
        group = self.groups.get_group(group_id)
        base_of = group.offset_expiration_base() if group is not None else (lambda o: o.commit_timestamp)
        if base_of is None:
            return 0, not committed
        check_subscription = group is not None and not group.is_empty
        gone = []
        for tp, o in committed.items():
            if check_subscription and group.is_subscribed_to_topic(tp[0]):
                continue
            if now >= o.expire_timestamp if o.expire_timestamp >= 0 else now - base_of(o) >= self.retention_ms:
                gone.append(tp)
        removed = self._remove(group_id, gone) if gone else 0
        return removed, not self.has_offsets(group_id)

    def expire_offsets(self) -> int:
        """The `offsets.retention.check.interval.ms` task: expire offsets; empty groups left without
        offsets are deleted."""
        now = self.clock()
        removed = 0
        for group_id in set(self.offsets) | set(self.groups.group_ids()):
            if self.runtime.is_group_loading(group_id):
                continue
            n, none_left = self.cleanup_expired_offsets(group_id, now)
            removed += n
            if none_left:
                self.groups.maybe_delete_group(group_id, False)
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    # ------------------------------------------------------------ loading
    def replay(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None) -> None:
        if value is None:
            committed = self.offsets.get(group_id)
            if committed is not None:
                committed.pop((topic, partition), None)
        else:
            self.offsets.setdefault(group_id, {})[(topic, partition)] = value

    def replay_pending(self, producer_id: int, group_id: str, topic: str, partition: int,
                       value: OffsetAndMetadata | None) -> None:
        """An offset of a transaction still open at the end of the log: it waits for the marker."""
        held = self.pending.setdefault(producer_id, {}).setdefault(group_id, {})
        if value is None:
            held.pop((topic, partition), None)
            self._forget_empty(producer_id, group_id)
        else:
            held[(topic, partition)] = value

    def unload(self, group_ids) -> None:
        for group_id in group_ids:
            self.offsets.pop(group_id, None)
            for producer_id in list(self.pending):
                self.pending[producer_id].pop(group_id, None)
                self._forget_empty(producer_id, group_id)
