"""What a ZooKeeper-mode broker builds besides the single node's parts: the controller candidate
(Kafka's KafkaController, elected through /controller) and the topic admin manager (Kafka's
ZkAdminManager: CreateTopics, DeleteTopics, CreatePartitions and AlterConfigs written to ZooKeeper).

Broker uses both by default whenever zookeeper.connect is set, so an embedder's ``Broker(config)`` is a
complete cluster member; tests that play the controller themselves pass ``None`` instead."""
from __future__ import annotations


class ZkControllerService:
    """The ZooKeeper controller as the broker runs it, with the handlers of the APIs it answers."""

    def __init__(self, links):
        from ..controller.kafka_controller import KafkaController
        self.links = links
        self.admin_manager = None               # the ZkAdminManager, once built (ElectLeaders waits through it)
        self.controller = KafkaController(links.config, links.zk_client, links.send, broker_id=links.broker_id,
                                          inter_broker_listener_name=links.config.inter_broker_listener_name,
                                          metrics=links.controller_metrics)

    def startup(self) -> None:
        self.controller.startup()

    def shutdown(self) -> None:
        self.controller.shutdown()

    def requests_in_flight(self) -> bool:
        return self.controller.requests_in_flight()

    def use_admin_manager(self, admin_manager) -> None:
        self.admin_manager = admin_manager

    def api_handlers(self) -> list:
        from .controller_apis import controller_api_handlers
        return controller_api_handlers(self.controller, self.links.metadata_cache, self.admin_manager,
                                       self.links.auth)


def zk_admin_manager(links, service):
    """The topic admin over ZooKeeper; with a controller ``service`` here, ElectLeaders waits through it."""
    from .zk_admin_manager import ZkAdminManager
    manager = ZkAdminManager(links.config, links.zk_client, links.metadata_cache, config_manager=links.config_manager,
                             controller=service.controller if service is not None else None)
    if service is not None:
        service.use_admin_manager(manager)
    return manager
