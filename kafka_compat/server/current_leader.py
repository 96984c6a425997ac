"""KIP-951: who leads a partition now and where, for a client told its leader moved.

A Produce (v10+) or Fetch (v16+) answer that says NOT_LEADER_OR_FOLLOWER (Fetch: or FENCED_LEADER_EPOCH)
carries, per partition, the leader and leader epoch this broker knows (CurrentLeader), and once per response
that leader's address on the listener the request came in on (NodeEndpoints). The client moves there at once
instead of first asking for metadata, which is what lets a controlled shutdown hand leadership over without
a pause. As Kafka's KafkaApis.getCurrentLeader: the local replica's view first (LeaderAndIsr reaches it
before UpdateMetadata reaches the cache), then the metadata cache; an endpoint only for an alive broker.
"""
from __future__ import annotations

from .metadata_cache import MetadataCache
from .replica_manager import ReplicaManager


class CurrentLeaders:
    """The leaders named in one response and the endpoints gathered for them, built with the response's own
    generated types (``leader_type(leader_id, leader_epoch)``, ``node_type(node_id, host, port, rack)``).
    Made only when a partition needs it: a response without such an error costs nothing."""

    __slots__ = ("replica_manager", "metadata_cache", "listener", "leader_type", "node_type", "nodes")

    def __init__(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache, listener: str | None,
                 leader_type, node_type):
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.listener = listener
        self.leader_type = leader_type
        self.node_type = node_type
        self.nodes: dict[int, object] = {}

    def of(self, topic: str | None, index: int):
        """The partition's CurrentLeader (-1, -1 when unknown); its leader's endpoint joins ``endpoints()``."""
        leader, epoch = -1, -1
        partition = self.replica_manager.get_partition(topic, index) if topic is not None else None
        if partition is not None and partition.leader_id >= 0:
            leader, epoch = partition.leader_id, partition.leader_epoch
        elif topic is not None:
            state = self.metadata_cache.partition_state(topic, index)
            if state is not None:
                leader, epoch = state.leader, state.leader_epoch
        if leader >= 0 and leader not in self.nodes and self.listener is not None:
            broker = self.metadata_cache.brokers.get(leader)
            endpoint = broker.endpoint(self.listener) if broker is not None else None
            if endpoint is not None:
                self.nodes[leader] = self.node_type(node_id=leader, host=endpoint.host, port=endpoint.port,
                                                    rack=broker.rack)
        return self.leader_type(leader_id=leader, leader_epoch=epoch)

    def endpoints(self) -> list:
        """NodeEndpoints: one entry per leader named, in the order first named."""
        return list(self.nodes.values())
