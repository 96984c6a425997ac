"""ControllerMetrics: the KafkaController gauges a dashboard alerts on, set by whichever controller runs.

`active_controller_count` is 1 on the broker that is the active controller and
0 elsewhere (summed over a cluster it must be exactly 1);
`offline_partitions_count` counts partitions without a live leader and
`preferred_replica_imbalance_count` those not led by their preferred (first)
replica, topics being deleted left out of both, and both 0 on a broker that is
not the controller. A single node is its own controller and has no offline
partitions; the ZooKeeper-mode KafkaController recomputes them after each of
its events (Kafka's KafkaController.updateMetrics).
"""
from __future__ import annotations


class ControllerMetrics:
    __slots__ = ("active_controller_count", "offline_partitions_count", "preferred_replica_imbalance_count")

    def __init__(self) -> None:
        self.active_controller_count = 0
        self.offline_partitions_count = 0
        self.preferred_replica_imbalance_count = 0
