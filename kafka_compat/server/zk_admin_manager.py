"""Topic administration in a ZooKeeper cluster: Kafka's ZkAdminManager and AdminZkClient.

A broker creates a topic by writing ZooKeeper: its config overrides at /config/topics/<t>, then its
replica assignment (computed as Kafka's AdminUtils does, rack-aware with broker.rack) and topic id at
/brokers/topics/<t>. The controller notices the new znode and elects the leaders; the request waits
(Kafka's DelayedCreatePartitions) until this broker's metadata cache shows a leader for every new
partition, or times out with REQUEST_TIMED_OUT. Deleting is /admin/delete_topics/<t> and a wait until
the cache forgets the topic (DelayedDeleteTopics); new partitions extend the topic's assignment; config
changes rewrite /config/topics/<t> and leave a /config/changes notification for every broker.

The ZooKeeper work runs in a thread; the public methods are coroutines for the handlers to await (see
admin_manager). The waits complete when the broker's UpdateMetadata handling calls
`try_complete_delayed_topic_operations(topics)` on the loop, after updating the metadata cache.
`log_config(topic)` is answered from a cache of every topic's overrides, kept by the handler this manager
subscribes to the broker's config change listener (ZkConfigManager) for topics.
"""
from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..controller.replica_assignment import (
    BrokerMetadata,
    assign_new_partitions,
    assign_replicas_to_brokers,
    broker_metadatas,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..purgatory import DelayedOperation, DelayedOperationPurgatory
from ..sentinels import NO_LEADER
from ..zk import zk_data as zd
from ..zk.kafka_zk_client import KafkaZkClient, NodeExistsError
from ..zk.zk_data import TopicPartition
from .local_controller import check_topic_configs, log_config
from .metadata_cache import MetadataCache
from .topics import validate_name
from .zk_config_manager import ZkConfigManager

log = logging.getLogger(__name__)


class CreatedTopic(NamedTuple):
    name: str
    topic_id: bytes
    partitions: int
    replication_factor: int


def _invalid_assignment(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def validate_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """AdminZkClient.validateTopicCreate's rules for a new topic's assignment."""
    if len({len(r) for r in assignment.values()}) != 1:
        raise _invalid_assignment("All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(set(replicas)) != len(replicas):
            raise _invalid_assignment(f"Duplicate replica assignment found: {dict(assignment)}")
    if sorted(assignment) != list(range(len(assignment))):
        raise _invalid_assignment("partitions should be a consecutive 0-based integer sequence")


def _has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


class _DelayedMetadataWait(DelayedOperation):
    """Kafka's DelayedCreatePartitions / DelayedDeleteTopics / DelayedElectLeader in one: done when
    `satisfied(item)` holds for every item (checked now and whenever the metadata of a watched topic
    changes), or at the timeout; the future gets the items still unsatisfied."""

    def __init__(self, delay_ms: int, items: Iterable[Hashable], satisfied: Callable[[Any], bool],
                 future: asyncio.Future):
        super().__init__(delay_ms)
        self.waiting = set(items)
        self.satisfied = satisfied
        self.future = future

    def try_complete(self) -> bool:
        self.waiting = {i for i in self.waiting if not self.satisfied(i)}
        return not self.waiting and self.force_complete()

    def on_complete(self) -> None:
        self.waiting = {i for i in self.waiting if not self.satisfied(i)}
        if not self.future.done():
            self.future.set_result(self.waiting)


class ZkAdminManager:
    asynchronous = True

    def __init__(self, config, zk_client: KafkaZkClient, metadata_cache: MetadataCache, *,
                 config_manager: ZkConfigManager, controller=None, rng: random.Random | None = None):
        """`config_manager`: the broker's /config/changes listener, started by the broker once everyone
        subscribed (it reports every topic's overrides first). `controller`: this broker's KafkaController
        (CreateTopics, CreatePartitions and DeleteTopics are answered only by the active controller's
        broker, as in Kafka). `rng` fixes the random start of replica placement (tests)."""
        self.config = config
        self.zk = zk_client
        self.metadata_cache = metadata_cache
        self.controller = controller
        self._rng = rng
        self._topic_configs: dict[str, dict[str, str]] = {}
        config_manager.subscribe("topics", self._on_topic_config_change)
        self._purgatory: DelayedOperationPurgatory | None = None

    async def startup(self) -> None:
        self._topic_purgatory()

    def _topic_purgatory(self) -> DelayedOperationPurgatory:
        """Where the waits for the metadata cache park (made on the loop, at the first use)."""
        if self._purgatory is None:
            self._purgatory = DelayedOperationPurgatory("topic", loop=asyncio.get_running_loop())
        return self._purgatory

    async def shutdown(self) -> None:
        if self._purgatory is not None:
            self._purgatory.shutdown()

    def is_active_controller(self) -> bool:
        return self.controller is not None and self.controller.is_active

    # -- configs ------------------------------------------------------------------------------

    def _on_topic_config_change(self, name: str, configs: dict[str, str]) -> None:     # the listener's thread
        self._topic_configs[name] = configs
        # Kafka's TopicConfigHandler: with unclean election on, offline partitions may get a leader now
        if self.controller is not None and configs.get("unclean.leader.election.enable", "").lower() == "true":
            self.controller.enable_topic_unclean_leader_election(name)

    def log_config(self, topic: str):
        return log_config(self.config, self._topic_configs.get(topic, {}))

    def check_configs(self, configs: dict[str, str]) -> dict[str, str]:
        """Validate topic-level overrides; ConfigError (INVALID_CONFIG) on a bad one."""
        check_topic_configs(self.config, configs)
        return configs

    async def topic_configs(self, topic: str) -> dict[str, str]:
        """A topic's overrides as ZooKeeper has them now."""
        configs = await asyncio.to_thread(self.zk.get_entity_configs, "topics", topic)
        self._topic_configs[topic] = dict(configs)
        return configs

    async def refresh_topic_configs(self, topics: Iterable[str]) -> None:
        """Read these topics' overrides (a topic created by another broker, before its logs are made)."""
        topics = list(topics)
        configs = await asyncio.to_thread(self.zk.get_entities_configs, "topics", topics)
        self._topic_configs.update({t: dict(c) for t, c in configs.items()})

    async def set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """Replace a topic's overrides (AdminZkClient.changeTopicConfig)."""
        validate_name(name)
        self.check_configs(configs)
        await asyncio.to_thread(self._set_topic_configs, name, dict(configs), validate_only)
        if not validate_only:
            self._topic_configs[name] = dict(configs)

    def _set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        if not self.zk.topic_exists(name):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        if not validate_only:
            self.zk.change_entity_config("topics", name, configs)

    # -- topics -------------------------------------------------------------------------------

    def _alive_brokers(self) -> list[BrokerMetadata]:
        return [BrokerMetadata(b.broker_id, b.rack) for b in self.metadata_cache.alive_brokers()]

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     on_valid: Callable[[int], None] | None = None):
        """A coroutine creating the topic (None when validate_only). A bad name raises here and now, so that
        a caller that does not wait for the creation (Metadata's auto-creation) still reports it.
        `on_valid(partitions)` runs on the loop once every check has passed and before anything is written:
        the controller mutation quota is charged there, as ZkAdminManager.createTopics does, and may refuse."""
        validate_name(name)
        return self._create_topic(name, partitions, replication_factor, configs, validate_only, assignments,
                                  on_valid)

    async def _create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str] | None,
                            validate_only: bool, assignments: Mapping[int, Sequence[int]] | None,
                            on_valid: Callable[[int], None] | None = None) -> CreatedTopic | None:
        configs = dict(configs or {})
        if assignments:
            assignment = {int(p): list(r) for p, r in assignments.items()}
        else:
            partitions = self.config["num.partitions"] if partitions == -1 else partitions
            replication_factor = self.config["default.replication.factor"] if replication_factor == -1 \
                else replication_factor
            assignment = assign_replicas_to_brokers(self._alive_brokers(), partitions, replication_factor,
                                                    rng=self._rng)
        validate_assignment(assignment)
        self.check_configs(configs)
        await asyncio.to_thread(self._validate_topic_create, name)
        if validate_only:
            return None
        if on_valid is not None:
            on_valid(len(assignment))
        topic_id = zd.random_uuid()
        await asyncio.to_thread(self._create_topic_with_assignment, name, topic_id, assignment, configs)
        self._topic_configs[name] = configs
        return CreatedTopic(name, topic_id, len(assignment), len(assignment[0]))

    def _validate_topic_create(self, name: str) -> None:
        """AdminZkClient.validateTopicCreate: the name is free in ZooKeeper, and collides with no other."""
        zk = self.zk
        validate_name(name)
        if zk.is_topic_marked_for_deletion(name):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
        if zk.topic_exists(name):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if _has_collision_chars(name):
            norm = name.replace(".", "_")
            colliding = sorted(t for t in zk.get_all_topics_in_cluster() if t.replace(".", "_") == norm)
            if name in colliding:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            if colliding:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")

    def _create_topic_with_assignment(self, name: str, topic_id: bytes, assignment: dict[int, list[int]],
                                      configs: dict[str, str]) -> None:
        """AdminZkClient.createTopicWithAssignment: configs first, then the assignment that makes it a topic."""
        zk = self.zk
        log.info("creating topic %s with configs %s and assignment %s", name, configs, assignment)
        zk.set_or_create_entity_configs("topics", name, configs)
        try:
            zk.create_topic_assignment(name, topic_id, assignment)
        except NodeExistsError:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None

    async def delete_topic(self, name: str) -> None:
        """Ask the controller to delete the topic; asking again while it is being deleted is fine."""
        await asyncio.to_thread(self._delete_topic, name)

    def _delete_topic(self, name: str) -> None:
        if not self.zk.topic_exists(name):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{name}` to delete does not exist")
        try:
            self.zk.create_delete_topic_path(name)
        except NodeExistsError:
            log.info("topic %s is already marked for deletion", name)

    async def create_partitions(self, name: str, count: int, validate_only: bool = False,
                                assignments: Sequence[Sequence[int]] | None = None,
                                on_valid: Callable[[int], None] | None = None) -> list[int]:
        """Grow the topic to `count` partitions; the new partitions' ids. `on_valid(added)` runs on the loop
        after the checks and before the write, as create_topic's does."""
        topic, new = await asyncio.to_thread(self._new_partitions_assignment, name, count, assignments)
        if not validate_only:
            if on_valid is not None:
                on_valid(len(new))
            log.info("adding partitions %s to topic %s", new, name)
            await asyncio.to_thread(self.zk.set_topic_assignment, name, topic.topic_id, {**topic.partitions, **new})
        return sorted(new)

    def _new_partitions_assignment(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None):
        """The topic's assignment as read, and the new partitions' replicas (createNewPartitionsAssignment)."""
        zk = self.zk
        topic = zk.get_topic_assignment(name)
        if topic is None or not topic.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if any(a.is_being_reassigned for a in topic.partitions.values()):
            raise KafkaError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"A partition reassignment is in progress for the topic '{name}'.")
        existing = {p: list(a.replicas) for p, a in topic.partitions.items()}
        old = len(existing)
        if count < old:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {old} partitions, which is higher than the requested {count}.")
        if count == old:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
        brokers = broker_metadatas(BrokerMetadata(b.id, b.rack) for b in zk.get_all_brokers_in_cluster())
        broker_ids = {b.id for b in brokers}
        if assignments is not None:
            unknown = sorted({b for replicas in assignments for b in replicas} - broker_ids)
            if unknown:
                raise _invalid_assignment(f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
            if len(assignments) != count - old:
                raise _invalid_assignment(f"Increasing the number of partitions by {count - old} but "
                                          f"{len(assignments)} assignments provided.")
            new = {old + i: list(r) for i, r in enumerate(assignments)}
            self._validate_new_assignment(new, len(existing[0]), broker_ids)
        else:
            new = assign_new_partitions(name, existing, brokers, count)
        return topic, new

    @staticmethod
    def _validate_new_assignment(new: dict[int, list[int]], replication_factor: int, broker_ids: set[int]) -> None:
        for p, replicas in new.items():
            if not replicas:
                raise _invalid_assignment(f"Cannot have replication factor of 0 for partition id {p}.")
            if len(set(replicas)) != len(replicas):
                raise _invalid_assignment(f"Duplicate brokers not allowed in replica assignment: "
                                          f"{', '.join(map(str, replicas))} for partition id {p}.")
            if not set(replicas) <= broker_ids:
                raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                                 f"Some brokers specified for partition id {p} are not available. Specified brokers: "
                                 f"{', '.join(map(str, replicas))}, available brokers: "
                                 f"{', '.join(map(str, sorted(broker_ids)))}.")
        bad = sorted(p for p, r in new.items() if len(r) != replication_factor)
        if bad:
            raise _invalid_assignment(
                f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} while "
                f"partitions [{', '.join(map(str, bad))}] have replication factors "
                f"[{', '.join(str(len(new[p])) for p in bad)}], respectively.")

    # -- waiting for the metadata to follow ------------------------------------------------------

    def try_complete_delayed_topic_operations(self, topics: Iterable[str]) -> None:
        """The metadata cache changed for these topics (call it from UpdateMetadata, on the loop)."""
        if self._purgatory is None:
            return
        for topic in topics:
            self._purgatory.check_and_complete(topic)

    async def _wait(self, items: Iterable[Hashable], topics: Iterable[str], satisfied: Callable[[Any], bool],
                    timeout_ms: int) -> set:
        """The items still unsatisfied when they all are, or at the timeout."""
        items, topics = set(items), set(topics)
        if not items:
            return set()
        if timeout_ms <= 0:
            return {i for i in items if not satisfied(i)}
        future = asyncio.get_running_loop().create_future()
        operation = _DelayedMetadataWait(timeout_ms, items, satisfied, future)
        self._topic_purgatory().try_complete_else_watch(operation, sorted(topics))
        return await future

    def _has_leader(self, tp: TopicPartition) -> bool:
        state = self.metadata_cache.partition_state(tp.topic, tp.partition)
        return state is not None and state.leader != NO_LEADER

    async def wait_for_leaders(self, partitions: Iterable[TopicPartition], timeout_ms: int) -> set[TopicPartition]:
        """DelayedCreatePartitions: the partitions still without a leader in the metadata cache."""
        partitions = [TopicPartition(*tp) for tp in partitions]
        return await self._wait(partitions, {tp.topic for tp in partitions}, self._has_leader, timeout_ms)

    async def wait_for_deletions(self, topics: Iterable[str], timeout_ms: int) -> set[str]:
        """DelayedDeleteTopics: the topics the metadata cache still has."""
        topics = list(topics)
        return await self._wait(topics, topics, lambda t: self.metadata_cache.get(t) is None, timeout_ms)

    async def wait_for_elected_leaders(self, expected: Mapping[TopicPartition, int],
                                       timeout_ms: int) -> set[TopicPartition]:
        """DelayedElectLeader: the partitions whose new leader the metadata cache does not show yet."""
        def shows(tp: TopicPartition) -> bool:
            state = self.metadata_cache.partition_state(tp.topic, tp.partition)
            return state is not None and state.leader == expected[tp]
        return await self._wait(expected, {tp.topic for tp in expected}, shows, timeout_ms)
