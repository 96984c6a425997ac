"""The client side of SASL (kafka_compat.security.sasl_client) against the server side.

The exchange is run through the server's SaslServerAuthenticator with encoded frames, so both
sides see exactly what the wire carries; the SCRAM client's messages are also checked by a second
implementation of RFC 5802 written out here from the RFC's formulas.
"""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from wire import decode_response, encode_request

from kafka_compat.configdef import ConfigError
from kafka_compat.endpoint import SecurityProtocol
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import encode_response
from kafka_compat.protocol.messages.api_versions import ApiVersionsResponse
from kafka_compat.protocol.sasl import (
    Authenticated,
    PlainServer,
    SaslServerAuthenticator,
    ScramMechanism,
    ScramServer,
    SendResponse,
)
from kafka_compat.security.jaas import PlainCredentials
from kafka_compat.security.sasl_client import (
    PlainClient,
    SaslClientAuthenticator,
    SaslClientError,
    ScramClient,
    client_security,
    sasl_client,
)
from kafka_compat.security.scram import CredentialStore, credential_from_password

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def server(store: CredentialStore) -> SaslServerAuthenticator:
    plain = PlainCredentials({"alice": "alice-secret"})
    return SaslServerAuthenticator({
        "PLAIN": lambda: PlainServer(plain.verify),
        "SCRAM-SHA-256": lambda: ScramServer(SHA256, lambda u: store.lookup(SHA256, u)),
        "SCRAM-SHA-512": lambda: ScramServer(SHA512, lambda u: store.lookup(SHA512, u)),
    }, lambda request: ApiVersionsResponse(error_code=0, api_keys=[]))


def exchange(srv: SaslServerAuthenticator, client) -> tuple[SaslClientAuthenticator, list]:
    """Run the whole exchange through encoded frames; the client authenticator and the server's last outputs."""
    auth = SaslClientAuthenticator(client)
    correlation = 1

    def roundtrip(api_key, version, body):
        nonlocal correlation
        correlation += 1
        outputs = srv.receive_frame(encode_request(api_key, version, body, correlation)[4:])
        response = next(o for o in outputs if isinstance(o, SendResponse))
        data = encode_response(response.request, response.body)
        return decode_response(api_key, version, bytes(data[4:]))[1], outputs

    response, outputs = roundtrip(17, 1, auth.handshake_request())
    request = auth.handshake_response(response)
    while request is not None:
        response, outputs = roundtrip(36, 1, request)
        request = auth.authenticate_response(response)
    return auth, outputs


@pytest.fixture
def store():
    s = CredentialStore()
    for mech in (SHA256, SHA512):
        s.upsert(mech, "bob", credential_from_password(mech, "bob-secret", iterations=4096))
    return s


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_client_logs_in(store, mechanism):
    user, password = ("alice", "alice-secret") if mechanism == "PLAIN" else ("bob", "bob-secret")
    auth, outputs = exchange(server(store), sasl_client(mechanism, user, password))
    assert auth.complete
    assert outputs[-1] == Authenticated(mechanism, user, 0, False)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_is_an_error_with_the_brokers_message(store, mechanism):
    user = "alice" if mechanism == "PLAIN" else "bob"
    with pytest.raises(SaslClientError, match="Authentication failed"):
        exchange(server(store), sasl_client(mechanism, user, "wrong"))


def test_scram_client_checks_the_server_signature():
    client = ScramClient(SHA256, "bob", "bob-secret", nonce="cnonce")
    assert client.initial() == b"n,,n=bob,r=cnonce"
    salt = b"0123456789abcdef"
    final = client.evaluate(f"r=cnonceSRV,s={base64.b64encode(salt).decode()},i=4096".encode())
    for bad in (b"v=" + base64.b64encode(b"\0" * 32), b"v=***", b"x=1", "v=\u00e9".encode()):
        with pytest.raises(SaslClientError, match="invalid server signature"):
            client.evaluate(bad)
    # the proof, computed here straight from RFC 5802's formulas
    salted = hashlib.pbkdf2_hmac("sha256", b"bob-secret", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    auth_message = f"n=bob,r=cnonce,r=cnonceSRV,s={base64.b64encode(salt).decode()},i=4096,c=biws,r=cnonceSRV"
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message.encode(), "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    assert final == f"c=biws,r=cnonceSRV,p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("server_first, message", [
    (b"r=othernonce,s=c2FsdA==,i=4096", "nonce"),
    (b"r=cnonce,s=c2FsdA==,i=4096", "nonce"),               # not extended by the server
    (b"r=cnonceX,s=c2FsdA==,i=100", "iterations"),
    (b"r=cnonceX,s=c2FsdA==,i=100000000", "iterations"),     # a server making us hash for minutes
    (b"r=cnonceX,s=c2FsdA==,i=" + b"9" * 5000, "invalid server-first"),
    (b"r=cnonceX,i=4096", "invalid server-first"),
    (b"r=cnonceX,s=not*base64!,i=4096", "salt is not base64"),
    (b"\xff\xfe", "nonce"),
])
def test_scram_client_refuses_a_bad_server_first(server_first, message):
    with pytest.raises(SaslClientError, match=message):
        ScramClient(SHA512, "bob", "x", nonce="cnonce").evaluate(server_first)


def test_plain_client_message_and_escaped_scram_names():
    assert PlainClient("alice", "pw").initial() == b"\x00alice\x00pw"
    assert ScramClient(SHA256, "a,b=c", "pw", nonce="n").initial() == b"n,,n=a=2Cb=3Dc,r=n"


def test_client_security_reads_the_listeners_jaas_config():
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            'password="broker-secret";')
    sec = client_security(SecurityProtocol.SASL_PLAINTEXT, {"scram-sha-512.sasl.jaas.config": jaas},
                          "SCRAM-SHA-512", "INTERNAL")
    assert (sec.sasl_mechanism, sec.username, sec.password, sec.ssl_context) == \
        ("SCRAM-SHA-512", "broker", "broker-secret", None)
    assert "broker-secret" not in repr(sec)
    assert sec.authenticator().client.mechanism_name == "SCRAM-SHA-512"
    with pytest.raises(ConfigError, match="listener.name.internal.plain.sasl.jaas.config"):
        client_security(SecurityProtocol.SASL_PLAINTEXT, {}, "PLAIN", "INTERNAL")
    assert client_security(SecurityProtocol.PLAINTEXT, {}).authenticator() is None


def test_unknown_mechanism_in_handshake_answer():
    auth = SaslClientAuthenticator(PlainClient("a", "b"))
    with pytest.raises(SaslClientError, match="UNSUPPORTED_SASL_MECHANISM.*SCRAM-SHA-256"):
        auth.handshake_response(type("R", (), {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                               "mechanisms": ["SCRAM-SHA-256"]})())
