"""The ACL authorizer: Kafka's matching rules, the decision cache, ACL management, persistence, the
DescribeAcls / CreateAcls / DeleteAcls answers."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from kafka_compat.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from kafka_compat.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from kafka_compat.security import acl_requests
from kafka_compat.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    host_address,
)
from kafka_compat.security.authorizer import (
    AclAuthorizer,
    AclFileStore,
    decode_zk_acls,
    encode_zk_acl_change,
    encode_zk_acls,
    parse_super_users,
    zk_acl_path,
    zk_pattern,
)
from kafka_compat.security.principal import KafkaPrincipal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE, BOB = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")
HOST = "10.0.0.1"


def acl(rtype, name, ptype, principal, op, perm=ALLOW, host="*"):
    return AclBinding(ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm))


def authorizer(*bindings, **kw):
    auth = AclAuthorizer(**kw)
    assert auth.create_acls(bindings) == [None] * len(bindings)
    return auth


# -- matching ---------------------------------------------------------------------------------

MATRIX = [
    # (ACLs, principal, host, operation, type, name, allowed)
    ([acl(T, "orders", LIT, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.READ)], BOB, HOST, Op.READ, T, "orders", False),
    ([acl(T, "orders", LIT, "User:alice", Op.READ)], ALICE, HOST, Op.WRITE, T, "orders", False),
    ([acl(T, "orders", LIT, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "orders2", False),
    ([acl(T, "orders", LIT, "User:alice", Op.READ)], ALICE, HOST, Op.READ, G, "orders", False),
    ([acl(T, "ord", LIT, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "orders", False),
    ([acl(T, "ord", PRE, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "orders", True),
    ([acl(T, "ord", PRE, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "ord", True),
    ([acl(T, "ordersX", PRE, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "orders", False),
    ([acl(T, "*", LIT, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "anything", True),
    ([acl(T, "*", PRE, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "anything", False),
    ([acl(T, "*", PRE, "User:alice", Op.READ)], ALICE, HOST, Op.READ, T, "*x", True),
    ([acl(T, "orders", LIT, "User:*", Op.READ)], BOB, HOST, Op.READ, T, "orders", True),
    ([acl(T, "orders", LIT, "User:*", Op.READ)], KafkaPrincipal("Group", "ops"), HOST, Op.READ, T, "orders", True),
    ([acl(T, "orders", LIT, "Group:*", Op.READ)], KafkaPrincipal("Group", "ops"), HOST, Op.READ, T, "orders", False),
    ([acl(T, "orders", LIT, "User:alice", Op.READ, host=HOST)], ALICE, HOST, Op.READ, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.READ, host=HOST)], ALICE, "10.0.0.2", Op.READ, T, "orders", False),
    # ALL, and what ALLOW implies
    ([acl(T, "orders", LIT, "User:alice", Op.ALL)], ALICE, HOST, Op.ALTER_CONFIGS, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.READ)], ALICE, HOST, Op.DESCRIBE, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.WRITE)], ALICE, HOST, Op.DESCRIBE, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.DELETE)], ALICE, HOST, Op.DESCRIBE, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.ALTER)], ALICE, HOST, Op.DESCRIBE, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.CREATE)], ALICE, HOST, Op.DESCRIBE, T, "orders", False),
    ([acl(T, "orders", LIT, "User:alice", Op.DESCRIBE)], ALICE, HOST, Op.READ, T, "orders", False),
    ([acl(T, "orders", LIT, "User:alice", Op.ALTER_CONFIGS)], ALICE, HOST, Op.DESCRIBE_CONFIGS, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.DESCRIBE_CONFIGS)], ALICE, HOST, Op.ALTER_CONFIGS, T, "orders", False),
    # DENY wins; DENY implies nothing
    ([acl(T, "orders", LIT, "User:alice", Op.READ), acl(T, "ord", PRE, "User:alice", Op.READ, DENY)],
     ALICE, HOST, Op.READ, T, "orders", False),
    ([acl(T, "*", LIT, "User:*", Op.ALL), acl(T, "orders", LIT, "User:alice", Op.WRITE, DENY)],
     ALICE, HOST, Op.WRITE, T, "orders", False),
    ([acl(T, "*", LIT, "User:*", Op.ALL), acl(T, "orders", LIT, "User:alice", Op.WRITE, DENY)],
     ALICE, HOST, Op.READ, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.READ), acl(T, "orders", LIT, "User:alice", Op.READ, DENY)],
     ALICE, HOST, Op.DESCRIBE, T, "orders", True),
    ([acl(T, "orders", LIT, "User:alice", Op.READ), acl(T, "orders", LIT, "User:alice", Op.ALL, DENY)],
     ALICE, HOST, Op.DESCRIBE, T, "orders", False),
    ([acl(T, "orders", LIT, "User:*", Op.READ), acl(T, "orders", LIT, "User:alice", Op.READ, DENY, HOST)],
     ALICE, "10.0.0.2", Op.READ, T, "orders", True),
    ([acl(T, "orders", LIT, "User:*", Op.READ), acl(T, "orders", LIT, "User:*", Op.READ, DENY, HOST)],
     BOB, HOST, Op.READ, T, "orders", False),
    # the cluster and other types
    ([acl(C, "kafka-cluster", LIT, "User:alice", Op.IDEMPOTENT_WRITE)], ALICE, HOST, Op.IDEMPOTENT_WRITE, C,
     "kafka-cluster", True),
    ([acl(X, "tx-", PRE, "User:alice", Op.WRITE)], ALICE, HOST, Op.DESCRIBE, X, "tx-1", True),
]


@pytest.mark.parametrize("bindings, principal, host, op, rtype, name, allowed", MATRIX)
def test_matching_matrix(bindings, principal, host, op, rtype, name, allowed):
    auth = authorizer(*bindings)
    assert auth.authorize(principal, host, op, rtype, name) is allowed
    assert auth.authorize(principal, host, op, rtype, name) is allowed      # from the cache this time


def test_super_users_and_allow_everyone():
    bindings = [acl(T, "orders", LIT, "User:alice", Op.READ)]
    auth = authorizer(*bindings, super_users="User:admin; User:root")
    assert auth.authorize(KafkaPrincipal("User", "root"), HOST, Op.DELETE, T, "orders")
    assert auth.authorize(KafkaPrincipal("User", "admin"), HOST, Op.ALTER, C, "kafka-cluster")
    assert not auth.authorize(BOB, HOST, Op.READ, T, "free")                   # no ACL: denied by default
    everyone = authorizer(*bindings, allow_everyone_if_no_acl_found=True)
    assert everyone.authorize(BOB, HOST, Op.READ, T, "free")                   # no ACL on this resource at all
    assert not everyone.authorize(BOB, HOST, Op.READ, T, "orders")             # ACLs exist, none for bob
    prefix_only = authorizer(acl(T, "fr", PRE, "User:alice", Op.READ), allow_everyone_if_no_acl_found=True)
    assert not prefix_only.authorize(BOB, HOST, Op.READ, T, "free")            # a prefixed ACL counts as ACLs


def test_super_users_parsing():
    assert parse_super_users("User:Bob;User:Alice;") == {"User:Bob", "User:Alice"}
    assert parse_super_users("") == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("Bob")
    auth = AclAuthorizer.from_config({"super.users": "User:x", "allow.everyone.if.no.acl.found": "true"})
    assert auth.super_users == {"User:x"} and auth.allow_everyone_if_no_acl_found


def test_authorize_by_resource_type_for_idempotent_producers():
    p = KafkaPrincipal("User", "p")
    assert not authorizer().authorize_by_resource_type(p, HOST, Op.WRITE, T)
    assert authorizer(acl(T, "x", LIT, "User:p", Op.WRITE)).authorize_by_resource_type(p, HOST, Op.WRITE, T)
    assert authorizer(acl(T, "x", PRE, "User:*", Op.ALL)).authorize_by_resource_type(p, HOST, Op.WRITE, T)
    assert not authorizer(acl(T, "x", LIT, "User:p", Op.READ)).authorize_by_resource_type(p, HOST, Op.WRITE, T)
    denied = authorizer(acl(T, "x", LIT, "User:p", Op.WRITE), acl(T, "x", LIT, "User:p", Op.WRITE, DENY))
    assert not denied.authorize_by_resource_type(p, HOST, Op.WRITE, T)
    by_prefix = authorizer(acl(T, "xy", LIT, "User:p", Op.WRITE), acl(T, "x", PRE, "User:p", Op.WRITE, DENY))
    assert not by_prefix.authorize_by_resource_type(p, HOST, Op.WRITE, T)
    star = authorizer(acl(T, "y", LIT, "User:p", Op.WRITE), acl(T, "*", LIT, "User:p", Op.WRITE, DENY))
    assert not star.authorize_by_resource_type(p, HOST, Op.WRITE, T)
    assert authorizer(super_users="User:p").authorize_by_resource_type(p, HOST, Op.WRITE, T)


def test_authorized_operations_bits():
    auth = authorizer(acl(T, "orders", LIT, "User:alice", Op.WRITE), acl(T, "orders", LIT, "User:alice", Op.READ))
    bits = auth.authorized_operations(ALICE, HOST, T, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.WRITE) | (1 << Op.DESCRIBE)


def test_host_addresses_as_java_prints_them():
    assert host_address("::1") == "0:0:0:0:0:0:0:1"
    assert host_address("fe80::0:abcd%eth0") == "fe80:0:0:0:0:0:0:abcd%eth0"
    assert host_address("::ffff:10.1.2.3") == "10.1.2.3"
    assert host_address("10.1.2.3") == "10.1.2.3" and host_address("not-an-ip") == "not-an-ip"


# -- the decision cache -----------------------------------------------------------------------


def test_cache_is_used_and_cleared_by_every_change():
    auth = authorizer(acl(T, "orders", LIT, "User:alice", Op.READ))
    assert auth.authorize(ALICE, HOST, Op.READ, T, "orders")
    key = (ALICE, HOST, Op.READ, T, "orders")
    assert auth._cache[key] is True
    auth._cache[key] = False                   # a cached answer is returned without a decision
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "orders")
    auth.create_acls([acl(T, "other", LIT, "User:bob", Op.READ)])
    assert auth.authorize(ALICE, HOST, Op.READ, T, "orders")           # cleared by an unrelated create
    auth.create_acls([acl(T, "ord", PRE, "User:alice", Op.READ, DENY)])
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "orders")
    auth.delete_acls([AclBindingFilter(ResourcePatternFilter(T, "ord", PRE))])
    assert auth.authorize(ALICE, HOST, Op.READ, T, "orders")
    auth.delete_acls([AclBindingFilter()])
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "orders")


def test_refused_or_empty_changes_keep_the_cache():
    auth = authorizer(acl(T, "orders", LIT, "User:alice", Op.READ))
    auth.authorize(ALICE, HOST, Op.READ, T, "orders")
    auth.create_acls([acl(T, "", LIT, "User:alice", Op.READ)])
    auth.create_acls([acl(T, "orders", LIT, "User:alice", Op.READ)])          # already there
    auth.delete_acls([AclBindingFilter(ResourcePatternFilter(G))])
    assert len(auth._cache) == 1


def test_cache_stays_bounded():
    auth = AclAuthorizer(cache_size=50)
    for i in range(500):
        auth.authorize(ALICE, HOST, Op.READ, T, f"t{i}")
        assert len(auth._cache) <= 50


def test_plain_int_codes_share_the_cache_and_the_answer():
    auth = authorizer(acl(T, "orders", LIT, "User:alice", Op.READ))
    assert auth.authorize(ALICE, HOST, 3, 2, "orders")
    assert auth.authorize(ALICE, HOST, Op.READ, T, "orders") and len(auth._cache) == 1


# -- creating, deleting, listing ----------------------------------------------------------------


@pytest.mark.parametrize("binding, message", [
    (acl(ResourceType.ANY, "x", LIT, "User:a", Op.READ), "Invalid resourceType ANY"),
    (acl(ResourceType.UNKNOWN, "x", LIT, "User:a", Op.READ), "Invalid resourceType UNKNOWN"),
    (acl(T, "x", PatternType.MATCH, "User:a", Op.READ), "Invalid patternType MATCH"),
    (acl(T, "x", PatternType.ANY, "User:a", Op.READ), "Invalid patternType ANY"),
    (acl(T, "x", LIT, "User:a", Op.ANY), "Invalid operation ANY"),
    (acl(T, "x", LIT, "User:a", Op.READ, AclPermissionType.ANY), "Invalid permissionType ANY"),
    (acl(T, "", LIT, "User:a", Op.READ), "Invalid empty resource name"),
    (acl(C, "my-cluster", LIT, "User:a", Op.ALTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(T, "a/b", LIT, "User:a", Op.READ), "ACL binding contains invalid resource name: a/b"),
    (acl(T, "x", LIT, "alice", Op.READ), "expected a string in format principalType:principalName but got alice"),
    (AclBinding(ResourcePattern(99, "x", LIT), AccessControlEntry("User:a", "*", 3, 3)),
     "Invalid resourceType UNKNOWN"),
])
def test_create_validation(binding, message):
    auth = AclAuthorizer()
    (result,) = auth.create_acls([binding])
    assert result == (ErrorCode.INVALID_REQUEST, message)
    assert auth.acls() == []


def test_create_is_idempotent_and_describe_orders():
    a = acl(T, "b", LIT, "User:x", Op.READ)
    b = acl(T, "a", PRE, "User:y", Op.WRITE, DENY)
    c = acl(G, "g", LIT, "User:x", Op.READ)
    auth = authorizer(a, b, c, a)
    assert auth.acls() == sorted([a, b, c])


FILTER_CASES = [
    (AclBindingFilter(), {"lit-orders", "lit-star", "pre-ord", "pre-or", "group"}),
    (AclBindingFilter(ResourcePatternFilter(T, "orders", PatternType.MATCH)), {"lit-orders", "lit-star", "pre-ord",
                                                                               "pre-or"}),
    (AclBindingFilter(ResourcePatternFilter(T, "orders", PatternType.ANY)), {"lit-orders"}),
    (AclBindingFilter(ResourcePatternFilter(T, "ord", PatternType.ANY)), {"pre-ord"}),
    (AclBindingFilter(ResourcePatternFilter(T, "ord", PRE)), {"pre-ord"}),
    (AclBindingFilter(ResourcePatternFilter(T, "*", LIT)), {"lit-star"}),
    (AclBindingFilter(ResourcePatternFilter(T, None, PRE)), {"pre-ord", "pre-or"}),
    (AclBindingFilter(ResourcePatternFilter(T, None, PatternType.MATCH)), {"lit-orders", "lit-star", "pre-ord",
                                                                           "pre-or"}),
    (AclBindingFilter(ResourcePatternFilter(ResourceType.ANY), AccessControlEntryFilter(principal="User:bob")),
     {"pre-or"}),
    (AclBindingFilter(entry_filter=AccessControlEntryFilter(operation=Op.WRITE)), {"lit-star"}),
    (AclBindingFilter(entry_filter=AccessControlEntryFilter(permission_type=DENY)), {"group"}),
    (AclBindingFilter(entry_filter=AccessControlEntryFilter(host=HOST)), {"pre-ord"}),
]
NAMED = {
    "lit-orders": acl(T, "orders", LIT, "User:alice", Op.READ),
    "lit-star": acl(T, "*", LIT, "User:alice", Op.WRITE),
    "pre-ord": acl(T, "ord", PRE, "User:alice", Op.READ, host=HOST),
    "pre-or": acl(T, "or", PRE, "User:bob", Op.READ),
    "group": acl(G, "orders", LIT, "User:alice", Op.READ, DENY),
}


@pytest.mark.parametrize("acl_filter, expected", FILTER_CASES)
def test_filters(acl_filter, expected):
    auth = authorizer(*NAMED.values())
    assert set(auth.acls(acl_filter)) == {NAMED[n] for n in expected}


def test_delete_counts_a_binding_for_the_first_matching_filter():
    auth = authorizer(*NAMED.values())
    results = auth.delete_acls([
        AclBindingFilter(ResourcePatternFilter(T, "orders", PatternType.MATCH),
                         AccessControlEntryFilter(principal="User:alice")),
        AclBindingFilter(),
        AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN)),
        AclBindingFilter(entry_filter=AccessControlEntryFilter(operation=Op.UNKNOWN)),
    ])
    assert {b for b, _ in results[0].deleted} == {NAMED["lit-orders"], NAMED["lit-star"], NAMED["pre-ord"]}
    assert {b for b, _ in results[1].deleted} == {NAMED["pre-or"], NAMED["group"]}
    assert results[2].error == (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    assert results[3].error == (ErrorCode.INVALID_REQUEST, "Unknown entryFilter.")
    assert auth.acls() == []


def test_filter_indefinite_fields():
    assert AclBindingFilter().find_indefinite_field() == "Resource type is ANY."
    exact = AclBindingFilter(ResourcePatternFilter(T, "x", LIT),
                             AccessControlEntryFilter("User:a", "*", Op.READ, ALLOW))
    assert exact.matches_at_most_one()
    assert AclBindingFilter(ResourcePatternFilter(T, "x", PatternType.MATCH)).find_indefinite_field() == \
        "Resource pattern type is MATCH."


# -- persistence ----------------------------------------------------------------------------------


def test_file_store_survives_restart(tmp_path):
    path = str(tmp_path / "acls.json")
    auth = AclAuthorizer(store=AclFileStore(path))
    auth.create_acls(list(NAMED.values()))
    auth.delete_acls([AclBindingFilter(ResourcePatternFilter(G))])
    again = AclAuthorizer(store=AclFileStore(path))
    assert set(again.acls()) == set(NAMED.values()) - {NAMED["group"]}
    assert again.authorize(ALICE, HOST, Op.READ, T, "orders")
    doc = json.loads(open(path).read())
    assert doc["version"] == 1 and {r["patternType"] for r in doc["resources"]} == {"Literal", "Prefixed"}


def test_file_store_failure_changes_nothing(tmp_path):
    path = tmp_path / "acls.json"
    auth = AclAuthorizer(store=AclFileStore(str(path)))
    auth.create_acls([NAMED["lit-orders"]])
    os.mkdir(str(path) + ".tmp")
    (result,) = auth.create_acls([NAMED["pre-or"]])
    assert result.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert auth.acls() == [NAMED["lit-orders"]]
    results = auth.delete_acls([AclBindingFilter()])
    assert results[0].deleted == [(NAMED["lit-orders"], result)]
    assert auth.acls() == [NAMED["lit-orders"]]
    os.rmdir(str(path) + ".tmp")
    auth.reload()
    assert auth.acls() == [NAMED["lit-orders"]]


def test_zookeeper_znode_json():
    data = b'{"version":1,"acls":[{"host":"host1","permissionType":"Deny","operation":"Read",' \
           b'"principal":"User:alice"},{"host":"*","permissionType":"ALLOW","operation":"DESCRIBE_CONFIGS",' \
           b'"principal":"User:*"},{"host":"*","permissionType":"Allow","operation":"IdempotentWrite",' \
           b'"principal":"User:p"}]}'
    aces = decode_zk_acls(data)
    assert aces == {AccessControlEntry("User:alice", "host1", Op.READ, DENY),
                    AccessControlEntry("User:*", "*", Op.UNKNOWN, ALLOW),        # Kafka reads DESCRIBE_CONFIGS
                    AccessControlEntry("User:p", "*", Op.IDEMPOTENT_WRITE, ALLOW)}  # ...only as DescribeConfigs
    doc = json.loads(encode_zk_acls([AccessControlEntry("User:a", "*", Op.DESCRIBE_CONFIGS, ALLOW)]))
    assert doc == {"version": 1, "acls": [{"principal": "User:a", "permissionType": "Allow",
                                           "operation": "DescribeConfigs", "host": "*"}]}
    assert decode_zk_acls(encode_zk_acls(aces)) == aces and decode_zk_acls(b"") == frozenset()
    with pytest.raises(ValueError):
        decode_zk_acls(b'{"version":2,"acls":[]}')


def test_zookeeper_paths_and_change_notifications():
    literal = ResourcePattern(X, "tx-1", LIT)
    prefixed = ResourcePattern(T, "orders-", PRE)
    assert zk_acl_path(literal) == "/kafka-acl/TransactionalId/tx-1"
    assert zk_acl_path(prefixed) == "/kafka-acl-extended/prefixed/Topic/orders-"
    assert zk_pattern(zk_acl_path(literal)) == literal and zk_pattern(zk_acl_path(prefixed)) == prefixed
    assert encode_zk_acl_change(literal) == ("/kafka-acl-changes/acl_changes_", b"TRANSACTIONAL_ID:tx-1")
    path, data = encode_zk_acl_change(prefixed)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {"version": 1, "resourceType": "TOPIC", "name": "orders-", "patternType": "PREFIXED"}
    with pytest.raises(ValueError):
        zk_pattern("/brokers/ids/1")


# -- DescribeAcls / CreateAcls / DeleteAcls ------------------------------------------------------

Creation = CreateAclsRequest.AclCreation
DelFilter = DeleteAclsRequest.DeleteAclsFilter


def roundtrip(response_class, response, version):
    again, _ = response_class.decode(response.encode(version), version)
    return again


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_describe_delete_through_the_messages(version):
    auth = AclAuthorizer()
    created = roundtrip(CreateAclsResponse, acl_requests.create_acls(auth, CreateAclsRequest(creations=[
        Creation(resource_type=2, resource_name="orders", resource_pattern_type=3, principal="User:alice",
                 host="*", operation=3, permission_type=3),
        Creation(resource_type=2, resource_name="ord", resource_pattern_type=4, principal="User:bob",
                 host="*", operation=4, permission_type=2),
        Creation(resource_type=4, resource_name="other", resource_pattern_type=3, principal="User:a",
                 host="*", operation=7, permission_type=3),
        Creation(resource_type=2, resource_name="x", resource_pattern_type=3, principal="bad", host="*",
                 operation=3, permission_type=3),
        Creation(resource_type=2, resource_name="x", resource_pattern_type=3, principal="User:a", host="*",
                 operation=0, permission_type=3),
    ]), version), version)
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (0, None), (0, None),
        (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.INVALID_REQUEST, "expected a string in format principalType:principalName but got bad"),
        (ErrorCode.INVALID_REQUEST, "Invalid operation UNKNOWN"),
    ]
    described = roundtrip(DescribeAclsResponse, acl_requests.describe_acls(auth, DescribeAclsRequest(
        resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=2, principal_filter=None,
        host_filter=None, operation=1, permission_type=1), version), version)
    assert described.error_code == 0
    assert [(r.resource_name, r.pattern_type, [(a.principal, a.operation, a.permission_type) for a in r.acls])
            for r in described.resources] == [("ord", 4, [("User:bob", 4, 2)]), ("orders", 3, [("User:alice", 3, 3)])]
    deleted = roundtrip(DeleteAclsResponse, acl_requests.delete_acls(auth, DeleteAclsRequest(filters=[
        DelFilter(resource_type_filter=2, resource_name_filter=None, pattern_type_filter=4, principal_filter=None,
                  host_filter=None, operation=1, permission_type=1),
        DelFilter(resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                  host_filter=None, operation=1, permission_type=1),
    ]), version), version)
    first, second = deleted.filter_results
    assert first.error_code == 0 and [(m.resource_name, m.principal, m.pattern_type) for m in first.matching_acls] \
        == [("ord", "User:bob", 4)]
    assert (second.error_code, second.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    assert auth.acls() == [acl(T, "orders", LIT, "User:alice", Op.READ)]


def test_version_0_knows_only_literal_patterns():
    auth = authorizer(acl(T, "orders", LIT, "User:a", Op.READ), acl(T, "or", PRE, "User:a", Op.READ))
    any_filter = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                     principal_filter=None, host_filter=None, operation=1, permission_type=1)
    described = roundtrip(DescribeAclsResponse, acl_requests.describe_acls(auth, any_filter, 0), 0)
    assert [r.resource_name for r in described.resources] == ["orders"]
    prefixed = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=4,
                                   principal_filter=None, host_filter=None, operation=1, permission_type=1)
    refused = acl_requests.describe_acls(auth, prefixed, 0)
    assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION
    created = acl_requests.create_acls(auth, CreateAclsRequest(creations=[Creation(
        resource_type=2, resource_name="p", resource_pattern_type=4, principal="User:a", host="*", operation=3,
        permission_type=3)]), 0)
    assert created.results[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    deleted = acl_requests.delete_acls(auth, DeleteAclsRequest(filters=[
        DelFilter(resource_type_filter=1, pattern_type_filter=2, resource_name_filter=None, principal_filter=None,
                  host_filter=None, operation=1, permission_type=1),
        DelFilter(resource_type_filter=1, pattern_type_filter=1, resource_name_filter=None, principal_filter=None,
                  host_filter=None, operation=1, permission_type=1)]), 0)
    assert deleted.filter_results[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [m.resource_name for m in deleted.filter_results[1].matching_acls] == ["orders"]
    assert [b.pattern.name for b in auth.acls()] == ["or"]


def test_describe_unknown_elements_and_no_authorizer():
    unknown = DescribeAclsRequest(resource_type_filter=0, pattern_type_filter=1, operation=1, permission_type=1)
    assert acl_requests.describe_acls(AclAuthorizer(), unknown, 2).error_code == ErrorCode.INVALID_REQUEST
    assert acl_requests.describe_acls(None, unknown, 2).error_code == ErrorCode.SECURITY_DISABLED
    request = CreateAclsRequest(creations=[Creation(), Creation()])
    assert [r.error_code for r in acl_requests.create_acls(None, request, 2).results] == [ErrorCode.SECURITY_DISABLED] * 2
    deletes = acl_requests.delete_acls(None, DeleteAclsRequest(filters=[DelFilter()]), 2)
    assert deletes.filter_results[0].error_code == ErrorCode.SECURITY_DISABLED


# -- the micro-benchmark still runs ------------------------------------------------------------------


def test_authorizer_bench_script_runs():
    out = subprocess.run([sys.executable, "bench/authorizer.py", "--acls", "200", "--seconds", "0.05"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    cases = {d["case"]: d for d in (json.loads(line) for line in out.stdout.splitlines() if line.startswith("{"))}
    assert set(cases) == {"floor", "warm", "cold", "request-1", "request-10"}
    assert all(cases[c]["ns_per_check"] > 0 for c in ("floor", "warm", "cold"))
    assert all(cases[c]["ns_per_request"] > 0 and cases[c]["floor_ns_per_request"] > 0
               for c in ("request-1", "request-10"))
