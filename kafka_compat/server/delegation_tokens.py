"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and DescribeDelegationToken (38-41).

Thin handlers over the DelegationTokenManager, with Kafka's rules for who may ask: never over a
PLAINTEXT listener, a one-way TLS connection or a connection that itself logged in with a token
(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); a token for another owner needs CREATE_TOKENS on that USER;
a token is described to its owner, requester and renewers, and to whoever may DESCRIBE_TOKENS on its
owner or DESCRIBE it as a DELEGATION_TOKEN resource. Tokens are off (DELEGATION_TOKEN_AUTH_DISABLED)
until `delegation.token.secret.key` is set.
"""
from __future__ import annotations

import asyncio

from ..endpoint import SecurityProtocol
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.create_delegation_token import CreateDelegationTokenResponse
from ..protocol.messages.describe_delegation_token import DescribeDelegationTokenResponse
from ..protocol.messages.expire_delegation_token import ExpireDelegationTokenResponse
from ..protocol.messages.renew_delegation_token import RenewDelegationTokenResponse
from ..security.acl import AclOperation, ResourceType
from ..security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from .auth_helper import DESCRIBE, NO_AUTHORIZER, AuthHelper, caller
from .delegation_token_manager import DelegationTokenManager
from .registry import handles

CREATE_TOKENS, DESCRIBE_TOKENS = int(AclOperation.CREATE_TOKENS), int(AclOperation.DESCRIBE_TOKENS)
USER, DELEGATION_TOKEN = int(ResourceType.USER), int(ResourceType.DELEGATION_TOKEN)


def allow_token_requests(request) -> bool:
    """Kafka's KafkaApis.allowTokenRequests."""
    conn = request.connection
    security = getattr(conn, "security", None)
    protocol = security.security_protocol if security is not None else SecurityProtocol.PLAINTEXT
    principal = caller(request).principal
    return not (getattr(conn, "token_authenticated", False) or protocol is SecurityProtocol.PLAINTEXT
                or (protocol is SecurityProtocol.SSL and principal == ANONYMOUS))


class DelegationTokenApis:
    def __init__(self, manager: DelegationTokenManager, auth: AuthHelper = NO_AUTHORIZER):
        self.manager = manager
        self.auth = auth

    @handles(38)
    async def handle_create_delegation_token(self, request):
        req, v = request.body, request.api_version
        requester = caller(request).principal
        owner = requester
        if v >= 3 and req.owner_principal_name:
            owner = KafkaPrincipal(req.owner_principal_type or USER_TYPE, req.owner_principal_name)

        def answer(code, info=None, mac=b""):
            return CreateDelegationTokenResponse(
                error_code=code, principal_type=owner.principal_type, principal_name=owner.name,
                token_requester_principal_type=requester.principal_type, token_requester_principal_name=requester.name,
                issue_timestamp_ms=info.issue_ms if info else -1, expiry_timestamp_ms=info.expiry_ms if info else -1,
                max_timestamp_ms=info.max_ms if info else -1, token_id=info.token_id if info else "", hmac=mac,
                throttle_time_ms=0)

        if not allow_token_requests(request):
            return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
        if owner != requester and not self.auth.authorize(request, CREATE_TOKENS, USER, str(owner)):
            return answer(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
        renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in req.renewers]
        if owner.principal_type != USER_TYPE or any(r.principal_type != USER_TYPE for r in renewers):
            return answer(ErrorCode.INVALID_PRINCIPAL_TYPE)
        if not self.manager.enabled:
            return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        info, mac = await asyncio.to_thread(self.manager.create, owner, requester, renewers, req.max_lifetime_ms)
        return answer(ErrorCode.NONE, info, mac)

    async def _change(self, request, change, period: int, response_class):
        if not allow_token_requests(request):
            return response_class(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry_timestamp_ms=-1)
        if not self.manager.enabled:
            return response_class(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, expiry_timestamp_ms=-1)
        try:
            expiry = await asyncio.to_thread(change, caller(request).principal, request.body.hmac, period)
        except KafkaError as e:
            return response_class(error_code=e.error_code, expiry_timestamp_ms=-1)
        return response_class(error_code=ErrorCode.NONE, expiry_timestamp_ms=expiry)

    @handles(39)
    async def handle_renew_delegation_token(self, request):
        return await self._change(request, self.manager.renew, request.body.renew_period_ms,
                                  RenewDelegationTokenResponse)

    @handles(40)
    async def handle_expire_delegation_token(self, request):
        return await self._change(request, self.manager.expire, request.body.expiry_time_period_ms,
                                  ExpireDelegationTokenResponse)

    @handles(41)
    def handle_describe_delegation_token(self, request):
        D = DescribeDelegationTokenResponse
        if not allow_token_requests(request):
            return D(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[])
        if not self.manager.enabled:
            return D(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, tokens=[])
        owners = request.body.owners
        if owners is not None and not owners:       # as Kafka: an empty list (what kafka-delegation-tokens
            return D(error_code=ErrorCode.NONE, tokens=[])      # --describe sends without --owner-principal)
        wanted = None if owners is None else [KafkaPrincipal(o.principal_type, o.principal_name) for o in owners]
        me = caller(request).principal
        tokens = []
        for info, mac in self.manager.tokens():
            if wanted is not None and not any(info.owner_or_renewer(p) for p in wanted):
                continue
            if not (info.owner_or_renewer(me) or self.auth.authorize(request, DESCRIBE_TOKENS, USER, str(info.owner))
                    or self.auth.authorize(request, DESCRIBE, DELEGATION_TOKEN, info.token_id)):
                continue
            tokens.append(D.DescribedDelegationToken(
                principal_type=info.owner.principal_type, principal_name=info.owner.name,
                token_requester_principal_type=info.requester.principal_type,
                token_requester_principal_name=info.requester.name, issue_timestamp=info.issue_ms,
                expiry_timestamp=info.expiry_ms, max_timestamp=info.max_ms, token_id=info.token_id, hmac=mac,
                renewers=[D.DescribedDelegationTokenRenewer(
                    principal_type=r.principal_type, principal_name=r.name) for r in info.renewers]))
        return D(error_code=ErrorCode.NONE, tokens=tokens)
