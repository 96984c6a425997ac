"""The requests a ZooKeeper cluster's controller answers: ControlledShutdown (7), AlterPartition (56),
ElectLeaders (43, in place of the single node's), AlterPartitionReassignments (45) and
ListPartitionReassignments (46).

Every broker registers these handlers and hands the request to its own KafkaController, whose event
thread does the work; the handler awaits the answer (a concurrent future completed on that thread,
resolved on the loop with call_soon_threadsafe by asyncio.wrap_future). A broker that is not the
controller answers NOT_CONTROLLER, which sends the client on to the controller it learns from Metadata.
Authorization comes first, as in Kafka: CLUSTER_ACTION on the cluster for the brokers' own requests
(7, 56), ALTER for elections and reassignments, DESCRIBE to list reassignments
(CLUSTER_AUTHORIZATION_FAILED otherwise).
"""
from __future__ import annotations

import asyncio
import logging

from ..controller.kafka_controller import KafkaController
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.alter_partition import AlterPartitionResponse
from ..protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsResponse
from ..protocol.messages.controlled_shutdown import ControlledShutdownResponse
from ..protocol.messages.elect_leaders import ElectLeadersResponse
from ..protocol.messages.list_partition_reassignments import ListPartitionReassignmentsResponse
from ..zk.zk_data import TopicPartition
from .auth_helper import ALTER, CLUSTER_ACTION, DESCRIBE, NO_AUTHORIZER, AuthHelper
from .elect_leaders import PREFERRED, UNCLEAN, denied_response, election_type, unknown_election_type_response
from .metadata_cache import MetadataCache
from .registry import handles

log = logging.getLogger(__name__)

MOVES_DELIVERED_WAIT_S = 3.0


async def _answer(future):
    """The controller's result, on the loop."""
    return await asyncio.wrap_future(future)


def _by_topic(items):
    """[(TopicPartition, value)] grouped by topic, topics and partitions in order."""
    grouped: dict[str, list] = {}
    for tp, value in sorted(items):
        grouped.setdefault(tp.topic, []).append((tp.partition, value))
    return grouped.items()


DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class ControlledShutdownApi:
    def __init__(self, controller: KafkaController, auth: AuthHelper = NO_AUTHORIZER):
        self.controller = controller
        self.auth = auth

    @handles(7)
    async def handle_controlled_shutdown(self, request):
        """RemainingPartitions: the partitions (replication factor above one) the broker still leads."""
        req = request.body
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return ControlledShutdownResponse(error_code=DENIED)
        try:
            remaining = await _answer(self.controller.controlled_shutdown(req.broker_id, req.broker_epoch))
        except KafkaError as e:
            return ControlledShutdownResponse(error_code=e.error_code)
        # answered once the moves reached every broker (bounded): the broker exits soon after this answer,
        # and one still naming it leader sends clients to a closed port, which librdkafka waits on, drops,
        # and re-queries a second later
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MOVES_DELIVERED_WAIT_S
        while self.controller.requests_in_flight() and loop.time() < deadline:
            await asyncio.sleep(0.005)
        if self.controller.requests_in_flight():
            log.warning("controlled shutdown of broker %d answered with requests still unanswered by brokers %s",
                        req.broker_id, self.controller.channel.busy_brokers())
        return ControlledShutdownResponse(error_code=ErrorCode.NONE, remaining_partitions=[
            ControlledShutdownResponse.RemainingPartition(topic_name=tp.topic, partition_index=tp.partition)
            for tp in remaining])


class AlterPartitionApi:
    def __init__(self, controller: KafkaController, auth: AuthHelper = NO_AUTHORIZER):
        self.controller = controller
        self.auth = auth

    @handles(56)
    async def handle_alter_partition(self, request):
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return AlterPartitionResponse(error_code=DENIED)
        if not self.controller.is_active:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        try:
            return await _answer(self.controller.alter_partition(request.body, request.api_version))
        except KafkaError as e:
            return AlterPartitionResponse(error_code=e.error_code)


class ZkElectLeadersApi:
    """ElectLeaders in a ZooKeeper cluster: the controller elects, then the answer waits until this
    broker's metadata cache shows each new leader, or TimeoutMs passes (REQUEST_TIMED_OUT), as
    Kafka's DelayedElectLeader. `admin_manager` (a ZkAdminManager) provides that wait."""

    def __init__(self, controller: KafkaController, metadata_cache: MetadataCache, admin_manager=None,
                 auth: AuthHelper = NO_AUTHORIZER):
        self.controller = controller
        self.metadata_cache = metadata_cache
        self.admin_manager = admin_manager
        self.auth = auth

    @handles(43)
    async def handle_elect_leaders(self, request):
        """Null partitions mean all; then the partitions that needed no election are left out."""
        req = request.body
        if not self.auth.authorize_cluster(request, ALTER):
            return denied_response(req)
        election = election_type(request)
        if election not in (PREFERRED, UNCLEAN):
            return unknown_election_type_response(req, election)
        if req.topic_partitions is None:
            partitions = [TopicPartition(t.name, p) for t in list(self.metadata_cache.topics.values())
                          for p in t.partition_states]
        else:
            partitions = [TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions]
        results = await _answer(self.controller.elect_leaders(partitions, election))
        expected = {tp: leader for tp, leader in results.items() if not isinstance(leader, KafkaError)}
        timed_out = set()
        if expected and self.admin_manager is not None:
            timed_out = await self.admin_manager.wait_for_elected_leaders(expected, req.timeout_ms)
        outcome = {}
        for tp, result in results.items():
            if isinstance(result, KafkaError):
                outcome[tp] = (result.error_code, result.message)
            elif tp in timed_out:
                outcome[tp] = (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT.message)
            else:
                outcome[tp] = (ErrorCode.NONE, None)
        if req.topic_partitions is None:
            outcome = {tp: o for tp, o in outcome.items() if o[0] != ErrorCode.ELECTION_NOT_NEEDED}
        return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=[
                ElectLeadersResponse.PartitionResult(partition_id=p, error_code=code, error_message=message)
                for p, (code, message) in parts])
            for topic, parts in _by_topic(outcome.items())])


class PartitionReassignmentsApi:
    def __init__(self, controller: KafkaController, auth: AuthHelper = NO_AUTHORIZER):
        self.controller = controller
        self.auth = auth

    @handles(45, 0, 0)
    async def handle_alter_partition_reassignments(self, request):
        """Null replicas cancel a partition's reassignment. (Version 1's AllowReplicationFactorChange
        came with KRaft; a ZooKeeper controller answers version 0.)"""
        req = request.body
        if not self.auth.authorize_cluster(request, ALTER):
            return AlterPartitionReassignmentsResponse(error_code=DENIED, error_message=DENIED.message)
        asked = {TopicPartition(t.name, p.partition_index): p.replicas for t in req.topics for p in t.partitions}
        try:
            results = await _answer(self.controller.alter_partition_reassignments(asked))
        except KafkaError as e:
            return AlterPartitionReassignmentsResponse(error_code=e.error_code, error_message=e.message)
        Response = AlterPartitionReassignmentsResponse
        return Response(error_code=ErrorCode.NONE, error_message=None, responses=[
            Response.ReassignableTopicResponse(name=topic, partitions=[
                Response.ReassignablePartitionResponse(
                    partition_index=p, error_code=ErrorCode.NONE if e is None else e.error_code,
                    error_message=None if e is None else e.message)
                for p, e in parts])
            for topic, parts in _by_topic(results.items())])

    @handles(46)
    async def handle_list_partition_reassignments(self, request):
        """Null topics list every reassignment in progress."""
        req = request.body
        if not self.auth.authorize_cluster(request, DESCRIBE):
            return ListPartitionReassignmentsResponse(error_code=DENIED, error_message=DENIED.message)
        asked = None if req.topics is None else [TopicPartition(t.name, p) for t in req.topics
                                                 for p in t.partition_indexes]
        try:
            ongoing = await _answer(self.controller.list_partition_reassignments(asked))
        except KafkaError as e:
            return ListPartitionReassignmentsResponse(error_code=e.error_code, error_message=e.message)
        Response = ListPartitionReassignmentsResponse
        return Response(error_code=ErrorCode.NONE, error_message=None, topics=[
            Response.OngoingTopicReassignment(name=topic, partitions=[
                Response.OngoingPartitionReassignment(partition_index=p, replicas=list(a.replicas),
                                                      adding_replicas=list(a.adding_replicas),
                                                      removing_replicas=list(a.removing_replicas))
                for p, a in parts])
            for topic, parts in _by_topic(ongoing.items())])


CONTROLLER_HANDLER_CLASSES = (ControlledShutdownApi, AlterPartitionApi, ZkElectLeadersApi, PartitionReassignmentsApi)


def controller_api_handlers(controller: KafkaController, metadata_cache: MetadataCache, admin_manager=None,
                            auth: AuthHelper = NO_AUTHORIZER) -> list:
    """The handler objects of a ZooKeeper cluster member for these APIs (ZkElectLeadersApi replaces the
    single node's ElectLeadersApi: register one of the two)."""
    return [ControlledShutdownApi(controller, auth), AlterPartitionApi(controller, auth),
            ZkElectLeadersApi(controller, metadata_cache, admin_manager, auth),
            PartitionReassignmentsApi(controller, auth)]
