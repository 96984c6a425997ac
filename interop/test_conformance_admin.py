"""Configs, cluster and admin queries, security refusals and malformed frames: kafka-compat against Kafka 4.x.

Broker configs are compared name by name, with value, source, sensitivity, read-only
flag, synonyms and type; a config that only one side has is a difference like any other.
"""
from __future__ import annotations

import socket
import struct

from conformance import create, until
from wire import WireClient

from kafka_compat.protocol.messages import (
    alter_configs,
    api_versions,
    consumer_group_heartbeat,
    create_acls,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    incremental_alter_configs,
    list_transactions,
    sasl_handshake,
    update_features,
)

DESCRIBE_ACLS, CREATE_ACLS, DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE_LOG_DIRS, SASL_HANDSHAKE = 29, 30, 32, 33, 35, 17
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLIENT_QUOTAS, DESCRIBE_USER_SCRAM_CREDENTIALS = 44, 48, 50
DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 60, 61, 65, 66
DESCRIBE_TOPIC_PARTITIONS = 75
API_VERSIONS, UPDATE_FEATURES, CONSUMER_GROUP_HEARTBEAT = 18, 57, 68
TOPIC, BROKER = 2, 4


def test_describe_broker_configs(pair):
    R = describe_configs.DescribeConfigsRequest.DescribeConfigsResource
    for v in pair.versions(DESCRIBE_CONFIGS):
        for synonyms in (False, True):
            pair.call(DESCRIBE_CONFIGS, v, describe_configs.DescribeConfigsRequest(
                resources=[R(resource_type=BROKER, resource_name="0", configuration_keys=None)],
                include_synonyms=synonyms, include_documentation=False), f"broker, synonyms={synonyms}")
        pair.call(DESCRIBE_CONFIGS, v, describe_configs.DescribeConfigsRequest(resources=[
            R(resource_type=BROKER, resource_name="7", configuration_keys=None),
            R(resource_type=BROKER, resource_name="x", configuration_keys=None),
            R(resource_type=BROKER, resource_name="", configuration_keys=["log.retention.hours"]),
            R(resource_type=99, resource_name="0", configuration_keys=None)]), "errors")
    pair.check()


def test_alter_configs_errors(pair):
    create(pair, "conf-ac")
    A = incremental_alter_configs.IncrementalAlterConfigsRequest
    cases = {
        "unknown topic config": (TOPIC, "conf-ac", "no.such.config", 0, "1"),
        "bad value": (TOPIC, "conf-ac", "retention.ms", 0, "soon"),
        "append to a non-list": (TOPIC, "conf-ac", "retention.ms", 2, "5"),
        "unknown operation": (TOPIC, "conf-ac", "retention.ms", 9, "5"),
        "missing topic": (TOPIC, "conf-ac-missing", "retention.ms", 0, "5"),
        "read-only broker config": (BROKER, "0", "log.dirs", 0, "/tmp/x"),
        "other broker": (BROKER, "7", "log.cleaner.threads", 0, "2"),
        "good": (TOPIC, "conf-ac", "retention.ms", 0, "60000"),
    }
    for v in pair.versions(INCREMENTAL_ALTER_CONFIGS):
        for what, (rtype, name, key, op, value) in cases.items():
            pair.call(INCREMENTAL_ALTER_CONFIGS, v, A(resources=[A.AlterConfigsResource(
                resource_type=rtype, resource_name=name, configs=[A.AlterableConfig(
                    name=key, config_operation=op, value=value)])], validate_only=True), what)
    L = alter_configs.AlterConfigsRequest
    for v in pair.versions(ALTER_CONFIGS):
        for what, (rtype, name, key, _, value) in cases.items():
            pair.call(ALTER_CONFIGS, v, L(resources=[L.AlterConfigsResource(
                resource_type=rtype, resource_name=name, configs=[L.AlterableConfig(name=key, value=value)])],
                validate_only=True), what)
    pair.check()


GROUP = 32


def test_group_configs(pair):
    """The GROUP resource (KIP-848/932/1071): defaults with their broker synonyms, Kafka's refusals, and
    an override as it is then described."""
    R = describe_configs.DescribeConfigsRequest.DescribeConfigsResource
    A = incremental_alter_configs.IncrementalAlterConfigsRequest
    cases = {
        "by_duration": ("share.auto.offset.reset", 0, "by_duration:PT1H"),
        "bad reset": ("share.auto.offset.reset", 0, "by_duration:1h"),
        "below the type's bound": ("share.record.lock.duration.ms", 0, "100"),
        "below the broker's bound": ("share.record.lock.duration.ms", 0, "10000"),
        "above the broker's bound": ("share.partition.max.record.locks", 0, "20000"),
        "standby": ("streams.num.standby.replicas", 0, "5"),
        "assignor": ("streams.assignor.name", 0, "nope"),
        "isolation": ("share.isolation.level", 0, "x"),
        "unknown": ("no.such", 0, "1"),
        "append": ("share.delivery.count.limit", 2, "3"),
        "not a number": ("consumer.session.timeout.ms", 0, "abc"),
    }
    for v in pair.versions(INCREMENTAL_ALTER_CONFIGS):
        for what, (key, op, value) in cases.items():
            pair.call(INCREMENTAL_ALTER_CONFIGS, v, A(resources=[A.AlterConfigsResource(
                resource_type=GROUP, resource_name="conf-g", configs=[A.AlterableConfig(
                    name=key, config_operation=op, value=value)])], validate_only=True), f"group {what}")
        pair.call(INCREMENTAL_ALTER_CONFIGS, v, A(resources=[A.AlterConfigsResource(
            resource_type=GROUP, resource_name="", configs=[A.AlterableConfig(
                name="share.delivery.count.limit", config_operation=0, value="3")])], validate_only=True),
            "default group")
    pair.call(INCREMENTAL_ALTER_CONFIGS, 1, A(resources=[A.AlterConfigsResource(
        resource_type=GROUP, resource_name="conf-g", configs=[
            A.AlterableConfig(name="consumer.session.timeout.ms", config_operation=0, value="50000"),
            A.AlterableConfig(name="share.isolation.level", config_operation=0, value="read_committed")])],
        validate_only=False), "group set")
    probe = describe_configs.DescribeConfigsRequest(resources=[R(
        resource_type=GROUP, resource_name="conf-g", configuration_keys=["consumer.session.timeout.ms"])])
    for side in ("ours", "kafka"):      # KRaft applies the change once its metadata record is published
        until(lambda: pair.client(side).call(DESCRIBE_CONFIGS, 1, probe),
              lambda r: r.results[0].configs and r.results[0].configs[0].value == "50000")
    for v in pair.versions(DESCRIBE_CONFIGS):
        for group in ("conf-g", "conf-g-none", ""):
            pair.call(DESCRIBE_CONFIGS, v, describe_configs.DescribeConfigsRequest(
                resources=[R(resource_type=GROUP, resource_name=group, configuration_keys=None)],
                include_synonyms=True, include_documentation=False), f"group {group!r}")
    pair.check()


CLIENT_METRICS, LIST_CONFIG_RESOURCES = 16, 74


def test_client_metrics_configs_and_listing(pair):
    """CLIENT_METRICS subscriptions (KIP-714): Kafka's refusals, one described before and after it is
    set, and ListConfigResources of each type."""
    from kafka_compat.protocol.messages import list_config_resources
    R = describe_configs.DescribeConfigsRequest.DescribeConfigsResource
    A = incremental_alter_configs.IncrementalAlterConfigsRequest
    cases = {
        "interval too short": ("interval.ms", 0, "50"),
        "interval not a number": ("interval.ms", 0, "abc"),
        "unknown": ("nope", 0, "1"),
        "bad selector": ("match", 0, "bogus=1"),
        "bad regex": ("match", 0, "client_id=["),
        "no value": ("match", 0, "client_id"),
        "append": ("metrics", 2, "a.b"),
    }
    for v in pair.versions(INCREMENTAL_ALTER_CONFIGS):
        for what, (key, op, value) in cases.items():
            pair.call(INCREMENTAL_ALTER_CONFIGS, v, A(resources=[A.AlterConfigsResource(
                resource_type=CLIENT_METRICS, resource_name="conf-sub", configs=[A.AlterableConfig(
                    name=key, config_operation=op, value=value)])], validate_only=True), f"client metrics {what}")
    describe = describe_configs.DescribeConfigsRequest(resources=[
        R(resource_type=CLIENT_METRICS, resource_name="conf-sub", configuration_keys=None),
        R(resource_type=CLIENT_METRICS, resource_name="", configuration_keys=None)], include_synonyms=True)
    pair.call(DESCRIBE_CONFIGS, 4, describe, "client metrics unset")
    pair.call(INCREMENTAL_ALTER_CONFIGS, 1, A(resources=[A.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name="conf-sub", configs=[
            A.AlterableConfig(name="metrics", config_operation=0, value="org.apache.kafka.producer."),
            A.AlterableConfig(name="interval.ms", config_operation=0, value="1000")])], validate_only=False),
        "client metrics set")
    probe = describe_configs.DescribeConfigsRequest(resources=describe.resources[:1])
    for side in ("ours", "kafka"):      # KRaft applies the change once its metadata record is published
        until(lambda: pair.client(side).call(DESCRIBE_CONFIGS, 1, probe),
              lambda r: any(e.value == "1000" for e in r.results[0].configs))
    for v in pair.versions(DESCRIBE_CONFIGS):
        pair.call(DESCRIBE_CONFIGS, v, describe, "client metrics set")
    L = list_config_resources.ListConfigResourcesRequest
    pair.call(LIST_CONFIG_RESOURCES, 0, L(), "v0: client metrics")
    for types in ([CLIENT_METRICS], [BROKER], [99]):
        pair.call(LIST_CONFIG_RESOURCES, 1, L(resource_types=types), f"types {types}")
    pair.check()


ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46


def test_partition_reassignments(pair):
    """Reassignments on a single node, as Kafka answers them for a one-broker cluster: the assignment a
    partition has is accepted, every other refused with Kafka's reason, and nothing is ever in progress."""
    from kafka_compat.protocol.messages import alter_partition_reassignments, list_partition_reassignments
    create(pair, "conf-reassign", partitions=2)
    A = alter_partition_reassignments.AlterPartitionReassignmentsRequest
    cases = {"same": [(0, [0])], "other broker": [(0, [1])], "twice": [(0, [0, 0])], "empty": [(0, [])],
             "cancel": [(0, None)], "missing partition": [(5, [0])], "two brokers": [(1, [0, 1])],
             "negative": [(0, [-1])], "one partition twice": [(0, [0]), (0, [0])]}
    for v in pair.versions(ALTER_PARTITION_REASSIGNMENTS):
        for what, parts in cases.items():
            pair.call(ALTER_PARTITION_REASSIGNMENTS, v, A(timeout_ms=5000, topics=[A.ReassignableTopic(
                name="conf-reassign", partitions=[A.ReassignablePartition(partition_index=p, replicas=r)
                                                  for p, r in parts])]), what)
        pair.call(ALTER_PARTITION_REASSIGNMENTS, v, A(timeout_ms=5000, topics=[A.ReassignableTopic(
            name="conf-reassign-missing", partitions=[A.ReassignablePartition(partition_index=0, replicas=[0])])]),
            "missing topic")
    L = list_partition_reassignments.ListPartitionReassignmentsRequest
    pair.call(LIST_PARTITION_REASSIGNMENTS, 0, L(timeout_ms=5000, topics=None), "all")
    pair.call(LIST_PARTITION_REASSIGNMENTS, 0, L(timeout_ms=5000, topics=[
        L.ListPartitionReassignmentsTopics(name="conf-reassign", partition_indexes=[0, 9]),
        L.ListPartitionReassignmentsTopics(name="conf-reassign-missing", partition_indexes=[0])]), "named")
    pair.check()


def test_delegation_tokens_over_plaintext(pair):
    """Token requests over a PLAINTEXT listener: refused (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) with the
    fields Kafka fills in. (Token logins are tested over SASL in tests/test_delegation_tokens.py.)"""
    from kafka_compat.protocol.messages import (
        create_delegation_token,
        describe_delegation_token,
        expire_delegation_token,
        renew_delegation_token,
    )
    C = create_delegation_token.CreateDelegationTokenRequest
    for v in pair.versions(38):
        pair.call(38, v, C(owner_principal_type=None, owner_principal_name=None, renewers=[
            C.CreatableRenewers(principal_type="User", principal_name="bob")], max_lifetime_ms=-1), "create")
    for v in pair.versions(39):
        pair.call(39, v, renew_delegation_token.RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=1), "renew")
    for v in pair.versions(40):
        pair.call(40, v, expire_delegation_token.ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period_ms=-1),
                  "expire")
    for v in pair.versions(41):
        pair.call(41, v, describe_delegation_token.DescribeDelegationTokenRequest(owners=None), "describe")
    pair.check()


def test_cluster_queries(pair):
    create(pair, "conf-cq", partitions=2)
    for v in pair.versions(DESCRIBE_CLUSTER):
        pair.call(DESCRIBE_CLUSTER, v, describe_cluster.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1))
    P = describe_producers.DescribeProducersRequest
    for v in pair.versions(DESCRIBE_PRODUCERS):
        pair.call(DESCRIBE_PRODUCERS, v, P(topics=[P.TopicRequest(name="conf-cq", partition_indexes=[0, 5]),
                                                   P.TopicRequest(name="conf-cq-missing", partition_indexes=[0])]))
    for v in pair.versions(DESCRIBE_TRANSACTIONS):
        pair.call(DESCRIBE_TRANSACTIONS, v, describe_transactions.DescribeTransactionsRequest(
            transactional_ids=["conf-cq-none"]))
    for v in pair.versions(LIST_TRANSACTIONS):
        pair.call(LIST_TRANSACTIONS, v, list_transactions.ListTransactionsRequest(
            state_filters=["NoSuchState"], producer_id_filters=[], duration_filter=-1), "unknown state")
        if v >= 2:
            for pattern in ("conf-cq-.*", "("):
                pair.call(LIST_TRANSACTIONS, v, list_transactions.ListTransactionsRequest(
                    state_filters=[], producer_id_filters=[], duration_filter=-1, transactional_id_pattern=pattern),
                    f"pattern {pattern}")
    T = describe_topic_partitions.DescribeTopicPartitionsRequest
    for v in pair.versions(DESCRIBE_TOPIC_PARTITIONS):
        pair.call(DESCRIBE_TOPIC_PARTITIONS, v, T(topics=[T.TopicRequest(name="conf-cq"),
                                                          T.TopicRequest(name="conf-cq-missing")],
                                                  response_partition_limit=1, cursor=None))
    D = describe_log_dirs.DescribeLogDirsRequest
    for v in pair.versions(DESCRIBE_LOG_DIRS):
        pair.call(DESCRIBE_LOG_DIRS, v, D(topics=[D.DescribableLogDirTopic(topic="conf-cq-missing", partitions=[0])]))
    Q = describe_client_quotas.DescribeClientQuotasRequest
    for v in pair.versions(DESCRIBE_CLIENT_QUOTAS):
        pair.call(DESCRIBE_CLIENT_QUOTAS, v, Q(components=[Q.ComponentData(entity_type="user", match_type=1,
                                                                         match=None)], strict=False))
        pair.call(DESCRIBE_CLIENT_QUOTAS, v, Q(components=[Q.ComponentData(entity_type="nobody", match_type=0,
                                                                         match="x")], strict=False), "bad entity")
    S = describe_user_scram_credentials.DescribeUserScramCredentialsRequest
    for v in pair.versions(DESCRIBE_USER_SCRAM_CREDENTIALS):
        pair.call(DESCRIBE_USER_SCRAM_CREDENTIALS, v, S(users=[S.UserName(name="conf-nobody")]))
    pair.check()


def test_security_refusals_without_an_authorizer(pair):
    """ACL calls on a broker without an authorizer, and SASL on a PLAINTEXT listener."""
    for v in pair.versions(DESCRIBE_ACLS):
        pair.call(DESCRIBE_ACLS, v, describe_acls.DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
    C = create_acls.CreateAclsRequest
    for v in pair.versions(CREATE_ACLS):
        pair.call(CREATE_ACLS, v, C(creations=[C.AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
            operation=3, permission_type=3)]))
    for v in pair.versions(SASL_HANDSHAKE):
        pair.call(SASL_HANDSHAKE, v, sasl_handshake.SaslHandshakeRequest(mechanism="PLAIN"))
    pair.check()


# --- malformed frames ---------------------------------------------------------------------------

def _outcome(address, data: bytes) -> str:
    """What a broker does with these bytes: 'closed', 'open' (nothing said), or the answer's first bytes."""
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(data)
        s.settimeout(3)
        try:
            head = s.recv(4)
        except socket.timeout:
            return "open"
        except ConnectionResetError:
            return "closed"
        if not head:
            return "closed"
        return "answered"


MALFORMED = {
    "negative size": struct.pack(">i", -5),
    "huge size": struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16,
    "unknown api key": struct.pack(">ihhi", 10, 999, 0, 1) + b"\x00\x00",
    "unsupported version": struct.pack(">ihhi", 10, 3, 99, 1) + b"\x00\x00",
    "truncated body": struct.pack(">ihhi", 12, 3, 1, 1) + b"\x00\x01x" + b"\x00",
    "api versions from the future": struct.pack(">ihhi", 11, 18, 99, 7) + b"\x00\x00\x00",
    "api versions from the future, header cut short": struct.pack(">ihhi", 10, 18, 99, 7) + b"\x00\x00",
}


def test_malformed_frames(pair, conformance_broker, reference_kafka):
    """Whether each broker answers or closes: the same outcome for each malformed frame."""
    ours = ("127.0.0.1", conformance_broker.port)
    differ = {what: (_outcome(ours, data), _outcome(reference_kafka.address, data))
              for what, data in MALFORMED.items()}
    differ = {what: o for what, o in differ.items() if o[0] != o[1]}
    assert not differ, f"(ours, kafka) differ: {differ}"
    # a future ApiVersions is answered with a v0 body that names the versions each supports
    for address in (ours, reference_kafka.address):
        c = WireClient(*address)
        c.send_raw(MALFORMED["api versions from the future"])
        cid, body = c.receive(18, 0)
        assert cid == 7 and body.error_code == 35 and [k.api_key for k in body.api_keys] == [18]
        c.close()


# --- UpdateFeatures (KIP-584) -------------------------------------------------------------

def _feature_updates(*updates, validate_only: bool = True):
    U = update_features.UpdateFeaturesRequest
    return U(timeout_ms=30000, validate_only=validate_only, feature_updates=[
        U.FeatureUpdateKey(feature=f, max_version_level=level, upgrade_type=kind) for f, level, kind in updates])


def test_update_features(pair):
    """Validate-only cases at every version both serve from v1, then a real downgrade of group.version and the
    upgrade back, with the consumer protocol refused in between. v0 is left out: it has no validate_only, and
    Kafka 4.4's controller ignores its AllowDowngrade (it reads v1's UpgradeType default, UPGRADE, and refuses
    the downgrade) where ZooKeeper-mode Kafka applied it, as Kafka's UpdateFeaturesRequest reads it and we do. Levels only one side supports are left out: the answers would
    differ for a reason the ApiVersions entries of conformance.KNOWN already name."""
    UPGRADE, SAFE, UNSAFE = 1, 2, 3
    cases = {
        "safe downgrade": [("group.version", 0, SAFE)],
        "unsafe downgrade": [("group.version", 0, UNSAFE)],
        "upgrade to the level held": [("group.version", 1, UPGRADE)],
        "downgrade without its type": [("group.version", 0, UPGRADE)],
        "upgrade type unknown": [("group.version", 0, 0)],
        "upgrade type beyond": [("group.version", 0, 4)],
        "newer by downgrade": [("group.version", 1, SAFE)],
        "below zero": [("group.version", -1, SAFE)],
        "beyond what is supported": [("group.version", 2, UPGRADE)],
        "unknown feature": [("no.such.version", 1, UPGRADE)],
        "unknown feature at 0": [("no.such.version", 0, SAFE)],
        "metadata.version below the minimum": [("metadata.version", 6, SAFE)],
        "metadata.version downgrade that loses metadata": [("metadata.version", 29, SAFE)],
        "metadata.version unsafe downgrade": [("metadata.version", 29, UNSAFE)],
        "one bad of two": [("group.version", 0, SAFE), ("group.version", 9, UPGRADE)],
        "none": [],
    }
    for v in pair.versions(UPDATE_FEATURES, lo=1):
        for what, updates in cases.items():
            pair.call(UPDATE_FEATURES, v, _feature_updates(*updates), f"validate-only {what}")
    hello = api_versions.ApiVersionsRequest(client_software_name="conformance", client_software_version="1")
    H = consumer_group_heartbeat.ConsumerGroupHeartbeatRequest
    heartbeat = H(group_id="conf-features", member_id="conf-features-member", member_epoch=0,
                  rebalance_timeout_ms=30000, subscribed_topic_names=["conf-features"], topic_partitions=[])
    def finalized(level: int) -> None:
        """Both sides advertise group.version at `level` (KRaft publishes the change a moment later)."""
        for side in ("ours", "kafka"):
            until(lambda: pair.client(side).call(API_VERSIONS, 4, hello),
                  lambda r: {f.name: f.max_version_level for f in r.finalized_features}.get("group.version", 0)
                  == level)

    try:
        pair.call(UPDATE_FEATURES, 1, _feature_updates(("group.version", 0, SAFE), validate_only=False), "downgrade")
        finalized(0)
        pair.call(API_VERSIONS, 4, hello, "group.version at 0")
        pair.call(CONSUMER_GROUP_HEARTBEAT, 0, heartbeat, "group.version at 0")
    finally:
        pair.call(UPDATE_FEATURES, 2, _feature_updates(("group.version", 1, UPGRADE), validate_only=False), "upgrade")
    finalized(1)
    pair.call(API_VERSIONS, 4, hello, "group.version at 1")
    pair.check()
