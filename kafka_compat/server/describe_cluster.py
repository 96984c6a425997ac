"""DescribeCluster: the live brokers and the controller, from the MetadataCache.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.describe_cluster import DescribeClusterResponse
from .auth_helper import NO_AUTHORIZER, AuthHelper
from .metadata import listener_of
from .registry import handles

ENDPOINT_BROKER, ENDPOINT_CONTROLLER = 1, 2


class DescribeClusterApi:
    def __init__(self, metadata_cache, auth: AuthHelper = NO_AUTHORIZER):
        self.metadata_cache = metadata_cache
        self.auth = auth

    @handles(60)
    def handle_describe_cluster(self, request):
        """A broker answers for brokers only: asked for controllers it says MISMATCHED_ENDPOINT_TYPE."""
        req = request.body
        v = request.api_version
        wanted = req.endpoint_type if v >= 1 else ENDPOINT_BROKER
        if wanted not in (ENDPOINT_BROKER, ENDPOINT_CONTROLLER):
            return DescribeClusterResponse(
                error_code=ErrorCode.INVALID_REQUEST if v == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                error_message=f"Unsupported endpoint type {wanted}")
        if wanted != ENDPOINT_BROKER:
            return DescribeClusterResponse(
                error_code=ErrorCode.INVALID_REQUEST if v == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                              "type CONTROLLER")
        cache = self.metadata_cache
        listener = listener_of(request)
        brokers = []
        for b in cache.alive_brokers():
            e = b.endpoint(listener) if listener is not None else (b.endpoints[0] if b.endpoints else None)
            if e is not None:
                brokers.append(DescribeClusterResponse.DescribeClusterBroker(
                    broker_id=b.broker_id, host=e.host, port=e.port, rack=b.rack, is_fenced=False))
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=ENDPOINT_BROKER,
            cluster_id=cache.cluster_id, controller_id=cache.controller_id, brokers=brokers,
            cluster_authorized_operations=self.auth.cluster_authorized_operations(
                request, bool(req.include_cluster_authorized_operations)))
