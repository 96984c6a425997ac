"""AuthHelper: the handlers' one way to ask the authorizer (Kafka's AuthHelper).

A request's connection knows who is asking (principal and client address); the
authorizer, when `authorizer.class.name` names one, answers. Without an authorizer
every question is answered yes and the authorized-operations fields list every
operation the resource type supports, as Kafka does. Operations and resource types
are plain ints here: the authorizer caches each answer under (connection, operation,
type, name), so a check on the produce and fetch paths is one dict lookup per topic.
"""
from __future__ import annotations

from typing import Iterable

from ..security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from ..security.principal import ANONYMOUS

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    int(op) for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                       AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
                       AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE))
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (int(t) for t in (ResourceType.TOPIC, ResourceType.GROUP,
                                                             ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID))
AUTHORIZED_OPS_NOT_REQUESTED = -2147483648
_ALL_OPS = {int(t): sum(1 << op for op in ops) for t, ops in SUPPORTED_OPERATIONS.items()}


class _Nobody:
    """The caller of a request that came without a connection (a handler driven directly)."""
    principal = ANONYMOUS
    host = ""
    acl_key = f"{ANONYMOUS}|"


_NOBODY = _Nobody()


def caller(request):
    connection = request.connection
    return connection if connection is not None and hasattr(connection, "acl_key") else _NOBODY


class AuthHelper:
    def __init__(self, authorizer=None):
        self.authorizer = authorizer        # an AclAuthorizer, or None: everything is allowed

    def authorize(self, request, operation: int, resource_type: int, name: str) -> bool:
        authorizer = self.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_caller(caller(request), operation, resource_type, name)

    def authorize_cluster(self, request, operation: int) -> bool:
        return self.authorize(request, operation, CLUSTER, CLUSTER_NAME)

    def filter_authorized(self, request, operation: int, resource_type: int, names: Iterable[str]) -> set[str]:
        """The names (None is skipped) the caller may perform `operation` on."""
        names = {n for n in names if n is not None}
        if self.authorizer is None:
            return names
        who = caller(request)
        check = self.authorizer.authorize_caller
        return {n for n in names if check(who, operation, resource_type, n)}

    def authorize_by_resource_type(self, request, operation: int, resource_type: int) -> bool:
        """May the caller perform `operation` on at least one resource of the type (KIP-679)?"""
        if self.authorizer is None:
            return True
        who = caller(request)
        return self.authorizer.authorize_by_resource_type(who.principal, who.host, AclOperation(operation),
                                                          ResourceType(resource_type))

    def authorized_operations(self, request, resource_type: int, name: str) -> int:
        """The authorized-operations bit field of the resource (bit n: operation code n allowed)."""
        authorizer = self.authorizer
        if authorizer is None:
            return _ALL_OPS[resource_type]
        who = caller(request)
        bits = 0
        for op in SUPPORTED_OPERATIONS[ResourceType(resource_type)]:
            if authorizer.authorize_caller(who, int(op), resource_type, name):
                bits |= 1 << op
        return bits

    def cluster_authorized_operations(self, request, wanted: bool) -> int:
        """Metadata's and DescribeCluster's field: not requested, 0 without DESCRIBE on the cluster, else the bits."""
        if not wanted:
            return AUTHORIZED_OPS_NOT_REQUESTED
        if not self.authorize_cluster(request, DESCRIBE):
            return 0
        return self.authorized_operations(request, CLUSTER, CLUSTER_NAME)


NO_AUTHORIZER = AuthHelper(None)
