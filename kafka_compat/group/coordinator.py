"""GroupCoordinator: the group APIs' one entry point (Kafka's GroupCoordinatorService and shard).

It checks that this broker coordinates the group and that its partition has
loaded, then hands the request to whoever owns it: the classic protocol, the
consumer protocol (which also takes classic members of consumer groups), the
OffsetMetadataManager for offsets, the GroupMetadataManager for the rest.
Loading is per `__consumer_offsets` partition: `on_election(index)` when this
broker starts leading one, `on_resignation(index)` when it stops.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass, field

from ..clock import now_ms
from ..protocol.errors import ErrorCode, KafkaError
from .classic.classic_group import ClassicGroup, JoinResult, SyncResult
from .classic.classic_group_protocol import ClassicGroupProtocol
from .coordinator_records import (
    GROUP_METADATA_TOPIC_NAME,
    STREAMS_RECORD_TYPES,
    ConsumerRecordKey,
    CoordinatorRecord,
    GroupKey,
    OffsetKey,
    read_consumer_value,
    read_group_value,
    read_key,
    read_offset_value,
)
from .coordinator_runtime import CoordinatorRuntime
from .group_config import GroupConfigManager
from .group_metadata_manager import GroupMetadataManager, classic_group_from_value
from .modern.consumer_group import ConsumerGroup
from .modern.consumer_group_protocol import ConsumerGroupProtocol, HeartbeatResult
from .modern.share.share_group import ShareGroup
from .modern.share.share_group_protocol import ShareGroupProtocol
from .offset_metadata_manager import OffsetMetadataManager
from .streams.records import replay as replay_streams_record
from .streams.streams_group import StreamsGroup
from .streams.streams_group_protocol import StreamsGroupProtocol, StreamsHeartbeat, StreamsHeartbeatResult

log = logging.getLogger(__name__)
E = ErrorCode

# APIs that accept the empty group id (for old clients that commit and describe with it).
_EMPTY_GROUP_ID_OK = {"OffsetCommit", "OffsetFetch", "DescribeGroups", "DeleteGroups"}


@dataclass
class GroupSummary:
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: list = field(default_factory=list)  # MemberSummary


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupCoordinator:
    def __init__(self, config, broker_id: int, replica_manager, metadata_cache, controller, clock=now_ms,
                 offsets_replication_factor: int = 1, group_configs: GroupConfigManager | None = None):
        """``offsets_replication_factor``: what `__consumer_offsets` is created with (a cluster gives
        offsets.topic.replication.factor; a single node 1). ``group_configs``: each group's own configs
        (the GROUP config resource), kept by the broker's dynamic config manager."""
        self.group_configs = group_configs if group_configs is not None else GroupConfigManager(config)
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.clock = clock
        self.runtime = CoordinatorRuntime(config, replica_manager, metadata_cache, controller,
                                          offsets_replication_factor)
        self.groups = GroupMetadataManager(self.runtime, clock)
        self.classic = ClassicGroupProtocol(config, broker_id, self.groups, self.validate_group_status)
        self.consumer = ConsumerGroupProtocol(config, self.groups, self.classic, metadata_cache, clock,
                                              self.group_configs)
        self.share = ShareGroupProtocol(config, self.groups, metadata_cache, clock, self.group_configs)
        # called with a share group's id once DeleteGroups removed it (its share partitions' state goes too)
        self.share_group_deleted: list = []
        self.streams = StreamsGroupProtocol(config, self.groups, metadata_cache, self._create_internal_topics, clock,
                                            self.group_configs)
        self.controller = controller
        self._creating_internal: set[str] = set()
        self.offsets = OffsetMetadataManager(config, self.runtime, self.groups, self._on_offset_commit, clock)
        self.retention_check_interval_ms = config["offsets.retention.check.interval.ms"]
        self.active = False
        self._expiration: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        self.classic.startup()
        self.active = True
        for index in self.runtime.led_partitions():
            self.on_election(index)
        self._schedule_expiration()

    async def shutdown(self) -> None:
        self.active = False
        if self._expiration is not None:
            self._expiration.cancel()
        await self.runtime.shutdown()
        for group in list(self.groups.groups.values()):
            self._unload(group)
        self.groups.groups.clear()
        self.consumer.shutdown()
        self.share.shutdown()
        self.streams.shutdown()
        self.classic.shutdown()

    async def wait_loaded(self) -> None:
        await self.runtime.wait_loaded()

    def _schedule_expiration(self) -> None:
        loop = asyncio.get_running_loop()
        self._expiration = loop.call_later(self.retention_check_interval_ms / 1000, self._expire_tick)

    def _expire_tick(self) -> None:
        try:
            self.offsets.expire_offsets()
        except Exception:
            log.exception("offset expiration failed")
        if self.active:
            self._schedule_expiration()

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def find_coordinator(self, group_id: str) -> tuple[int, int]:
        """(error, broker id) of the coordinator of ``group_id``: the leader of its offsets partition."""
        if not self.active or not self.runtime.ensure_topic():
            return E.COORDINATOR_NOT_AVAILABLE, -1
        state = self.metadata_cache.partition_state(GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))
        if state is None or state.leader < 0 or not self.metadata_cache.is_alive(state.leader):
            return E.COORDINATOR_NOT_AVAILABLE, -1
        return E.NONE, state.leader

    def validate_group_status(self, group_id: str | None, api: str) -> int | None:
        """INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR,
        else None."""
        if group_id is None or (not group_id and api not in _EMPTY_GROUP_ID_OK):
            return E.INVALID_GROUP_ID
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        if self.runtime.is_group_loading(group_id):
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if not self.runtime.is_group_local(group_id):
            # the topic comes into being on first use; a single node then leads the group's partition
            if self.runtime.topic_exists() or not self.runtime.ensure_topic() \
                    or not self.runtime.is_group_local(group_id):
                return E.NOT_COORDINATOR
        return None

    # ------------------------------------------------------------ classic protocol
    def handle_join_group(self, group_id, member_id, group_instance_id, require_known_member_id,
                          support_skip_assignment, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                          protocol_type, protocols, callback, reason=None) -> None:
        group = self.groups.get_group(group_id) if self.validate_group_status(group_id, "JoinGroup") is None \
            else None
        if isinstance(group, ConsumerGroup):
            if not self.classic.min_session_timeout_ms <= session_timeout_ms <= self.classic.max_session_timeout_ms:
                callback(JoinResult(E.INVALID_SESSION_TIMEOUT, member_id))
                return
            self.consumer.classic_join(group, member_id, group_instance_id, require_known_member_id, client_id,
                                       client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                       protocols, callback)
            return
        self.classic.handle_join_group(group_id, member_id, group_instance_id, require_known_member_id,
                                       support_skip_assignment, client_id, client_host, rebalance_timeout_ms,
                                       session_timeout_ms, protocol_type, protocols, callback, reason)

    def handle_sync_group(self, group_id, generation_id, member_id, protocol_type, protocol_name, instance_id,
                          assignments, callback) -> None:
        group = self.groups.get_group(group_id) if self.validate_group_status(group_id, "SyncGroup") is None \
            else None
        if isinstance(group, ConsumerGroup):
            callback(self.consumer.classic_sync(group, generation_id, member_id, protocol_type, protocol_name,
                                                instance_id))
            return
        self.classic.handle_sync_group(group_id, generation_id, member_id, protocol_type, protocol_name,
                                       instance_id, assignments, callback)

    def handle_heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> int:
        group = self.groups.get_group(group_id) if self.validate_group_status(group_id, "Heartbeat") is None \
            else None
        if isinstance(group, ConsumerGroup):
            return self.consumer.classic_heartbeat(group, member_id, instance_id, generation_id)
        return self.classic.handle_heartbeat(group_id, member_id, instance_id, generation_id)

    def handle_leave_group(self, group_id: str, leaving: list) -> tuple[int, list]:
        group = self.groups.get_group(group_id) if self.validate_group_status(group_id, "LeaveGroup") is None \
            else None
        if isinstance(group, ConsumerGroup):
            return E.NONE, self.consumer.classic_leave(group, leaving)
        return self.classic.handle_leave_group(group_id, leaving)

    # ------------------------------------------------------------ consumer protocol
    def handle_consumer_group_heartbeat(self, api_version: int, group_id: str, member_id: str, member_epoch: int,
                                        instance_id, rack_id, rebalance_timeout_ms, subscribed_topic_names,
                                        subscribed_topic_regex, server_assignor, owned, client_id: str,
                                        client_host: str, callback) -> None:
        error = self.validate_group_status(group_id, "ConsumerGroupHeartbeat")
        if error is not None and error != E.INVALID_GROUP_ID:
            callback(HeartbeatResult(error, None, member_id or None, member_epoch))
            return
        self.consumer.heartbeat(api_version, group_id or "", member_id, member_epoch, instance_id, rack_id,
                                rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex,
                                server_assignor, owned, client_id, client_host, callback)

    def handle_consumer_group_describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        """(error, message, group)."""
        return self._describe(group_id, "ConsumerGroupDescribe", ConsumerGroup, "consumer")

    def _describe(self, group_id: str, api: str, kind: type, name: str) -> tuple[int, str | None, object]:
        """(error, message, group) for the Consumer, Streams and ShareGroupDescribe: the group if it is a
        live group of `kind`."""
        error = self.validate_group_status(group_id, api)
        if error is not None:
            return error, None, None
        group = self.groups.get_group(group_id)
        if group is None or group.is_dead:
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if not isinstance(group, kind):
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a {name} group.", None
        return E.NONE, None, group

    # ------------------------------------------------------------ share groups (KIP-932)
    def handle_share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id,
                                     subscribed_topic_names, client_id: str, client_host: str
                                     ) -> HeartbeatResult:
        error = self.validate_group_status(group_id, "ShareGroupHeartbeat")
        if error is not None and error != E.INVALID_GROUP_ID:
            return HeartbeatResult(error, None)
        return self.share.heartbeat(group_id or "", member_id, member_epoch, rack_id, subscribed_topic_names,
                                    client_id, client_host)

    def handle_share_group_describe(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        """(error, message, group)."""
        return self._describe(group_id, "ShareGroupDescribe", ShareGroup, "share")

    def share_group_for_offsets(self, group_id: str, create: bool) -> tuple[int, str | None]:
        """(error, message) for changing a share group's offsets (Alter/DeleteShareGroupOffsets): only an empty
        share group's may change; with ``create`` a group that does not exist yet is made, empty."""
        error = self.validate_group_status(group_id, "AlterShareGroupOffsets")
        if error is not None:
            return error, None
        group = self.groups.get_group(group_id)
        if group is None or group.is_dead:
            if not create:
                return E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            self.groups.put(ShareGroup(group_id))
            return E.NONE, None
        if not isinstance(group, ShareGroup):
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        if not group.is_empty:
            return E.NON_EMPTY_GROUP, "The group is not empty."
        return E.NONE, None

    # ------------------------------------------------------------ streams protocol
    def handle_streams_group_heartbeat(self, hb: StreamsHeartbeat, callback) -> None:
        """``callback(StreamsHeartbeatResult)`` once what changed is durable."""
        error = self.validate_group_status(hb.group_id, "StreamsGroupHeartbeat")
        if error is not None and error != E.INVALID_GROUP_ID:
            callback(StreamsHeartbeatResult(error))
            return
        self.streams.heartbeat(hb, callback)

    def handle_streams_group_describe(self, group_id: str) -> tuple[int, str | None, StreamsGroup | None]:
        """(error, message, group)."""
        return self._describe(group_id, "StreamsGroupDescribe", StreamsGroup, "streams")

    def _create_internal_topics(self, to_create: dict) -> None:
        """A streams group's repartition and changelog topics that do not exist yet, created as Kafka's
        coordinator has its broker create them (through the controller, with the partition count the
        topology needs and the configs the member declared)."""
        for name, info in sorted(to_create.items()):
            if name in self._creating_internal:
                continue
            rf = info.replication_factor if info.replication_factor > 0 else -1
            try:
                created = self.controller.create_topic(name, info.partitions, rf, dict(info.configs))
            except KafkaError as e:
                if e.error_code != E.TOPIC_ALREADY_EXISTS:
                    log.warning("cannot create the streams internal topic %s: %s", name, e)
                continue
            except Exception:
                log.exception("cannot create the streams internal topic %s", name)
                continue
            log.info("creating the streams internal topic %s (%d partitions)", name, info.partitions)
            if inspect.isawaitable(created):
                self._creating_internal.add(name)
                task = asyncio.ensure_future(created)
                task.add_done_callback(lambda t, n=name: self._internal_created(n, t))

    def _internal_created(self, name: str, task) -> None:
        self._creating_internal.discard(name)
        if not task.cancelled() and task.exception() is not None:
            e = task.exception()
            if not (isinstance(e, KafkaError) and e.error_code == E.TOPIC_ALREADY_EXISTS):
                log.warning("cannot create the streams internal topic %s: %s", name, e)

    def assignor_name(self, group: ConsumerGroup) -> str:
        return self.consumer.preferred_assignor(group)

    def on_topics_changed(self, topics: set[str]) -> None:
        """The MetadataCache saw topics created, deleted or given partitions."""
        if self.active:
            self.consumer.on_metadata_change(topics)

    # ------------------------------------------------------------ offsets
    def handle_commit_offsets(self, group_id, member_id, instance_id, generation_id, offsets, api_version,
                              callback) -> None:
        """Commit, then ``callback({(topic, partition): error})`` once the commit is durable (acks=-1)."""
        error = self.validate_group_status(group_id, "OffsetCommit")
        if error is not None:
            callback({tp: error for tp in offsets})
            return
        self.offsets.commit_offsets(group_id, member_id, instance_id, generation_id, offsets, api_version, callback)

    def _on_offset_commit(self, group, member_id: str) -> None:
        if isinstance(group, ClassicGroup):
            self.classic.on_offset_commit(group, member_id)

    def handle_txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                  instance_id: str | None, generation_id: int, offsets, callback,
                                  api_version: int = 5) -> None:
        """TxnOffsetCommit: the offsets are written now and count when the transaction commits."""
        error = self.validate_group_status(group_id, "TxnOffsetCommit")
        if error is not None:
            callback({tp: error for tp in offsets})
            return
        self.offsets.commit_txn_offsets(group_id, producer_id, producer_epoch, member_id, instance_id,
                                        generation_id, offsets, callback, api_version)

    def on_transaction_completed(self, producer_id: int, offsets_partitions, committed: bool) -> None:
        """WriteTxnMarkers wrote a marker to these `__consumer_offsets` partitions (Kafka's
        onTransactionCompleted): the producer's pending offsets there become committed or vanish."""
        self.offsets.complete_txn(producer_id, offsets_partitions, committed)

    def unstable_partitions(self, group_id: str, partitions) -> set[tuple[str, int]]:
        """Of ``partitions``, those with a transactional commit still waiting for its marker."""
        return self.offsets.unstable_partitions(group_id, partitions)

    def handle_fetch_offsets(self, group_id: str, partitions, require_stable: bool, member_id: str | None = None,
                             member_epoch: int = -1):
        error = self.validate_group_status(group_id, "OffsetFetch")
        if error is not None:
            return error, []
        return self.offsets.fetch_offsets(group_id, partitions, member_id, member_epoch)

    def on_topic_deleted(self, topic: str, partitions: int) -> None:
        if self.active:
            self.handle_deleted_partitions([(topic, i) for i in range(partitions)])

    def handle_deleted_partitions(self, partitions: list[tuple[str, int]]) -> int:
        """A topic was deleted: forget the offsets every group committed for it."""
        return self.offsets.on_partitions_deleted(partitions)

    def handle_delete_offsets(self, group_id: str, partitions):
        error = self.validate_group_status(group_id, "OffsetDelete")
        if error is not None:
            return error, {}
        return self.offsets.delete_offsets(group_id, partitions)

    # ------------------------------------------------------------ admin
    def handle_list_groups(self, states, types) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(error, [(group_id, protocol_type, state, group_type)])."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, []
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.is_loading else E.NONE
        return error, self.groups.list_groups(states, types)

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary | None]:
        """(error, summary); the summary is None when the group does not exist (or is not classic)."""
        error = self.validate_group_status(group_id, "DescribeGroups")
        if error is not None:
            return error, GroupSummary("")
        group = self.groups.classic_group(group_id)
        if group is None:
            return E.NONE, None
        if group.is_(group.state.STABLE):
            protocol = group.protocol_name
            members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.metadata(protocol), m.assignment) for m in group.members.values()]
            return E.NONE, GroupSummary(group.state.value, group.protocol_type or "", protocol, members)
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                   for m in group.members.values()]
        return E.NONE, GroupSummary(group.state.value, group.protocol_type or "", "", members)

    def not_found_message(self, group_id: str) -> str:
        """Why DescribeGroups (v6+) finds no classic group of this id, in Kafka's words."""
        group = self.groups.get_group(group_id)
        if isinstance(group, (ConsumerGroup, ShareGroup, StreamsGroup)) and not group.is_dead:
            return f"Group {group_id} is not a classic group."
        return f"Group {group_id} not found."

    def handle_delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        errors: dict[str, int] = {}
        for group_id in group_ids:
            error = self.validate_group_status(group_id, "DeleteGroups")
            if error is not None:
                errors[group_id] = error
                continue
            group = self.groups.get_group(group_id)
            if group is None:
                errors[group_id] = E.GROUP_ID_NOT_FOUND
                continue
            error = group.validate_delete_group()
            if error is not None:
                errors[group_id] = error
                continue
            records: list = []
            removed = self.offsets.delete_all_offsets(group_id, records)
            records.extend(r.encode() if isinstance(r, CoordinatorRecord) else r for r in self.groups.tombstones(group))
            self.groups.remove(group_id)
            if records and self.runtime.topic_exists():
                self.runtime.append(group_id, records, lambda error: None)
            log.info("deleted group %s (%d offsets)", group_id, removed)
            if isinstance(group, ShareGroup):
                for listener in self.share_group_deleted:
                    listener(group_id)
            errors[group_id] = E.NONE
        return errors

    # ------------------------------------------------------------ loading and unloading
    def on_election(self, index: int, leader_epoch: int = -1):
        """This broker leads `__consumer_offsets` partition `index` (from LeaderAndIsr, at this leader epoch;
        -1: unknown): load its groups and offsets. Returns the load's task, None if nothing is to load."""
        if not self.active:
            return None
        return self.runtime.on_election(index, self._replay_partition, leader_epoch)

    def on_resignation(self, index: int, leader_epoch: int = -1) -> None:
        """This broker no longer leads partition `index`: drop its groups and offsets from memory (classic
        and consumer groups alike; the new leader loads them). A resignation older than the election that
        loaded the partition is ignored."""
        if not self.runtime.on_resignation(index, leader_epoch):
            return
        for group in self.groups.groups_of_partition(index):
            self._unload(group)
            self.groups.remove(group.group_id)      # marks it dead: requests still holding it stop
        held = set(self.offsets.offsets).union(*self.offsets.pending.values())
        self.offsets.unload([g for g in held if self.partition_for(g) == index])

    def _replay_partition(self, index: int, records, pending=None) -> None:
        touched: set[str] = set()
        for producer_id, open_records in (pending or {}).items():
            for key_bytes, value in open_records:
                key = read_key(key_bytes)
                if isinstance(key, OffsetKey):      # only offsets are ever written in a transaction
                    self.offsets.replay_pending(producer_id, key.group, key.topic, key.partition,
                                                None if value is None else read_offset_value(value))
                    touched.add(key.group)
        for key_bytes, value in records:
            key = read_key(key_bytes)
            if isinstance(key, OffsetKey):
                self.offsets.replay(key.group, key.topic, key.partition, read_offset_value(value))
                touched.add(key.group)
            elif isinstance(key, GroupKey):
                self.groups.put(classic_group_from_value(key.group, *read_group_value(value), clock=self.clock))
                touched.add(key.group)
            elif isinstance(key, ConsumerRecordKey):
                record = CoordinatorRecord(key.type, key.group, key.sub,
                                           None if value is None else read_consumer_value(key.type, value))
                if key.type in STREAMS_RECORD_TYPES:
                    replay_streams_record(self.groups, record)
                else:
                    self.groups.replay(record)
                touched.add(key.group)
        for group_id in touched:
            # Offsets without group metadata: a "simple" group, as Kafka recreates it.
            group = self.groups.get_group(group_id) or self.groups.get_or_maybe_create_classic_group(group_id, True)
            if isinstance(group, StreamsGroup):
                self.streams.on_group_loaded(group)
            elif isinstance(group, ConsumerGroup):
                group.metadata_refresh_needed = True
                self.consumer.on_group_loaded(group)
            else:
                self.classic.on_group_loaded(group)
        if touched:
            log.info("loaded %d groups from %s-%d", len(touched), GROUP_METADATA_TOPIC_NAME, index)

    def _unload(self, group) -> None:
        if isinstance(group, StreamsGroup):
            self.streams.on_group_unloaded(group)
        elif isinstance(group, ConsumerGroup):
            self.consumer.on_group_unloaded(group)
        elif isinstance(group, ShareGroup):
            self.share.on_group_unloaded(group)
        else:
            self.classic.on_group_unloaded(group)


__all__ = ["GroupCoordinator", "GroupSummary", "MemberSummary", "SyncResult"]
