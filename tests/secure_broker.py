"""A broker with every kind of listener, its certificates and its users, for the security tests
(tests/ and interop/ both use it).

Listeners (all on loopback, each its own port):
  PLAINTEXT       no security: User:ANONYMOUS
  SSL             TLS, no client certificate asked
  SASL_PLAINTEXT  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (and OAUTHBEARER with Kafka's unsecured validator)
  SASL_SSL        the same over TLS
  MTLS            TLS with a client certificate required; its subject is mapped to the principal by
                  ssl.principal.mapping.rules (CN=writer,OU=... -> User:writer), set per listener with
                  listener.name.mtls.* as Kafka allows
PLAIN users come from the JAAS configuration; SCRAM users are made with AlterUserScramCredentials
by `admin`, a super user, as an operator would.
"""
from __future__ import annotations

import asyncio
import os
import secrets

from cryptography.x509.oid import NameOID
from tls_certs import issue, make_ca, name
from wire import AsyncWireClient

from kafka_compat.endpoint import SecurityProtocol
from kafka_compat.network.client_channel import open_channel
from kafka_compat.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kafka_compat.protocol.messages.create_acls import CreateAclsRequest
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.sasl import ScramMechanism
from kafka_compat.security.sasl_client import ClientSecurity
from kafka_compat.security.ssl_context import client_ssl_context
from kafka_compat.testing import EmbeddedBroker

LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL",
             "MTLS": "SSL"}
ADMIN = ("admin", "admin-secret")
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "mallory": "mallory-secret"}
SCRAM_USERS = {"bob": "bob-secret", "carol": "carol-secret"}
MAPPING_RULES = "RULE:^CN=([a-zA-Z0-9]+),OU=clients,O=kafka-compat$/$1/L,DEFAULT"
SCRAM_ITERATIONS = 4096


class TlsFiles:
    """A CA, the broker's certificate (for localhost and 127.0.0.1) and client certificates, as PEM files."""

    def __init__(self, directory: str, clients=("writer", "reader", "Stranger")):
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        self.ca = make_ca()
        self.ca_path = self._write("ca.pem", self.ca.cert_pem)
        server = issue(self.ca, name((NameOID.COMMON_NAME, "localhost")), server=True)
        self.server_key_path = self._write("server-key.pem", server.key_pem())
        self.server_cert_path = self._write("server-cert.pem", server.cert_pem + self.ca.cert_pem)
        self.server_keystore = self._write("server.pem", server.key_pem() + server.cert_pem + self.ca.cert_pem)
        self.key_password = "key-secret"
        self.server_keystore_encrypted = self._write("server-encrypted.pem", server.key_pem(
            self.key_password.encode()) + server.cert_pem)
        self.clients = {}
        for cn in clients:
            cert = issue(self.ca, name((NameOID.ORGANIZATION_NAME, "kafka-compat"),
                                       (NameOID.ORGANIZATIONAL_UNIT_NAME, "clients"), (NameOID.COMMON_NAME, cn)))
            self.clients[cn] = (self._write(f"{cn}-key.pem", cert.key_pem()),
                                self._write(f"{cn}-cert.pem", cert.cert_pem))
        other_ca = make_ca("another CA")
        self.untrusted_ca_path = self._write("other-ca.pem", other_ca.cert_pem)

    def _write(self, filename: str, text: str) -> str:
        path = os.path.join(self.dir, filename)
        with open(path, "w") as f:
            f.write(text)
        return path


def plain_jaas(users: dict[str, str], username: str = "admin", password: str = "admin-secret") -> str:
    options = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{username}" '
            f'password="{password}" {options};')


def broker_overrides(tls: TlsFiles, authorizer: bool = True, plain_users: dict[str, str] | None = None,
                     **extra) -> dict[str, str]:
    jaas = plain_jaas({**PLAIN_USERS, **(plain_users or {})})
    out = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": tls.server_keystore,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": tls.ca_path,
        "listener.name.mtls.ssl.principal.mapping.rules": MAPPING_RULES,
        "group.initial.rebalance.delay.ms": "0",
    }
    if authorizer:
        out.update({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"})
    out.update(extra)
    return out


def start_broker(tls: TlsFiles, authorizer: bool = True, data_dir: str | None = None,
                 plain_users: dict[str, str] | None = None, **extra) -> EmbeddedBroker:
    broker = EmbeddedBroker(broker_overrides(tls, authorizer, plain_users, **extra), data_dir=data_dir,
                            listeners=LISTENERS)
    broker.plain_users = {**PLAIN_USERS, **(plain_users or {})}
    broker.start()
    broker.tls = tls
    return broker


def security(broker, listener: str, user: str | None = None, password: str | None = None,
             mechanism: str | None = None, cert: str | None = None, ca: str | None = None) -> ClientSecurity:
    """How our own client reaches `listener`; `cert` names a client certificate of the TlsFiles."""
    protocol = SecurityProtocol(broker.listeners[listener])
    context = None
    if protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
        config = {"ssl.truststore.type": "PEM", "ssl.truststore.location": ca or broker.tls.ca_path}
        if cert is not None:
            key_path, cert_path = broker.tls.clients[cert]
            with open(key_path) as k, open(cert_path) as c:
                config.update({"ssl.keystore.type": "PEM", "ssl.keystore.key": k.read(),
                               "ssl.keystore.certificate.chain": c.read()})
        context = client_ssl_context(config)
    if mechanism is None and user is not None:
        mechanism = "SCRAM-SHA-512" if user in SCRAM_USERS else "PLAIN"
    return ClientSecurity(protocol, context, mechanism, user, password)


async def connect(broker, listener: str, user: str | None = None, password: str | None = None, **kw):
    """An AsyncWireClient on `listener`, logged in as `user` (password by default from the user tables)."""
    if user is not None and password is None:
        password = getattr(broker, "plain_users", PLAIN_USERS).get(user) or SCRAM_USERS[user]
    host, port = broker.bootstrap_for(listener).split(":")
    reader, writer = await open_channel(host, int(port), security(broker, listener, user, password, **kw),
                                        client_id="security-test", server_hostname="localhost")
    return AsyncWireClient(reader, writer)


def scram_upsertion(user: str, password: str, mechanism: ScramMechanism, iterations: int = SCRAM_ITERATIONS):
    salt = secrets.token_bytes(16)
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=mechanism.type, iterations=iterations, salt=salt,
        salted_password=mechanism.salted_password(password, salt, iterations))


async def create_scram_users(broker, users: dict[str, str] = SCRAM_USERS) -> None:
    """Both SCRAM mechanisms for each user, made by admin over SASL_PLAINTEXT."""
    client = await connect(broker, "SASL_PLAINTEXT", *ADMIN)
    try:
        response = await client.call(51, 0, AlterUserScramCredentialsRequest(deletions=[], upsertions=[
            scram_upsertion(u, p, m) for u, p in users.items() for m in ScramMechanism]))
    finally:
        await client.close()
    assert all(r.error_code == 0 for r in response.results), [(r.user, r.error_message) for r in response.results]


async def create_topics(broker, *names: str, partitions: int = 1) -> None:
    """Topics made by admin (CreateTopics; an existing topic is fine)."""
    client = await connect(broker, "SASL_PLAINTEXT", *ADMIN)
    try:
        response = await client.call(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[
            CreateTopicsRequest.CreatableTopic(name=n, num_partitions=partitions, replication_factor=1)
            for n in names]))
    finally:
        await client.close()
    assert all(t.error_code in (0, 36) for t in response.topics), [(t.name, t.error_message) for t in response.topics]


TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
ALLOW, DENY = 3, 2


def acl(principal: str, op: int, resource: str, rtype: int = TOPIC, pattern: int = LITERAL, permission: int = ALLOW):
    return CreateAclsRequest.AclCreation(resource_type=rtype, resource_name=resource, resource_pattern_type=pattern,
                                         principal=principal, host="*", operation=op, permission_type=permission)


async def create_acls(broker, *creations) -> None:
    """ACLs made by admin (CreateAcls)."""
    admin = await connect(broker, "SASL_PLAINTEXT", *ADMIN)
    try:
        response = await admin.call(30, 3, CreateAclsRequest(creations=list(creations)))
    finally:
        await admin.close()
    assert [r.error_code for r in response.results] == [0] * len(creations), response


async def create_acls_for(broker, topic: str, principals, groups: str = "*") -> None:
    """What a producing and consuming client needs: READ and WRITE on the topic, READ on the groups."""
    await create_acls(broker, *[a for p in principals for a in (
        acl(p, READ, topic), acl(p, WRITE, topic), acl(p, READ, groups, GROUP))])


def run(coro):
    return asyncio.run(coro)
