"""The broker: the one composition root (Kafka's KafkaServer).

Everything is built here, in dependency order, and handed its collaborators:
config → log dirs and cluster id → MetadataCache and the controller's topic
store → LogManager → ReplicaManager → the controller publishes leadership →
coordinators → request handlers (KafkaApis) → SocketServer. Nothing else
constructs these objects, and none of them reaches back for another through
the broker. `kafka-compat serve` (and so `kafka_compat.testing`) runs this.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import uuid
from base64 import urlsafe_b64encode

from kafka_compat.storage.log_manager import LogManager

from ..configdef import ConfigError
from ..controller.controller_metrics import ControllerMetrics
from ..endpoint import SecurityProtocol
from ..group import GroupCoordinator
from ..network.connection_quotas import ConnectionQuotas, parse_overrides
from ..network.heap import retain_freed_buffers
from ..network.socket_server import BrokerStartError, SocketServer
from ..properties import parse_properties
from ..security.authorizer import configured_authorizer
from ..security.channel_builder import listener_security
from ..security.sasl_client import ClientSecurity, client_security
from ..security.stores import SecurityStores, file_security_stores
from ..security.zk_stores import zk_security_stores
from ..transaction import TransactionCoordinator
from ..zk.kafka_zk_client import KafkaZkClient
from .acl_apis import AclApis
from .api_versions import ApiVersionsApi
from .auth_helper import AuthHelper
from .broker_topic_stats import BrokerTopicStats
from .client_quota_manager import QuotaManagers
from .client_quotas import ClientQuotasApi
from .config_store import ConfigStore, LocalConfigStore, ZkConfigStore
from .configs import ConfigsApi
from .consumer_groups import ConsumerGroupsApi
from .controller_mutation_quota import ControllerMutationQuotaManager, default_user_quota
from .create_topics import CreateTopicsApi
from .delete_topics import DeleteTopicsApi
from .describe_cluster import DescribeClusterApi
from .describe_log_dirs import DescribeLogDirsApi
from .describe_producers import DescribeProducersApi
from .describe_topic_partitions import DescribeTopicPartitionsApi
from .dynamic_broker_config import DynamicBrokerConfig, topic_defaults_changed
from .dynamic_config_manager import DynamicConfigManager
from .elect_leaders import ElectLeadersApi
from .fetch import FetchApi
from .find_coordinator import FindCoordinatorApi
from .groups import GroupsApi
from .init_producer_id import InitProducerIdApi
from .kafka_apis import KafkaApis, supported_versions
from .local_controller import LocalController
from .metadata import MetadataApi
from .metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from .offsets import OffsetsApi
from .produce import ProduceApi
from .producer_id_manager import ProducerIdManager
from .prometheus import BrokerMetrics, PrometheusEndpoint
from .replica_manager import ReplicaManager
from .request_channel import RequestChannel
from .sasl_apis import SaslApis
from .scram_apis import ScramApis
from .topics import TopicRegistry
from .transactions import TransactionsApi
from .write_txn_markers import WriteTxnMarkersApi

log = logging.getLogger(__name__)

_CLUSTER_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")

__all__ = ["Broker", "BrokerStartError", "HANDLER_CLASSES", "advertised_api_versions"]

# Every request handler class; ApiVersions advertises exactly what their methods register.
HANDLER_CLASSES = (ApiVersionsApi, ProduceApi, FetchApi, OffsetsApi, MetadataApi, InitProducerIdApi,
                   FindCoordinatorApi, GroupsApi, ConsumerGroupsApi, CreateTopicsApi, DeleteTopicsApi,
                   DescribeClusterApi, DescribeLogDirsApi, DescribeProducersApi, DescribeTopicPartitionsApi,
                   ElectLeadersApi, ConfigsApi, ClientQuotasApi, SaslApis, AclApis, ScramApis, TransactionsApi,
                   WriteTxnMarkersApi)


def enabled_handler_classes(config=None) -> tuple:
    """The handler classes this configuration serves: the KIP-848 APIs only with the consumer protocol on."""
    if config is None or "consumer" in config["group.coordinator.rebalance.protocols"]:
        return HANDLER_CLASSES
    return tuple(c for c in HANDLER_CLASSES if c is not ConsumerGroupsApi)


def advertised_api_versions(config=None) -> dict[int, tuple[int, int]]:
    return supported_versions(enabled_handler_classes(config))


class Broker:
    def __init__(self, config, *, retain_freed_buffers: bool = False, security_stores: SecurityStores | None = None,
                 config_store: ConfigStore | None = None):
        """``retain_freed_buffers``: tune this process's malloc for Produce frames (the CLI's broker process).
        ``security_stores``: where ACLs and SCRAM credentials live; ``config_store``: where dynamic configs
        and quotas live. By default: in ZooKeeper when zookeeper.connect is set (on one client of their
        own; the cluster wiring passes zk_security_stores / ZkConfigStore over its client instead), else
        files in the first log dir."""
        self.config = config
        self.config_store = config_store
        self.quotas: QuotaManagers | None = None
        self.broker_topic_stats = BrokerTopicStats()
        self.controller_metrics = ControllerMetrics()
        self.dynamic_config: DynamicConfigManager | None = None
        self.request_channel: RequestChannel | None = None
        self.prometheus: PrometheusEndpoint | None = None
        self._retain_freed_buffers = retain_freed_buffers
        self.security_stores = security_stores
        self.broker_id = config.broker_id
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.cluster_id: str | None = None
        self.metadata_cache: MetadataCache | None = None
        self.controller: LocalController | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.txn_marker_writer: WriteTxnMarkersApi | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.apis: KafkaApis | None = None
        self.authorizer = None
        self.listener_security: dict = {}
        self._stores_zk: KafkaZkClient | None = None     # the stores' own ZooKeeper client, when we made one
        self.socket_server: SocketServer | None = None
        self.started = False

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        cfg = self.config
        connection_quotas = self._connection_quotas()       # a bad overrides value stops us before any work
        if self._retain_freed_buffers:
            retain_freed_buffers()
        self.cluster_id = self._prepare_dirs()
        await asyncio.to_thread(self._security)            # the stores may read ZooKeeper: off the event loop
        # dynamic configs before the logs (as Kafka's DynamicBrokerConfig.initialize): they load with their defaults
        self.quotas = QuotaManagers.from_config(cfg)
        store = self.config_store
        if store is None:
            store = (ZkConfigStore(await asyncio.to_thread(self._stores_zk_client)) if cfg["zookeeper.connect"]
                     else LocalConfigStore(self.log_dirs[0]))
        self.dynamic_config = DynamicConfigManager(store, self.quotas, DynamicBrokerConfig(cfg, self.broker_id))
        await self.dynamic_config.startup()
        self.metadata_cache = MetadataCache(self.broker_id, self.cluster_id)
        self.controller = LocalController(cfg, self.broker_id, TopicRegistry(self.log_dirs[0]), self.metadata_cache)
        # The flusher wakes at least every second so flush.ms is honoured even when
        # log.flush.scheduler.interval.ms keeps Kafka's "never" default.
        self.log_manager = LogManager(
            self.log_dirs, self.controller.log_config(""), topic_config=self.controller.log_config,
            retention_check_interval_ms=cfg["log.retention.check.interval.ms"],
            flush_check_interval_ms=min(cfg["log.flush.scheduler.interval.ms"], 1000),
            checkpoint_interval_ms=cfg["log.flush.offset.checkpoint.interval.ms"] or 60000,
            cleaner_enabled=cfg["log.cleaner.enable"], cleaner_backoff_ms=cfg["log.cleaner.backoff.ms"],
            producer_id_expiration_ms=cfg["producer.id.expiration.ms"])
        # Loading recovers logs after an unclean shutdown: keep that off the event loop.
        await asyncio.to_thread(self.log_manager.startup)
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.controller.log_config,
            hw_checkpoint_interval_ms=cfg["replica.high.watermark.checkpoint.interval.ms"],
            fetch_purge_interval=cfg["fetch.purgatory.purge.interval.requests"],
            produce_purge_interval=cfg["producer.purgatory.purge.interval.requests"],
            broker_topic_stats=self.broker_topic_stats)
        self.replica_manager.startup()
        self.dynamic_config.broker_config.add_reconfigurable(topic_defaults_changed(self.replica_manager))
        self.controller.startup(self.replica_manager)
        self.controller_metrics.active_controller_count = 1     # a single node is its own controller
        self.group_coordinator = GroupCoordinator(cfg, self.broker_id, self.replica_manager, self.metadata_cache,
                                                  self.controller)
        # Kafka forgets the offsets groups committed for a deleted topic's partitions.
        self.controller.on_topic_deleted.append(self.group_coordinator.on_topic_deleted)
        # Consumer groups reassign when their topics appear, go or grow.
        self.metadata_cache.add_topic_listener(self.group_coordinator.on_topics_changed)
        await self.group_coordinator.startup()
        self.producer_ids = ProducerIdManager(self.log_dirs[0])
        # Markers for partitions led here take the WriteTxnMarkers handler's own path.
        self.txn_marker_writer = WriteTxnMarkersApi(self.replica_manager, self.group_coordinator,
                                                    self.group_coordinator.clock, AuthHelper(self.authorizer))
        self.txn_coordinator = TransactionCoordinator(cfg, self.broker_id, self.replica_manager, self.metadata_cache,
                                                      self.controller, self.producer_ids,
                                                      self.txn_marker_writer.write_markers)
        await self.txn_coordinator.startup()
        self.apis = KafkaApis(self._handlers())
        self.request_channel = RequestChannel(self.apis.handle, self.quotas,
                                              metrics=cfg["prometheus.listener"] is not None)
        self.socket_server = SocketServer(
            cfg.listeners, self.request_channel.handle, self.apis.supported_versions(),
            request_done=self.request_channel.request_done,
            max_request_bytes=cfg["socket.request.max.bytes"], send_buffer_bytes=cfg["socket.send.buffer.bytes"],
            receive_buffer_bytes=cfg["socket.receive.buffer.bytes"],
            connections_max_idle_ms=cfg["connections.max.idle.ms"], security=self.listener_security,
            failed_authentication_delay_ms=cfg["connection.failed.authentication.delay.ms"],
            connection_quotas=connection_quotas)
        try:
            await self.socket_server.start()
        except BrokerStartError:
            await self.stop()
            raise
        self.metadata_cache.update_brokers([self._broker_info()], controller_id=self.broker_id)
        if cfg["prometheus.listener"] is not None:
            self.prometheus = PrometheusEndpoint(cfg["prometheus.listener"], BrokerMetrics(
                broker_id=self.broker_id, request_channel=self.request_channel,
                broker_topic_stats=self.broker_topic_stats, replica_manager=self.replica_manager,
                socket_server=self.socket_server, group_coordinator=self.group_coordinator,
                controller_metrics=self.controller_metrics, quotas=self.quotas))
            try:
                self.prometheus.start()
            except OSError as e:
                await self.stop()
                raise BrokerStartError(f"cannot serve metrics at {cfg['prometheus.listener']}: "
                                       f"{e.strerror or e}") from e
        self.started = True
        log.info("kafka-compat node %d serving %s (cluster %s)", self.broker_id,
                 ", ".join(f"{b.listener_name}://{b.host or ''}:{b.port}" for b in self.bound), self.cluster_id)

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
        return ConnectionQuotas(cfg["max.connections"], cfg["max.connections.per.ip"], overrides)

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
            self.listener_security = {
                e.listener_name: listener_security(e.listener_name, e.security_protocol,
                                                   cfg.listener_config(e.listener_name),
                                                   self.security_stores.credentials)
                for e in cfg.listeners if e.security_protocol is not SecurityProtocol.PLAINTEXT}
        except (ConfigError, ValueError) as e:
            raise BrokerStartError(str(e)) from e
        self.security_stores.listen(self.authorizer)

    def inter_broker_security(self) -> ClientSecurity:
        """How this broker reaches the others' inter-broker listener (inter.broker.listener.name): that
        listener's ssl.* settings, and sasl.mechanism.inter.broker.protocol with the username and password
        of its JAAS configuration, as Kafka's inter-broker clients do. For network/client.py's connections
        (network/client_channel.open_channel)."""
        cfg = self.config
        name = cfg.inter_broker_listener_name
        protocol = cfg.listener_security_protocol_map.get(name)
        if protocol is None:
            raise ConfigError("inter.broker.listener.name", name, "no security protocol is mapped for it")
        return client_security(protocol, cfg.listener_config(name), cfg["sasl.mechanism.inter.broker.protocol"],
                               name)

    def _handlers(self) -> list:
        cfg, cache, rm, controller = self.config, self.metadata_cache, self.replica_manager, self.controller
        auth = AuthHelper(self.authorizer)
        quotas = ControllerMutationQuotaManager(default_user_quota(cfg["controller.mutation.rate.default"]),
                                                window_num=cfg["controller.quota.window.num"],
                                                window_size_seconds=cfg["controller.quota.window.size.seconds"])
        handlers = [
            ApiVersionsApi(advertised_api_versions(cfg)),
            ProduceApi(rm, cache, self.quotas, auth, self.txn_coordinator.handle_verify_partitions
                       if cfg["transaction.partition.verification.enable"] else None),
            FetchApi(rm, cache, self.quotas, self.broker_topic_stats, auth),
            OffsetsApi(rm, auth),
            MetadataApi(cfg, cache, controller, auth, quotas),
            InitProducerIdApi(self.producer_ids, self.txn_coordinator, auth),
            FindCoordinatorApi(self.group_coordinator, self.txn_coordinator, cache, auth),
            GroupsApi(self.group_coordinator, cache, auth),
            CreateTopicsApi(cfg, cache, controller, auth, quotas),
            DeleteTopicsApi(cfg, cache, controller, auth, quotas),
            DescribeClusterApi(cache, auth),
            DescribeLogDirsApi(rm, auth),
            DescribeProducersApi(rm, cache, auth),
            DescribeTopicPartitionsApi(cache, cfg, auth),
            ElectLeadersApi(cache, auth),
            ConfigsApi(self.broker_id, cache, cfg, controller, self.dynamic_config, auth),
            ClientQuotasApi(self.dynamic_config, auth),
            ConsumerGroupsApi(self.group_coordinator, cache, auth),
            SaslApis(),
            AclApis(auth),
            ScramApis(self.security_stores.credentials, auth),
            TransactionsApi(self.txn_coordinator, cache, auth),
            self.txn_marker_writer,
        ]
        enabled = enabled_handler_classes(cfg)
        return [h for h in handlers if type(h) in enabled]

    async def stop(self) -> None:
        if self.prometheus is not None:
            self.prometheus.stop()
            self.prometheus = None
        if self.socket_server is not None:
            await self.socket_server.stop()
        if self.txn_coordinator is not None:
            await self.txn_coordinator.shutdown()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.controller is not None:
            self.controller.shutdown()
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        if self.log_manager is not None:
            await asyncio.to_thread(self.log_manager.shutdown)
            self.log_manager = None
        if self.dynamic_config is not None:
            await self.dynamic_config.shutdown()
            self.dynamic_config = None
        if self.security_stores is not None:
            self.security_stores.close()
        if self._stores_zk is not None:
            await asyncio.to_thread(self._stores_zk.close)
            self._stores_zk = None
        self.started = False

    # ------------------------------------------------------------ data directories
    def _prepare_dirs(self) -> str:
        for d in self.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
                probe = os.path.join(d, ".kafka-compat-write-probe")
                with open(probe, "w") as f:
                    f.write("ok")
                os.unlink(probe)
            except OSError as e:
                raise BrokerStartError(f"log directory {d!r} is not usable: {e.strerror or e}") from e
        return self._meta_properties(self.log_dirs[0])

    def _meta_properties(self, directory: str) -> str:
        """Kafka's meta.properties: the cluster id and node id this data belongs to."""
        path = os.path.join(directory, "meta.properties")
        props = {}
        if os.path.exists(path):
            props = self._read_meta_properties(path)
        if not props:
            props = {"version": "1",
                     "cluster.id": urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
                     "node.id": str(self.broker_id)}
            with open(path, "w") as f:
                f.write("#Written by kafka-compat\n")
                for k, v in props.items():
                    f.write(f"{k}={v}\n")
        return props["cluster.id"]

    def _read_meta_properties(self, path: str) -> dict[str, str]:
        """An existing meta.properties must name a cluster and this node, as Kafka requires: one that
        does not is refused with its path (never replaced: the data may belong to another cluster)."""
        try:
            with open(path, "rb") as f:
                props = parse_properties(f.read(64 * 1024).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise BrokerStartError(f"cannot read {path}: {e}; restore it, or remove it to give this data "
                                   f"directory a new cluster id") from None
        problems = []
        if not _CLUSTER_ID.fullmatch(props.get("cluster.id", "")):
            problems.append(f"no valid cluster.id ({props.get('cluster.id')!r})")
        node = props.get("node.id", props.get("broker.id"))
        if node is not None and node != str(self.broker_id):
            problems.append(f"node.id {node!r} does not match this broker's id {self.broker_id}")
        if problems:
            raise BrokerStartError(f"{path} is damaged or belongs elsewhere: {'; '.join(problems)}; restore it, "
                                   f"or remove it to give this data directory a new cluster id")
        return props

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
