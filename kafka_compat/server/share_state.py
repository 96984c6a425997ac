"""The share-state RPCs (83-87: Initialize, Read, Write, Delete ShareGroupState and
ReadShareGroupStateSummary), thin over the ShareCoordinator: brokers' persisters send them to the
leader of the share partition's `__share_group_state` partition. As in Kafka's KafkaApis, the sender
must hold CLUSTER_ACTION on the cluster; anyone else gets CLUSTER_AUTHORIZATION_FAILED for every
partition it named."""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.delete_share_group_state import DeleteShareGroupStateResponse
from ..protocol.messages.initialize_share_group_state import InitializeShareGroupStateResponse
from ..protocol.messages.read_share_group_state import ReadShareGroupStateResponse
from ..protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryResponse
from ..protocol.messages.write_share_group_state import WriteShareGroupStateResponse
from .auth_helper import CLUSTER_ACTION, NO_AUTHORIZER, AuthHelper
from .registry import handles
from .share.share_coordinator import ShareCoordinator

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _denied(response_cls, result_cls, req, **zeros):
    """Kafka's toGlobalErrorResponse: every partition of the request answers CLUSTER_AUTHORIZATION_FAILED."""
    return response_cls(results=[result_cls(topic_id=t.topic_id, partitions=[response_cls.PartitionResult(
        partition=p.partition, error_code=DENIED, error_message=DENIED.message, **zeros) for p in t.partitions])
        for t in req.topics])


class ShareStateApi:
    def __init__(self, coordinator: ShareCoordinator, auth: AuthHelper = NO_AUTHORIZER):
        self.coordinator = coordinator
        self.auth = auth

    @handles(83)
    async def handle_initialize_share_group_state(self, request):
        R = InitializeShareGroupStateResponse
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return _denied(R, R.InitializeStateResult, request.body)
        return await self.coordinator.initialize_state(request.body)

    @handles(84)
    async def handle_read_share_group_state(self, request):
        R = ReadShareGroupStateResponse
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return _denied(R, R.ReadStateResult, request.body, state_epoch=0, start_offset=0, state_batches=[])
        return await self.coordinator.read_state(request.body)

    @handles(85)
    async def handle_write_share_group_state(self, request):
        R = WriteShareGroupStateResponse
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return _denied(R, R.WriteStateResult, request.body)
        return await self.coordinator.write_state(request.body, request.api_version)

    @handles(86)
    async def handle_delete_share_group_state(self, request):
        R = DeleteShareGroupStateResponse
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return _denied(R, R.DeleteStateResult, request.body)
        return await self.coordinator.delete_state(request.body)

    @handles(87)
    async def handle_read_share_group_state_summary(self, request):
        R = ReadShareGroupStateSummaryResponse
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return _denied(R, R.ReadStateSummaryResult, request.body, state_epoch=0, leader_epoch=0,
                           start_offset=0)
        return await self.coordinator.read_state_summary(request.body, request.api_version)
