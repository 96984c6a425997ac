"""SaslHandshake and SaslAuthenticate outside the SASL exchange (Kafka's KafkaApis answers).

On a SASL listener the connection's SaslServerAuthenticator answers these until (and, for
re-authentication, after) the client is authenticated. A request that reaches the handlers
came on a listener without SASL: Kafka answers ILLEGAL_SASL_STATE. Both APIs are still
advertised by ApiVersions on every listener, as Kafka advertises them.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from ..protocol.messages.sasl_handshake import SaslHandshakeResponse
from .registry import handles


class SaslApis:
    @handles(17)
    def handle_sasl_handshake(self, request):
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])

    @handles(36)
    def handle_sasl_authenticate(self, request):
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                                        error_message="SaslAuthenticate request received after successful "
                                                      "authentication")
