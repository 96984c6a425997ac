"""Delegation tokens (KIP-48): made, logged in with over SCRAM (`tokenauth=true`), renewed, expired.

A token logs in as its owner (the ACLs that owner has apply), cannot ask for more tokens, survives a
restart, and stops working once expired; requests over PLAINTEXT are refused, and without a secret
tokens are off. In a ZooKeeper cluster a token made through one broker logs in on another, from
Kafka's /delegation_token znodes. (librdkafka's SCRAM client has no `tokenauth` extension, so
confluent-kafka cannot log in with a token; the Java client does, in interop/test_kafka_tools.py.)
"""
from __future__ import annotations

import asyncio
import base64
import json

import pytest
from secure_broker import ADMIN, TlsFiles, connect, start_broker
from wire import AsyncWireClient

from kafka_compat.endpoint import SecurityProtocol
from kafka_compat.network.client_channel import open_channel
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from kafka_compat.protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest
from kafka_compat.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from kafka_compat.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from kafka_compat.security.sasl_client import ClientSecurity
from kafka_compat.server.delegation_token_manager import token_hmac
from kafka_compat.testing import EmbeddedCluster, zookeeper_missing

SECRET = "token-test-secret"
C = CreateDelegationTokenRequest


def run(coro):
    return asyncio.run(coro)


async def token_connection(broker, token_id: str, hmac: bytes, mechanism: str = "SCRAM-SHA-256") -> AsyncWireClient:
    host, port = broker.bootstrap_for("SASL_PLAINTEXT").split(":")
    security = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, None, mechanism, token_id,
                              base64.b64encode(hmac).decode(), token=True)
    reader, writer = await open_channel(host, int(port), security, client_id="token-test")
    return AsyncWireClient(reader, writer)


async def create(c, renewers=(), max_lifetime_ms=-1, owner=None):
    return await c.call(38, 3, C(owner_principal_type="User" if owner else None, owner_principal_name=owner,
                                 max_lifetime_ms=max_lifetime_ms, renewers=[
                                     C.CreatableRenewers(principal_type="User", principal_name=r) for r in renewers]))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_broker(TlsFiles(str(tmp_path_factory.mktemp("tls"))), data_dir=str(tmp_path_factory.mktemp("data")),
                     plain_users={"renewer": "renewer-secret"}, **{"delegation.token.secret.key": SECRET, "delegation.token.max.lifetime.ms": 3_600_000})
    try:
        yield b
    finally:
        b.close()


def test_a_token_logs_in_as_its_owner_and_cannot_ask_for_more(broker):
    async def go():
        alice = await connect(broker, "SASL_PLAINTEXT", "alice")
        made = await create(alice, renewers=["renewer"])
        assert made.error_code == 0 and (made.principal_name, made.token_requester_principal_name) == (
            "alice", "alice")
        assert made.hmac == token_hmac(made.token_id, SECRET)
        assert made.max_timestamp_ms - made.issue_timestamp_ms == 3_600_000        # the broker's cap
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            as_token = await token_connection(broker, made.token_id, made.hmac, mechanism)
            # acting for alice, who may describe her own tokens, but not over a token connection
            refused = await as_token.call(41, 3, DescribeDelegationTokenRequest(owners=None))
            assert refused.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (await create(as_token)).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            await as_token.close()
        with pytest.raises(Exception):          # a wrong HMAC is a failed login
            await token_connection(broker, made.token_id, b"\x00" * 64)
        described = (await alice.call(41, 3, DescribeDelegationTokenRequest(owners=None))).tokens
        mine = [t for t in described if t.token_id == made.token_id]
        assert [(t.principal_name, [r.principal_name for r in t.renewers], t.hmac) for t in mine] == [
            ("alice", ["renewer"], made.hmac)]
        plaintext = await connect(broker, "PLAINTEXT")
        assert (await create(plaintext)).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        await plaintext.close()
        await alice.close()
    run(go())


def test_renew_expire_and_a_restart(broker):
    async def first():
        alice = await connect(broker, "SASL_PLAINTEXT", "alice")
        made = await create(alice, renewers=["renewer"])
        bob = await connect(broker, "SASL_PLAINTEXT", "renewer")
        renewed = await bob.call(39, 2, RenewDelegationTokenRequest(hmac=made.hmac, renew_period_ms=10**12))
        assert (renewed.error_code, renewed.expiry_timestamp_ms) == (0, made.max_timestamp_ms)   # capped
        mallory = await connect(broker, "SASL_PLAINTEXT", "mallory")
        stolen = await mallory.call(40, 2, ExpireDelegationTokenRequest(hmac=made.hmac, expiry_time_period_ms=-1))
        assert stolen.error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        gone = await create(alice)
        expired = await alice.call(40, 2, ExpireDelegationTokenRequest(hmac=gone.hmac, expiry_time_period_ms=-1))
        assert expired.error_code == 0
        missing = await alice.call(39, 2, RenewDelegationTokenRequest(hmac=gone.hmac, renew_period_ms=1000))
        assert missing.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        for c in (alice, bob, mallory):
            await c.close()
        return made, gone

    made, gone = run(first())
    broker.restart()

    async def second():
        again = await token_connection(broker, made.token_id, made.hmac)      # kept across the restart
        await again.close()
        with pytest.raises(Exception):
            await token_connection(broker, gone.token_id, gone.hmac)          # an expired token no longer logs in
    run(second())


def test_without_a_secret_tokens_are_off(tmp_path):
    b = start_broker(TlsFiles(str(tmp_path / "tls")))
    try:
        async def go():
            admin = await connect(b, "SASL_PLAINTEXT", *ADMIN)
            assert (await create(admin)).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            described = await admin.call(41, 3, DescribeDelegationTokenRequest(owners=None))
            assert described.error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            await admin.close()
        run(go())
    finally:
        b.close()


@pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))
def test_in_a_cluster_a_token_made_on_one_broker_logs_in_on_another(tmp_path):
    from secure_broker import LISTENERS, broker_overrides
    tls = TlsFiles(str(tmp_path / "tls"))
    overrides = broker_overrides(tls, authorizer=False, **{"delegation.token.secret.key": SECRET})
    with EmbeddedCluster(2, overrides, listeners=LISTENERS) as cluster:
        async def go():
            first, second = cluster.brokers
            alice = await connect(first, "SASL_PLAINTEXT", "alice")
            made = await create(alice)
            assert made.error_code == 0
            znode = json.loads(cluster.zk.get(f"/delegation_token/tokens/{made.token_id}")[0])
            assert {k: znode[k] for k in ("owner", "tokenRequester", "renewers", "tokenId")} == {
                "owner": "User:alice", "tokenRequester": "User:alice", "renewers": [], "tokenId": made.token_id}
            assert "hmac" not in json.dumps(znode).lower()
            assert cluster.zk.get_children("/delegation_token/token_changes")
            deadline = asyncio.get_running_loop().time() + 30
            while True:                         # broker 1 learns the token from the change notification
                try:
                    other = await token_connection(second, made.token_id, made.hmac)
                    break
                except Exception:
                    assert asyncio.get_running_loop().time() < deadline, "broker 1 never accepted the token"
                    await asyncio.sleep(0.3)
            await other.close()
            await alice.close()
        run(go())
