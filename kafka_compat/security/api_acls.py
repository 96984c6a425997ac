"""What each API asks of the authorizer, and how a refusal shows in the response (Kafka's KafkaApis,
AclApis, ConfigHelper and ControllerApis, read as data).

`API_ACLS[api_key].checks` is a tuple of requirements, all of which apply, in the order Kafka
checks them; each requirement is a tuple of alternatives, any one of which is enough (CreateTopics:
CREATE on the cluster, else CREATE on each topic). A `Check` names the resource type and operation,
where the resource names come from (a request field path, `CLUSTER` for the cluster resource,
`ANY_RESOURCE` for "some resource of the type", or `FROM_STATE` for names the broker finds),
the error a refusal gives, what is refused (`Denial`), and the condition under which it applies.

Field paths read `topic_data[].name`: the field `name` of each element of the `topic_data` array.
Where versions differ (topic ids, batched groups) the paths are listed with '|'; `a:b` is a principal
made of two fields.
"""
from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from ..protocol.errors import ErrorCode
from .acl import AclOperation, ResourceType

CLUSTER = "kafka-cluster"           # the one cluster resource
ANY_RESOURCE = "*any*"              # authorize_by_resource_type: allowed on at least one resource of the type
FROM_STATE = "*state*"              # names the broker looks up (groups it lists, partitions of a transaction)

# conditions, as written in the table
ALWAYS = ""
TXN_ID_SET = "transactional_id is not null"
NO_TXN_ID = "transactional_id is null"
FOLLOWER = "replica_id >= 0 (a follower fetch)"
CONSUMER = "replica_id < 0 (a consumer fetch)"
AUTO_CREATE = "the topic does not exist and auto-creation is allowed and enabled"
BY_TOPIC_ID = "the topic is named by id"
BROKER_RESOURCE = "resource_type is BROKER (4), BROKER_LOGGER (8) or CLIENT_METRICS (16)"
TOPIC_RESOURCE = "resource_type is TOPIC (2)"
GROUP_RESOURCE = "resource_type is GROUP (32)"
KEY_GROUP = "key_type is 0 (group)"
KEY_TXN = "key_type is 1 (transaction)"
KEY_SHARE = "key_type is 2 (share)"
OWNER_OTHER = "the owner is not the requester"
VERSION_LT_4 = "version < 4 (from clients)"
VERSION_GE_4 = "version >= 4 (broker to broker)"
VERSION_LT_8 = "version < 8 (one group)"
VERSION_GE_8 = "version >= 8 (several groups)"
CONDITIONS = frozenset({ALWAYS, TXN_ID_SET, NO_TXN_ID, FOLLOWER, CONSUMER, AUTO_CREATE, BY_TOPIC_ID, BROKER_RESOURCE,
                        TOPIC_RESOURCE, GROUP_RESOURCE, KEY_GROUP, KEY_TXN, KEY_SHARE, OWNER_OTHER, VERSION_LT_4,
                        VERSION_GE_4, VERSION_LT_8, VERSION_GE_8})


class Denial(Enum):
    REQUEST = "request"         # nothing is done; the response carries the error (top level, or every entry)
    ITEM = "item"               # the refused item carries the error; the others go ahead
    OMIT = "omit"               # refused items are left out of the response without a word
    ITEM_OR_OMIT = "item-or-omit"   # named items carry the error; in an "all items" request they are left out


class Check(NamedTuple):
    resource_type: ResourceType
    operation: AclOperation
    names: str
    error: ErrorCode | None
    denial: Denial
    when: str = ALWAYS


class ApiAcls(NamedTuple):
    api_key: int
    name: str
    checks: tuple[tuple[Check, ...], ...]
    note: str = ""
    verified: bool = True       # False: read from release notes, not from Kafka's code


T, G, C, X, D, U = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                    ResourceType.DELEGATION_TOKEN, ResourceType.USER)
Op = AclOperation
E = ErrorCode
REQ, ITEM, OMIT, ITEM_OR_OMIT = Denial.REQUEST, Denial.ITEM, Denial.OMIT, Denial.ITEM_OR_OMIT


def _one(*checks: Check) -> tuple[Check, ...]:
    return checks


def _cluster(op: AclOperation, denial: Denial = REQ, when: str = ALWAYS) -> Check:
    return Check(C, op, CLUSTER, E.CLUSTER_AUTHORIZATION_FAILED, denial, when)


_CLUSTER_ACTION = (_one(_cluster(Op.CLUSTER_ACTION)),)
_NONE: tuple = ()


def _group(op: AclOperation, names: str = "group_id", denial: Denial = REQ, when: str = ALWAYS) -> Check:
    return Check(G, op, names, E.GROUP_AUTHORIZATION_FAILED, denial, when)


def _topic(op: AclOperation, names: str, denial: Denial = ITEM, when: str = ALWAYS) -> Check:
    return Check(T, op, names, E.TOPIC_AUTHORIZATION_FAILED, denial, when)


def _txn(op: AclOperation, names: str = "transactional_id", denial: Denial = REQ, when: str = ALWAYS) -> Check:
    return Check(X, op, names, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, denial, when)


def _configs(op: AclOperation) -> tuple[tuple[Check, ...], ...]:
    return (_one(_cluster(op, ITEM, BROKER_RESOURCE)),
            _one(_topic(op, "resources[].resource_name", ITEM, TOPIC_RESOURCE)),
            _one(_group(op, "resources[].resource_name", ITEM, GROUP_RESOURCE)))


_TABLE = [
    ApiAcls(0, "Produce", (_one(_txn(Op.WRITE, when=TXN_ID_SET)),
                           _one(_topic(Op.WRITE, "topic_data[].name|topic_data[].topic_id"))),
            "IDEMPOTENT_WRITE is checked by InitProducerId (since Kafka 2.8), not here"),
    ApiAcls(1, "Fetch", (_one(Check(C, Op.CLUSTER_ACTION, CLUSTER, E.TOPIC_AUTHORIZATION_FAILED, ITEM, FOLLOWER)),
                         _one(_topic(Op.READ, "topics[].topic|topics[].topic_id", when=CONSUMER))),
            "a follower without CLUSTER_ACTION gets TOPIC_AUTHORIZATION_FAILED on every partition"),
    ApiAcls(2, "ListOffsets", (_one(_topic(Op.DESCRIBE, "topics[].name")),)),
    ApiAcls(3, "Metadata", (_one(_topic(Op.DESCRIBE, "topics[].name|topics[].topic_id", ITEM_OR_OMIT)),
                            (_cluster(Op.CREATE, ITEM, AUTO_CREATE),
                             _topic(Op.CREATE, "topics[].name", ITEM, AUTO_CREATE))),
            "topics named but not describable: TOPIC_AUTHORIZATION_FAILED with a zero topic id and no partitions "
            "(existence is never revealed); in an all-topics request (topics null) they are left out. "
            "Cluster authorized operations are filled only with DESCRIBE on the cluster"),
    ApiAcls(4, "LeaderAndIsr", _CLUSTER_ACTION),
    ApiAcls(5, "StopReplica", _CLUSTER_ACTION),
    ApiAcls(6, "UpdateMetadata", _CLUSTER_ACTION),
    ApiAcls(7, "ControlledShutdown", _CLUSTER_ACTION),
    ApiAcls(8, "OffsetCommit", (_one(_group(Op.READ)), _one(_topic(Op.READ, "topics[].name|topics[].topic_id")))),
    ApiAcls(9, "OffsetFetch", (_one(_group(Op.DESCRIBE, "group_id", REQ, VERSION_LT_8)),
                               _one(_group(Op.DESCRIBE, "groups[].group_id", ITEM, VERSION_GE_8)),
                               _one(_topic(Op.DESCRIBE,
                                           "topics[].name|groups[].topics[].name|groups[].topics[].topic_id",
                                           ITEM_OR_OMIT))),
            "partitions of topics without DESCRIBE: TOPIC_AUTHORIZATION_FAILED when named, left out when the "
            "request asks for all of the group's offsets (topics null)"),
    ApiAcls(10, "FindCoordinator", (_one(_group(Op.DESCRIBE, "key|coordinator_keys[]", ITEM, KEY_GROUP)),
                                    _one(_txn(Op.DESCRIBE, "key|coordinator_keys[]", ITEM, KEY_TXN)),
                                    _one(_cluster(Op.CLUSTER_ACTION, ITEM, KEY_SHARE))),
            "v4+ answers each coordinator key separately; before v4 the single answer carries the error"),
    ApiAcls(11, "JoinGroup", (_one(_group(Op.READ)),)),
    ApiAcls(12, "Heartbeat", (_one(_group(Op.READ)),)),
    ApiAcls(13, "LeaveGroup", (_one(_group(Op.READ)),)),
    ApiAcls(14, "SyncGroup", (_one(_group(Op.READ)),)),
    ApiAcls(15, "DescribeGroups", (_one(_group(Op.DESCRIBE, "groups[]", ITEM)),),
            "authorized operations (v3+) per group"),
    ApiAcls(16, "ListGroups", ((_cluster(Op.DESCRIBE, OMIT), _group(Op.DESCRIBE, FROM_STATE, OMIT)),),
            "DESCRIBE on the cluster lists every group; otherwise only the groups the caller may describe"),
    ApiAcls(17, "SaslHandshake", _NONE),
    ApiAcls(18, "ApiVersions", _NONE),
    ApiAcls(19, "CreateTopics", ((_cluster(Op.CREATE, ITEM), _topic(Op.CREATE, "topics[].name")),
                                 _one(_topic(Op.DESCRIBE_CONFIGS, "topics[].name"))),
            "without DESCRIBE_CONFIGS the topic is created but its configs are left out and "
            "topic_config_error_code (v5+) is TOPIC_AUTHORIZATION_FAILED"),
    ApiAcls(20, "DeleteTopics", (_one(_topic(Op.DESCRIBE, "topics[].topic_id", ITEM, BY_TOPIC_ID)),
                                 (_cluster(Op.DELETE, ITEM), _topic(Op.DELETE, "topic_names[]|topics[].name"))),
            "a topic named by id without DESCRIBE is answered with a null name; DELETE on the cluster "
            "is accepted by KRaft controllers (4.x), ZooKeeper brokers want it per topic"),
    ApiAcls(21, "DeleteRecords", (_one(_topic(Op.DELETE, "topics[].name")),)),
    ApiAcls(22, "InitProducerId", (_one(_txn(Op.WRITE, when=TXN_ID_SET)),
                                   (_cluster(Op.IDEMPOTENT_WRITE, REQ, NO_TXN_ID),
                                    Check(T, Op.WRITE, ANY_RESOURCE, E.CLUSTER_AUTHORIZATION_FAILED, REQ, NO_TXN_ID))),
            "KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic"),
    ApiAcls(23, "OffsetForLeaderEpoch", ((_cluster(Op.CLUSTER_ACTION, ITEM), _topic(Op.DESCRIBE, "topics[].topic")),)),
    ApiAcls(24, "AddPartitionsToTxn", (_one(_txn(Op.WRITE, "v3_and_below_transactional_id", REQ, VERSION_LT_4)),
                                       _one(_topic(Op.WRITE, "v3_and_below_topics[].name", ITEM, VERSION_LT_4)),
                                       _one(_cluster(Op.CLUSTER_ACTION, REQ, VERSION_GE_4))),
            "one refused or unknown partition fails the whole transaction: the others get OPERATION_NOT_ATTEMPTED; "
            "internal topics are not checked"),
    ApiAcls(25, "AddOffsetsToTxn", (_one(_txn(Op.WRITE)), _one(_group(Op.READ)))),
    ApiAcls(26, "EndTxn", (_one(_txn(Op.WRITE)),)),
    ApiAcls(27, "WriteTxnMarkers", ((_cluster(Op.ALTER), _cluster(Op.CLUSTER_ACTION)),)),
    ApiAcls(28, "TxnOffsetCommit", (_one(_txn(Op.WRITE)), _one(_group(Op.READ)),
                                    _one(_topic(Op.READ, "topics[].name")))),
    ApiAcls(29, "DescribeAcls", (_one(_cluster(Op.DESCRIBE)),)),
    ApiAcls(30, "CreateAcls", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(31, "DeleteAcls", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(32, "DescribeConfigs", _configs(Op.DESCRIBE_CONFIGS)),
    ApiAcls(33, "AlterConfigs", _configs(Op.ALTER_CONFIGS)),
    ApiAcls(34, "AlterReplicaLogDirs", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(35, "DescribeLogDirs", (_one(_cluster(Op.DESCRIBE)),),
            "refused: no results, and error_code CLUSTER_AUTHORIZATION_FAILED from v3"),
    ApiAcls(36, "SaslAuthenticate", _NONE),
    ApiAcls(37, "CreatePartitions", (_one(_topic(Op.ALTER, "topics[].name")),)),
    ApiAcls(38, "CreateDelegationToken", (_one(Check(U, Op.CREATE_TOKENS, "owner_principal_type:owner_principal_name",
                                                     E.DELEGATION_TOKEN_AUTHORIZATION_FAILED, REQ, OWNER_OTHER)),),
            "only on SASL connections not authenticated by a token, else DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"),
    ApiAcls(39, "RenewDelegationToken", _NONE, "no ACL: the owner or a renewer (DELEGATION_TOKEN_OWNER_MISMATCH)"),
    ApiAcls(40, "ExpireDelegationToken", _NONE, "no ACL: the owner or a renewer (DELEGATION_TOKEN_OWNER_MISMATCH)"),
    ApiAcls(41, "DescribeDelegationToken", ((Check(D, Op.DESCRIBE, FROM_STATE, None, OMIT),
                                             Check(U, Op.DESCRIBE_TOKENS, FROM_STATE, None, OMIT)),),
            "a token is listed to its owner, its renewers, DESCRIBE on the token id or DESCRIBE_TOKENS on the owner"),
    ApiAcls(42, "DeleteGroups", (_one(_group(Op.DELETE, "groups_names[]", ITEM)),)),
    ApiAcls(43, "ElectLeaders", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(44, "IncrementalAlterConfigs", _configs(Op.ALTER_CONFIGS)),
    ApiAcls(45, "AlterPartitionReassignments", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(46, "ListPartitionReassignments", (_one(_cluster(Op.DESCRIBE)),)),
    ApiAcls(47, "OffsetDelete", (_one(_group(Op.DELETE)), _one(_topic(Op.READ, "topics[].name")))),
    ApiAcls(48, "DescribeClientQuotas", (_one(_cluster(Op.DESCRIBE_CONFIGS)),)),
    ApiAcls(49, "AlterClientQuotas", (_one(_cluster(Op.ALTER_CONFIGS)),)),
    ApiAcls(50, "DescribeUserScramCredentials", (_one(_cluster(Op.DESCRIBE)),)),
    ApiAcls(51, "AlterUserScramCredentials", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(55, "DescribeQuorum", (_one(_cluster(Op.DESCRIBE)),)),
    ApiAcls(56, "AlterPartition", _CLUSTER_ACTION),
    ApiAcls(57, "UpdateFeatures", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(60, "DescribeCluster", _NONE,
            "cluster authorized operations are filled only with DESCRIBE on the cluster"),
    ApiAcls(61, "DescribeProducers", (_one(_topic(Op.READ, "topics[].name")),)),
    ApiAcls(64, "UnregisterBroker", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(65, "DescribeTransactions", (_one(_txn(Op.DESCRIBE, "transactional_ids[]", ITEM)),
                                         _one(_topic(Op.DESCRIBE, FROM_STATE, OMIT))),
            "partitions of topics the caller may not describe are left out of the transaction"),
    ApiAcls(66, "ListTransactions", (_one(_txn(Op.DESCRIBE, FROM_STATE, OMIT)),)),
    ApiAcls(68, "ConsumerGroupHeartbeat", (_one(_group(Op.READ)),
                                           _one(_topic(Op.DESCRIBE, "subscribed_topic_names[]", REQ))),
            "one subscribed topic the caller may not describe fails the heartbeat (TOPIC_AUTHORIZATION_FAILED)",
            verified=False),
    ApiAcls(69, "ConsumerGroupDescribe", (_one(_group(Op.DESCRIBE, "group_ids[]", ITEM)),)),
    ApiAcls(71, "GetTelemetrySubscriptions", _NONE),
    ApiAcls(72, "PushTelemetry", _NONE),
    ApiAcls(74, "ListConfigResources", (_one(_cluster(Op.DESCRIBE_CONFIGS)),)),
    ApiAcls(75, "DescribeTopicPartitions", (_one(_topic(Op.DESCRIBE, "topics[].name", ITEM_OR_OMIT)),),
            "as Metadata: named topics get TOPIC_AUTHORIZATION_FAILED with a zero id, listing all leaves them out"),
    ApiAcls(76, "ShareGroupHeartbeat", (_one(_group(Op.READ)),)),
    ApiAcls(77, "ShareGroupDescribe", (_one(_group(Op.DESCRIBE, "group_ids[]", ITEM)),)),
    ApiAcls(78, "ShareFetch", (_one(_group(Op.READ)), _one(_topic(Op.READ, "topics[].topic_id")))),
    ApiAcls(79, "ShareAcknowledge", (_one(_group(Op.READ)), _one(_topic(Op.READ, "topics[].topic_id")))),
    ApiAcls(80, "AddRaftVoter", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(81, "RemoveRaftVoter", (_one(_cluster(Op.ALTER)),)),
    ApiAcls(83, "InitializeShareGroupState", _CLUSTER_ACTION, "broker to share coordinator", False),
    ApiAcls(84, "ReadShareGroupState", _CLUSTER_ACTION, "broker to share coordinator"),
    ApiAcls(85, "WriteShareGroupState", _CLUSTER_ACTION, "broker to share coordinator"),
    ApiAcls(86, "DeleteShareGroupState", _CLUSTER_ACTION, "broker to share coordinator", False),
    ApiAcls(87, "ReadShareGroupStateSummary", _CLUSTER_ACTION, "broker to share coordinator", False),
    ApiAcls(88, "StreamsGroupHeartbeat", (_one(_group(Op.READ)),), "Kafka 4.1+", False),
    ApiAcls(89, "StreamsGroupDescribe", (_one(_group(Op.DESCRIBE, "group_ids[]", ITEM)),), "Kafka 4.1+", False),
    ApiAcls(90, "DescribeShareGroupOffsets", (_one(_group(Op.DESCRIBE, "groups[].group_id", ITEM)),
                                              _one(_topic(Op.DESCRIBE, "groups[].topics[].topic_name"))),
            "Kafka 4.1+", False),
    ApiAcls(91, "AlterShareGroupOffsets", (_one(_group(Op.READ)), _one(_topic(Op.READ, "topics[].topic_name"))),
            "Kafka 4.1+", False),
    ApiAcls(92, "DeleteShareGroupOffsets", (_one(_group(Op.DELETE)), _one(_topic(Op.READ, "topics[].topic_name"))),
            "Kafka 4.1+", False),
]

API_ACLS: dict[int, ApiAcls] = {a.api_key: a for a in _TABLE}

# Controller-only APIs (no request classes here): all need CLUSTER_ACTION on the cluster, except
# as noted. Vote 52, BeginQuorumEpoch 53, EndQuorumEpoch 54, AlterPartition 56, Envelope 58 (also
# only on a privileged listener), FetchSnapshot 59, BrokerRegistration 62, BrokerHeartbeat 63,
# AllocateProducerIds 67, ControllerRegistration 70, AssignReplicasToDirs 73, UpdateRaftVoter 82.
CONTROLLER_ONLY_CLUSTER_ACTION = (52, 53, 54, 56, 58, 59, 62, 63, 67, 70, 73, 82)
