"""The SASL state machine (kafka_compat.protocol.sasl) driven with real request frames.

Frames are encoded by our codecs and, for the SCRAM / PLAIN / OAUTHBEARER client side, by the
installed kafka-python package (its protocol classes and SASL mechanisms are the peer); every
answer is encoded with frames.encode_response and decoded again before it is checked.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import random

import pytest
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import SaslMechanismScram
from kafka.protocol.sasl import SaslAuthenticateRequest as KpAuthenticate
from kafka.protocol.sasl import SaslAuthenticateResponse as KpAuthenticateResponse
from kafka.protocol.sasl import SaslHandshakeRequest as KpHandshake
from kafka.protocol.sasl import SaslHandshakeResponse as KpHandshakeResponse
from wire import decode_response, encode_request

from kafka_compat.configdef import ConfigError
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import encode_response
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kafka_compat.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kafka_compat.protocol.sasl import (
    Authenticated,
    Close,
    OAuthBearerServer,
    PlainServer,
    RawToken,
    SaslServerAuthenticator,
    SaslState,
    ScramMechanism,
    ScramServer,
    SendBytes,
    SendResponse,
    SendToken,
    api_key_name,
)
from kafka_compat.security.jaas import PlainCredentials, entry_option, parse_jaas_config
from kafka_compat.security.oauthbearer import UnsecuredJwsValidator, unsecured_jws
from kafka_compat.security.scram import CredentialStore, credential_from_password

OUTPUT_TYPES = (SendResponse, SendToken, SendBytes, Authenticated, Close)
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


class Clock:
    def __init__(self):
        self.wall = 1_700_000_000.0
        self.mono = 1000.0

    def time(self):
        return self.wall

    def monotonic(self):
        return self.mono

    def advance(self, seconds: float):
        self.wall += seconds
        self.mono += seconds


def api_versions(request):
    return ApiVersionsResponse(error_code=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=v)
        for k, v in ((17, 1), (18, 4), (36, 2))])


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store():
    s = CredentialStore()
    s.upsert(SHA256, "alice", credential_from_password(SHA256, "alice-secret"))
    s.upsert(SHA512, "alice", credential_from_password(SHA512, "alice-secret"))
    s.upsert(SHA256, "bob", credential_from_password(SHA256, "bob-secret"))
    return s


def authenticator(clock, store=None, mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"), **kw):
    plain = PlainCredentials({"alice": "alice-secret", "bob": "bob-secret"})
    store = store or CredentialStore()
    validator = UnsecuredJwsValidator({"unsecuredValidatorRequiredScope": kw.pop("required_scope", "")},
                                      clock=clock.time)
    factories = {
        "PLAIN": lambda: PlainServer(plain.verify),
        "SCRAM-SHA-256": lambda: ScramServer(SHA256, lambda u: store.lookup(SHA256, u)),
        "SCRAM-SHA-512": lambda: ScramServer(SHA512, lambda u: store.lookup(SHA512, u)),
        "OAUTHBEARER": lambda: OAuthBearerServer(validator),
    }
    return SaslServerAuthenticator({m: factories[m] for m in mechanisms}, api_versions,
                                   clock=clock.time, monotonic=clock.monotonic, **kw)


def frame(api_key, version, body, correlation_id=1):
    return encode_request(api_key, version, body, correlation_id)[4:]


def decoded(output):
    """The response an output would put on the wire, decoded again with our codecs."""
    assert isinstance(output, SendResponse), output
    data = encode_response(output.request, output.body)
    correlation_id, body = decode_response(output.request.api_key, output.request.api_version, bytes(data[4:]))
    assert correlation_id == output.request.correlation_id
    return body


def handshake(auth, mechanism, version=1, correlation_id=2):
    out = auth.receive_frame(frame(17, version, SaslHandshakeRequest(mechanism=mechanism), correlation_id))
    assert len(out) == 1, out
    body = decoded(out[0])
    assert body.error_code == ErrorCode.NONE
    return body


def authenticate(auth, token, version=1, correlation_id=3):
    return auth.receive_frame(frame(36, version, SaslAuthenticateRequest(auth_bytes=token), correlation_id))


def plain_token(user, password, authzid=""):
    return f"{authzid}\x00{user}\x00{password}".encode()


# -- the handshake ---------------------------------------------------------------------


def test_plain_handshake_v1_with_api_versions_first(clock):
    auth = authenticator(clock)
    out = auth.receive_frame(frame(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")))
    assert decoded(out[0]).api_keys[0].api_key == 17
    body = handshake(auth, "PLAIN")
    assert body.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert auth.state is SaslState.AUTHENTICATING and not auth.raw_tokens
    out = authenticate(auth, plain_token("alice", "alice-secret"), version=2)
    assert [type(o) for o in out] == [SendResponse, Authenticated]
    response = decoded(out[0])
    assert (response.error_code, response.error_message, response.auth_bytes, response.session_lifetime_ms) == \
        (ErrorCode.NONE, None, b"", 0)
    assert out[1] == Authenticated("PLAIN", "alice", 0, False)
    assert auth.state is SaslState.AUTHENTICATED and auth.authorization_id == "alice"
    assert not auth.session_expired()


@pytest.mark.parametrize("token, message", [
    (plain_token("alice", "wrong"), "Authentication failed: Invalid username or password"),
    (plain_token("carol", "x"), "Authentication failed: Invalid username or password"),
    (plain_token("alice", "alice-secret", authzid="bob"),
     "Authentication failed: Client requested an authorization id that is different from username"),
    (plain_token("", "x"), "Authentication failed: username not specified"),
    (plain_token("alice", ""), "Authentication failed: password not specified"),
    (b"alice\x00alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"a\x00alice\x00alice-secret\x00x", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
])
def test_plain_failures_answer_then_close(clock, token, message):
    auth = authenticator(clock)
    handshake(auth, "PLAIN")
    out = authenticate(auth, token)
    assert [type(o) for o in out] == [SendResponse, Close]
    response = decoded(out[0])
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == message
    assert auth.state is SaslState.FAILED
    again = authenticate(auth, plain_token("alice", "alice-secret"))
    assert [type(o) for o in again] == [Close]


def test_plain_authzid_equal_to_username_is_accepted(clock):
    auth = authenticator(clock)
    handshake(auth, "PLAIN")
    out = authenticate(auth, plain_token("bob", "bob-secret", authzid="bob"))
    assert out[-1] == Authenticated("PLAIN", "bob", 0, False)


def test_unsupported_mechanism_lists_enabled_then_closes(clock):
    auth = authenticator(clock, mechanisms=("PLAIN", "SCRAM-SHA-256"))
    out = auth.receive_frame(frame(17, 1, SaslHandshakeRequest(mechanism="GSSAPI")))
    assert [type(o) for o in out] == [SendResponse, Close]
    body = decoded(out[0])
    assert body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert body.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    assert "GSSAPI" in out[1].reason
    assert auth.state is SaslState.FAILED


def test_other_api_before_authentication_closes_without_answer(clock):
    auth = authenticator(clock)
    out = auth.receive_frame(frame(3, 12, MetadataRequest(topics=None)))
    assert out == [Close("Unexpected Kafka request of type METADATA during SASL handshake.")]
    assert auth.state is SaslState.FAILED


def test_authenticate_before_handshake_closes(clock):
    auth = authenticator(clock)
    out = authenticate(auth, plain_token("alice", "alice-secret"))
    assert [type(o) for o in out] == [Close] and "SASL_AUTHENTICATE" in out[0].reason


def test_api_versions_only_once(clock):
    auth = authenticator(clock)
    auth.receive_frame(frame(18, 0, ApiVersionsRequest()))
    out = auth.receive_frame(frame(18, 0, ApiVersionsRequest()))
    assert [type(o) for o in out] == [Close] and "API_VERSIONS" in out[0].reason


def test_api_versions_of_unknown_version_is_answered_and_can_be_retried(clock):
    """A future version is answered if its header parses (v3+: the flexible header, as a new client sends it)."""
    auth = authenticator(clock)
    raw = bytearray(frame(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")))
    raw[2:4] = (9).to_bytes(2, "big")
    out = auth.receive_frame(raw)
    assert [type(o) for o in out] == [SendBytes]
    _, body = decode_response(18, 0, out[0].data[4:])
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.max_version) for k in body.api_keys] == [(18, 5)]
    assert auth.state is SaslState.HANDSHAKE
    assert decoded(auth.receive_frame(frame(18, 2, ApiVersionsRequest()))[0]).error_code == ErrorCode.NONE
    handshake(auth, "PLAIN")


def test_api_versions_of_unknown_version_with_a_header_cut_short_closes(clock):
    """As Kafka: a future ApiVersions whose header does not parse at that version's header version is closed."""
    auth = authenticator(clock)
    raw = bytearray(frame(18, 0, ApiVersionsRequest()))
    raw[2:4] = (9).to_bytes(2, "big")
    assert [type(o) for o in auth.receive_frame(raw)] == [Close]


def test_requests_while_authenticating_get_illegal_sasl_state_where_possible(clock):
    for api_key, version, body, answered in [
        (17, 1, SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse),
        (18, 3, ApiVersionsRequest(client_software_name="a", client_software_version="1"), ApiVersionsResponse),
        (3, 12, MetadataRequest(topics=None), None),
    ]:
        auth = authenticator(clock)
        handshake(auth, "PLAIN")
        out = auth.receive_frame(frame(api_key, version, body))
        if answered is None:
            assert [type(o) for o in out] == [Close]
        else:
            assert [type(o) for o in out] == [SendResponse, Close]
            response = decoded(out[0])
            assert isinstance(response, answered) and response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert "during SASL authentication" in out[-1].reason
        assert auth.state is SaslState.FAILED


def test_first_packet_that_is_not_a_kafka_request_closes(clock):
    auth = authenticator(clock)
    out = auth.receive_frame(b"\x60\x82\x01\x00")          # what a 0.9 GSSAPI token starts with
    assert [type(o) for o in out] == [Close] and "GSSAPI" in out[0].reason


def test_oversized_frame_closes(clock):
    auth = authenticator(clock, max_receive_size=1024)
    handshake(auth, "PLAIN")
    out = authenticate(auth, b"\x00" * 2000)
    assert [type(o) for o in out] == [Close] and "invalid receive size" in out[0].reason
    assert auth.state is SaslState.FAILED


def test_raw_tokens_after_handshake_v0(clock):
    auth = authenticator(clock)
    handshake(auth, "PLAIN", version=0)
    assert auth.raw_tokens
    out = auth.receive_frame(plain_token("alice", "alice-secret"))
    assert out == [SendToken(b""), Authenticated("PLAIN", "alice", 0, False)]
    bad = authenticator(clock)
    handshake(bad, "PLAIN", version=0)
    assert [type(o) for o in bad.receive_frame(plain_token("alice", "nope"))] == [Close]


def test_raw_token_event_outside_v0_exchange_closes(clock):
    auth = authenticator(clock)
    handshake(auth, "PLAIN")
    assert [type(o) for o in auth.receive(RawToken(b"x"))] == [Close]


def test_api_key_names_as_kafka_prints_them():
    assert [api_key_name(k) for k in (3, 17, 18, 36, 999)] == \
        ["METADATA", "SASL_HANDSHAKE", "API_VERSIONS", "SASL_AUTHENTICATE", "999"]


def test_no_mechanisms_is_refused():
    with pytest.raises(ValueError):
        SaslServerAuthenticator({}, api_versions)


# -- kafka-python's own client mechanisms as the peer ----------------------------------------


class KafkaPythonPeer:
    """kafka-python's _sasl_authenticate loop, its request classes and mechanisms, against our machine."""

    def __init__(self, auth, mechanism, **config):
        self.auth = auth
        self.mechanism_name = mechanism
        self.config = dict(config, sasl_mechanism=mechanism, security_protocol="SASL_SSL")
        self.correlation_id = 0
        self.outputs = []

    def _send(self, request, response_class, version):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="kafka-python")
        data = request.encode(header=True, framed=True)
        outputs = self.auth.receive_frame(bytes(data[4:]))
        self.outputs.extend(outputs)
        sends = [o for o in outputs if isinstance(o, SendResponse)]
        if not sends:
            return None
        wire = bytes(encode_response(sends[0].request, sends[0].body)[4:])
        return response_class.decode(wire, version=version, header=True)

    def run(self, mechanism_class, handshake_version=1, authenticate_version=2):
        response = self._send(KpHandshake(mechanism=self.mechanism_name, version=handshake_version),
                              KpHandshakeResponse, handshake_version)
        if response.error_code != 0:
            return "handshake", response
        mechanism = mechanism_class(host="localhost", **self.config)
        while not mechanism.is_done():
            token = mechanism.auth_bytes()
            response = self._send(KpAuthenticate(auth_bytes=token, version=authenticate_version),
                                  KpAuthenticateResponse, authenticate_version)
            if response is None:
                return "closed", None
            if response.error_code != 0:
                return "failed", response
            mechanism.receive(response.auth_bytes)
        return ("authenticated" if mechanism.is_authenticated() else "refused"), response


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_kafka_python_scram_client_authenticates(clock, store, mechanism, version):
    auth = authenticator(clock, store)
    peer = KafkaPythonPeer(auth, mechanism, sasl_plain_username="alice", sasl_plain_password="alice-secret")
    outcome, response = peer.run(SaslMechanismScram, authenticate_version=version)
    assert outcome == "authenticated"      # kafka-python checked our server signature (v=...)
    assert peer.outputs[-1] == Authenticated(mechanism, "alice", 0, False)
    assert auth.state is SaslState.AUTHENTICATED


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_kafka_python_scram_client_refused_with_generic_message(clock, store, user, password):
    auth = authenticator(clock, store)
    peer = KafkaPythonPeer(auth, "SCRAM-SHA-256", sasl_plain_username=user, sasl_plain_password=password)
    outcome, response = peer.run(SaslMechanismScram)
    assert outcome == "failed"
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == ("Authentication failed during authentication due to invalid credentials "
                                      "with SASL mechanism SCRAM-SHA-256")
    assert isinstance(peer.outputs[-1], Close)
    if user == "alice":         # failed at the proof: the RFC 5802 server-final error rides along
        assert response.auth_bytes == b"e=invalid-proof"


def test_kafka_python_scram_user_without_that_mechanism(clock, store):
    auth = authenticator(clock, store)
    peer = KafkaPythonPeer(auth, "SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret")
    assert peer.run(SaslMechanismScram)[0] == "failed"


def test_kafka_python_plain_client(clock):
    ok = KafkaPythonPeer(authenticator(clock), "PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-secret")
    assert ok.run(SaslMechanismPlain)[0] == "authenticated"
    bad = KafkaPythonPeer(authenticator(clock), "PLAIN", sasl_plain_username="bob", sasl_plain_password="x")
    outcome, response = bad.run(SaslMechanismPlain)
    assert outcome == "failed" and response.error_message == "Authentication failed: Invalid username or password"


class TokenProvider(AbstractTokenProvider):
    def __init__(self, token, extensions=None):
        super().__init__()
        self._token = token
        self._extensions = extensions or {}

    def token(self):
        return self._token

    def extensions(self):
        return self._extensions


def test_kafka_python_oauthbearer_client(clock):
    token = unsecured_jws({"sub": "svc", "iat": clock.wall - 10, "exp": clock.wall + 300, "scope": ["read"]})
    auth = authenticator(clock, max_reauth_ms=3_600_000)
    peer = KafkaPythonPeer(auth, "OAUTHBEARER", sasl_oauth_token_provider=TokenProvider(token, {"traceId": "42"}))
    outcome, response = peer.run(SaslMechanismOAuth)
    assert outcome == "authenticated"
    # the token expires before connections.max.reauth.ms: the session ends with it
    assert response.session_lifetime_ms == 300_000
    assert peer.outputs[-1] == Authenticated("OAUTHBEARER", "svc", 300_000, False)


def test_kafka_python_oauthbearer_expired_token_gets_json_error_then_failure(clock):
    token = unsecured_jws({"sub": "svc", "exp": clock.wall - 1})
    auth = authenticator(clock)
    peer = KafkaPythonPeer(auth, "OAUTHBEARER", sasl_oauth_token_provider=TokenProvider(token))
    outcome, response = peer.run(SaslMechanismOAuth)
    assert outcome == "failed"
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == '{"status":"invalid_token"}'
    sends = [decoded(o) for o in peer.outputs if isinstance(o, SendResponse)]
    assert sends[1].error_code == ErrorCode.NONE and sends[1].auth_bytes == b'{"status":"invalid_token"}'
    assert isinstance(peer.outputs[-1], Close)


def test_oauthbearer_missing_scope(clock):
    auth = authenticator(clock, required_scope="write read")
    handshake(auth, "OAUTHBEARER")
    token = unsecured_jws({"sub": "svc", "exp": clock.wall + 60, "scope": "read"})
    out = authenticate(auth, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    assert decoded(out[0]).auth_bytes == b'{"status":"insufficient_scope", "scope":"[write, read]"}'
    out = authenticate(auth, b"\x01", correlation_id=4)
    assert decoded(out[0]).error_message == '{"status":"insufficient_scope", "scope":"[write, read]"}'
    assert isinstance(out[1], Close)


def test_oauthbearer_authzid_must_be_the_token_principal(clock):
    auth = authenticator(clock)
    handshake(auth, "OAUTHBEARER")
    token = unsecured_jws({"sub": "svc", "exp": clock.wall + 60})
    out = authenticate(auth, f"n,a=other,\x01auth=Bearer {token}\x01\x01".encode())
    assert decoded(out[0]).error_message == ("Authentication failed: Client requested an authorization id (other) "
                                             "that is different from the token's principal name (svc)")


@pytest.mark.parametrize("message", [
    b"n,,auth=Bearer abc\x01\x01", b"y,,\x01auth=Bearer abc\x01\x01", b"n,,\x01auth=Basic abc\x01\x01",
    b"n,,\x01\x01", b"n,,\x01auth=Bearer a b\x01\x01", b"\xff\xfe", b"",
])
def test_oauthbearer_malformed_initial_response(clock, message):
    auth = authenticator(clock)
    handshake(auth, "OAUTHBEARER")
    out = authenticate(auth, message)
    response = decoded(out[0])
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and isinstance(out[1], Close)
    assert response.error_message.endswith("with SASL mechanism OAUTHBEARER")


# -- SCRAM against the RFC vectors -----------------------------------------------------------


def run_scram(auth, client_first: bytes, client_final_of):
    handshake(auth, "SCRAM-SHA-256")
    server_first = decoded(authenticate(auth, client_first)[0]).auth_bytes
    return server_first, authenticate(auth, client_final_of(server_first), correlation_id=4)


def test_scram_sha256_rfc7677_exchange(clock):
    """RFC 7677 section 3: user 'user', password 'pencil', with the RFC's own nonces and salt."""
    store = CredentialStore()
    store.upsert(SHA256, "user", credential_from_password(SHA256, "pencil", 4096,
                                                          base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")))
    auth = SaslServerAuthenticator(
        {"SCRAM-SHA-256": lambda: ScramServer(SHA256, lambda u: store.lookup(SHA256, u),
                                              nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")},
        api_versions, clock=clock.time, monotonic=clock.monotonic)
    server_first, out = run_scram(auth, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", lambda _: (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert decoded(out[0]).auth_bytes == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert out[1] == Authenticated("SCRAM-SHA-256", "user", 0, False)


class Sha1:
    """SCRAM-SHA-1 in the shape of ScramMechanism, to replay RFC 5802's own example."""
    mechanism_name, min_iterations, digest_size = "SCRAM-SHA-1", 4096, 20

    def hmac(self, key, message):
        return hmac.new(key, message, "sha1").digest()

    def hash(self, data):
        return hashlib.sha1(data).digest()


def test_scram_server_replays_rfc5802_sha1_example():
    salt = base64.b64decode("QSXCR+Q6sek8bf92")
    salted = hashlib.pbkdf2_hmac("sha1", b"pencil", salt, 4096)
    sha1 = Sha1()

    class Credential:
        iterations = 4096
    cred = Credential()
    cred.salt = salt
    cred.stored_key = sha1.hash(sha1.hmac(salted, b"Client Key"))
    cred.server_key = sha1.hmac(salted, b"Server Key")
    server = ScramServer(sha1, lambda u: cred if u == "user" else None, nonce=lambda: "3rfcNHYJY1ZVvWVs7j")
    assert server.evaluate(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL") == \
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    assert server.evaluate(b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=") == \
        b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="
    assert server.complete and server.authorization_id == "user"


def scram_client_final(username, password, mechanism, client_first_bare, server_first: bytes, gs2=b"n,,"):
    attrs = dict(p.split("=", 1) for p in server_first.decode().split(","))
    salted = mechanism.salted_password(password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    without_proof = f"c={base64.b64encode(gs2).decode()},r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    client_key = mechanism.hmac(salted, b"Client Key")
    signature = mechanism.hmac(mechanism.hash(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_scram_escaped_username_and_authzid(clock):
    store = CredentialStore()
    store.upsert(SHA256, "a,b=c", credential_from_password(SHA256, "pw"))
    auth = authenticator(clock, store)
    bare = "n=a=2Cb=3Dc,r=abc"
    gs2 = b"n,a=a=2Cb=3Dc,"
    server_first, out = run_scram(auth, gs2 + bare.encode(),
                                  lambda sf: scram_client_final("a,b=c", "pw", SHA256, bare, sf, gs2))
    assert out[-1] == Authenticated("SCRAM-SHA-256", "a,b=c", 0, False)


@pytest.mark.parametrize("client_first, message_part", [
    (b"n,a=bob,n=alice,r=abc", "Client requested an authorization id that is different from username"),
    (b"y,,n=alice,r=abc", None),
    (b"p=tls-unique,,n=alice,r=abc", None),
    (b"n,,m=ext,n=alice,r=abc", None),
    (b"n,,n=alice,r=abc,tokenauth=true", None),
    (b"n,,n=al=ice,r=abc", None),
    (b"n,,n=,r=abc", None),
    (b"n,,n=alice,r=a,bc", None),
    (b"n,,n=alice", None),
    (b"n,,r=abc,n=alice", None),
    (b"\xff\xfe", None),
])
def test_scram_client_first_refused(clock, store, client_first, message_part):
    auth = authenticator(clock, store)
    handshake(auth, "SCRAM-SHA-256")
    out = authenticate(auth, client_first)
    response = decoded(out[0])
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and isinstance(out[1], Close)
    expected = message_part or "due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    assert expected in response.error_message


def test_scram_unknown_extension_is_ignored(clock, store):
    auth = authenticator(clock, store)
    bare = "n=alice,r=abc,foo=bar"
    _, out = run_scram(auth, b"n,," + bare.encode(),
                       lambda sf: scram_client_final("alice", "alice-secret", SHA256, bare, sf))
    assert out[-1] == Authenticated("SCRAM-SHA-256", "alice", 0, False)


def test_scram_credential_below_minimum_iterations_is_refused(clock):
    store = CredentialStore()
    store.upsert(SHA256, "weak", credential_from_password(SHA256, "pw", iterations=1000))
    auth = authenticator(clock, store)
    handshake(auth, "SCRAM-SHA-256")
    out = authenticate(auth, b"n,,n=weak,r=abc")
    assert decoded(out[0]).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


@pytest.mark.parametrize("mangle, error", [
    (lambda m: m.replace(b"c=biws", b"c=eSws"), b"e=channel-bindings-dont-match"),
    (lambda m: m.replace(b",r=abc", b",r=abd"), b"e=other-error"),
    (lambda m: m[:m.index(b",p=") + 3] + base64.b64encode(b"short"), b"e=invalid-proof"),
    (lambda m: m[:m.index(b",p=") + 3] + base64.b64encode(bytes(32)), b"e=invalid-proof"),
    (lambda m: m[:m.index(b",p=")], b"e=invalid-encoding"),
    (lambda m: m.replace(b",p=", b",p=!!"), b"e=invalid-encoding"),
    (lambda m: b"\xff" + m, b"e=invalid-encoding"),
])
def test_scram_client_final_refused_with_rfc_error(clock, store, mangle, error):
    auth = authenticator(clock, store)
    bare = "n=alice,r=abc"
    _, out = run_scram(auth, b"n,," + bare.encode(),
                       lambda sf: mangle(scram_client_final("alice", "alice-secret", SHA256, bare, sf)))
    response = decoded(out[0])
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.auth_bytes == error
    assert isinstance(out[1], Close)


def test_scram_client_final_nonce_need_only_end_with_the_servers(clock, store):
    """librdkafka 2.0 (kcat, Debian) repeats its own nonce in client-final: r=<cnonce><cnonce><snonce>.
    Kafka checks endsWith, so it logs in there; the proof is computed over what was sent."""
    auth = authenticator(clock, store)
    bare = "n=alice,r=abc"

    def doubled(server_first: bytes) -> bytes:
        nonce = server_first.decode().split(",")[0][2:]
        doubled_first = server_first.replace(f"r={nonce}".encode(), f"r=abc{nonce}".encode())
        final = scram_client_final("alice", "alice-secret", SHA256, bare, doubled_first)
        # the auth message must hold the server-first as the server sent it: recompute with the real one
        attrs = dict(p.split("=", 1) for p in server_first.decode().split(","))
        salted = SHA256.salted_password("alice-secret", base64.b64decode(attrs["s"]), int(attrs["i"]))
        without_proof = final[:final.index(b",p=")].decode()
        auth_message = f"{bare},{server_first.decode()},{without_proof}".encode()
        client_key = SHA256.hmac(salted, b"Client Key")
        signature = SHA256.hmac(SHA256.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    _, out = run_scram(auth, b"n,," + bare.encode(), doubled)
    assert out[-1] == Authenticated("SCRAM-SHA-256", "alice", 0, False)


def test_scram_over_raw_v0_tokens(clock, store):
    auth = authenticator(clock, store)
    handshake(auth, "SCRAM-SHA-512", version=0)
    server_first = auth.receive_frame(b"n,,n=alice,r=xyz")
    assert [type(o) for o in server_first] == [SendToken]
    final = scram_client_final("alice", "alice-secret", SHA512, "n=alice,r=xyz", server_first[0].token)
    out = auth.receive_frame(final)
    assert out[0].token.startswith(b"v=") and out[1] == Authenticated("SCRAM-SHA-512", "alice", 0, False)


def test_scram_server_nonce_is_kafkas_base36_130_bits(clock, store):
    auth = authenticator(clock, store)
    handshake(auth, "SCRAM-SHA-256")
    first = decoded(authenticate(auth, b"n,,n=alice,r=abc")[0]).auth_bytes.decode()
    nonce = first.split(",")[0][len("r=abc"):]
    assert int(nonce, 36) < 1 << 130 and nonce == nonce.lower()


# -- re-authentication (KIP-368) ------------------------------------------------------------


def login_plain(auth, user="alice", password=None, version=2):
    handshake(auth, "PLAIN")
    return authenticate(auth, plain_token(user, password or f"{user}-secret"), version=version)


def test_session_lifetime_from_connections_max_reauth_ms(clock):
    auth = authenticator(clock, max_reauth_ms=60_000)
    out = login_plain(auth, version=1)
    assert decoded(out[0]).session_lifetime_ms == 60_000
    assert out[1].session_lifetime_ms == 60_000
    clock.advance(59)
    assert not auth.session_expired()
    clock.advance(2)
    assert auth.session_expired()
    assert auth.receive_unexpected(3) == [Close("SASL session expired")]


def test_session_lifetime_per_mechanism(clock, store):
    auth = authenticator(clock, store, max_reauth_ms={"SCRAM-SHA-256": 5000})
    assert login_plain(auth)[1].session_lifetime_ms == 0
    assert auth.session_expires_at is None


def test_session_lifetime_is_absent_from_v0_responses(clock):
    auth = authenticator(clock, max_reauth_ms=60_000)
    out = login_plain(auth, version=0)
    data = encode_response(out[0].request, out[0].body)
    _, body = decode_response(36, 0, bytes(data[4:]))
    assert body.session_lifetime_ms == 0 and out[1].session_lifetime_ms == 60_000


def test_reauthentication_with_the_same_mechanism_and_principal(clock):
    auth = authenticator(clock, max_reauth_ms=60_000)
    login_plain(auth)
    clock.advance(30)
    body = handshake(auth, "PLAIN", correlation_id=10)
    assert body.error_code == ErrorCode.NONE and auth.state is SaslState.AUTHENTICATING
    out = authenticate(auth, plain_token("alice", "alice-secret"), correlation_id=11)
    assert out[1] == Authenticated("PLAIN", "alice", 60_000, True)
    clock.advance(45)
    assert not auth.session_expired()       # the new session started 45 s ago


def test_reauthentication_cannot_change_principal(clock):
    auth = authenticator(clock, max_reauth_ms=60_000)
    login_plain(auth)
    clock.advance(2)
    handshake(auth, "PLAIN")
    out = authenticate(auth, plain_token("bob", "bob-secret"))
    assert decoded(out[0]).error_message == \
        "Cannot change principals during re-authentication from User.alice: User.bob"
    assert isinstance(out[1], Close) and auth.state is SaslState.FAILED


def test_reauthentication_cannot_change_mechanism(clock, store):
    auth = authenticator(clock, store, max_reauth_ms=60_000)
    login_plain(auth)
    clock.advance(2)
    handshake(auth, "SCRAM-SHA-256")        # accepted, as Kafka does; the exchange then fails
    out = authenticate(auth, b"n,,n=alice,r=abc")
    assert decoded(out[0]).error_message == ("SASL mechanism 'SCRAM-SHA-256' requested by client is not supported "
                                             "for re-authentication of mechanism 'PLAIN'")
    assert isinstance(out[1], Close)


def test_reauthentication_failure_message_says_reauthentication(clock, store):
    auth = authenticator(clock, store, max_reauth_ms=60_000)
    handshake(auth, "SCRAM-SHA-256")
    bare = "n=alice,r=abc"
    server_first = decoded(authenticate(auth, b"n,," + bare.encode())[0]).auth_bytes
    authenticate(auth, scram_client_final("alice", "alice-secret", SHA256, bare, server_first))
    clock.advance(2)
    handshake(auth, "SCRAM-SHA-256")
    server_first = decoded(authenticate(auth, b"n,," + bare.encode())[0]).auth_bytes
    out = authenticate(auth, scram_client_final("alice", "wrong", SHA256, bare, server_first))
    assert decoded(out[0]).error_message == ("Authentication failed during re-authentication due to invalid "
                                             "credentials with SASL mechanism SCRAM-SHA-256")


def test_reauthentication_more_than_once_a_second_is_refused(clock):
    auth = authenticator(clock, max_reauth_ms=60_000)
    login_plain(auth)
    clock.advance(2)
    handshake(auth, "PLAIN")
    authenticate(auth, plain_token("alice", "alice-secret"))
    clock.advance(0.5)
    out = auth.receive_frame(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN")))
    assert decoded(out[0]).error_code == ErrorCode.ILLEGAL_SASL_STATE and auth.state is SaslState.AUTHENTICATED


def test_handshake_after_authentication_without_reauthentication(clock):
    auth = authenticator(clock)
    login_plain(auth)
    out = auth.receive_frame(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN")))
    body = decoded(out[0])
    assert (body.error_code, body.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
    out = authenticate(auth, b"x")
    assert decoded(out[0]).error_message == "SaslAuthenticate request received after successful authentication"
    assert auth.state is SaslState.AUTHENTICATED
    assert auth.receive_unexpected(3) == []


def test_handshake_after_session_expiry_restarts_authentication(clock):
    auth = authenticator(clock, max_reauth_ms=10_000)
    login_plain(auth)
    clock.advance(20)
    assert auth.session_expired()
    assert handshake(auth, "PLAIN").error_code == ErrorCode.NONE
    assert authenticate(auth, plain_token("alice", "alice-secret"))[1].reauthentication


# -- garbage never escapes as an exception -----------------------------------------------------


def valid_frames(clock):
    return [
        frame(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1")),
        frame(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")),
        frame(17, 0, SaslHandshakeRequest(mechanism="PLAIN")),
        frame(36, 2, SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc")),
        frame(36, 1, SaslAuthenticateRequest(auth_bytes=plain_token("alice", "alice-secret"))),
        frame(36, 0, SaslAuthenticateRequest(auth_bytes=b"\x01")),
    ]


def mutate(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    choice = rng.randrange(4)
    if choice == 0 and data:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif choice == 1:
        del data[rng.randrange(len(data) + 1):]
    elif choice == 2:
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    else:
        data = bytearray(rng.randbytes(rng.randint(0, 64)))
    return bytes(data)


def test_random_and_mutated_frames_in_every_state_give_outputs_not_exceptions(clock, store):
    rng = random.Random(20240611)
    base = valid_frames(clock)
    for round_ in range(3000):
        auth = authenticator(clock, store, max_reauth_ms=rng.choice([0, 60_000]))
        for _ in range(rng.randint(1, 6)):
            data = rng.choice(base)
            if rng.random() < 0.6:
                data = mutate(rng, data)
            out = auth.receive_frame(data)
            assert isinstance(out, list) and all(isinstance(o, OUTPUT_TYPES) for o in out), out
            for o in out:
                if isinstance(o, SendResponse):
                    decoded(o)              # whatever is answered must encode
            if any(isinstance(o, Close) for o in out):
                assert auth.state in (SaslState.FAILED, SaslState.AUTHENTICATED)
                break


def test_mechanism_bug_becomes_a_close_not_a_crash(clock):
    class Broken:
        mechanism_name = "PLAIN"
        complete = False
        authorization_id = None

        def evaluate(self, token):
            raise KeyError("bug")
    auth = SaslServerAuthenticator({"PLAIN": Broken}, api_versions, clock=clock.time, monotonic=clock.monotonic)
    handshake(auth, "PLAIN")
    out = authenticate(auth, b"x")
    assert [type(o) for o in out] == [Close] and "KeyError" in out[0].reason and auth.state is SaslState.FAILED


# -- the unsecured OAUTHBEARER validator ---------------------------------------------------------


def test_unsecured_validator_accepts_and_reads_claims(clock):
    v = UnsecuredJwsValidator({"unsecuredValidatorPrincipalClaimName": "client_id",
                               "unsecuredValidatorScopeClaimName": "scp"}, clock=clock.time)
    token = v(unsecured_jws({"client_id": "app", "exp": clock.wall + 1.5, "iat": clock.wall, "scp": ["a", " b "]}))
    assert token.principal_name == "app"
    assert token.lifetime_ms == clock.wall * 1000 + 1500
    assert token.scope == {"a", "b"} and token.start_time_ms == clock.wall * 1000


@pytest.mark.parametrize("claims, header, signature, reason", [
    ({"sub": "a", "exp": 1e12}, {"alg": "HS256"}, "", "Unsecured JWS must have 'none' for an algorithm"),
    ({"sub": "a", "exp": 1e12}, {"typ": "JWT"}, "", "JWS header must have an Algorithm value"),
    ({"sub": "a", "exp": 1e12}, None, "sig", "Unsecured JWS must not contain a digital signature"),
    ({"sub": "a"}, None, "", "No expiration time in JWT"),
    ({"sub": "a", "exp": "soon"}, None, "", "The 'exp' claim was not of type Number"),
    ({"exp": 1e12}, None, "", "No principal name in JWT claim: sub"),
    ({"sub": "  ", "exp": 1e12}, None, "", "No principal name in JWT claim: sub"),
    ({"sub": 7, "exp": 1e12}, None, "", "The 'sub' claim was not of type String"),
    ({"sub": "a", "exp": 1}, None, "", "was on or after the Expiration Time value"),
    ({"sub": "a", "exp": 1e12, "iat": 1e11}, None, "", "The Issued At value"),
    ({"sub": "a", "exp": 1e12, "scope": 5}, None, "", "The 'scope' claim was not of type List"),
])
def test_unsecured_validator_refusals(clock, claims, header, signature, reason):
    token = unsecured_jws(claims, header) + signature
    with pytest.raises(Exception) as e:
        UnsecuredJwsValidator(clock=clock.time)(token)
    assert reason in str(e.value) and e.value.status == "invalid_token"


@pytest.mark.parametrize("token", ["a.b", "a..b.", "!!!.###.", "e30.e30.", "WzFd.e30."])
def test_unsecured_validator_malformed(clock, token):
    with pytest.raises(Exception) as e:
        UnsecuredJwsValidator(clock=clock.time)(token)
    assert e.value.status == "invalid_token"


def test_unsecured_validator_expiry_must_follow_issue(clock):
    skewed = UnsecuredJwsValidator({"unsecuredValidatorAllowableClockSkewMs": "10000"}, clock=clock.time)
    with pytest.raises(Exception) as e:
        skewed(unsecured_jws({"sub": "a", "iat": clock.wall + 5, "exp": clock.wall + 3}))
    assert "was not after the Issued At time" in str(e.value)


def test_unsecured_validator_clock_skew(clock):
    claims = {"sub": "a", "exp": clock.wall - 1, "iat": clock.wall - 100}
    with pytest.raises(Exception):
        UnsecuredJwsValidator(clock=clock.time)(unsecured_jws(claims))
    skewed = UnsecuredJwsValidator({"unsecuredValidatorAllowableClockSkewMs": "2000"}, clock=clock.time)
    assert skewed(unsecured_jws(claims)).principal_name == "a"


@pytest.mark.parametrize("options", [{"unsecuredValidatorAllowableClockSkewMs": "-1"},
                                     {"unsecuredValidatorAllowableClockSkewMs": "soon"},
                                     {"unsecuredValidatorRequiredScope": "ok bad\"scope"}])
def test_unsecured_validator_option_errors(options):
    with pytest.raises(ConfigError):
        UnsecuredJwsValidator(options)


# -- sasl.jaas.config ---------------------------------------------------------------------------


def test_jaas_plain_entry_from_kafka_docs():
    entries = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    assert len(entries) == 1 and entries[0].control_flag == "REQUIRED"
    assert entries[0].options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                                  "user_alice": "alice-secret"}
    creds = PlainCredentials.from_jaas(entries)
    assert creds.verify("alice", "alice-secret") and not creds.verify("alice", "admin-secret")
    assert not creds.verify("nobody", "")
    assert "alice-secret" not in repr(entries)


def test_jaas_several_entries_comments_quotes_and_words():
    text = """
        // the broker's own login
        org.apache.kafka.common.security.scram.ScramLoginModule Required username=admin /* inline */
            password='a\\tb\\"c\\101';
        org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule optional
            unsecuredValidatorRequiredScope="read write" unsecuredValidatorAllowableClockSkewMs="5000";
    """
    entries = parse_jaas_config(text)
    assert [e.control_flag for e in entries] == ["REQUIRED", "OPTIONAL"]
    assert entries[0].options == {"username": "admin", "password": 'a\tb"cA'}
    assert entry_option(entries, "unsecuredValidatorRequiredScope",
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule") == "read write"
    assert entry_option(entries, "username", "org.apache.kafka.common.security.plain.PlainLoginModule") is None
    validator = UnsecuredJwsValidator.from_jaas(entries)
    assert validator.required_scope == ["read", "write"] and validator.allowable_clock_skew_ms == 5000


@pytest.mark.parametrize("text, message", [
    ("", "Login module not specified in JAAS config"),
    ("Module", "Login module control flag not specified in JAAS config"),
    ("Module ;", "Login module control flag is not available in the JAAS config"),
    ("Module mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
    ('Module required user="x"', "JAAS config entry not terminated by semi-colon"),
    ("Module required user=;", "Value not specified for key 'user' in JAAS config"),
    ("Module required skew=5000;", "Value not specified for key 'skew' in JAAS config"),
    ("Module required user;", "Value not specified for key 'user' in JAAS config"),
])
def test_jaas_errors_are_kafkas(text, message):
    with pytest.raises(ConfigError) as e:
        parse_jaas_config(text)
    assert message in str(e.value) and "sasl.jaas.config" in str(e.value)
