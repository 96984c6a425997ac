"""SCRAM credentials, their stores, and DescribeUserScramCredentials / AlterUserScramCredentials."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import stat

import pytest
from kafka.net.sasl.scram import ScramClient

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from kafka_compat.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka_compat.protocol.sasl import ScramMechanism, ScramServer
from kafka_compat.security.scram import (
    CredentialStore,
    FileCredentialStore,
    ScramCredential,
    alter_user_scram_credentials,
    credential_from_password,
    credential_from_salted_password,
    decode_user_config,
    describe_user_scram_credentials,
    encode_user_config,
    format_credential,
    parse_credential,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Delete = AlterUserScramCredentialsRequest.ScramCredentialDeletion


def test_credential_matches_rfc7677_keys():
    """RFC 7677's example (user/pencil, salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096): the stored and server keys
    are what its client proof and server signature were computed from."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = credential_from_password(SHA256, "pencil", 4096, salt)
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    assert cred.stored_key == hashlib.sha256(SHA256.hmac(salted, b"Client Key")).digest()
    assert cred.server_key == SHA256.hmac(salted, b"Server Key")
    assert credential_from_salted_password("SCRAM-SHA-256", salt, salted, 4096) == cred
    assert cred.iterations == 4096 and "stored" not in repr(cred) and str(cred.server_key) not in repr(cred)


def test_random_salt_and_mechanism_sizes():
    a = credential_from_password(SHA512, "pw")
    b = credential_from_password(SHA512, "pw")
    assert a.salt != b.salt and len(a.stored_key) == len(a.server_key) == 64
    with pytest.raises(ValueError):
        credential_from_password("SCRAM-SHA-1", "pw")


def test_text_form_round_trip_and_kafka_layout():
    cred = ScramCredential(b"salt", b"stored", b"server", 8192)
    text = format_credential(cred)
    assert text == "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192"
    assert parse_credential(text) == cred
    reordered = "iterations=8192,server_key=c2VydmVy,salt=c2FsdA==,stored_key=c3RvcmVk"
    assert parse_credential(reordered) == cred


@pytest.mark.parametrize("text", [
    "", "salt=c2FsdA==", "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=x",
    "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=1,extra=1",
    "salt=!!,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=1", "=a,stored_key=b",
])
def test_text_form_refusals(text):
    with pytest.raises(ValueError, match="Credentials not valid"):
        parse_credential(text)


def test_zookeeper_user_config_round_trip():
    cred = credential_from_password(SHA256, "pw")
    data = encode_user_config({"SCRAM-SHA-256": cred}, {"producer_byte_rate": "1024"})
    doc = json.loads(data)
    assert doc["version"] == 1 and doc["config"]["producer_byte_rate"] == "1024"
    assert doc["config"]["SCRAM-SHA-256"].startswith("salt=")
    assert decode_user_config(data) == {"SCRAM-SHA-256": cred}


def test_store_lookup_upsert_delete():
    store = CredentialStore()
    cred = credential_from_password(SHA256, "pw")
    assert store.lookup(SHA256, "alice") is None
    store.upsert(SHA256, "alice", cred)
    assert store.lookup("SCRAM-SHA-256", "alice") == cred and store.lookup(SHA512, "alice") is None
    assert store.users() == ["alice"] and store.describe("alice") == {"SCRAM-SHA-256": cred}
    assert store.delete(SHA256, "alice") and not store.delete(SHA256, "alice")
    assert store.users() == []


def test_file_store_survives_restart_and_is_owner_only(tmp_path):
    path = str(tmp_path / "scram.json")
    store = FileCredentialStore(path)
    cred = credential_from_password(SHA256, "pw")
    store.upsert(SHA256, "alice", cred)
    store.alter(upserts=[("bob", SHA512, cred)], deletions=[])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not os.path.exists(path + ".tmp")
    again = FileCredentialStore(path)
    assert again.lookup(SHA256, "alice") == cred and again.lookup(SHA512, "bob") == cred
    again.delete(SHA256, "alice")
    assert FileCredentialStore(path).users() == ["bob"]


def test_file_store_keeps_old_state_when_the_write_fails(tmp_path):
    path = tmp_path / "scram.json"
    store = FileCredentialStore(str(path))
    store.upsert(SHA256, "alice", credential_from_password(SHA256, "pw"))
    before = path.read_bytes()
    os.mkdir(str(path) + ".tmp")        # the temporary file cannot be created
    with pytest.raises(OSError):
        store.upsert(SHA256, "bob", credential_from_password(SHA256, "pw"))
    assert store.users() == ["alice"] and path.read_bytes() == before
    results, _ = alter(store, upserts=[Upsert(name="carol", mechanism=1, iterations=4096, salt=b"s",
                                              salted_password=salted(SHA256, "pw"))])
    assert results["carol"][0] == ErrorCode.UNKNOWN_SERVER_ERROR and store.users() == ["alice"]


def test_file_store_refuses_unknown_version(tmp_path):
    path = tmp_path / "scram.json"
    path.write_text('{"version": 2, "users": {}}')
    with pytest.raises(ValueError):
        FileCredentialStore(str(path))


# -- the two APIs -----------------------------------------------------------------------------


def salted(mechanism, password, salt=b"NaCl", iterations=4096):
    return mechanism.salted_password(password, salt, iterations)


def alter(store, upserts=(), deletions=()):
    request = AlterUserScramCredentialsRequest(upsertions=list(upserts), deletions=list(deletions))
    response = alter_user_scram_credentials(store, request)
    data = response.encode(0)
    again, _ = AlterUserScramCredentialsResponse.decode(data, 0)
    return {r.user: (r.error_code, r.error_message) for r in again.results}, [r.user for r in again.results]


def describe(store, users):
    request = DescribeUserScramCredentialsRequest(
        users=None if users is None else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users])
    response = describe_user_scram_credentials(store, request)
    again, _ = DescribeUserScramCredentialsResponse.decode(response.encode(0), 0)
    return again


def test_alter_then_describe_then_login_with_kafka_python():
    store = CredentialStore()
    results, _ = alter(store, upserts=[
        Upsert(name="alice", mechanism=1, iterations=8192, salt=b"NaCl", salted_password=salted(SHA256, "s3cr3t",
                                                                                                 iterations=8192)),
        Upsert(name="alice", mechanism=2, iterations=4096, salt=b"NaCl", salted_password=salted(SHA512, "s3cr3t")),
    ])
    assert results == {"alice": (ErrorCode.NONE, None)}
    body = describe(store, None)
    assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in body.results] \
        == [("alice", 0, [(1, 8192), (2, 4096)])]
    # the stored keys are those a real client proves knowledge of
    client = ScramClient("alice", "s3cr3t", "SCRAM-SHA-256")
    server = ScramServer(SHA256, lambda u: store.lookup(SHA256, u))
    client.process_server_first_message(server.evaluate(client.first_message()))
    client.process_server_final_message(server.evaluate(client.final_message()))
    assert server.complete


def test_describe_explicit_users_errors_and_order():
    store = CredentialStore()
    store.upsert(SHA256, "b", credential_from_password(SHA256, "x"))
    store.upsert(SHA256, "a", credential_from_password(SHA256, "x"))
    body = describe(store, ["b", "", "nobody", "a", "a"])
    assert [(r.user, r.error_code, r.error_message) for r in body.results] == [
        ("b", ErrorCode.NONE, None),
        ("", ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty"),
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody"),
        ("a", ErrorCode.DUPLICATE_RESOURCE,
         "Cannot describe SCRAM credentials for the same user twice in a single request: a"),
    ]
    assert [r.user for r in describe(store, []).results] == ["a", "b"]
    assert describe(CredentialStore(), None).results == []


def test_alter_validation_errors():
    store = CredentialStore()
    store.upsert(SHA256, "dora", credential_from_password(SHA256, "x"))
    ok = salted(SHA256, "pw")
    results, order = alter(store, upserts=[
        Upsert(name="", mechanism=1, iterations=4096, salt=b"s", salted_password=ok),
        Upsert(name="few", mechanism=1, iterations=4095, salt=b"s", salted_password=ok),
        Upsert(name="many", mechanism=2, iterations=16385, salt=b"s", salted_password=ok),
        Upsert(name="mech", mechanism=0, iterations=4096, salt=b"s", salted_password=ok),
        Upsert(name="twice", mechanism=1, iterations=4096, salt=b"s", salted_password=ok),
        Upsert(name="twice", mechanism=1, iterations=4096, salt=b"s", salted_password=ok),
        Upsert(name="fine", mechanism=1, iterations=16384, salt=b"s", salted_password=ok),
        Upsert(name="dora", mechanism=2, iterations=4096, salt=b"s", salted_password=ok),
    ], deletions=[
        Delete(name="ghost", mechanism=1),
        Delete(name="dmech", mechanism=9),
        Delete(name="dora", mechanism=1),
    ])
    assert results == {
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "mech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "dmech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "ghost": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "fine": (ErrorCode.NONE, None),
        "dora": (ErrorCode.NONE, None),
    }
    assert order.index("fine") > order.index("ghost")      # errors first, successes last, as Kafka lists them
    assert store.users() == ["dora", "fine"]
    assert store.lookup(SHA256, "dora") is None and store.lookup(SHA512, "dora") is not None
    assert store.lookup(SHA256, "fine").iterations == 16384


def test_alter_a_user_fails_or_succeeds_as_a_whole():
    store = CredentialStore()
    results, _ = alter(store, upserts=[
        Upsert(name="eve", mechanism=1, iterations=4096, salt=b"s", salted_password=salted(SHA256, "pw")),
    ], deletions=[Delete(name="eve", mechanism=2)])
    assert results == {"eve": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
    assert store.users() == []


def test_alter_persists_through_a_file_store(tmp_path):
    path = str(tmp_path / "scram.json")
    results, _ = alter(FileCredentialStore(path), upserts=[
        Upsert(name="zed", mechanism=2, iterations=4096, salt=b"s", salted_password=salted(SHA512, "pw"))])
    assert results == {"zed": (ErrorCode.NONE, None)}
    assert FileCredentialStore(path).lookup(SHA512, "zed").salt == b"s"
