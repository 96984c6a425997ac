"""The ZooKeeper-mode controller: Kafka's KafkaController.

Every broker runs one. It watches /controller and, when that znode is missing, tries to create it in
one multi with the bump of /controller_epoch; the broker that succeeds is the active controller until
its session ends. The active controller owns the cluster's partition states: it elects leaders (at
failover, when brokers die or come back, for new partitions, on request), shrinks ISRs of dead
replicas, deletes topics, moves replicas, and tells the brokers through LeaderAndIsr, UpdateMetadata
and StopReplica. Each of its ZooKeeper writes is fenced by the zkVersion of /controller_epoch, so a
deposed controller cannot change anything: the write fails with ControllerMovedError and it resigns.

Threading: all the work happens on one event thread (controller_event_manager). The public methods
below are thread-safe: they queue an event and return a concurrent.futures.Future the event thread
completes (wrap it with asyncio.wrap_future on the loop).
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..leader_and_isr import NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from ..protocol.primitives import ZERO_UUID
from ..server import features as ft
from ..zk import zk_data as zd
from ..zk.kafka_zk_client import ControllerMovedError, KafkaZkClient, NodeExistsError, ZkWatch
from ..zk.zk_data import ReplicaAssignment, TopicPartition
from .controller_channel_manager import ControllerBrokerRequestBatch, ControllerChannelManager, SendFn
from .controller_context import ControllerContext, PartitionAndReplica, PartitionState, ReplicaState
from .controller_event_manager import ControllerEvent, ControllerEventManager
from .controller_metrics import ControllerMetrics
from .partition_state_machine import (
    CONTROLLED_SHUTDOWN,
    OFFLINE,
    OFFLINE_ALLOW_UNCLEAN,
    PREFERRED,
    REASSIGN,
    PartitionStateMachine,
    StateChangeFailedError,
)
from .replica_state_machine import ReplicaStateMachine
from .topic_deletion_manager import TopicDeletionManager

log = logging.getLogger(__name__)

PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1       # ElectLeaders' ElectionType
UNKNOWN_BROKER_EPOCH = -1
AUTO_REBALANCE_FIRST_DELAY_S = 5.0

# ElectLeaders' outcome per partition: the new leader's id, or why there is none
ElectionResults = dict[TopicPartition, "int | KafkaError"]


def _not_controller() -> KafkaError:
    return KafkaError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")


def _error_of(e: BaseException) -> KafkaError:
    return e if isinstance(e, KafkaError) else KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or type(e).__name__)


class KafkaController:
    def __init__(self, config: Mapping[str, Any], zk_client: KafkaZkClient, send: SendFn, *,
                 broker_id: int | None = None, inter_broker_listener_name: str = "PLAINTEXT",
                 register_broker: Callable[[], int] | None = None, retry_backoff_ms: int = 100,
                 auto_rebalance_first_delay_s: float = AUTO_REBALANCE_FIRST_DELAY_S,
                 metrics: ControllerMetrics | None = None):
        """`config`: the broker's configs (BrokerConfig). `send`: the broker's network client, see
        controller_channel_manager. `register_broker()`, when given, re-creates this broker's
        /brokers/ids znode after a session expiry, before the election runs again (Kafka's
        RegisterBrokerAndReelect); without it the broker re-registers by itself. `metrics`: the
        broker's ControllerMetrics (the Prometheus endpoint reads them), updated after every event."""
        self.config = config
        self.metrics = metrics if metrics is not None else ControllerMetrics()
        self.broker_id = config["broker.id"] if broker_id is None else broker_id
        self.zk = zk_client
        self.inter_broker_listener_name = inter_broker_listener_name
        self._register_broker = register_broker
        self._auto_rebalance_first_delay_s = auto_rebalance_first_delay_s
        self.context = ControllerContext()
        self._events = ControllerEventManager(self.broker_id)
        self.channel = ControllerChannelManager(self.broker_id, send,
                                                request_timeout_ms=config["controller.socket.timeout.ms"],
                                                retry_backoff_ms=retry_backoff_ms)
        self.batch = ControllerBrokerRequestBatch(
            self.context, self.channel, self.broker_id, inter_broker_listener_name,
            on_leader_and_isr_response=lambda b, r: self._put("LeaderAndIsrResponseReceived",
                                                              lambda: self._process_leader_and_isr_response(b, r)),
            on_stop_replica_deletion_response=lambda b, e, errors: self._put(
                "TopicDeletionStopReplicaResponseReceived",
                lambda: self._process_topic_deletion_stop_replica_response(b, e, errors)))
        self.replica_state_machine = ReplicaStateMachine(self.context, zk_client, self.batch)
        self.partition_state_machine = PartitionStateMachine(self.context, zk_client, self.batch,
                                                             self._unclean_leader_election_enabled)
        self.topic_deletion_manager = TopicDeletionManager(
            self.context, self.replica_state_machine, self.partition_state_machine,
            delete_topic_enable=config["delete.topic.enable"],
            delete_topic_znodes=self._delete_topic_znodes,
            delete_topic_deletions=lambda topics: self.zk.delete_topic_deletions(topics, self.context.epoch_zk_version),
            mute_partition_modifications=self._unwatch_partition_modifications,
            send_metadata_update=lambda partitions: self.send_update_metadata_request(
                self.context.live_or_shutting_down_broker_ids, partitions))
        self.active_controller_id = -1
        self._controller_watch: ZkWatch | None = None
        self._watches: list[ZkWatch] = []
        self._partition_modification_watches: dict[str, ZkWatch] = {}
        self._broker_modification_watches: dict[int, ZkWatch] = {}
        self._rebalance_timer: threading.Timer | None = None
        self._session_lost = False
        self._started = False

    # -- lifecycle ------------------------------------------------------------------------------

    def startup(self) -> None:
        """Start the event thread and take part in the election. The broker should be registered in
        ZooKeeper first (its epoch is what the controller knows it by)."""
        if self._started:
            return
        self._started = True
        self.zk.add_state_listener(self._on_zk_state)
        self._events.start()
        self._put("Startup", self._process_startup)

    def shutdown(self) -> None:
        """Stop the event thread and resign. /controller goes when this broker's ZooKeeper session ends."""
        if not self._started:
            return
        self._started = False
        self.zk.remove_state_listener(self._on_zk_state)
        self._events.close()
        if self._controller_watch is not None:
            self._controller_watch.cancel()
        self.active_controller_id = -1
        self._on_controller_resignation()
        self._update_metrics()

    def _update_metrics(self) -> None:
        """Kafka's updateMetrics, after each event on the event thread: one pass over the partitions."""
        m = self.metrics
        if not self.is_active:
            m.active_controller_count = m.offline_partitions_count = m.preferred_replica_imbalance_count = 0
            return
        ctx, deleting = self.context, self.topic_deletion_manager.is_topic_queued_up_for_deletion
        offline = imbalanced = 0
        for tp, state in list(ctx.partition_states.items()):
            if deleting(tp.topic):
                continue
            if state is PartitionState.OFFLINE:
                offline += 1
            info = ctx.partition_leadership_info(tp)
            replicas = ctx.partition_replica_assignment(tp)
            if info is not None and replicas and info.leader_and_isr.leader != replicas[0]:
                imbalanced += 1
        m.active_controller_count = 1
        m.offline_partitions_count = offline
        m.preferred_replica_imbalance_count = imbalanced

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    @property
    def epoch(self) -> int:
        return self.context.epoch

    def requests_in_flight(self) -> bool:
        """As the active controller, LeaderAndIsr/UpdateMetadata/StopReplica not yet answered by every broker."""
        return self.is_active and not self.channel.idle()

    def _on_zk_state(self, state: str) -> None:
        """On kazoo's thread: only queue events. A lost session means our /controller and /brokers/ids
        znodes are gone: resign now, and run the election again once a new session is up."""
        if state == "LOST":
            self._session_lost = True
            self._events.clear_and_put(ControllerEvent("Expire", self._process_expire))
        elif state == "CONNECTED" and self._session_lost:
            self._session_lost = False
            self._put("RegisterBrokerAndReelect", self._process_register_broker_and_reelect)

    def _put(self, name: str, fn: Callable[[], None], preempt: Callable[[], None] | None = None) -> None:
        def process():
            try:
                fn()
            except ControllerMovedError as e:
                log.info("controller %d: the controller moved while processing %s (%s)", self.broker_id, name, e)
                self._maybe_resign()
            finally:
                self._update_metrics()
        self._events.put(ControllerEvent(name, process, preempt))

    def _request(self, name: str, work: Callable[[], Any]) -> concurrent.futures.Future:
        """Queue `work` as an event; the future gets its result, or NOT_CONTROLLER if the event is dropped
        or the controller moved meanwhile."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def process():
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(work())
            except ControllerMovedError as e:
                future.set_exception(_not_controller())
                log.info("controller %d: the controller moved while processing %s (%s)", self.broker_id, name, e)
                self._maybe_resign()
            except Exception as e:
                future.set_exception(_error_of(e))
            finally:
                self._update_metrics()

        def preempt():
            if not future.done() and future.set_running_or_notify_cancel():
                future.set_exception(_not_controller())
        self._events.put(ControllerEvent(name, process, preempt))
        return future

    # -- requests from the broker's handlers ------------------------------------------------------

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> concurrent.futures.Future:
        """Move leadership off a broker that is shutting down. Result: the partitions it still leads
        (replication factor above one); KafkaError STALE_BROKER_EPOCH / BROKER_NOT_AVAILABLE / NOT_CONTROLLER."""
        return self._request("ControlledShutdown", lambda: self._do_controlled_shutdown(broker_id, broker_epoch))

    def alter_partition(self, request: AlterPartitionRequest, version: int) -> concurrent.futures.Future:
        """Apply a leader's ISR changes. Result: the AlterPartitionResponse body."""
        return self._request("AlterPartitionReceived", lambda: self._process_alter_partition(request, version))

    def elect_leaders(self, partitions: Iterable[TopicPartition] | None, election_type: int
                      ) -> concurrent.futures.Future:
        """ElectLeaders (PREFERRED_ELECTION or UNCLEAN_ELECTION) for `partitions` (None: the pending
        /admin/preferred_replica_election). Result: {partition: new leader id or KafkaError}."""
        parts = None if partitions is None else {TopicPartition(*tp) for tp in partitions}
        return self._request("ReplicaLeaderElection",
                             lambda: self._process_replica_leader_election(parts, election_type, admin=True))

    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, Iterable[int] | None]
                                      ) -> concurrent.futures.Future:
        """Start (replicas) or cancel (None) reassignments. Result: {partition: None or KafkaError}."""
        asked = {TopicPartition(*tp): None if r is None else list(r) for tp, r in reassignments.items()}
        return self._request("ApiPartitionReassignment", lambda: self._process_api_partition_reassignment(asked))

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None
                                     ) -> concurrent.futures.Future:
        """Result: {partition: its ReplicaAssignment} for the partitions being reassigned (of those asked)."""
        parts = None if partitions is None else {TopicPartition(*tp) for tp in partitions}
        return self._request("ListPartitionReassignments", lambda: self._process_list_partition_reassignments(parts))

    def update_features(self, updates: list[tuple[str, int, int]], validate_only: bool
                        ) -> concurrent.futures.Future:
        """UpdateFeatures: [(feature, level, upgrade type)] checked against every live broker's supported
        features and written to /feature. Result: the new epoch (the znode's version), None with
        validate_only, or the features.FeatureUpdateError that refused them; KafkaError NOT_CONTROLLER."""
        return self._request("UpdateFeatures", lambda: self._process_update_features(updates, validate_only))

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """A topic's unclean.leader.election.enable was turned on: elect for its offline partitions."""
        self._put("TopicUncleanLeaderElectionEnable",
                  lambda: self.is_active and self.partition_state_machine.trigger_online_partition_state_change(topic))

    def enable_default_unclean_leader_election(self) -> None:
        self._put("UncleanLeaderElectionEnable",
                  lambda: self.is_active and self.partition_state_machine.trigger_online_partition_state_change())

    # -- election -------------------------------------------------------------------------------

    def _process_startup(self) -> None:
        self._controller_watch = self.zk.watch_data(zd.CONTROLLER_PATH, self._on_controller_znode)
        self._elect()

    def _on_controller_znode(self, path: str, data: bytes | None, stat: Any) -> None:
        if stat is None:
            self._put("Reelect", self._process_reelect)
        else:
            self._put("ControllerChange", self._maybe_resign)

    def _current_controller_id(self) -> int:
        controller = self.zk.get_controller_id()
        return -1 if controller is None else controller

    def _elect(self) -> None:
        self.active_controller_id = self._current_controller_id()
        if self.active_controller_id != -1:
            return
        try:
            epoch, epoch_zk_version = self.zk.register_controller_and_increment_controller_epoch(self.broker_id)
        except ControllerMovedError:
            self._maybe_resign()
            return
        self.context.epoch, self.context.epoch_zk_version = epoch, epoch_zk_version
        self.active_controller_id = self.broker_id
        log.info("controller: broker %d is the controller, epoch %d (zkVersion %d)", self.broker_id, epoch,
                 epoch_zk_version)
        try:
            self._on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception:
            log.exception("controller %d: becoming the controller failed; resigning", self.broker_id)
            self._trigger_controller_move()

    def _maybe_resign(self) -> None:
        was_active = self.is_active
        self.active_controller_id = self._current_controller_id()
        if was_active and not self.is_active:
            self._on_controller_resignation()

    def _process_reelect(self) -> None:
        self._maybe_resign()
        self._elect()

    def _process_expire(self) -> None:
        # The new session may already have won /controller in an event processed before this one (the
        # expiry reached us late). Resigning empties our context, so that controllership is given up too:
        # otherwise the next reelection finds /controller naming us and acts with an empty epoch-0 context.
        epoch_zk_version = self.context.epoch_zk_version
        try:
            ours = self.is_active and self._current_controller_id() == self.broker_id
        except Exception:       # no session yet: the old session's /controller is gone with it
            ours = False
        self.active_controller_id = -1
        self._on_controller_resignation()
        if ours:
            try:
                self.zk.delete_controller(epoch_zk_version)
            except ControllerMovedError:
                pass
        self._update_metrics()

    def _process_register_broker_and_reelect(self) -> None:
        if self._register_broker is not None:
            self._register_broker()
        self._process_reelect()

    def _trigger_controller_move(self) -> None:
        """Give up the controllership on purpose (our state is broken): delete /controller."""
        self.active_controller_id = self._current_controller_id()
        if not self.is_active:
            return
        epoch_zk_version = self.context.epoch_zk_version
        self.active_controller_id = -1
        self._on_controller_resignation()
        try:
            self.zk.delete_controller(epoch_zk_version)
        except ControllerMovedError:
            pass

    # -- failover and resignation -----------------------------------------------------------------

    def _on_controller_failover(self) -> None:
        ctx = self.context
        zk = self.zk
        for path in (zd.BROKER_IDS_PATH, zd.TOPICS_PATH, zd.DELETE_TOPICS_PATH, zd.ISR_CHANGE_NOTIFICATION_PATH,
                     zd.LOG_DIR_EVENT_NOTIFICATION_PATH):
            zk.make_sure_persistent_path_exists(path)
        child_events = (
            (zd.BROKER_IDS_PATH, "BrokerChange", self._process_broker_change),
            (zd.TOPICS_PATH, "TopicChange", self._process_topic_change),
            (zd.DELETE_TOPICS_PATH, "TopicDeletion", self._process_topic_deletion),
            (zd.LOG_DIR_EVENT_NOTIFICATION_PATH, "LogDirEventNotification", self._process_log_dir_event_notification),
            (zd.ISR_CHANGE_NOTIFICATION_PATH, "IsrChangeNotification", self._process_isr_change_notification))
        self._watches = [zk.watch_children(path, lambda *_, n=name, fn=fn: self._put(n, fn))
                         for path, name, fn in child_events]
        self._watches.append(zk.watch_data(zd.PREFERRED_REPLICA_ELECTION_PATH,
                                           self._on_preferred_replica_election_znode))
        zk.delete_log_dir_event_notifications(ctx.epoch_zk_version)
        zk.delete_isr_change_notifications(ctx.epoch_zk_version)
        self._enable_feature_versioning()
        self._initialize_controller_context()
        to_delete, ineligible = self._fetch_topic_deletions_in_progress()
        self.topic_deletion_manager.init(to_delete, ineligible)
        # Brokers need the live brokers before they can act on LeaderAndIsr: UpdateMetadata goes first.
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])
        self.replica_state_machine.startup()
        self.partition_state_machine.startup()
        log.info("controller %d: ready to serve as the controller with epoch %d", self.broker_id, ctx.epoch)
        self._maybe_resume_reassignments(lambda tp, a: True)
        self.topic_deletion_manager.try_topic_deletion()
        self._schedule_auto_leader_rebalance(self._auto_rebalance_first_delay_s)

    def _on_controller_resignation(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches = []
        self._unwatch_broker_modifications(list(self._broker_modification_watches))
        for topic in list(self._partition_modification_watches):
            self._unwatch_partition_modifications(topic)
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        self.channel.shutdown()
        self.batch.clear()
        self.context.reset()

    def _initialize_controller_context(self) -> None:
        ctx = self.context
        brokers = self.zk.get_all_broker_and_epochs_in_cluster()
        ctx.set_live_brokers({i: (b.broker, b.epoch) for i, b in brokers.items()})
        ctx.all_topics = set(self.zk.get_all_topics_in_cluster())
        for topic in ctx.all_topics:
            self._watch_partition_modifications(topic)
        assignments = self.zk.get_replica_assignment_and_topic_ids_for_topics(ctx.all_topics)
        self._process_topic_ids(assignments)
        for topic, assignment in assignments.items():
            for p, a in assignment.partitions.items():
                tp = TopicPartition(topic, p)
                ctx.update_partition_full_replica_assignment(tp, a)
                if a.is_being_reassigned:
                    ctx.partitions_being_reassigned.add(tp)
        ctx.clear_partition_leadership_info()
        ctx.shutting_down_broker_ids.clear()
        self._watch_broker_modifications(ctx.live_or_shutting_down_broker_ids)
        self._update_leader_and_isr_cache(ctx.all_partitions)
        self.channel.startup(ctx.live_or_shutting_down_brokers)
        log.info("controller %d: live brokers %s, topics %s", self.broker_id,
                 sorted(ctx.live_broker_ids), sorted(ctx.all_topics))

    def _process_topic_ids(self, assignments: dict[str, zd.TopicAssignment]) -> None:
        """Topics created before Kafka 2.8 get a topic id now; the context learns every id."""
        without = {t: a for t, a in assignments.items() if a.topic_id is None}
        if without:
            assignments.update(self.zk.set_topic_ids(without, self.context.epoch_zk_version))
        for topic, assignment in assignments.items():
            self.context.add_topic_id(topic, assignment.topic_id)

    def _update_leader_and_isr_cache(self, partitions: Iterable[TopicPartition]) -> None:
        for tp, state in self.zk.get_topic_partition_states(partitions).items():
            self.context.put_partition_leadership_info(tp, state)

    def _fetch_topic_deletions_in_progress(self) -> tuple[set[str], set[str]]:
        ctx = self.context
        to_delete = set(self.zk.get_topic_deletions())
        with_offline_replicas = {t for t in ctx.all_topics for r in ctx.replicas_for_topic(t)
                                 if not ctx.is_replica_online(r.replica, r.topic_partition)}
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        return to_delete, with_offline_replicas | reassigning

    # -- watches --------------------------------------------------------------------------------

    def _watch_partition_modifications(self, topic: str) -> None:
        if topic not in self._partition_modification_watches:
            self._partition_modification_watches[topic] = self.zk.watch_data(
                zd.topic_path(topic), lambda *_: self._put("PartitionModifications",
                                                           lambda: self._process_partition_modifications(topic)))

    def _unwatch_partition_modifications(self, topic: str) -> None:
        watch = self._partition_modification_watches.pop(topic, None)
        if watch is not None:
            watch.cancel()

    def _watch_broker_modifications(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            if broker_id not in self._broker_modification_watches:
                self._broker_modification_watches[broker_id] = self.zk.watch_data(
                    zd.broker_id_path(broker_id), lambda *_, b=broker_id: self._put(
                        "BrokerModifications", lambda: self._process_broker_modification(b)))

    def _unwatch_broker_modifications(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            watch = self._broker_modification_watches.pop(broker_id, None)
            if watch is not None:
                watch.cancel()

    def _on_preferred_replica_election_znode(self, path: str, data: bytes | None, stat: Any) -> None:
        if stat is not None:
            self._put("ReplicaLeaderElection", lambda: self._process_replica_leader_election(None, PREFERRED_ELECTION,
                                                                                             admin=False))

    # -- sending --------------------------------------------------------------------------------

    def send_update_metadata_request(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(brokers, partitions)
        self.batch.send_requests_to_brokers(self.context.epoch)

    # -- brokers coming and going ----------------------------------------------------------------

    def _process_broker_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        current = self.zk.get_all_broker_and_epochs_in_cluster()
        known = ctx.live_or_shutting_down_broker_ids
        new = sorted(set(current) - known)
        dead = sorted(known - set(current))
        bounced = sorted(i for i in set(current) & known if current[i].epoch > ctx.broker_epoch(i))
        if new or dead or bounced:
            log.info("controller %d: new brokers %s, dead brokers %s, bounced brokers %s, live brokers %s",
                     self.broker_id, new, dead, bounced, sorted(current))
        for i in new:
            self.channel.add_broker(current[i].broker)
        for i in bounced:
            self.channel.remove_broker(i)
            self.channel.add_broker(current[i].broker)
        for i in dead:
            self.channel.remove_broker(i)
        if new:
            ctx.add_live_brokers({i: (current[i].broker, current[i].epoch) for i in new})
            self._on_broker_startup(new)
        if bounced:
            ctx.remove_live_brokers(bounced)
            self._on_broker_failure(bounced)
            ctx.add_live_brokers({i: (current[i].broker, current[i].epoch) for i in bounced})
            self._on_broker_startup(bounced)
        if dead:
            ctx.remove_live_brokers(dead)
            self._on_broker_failure(dead)

    def _on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.context
        for b in new_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        new = set(new_brokers)
        # the others learn of the new brokers; the new ones get every partition's state
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids - new, [])
        self.send_update_metadata_request(new, ctx.partitions_with_leaders())
        replicas = ctx.replicas_on_brokers(new)
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        self.partition_state_machine.trigger_online_partition_state_change()
        self._maybe_resume_reassignments(lambda tp, a: any(r in new for r in a.target_replicas))
        deleting = {r.topic for r in replicas if self.topic_deletion_manager.is_topic_queued_up_for_deletion(r.topic)}
        if deleting:
            self.topic_deletion_manager.resume_deletion_for_topics(deleting)
        self._watch_broker_modifications(new_brokers)

    def _on_broker_failure(self, dead_brokers: list[int]) -> None:
        ctx = self.context
        for b in dead_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        ctx.shutting_down_broker_ids -= set(dead_brokers)
        self._on_replicas_become_offline(ctx.replicas_on_brokers(dead_brokers))
        self._unwatch_broker_modifications(dead_brokers)

    def _process_broker_modification(self, broker_id: int) -> None:
        if not self.is_active:
            return
        new = self.zk.get_broker(broker_id)
        old = self.context.broker(broker_id)
        if new is not None and old is not None and (new.endpoints != old.endpoints or new.features != old.features):
            log.info("controller %d: broker %d changed its registration", self.broker_id, broker_id)
            self.context.update_broker_metadata(new)
            self.send_update_metadata_request(self.context.live_or_shutting_down_broker_ids, [])

    def _on_replicas_become_offline(self, replicas: list[PartitionAndReplica]) -> None:
        ctx = self.context
        deletion = self.topic_deletion_manager
        for_deletion = [r for r in replicas if deletion.is_topic_queued_up_for_deletion(r.topic)]
        others = [r for r in replicas if not deletion.is_topic_queued_up_for_deletion(r.topic)]
        self.partition_state_machine.handle_state_changes(ctx.partitions_with_offline_leader(), PartitionState.OFFLINE)
        results = self.partition_state_machine.trigger_online_partition_state_change()
        self.replica_state_machine.handle_state_changes(others, ReplicaState.OFFLINE)
        if for_deletion:
            deletion.fail_replica_deletion(for_deletion)
        # nothing changed a leader or an ISR: the brokers still need to hear who is offline
        if not others and all(isinstance(r, Exception) for r in results.values()):
            self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])

    def _process_log_dir_event_notification(self) -> None:
        if not self.is_active:
            return
        sequence_numbers = self.zk.get_all_log_dir_event_notifications()
        try:
            broker_ids = self.zk.get_broker_ids_from_log_dir_events(sequence_numbers)
            # LeaderAndIsr to every replica on those brokers: an offline log dir answers KAFKA_STORAGE_ERROR
            self.replica_state_machine.handle_state_changes(self.context.replicas_on_brokers(broker_ids),
                                                            ReplicaState.ONLINE)
        finally:
            self.zk.delete_log_dir_event_notifications(self.context.epoch_zk_version, sequence_numbers)

    def _process_leader_and_isr_response(self, broker_id: int, response) -> None:
        """Replicas answering KAFKA_STORAGE_ERROR are on a failed log dir: they go offline."""
        ctx = self.context
        if not self.is_active:
            return
        if response.error_code != ErrorCode.NONE:
            log.error("controller %d: broker %d answered LeaderAndIsr with error %d", self.broker_id, broker_id,
                      response.error_code)
            return
        offline, online = set(), set()
        for topic in response.topics:
            name = ctx.topic_names.get(topic.topic_id)
            for p in topic.partition_errors:
                if name is None:
                    continue
                tp = TopicPartition(name, p.partition_index)
                if p.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                    offline.add(tp)
                elif p.error_code == ErrorCode.NONE:
                    online.add(tp)
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        ctx.replicas_on_offline_dirs[broker_id] = current
        newly_offline = current - previous
        if newly_offline:
            log.info("controller %d: replicas %s on broker %d are offline", self.broker_id, sorted(newly_offline),
                     broker_id)
            self._on_replicas_become_offline([PartitionAndReplica(tp, broker_id) for tp in sorted(newly_offline)])

    # -- topics ---------------------------------------------------------------------------------

    def _process_topic_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        topics = set(self.zk.get_all_topics_in_cluster())
        new_topics = topics - ctx.all_topics
        deleted = ctx.all_topics - topics
        ctx.all_topics = topics
        for topic in new_topics:
            self._watch_partition_modifications(topic)
        added = self.zk.get_replica_assignment_and_topic_ids_for_topics(new_topics)
        for topic in deleted:
            ctx.remove_topic(topic)
            self._unwatch_partition_modifications(topic)
        self._process_topic_ids(added)
        new_partitions = []
        for topic, assignment in added.items():
            for p, a in assignment.partitions.items():
                ctx.update_partition_full_replica_assignment(TopicPartition(topic, p), a)
                new_partitions.append(TopicPartition(topic, p))
        if new_topics or deleted:
            log.info("controller %d: new topics %s, deleted topics %s", self.broker_id, sorted(new_topics),
                     sorted(deleted))
        if new_partitions:
            self._on_new_partition_creation(new_partitions)

    def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        ctx = self.context
        self.partition_state_machine.handle_state_changes(partitions, PartitionState.NEW)
        self.replica_state_machine.handle_state_changes(ctx.replicas_for_partitions(partitions), ReplicaState.NEW)
        self.partition_state_machine.handle_state_changes(partitions, PartitionState.ONLINE, OFFLINE)
        self.replica_state_machine.handle_state_changes(ctx.replicas_for_partitions(partitions), ReplicaState.ONLINE)

    def _process_partition_modifications(self, topic: str) -> None:
        """The topic's znode changed: partitions were added (or the topic went)."""
        if not self.is_active:
            return
        ctx = self.context
        assignment = self.zk.get_topic_assignment(topic)
        if assignment is None:
            return
        to_add = {TopicPartition(topic, p): a for p, a in assignment.partitions.items()
                  if not ctx.partition_replica_assignment(TopicPartition(topic, p))}
        if not to_add:
            return
        if self.topic_deletion_manager.is_topic_queued_up_for_deletion(topic):
            log.warning("controller %d: not adding partitions %s to %s: it is being deleted", self.broker_id,
                        sorted(tp.partition for tp in to_add), topic)
            existing = set(self.zk.get_children(zd.topic_partitions_path(topic)))
            restored = {p: ctx.partition_full_replica_assignment(TopicPartition(topic, p))
                        for p in assignment.partitions if str(p) in existing}
            self.zk.set_topic_assignment(topic, ctx.topic_ids.get(topic), restored, ctx.epoch_zk_version)
            return
        log.info("controller %d: new partitions %s", self.broker_id, sorted(to_add))
        for tp, a in to_add.items():
            ctx.update_partition_full_replica_assignment(tp, a)
        self._on_new_partition_creation(sorted(to_add))

    def _process_topic_deletion(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        topics = set(self.zk.get_topic_deletions())
        unknown = topics - ctx.all_topics
        if unknown:
            log.warning("controller %d: ignoring the deletion of unknown topics %s", self.broker_id, sorted(unknown))
            self.zk.delete_topic_deletions(unknown, ctx.epoch_zk_version)
        topics -= unknown
        if not self.config["delete.topic.enable"]:
            if topics:
                log.info("controller %d: topic deletion is disabled; dropping the requests for %s", self.broker_id,
                         sorted(topics))
                self.zk.delete_topic_deletions(topics, ctx.epoch_zk_version)
            return
        if topics:
            reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
            self.topic_deletion_manager.mark_topic_ineligible_for_deletion(topics & reassigning,
                                                                           "topic reassignment in progress")
            self.topic_deletion_manager.enqueue_topics_for_deletion(topics)

    def _delete_topic_znodes(self, topic: str) -> None:
        epoch_zk_version = self.context.epoch_zk_version
        self.zk.delete_topic_znode(topic, epoch_zk_version)
        self.zk.delete_topic_configs([topic], epoch_zk_version)
        self.zk.delete_topic_deletions([topic], epoch_zk_version)

    def _process_topic_deletion_stop_replica_response(self, broker_id: int, error_code: int,
                                                      errors: dict[TopicPartition, int]) -> None:
        if not self.is_active:
            return
        errors = {tp: e for tp, e in errors.items() if self.context.is_topic_deletion_in_progress(tp.topic)}
        failed = {tp for tp, e in errors.items() if error_code != ErrorCode.NONE or e != ErrorCode.NONE}
        self.topic_deletion_manager.fail_replica_deletion([PartitionAndReplica(tp, broker_id) for tp in failed])
        deleted = [PartitionAndReplica(tp, broker_id) for tp in errors if tp not in failed]
        if deleted:
            self.topic_deletion_manager.complete_replica_deletion(deleted)

    def _unclean_leader_election_enabled(self, topics: Iterable[str]) -> dict[str, bool]:
        """Each topic's unclean.leader.election.enable: its /config/topics override, else the broker's."""
        default = bool(self.config["unclean.leader.election.enable"])
        out = {}
        for topic, overrides in self.zk.get_entities_configs("topics", topics).items():
            value = overrides.get("unclean.leader.election.enable")
            out[topic] = default if value is None else value.strip().lower() == "true"
        return out

    # -- ISR changes ----------------------------------------------------------------------------

    def _process_isr_change_notification(self) -> None:
        """Brokers before AlterPartition changed ISRs in ZooKeeper themselves and left a notification."""
        if not self.is_active:
            return
        ctx = self.context
        sequence_numbers = self.zk.get_all_isr_change_notifications()
        try:
            partitions = [tp for tp in self.zk.get_partitions_from_isr_change_notifications(sequence_numbers)
                          if tp.topic in ctx.all_topics]
            if partitions:
                self._update_leader_and_isr_cache(partitions)
                self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, partitions)
                for tp in partitions:
                    if tp in ctx.partitions_being_reassigned:
                        self._maybe_complete_reassignment(tp)
        finally:
            self.zk.delete_isr_change_notifications(ctx.epoch_zk_version, sequence_numbers)

    def _process_alter_partition(self, request: AlterPartitionRequest, version: int) -> AlterPartitionResponse:
        """Kafka's tryProcessAlterPartition: check the sender and each partition, write the accepted
        ISRs conditionally, tell every broker, answer; then see whether a reassignment finished."""
        ctx = self.context
        if not self.is_active:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        cached_epoch = ctx.broker_epoch(request.broker_id)
        if cached_epoch is None or cached_epoch != request.broker_epoch:
            log.info("controller %d: ignoring AlterPartition from broker %d with epoch %d (known: %s)", self.broker_id,
                     request.broker_id, request.broker_epoch, cached_epoch)
            return AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        use_topic_ids = version > 1
        response = AlterPartitionResponse(error_code=ErrorCode.NONE)
        proposed: dict[TopicPartition, tuple] = {}        # (leader epoch, ISR, recovery state, partition epoch)
        for topic in request.topics:
            name = ctx.topic_names.get(topic.topic_id) if use_topic_ids else topic.topic_name
            if name is None:
                response.topics.append(AlterPartitionResponse.TopicData(topic_id=topic.topic_id, partitions=[
                    AlterPartitionResponse.PartitionData(partition_index=p.partition_index,
                                                         error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                    for p in topic.partitions]))
                continue
            for p in topic.partitions:
                isr = [b.broker_id for b in p.new_isr_with_epochs] if version >= 3 else list(p.new_isr)
                try:
                    recovery = LeaderRecoveryState(p.leader_recovery_state)
                except ValueError:
                    recovery = None
                proposed[TopicPartition(name, p.partition_index)] = (p.leader_epoch, isr, recovery, p.partition_epoch)
        outcome: dict[TopicPartition, LeaderAndIsr | int] = {}
        accepted: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, (leader_epoch, isr, recovery, partition_epoch) in proposed.items():
            verdict = self._check_alter_partition(tp, request.broker_id, leader_epoch, isr, recovery, partition_epoch,
                                                  version)
            if isinstance(verdict, tuple):
                accepted[tp] = verdict[0]
            else:
                outcome[tp] = verdict
        if accepted:
            update = self.zk.update_leader_and_isr(accepted, ctx.epoch, ctx.epoch_zk_version)
            for tp, result in update.finished.items():
                outcome[tp] = result if isinstance(result, LeaderAndIsr) else _error_of(result).error_code
            for tp in update.partitions_to_retry:
                outcome[tp] = ErrorCode.INVALID_UPDATE_VERSION
            self._update_leader_and_isr_cache([tp for tp, r in outcome.items() if isinstance(r, LeaderAndIsr)
                                               and tp in accepted])
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids,
                                          [tp for tp in proposed if ctx.partition_leadership_info(tp)])
        by_topic: dict[str, list] = {}
        for tp, result in outcome.items():
            if isinstance(result, LeaderAndIsr):
                data = AlterPartitionResponse.PartitionData(
                    partition_index=tp.partition, error_code=ErrorCode.NONE, leader_id=result.leader,
                    leader_epoch=result.leader_epoch, isr=list(result.isr),
                    leader_recovery_state=int(result.leader_recovery_state), partition_epoch=result.partition_epoch)
            else:
                data = AlterPartitionResponse.PartitionData(partition_index=tp.partition, error_code=int(result))
            by_topic.setdefault(tp.topic, []).append(data)
        for name, partitions in by_topic.items():
            response.topics.append(AlterPartitionResponse.TopicData(
                topic_name=name, topic_id=ctx.topic_ids.get(name, ZERO_UUID), partitions=partitions))
        for tp, result in outcome.items():
            if isinstance(result, LeaderAndIsr) and tp in ctx.partitions_being_reassigned:
                self._maybe_complete_reassignment(tp)
        return response

    def _check_alter_partition(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: list[int],
                               recovery: LeaderRecoveryState | None, partition_epoch: int, version: int):
        """(new LeaderAndIsr,) to write, a LeaderAndIsr to answer as is, or an error code."""
        ctx = self.context
        info = ctx.partition_leadership_info(tp)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        current = info.leader_and_isr
        if recovery is None:
            return ErrorCode.INVALID_REQUEST
        new = LeaderAndIsr(leader, leader_epoch, tuple(isr), recovery, partition_epoch)
        if partition_epoch > current.partition_epoch or leader_epoch > current.leader_epoch:
            # the leader knows a newer state than ours: we are probably not the controller any more
            return ErrorCode.NOT_CONTROLLER
        if leader_epoch < current.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if new.equals_allow_stale_partition_epoch(current):
            return current
        if partition_epoch < current.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        if recovery is LeaderRecoveryState.RECOVERING and len(isr) > 1:
            return ErrorCode.INVALID_REQUEST
        if (current.leader_recovery_state is LeaderRecoveryState.RECOVERED
                and recovery is LeaderRecoveryState.RECOVERING):
            return ErrorCode.INVALID_REQUEST
        if set(isr) - ctx.live_broker_ids:
            return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
        return (new,)

    # -- controlled shutdown --------------------------------------------------------------------

    def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        ctx = self.context
        if not self.is_active:
            raise _not_controller()
        if broker_epoch != UNKNOWN_BROKER_EPOCH:
            cached = ctx.broker_epoch(broker_id)
            if cached is not None and broker_epoch < cached:
                raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                                 f"Received controlled shutdown request from an old broker epoch {broker_epoch} for "
                                 f"broker {broker_id}. Current broker epoch is {cached}.")
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker id {broker_id} does not exist.")
        log.info("controller %d: shutting down broker %d", self.broker_id, broker_id)
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = [tp for tp in ctx.partitions_on_broker(broker_id)
                     if len(ctx.partition_replica_assignment(tp)) > 1 and ctx.partition_leadership_info(tp) is not None
                     and not self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic)]
        led = [tp for tp in to_act_on if ctx.partition_leadership_info(tp).leader_and_isr.leader == broker_id]
        followed = [tp for tp in to_act_on if ctx.partition_leadership_info(tp).leader_and_isr.leader != broker_id]
        self.partition_state_machine.handle_state_changes(led, PartitionState.ONLINE, CONTROLLED_SHUTDOWN)
        self.batch.new_batch()
        for tp in followed:
            self.batch.add_stop_replica_request_for_brokers([broker_id], tp, delete_partition=False)
        self.batch.send_requests_to_brokers(ctx.epoch)
        self.replica_state_machine.handle_state_changes([PartitionAndReplica(tp, broker_id) for tp in followed],
                                                        ReplicaState.OFFLINE)
        return sorted(ctx.partition_leaders_on_broker(broker_id))

    # -- leader elections on request, and the automatic rebalance ----------------------------------

    def _process_update_features(self, updates: list[tuple[str, int, int]], validate_only: bool):
        if not self.is_active:
            raise _not_controller()
        node, version = self.zk.get_feature_znode()
        current = {ft.METADATA_VERSION: ft.LATEST_METADATA_VERSION,
                   **ft.finalized_levels(None if node is None else node.features)}
        ctx = self.context
        brokers = {}
        for broker_id in ctx.live_broker_ids:
            info = ctx.broker(broker_id)
            if info is not None:
                brokers[broker_id] = {n: ft.VersionRange(*r) for n, r in info.features.items()}
        try:
            levels = ft.validate_update(current, updates, self.broker_id, brokers)
        except ft.FeatureUpdateError as e:
            return e
        if validate_only:
            return None
        znode = zd.FeatureZNode(2, zd.FeatureZNodeStatus.ENABLED, levels)
        try:
            if node is None:
                epoch = self.zk.create_feature_znode(znode, ctx.epoch_zk_version)
            else:
                epoch = self.zk.update_feature_znode(znode, version, ctx.epoch_zk_version)
        except ControllerMovedError:
            raise
        except Exception as e:
            raise KafkaError(ErrorCode.FEATURE_UPDATE_FAILED,
                             f"Failed to write the finalized features to ZooKeeper: {e!r}") from e
        log.info("controller %d: finalized features %s (epoch %d)", self.broker_id, levels, epoch)
        return epoch

    def _enable_feature_versioning(self) -> None:
        """Kafka's enableFeatureVersioning: a cluster without /feature finalizes the defaults."""
        node, _ = self.zk.get_feature_znode()
        if node is None:
            try:
                self.zk.create_feature_znode(zd.FeatureZNode(2, zd.FeatureZNodeStatus.ENABLED,
                                                             ft.finalized_levels(None)), self.context.epoch_zk_version)
            except NodeExistsError:
                pass

    def _process_replica_leader_election(self, partitions: set[TopicPartition] | None, election_type: int,
                                         admin: bool) -> ElectionResults:
        ctx = self.context
        if not self.is_active:
            if partitions is None:
                return {}
            return dict.fromkeys(partitions, _not_controller())
        if partitions is None:
            partitions = self.zk.get_preferred_replica_election()
        known = set(ctx.all_partitions)
        results: ElectionResults = {}
        electable = []
        for tp in sorted(partitions):
            if tp not in known:
                results[tp] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
            elif self._needs_election(tp, election_type):
                electable.append(tp)
            else:
                results[tp] = KafkaError(ErrorCode.ELECTION_NOT_NEEDED,
                                         "Leader election not needed for topic partition.")
        for tp, result in self._on_replica_election(electable, election_type, admin, auto=False).items():
            if isinstance(result, LeaderAndIsr):
                results[tp] = result.leader
            elif isinstance(result, StateChangeFailedError):
                code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED_ELECTION \
                    else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                results[tp] = KafkaError(code, str(result))
            else:
                results[tp] = _error_of(result)
        return results

    def _needs_election(self, tp: TopicPartition, election_type: int) -> bool:
        ctx = self.context
        info = ctx.partition_leadership_info(tp)
        leader = NO_LEADER if info is None else info.leader_and_isr.leader
        if election_type == PREFERRED_ELECTION:
            return leader != ctx.partition_replica_assignment(tp)[0]
        return leader == NO_LEADER or leader not in ctx.live_broker_ids

    def _on_replica_election(self, partitions: list[TopicPartition], election_type: int, admin: bool,
                             auto: bool) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        if election_type == PREFERRED_ELECTION:
            strategy = PREFERRED
        else:
            # unclean only when an administrator asked for it
            strategy = OFFLINE_ALLOW_UNCLEAN if admin else OFFLINE
        try:
            results = self.partition_state_machine.handle_state_changes(partitions, PartitionState.ONLINE, strategy)
            if not admin:
                for tp, result in results.items():
                    if isinstance(result, ControllerMovedError):
                        raise result
                    if isinstance(result, Exception):
                        log.error("controller %d: leader election for %s failed: %s", self.broker_id, tp, result)
            return results
        finally:
            if not admin and not auto:
                self.zk.delete_preferred_replica_election(self.context.epoch_zk_version)

    def _schedule_auto_leader_rebalance(self, delay_s: float) -> None:
        if not self.config["auto.leader.rebalance.enable"]:
            return
        timer = threading.Timer(delay_s, lambda: self._put("AutoPreferredReplicaLeaderElection",
                                                           self._process_auto_preferred_replica_leader_election))
        timer.daemon = True
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
        self._rebalance_timer = timer
        timer.start()

    def _process_auto_preferred_replica_leader_election(self) -> None:
        if not self.is_active:
            return
        try:
            self._check_and_trigger_auto_leader_rebalance()
        finally:
            self._schedule_auto_leader_rebalance(self.config["leader.imbalance.check.interval.seconds"])

    def _check_and_trigger_auto_leader_rebalance(self) -> None:
        """For each broker, if more than leader.imbalance.per.broker.percentage of the partitions it
        is the preferred leader of are led elsewhere, elect it where it can lead."""
        ctx = self.context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions:
            replicas = ctx.partition_replica_assignment(tp)
            if replicas and not self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
                by_preferred.setdefault(replicas[0], []).append(tp)
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100
        for broker, partitions in sorted(by_preferred.items()):
            elsewhere = [tp for tp in partitions if (info := ctx.partition_leadership_info(tp)) is not None
                         and info.leader_and_isr.leader != broker]
            if len(elsewhere) / len(partitions) <= threshold:
                continue
            candidates = [tp for tp in elsewhere if tp.topic in ctx.all_topics and self._preferred_can_lead(tp)]
            if candidates:
                self._on_replica_election(candidates, PREFERRED_ELECTION, admin=False, auto=True)

    def _preferred_can_lead(self, tp: TopicPartition) -> bool:
        ctx = self.context
        preferred = ctx.partition_replica_assignment(tp)[0]
        info = ctx.partition_leadership_info(tp)
        return ctx.is_replica_online(preferred, tp) and info is not None and preferred in info.leader_and_isr.isr

    # -- partition reassignment -----------------------------------------------------------------

    def _process_api_partition_reassignment(self, reassignments: dict[TopicPartition, list[int] | None]
                                            ) -> dict[TopicPartition, KafkaError | None]:
        if not self.is_active:
            raise _not_controller()
        results: dict[TopicPartition, KafkaError | None] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in reassignments.items():
            error = None if target is None else self._validate_replicas(tp, target)
            if error is not None:
                results[tp] = error
                continue
            built = self._maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                         "No reassignment in progress for this partition.")
            else:
                to_reassign[tp] = built
        results.update(self._maybe_trigger_partition_reassignment(to_reassign))
        return results

    def _validate_replicas(self, tp: TopicPartition, replicas: list[int]) -> KafkaError | None:
        if not replicas:
            return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              "Empty replica list specified in partition reassignment.")
        if len(set(replicas)) != len(replicas):
            return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              f"Duplicate replica ids in partition reassignment replica list: {replicas}")
        if any(r < 0 for r in replicas):
            return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {replicas}")
        new = self.context.partition_full_replica_assignment(tp).reassign_to(replicas)
        if not set(new.adding_replicas) <= self.context.live_broker_ids:
            return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              f"Replica assignment has brokers that are not alive. Replica list: "
                              f"{list(new.adding_replicas)}, live broker list: {sorted(self.context.live_broker_ids)}")
        return None

    def _maybe_build_reassignment(self, tp: TopicPartition, target: list[int] | None) -> ReplicaAssignment | None:
        current = self.context.partition_full_replica_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else target)
        return None if target is None else current.reassign_to(target)

    def _maybe_trigger_partition_reassignment(self, reassignments: dict[TopicPartition, ReplicaAssignment]
                                              ) -> dict[TopicPartition, KafkaError | None]:
        results: dict[TopicPartition, KafkaError | None] = {}
        for tp, reassignment in reassignments.items():
            if self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif not self.context.partition_replica_assignment(tp):
                results[tp] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            else:
                try:
                    self._on_partition_reassignment(tp, reassignment)
                    results[tp] = None
                except ControllerMovedError:
                    raise
                except Exception as e:
                    log.exception("controller %d: reassigning %s failed", self.broker_id, tp)
                    results[tp] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e))
        return results

    def _maybe_resume_reassignments(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        for tp in sorted(self.context.partitions_being_reassigned):
            assignment = self.context.partition_full_replica_assignment(tp)
            if should_resume(tp, assignment):
                self._on_partition_reassignment(tp, assignment)

    def _on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Kafka's three phases: record the union of old and new replicas (U); while the new ones are
        not all in the ISR, bump the epoch and start them (A); once they are, elect among the targets,
        stop and delete the removed replicas, and record the target as the assignment (B)."""
        ctx = self.context
        self.topic_deletion_manager.mark_topic_ineligible_for_deletion([tp.topic], "topic reassignment in progress")
        self._update_current_reassignment(tp, reassignment)
        if not self._is_reassignment_complete(tp, reassignment):
            self._update_leader_epoch_and_send_request(tp, reassignment)
            for replica in reassignment.adding_replicas:
                self.replica_state_machine.handle_state_changes([PartitionAndReplica(tp, replica)], ReplicaState.NEW)
            return
        self.replica_state_machine.handle_state_changes(
            [PartitionAndReplica(tp, r) for r in reassignment.adding_replicas], ReplicaState.ONLINE)
        completed = ReplicaAssignment(reassignment.target_replicas)
        ctx.update_partition_full_replica_assignment(tp, completed)
        self._move_reassigned_partition_leader_if_required(tp, completed)
        self._stop_removed_replicas(tp, reassignment.removing_replicas)
        self._update_replica_assignment_for_partition(tp, completed)
        ctx.partitions_being_reassigned.discard(tp)
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [tp])
        self.topic_deletion_manager.resume_deletion_for_topics([tp.topic])
        log.info("controller %d: reassignment of %s to %s completed", self.broker_id, tp, list(completed.replicas))

    def _update_current_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        ctx = self.context
        current = ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            self._update_replica_assignment_for_partition(tp, reassignment)
            ctx.update_partition_full_replica_assignment(tp, reassignment)
            # a replaced reassignment may have started replicas the new one does not want
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                self._stop_removed_replicas(tp, unneeded)
        ctx.partitions_being_reassigned.add(tp)

    def _is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        state = self.zk.get_topic_partition_state(tp)
        return state is not None and set(assignment.target_replicas) <= set(state.leader_and_isr.isr)

    def _move_reassigned_partition_leader_if_required(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        leader = ctx.partition_leadership_info(tp).leader_and_isr.leader
        if leader in assignment.replicas and ctx.is_replica_online(leader, tp):
            # the leader stays; a new epoch tells it the shrunk replica set
            self._update_leader_epoch_and_send_request(tp, assignment)
        else:
            self.partition_state_machine.handle_state_changes([tp], PartitionState.ONLINE, REASSIGN)

    def _stop_removed_replicas(self, tp: TopicPartition, removed: Iterable[int]) -> None:
        replicas = [PartitionAndReplica(tp, r) for r in removed]
        sm = self.replica_state_machine
        sm.handle_state_changes(replicas, ReplicaState.OFFLINE)
        sm.handle_state_changes(replicas, ReplicaState.DELETION_STARTED)
        sm.handle_state_changes(replicas, ReplicaState.DELETION_SUCCESSFUL)
        sm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT)

    def _update_replica_assignment_for_partition(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        topic_assignment = {p: a for p, a in ctx.partition_assignments.get(tp.topic, {}).items()}
        topic_assignment[tp.partition] = assignment
        self.zk.set_topic_assignment(tp.topic, ctx.topic_ids.get(tp.topic), topic_assignment, ctx.epoch_zk_version)

    def _update_leader_epoch_and_send_request(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        state = self._update_leader_epoch(tp)
        if state is None:
            log.error("controller %d: could not bump the leader epoch of %s being reassigned", self.broker_id, tp)
            return
        self.batch.new_batch()
        self.batch.add_leader_and_isr_request_for_brokers(assignment.origin_replicas, tp, state, False, assignment)
        self.batch.add_leader_and_isr_request_for_brokers(assignment.adding_replicas, tp, state, True, assignment)
        self.batch.send_requests_to_brokers(self.context.epoch)

    def _update_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """The same leader and ISR in a new leader epoch, so the replicas take the new replica set."""
        ctx = self.context
        while True:
            state = self.zk.get_topic_partition_state(tp)
            if state is None:
                raise RuntimeError(f"cannot bump the leader epoch of {tp}: it has no state znode")
            if state.controller_epoch > ctx.epoch:
                raise StateChangeFailedError(f"the state of {tp} was written by a newer controller")
            update = self.zk.update_leader_and_isr({tp: state.leader_and_isr.new_epoch()}, ctx.epoch,
                                                   ctx.epoch_zk_version)
            result = update.finished.get(tp)
            if isinstance(result, Exception):
                raise result
            if result is not None:
                written = LeaderIsrAndControllerEpoch(result, ctx.epoch)
                ctx.put_partition_leadership_info(tp, written)
                return written

    def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        assignment = self.context.partition_full_replica_assignment(tp)
        if self._is_reassignment_complete(tp, assignment):
            self._on_partition_reassignment(tp, assignment)

    def _process_list_partition_reassignments(self, partitions: set[TopicPartition] | None
                                              ) -> dict[TopicPartition, ReplicaAssignment]:
        if not self.is_active:
            raise _not_controller()
        ctx = self.context
        asked = ctx.partitions_being_reassigned if partitions is None else partitions
        return {tp: a for tp in sorted(asked) if (a := ctx.partition_full_replica_assignment(tp)).is_being_reassigned}
