"""LeaderAndIsr, UpdateMetadata and StopReplica ask the authorizer before anything else, as Kafka's
KafkaApis does: only a principal with CLUSTER_ACTION on the cluster (the brokers' own login, a super
user in practice) may change what this broker leads, follows or knows. Anyone else gets
CLUSTER_AUTHORIZATION_FAILED and nothing changes. The handlers run in-process (test_control_requests'
broker) with the caller's principal on its connection."""
from __future__ import annotations

import asyncio

from test_control_requests import LISR, ME, STOP, UM, lisr, stop_replica, update_metadata
from test_control_requests import Broker as ControlBroker

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import encode_request, parse_request
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
from kafka_compat.server.control_requests import ControlRequestsApi
from kafka_compat.server.kafka_apis import KafkaApis

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
CLUSTER = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)


class Connection:
    def __init__(self, user: str):
        self.principal = KafkaPrincipal("User", user)
        self.host, self.acl_key = "127.0.0.1", f"User:{user}|127.0.0.1"


def grant(authorizer: AclAuthorizer, user: str, operation: AclOperation) -> None:
    authorizer.create_acls([AclBinding(CLUSTER, AccessControlEntry(f"User:{user}", "*", operation,
                                                                   AclPermissionType.ALLOW))])


def test_control_requests_need_cluster_action(tmp_path):
    authorizer = AclAuthorizer(super_users="User:broker")

    async def scenario():
        b = ControlBroker(tmp_path)
        b.apis = KafkaApis([ControlRequestsApi(ME, b.rm, b.cache, b.groups, lambda: b.epoch,
                                               auth=AuthHelper(authorizer))])
        await b.groups.startup()

        async def call(user, api_key, version, body):
            request = parse_request(encode_request(api_key, version, body, 1)[4:])
            result = b.apis.handle(request, Connection(user))
            return await result if asyncio.iscoroutine(result) else result

        brokers = [(ME, [("INTERNAL", "127.0.0.1", 9092)], None)]
        partition = lisr((0, ME, 1, [ME], [ME]))
        try:
            out = {}
            for user in ("mallory", "describer"):
                out[user] = ((await call(user, LISR, 7, partition)).error_code,
                             (await call(user, UM, 8, update_metadata(brokers))).error_code,
                             (await call(user, STOP, 4, stop_replica((0, 1, False)))).error_code,
                             b.rm.get_partition("t", 0) is not None, sorted(b.cache.brokers))
                grant(authorizer, "describer", AclOperation.DESCRIBE)   # not the operation asked for
            lead = (await call("broker", LISR, 7, partition)).error_code, b.rm.get_partition("t", 0) is not None
            grant(authorizer, "operator", AclOperation.CLUSTER_ACTION)
            known = (await call("operator", UM, 8, update_metadata(brokers))).error_code, sorted(b.cache.brokers)
            stop = (await call("mallory", STOP, 4, stop_replica((0, 1, False)))).error_code, \
                b.rm.get_partition("t", 0) is not None
            return out, lead, known, stop
        finally:
            await b.groups.shutdown()
            b.close()

    out, lead, known, stop = asyncio.run(scenario())
    for user in ("mallory", "describer"):
        assert out[user] == (DENIED, DENIED, DENIED, False, []), user
    assert lead == (ErrorCode.NONE, True)                  # a super user leads the partition
    assert known == (ErrorCode.NONE, [ME])                 # an explicit CLUSTER_ACTION grant does too
    assert stop == (DENIED, True)                          # and a refused StopReplica leaves it hosted
