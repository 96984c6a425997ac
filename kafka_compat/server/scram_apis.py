"""DescribeUserScramCredentials and AlterUserScramCredentials: the cluster check, then the store.

DESCRIBE on the cluster lets a client list whose credentials exist (never the
credentials), ALTER lets it change them (CLUSTER_AUTHORIZATION_FAILED otherwise).
The credential store persists a change before it is used for logins; that may
block (a file's fsync, ZooKeeper), so alterations run on a worker thread.
"""
from __future__ import annotations

import asyncio

from ..protocol.errors import ErrorCode
from ..protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsResponse
from ..protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsResponse
from ..security.scram import CredentialStore, alter_user_scram_credentials, describe_user_scram_credentials
from .auth_helper import ALTER, DESCRIBE, NO_AUTHORIZER, AuthHelper
from .registry import handles

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class ScramApis:
    def __init__(self, credentials: CredentialStore, auth: AuthHelper = NO_AUTHORIZER):
        self.credentials = credentials
        self.auth = auth

    @handles(50)
    def handle_describe_user_scram_credentials(self, request):
        if not self.auth.authorize_cluster(request, DESCRIBE):
            return DescribeUserScramCredentialsResponse(error_code=DENIED, error_message=DENIED.message, results=[])
        return describe_user_scram_credentials(self.credentials, request.body)

    @handles(51)
    def handle_alter_user_scram_credentials(self, request):
        body = request.body
        if not self.auth.authorize_cluster(request, ALTER):
            users = dict.fromkeys([u.name for u in body.deletions] + [u.name for u in body.upsertions])
            return AlterUserScramCredentialsResponse(results=[
                AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
                    user=u, error_code=DENIED, error_message=DENIED.message) for u in users])
        return asyncio.to_thread(alter_user_scram_credentials, self.credentials, body)
