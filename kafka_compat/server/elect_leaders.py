"""ElectLeaders: preferred and unclean elections (a single node always leads its partitions).
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.elect_leaders import ElectLeadersResponse
from .auth_helper import ALTER, NO_AUTHORIZER, AuthHelper
from .registry import handles

PREFERRED, UNCLEAN = 0, 1


class ElectLeadersApi:
    def __init__(self, metadata_cache, auth: AuthHelper = NO_AUTHORIZER):
        self.metadata_cache = metadata_cache
        self.auth = auth

    def _election(self, topic: str, index: int) -> ElectLeadersResponse.PartitionResult:
        """Every partition already leads on its preferred (only) replica: nothing to elect."""
        t = self.metadata_cache.get(topic)
        if t is None:
            code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
        elif not 0 <= index < t.partitions:
            code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{index}"
        else:
            code = ErrorCode.ELECTION_NOT_NEEDED
            message = code.message
        return ElectLeadersResponse.PartitionResult(partition_id=index, error_code=code, error_message=message)

    @handles(43)
    def handle_elect_leaders(self, request):
        """Null partitions mean all; Kafka then leaves out those that needed no election (here: all)."""
        req = request.body
        Result = ElectLeadersResponse.ReplicaElectionResult
        election = election_type(request)
        if not self.auth.authorize_cluster(request, ALTER):
            return denied_response(req)
        if election not in (PREFERRED, UNCLEAN):
            return unknown_election_type_response(req, election)
        if req.topic_partitions is None:
            results = [Result(topic=name, partition_result=[]) for name in list(self.metadata_cache.topics)]
        else:
            results = [Result(topic=t.topic, partition_result=[self._election(t.topic, p) for p in t.partitions])
                       for t in req.topic_partitions]
        return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)


def election_type(request) -> int:
    """The request's ElectionType; v0 elects preferred leaders only."""
    return request.body.election_type if request.api_version >= 1 else PREFERRED


def denied_response(req) -> ElectLeadersResponse:
    """Without ALTER on the cluster: CLUSTER_AUTHORIZATION_FAILED, for the request and each partition named."""
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ElectLeadersResponse(throttle_time_ms=0, error_code=code, replica_election_results=[
        ElectLeadersResponse.ReplicaElectionResult(topic=t.topic, partition_result=[
            ElectLeadersResponse.PartitionResult(partition_id=p, error_code=code, error_message=code.message)
            for p in t.partitions]) for t in req.topic_partitions or []])


def unknown_election_type_response(req, election: int) -> ElectLeadersResponse:
    message = f"Unknown election type {election}"
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[
        ElectLeadersResponse.ReplicaElectionResult(topic=t.topic, partition_result=[
            ElectLeadersResponse.PartitionResult(partition_id=p, error_code=ErrorCode.INVALID_REQUEST,
                                                 error_message=message) for p in t.partitions])
        for t in req.topic_partitions or []])
