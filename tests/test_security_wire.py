"""TLS and SASL on the wire: a broker subprocess with every kind of listener, spoken to by our own client
(kafka_compat.network.client_channel + our codecs), so each test sees exactly what the broker sent
and when it closed the connection.

Covered: ApiVersions -> SaslHandshake -> SaslAuthenticate (v1) and raw v0 tokens; PLAIN, both SCRAM
mechanisms and OAUTHBEARER (unsecured JWT); nothing but ApiVersions and the handshake before
authentication; a failed login answered with SASL_AUTHENTICATION_FAILED and closed; TLS 1.2 and
1.3; a client certificate's mapped name as the principal ACLs match; re-authentication and
session expiry (KIP-368); ACLs and credentials surviving a restart.
"""
from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time

import pytest
from secure_broker import (
    ADMIN,
    DESCRIBE,
    PLAIN_USERS,
    PREFIXED,
    READ,
    SCRAM_USERS,
    WRITE,
    TlsFiles,
    acl,
    broker_overrides,
    connect,
    create_acls,
    create_scram_users,
    create_topics,
    run,
    security,
    start_broker,
)
from wire import AsyncWireClient, decode_response, encode_request

from kafka_compat.network.client import AuthenticationError, NetworkClient, Node
from kafka_compat.network.client_channel import ChannelError, open_channel
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.describe_acls import DescribeAclsRequest
from kafka_compat.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kafka_compat.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kafka_compat.protocol.records import batches, build_batch
from kafka_compat.security.oauthbearer import unsecured_jws
from kafka_compat.security.sasl_client import ClientSecurity, PlainClient, SaslClientAuthenticator
from kafka_compat.server.broker import Broker
from kafka_compat.server.kafka_config import BrokerConfig

E = ErrorCode


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return TlsFiles(str(tmp_path_factory.mktemp("tls")))


BROKER_SETTINGS = {
    "listener.name.sasl_ssl.connections.max.reauth.ms": "3000",
    # the SSL listener asks for a certificate without requiring one, and maps its DN with the DEFAULT rule
    "listener.name.ssl.ssl.client.auth": "requested",
    "listener.name.ssl.ssl.truststore.type": "PEM",
}


@pytest.fixture(scope="module")
def broker(tls):
    b = start_broker(tls, **BROKER_SETTINGS, **{"listener.name.ssl.ssl.truststore.location": tls.ca_path})
    try:
        run(create_scram_users(b))
        yield b
    finally:
        b.close()


# -- requests ---------------------------------------------------------------------------

def produce_body(topic: str, values=(b"v",), partition: int = 0) -> ProduceRequest:
    records = bytes(build_batch([(None, v) for v in values]))
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])


def fetch_body(topic: str, offset: int = 0) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


async def produce(client: AsyncWireClient, topic: str, values=(b"v",)) -> int:
    response = await client.call(0, 9, produce_body(topic, values))
    return response.responses[0].partition_responses[0].error_code


async def fetched_values(client: AsyncWireClient, topic: str) -> tuple[int, list]:
    response = await client.call(1, 12, fetch_body(topic))
    part = response.responses[0].partitions[0]
    records = bytes(part.records or b"")
    return part.error_code, [r.value for b in batches(records) for r in b.records()]


async def raw_connect(broker, listener: str, context: ssl.SSLContext | None = None):
    host, port = broker.bootstrap_for(listener).split(":")
    return await asyncio.open_connection(host, int(port), ssl=context,
                                         server_hostname="localhost" if context else None)


async def closed_without_answer(reader: asyncio.StreamReader) -> bool:
    """True when the broker closes the connection without sending anything more."""
    try:
        return await asyncio.wait_for(reader.read(1), 10) == b""
    except ConnectionResetError:
        return True


# -- the handshake ----------------------------------------------------------------------

@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("user, mechanism", [("alice", "PLAIN"), ("bob", "SCRAM-SHA-256"), ("carol", "SCRAM-SHA-512")])
def test_login_then_produce_and_fetch(broker, listener, user, mechanism):
    topic = f"login-{listener}-{mechanism}".lower()

    async def go():
        await create_topics(broker, topic)
        await create_acls(broker, acl(f"User:{user}", WRITE, topic), acl(f"User:{user}", READ, topic))
        client = await connect(broker, listener, user, mechanism=mechanism)
        assert await produce(client, topic, [b"a", b"b"]) == 0
        assert await fetched_values(client, topic) == (0, [b"a", b"b"])
        await client.close()
    run(go())


def test_api_versions_before_the_handshake_advertises_sasl_apis(broker):
    async def go():
        reader, writer = await raw_connect(broker, "SASL_PLAINTEXT")
        client = AsyncWireClient(reader, writer)
        versions = await client.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[17] == (0, 1) and keys[36][0] == 0 and 0 in keys
        handshake = await client.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code == 0
        assert handshake.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
        auth = await client.call(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert (auth.error_code, auth.session_lifetime_ms) == (0, 0)
        metadata = await client.call(3, 12, MetadataRequest(topics=None))
        assert metadata.brokers[0].port == int(broker.bootstrap_for("SASL_PLAINTEXT").split(":")[1])
        await client.close()
    run(go())


def test_handshake_v0_then_raw_tokens(broker):
    """Kafka 0.10 clients: after SaslHandshake v0 the token is a bare frame, and so is the answer."""
    async def go():
        reader, writer = await raw_connect(broker, "SASL_PLAINTEXT")
        client = AsyncWireClient(reader, writer)
        assert (await client.call(17, 0, SaslHandshakeRequest(mechanism="PLAIN"))).error_code == 0
        token = b"\0alice\0alice-secret"
        writer.write(struct.pack(">i", len(token)) + token)
        size, = struct.unpack(">i", await reader.readexactly(4))
        assert size == 0                     # an empty token: authenticated
        assert (await client.call(3, 1, MetadataRequest(topics=[]))).brokers
        await client.close()
    run(go())


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("user, mechanism", [("alice", "PLAIN"), ("bob", "SCRAM-SHA-256"), ("carol", "SCRAM-SHA-512"),
                                             ("nobody", "SCRAM-SHA-512")])
def test_a_wrong_password_is_refused_and_the_connection_closed(broker, listener, user, mechanism):
    async def go():
        host, port = broker.bootstrap_for(listener).split(":")
        sec = security(broker, listener, user, "wrong-password", mechanism)
        reader, writer = await asyncio.open_connection(host, int(port), ssl=sec.ssl_context,
                                                       server_hostname="localhost" if sec.ssl_context else None)
        client = AsyncWireClient(reader, writer)
        auth = sec.authenticator()
        request = auth.handshake_response(await client.call(17, 1, auth.handshake_request()))
        answer = await client.call(36, 1, request)
        while answer.error_code == 0:        # SCRAM: the first round passes for a known user
            answer = await client.call(36, 1, auth.authenticate_response(answer))
        assert answer.error_code == E.SASL_AUTHENTICATION_FAILED
        assert "Authentication failed" in answer.error_message
        assert "wrong-password" not in answer.error_message
        assert await closed_without_answer(reader)
    run(go())


def test_nothing_but_api_versions_and_the_handshake_before_authentication(broker):
    """A Metadata (or a Produce) request first: closed without a reply, nothing created."""
    async def go():
        for body, key, version in ((MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
                name="never-made")]), 3, 12), (produce_body("never-made"), 0, 9)):
            reader, writer = await raw_connect(broker, "SASL_SSL", security(broker, "SASL_SSL").ssl_context)
            writer.write(encode_request(key, version, body))
            assert await closed_without_answer(reader)
            writer.close()
        admin = await connect(broker, "SASL_PLAINTEXT", *ADMIN)
        metadata = await admin.call(3, 12, MetadataRequest(topics=None))
        assert "never-made" not in {t.name for t in metadata.topics}
        await admin.close()
    run(go())


def test_unknown_mechanism_gets_the_enabled_list_then_close(broker):
    async def go():
        reader, writer = await raw_connect(broker, "SASL_PLAINTEXT")
        client = AsyncWireClient(reader, writer)
        answer = await client.call(17, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == E.UNSUPPORTED_SASL_MECHANISM
        assert "SCRAM-SHA-256" in answer.mechanisms
        assert await closed_without_answer(reader)
    run(go())


def test_oauthbearer_with_the_unsecured_validator(broker):
    async def go():
        reader, writer = await raw_connect(broker, "SASL_PLAINTEXT")
        client = AsyncWireClient(reader, writer)
        assert (await client.call(17, 1, SaslHandshakeRequest(mechanism="OAUTHBEARER"))).error_code == 0
        now = int(time.time())
        token = unsecured_jws({"sub": "oauth-user", "exp": now + 3600, "iat": now})
        answer = await client.call(36, 1, SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()))
        assert answer.error_code == 0
        assert 0 < answer.session_lifetime_ms <= 3600_000       # the token's lifetime bounds the session
        await client.close()

        reader, writer = await raw_connect(broker, "SASL_PLAINTEXT")
        client = AsyncWireClient(reader, writer)
        await client.call(17, 1, SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        expired = unsecured_jws({"sub": "oauth-user", "exp": time.time() - 10})
        answer = await client.call(36, 1, SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {expired}\x01\x01".encode()))
        assert answer.error_code == 0 and b'"status":"invalid_token"' in answer.auth_bytes
        answer = await client.call(36, 1, SaslAuthenticateRequest(auth_bytes=b"\x01"))
        assert answer.error_code == E.SASL_AUTHENTICATION_FAILED
        assert await closed_without_answer(reader)
    run(go())


def test_sasl_apis_on_a_plaintext_listener_answer_illegal_sasl_state(broker):
    async def go():
        client = await connect(broker, "PLAINTEXT")
        assert (await client.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))).error_code == E.ILLEGAL_SASL_STATE
        assert (await client.call(36, 1, SaslAuthenticateRequest(auth_bytes=b""))).error_code == E.ILLEGAL_SASL_STATE
        await client.close()
    run(go())


# -- TLS --------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_tls_1_2_and_1_3(broker, version):
    async def go():
        context = security(broker, "SSL").ssl_context
        context.minimum_version = context.maximum_version = version
        reader, writer = await raw_connect(broker, "SSL", context)
        assert writer.get_extra_info("ssl_object").version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                                                  ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
        client = AsyncWireClient(reader, writer)
        assert (await client.call(3, 12, MetadataRequest(topics=[]))).cluster_id
        await client.close()
    run(go())


def test_a_broker_certificate_from_another_ca_is_refused_by_the_client(broker):
    async def go():
        with pytest.raises(ChannelError, match="CERTIFICATE_VERIFY_FAILED"):
            host, port = broker.bootstrap_for("SSL").split(":")
            await open_channel(host, int(port), security(broker, "SSL", ca=broker.tls.untrusted_ca_path),
                               server_hostname="localhost")
    run(go())


def test_mutual_tls_principal_is_the_mapped_certificate_name(broker):
    """ssl.principal.mapping.rules on the MTLS listener turn CN=writer,OU=clients,O=kafka-compat into
    User:writer (and CN=Stranger into User:stranger): ACLs name those principals."""
    topic = "mtls-orders"

    async def go():
        await create_topics(broker, topic)
        await create_acls(broker, acl("User:writer", WRITE, topic), acl("User:reader", READ, topic),
                          acl("User:stranger", DESCRIBE, topic))
        writer = await connect(broker, "MTLS", cert="writer")
        assert await produce(writer, topic, [b"signed"]) == 0
        assert (await fetched_values(writer, topic))[0] == E.TOPIC_AUTHORIZATION_FAILED
        reader = await connect(broker, "MTLS", cert="reader")
        assert await produce(reader, topic) == E.TOPIC_AUTHORIZATION_FAILED
        assert await fetched_values(reader, topic) == (0, [b"signed"])
        stranger = await connect(broker, "MTLS", cert="Stranger")
        metadata = await stranger.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name=topic)]))
        assert metadata.topics[0].error_code == 0           # DESCRIBE for User:stranger (lower-cased by /L)
        assert await produce(stranger, topic) == E.TOPIC_AUTHORIZATION_FAILED
        for c in (writer, reader, stranger):
            await c.close()
        # no certificate: the TLS handshake itself fails on a listener that requires one
        with pytest.raises((ChannelError, ConnectionError, asyncio.IncompleteReadError)):
            client = await connect(broker, "MTLS")
            await client.call(3, 12, MetadataRequest(topics=[]))
    run(go())


def test_ssl_without_a_client_certificate_is_anonymous(broker):
    topic = "anonymous-topic"

    async def go():
        await create_topics(broker, topic)
        await create_acls(broker, acl("User:ANONYMOUS", WRITE, topic))
        client = await connect(broker, "SSL")
        assert await produce(client, topic) == 0
        assert (await fetched_values(client, topic))[0] == E.TOPIC_AUTHORIZATION_FAILED
        await client.close()
    run(go())


def test_a_requested_certificate_names_the_principal_by_its_whole_dn(broker):
    """ssl.client.auth=requested: with a certificate the principal is its subject as Java prints it
    (DEFAULT mapping), without one it is ANONYMOUS (test above)."""
    topic = "requested-cert-topic"

    async def go():
        await create_topics(broker, topic)
        await create_acls(broker, acl("User:CN=writer,OU=clients,O=kafka-compat", WRITE, topic))
        writer = await connect(broker, "SSL", cert="writer")
        assert await produce(writer, topic) == 0
        reader = await connect(broker, "SSL", cert="reader")
        assert await produce(reader, topic) == E.TOPIC_AUTHORIZATION_FAILED
        for c in (writer, reader):
            await c.close()
    run(go())


def test_the_inter_broker_client_logs_in_with_the_listeners_settings(broker, tls):
    """Broker.inter_broker_security(): the inter-broker listener's TLS trust store and the username and
    password of its mechanism's JAAS configuration, as a cluster's brokers will reach each other."""
    config = BrokerConfig({**broker_overrides(tls, **BROKER_SETTINGS),
                           "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in broker.ports.items()),
                           "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in
                                                                      broker.listeners.items()),
                           "inter.broker.listener.name": "SASL_SSL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                           "listener.name.sasl_ssl.ssl.truststore.type": "PEM",
                           "listener.name.sasl_ssl.ssl.truststore.location": tls.ca_path})
    security = Broker(config).inter_broker_security()
    assert (security.sasl_mechanism, security.username) == ("PLAIN", "admin")

    async def go():
        host, port = broker.bootstrap_for("SASL_SSL").split(":")
        reader, writer = await open_channel(host, int(port), security, server_hostname="localhost")
        client = AsyncWireClient(reader, writer)
        assert (await client.call(3, 12, MetadataRequest(topics=[]))).cluster_id
        await client.close()
    run(go())


@pytest.mark.parametrize("listener, user, mechanism", [("SSL", None, None), ("SASL_PLAINTEXT", "alice", "PLAIN"),
                                                      ("SASL_SSL", "carol", "SCRAM-SHA-512")])
def test_the_inter_broker_network_client_secures_its_connections(broker, listener, user, mechanism):
    """network/client.NetworkClient (replica fetchers, the controller's channel, AlterPartition) with a
    ClientSecurity: TLS on 127.0.0.1 checked against the CA, then the SASL login, then requests; the
    broker answers as the logged-in principal (carol may not describe ACLs, admin may)."""
    async def go():
        password = PLAIN_USERS.get(user) or SCRAM_USERS.get(user)
        client = NetworkClient("inter-broker-test", security=security(broker, listener, user, password, mechanism))
        node = Node(7, "127.0.0.1", int(broker.bootstrap_for(listener).split(":")[1]))
        try:
            metadata = await client.send(node, 3, 12, MetadataRequest(topics=[]))
            acls = await client.send(node, 29, 3, DescribeAclsRequest(
                resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1))
        finally:
            await client.close()
        return metadata.cluster_id, acls.error_code
    cluster_id, acls = run(go())
    assert cluster_id and acls == E.CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.parametrize("listener, password, ca", [("SASL_SSL", "wrong", None), ("SASL_PLAINTEXT", "wrong", None),
                                                    ("SASL_SSL", "carol-secret", "untrusted")])
def test_the_network_client_reports_a_refused_login_and_backs_off(broker, listener, password, ca):
    """A wrong password (the broker's SASL_AUTHENTICATION_FAILED) or a broker certificate we do not trust is
    an AuthenticationError, never a connection the fetchers would use; the next attempt waits a backoff."""
    async def go():
        sec = security(broker, listener, "carol", password, "SCRAM-SHA-512",
                       ca=broker.tls.untrusted_ca_path if ca else None)
        client = NetworkClient("inter-broker-test", security=sec, reconnect_backoff_ms=50)
        node = Node(7, "127.0.0.1", int(broker.bootstrap_for(listener).split(":")[1]))
        errors = []
        try:
            for _ in range(2):
                with pytest.raises(AuthenticationError) as failed:
                    await client.send(node, 3, 12, MetadataRequest(topics=[]))
                errors.append(str(failed.value))
            return errors, client._attempts[node.node_id][1], client.is_ready(node.node_id)
        finally:
            await client.close()
    errors, failures, ready = run(go())
    assert failures == 2 and not ready
    assert all(("certificate" in e if ca else "carol" in e and "wrong" not in e) for e in errors), errors


def test_the_network_client_logs_in_again_before_its_session_ends(broker):
    """SASL_SSL grants 3 s sessions: an idle connection past most of its session is replaced by a new login,
    so requests keep being answered (an expired session would be closed by the broker)."""
    async def go():
        client = NetworkClient("inter-broker-test", security=security(broker, "SASL_SSL", "bob", "bob-secret",
                                                                          "SCRAM-SHA-256"))
        node = Node(7, "127.0.0.1", int(broker.bootstrap_for("SASL_SSL").split(":")[1]))
        try:
            answers, connections = [], []
            for _ in range(3):
                answers.append((await client.send(node, 3, 12, MetadataRequest(topics=[]))).cluster_id)
                connections.append(client._connections[node.node_id])
                await asyncio.sleep(2.7)        # past 85% of the 3 s session
            return answers, connections
        finally:
            await client.close()
    answers, connections = run(go())
    assert all(answers) and len({id(c) for c in connections}) == 3
    assert all(c.reauthenticate_at < float("inf") for c in connections)


# -- re-authentication (KIP-368) ----------------------------------------------------------

def test_reauthentication_extends_the_session_and_an_expired_one_is_closed(broker):
    """SASL_SSL has connections.max.reauth.ms=3000 (listener.name.sasl_ssl.connections.max.reauth.ms). Each
    check sits 1.5 s from the session's end it tests, room for a loaded machine's delays."""
    async def go():
        sec = security(broker, "SASL_SSL", "alice", "alice-secret", "PLAIN")
        host, port = broker.bootstrap_for("SASL_SSL").split(":")
        reader, writer = await asyncio.open_connection(host, int(port), ssl=sec.ssl_context,
                                                       server_hostname="localhost")
        client = AsyncWireClient(reader, writer)

        async def login(principal_user="alice", password="alice-secret"):
            auth = SaslClientAuthenticator(PlainClient(principal_user, password))
            request = auth.handshake_response(await client.call(17, 1, auth.handshake_request()))
            return await client.call(36, 2, request)

        assert (await login()).session_lifetime_ms == 3000
        await asyncio.sleep(1.5)
        again = await login()                          # re-authentication on the live connection
        assert (again.error_code, again.session_lifetime_ms) == (0, 3000)
        await asyncio.sleep(1.6)                       # 3.1 s after the first login: alive thanks to the second
        assert (await client.call(3, 12, MetadataRequest(topics=[]))).cluster_id
        await asyncio.sleep(3.0)                       # the second session is over
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await client.call(3, 12, MetadataRequest(topics=[]))   # expired: closed, not answered
    run(go())


def test_reauthentication_may_not_change_the_principal(broker):
    async def go():
        client = await connect(broker, "SASL_SSL", "alice", mechanism="PLAIN")
        await asyncio.sleep(1.1)
        auth = SaslClientAuthenticator(PlainClient("admin", "admin-secret"))
        request = auth.handshake_response(await client.call(17, 1, auth.handshake_request()))
        answer = await client.call(36, 1, request)
        assert answer.error_code == E.SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals" in answer.error_message
    run(go())


# -- credentials -------------------------------------------------------------------------

def test_scram_credentials_are_described_never_shown(broker):
    async def go():
        admin = await connect(broker, "SASL_PLAINTEXT", *ADMIN)
        described = await admin.call(50, 0, DescribeUserScramCredentialsRequest(users=None))
        got = {r.user: sorted((c.mechanism, c.iterations) for c in r.credential_infos) for r in described.results}
        assert got == {u: [(1, 4096), (2, 4096)] for u in SCRAM_USERS}
        await admin.close()
        alice = await connect(broker, "SASL_PLAINTEXT", "alice")
        denied = await alice.call(50, 0, DescribeUserScramCredentialsRequest(users=None))
        assert denied.error_code == E.CLUSTER_AUTHORIZATION_FAILED and not denied.results
        await alice.close()
    run(go())


def test_acls_and_credentials_survive_a_restart(tls, tmp_path):
    b = start_broker(tls, data_dir=str(tmp_path / "broker"))
    try:
        run(create_scram_users(b, {"dave": "dave-secret"}))
        run(create_acls(b, acl("User:dave", WRITE, "kept-", pattern=PREFIXED)))
        run(create_topics(b, "kept-1", "other"))
        b.restart()

        async def go():
            dave = await connect(b, "SASL_SSL", "dave", "dave-secret", mechanism="SCRAM-SHA-256")
            assert await produce(dave, "kept-1") == 0
            assert await produce(dave, "other") == E.TOPIC_AUTHORIZATION_FAILED
            await dave.close()
            admin = await connect(b, "SASL_PLAINTEXT", *ADMIN)
            described = await admin.call(29, 3, DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                host_filter=None, operation=1, permission_type=1))
            assert [(r.resource_name, r.pattern_type, [(a.principal, a.operation) for a in r.acls])
                    for r in described.resources] == [("kept-", PREFIXED, [("User:dave", WRITE)])]
            await admin.close()
        run(go())
    finally:
        b.close()


def test_a_connection_cannot_reuse_a_failed_exchange(broker):
    """After SASL_AUTHENTICATION_FAILED nothing more is read: a second token gets no answer."""
    async def go():
        reader, writer = await raw_connect(broker, "SASL_PLAINTEXT")
        client = AsyncWireClient(reader, writer)
        await client.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        await client.send(36, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"))
        await client.send(36, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        frames = []
        while True:
            try:
                head = await reader.read(4)
            except ConnectionResetError:    # the unread second token makes the broker's close a reset
                break
            if not head:
                break
            size, = struct.unpack(">i", head)
            frames.append(decode_response(36, 1, await reader.readexactly(size))[1])
        assert [f.error_code for f in frames] == [E.SASL_AUTHENTICATION_FAILED]
    run(go())


def test_a_client_security_object_never_shows_the_password():
    assert "pw" not in repr(ClientSecurity(sasl_mechanism="PLAIN", username="u", password="pw"))


def test_socket_level_reset_mid_handshake_leaves_the_listener_serving(broker):
    host, port = broker.bootstrap_for("SASL_PLAINTEXT").split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(encode_request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))[:7])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()                               # RST in the middle of a frame

    async def go():
        client = await connect(broker, "SASL_PLAINTEXT", "alice")
        assert (await client.call(3, 12, MetadataRequest(topics=[]))).cluster_id
        await client.close()
    run(go())
