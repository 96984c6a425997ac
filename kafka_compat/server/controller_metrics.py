"""ControllerMetrics: the KafkaController gauges a dashboard alerts on, set by whichever controller runs.

`active_controller_count` is 1 on the broker that is the active controller and
0 elsewhere (summed over a cluster it must be exactly 1);
`offline_partitions_count` counts partitions without a live leader. A single
node is its own controller and has no offline partitions; in a ZooKeeper
cluster the controller sets both when it wins or loses the election and after
each leader change (Kafka's KafkaController.updateMetrics).
"""
from __future__ import annotations


class ControllerMetrics:
    __slots__ = ("active_controller_count", "offline_partitions_count", "preferred_replica_imbalance_count")

    def __init__(self) -> None:
        self.active_controller_count = 0
        self.offline_partitions_count = 0
        self.preferred_replica_imbalance_count = 0
