"""DescribeAcls, CreateAcls and DeleteAcls (Kafka's AclApis): the cluster check, then the authorizer
(kafka_compat.security.acl_requests turns each request into the authorizer's calls and the answer).

DESCRIBE on the cluster lets a client list ACLs, ALTER lets it change them
(CLUSTER_AUTHORIZATION_FAILED otherwise); without an authorizer the answer is
SECURITY_DISABLED. Changes are persisted by the authorizer's store (a file, or
ZooKeeper), which may block: they run on a worker thread, never on the event loop.
"""
from __future__ import annotations

import asyncio

from ..protocol.errors import ErrorCode
from ..protocol.messages.create_acls import CreateAclsResponse
from ..protocol.messages.delete_acls import DeleteAclsResponse
from ..protocol.messages.describe_acls import DescribeAclsResponse
from ..security import acl_requests
from .auth_helper import ALTER, DESCRIBE, NO_AUTHORIZER, AuthHelper
from .registry import handles

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class AclApis:
    def __init__(self, auth: AuthHelper = NO_AUTHORIZER):
        self.auth = auth

    @handles(29)
    def handle_describe_acls(self, request):
        if not self.auth.authorize_cluster(request, DESCRIBE):
            return DescribeAclsResponse(error_code=DENIED, error_message=DENIED.message)
        return acl_requests.describe_acls(self.auth.authorizer, request.body, request.api_version)

    @handles(30)
    def handle_create_acls(self, request):
        if not self.auth.authorize_cluster(request, ALTER):
            return CreateAclsResponse(results=[CreateAclsResponse.AclCreationResult(
                error_code=DENIED, error_message=DENIED.message) for _ in request.body.creations])
        return asyncio.to_thread(acl_requests.create_acls, self.auth.authorizer, request.body, request.api_version)

    @handles(31)
    def handle_delete_acls(self, request):
        if not self.auth.authorize_cluster(request, ALTER):
            return DeleteAclsResponse(filter_results=[DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=DENIED, error_message=DENIED.message) for _ in request.body.filters])
        return asyncio.to_thread(acl_requests.delete_acls, self.auth.authorizer, request.body, request.api_version)
