"""SCRAM users and ACLs managed with real admin clients, as operators do: confluent-kafka's
AdminClient, kafka-python's KafkaAdminClient and the Java Admin client (what kafka-configs.sh and
kafka-acls.sh use), logged in as the PLAIN super user.

Each adds a SCRAM-SHA-256 user with its own iteration count (AlterUserScramCredentials), sees it
described without its secrets (DescribeUserScramCredentials), grants it a PREFIXED ACL
(CreateAcls), finds that ACL with a MATCH filter on a topic name and not with a LITERAL one
(DescribeAcls), and checks the effect on the wire: the user logs in and writes. Then it deletes
the ACL (DeleteAcls: the write is refused) and the credential (the login is refused).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from secure_broker import ADMIN, TlsFiles, connect, create_topics, run, start_broker  # noqa: E402
from test_acl_matrix import produce_body  # noqa: E402

from kafka_compat.network.client_channel import ChannelError  # noqa: E402
from kafka_compat.protocol.errors import ErrorCode  # noqa: E402

ITERATIONS = 8192


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_broker(TlsFiles(str(tmp_path_factory.mktemp("tls"))))
    try:
        yield b
    finally:
        b.close()


class ConfluentAdmin:
    def __init__(self, broker):
        from confluent_kafka.admin import AdminClient
        self.admin = AdminClient({"bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"),
                                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                  "sasl.username": ADMIN[0], "sasl.password": ADMIN[1]})

    def add_user(self, user: str, password: str) -> None:
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, ITERATIONS),
                                              password.encode())
        for f in self.admin.alter_user_scram_credentials([upsert]).values():
            f.result(30)

    def delete_user(self, user: str) -> None:
        from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion
        for f in self.admin.alter_user_scram_credentials([UserScramCredentialDeletion(
                user, ScramMechanism.SCRAM_SHA_256)]).values():
            f.result(30)

    def describe_user(self, user: str) -> list[tuple[str, int]]:
        described = self.admin.describe_user_scram_credentials([user])[user].result(30)
        return [(c.mechanism.name, c.iterations) for c in described.scram_credential_infos]

    def _binding(self, principal: str, prefix: str):
        from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
        return AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, principal, "*",
                          AclOperation.WRITE, AclPermissionType.ALLOW)

    def grant_prefixed_write(self, principal: str, prefix: str) -> None:
        for f in self.admin.create_acls([self._binding(principal, prefix)]).values():
            f.result(30)

    def find_topic_acls(self, topic: str, match: bool) -> list[tuple[str, str, str]]:
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )
        pattern = ResourcePatternType.MATCH if match else ResourcePatternType.LITERAL
        found = self.admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, pattern, None, None,
                                                          AclOperation.ANY, AclPermissionType.ANY)).result(30)
        return [(b.name, b.resource_pattern_type.name, b.principal) for b in found]

    def revoke_prefixed(self, prefix: str) -> int:
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )
        deleted = 0
        for f in self.admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED,
                                                          None, None, AclOperation.ANY,
                                                          AclPermissionType.ANY)]).values():
            deleted += len(f.result(30))
        return deleted

    def close(self) -> None:
        pass


class KafkaPythonAdmin:
    def __init__(self, broker):
        from kafka.admin import KafkaAdminClient
        self.admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_for("SASL_PLAINTEXT"),
                                      security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                      sasl_plain_username=ADMIN[0], sasl_plain_password=ADMIN[1])

    def add_user(self, user: str, password: str) -> None:
        from kafka.admin import ScramMechanism, UserScramCredentialUpsertion
        errors = self.admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramMechanism.SCRAM_SHA_256, password, iterations=ITERATIONS)])
        assert errors == {user: None}, errors

    def delete_user(self, user: str) -> None:
        from kafka.admin import ScramMechanism, UserScramCredentialDeletion
        errors = self.admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            user, ScramMechanism.SCRAM_SHA_256)])
        assert errors == {user: None}, errors

    def describe_user(self, user: str) -> list[tuple[str, int]]:
        described = self.admin.describe_user_scram_credentials([user])[user]
        assert described["error"] is None, described
        return [(c["mechanism"].name, c["iterations"]) for c in described["credential_infos"]]

    def grant_prefixed_write(self, principal: str, prefix: str) -> None:
        from kafka.admin import (
            ACL,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            ResourcePattern,
            ResourceType,
        )
        result = self.admin.create_acls([ACL(principal, "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                                             ResourcePattern(ResourceType.TOPIC, prefix,
                                                             ACLResourcePatternType.PREFIXED))])
        assert not result["failed"], result

    def _filter(self, name: str, pattern):
        from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter, ResourceType
        return ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                         ResourcePatternFilter(ResourceType.TOPIC, name, pattern))

    def find_topic_acls(self, topic: str, match: bool) -> list[tuple[str, str, str]]:
        from kafka.admin import ACLResourcePatternType
        pattern = ACLResourcePatternType.MATCH if match else ACLResourcePatternType.LITERAL
        acls, error = self.admin.describe_acls(self._filter(topic, pattern))
        assert error.errno == 0, error
        return [(a.resource_pattern.resource_name, a.resource_pattern.pattern_type.name, a.principal) for a in acls]

    def revoke_prefixed(self, prefix: str) -> int:
        from kafka.admin import ACLResourcePatternType
        [(_, deleted, error)] = self.admin.delete_acls([self._filter(prefix, ACLResourcePatternType.PREFIXED)])
        assert error.errno == 0, error
        return len(deleted)

    def close(self) -> None:
        self.admin.close()


class JavaAdmin:
    """The Java Admin client through interop/java/ClientHarness.java (one JVM a call)."""

    def __init__(self, broker):
        from test_security_clients import Setup
        self.setup = Setup(broker, "SASL_PLAINTEXT", "PLAIN", ADMIN[0], ADMIN[1])

    def _admin(self, *args: str) -> list[dict]:
        from test_security_clients import java
        return java(self.setup, "admin", *args)

    def add_user(self, user: str, password: str) -> None:
        self._admin("scram-upsert", "--user", user, "--password", password, "--iterations", str(ITERATIONS))

    def delete_user(self, user: str) -> None:
        self._admin("scram-delete", "--user", user)

    def describe_user(self, user: str) -> list[tuple[str, int]]:
        return [(d["mechanism"], d["iterations"]) for d in self._admin("scram-describe", "--user", user)]

    def grant_prefixed_write(self, principal: str, prefix: str) -> None:
        self._admin("acl-create", "--principal", principal, "--operation", "WRITE", "--topic", prefix,
                    "--pattern", "PREFIXED")

    def find_topic_acls(self, topic: str, match: bool) -> list[tuple[str, str, str]]:
        found = self._admin("acl-describe", "--topic", topic, "--pattern", "MATCH" if match else "LITERAL")
        return [(d["name"], d["pattern"], d["principal"]) for d in found]

    def revoke_prefixed(self, prefix: str) -> int:
        return len(self._admin("acl-delete", "--topic", prefix, "--pattern", "PREFIXED"))

    def close(self) -> None:
        pass


ADMINS = {"confluent-kafka": ConfluentAdmin, "kafka-python": KafkaPythonAdmin, "java": JavaAdmin}


async def write_as(broker, user: str, password: str, topic: str) -> int:
    """Logs in with SCRAM-SHA-256 over SASL_SSL and produces one record: its error code."""
    client = await connect(broker, "SASL_SSL", user, password, mechanism="SCRAM-SHA-256")
    try:
        return (await client.call(0, 9, produce_body(topic))).responses[0].partition_responses[0].error_code
    finally:
        await client.close()


@pytest.mark.parametrize("client", ADMINS)
def test_scram_users_and_acls_managed_by_a_real_admin_client(broker, client):
    user, password = f"dan-{client}", f"dan-{client}-secret"
    prefix = f"adm-{client}-"
    topic = f"{prefix}orders"
    run(create_topics(broker, topic))
    admin = ADMINS[client](broker)
    try:
        admin.add_user(user, password)
        assert admin.describe_user(user) == [("SCRAM_SHA_256", ITERATIONS)]
        assert run(write_as(broker, user, password, topic)) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        admin.grant_prefixed_write(f"User:{user}", prefix)
        assert admin.find_topic_acls(topic, match=True) == [(prefix, "PREFIXED", f"User:{user}")]
        assert admin.find_topic_acls(topic, match=False) == []
        assert run(write_as(broker, user, password, topic)) == 0
        assert admin.revoke_prefixed(prefix) == 1
        assert run(write_as(broker, user, password, topic)) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        admin.delete_user(user)
        with pytest.raises(ChannelError, match="(?i)authentication"):
            run(write_as(broker, user, password, topic))
    finally:
        admin.close()
