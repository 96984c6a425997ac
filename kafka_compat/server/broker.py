"""The broker: the one composition root (Kafka's KafkaServer).

Everything is built here, in dependency order, and handed its collaborators:
config → log dirs and cluster id → MetadataCache → LogManager → ReplicaManager →
coordinators → request handlers (KafkaApis) → SocketServer. Nothing else
constructs these objects, and none of them reaches back for another through
the broker. `kafka-compat serve` (and so `kafka_compat.testing`) runs this.

Without `zookeeper.connect` the broker is a single node: the LocalController
keeps topics beside the logs and publishes leadership to the ReplicaManager and
MetadataCache itself. With it the broker is a member of a ZooKeeper cluster, as
Kafka's ZooKeeper-mode broker:

- it connects KafkaZkClient (blocking: always in worker threads), takes the
  cluster id from /cluster/id (create-or-get), checked against meta.properties;
- the MetadataCache is fed only by UpdateMetadata, partitions only by
  LeaderAndIsr and StopReplica (server/control_requests.py);
- followers fetch through the ReplicaFetcherManager, leaders send ISR changes to
  the controller through the AlterPartitionManager, both over NetworkClients on
  the inter-broker listener;
- it registers /brokers/ids/<id> once it listens (server/zk_registration.py),
  stops acting as leader once its ZooKeeper session may have expired, and
  registers again (a new broker epoch) after losing it;
- producer id blocks come from /latest_producer_id_block;
- it stands for controller and writes topic changes to ZooKeeper (zk_controller_service.py), through
  factories (`controller_factory`, `admin_manager_factory`) that get a ClusterLinks and that a test
  may replace;
- on SIGTERM (``stop``) it first asks the controller to move its leadership away
  (ControlledShutdown) when controlled.shutdown.enable.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable

from kafka_compat.storage.log_manager import LogManager, hosted_topics

from ..configdef import ConfigError
from ..controller.controller_metrics import ControllerMetrics
from ..endpoint import EndPoint, SecurityProtocol
from ..group import GroupCoordinator
from ..group.group_config import GroupConfigManager
from ..network.client import DisconnectedError, NetworkClient, Node, ThreadSafeSender
from ..network.connection_quotas import UNLIMITED, ConnectionQuotas, parse_overrides
from ..network.heap import retain_freed_buffers
from ..network.socket_server import BrokerStartError, SocketServer
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.frames import CONTROLLED_SHUTDOWN
from ..protocol.messages.controlled_shutdown import ControlledShutdownRequest
from ..sanitizer import desanitize
from ..security.authorizer import CIDR_ACL_METADATA_VERSION, configured_authorizer
from ..security.channel_builder import listener_security
from ..security.sasl_client import ClientSecurity, client_security
from ..security.stores import SecurityStores, file_security_stores
from ..security.zk_stores import zk_security_stores
from ..sentinels import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from ..transaction import TransactionCoordinator
from ..zk import zk_data as zd
from ..zk.kafka_zk_client import KafkaZkClient
from . import meta_properties
from .acl_apis import AclApis
from .alter_partition_manager import AlterPartitionManager
from .api_versions import ApiVersionsApi
from .auth_helper import NO_AUTHORIZER, AuthHelper
from .broker_topic_stats import BrokerTopicStats
from .client_metrics_manager import ClientMetricsManager
from .client_quota_manager import CONNECTION_CREATION_RATE, DEFAULT, QuotaManagers
from .client_quotas import ClientQuotasApi
from .client_telemetry import ClientTelemetryApi
from .config_store import ConfigStore, LocalConfigStore, ZkConfigStore
from .configs import ConfigsApi
from .consumer_groups import ConsumerGroupsApi
from .control_requests import ControlRequestsApi
from .controller_mutation_quota import ControllerMutationQuotaManager
from .create_topics import CreateTopicsApi
from .delegation_token_manager import DelegationTokenManager, LocalTokenStore, ZkTokenStore
from .delegation_tokens import DelegationTokenApis
from .delete_topics import DeleteTopicsApi
from .describe_cluster import DescribeClusterApi
from .describe_log_dirs import DescribeLogDirsApi
from .describe_producers import DescribeProducersApi
from .describe_topic_partitions import DescribeTopicPartitionsApi
from .dynamic_broker_config import CONNECTION_CONFIGS, DynamicBrokerConfig, topic_defaults_changed
from .dynamic_config_manager import DynamicConfigManager
from .elect_leaders import ElectLeadersApi
from .features import (
    METADATA_VERSION,
    SHARE_VERSION,
    SUPPORTED,
    TRANSACTION_VERSION,
    FeatureCache,
    LocalFeatureManager,
    LocalFeatureStore,
)
from .fetch import FetchApi
from .fetch_session import FetchSessionCache
from .find_coordinator import FindCoordinatorApi
from .groups import GroupsApi
from .init_producer_id import InitProducerIdApi
from .kafka_apis import KafkaApis, supported_versions
from .local_controller import LocalController
from .local_reassignments import LocalReassignmentsApi
from .log_dir_failure_channel import LogDirFailureChannel
from .metadata import MetadataApi
from .metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from .offsets import OffsetsApi
from .produce import ProduceApi
from .producer_id_manager import LocalProducerIdBlocks, ProducerIdManager
from .prometheus import BrokerMetrics, PrometheusEndpoint
from .registry import marked_handlers
from .replica_fetcher import FetcherConfig, ReplicaFetcherManager
from .replica_manager import ReplicaManager
from .request_channel import RequestChannel
from .sasl_apis import SaslApis
from .scram_apis import ScramApis
from .share.persister import DefaultStatePersister
from .share.share_coordinator import ShareCoordinator
from .share.share_partition_manager import SharePartitionManager
from .share.share_session_cache import ShareSessionCache
from .share_fetch import ShareFetchApi
from .share_groups import ShareGroupsApi
from .share_state import ShareStateApi
from .streams_groups import StreamsGroupsApi
from .topics import TopicRegistry
from .transactions import TransactionsApi
from .txn_inter_broker import AddPartitionsToTxnManager, TxnMarkerSender
from .update_features import UpdateFeaturesApi
from .write_txn_markers import WriteTxnMarkersApi
from .zk_config_manager import ZkConfigManager
from .zk_controller_service import ZkControllerService, zk_admin_manager
from .zk_features import ZkFeatureManager
from .zk_registration import ZkBrokerRegistration
from .zk_topic_configs import ZkTopicConfigs

log = logging.getLogger(__name__)


__all__ = ["Broker", "BrokerStartError", "ClusterLinks", "HANDLER_CLASSES", "advertised_api_versions"]

# Every request handler class of a single node; ApiVersions advertises exactly what their methods register.
HANDLER_CLASSES = (ApiVersionsApi, ProduceApi, FetchApi, OffsetsApi, MetadataApi, InitProducerIdApi,
                   FindCoordinatorApi, GroupsApi, ConsumerGroupsApi, ShareGroupsApi, ShareFetchApi, StreamsGroupsApi,
                   CreateTopicsApi, DeleteTopicsApi,
                   DescribeClusterApi, DescribeLogDirsApi, DescribeProducersApi, DescribeTopicPartitionsApi,
                   ElectLeadersApi, LocalReassignmentsApi, ConfigsApi, ClientTelemetryApi, ClientQuotasApi,
                   SaslApis, AclApis, ScramApis, TransactionsApi, WriteTxnMarkersApi, UpdateFeaturesApi,
                   DelegationTokenApis, ShareStateApi)
CONTROLLED_SHUTDOWN_VERSION = 3
TXN_REQUEST_TIMEOUT_MS = 30000      # Kafka's request.timeout.ms for markers and KIP-890 checks


def enabled_handler_classes(config=None) -> tuple:
    """The handler classes this configuration serves: the KIP-848 APIs only with the consumer protocol on,
    the KIP-1071 ones only with the streams protocol on."""
    if config is None:
        return HANDLER_CLASSES
    protocols = config["group.coordinator.rebalance.protocols"]
    off = {c for c, name in ((ConsumerGroupsApi, "consumer"), (StreamsGroupsApi, "streams")) if name not in protocols}
    return tuple(c for c in HANDLER_CLASSES if c not in off)


def advertised_api_versions(config=None) -> dict[int, tuple[int, int]]:
    return supported_versions(enabled_handler_classes(config),
                              config is not None and config["unstable.api.versions.enable"])


@dataclass(frozen=True)
class ClusterLinks:
    """What the ZooKeeper controller and the topic admin manager are built with (their factories' argument).

    ``send(broker, api_key, api_version, body)`` returns a ``concurrent.futures.Future`` of the response
    body and may be called from any thread; ``broker`` is a zk_data.BrokerInfo, a MetadataCache BrokerInfo
    or a broker id, reached on the inter-broker listener. ``broker_epoch()`` is this broker's registration
    (None while it is not registered).
    """

    config: Any
    broker_id: int
    zk_client: KafkaZkClient
    send: ThreadSafeSender
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    topic_configs: ZkTopicConfigs
    broker_epoch: Callable[[], int | None]
    loop: asyncio.AbstractEventLoop
    controller_metrics: ControllerMetrics | None = None    # the broker's gauges, fed by the active controller
    auth: AuthHelper = NO_AUTHORIZER        # the ACL checks of the controller's APIs (CLUSTER_ACTION, ALTER, ...)
    config_manager: ZkConfigManager | None = None   # the broker's one /config/changes listener: subscribe to it


class ClusterAdminUnavailable:
    """Stands in for the ZooKeeper admin manager until one is given: topic configs are read from ZooKeeper,
    every change is refused (the controller owns topics)."""

    def __init__(self, topic_configs: ZkTopicConfigs):
        self.topic_configs_source = topic_configs
        self.on_topic_deleted: list = []

    def topic_configs(self, topic: str) -> dict[str, str]:
        return self.topic_configs_source.topic_configs(topic)

    def log_config(self, topic: str):
        return self.topic_configs_source.log_config(topic)

    def _refuse(self, *args, **kwargs):
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "this broker has no ZooKeeper admin manager to change topics")

    create_topic = delete_topic = create_partitions = set_topic_configs = check_new_topic = _refuse

    def check_configs(self, configs: dict[str, str]) -> dict[str, str]:
        return configs


class Broker:
    def __init__(self, config, *, retain_freed_buffers: bool = False, security_stores: SecurityStores | None = None,
                 config_store: ConfigStore | None = None,
                 controller_factory: Callable[[ClusterLinks], Any] | None = ZkControllerService,
                 admin_manager_factory: Callable[[ClusterLinks, Any], Any] | None = zk_admin_manager):
        """``retain_freed_buffers``: tune this process's malloc for Produce frames (the CLI's broker process).
        ``security_stores``: where ACLs and SCRAM credentials live; ``config_store``: where dynamic configs
        and quotas live. By default: in ZooKeeper when zookeeper.connect is set (a cluster member keeps
        both on its own ZooKeeper client), else files in the first log dir.

        In a cluster (zookeeper.connect set), ``controller_factory(links)`` builds the ZooKeeper controller
        (an object with ``startup()`` and ``shutdown()``, both blocking, and optionally ``api_handlers()``
        giving handler objects for the APIs a controller answers: ControlledShutdown, AlterPartition...;
        they take the place of a single node's handlers of the same APIs), and
        ``admin_manager_factory(links, controller)`` the topic admin (LocalController's interface:
        create_topic, delete_topic, create_partitions, set_topic_configs, topic_configs..., optionally
        the coroutines ``startup()`` / ``shutdown()`` and ``try_complete_delayed_topic_operations``).
        Both default to Kafka's (zk_controller_service.py), so ``Broker(config)`` is a whole member; with
        None for both the broker follows a controller elsewhere and refuses topic changes.
        """
        self.config = config
        self.config_store = config_store
        self.quotas: QuotaManagers | None = None
        self.broker_topic_stats = BrokerTopicStats()
        self.controller_metrics = ControllerMetrics()
        self.dynamic_config: DynamicConfigManager | None = None
        self.connection_quotas: ConnectionQuotas | None = None
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.share_sessions = ShareSessionCache(config["group.share.max.share.sessions"])
        self.share_partition_manager: SharePartitionManager | None = None
        self.share_coordinator: ShareCoordinator | None = None
        self.share_persister: DefaultStatePersister | None = None
        self.share_channel: NetworkClient | None = None         # the persister's calls to other brokers
        self._share_fetch_api: ShareFetchApi | None = None
        self.features = FeatureCache()          # the finalized feature levels (KIP-584) this broker acts on
        self.feature_manager: LocalFeatureManager | ZkFeatureManager | None = None
        self.request_channel: RequestChannel | None = None
        self.prometheus: PrometheusEndpoint | None = None
        self._retain_freed_buffers = retain_freed_buffers
        self.security_stores = security_stores
        self.token_manager: DelegationTokenManager | None = None
        self._token_expiry: asyncio.Task | None = None
        self.controller_factory = controller_factory
        self.admin_manager_factory = admin_manager_factory
        self.broker_id = config.broker_id
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.cluster_mode = bool(config["zookeeper.connect"])
        self.cluster_id: str | None = None
        self.metadata_cache: MetadataCache | None = None
        self.controller: Any = None               # LocalController (single node) or the topic admin manager
        self.zk_controller: Any = None            # the ZooKeeper controller (cluster)
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.remote_log_manager = None
        self.group_coordinator: GroupCoordinator | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.txn_marker_writer: WriteTxnMarkersApi | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.add_partitions_to_txn: AddPartitionsToTxnManager | None = None
        self.txn_channel: NetworkClient | None = None           # markers and KIP-890 checks to other brokers
        self.rlmm_channel: NetworkClient | None = None          # __remote_log_metadata led by other brokers
        self.apis: KafkaApis | None = None
        self.authorizer = None
        self.listener_security: dict = {}
        self._stores_zk: KafkaZkClient | None = None     # the stores' own ZooKeeper client, when we made one
        self.socket_server: SocketServer | None = None
        self.zk_client: KafkaZkClient | None = None
        self.log_dir_failure_channel: LogDirFailureChannel | None = None     # a cluster member's
        self.registration: ZkBrokerRegistration | None = None
        self.topic_configs: ZkTopicConfigs | None = None
        self.config_manager: ZkConfigManager | None = None    # /config/changes: quotas, topics, broker configs, SCRAM
        self.alter_partition_manager: AlterPartitionManager | None = None
        self.to_controller: NetworkClient | None = None       # AlterPartition, ControlledShutdown
        self.controller_channel: NetworkClient | None = None  # the controller's requests to brokers
        self.sender: ThreadSafeSender | None = None
        self.started = False

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        connection_quotas = self.connection_quotas = self._connection_quotas()   # bad overrides stop us here
        if self._retain_freed_buffers:
            retain_freed_buffers()
        # startup makes millions of long-lived objects at 50,000 partitions and few cycles: the
        # collector's passes over them meanwhile would cost a fifth of the start's CPU for nothing
        collecting = gc.isenabled()
        gc.disable()
        try:
            if self.cluster_mode:
                await self._start_cluster(connection_quotas)
            else:
                await self._start_single_node(connection_quotas)
            await self._start_prometheus()
        finally:
            if collecting:
                gc.enable()
        # what startup made (a log, a partition, a segment per partition: millions of objects at 50,000
        # partitions) lives until shutdown: the collector need not walk it again on every full pass
        gc.freeze()
        self.started = True
        log.info("kafka-compat %s %d serving %s (cluster %s)", "broker" if self.cluster_mode else "node",
                 self.broker_id, ", ".join(f"{b.listener_name}://{b.host or ''}:{b.port}" for b in self.bound),
                 self.cluster_id)

    async def _start_dynamic_config(self, zk_client: KafkaZkClient | None) -> None:
        """Dynamic configs and quotas, before the logs (as Kafka's DynamicBrokerConfig.initialize): they
        load with their defaults. ``zk_client``: a cluster member's own client, which keeps them in ZooKeeper."""
        cfg = self.config
        self.quotas = QuotaManagers.from_config(cfg)
        store = self.config_store
        if store is None and zk_client is not None:
            store = ZkConfigStore(zk_client, self.config_manager)
        elif store is None:
            store = (ZkConfigStore(await asyncio.to_thread(self._stores_zk_client)) if cfg["zookeeper.connect"]
                     else LocalConfigStore(self.log_dirs[0]))
        self.dynamic_config = DynamicConfigManager(store, self.quotas, DynamicBrokerConfig(cfg, self.broker_id))
        self.dynamic_config.register_handler("ips", ip_config_handler(self.connection_quotas))
        self.group_configs = GroupConfigManager(cfg)
        self.client_metrics = ClientMetricsManager(cfg["telemetry.max.bytes"])
        self.dynamic_config.register_handler("client-metrics", lambda name, configs: (
            self.client_metrics.update_subscription(desanitize(name), configs)))
        self.dynamic_config.register_handler("groups", lambda name, configs: self.group_configs.update(
            desanitize(name), configs))
        self.dynamic_config.broker_config.add_validator(
            lambda candidate: parse_overrides(candidate["max.connections.per.ip.overrides"]))
        self.dynamic_config.broker_config.add_reconfigurable(connection_limits_changed(cfg, self.connection_quotas))
        await self.dynamic_config.startup()

    async def _start_prometheus(self) -> None:
        cfg = self.config
        if cfg["prometheus.listener"] is None:
            return
        self.prometheus = PrometheusEndpoint(cfg["prometheus.listener"], BrokerMetrics(
            broker_id=self.broker_id, request_channel=self.request_channel,
            broker_topic_stats=self.broker_topic_stats, replica_manager=self.replica_manager,
            socket_server=self.socket_server, group_coordinator=self.group_coordinator,
            controller_metrics=self.controller_metrics, quotas=self.quotas, fetch_sessions=self.fetch_sessions,
            client_metrics=self.client_metrics))
        try:
            self.prometheus.start()
        except OSError as e:
            await self.stop()
            raise BrokerStartError(f"cannot serve metrics at {cfg['prometheus.listener']}: "
                                   f"{e.strerror or e}") from e

    def _alter_log_dirs_settings(self) -> dict:
        """What ReplicaManager moves replicas between log dirs with; cordoned.log.dirs follows its dynamic value."""
        dynamic = self.dynamic_config.broker_config

        def cordon(changed: set[str]) -> None:
            if "cordoned.log.dirs" in changed and self.log_manager is not None:
                self.log_manager.cordoned_log_dirs = frozenset(map(os.path.abspath, self.config.cordoned_log_dirs))
        dynamic.add_reconfigurable(cordon)
        return {"alter_log_dirs_threads": self.config["num.replica.alter.log.dirs.threads"],
                "alter_log_dirs_rate": lambda: dynamic.current["replica.alter.log.dirs.io.max.bytes.per.second"]}

    def _new_log_manager(self, default_config, topic_config, failures: LogDirFailureChannel | None = None
                         ) -> LogManager:
        """``failures``: a cluster member's LogDirFailureChannel, told of the background work's I/O errors."""
        cfg = self.config
        # The flusher wakes at least every second so flush.ms is honoured even when
        # log.flush.scheduler.interval.ms keeps Kafka's "never" default.
        manager = LogManager(
            self.log_dirs, default_config, topic_config=topic_config,
            retention_check_interval_ms=cfg["log.retention.check.interval.ms"],
            flush_check_interval_ms=min(cfg["log.flush.scheduler.interval.ms"], 1000),
            checkpoint_interval_ms=cfg["log.flush.offset.checkpoint.interval.ms"] or 60000,
            cleaner_enabled=cfg["log.cleaner.enable"], cleaner_backoff_ms=cfg["log.cleaner.backoff.ms"],
            producer_id_expiration_ms=cfg["producer.id.expiration.ms"],
            recovery_threads_per_data_dir=cfg["num.recovery.threads.per.data.dir"],
            dir_failed=None if failures is None else lambda d, what, e: failures.maybe_add_offline_log_dir(
                d, f"error while {what} in dir {d}", e))
        manager.cordoned_log_dirs = frozenset(map(os.path.abspath, cfg.cordoned_log_dirs))
        return manager

    def _new_socket_server(self, connection_quotas: ConnectionQuotas) -> SocketServer:
        """Requests pass the RequestChannel (quotas, request metrics) on their way to KafkaApis."""
        cfg = self.config
        self.request_channel = RequestChannel(self.apis.handle, self.quotas,
                                              metrics=cfg["prometheus.listener"] is not None)
        return SocketServer(
            cfg.listeners, self.request_channel.handle, self.apis.supported_versions(),
            request_done=self.request_channel.request_done,
            max_request_bytes=cfg["socket.request.max.bytes"], send_buffer_bytes=cfg["socket.send.buffer.bytes"],
            receive_buffer_bytes=cfg["socket.receive.buffer.bytes"],
            connections_max_idle_ms=cfg["connections.max.idle.ms"], security=self.listener_security,
            failed_authentication_delay_ms=cfg["connection.failed.authentication.delay.ms"],
            connection_quotas=connection_quotas, inter_broker_listener=cfg.inter_broker_listener_name,
            disconnect_listeners=[self._share_fetch_api.on_disconnect] if self._share_fetch_api else [])

    async def _start_socket_server(self, connection_quotas: ConnectionQuotas) -> None:
        self.socket_server = self._new_socket_server(connection_quotas)
        try:
            await self.socket_server.start()
        except BrokerStartError:
            await self.stop()
            raise

    async def _start_single_node(self, connection_quotas: ConnectionQuotas) -> None:
        cfg = self.config
        self.cluster_id = self._prepare_dirs()
        self.feature_manager = LocalFeatureManager(LocalFeatureStore(self.log_dirs[0]), self.features, self.broker_id)
        try:
            await asyncio.to_thread(self.feature_manager.startup)
        except (OSError, ValueError) as e:
            raise BrokerStartError(f"cannot load the finalized features: {e}") from e
        await asyncio.to_thread(self._security)            # the stores may read files: off the event loop
        await self._start_dynamic_config(None)
        self.metadata_cache = MetadataCache(self.broker_id, self.cluster_id)
        self.controller = LocalController(cfg, self.broker_id, TopicRegistry(self.log_dirs[0]), self.metadata_cache)
        self.log_manager = self._new_log_manager(self.controller.log_config(""), self.controller.log_config)
        # Loading recovers logs after an unclean shutdown: keep that off the event loop.
        await asyncio.to_thread(self.log_manager.startup)
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.controller.log_config,
            hw_checkpoint_interval_ms=cfg["replica.high.watermark.checkpoint.interval.ms"],
            fetch_purge_interval=cfg["fetch.purgatory.purge.interval.requests"],
            produce_purge_interval=cfg["producer.purgatory.purge.interval.requests"],
            broker_topic_stats=self.broker_topic_stats, **self._alter_log_dirs_settings())
        self.replica_manager.startup()
        self.dynamic_config.broker_config.add_reconfigurable(topic_defaults_changed(self.replica_manager))
        self.controller.startup(self.replica_manager)
        self.controller_metrics.active_controller_count = 1     # a single node is its own controller
        self.group_coordinator = GroupCoordinator(cfg, self.broker_id, self.replica_manager, self.metadata_cache,
                                                  self.controller, group_configs=self.group_configs)
        # Kafka forgets the offsets groups committed for a deleted topic's partitions.
        self.controller.on_topic_deleted.append(self.group_coordinator.on_topic_deleted)
        # Consumer groups reassign when their topics appear, go or grow.
        self.metadata_cache.add_topic_listener(self.group_coordinator.on_topics_changed)
        await self.group_coordinator.startup()
        self.producer_ids = ProducerIdManager(LocalProducerIdBlocks(self.log_dirs[0]))
        await self._start_transactions(elect_locally=True)
        await self._start_share_coordinator(elect_locally=True)
        await self._start_remote_log_manager(cluster=False)
        self.apis = KafkaApis(self._handlers(), cfg["unstable.api.versions.enable"])
        self._start_token_expiry()
        await self._start_socket_server(connection_quotas)
        self.metadata_cache.update_brokers([self._broker_info()], controller_id=self.broker_id)

    async def _start_remote_log_manager(self, cluster: bool) -> None:
        """Tiered storage (KIP-405) when remote.log.storage.system.enable: the metadata topic loaded, then the
        copy and expiration task running and remote reads wired into fetches."""
        if not self.config["remote.log.storage.system.enable"]:
            return
        from .remote_log_manager import RemoteLogManager
        send = None
        if cluster:         # metadata partitions led elsewhere are written and read over the inter-broker listener
            self.rlmm_channel = NetworkClient(f"broker-{self.broker_id}-rlmm",
                                              request_timeout_ms=self.config["request.timeout.ms"],
                                              max_response_bytes=64 << 20, security=self.inter_broker_security())

            async def send(broker_id, api_key, api_version, body):
                return await self.rlmm_channel.send(self._inter_broker_node(broker_id), api_key, api_version, body)
        try:
            rlm = RemoteLogManager(self.config, self.broker_id, self.replica_manager, self.metadata_cache,
                                   self.controller, cluster=cluster, send=send)
        except ValueError as e:
            raise BrokerStartError(f"tiered storage: {e}") from e
        await rlm.startup()
        self.remote_log_manager = self.replica_manager.remote_log_manager = rlm
        if not cluster:
            self.controller.on_topic_deleted.append(rlm.on_topic_deleted)

    async def _start_transactions(self, elect_locally: bool) -> None:
        # Markers for partitions led here take the WriteTxnMarkers handler's own path.
        self.txn_marker_writer = WriteTxnMarkersApi(self.replica_manager, self.group_coordinator,
                                                    self.group_coordinator.clock, AuthHelper(self.authorizer))
        send = None
        if not elect_locally:       # a cluster: coordinators and partition leaders talk over the inter-broker listener
            self.txn_channel = NetworkClient(f"broker-{self.broker_id}-txn", request_timeout_ms=TXN_REQUEST_TIMEOUT_MS,
                                             security=self.inter_broker_security())

            async def send(broker_id, api_key, api_version, body):
                return await self.txn_channel.send(self._inter_broker_node(broker_id), api_key, api_version, body)
        self.txn_coordinator = TransactionCoordinator(self.config, self.broker_id, self.replica_manager,
                                                      self.metadata_cache, self.controller, self.producer_ids,
                                                      self.txn_marker_writer.write_markers,
                                                      send_remote=None if send is None else TxnMarkerSender(send),
                                                      elect_locally=elect_locally,
                                                      transaction_version=lambda: self.features.finalized_level(
                                                          TRANSACTION_VERSION))
        self.add_partitions_to_txn = AddPartitionsToTxnManager(self.broker_id, self.txn_coordinator,
                                                               self.metadata_cache, send)
        await self.txn_coordinator.startup()

    async def _start_share_coordinator(self, elect_locally: bool) -> None:
        """The share coordinator, and the persister that share partitions keep their state through: in-process
        on a single node, which leads every `__share_group_state` partition; in a cluster LeaderAndIsr says
        which partitions this broker loads, and the others are reached over the inter-broker listener."""
        cfg = self.config
        self.share_coordinator = ShareCoordinator(
            cfg, self.replica_manager, self.metadata_cache, self.controller,
            replication_factor=1 if elect_locally else cfg["share.coordinator.state.topic.replication.factor"])
        send = None
        if not elect_locally:
            self.share_channel = NetworkClient(f"broker-{self.broker_id}-share", request_timeout_ms=5000,
                                               security=self.inter_broker_security())

            async def send(broker_id, api_key, api_version, body):
                return await self.share_channel.send(self._inter_broker_node(broker_id), api_key, api_version, body)
        self.share_persister = DefaultStatePersister(self.share_coordinator, self.metadata_cache, self.broker_id,
                                                     send)
        await self.share_coordinator.startup(elect_locally)

    async def _start_cluster(self, connection_quotas: ConnectionQuotas) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        self._prepare_dirs(write=False)
        self.zk_client = KafkaZkClient.from_config(cfg)
        self.config_manager = ZkConfigManager(self.zk_client)     # started once everyone subscribed
        try:
            await asyncio.to_thread(self.zk_client.start)
            await asyncio.to_thread(self.zk_client.create_top_level_paths)
            self.cluster_id = await asyncio.to_thread(self._cluster_id)
            self.feature_manager = ZkFeatureManager(self.zk_client, self.features)
            await asyncio.to_thread(self.feature_manager.startup)      # follows /feature from now on
            if self.security_stores is None:            # ACLs and SCRAM credentials in ZooKeeper, on our client
                self.security_stores = zk_security_stores(self.zk_client, self.config_manager)
            await asyncio.to_thread(self._security)
            await self._start_dynamic_config(self.zk_client)   # quotas and dynamic configs on our client too
        except BrokerStartError:
            await self.stop()
            raise
        except Exception as e:
            await self.stop()
            raise BrokerStartError(f"cannot use ZooKeeper at {cfg['zookeeper.connect']}: {e or type(e).__name__}") \
                from e
        self.metadata_cache = MetadataCache(self.broker_id, self.cluster_id)
        self.topic_configs = ZkTopicConfigs(self.zk_client, cfg, self._topic_config_changed)
        self.topic_configs.follow(self.config_manager, loop)
        self.log_dir_failure_channel = LogDirFailureChannel()
        self.log_manager = self._new_log_manager(self.topic_configs.log_config(""), self.topic_configs.log_config,
                                                 self.log_dir_failure_channel)
        await asyncio.to_thread(self.topic_configs.load, hosted_topics(self.log_manager.log_dirs))  # before loading
        await asyncio.to_thread(self.log_manager.startup)
        client_id = f"broker-{self.broker_id}"
        try:        # every inter-broker connection logs in as the inter-broker listener's settings say
            security = self.inter_broker_security()
        except (ConfigError, ValueError) as e:
            await self.stop()
            raise BrokerStartError(str(e)) from e
        self.to_controller = NetworkClient(f"{client_id}-to-controller",
                                           request_timeout_ms=cfg["controller.socket.timeout.ms"], security=security)
        self.controller_channel = NetworkClient(f"controller-{self.broker_id}",
                                                request_timeout_ms=cfg["controller.socket.timeout.ms"],
                                                security=security)
        self.sender = ThreadSafeSender(self.controller_channel, loop, self._inter_broker_node)
        self.alter_partition_manager = AlterPartitionManager(self.broker_id, self._broker_epoch_or_unknown,
                                                             self._send_to_controller)
        fetcher_config = FetcherConfig.from_broker_config(cfg)
        max_response = max(cfg["replica.fetch.response.max.bytes"], cfg["replica.fetch.max.bytes"],
                           cfg["message.max.bytes"]) + (1 << 20)

        def fetcher_client() -> NetworkClient:
            return NetworkClient(f"{client_id}-fetcher", request_timeout_ms=cfg["replica.socket.timeout.ms"],
                                 max_response_bytes=max(max_response, 100 * 1024 * 1024), security=security)

        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.topic_configs.log_config,
            hw_checkpoint_interval_ms=cfg["replica.high.watermark.checkpoint.interval.ms"],
            fetch_purge_interval=cfg["fetch.purgatory.purge.interval.requests"],
            produce_purge_interval=cfg["producer.purgatory.purge.interval.requests"],
            broker_topic_stats=self.broker_topic_stats, metadata_cache=self.metadata_cache,
            alter_partition_manager=self.alter_partition_manager,
            fetcher_manager_factory=lambda rm: ReplicaFetcherManager(rm, fetcher_client, fetcher_config,
                                                                     self._broker_epoch_or_unknown),
            inter_broker_listener=cfg.inter_broker_listener_name,
            replica_lag_time_max_ms=cfg["replica.lag.time.max.ms"],
            rack_aware_reads=(cfg["replica.selector.class"] or "").endswith(".RackAwareReplicaSelector"),
            log_dir_failure_channel=self.log_dir_failure_channel, **self._alter_log_dirs_settings())
        self.replica_manager.startup()
        self.log_dir_failure_channel.start(loop, self._on_log_dir_failure)
        self.dynamic_config.broker_config.add_reconfigurable(topic_defaults_changed(self.replica_manager))
        links = ClusterLinks(cfg, self.broker_id, self.zk_client, self.sender, self.metadata_cache,
                             self.replica_manager, self.topic_configs, self._broker_epoch, loop,
                             self.controller_metrics, AuthHelper(self.authorizer), self.config_manager)
        # the ZooKeeper controller and the admin manager (CreateTopics, DeleteTopics, CreatePartitions,
        # AlterConfigs through ZooKeeper): Kafka's by default, or what the embedder gave
        if self.controller_factory is not None:
            self.zk_controller = self.controller_factory(links)
            # UpdateFeatures goes to the KafkaController the service runs (as the admin manager's topic changes)
            self.feature_manager.controller = getattr(self.zk_controller, "controller", None)
        self.controller = (self.admin_manager_factory(links, self.zk_controller)
                           if self.admin_manager_factory is not None else ClusterAdminUnavailable(self.topic_configs))
        if hasattr(self.controller, "startup"):
            await self.controller.startup()
        await asyncio.to_thread(self.config_manager.startup)     # every subscriber is in
        self.group_coordinator = GroupCoordinator(cfg, self.broker_id, self.replica_manager, self.metadata_cache,
                                                  self.controller,
                                                  offsets_replication_factor=cfg["offsets.topic.replication.factor"],
                                                  group_configs=self.group_configs)
        # Consumer groups reassign when their topics appear, go or grow (UpdateMetadata feeds the cache here).
        self.metadata_cache.add_topic_listener(self.group_coordinator.on_topics_changed)
        await self.group_coordinator.startup()
        self.producer_ids = ProducerIdManager(self._zk_producer_id_block)
        await self._start_transactions(elect_locally=False)
        await self._start_share_coordinator(elect_locally=False)
        try:
            await self._start_remote_log_manager(cluster=True)
        except BrokerStartError:
            await self.stop()
            raise
        handlers = self._handlers()
        handlers.append(ControlRequestsApi(
            self.broker_id, self.replica_manager, self.metadata_cache, self.group_coordinator, self._broker_epoch,
            self.topic_configs, metadata_listeners=self._metadata_listeners(), txn_coordinator=self.txn_coordinator,
            wait_registered=self._wait_registered, auth=AuthHelper(self.authorizer),
            share_coordinator=self.share_coordinator,
            leadership_lost=[self.share_partition_manager.on_leadership_lost] if self.share_partition_manager else []))
        if self.zk_controller is not None and hasattr(self.zk_controller, "api_handlers"):
            handlers = replace_handlers(handlers, self.zk_controller.api_handlers())
        self.apis = KafkaApis(handlers, cfg["unstable.api.versions.enable"])
        self._start_token_expiry()
        self._api_versions_api(handlers).set_supported_versions(self.apis.supported_versions())
        await self._start_socket_server(connection_quotas)
        self.registration = ZkBrokerRegistration(
            self.zk_client, self._zk_broker_info, loop, on_suspended=self._on_zk_suspended,
            on_resumed=self._on_zk_resumed, on_lost=self._on_zk_session_lost, on_registered=self._on_registered)
        try:
            await self.registration.start()
        except Exception as e:
            await self.stop()
            raise BrokerStartError(f"cannot register broker {self.broker_id} in ZooKeeper: {e}") from e
        if self.zk_controller is not None:
            await asyncio.to_thread(self.zk_controller.startup)

    def _stores_zk_client(self) -> KafkaZkClient:
        """The ZooKeeper client of the stores this broker opens itself (blocking: from a worker thread)."""
        if self._stores_zk is None:
            self._stores_zk = KafkaZkClient.from_config(self.config).start()
        return self._stores_zk

    def _connection_quotas(self) -> ConnectionQuotas:
        cfg = self.config
        try:
            overrides = parse_overrides(cfg["max.connections.per.ip.overrides"])
        except ValueError as e:
            raise BrokerStartError(str(e)) from e
        quotas = ConnectionQuotas(cfg["max.connections"], cfg["max.connections.per.ip"], overrides,
                                  max_connection_rate=cfg["max.connection.creation.rate"],
                                  samples=cfg["quota.window.num"], window_seconds=cfg["quota.window.size.seconds"])
        for endpoint in cfg.listeners:          # listener.name.<l>.max.connections and .max.connection.creation.rate
            own = cfg.listener_config(endpoint.listener_name)
            prefix = f"listener.name.{endpoint.listener_name.lower()}."
            quotas.set_listener_limits(
                endpoint.listener_name,
                own["max.connections"] if prefix + "max.connections" in cfg.originals else UNLIMITED,
                own["max.connection.creation.rate"] if prefix + "max.connection.creation.rate" in cfg.originals
                else UNLIMITED)
        return quotas

    def _security(self) -> None:
        """Credential and ACL stores, the authorizer, and each listener's TLS and SASL settings."""
        cfg = self.config
        if self.security_stores is None and cfg["zookeeper.connect"]:
            self.security_stores = zk_security_stores(self._stores_zk_client())
        elif self.security_stores is None:
            self.security_stores = file_security_stores(self.log_dirs[0])
        try:
            self.authorizer = configured_authorizer(cfg["authorizer.class.name"], cfg.originals,
                                                    self.security_stores.acls)
            if hasattr(self.authorizer, "cidr_hosts_supported"):
                self.authorizer.cidr_hosts_supported = lambda: self.features.finalized_level(
                    METADATA_VERSION) >= CIDR_ACL_METADATA_VERSION
            if self.token_manager is None:
                zk = self.zk_client or (self._stores_zk_client() if cfg["zookeeper.connect"] else None)
                store = ZkTokenStore(zk) if zk is not None else LocalTokenStore(self.log_dirs[0])
                self.token_manager = DelegationTokenManager(cfg, store)
            self.token_manager.load()
            self.listener_security = {
                e.listener_name: listener_security(e.listener_name, e.security_protocol,
                                                   cfg.listener_config(e.listener_name),
                                                   self.security_stores.credentials, self.token_manager)
                for e in cfg.listeners if e.security_protocol is not SecurityProtocol.PLAINTEXT}
        except (ConfigError, ValueError) as e:
            raise BrokerStartError(str(e)) from e
        self.security_stores.listen(self.authorizer)

    def inter_broker_security(self) -> ClientSecurity:
        """How this broker reaches the others' inter-broker listener (inter.broker.listener.name): that
        listener's ssl.* settings, and sasl.mechanism.inter.broker.protocol with the username and password
        of its JAAS configuration, as Kafka's inter-broker clients do. For network/client.py's connections
        (network/client.py NetworkClient)."""
        cfg = self.config
        name = cfg.inter_broker_listener_name
        protocol = cfg.listener_security_protocol_map.get(name)
        if protocol is None:
            raise ConfigError("inter.broker.listener.name", name, "no security protocol is mapped for it")
        return client_security(protocol, cfg.listener_config(name), cfg["sasl.mechanism.inter.broker.protocol"],
                               name)

    @staticmethod
    def _api_versions_api(handlers: list) -> ApiVersionsApi:
        """The ApiVersions handler, told the ranges once every handler is in (found by type, not place)."""
        return next(h for h in handlers if isinstance(h, ApiVersionsApi))

    def _handlers(self) -> list:
        cfg, cache, rm, controller = self.config, self.metadata_cache, self.replica_manager, self.controller
        auth = AuthHelper(self.authorizer)
        quotas = ControllerMutationQuotaManager(self.quotas.controller_mutation)
        handlers = [
            ApiVersionsApi(advertised_api_versions(cfg), self.features, lambda: (self.cluster_id, self.broker_id)),
            ProduceApi(rm, cache, self.quotas, auth, self.add_partitions_to_txn.verify,
                       cfg["transaction.partition.verification.enable"]),
            FetchApi(rm, cache, self.quotas, self.broker_topic_stats, auth, self.fetch_sessions),
            OffsetsApi(rm, auth),
            MetadataApi(cfg, cache, controller, auth, quotas, internal_topics={
                GROUP_METADATA_TOPIC_NAME: self.group_coordinator.runtime.ensure_topic,
                TRANSACTION_STATE_TOPIC_NAME: self.txn_coordinator.state_manager.ensure_topic}),
            InitProducerIdApi(self.producer_ids, self.txn_coordinator, auth),
            FindCoordinatorApi(self.group_coordinator, self.txn_coordinator, cache, auth, self.share_coordinator),
            GroupsApi(self.group_coordinator, cache, auth, self.add_partitions_to_txn.verify,
                      cfg["transaction.partition.verification.enable"]),
            CreateTopicsApi(cfg, cache, controller, auth, quotas),
            DeleteTopicsApi(cfg, cache, controller, auth, quotas),
            DescribeClusterApi(cache, auth),
            DescribeLogDirsApi(rm, auth),
            DescribeProducersApi(rm, cache, auth),
            DescribeTopicPartitionsApi(cache, cfg, auth),
            ElectLeadersApi(cache, auth),
            LocalReassignmentsApi(cache, auth),
            ConfigsApi(self.broker_id, cache, cfg, controller, self.dynamic_config, auth, self.group_configs,
                       self.client_metrics),
            ClientTelemetryApi(self.client_metrics),
            DelegationTokenApis(self.token_manager, auth),
            ClientQuotasApi(self.dynamic_config, auth),
            ConsumerGroupsApi(self.group_coordinator, cache, auth, self.features),
            self._new_share_fetch_api(auth),
            ShareGroupsApi(self.group_coordinator, cache, auth, self.share_partition_manager, self._share_groups_on),
            StreamsGroupsApi(self.group_coordinator, cache, auth, self.features),
            SaslApis(),
            AclApis(auth),
            ScramApis(self.security_stores.credentials, auth),
            TransactionsApi(self.txn_coordinator, cache, auth),
            self.txn_marker_writer,
            UpdateFeaturesApi(self.feature_manager, auth),
            ShareStateApi(self.share_coordinator, auth),
        ]
        enabled = enabled_handler_classes(cfg)
        return [h for h in handlers if type(h) in enabled]

    def _share_groups_on(self) -> bool:
        """Share groups are served while share.version is at least 1 (Kafka's ShareVersion.supportsShareGroups);
        at 0 their APIs stay advertised and answer UNSUPPORTED_VERSION, as Kafka 4.4's KafkaApis does."""
        return self.features.finalized_level(SHARE_VERSION) >= 1

    def _new_share_fetch_api(self, auth: AuthHelper) -> ShareFetchApi:
        if self.share_partition_manager is None:
            self.share_partition_manager = SharePartitionManager(
                self.replica_manager, self.group_coordinator.group_configs.group_config,
                persister=self.share_persister)
            self.group_coordinator.share_group_deleted.append(self.share_partition_manager.on_group_deleted)
            if hasattr(self.controller, "on_topic_deleted"):        # a single node's own topic deletion
                self.controller.on_topic_deleted.append(self.share_partition_manager.on_topic_deleted)
        self._share_fetch_api = ShareFetchApi(self.share_partition_manager, self.share_sessions, self.metadata_cache,
                                              self.broker_id, auth, self._share_groups_on)
        return self._share_fetch_api

    def _metadata_listeners(self) -> list:
        hook = getattr(self.controller, "try_complete_delayed_topic_operations", None)
        return [hook] if hook is not None else []

    async def stop(self) -> None:
        """Stop; in a cluster, first move leadership away (ControlledShutdown) when so configured."""
        if self.cluster_mode and self.started and self.config["controlled.shutdown.enable"]:
            await self.controlled_shutdown()
        if self.prometheus is not None:
            self.prometheus.stop()
            self.prometheus = None
        if self.zk_controller is not None:
            await asyncio.to_thread(self.zk_controller.shutdown)
        if self.cluster_mode and hasattr(self.controller, "shutdown"):
            await self.controller.shutdown()
        if self.registration is not None:
            self.registration.close()
        if self.config_manager is not None:
            self.config_manager.shutdown()
        if isinstance(self.feature_manager, ZkFeatureManager):
            self.feature_manager.shutdown()
        if self.socket_server is not None:
            await self.socket_server.stop()
        if self.txn_coordinator is not None:
            await self.txn_coordinator.shutdown()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.share_coordinator is not None:
            await self.share_coordinator.shutdown()
        if self.share_partition_manager is not None:
            self.share_partition_manager.shutdown()
        if self.controller is not None and not self.cluster_mode:
            self.controller.shutdown()               # the LocalController's chunks stop
        if self.remote_log_manager is not None:
            await self.remote_log_manager.shutdown()
            self.remote_log_manager = None
        if self.replica_manager is not None:
            await self.replica_manager.shutdown_fetchers()
            self.replica_manager.shutdown()
        if self.alter_partition_manager is not None:
            await self.alter_partition_manager.shutdown()
        for client in (self.to_controller, self.controller_channel, self.txn_channel, self.share_channel,
                       self.rlmm_channel):
            if client is not None:
                await client.close()
        if self.log_manager is not None:
            await asyncio.to_thread(self.log_manager.shutdown)
            self.log_manager = None
        if self.dynamic_config is not None:
            await self.dynamic_config.shutdown()
            self.dynamic_config = None
        if self.security_stores is not None:
            self.security_stores.close()
        if self._token_expiry is not None:
            self._token_expiry.cancel()
            self._token_expiry = None
        if self.token_manager is not None:
            self.token_manager.close()
        if self._stores_zk is not None:
            await asyncio.to_thread(self._stores_zk.close)
            self._stores_zk = None
        if self.zk_client is not None:
            await asyncio.to_thread(self.zk_client.close)       # our registration goes with the session
            self.zk_client = None
        self.started = False

    def _start_token_expiry(self) -> None:
        """Remove expired delegation tokens every delegation.token.expiry.check.interval.ms (Kafka's check)."""
        manager = self.token_manager
        if manager is None or not manager.enabled:
            return
        interval = self.config["delegation.token.expiry.check.interval.ms"] / 1000

        async def expire_periodically():
            while True:
                await asyncio.sleep(interval)
                try:
                    await asyncio.to_thread(manager.expire_tokens)
                except Exception:
                    log.exception("removing expired delegation tokens failed")
        self._token_expiry = asyncio.get_running_loop().create_task(expire_periodically())

    # ------------------------------------------------------------ cluster membership
    def _broker_epoch(self) -> int | None:
        return self.registration.epoch if self.registration is not None else None

    async def _wait_registered(self, epoch: int) -> bool:
        return self.registration is not None and await self.registration.wait_registered(epoch)

    def _broker_epoch_or_unknown(self) -> int:
        epoch = self._broker_epoch()
        return -1 if epoch is None else epoch

    def _cluster_id(self) -> str:
        """Kafka's getOrGenerateClusterId against meta.properties (blocking)."""
        stored = self._read_meta(self.log_dirs[0]).get("cluster.id")
        cluster_id = self.zk_client.create_or_get_cluster_id(meta_properties.new_cluster_id())
        if stored and stored != cluster_id:
            raise BrokerStartError(f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored} in "
                                   f"meta.properties. The broker is trying to join the wrong cluster.")
        meta_properties.write_cluster_member(self.log_dirs, self.broker_id, cluster_id)
        return cluster_id

    def _zk_broker_info(self) -> zd.BrokerInfo:
        info = self._broker_info()
        endpoints = tuple(EndPoint(e.listener, e.host, e.port, SecurityProtocol(e.security_protocol))
                          for e in info.endpoints)
        return zd.BrokerInfo(self.broker_id, endpoints, info.rack,
                             features={n: zd.VersionRange(r.min, r.max) for n, r in SUPPORTED.items()})

    def _zk_producer_id_block(self) -> tuple[int, int]:
        block = self.zk_client.allocate_producer_id_block(self.broker_id)
        return block.first_producer_id, block.size

    def _inter_broker_node(self, broker) -> Node:
        """A broker (zk_data.BrokerInfo, MetadataCache BrokerInfo, or an id) as reached on the inter-broker listener."""
        listener = self.config.inter_broker_listener_name
        if isinstance(broker, int):
            broker_id, endpoint = broker, self.metadata_cache.endpoint(broker, listener)
        else:
            broker_id = broker.id if isinstance(broker, zd.BrokerInfo) else broker.broker_id
            endpoint = broker.endpoint(listener)
        if endpoint is None or not endpoint.host:
            raise DisconnectedError(f"broker {broker_id} has no {listener} endpoint")
        return Node(broker_id, endpoint.host, endpoint.port)

    async def _send_to_controller(self, api_key: int, api_version: int, body, timeout_ms: int | None = None):
        controller_id = self.metadata_cache.controller_id
        if controller_id < 0:
            raise DisconnectedError("no controller is known yet")
        return await self.to_controller.send(self._inter_broker_node(controller_id), api_key, api_version, body,
                                             timeout_ms)

    def _topic_config_changed(self, topic: str) -> None:
        if self.replica_manager is not None:
            self.replica_manager.topic_config_changed(topic)

    def _resign_coordinators(self, partitions) -> None:
        for partition in partitions:
            if partition.topic == GROUP_METADATA_TOPIC_NAME:
                self.group_coordinator.on_resignation(partition.index, partition.leader_epoch)
            elif partition.topic == TRANSACTION_STATE_TOPIC_NAME:
                self.txn_coordinator.on_resign(partition.index, -1)

    def _on_log_dir_failure(self, directory: str) -> None:
        """Kafka's LogDirFailureHandler (cluster mode, on the event loop): the dir's partitions go offline;
        with no log dir left the broker halts, as Kafka's does, else the controller hears of it through a
        log_dir_event znode and moves the leadership of those partitions elsewhere."""
        offline = self.replica_manager.handle_log_dir_failure(directory)
        self._resign_coordinators([p for p in offline if p.is_leader])
        if not self.log_manager.log_dirs:
            log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(self.log_dirs))
            halt(1)
            return
        if self.zk_client is None:
            return

        def propagated(future) -> None:
            if not future.cancelled() and future.exception() is not None:
                log.error("cannot tell the controller that log dir %s failed: %s", directory, future.exception())
        asyncio.get_running_loop().run_in_executor(None, self.zk_client.propagate_log_dir_event,
                                                   self.broker_id).add_done_callback(propagated)

    def _on_zk_suspended(self) -> None:
        self._resign_coordinators(self.replica_manager.fence_leadership())

    def _on_zk_resumed(self) -> None:
        for partition in self.replica_manager.unfence_leadership(restore=True):
            if partition.topic == GROUP_METADATA_TOPIC_NAME:
                self.group_coordinator.on_election(partition.index, partition.leader_epoch)
            elif partition.topic == TRANSACTION_STATE_TOPIC_NAME:
                self.txn_coordinator.on_become_leader(partition.index, partition.leader_epoch)

    def _on_zk_session_lost(self) -> None:
        self._resign_coordinators(self.replica_manager.fence_leadership())

    def _on_registered(self, epoch: int) -> None:
        """Registered again after losing the session: partitions stay fenced until a LeaderAndIsr names them."""
        self.replica_manager.unfence_leadership(restore=False)

    async def controlled_shutdown(self) -> bool:
        """Kafka's controlledShutdown: ask the controller to move every partition this broker leads, until
        none remains, controlled.shutdown.max.retries times with controlled.shutdown.retry.backoff.ms between."""
        cfg = self.config
        self.replica_manager.stopping = True
        retries = cfg["controlled.shutdown.max.retries"]
        while retries > 0:
            retries -= 1
            epoch = self._broker_epoch()
            try:
                if epoch is None:
                    raise DisconnectedError("not registered")
                response = await self._send_to_controller(
                    CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION,
                    ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=epoch))
                if response.error_code:
                    log.info("controlled shutdown refused: %s", ErrorCode(response.error_code).name)
                elif not response.remaining_partitions:
                    log.info("controlled shutdown succeeded: no partition left to move")
                    await self._await_leadership_moved()
                    return True
                else:
                    log.info("controlled shutdown: %d partitions still to move", len(response.remaining_partitions))
            except (OSError, TimeoutError, KafkaError, ValueError) as e:
                log.info("controlled shutdown: cannot reach the controller: %s", e)
            if retries > 0:
                await asyncio.sleep(cfg["controlled.shutdown.retry.backoff.ms"] / 1000)
        log.warning("proceeding with an uncontrolled shutdown")
        return False

    async def _await_leadership_moved(self, timeout_s: float = 5.0) -> None:
        """Keep serving (bounded) until the controller's LeaderAndIsr and UpdateMetadata have moved our
        partitions away: clients still sending here then get NOT_LEADER_OR_FOLLOWER and metadata naming the
        new leaders, and move at once, instead of a closed connection and their reconnect backoff."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + timeout_s
        while self._leadership_moving() and loop.time() < deadline:
            await asyncio.sleep(0.01)
        if self._leadership_moving():
            busy = getattr(getattr(self.zk_controller, "channel", None), "busy_brokers", list)()
            log.warning("controlled shutdown: leadership not moved after %.1f s (still led here: %s; controller "
                        "requests unanswered by brokers %s)", timeout_s, self.replica_manager.leadership_to_move(),
                        busy)
        else:
            log.info("controlled shutdown: leadership moved after %.3f s", loop.time() - started)

    def _leadership_moving(self) -> bool:
        """Our partitions are still led here, or (as the controller) the requests that moved them are still on
        their way to the other brokers: resigning first would leave those brokers naming us leader until
        the next controller's UpdateMetadata, and clients asking them would wait on a broker that is gone."""
        if self.replica_manager.leadership_to_move():
            return True
        in_flight = getattr(self.zk_controller, "requests_in_flight", None)
        return in_flight is not None and in_flight()

    # ------------------------------------------------------------ data directories
    def _prepare_dirs(self, write: bool = True) -> str | None:
        for d in self.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
                probe = os.path.join(d, ".kafka-compat-write-probe")
                with open(probe, "w") as f:
                    f.write("ok")
                os.unlink(probe)
            except OSError as e:
                raise BrokerStartError(f"log directory {d!r} is not usable: {e.strerror or e}") from e
        meta = self._read_meta(self.log_dirs[0])
        stored_id = meta.get("broker.id", meta.get("node.id"))
        if stored_id is not None and stored_id != str(self.broker_id):
            raise BrokerStartError(f"Stored node id {stored_id} doesn't match previous node id {self.broker_id} in "
                                   f"meta.properties in {self.log_dirs[0]}")
        if not write:
            return None
        try:
            return meta_properties.ensure_single_node(self.log_dirs[0], self.broker_id)
        except meta_properties.MetaPropertiesError as e:
            raise BrokerStartError(str(e)) from None

    def _read_meta(self, directory: str) -> dict[str, str]:
        try:
            return meta_properties.read(directory, self.broker_id)
        except meta_properties.MetaPropertiesError as e:
            raise BrokerStartError(str(e)) from None

    # ------------------------------------------------------------ addresses
    @property
    def bound(self) -> list:
        return self.socket_server.bound if self.socket_server is not None else []

    def _broker_info(self) -> BrokerInfo:
        """This broker as clients should reach it: advertised.listeners, a port of 0 meaning the bound one."""
        bound = {e.listener_name: e for e in self.bound}
        endpoints = []
        for adv in self.config.advertised_listeners:
            real = bound.get(adv.listener_name)
            host = adv.host
            if not host or host in ("0.0.0.0", "::"):
                host = real.host if real is not None and real.host not in (None, "", "0.0.0.0", "::") \
                    else socket.gethostname()
            port = adv.port or (real.port if real is not None else 0)
            endpoints.append(BrokerEndpoint(adv.listener_name, host, port, adv.security_protocol))
        return BrokerInfo(self.broker_id, tuple(endpoints), self.config.get("broker.rack"))

    def advertised_endpoint(self, listener: str | None = None) -> tuple[str, int]:
        """The host and port clients of ``listener`` (default: the first) should use."""
        info = self._broker_info()
        e = info.endpoint(listener) if listener is not None else None
        e = e or info.endpoints[0]
        return e.host, e.port


def ip_config_handler(quotas: ConnectionQuotas):
    """Kafka's IpConfigHandler: an ip entity's connection_creation_rate, for new connections on every listener."""
    def changed(name: str, configs: dict[str, str]) -> None:
        rate = configs.get(CONNECTION_CREATION_RATE)
        ip = None if name == DEFAULT else desanitize(name)
        quotas.update_ip_connection_rate(ip, None if rate is None else int(float(rate)))
    return changed


def connection_limits_changed(config, quotas: ConnectionQuotas):
    """Kafka's DynamicConnectionQuota: new limits and rate for the connections that come next."""
    def reconfigure(changed: set[str]) -> None:
        if changed & set(CONNECTION_CONFIGS):
            quotas.update(max_connections=config["max.connections"], max_per_ip=config["max.connections.per.ip"],
                          per_ip_overrides=parse_overrides(config["max.connections.per.ip.overrides"]),
                          max_connection_rate=config["max.connection.creation.rate"])
    return reconfigure


def replace_handlers(handlers: list, replacements: list) -> list:
    """``handlers`` with every one answering an API that a handler of ``replacements`` answers left out,
    then ``replacements``: a cluster's controller answers ElectLeaders in place of the single node's."""
    taken = {mark.api_key for r in replacements for _, mark in marked_handlers(type(r))}
    kept = [h for h in handlers if not {mark.api_key for _, mark in marked_handlers(type(h))} & taken]
    return kept + list(replacements)


def halt(status: int) -> None:
    """Exit now, as Kafka's Exit.halt: no shutdown hooks (a broker whose every log dir failed)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(status)

