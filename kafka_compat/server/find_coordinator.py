"""FindCoordinator: which broker coordinates a group, a transactional id or a share partition.

A group's coordinator is the leader of its `__consumer_offsets` partition, a
transactional id's the leader of its `__transaction_state` partition, a share
partition's ("groupId:topicId:partition", key type 2, brokers' persisters asking with
CLUSTER_ACTION, version 6+) the leader of its `__share_group_state` partition; each
coordinator says which partition and whether it is ready, the MetadataCache says
where that broker listens for the request's listener.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.find_coordinator import FindCoordinatorResponse
from .auth_helper import CLUSTER_ACTION, DESCRIBE, GROUP, NO_AUTHORIZER, TRANSACTIONAL_ID, AuthHelper
from .metadata import listener_of
from .metadata_cache import MetadataCache
from .registry import handles

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2


class FindCoordinatorApi:
    def __init__(self, group_coordinator, txn_coordinator, metadata_cache: MetadataCache,
                 auth: AuthHelper = NO_AUTHORIZER, share_coordinator=None):
        self.group_coordinator = group_coordinator
        self.share_coordinator = share_coordinator
        self.txn_coordinator = txn_coordinator
        self.metadata_cache = metadata_cache
        self.auth = auth

    def _find(self, request, key_type: int, key: str, listener: str | None) -> tuple[int, int, str, int]:
        """(error, node id, host, port) of the coordinator for one key; DESCRIBE on the group or
        transactional id comes first."""
        if key_type == GROUP_KEY and not self.auth.authorize(request, DESCRIBE, GROUP, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, "", -1
        if key_type == TRANSACTION_KEY and not self.auth.authorize(request, DESCRIBE, TRANSACTIONAL_ID, key):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, "", -1
        if key_type == GROUP_KEY:
            error, node = self.group_coordinator.find_coordinator(key)
        elif key_type == TRANSACTION_KEY:
            error, node = self.txn_coordinator.find_coordinator(key)
        elif key_type == SHARE_KEY and request.api_version >= 6 and self.share_coordinator is not None:
            try:
                error, node = self.share_coordinator.find_coordinator(key)
            except ValueError:      # Kafka's SharePartitionKey.validate refused the key
                error, node = ErrorCode.INVALID_REQUEST, -1
        else:   # a share key before version 6, or an unknown key type
            error, node = ErrorCode.INVALID_REQUEST, -1
        if error:
            return error, -1, "", -1
        endpoint = self.metadata_cache.endpoint(node, listener) if listener is not None else None
        if endpoint is None:
            broker = next((b for b in self.metadata_cache.alive_brokers() if b.broker_id == node), None)
            endpoint = broker.endpoints[0] if broker is not None and broker.endpoints else None
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ErrorCode.NONE, node, endpoint.host, endpoint.port

    @handles(10)
    def handle_find_coordinator(self, request):
        req = request.body
        listener = listener_of(request)
        if req.key_type == SHARE_KEY and request.api_version >= 6 \
                and not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            # Kafka's authorizeClusterOperation throws: the whole request fails
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[FindCoordinatorResponse.Coordinator(
                key=key, node_id=-1, host="", port=-1, error_code=denied, error_message=denied.message)
                for key in req.coordinator_keys])
        if request.api_version >= 4:
            coordinators = []
            for key in req.coordinator_keys:
                error, node, host, port = self._find(request, req.key_type, key, listener)
                coordinators.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node, host=host, port=port, error_code=error,
                    error_message=None if error == ErrorCode.NONE else ErrorCode(error).message))
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
        error, node, host, port = self._find(request, req.key_type, req.key, listener)
        # Kafka's message for success is the error's name, "NONE".
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=error,
                                       error_message="NONE" if error == ErrorCode.NONE else ErrorCode(error).message,
                                       node_id=node, host=host, port=port)
