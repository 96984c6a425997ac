"""Opening a connection to a broker listener as a client: TCP, then TLS, then SASL (Kafka's client
channel builders), for inter-broker and controller connections.

`open_channel(host, port, security)` returns asyncio streams on which the caller speaks
Kafka; by then the TLS handshake (checking the broker's certificate against the trust store,
offering ours for mutual TLS) and the SASL exchange (SaslHandshake v1, SaslAuthenticate
rounds, driven by the sans-I/O SaslClientAuthenticator) are done. Failures raise
`ChannelError` and leave nothing open.
"""
from __future__ import annotations

import asyncio
import struct

from ..protocol.frames import decode_response, encode_request
from ..security.sasl_client import SASL_HANDSHAKE_VERSION, ClientSecurity, SaslClientError

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATE_VERSION = 1
MAX_SASL_FRAME = 524288
_SIZE = struct.Struct(">i")


class ChannelError(Exception):
    """The connection could not be opened, secured or authenticated."""


async def _call(reader, writer, api_key: int, version: int, body, correlation_id: int, client_id: str):
    writer.write(encode_request(api_key, version, body, correlation_id, client_id))
    await writer.drain()
    size, = _SIZE.unpack(await reader.readexactly(4))
    if not 0 <= size <= MAX_SASL_FRAME:
        raise ChannelError(f"bad response size {size} during SASL authentication")
    got, response = decode_response(api_key, version, await reader.readexactly(size))
    if got != correlation_id:
        raise ChannelError(f"response {got} to request {correlation_id} during SASL authentication")
    return response


async def sasl_exchange(security: ClientSecurity, call) -> int:
    """Drive the SASL login of ``security`` over ``call(api_key, version, body) -> awaitable response``
    (whatever carries the connection's requests); the session lifetime the broker granted (0: none).
    A refused or malformed exchange raises SaslClientError."""
    auth = security.authenticator()
    if auth is None:
        return 0
    response = await call(SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, auth.handshake_request())
    request = auth.handshake_response(response)
    while request is not None:
        response = await call(SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, request)
        request = auth.authenticate_response(response)
    return auth.session_lifetime_ms


async def authenticate(reader, writer, security: ClientSecurity, client_id: str = "kafka-compat-broker") -> int:
    """Run the SASL exchange on an open connection; the session lifetime the broker granted (0: none)."""
    correlation = 0

    def call(api_key: int, version: int, body):
        nonlocal correlation
        correlation += 1
        return _call(reader, writer, api_key, version, body, correlation, client_id)
    try:
        return await sasl_exchange(security, call)
    except SaslClientError as e:
        raise ChannelError(f"SASL/{security.sasl_mechanism} authentication failed: {e}") from None
    except (asyncio.IncompleteReadError, ConnectionError) as e:
        raise ChannelError(f"the broker closed the connection during SASL authentication: {e}") from None


async def open_channel(host: str, port: int, security: ClientSecurity | None = None, *,
                       client_id: str = "kafka-compat-broker", server_hostname: str | None = None,
                       timeout: float = 30.0, limit: int = 2 ** 20):
    """(reader, writer) of an authenticated connection to host:port."""
    security = security or ClientSecurity()
    context = security.ssl_context
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host, port, ssl=context, server_hostname=(server_hostname or host) if context is not None else None,
            limit=limit), timeout)
    except (OSError, asyncio.TimeoutError) as e:
        raise ChannelError(f"cannot connect to {host}:{port} ({security.security_protocol.name}): {e}") from None
    try:
        await asyncio.wait_for(authenticate(reader, writer, security, client_id), timeout)
    except BaseException as e:
        writer.close()
        if isinstance(e, asyncio.TimeoutError):
            raise ChannelError(f"SASL authentication with {host}:{port} timed out") from None
        raise
    return reader, writer
