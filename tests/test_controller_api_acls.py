"""The ZooKeeper controller's APIs ask the authorizer first, as Kafka's do: ControlledShutdown and
AlterPartition need CLUSTER_ACTION on the cluster, ElectLeaders and AlterPartitionReassignments ALTER,
ListPartitionReassignments DESCRIBE. Refused, the controller is never asked; granted, it is.

The handlers are driven directly (a cluster is not needed to see whom they let through) with a
controller that records what it is asked and answers at once.
"""
from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import Request
from kafka_compat.protocol.messages import APIS
from kafka_compat.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from kafka_compat.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kafka_compat.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from kafka_compat.protocol.messages.elect_leaders import ElectLeadersRequest
from kafka_compat.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kafka_compat.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafka_compat.security.authorizer import AclAuthorizer
from kafka_compat.security.principal import KafkaPrincipal
from kafka_compat.server.auth_helper import AuthHelper
from kafka_compat.server.controller_apis import controller_api_handlers
from kafka_compat.server.kafka_apis import KafkaApis
from kafka_compat.server.metadata_cache import MetadataCache

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class Controller:
    is_active = True

    def __init__(self):
        self.asked = []

    def _answer(self, name, value):
        self.asked.append(name)
        f = concurrent.futures.Future()
        f.set_result(value)
        return f

    def controlled_shutdown(self, broker_id, broker_epoch):
        return self._answer("controlled_shutdown", [])

    def requests_in_flight(self):
        return False

    def alter_partition(self, body, version):
        return self._answer("alter_partition", AlterPartitionResponse(error_code=ErrorCode.NONE))

    def elect_leaders(self, partitions, election):
        return self._answer("elect_leaders", {})

    def alter_partition_reassignments(self, asked):
        return self._answer("alter_partition_reassignments", {})

    def list_partition_reassignments(self, asked):
        return self._answer("list_partition_reassignments", {})


class Connection:
    def __init__(self, principal: str):
        self.principal = KafkaPrincipal("User", principal)
        self.host, self.acl_key = "10.0.0.9", f"User:{principal}|10.0.0.9"


CASES = [  # api key, version, body, what the controller is asked, the operation on the cluster
    (7, 3, ControlledShutdownRequest(broker_id=1, broker_epoch=5), "controlled_shutdown", AclOperation.CLUSTER_ACTION),
    (56, 3, AlterPartitionRequest(broker_id=1, broker_epoch=5, topics=[]), "alter_partition",
     AclOperation.CLUSTER_ACTION),
    (43, 2, ElectLeadersRequest(election_type=0, topic_partitions=[], timeout_ms=1000), "elect_leaders",
     AclOperation.ALTER),
    (45, 0, AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[]), "alter_partition_reassignments",
     AclOperation.ALTER),
    (46, 0, ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None), "list_partition_reassignments",
     AclOperation.DESCRIBE),
]


def call(apis: KafkaApis, api_key: int, version: int, body, principal: str):
    request = Request(api_key, version, 1, "test", None, body, APIS[api_key])
    return asyncio.run(apis.handle(request, Connection(principal)))


@pytest.mark.parametrize("api_key, version, body, asked, operation", CASES, ids=[str(c[0]) for c in CASES])
def test_controller_apis_are_refused_without_the_cluster_acl(api_key, version, body, asked, operation):
    authorizer = AclAuthorizer(super_users="User:admin")
    controller = Controller()
    apis = KafkaApis(controller_api_handlers(controller, MetadataCache(0), auth=AuthHelper(authorizer)))
    assert call(apis, api_key, version, body, "broker").error_code == DENIED
    assert controller.asked == []
    # a broader grant that is not the one asked for does not do
    other = AclOperation.DESCRIBE if operation is not AclOperation.DESCRIBE else AclOperation.CREATE
    authorizer.create_acls([AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
                                       AccessControlEntry("User:broker", "*", other, AclPermissionType.ALLOW))])
    assert call(apis, api_key, version, body, "broker").error_code == DENIED and controller.asked == []
    authorizer.create_acls([AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
                                       AccessControlEntry("User:broker", "*", operation, AclPermissionType.ALLOW))])
    assert call(apis, api_key, version, body, "broker").error_code == ErrorCode.NONE
    assert controller.asked == [asked]
    assert call(apis, api_key, version, body, "admin").error_code == ErrorCode.NONE      # a super user
