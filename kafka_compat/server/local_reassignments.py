"""AlterPartitionReassignments and ListPartitionReassignments on a single node, answered as Kafka 4.4's
controller answers them for a one-broker cluster.

Every replica already lives on the only broker, so the one valid assignment is the one a partition has:
it is accepted and done at once, and nothing is ever in progress to list or cancel. The checks and
their messages are Kafka's ReplicationControlManager's (a ZooKeeper cluster's controller answers these
APIs itself, in controller_apis.py).
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsResponse as Alter
from ..protocol.messages.list_partition_reassignments import ListPartitionReassignmentsResponse as Listed
from .auth_helper import ALTER, DESCRIBE, NO_AUTHORIZER, AuthHelper
from .registry import handles

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
INVALID = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class LocalReassignmentsApi:
    def __init__(self, metadata_cache, auth: AuthHelper = NO_AUTHORIZER):
        self.metadata_cache = metadata_cache
        self.auth = auth

    def _check(self, topic: str, partition: int, replicas: list[int] | None) -> tuple[int, str | None]:
        meta = self.metadata_cache.get(topic)
        if meta is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
        if not 0 <= partition < meta.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
        if replicas is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
        if not replicas:
            return INVALID, "The manual partition assignment includes an empty replica list."
        seen: set[int] = set()
        for broker in replicas:
            if broker in seen:
                return INVALID, f"The manual partition assignment includes the broker {broker} more than once."
            seen.add(broker)
        for broker in replicas:
            if not self.metadata_cache.is_alive(broker):
                return INVALID, f"The manual partition assignment includes broker {broker}, but no such broker " \
                                "is registered."
        return ErrorCode.NONE, None

    @handles(45)
    def handle_alter_partition_reassignments(self, request):
        """Each partition answered in request order; null replicas ask to cancel (none is in progress)."""
        req = request.body
        if not self.auth.authorize_cluster(request, ALTER):
            return Alter(error_code=DENIED, error_message=DENIED.message)
        responses = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code, message = self._check(t.name, p.partition_index, p.replicas)
                parts.append(Alter.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                                                 error_message=message))
            responses.append(Alter.ReassignableTopicResponse(name=t.name, partitions=parts))
        return Alter(error_code=ErrorCode.NONE, error_message=None, responses=responses,
                     allow_replication_factor_change=req.allow_replication_factor_change
                     if request.api_version >= 1 else True)

    @handles(46)
    def handle_list_partition_reassignments(self, request):
        if not self.auth.authorize_cluster(request, DESCRIBE):
            return Listed(error_code=DENIED, error_message=DENIED.message)
        return Listed(error_code=ErrorCode.NONE, error_message=None, topics=[])
