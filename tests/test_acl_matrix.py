"""Every advertised API under the ACL authorizer: without the ACL Kafka's handler asks for, a principal
gets Kafka's authorization error and nothing happens; with it, the same request succeeds.

Each case logs in (SASL/PLAIN) as its own principal, which starts with no ACL at all, sends the
request, checks the error and that no data came back and nothing changed (as `admin`, a super user,
sees it), then has admin grant the ACL (LITERAL or PREFIXED, sometimes through an implied operation)
and sends it again. `test_every_advertised_api_has_a_case` keeps the table complete: an API added to
the broker without a case here fails it. Pattern semantics (prefixed and literal, DENY over ALLOW,
wildcards, super users) have their own tests at the end.
"""
from __future__ import annotations

import asyncio

import pytest
from secure_broker import (
    ADMIN,
    ALL,
    ALLOW,
    ALTER,
    CLUSTER,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    GROUP,
    LITERAL,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    TlsFiles,
    acl,
    connect,
    create_acls,
    create_topics,
    run,
    scram_upsertion,
    start_broker,
)

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kafka_compat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kafka_compat.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from kafka_compat.protocol.messages.alter_configs import AlterConfigsRequest
from kafka_compat.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kafka_compat.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from kafka_compat.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from kafka_compat.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kafka_compat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kafka_compat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kafka_compat.protocol.messages.create_acls import CreateAclsRequest
from kafka_compat.protocol.messages.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from kafka_compat.protocol.messages.create_partitions import CreatePartitionsRequest
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.delete_acls import DeleteAclsRequest
from kafka_compat.protocol.messages.delete_groups import DeleteGroupsRequest
from kafka_compat.protocol.messages.delete_records import DeleteRecordsRequest
from kafka_compat.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from kafka_compat.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from kafka_compat.protocol.messages.delete_topics import DeleteTopicsRequest
from kafka_compat.protocol.messages.describe_acls import DescribeAclsRequest
from kafka_compat.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from kafka_compat.protocol.messages.describe_cluster import DescribeClusterRequest
from kafka_compat.protocol.messages.describe_configs import DescribeConfigsRequest
from kafka_compat.protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest
from kafka_compat.protocol.messages.describe_groups import DescribeGroupsRequest
from kafka_compat.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kafka_compat.protocol.messages.describe_producers import DescribeProducersRequest
from kafka_compat.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from kafka_compat.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from kafka_compat.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kafka_compat.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from kafka_compat.protocol.messages.elect_leaders import ElectLeadersRequest
from kafka_compat.protocol.messages.end_txn import EndTxnRequest
from kafka_compat.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafka_compat.protocol.messages.heartbeat import HeartbeatRequest
from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_compat.protocol.messages.init_producer_id import InitProducerIdRequest
from kafka_compat.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from kafka_compat.protocol.messages.join_group import JoinGroupRequest
from kafka_compat.protocol.messages.leave_group import LeaveGroupRequest
from kafka_compat.protocol.messages.list_config_resources import ListConfigResourcesRequest
from kafka_compat.protocol.messages.list_groups import ListGroupsRequest
from kafka_compat.protocol.messages.list_offsets import ListOffsetsRequest
from kafka_compat.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kafka_compat.protocol.messages.list_transactions import ListTransactionsRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.offset_commit import OffsetCommitRequest
from kafka_compat.protocol.messages.offset_delete import OffsetDeleteRequest
from kafka_compat.protocol.messages.offset_fetch import OffsetFetchRequest
from kafka_compat.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kafka_compat.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from kafka_compat.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from kafka_compat.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kafka_compat.protocol.messages.share_fetch import ShareFetchRequest
from kafka_compat.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kafka_compat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kafka_compat.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from kafka_compat.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest
from kafka_compat.protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateRequest,
)
from kafka_compat.protocol.messages.sync_group import SyncGroupRequest
from kafka_compat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kafka_compat.protocol.messages.update_features import UpdateFeaturesRequest
from kafka_compat.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from kafka_compat.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kafka_compat.protocol.primitives import ZERO_UUID
from kafka_compat.protocol.records import batches, build_batch
from kafka_compat.protocol.sasl import ScramMechanism
from kafka_compat.security.acl import AclOperation, ResourceType
from kafka_compat.server.broker import advertised_api_versions

E = ErrorCode
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 10, 11, 12
NO_ACL_NEEDED = {17, 18, 36, 71, 72}     # SaslHandshake, ApiVersions, SaslAuthenticate; telemetry (as Kafka)
CASES: dict[int, object] = {}


def case(*api_keys: int):
    def mark(fn):
        for key in api_keys:
            CASES[key] = fn
        return fn
    return mark


class Ctx:
    """One case: its own principal (User:<case>), admin's connection, and helpers over both."""

    def __init__(self, broker, name: str):
        self.broker, self.name, self.principal = broker, name, f"User:{name}"
        self.admin = None
        self._user = None

    async def __aenter__(self):
        self.admin = await connect(self.broker, "SASL_PLAINTEXT", *ADMIN)
        return self

    async def __aexit__(self, *exc):
        for c in (self.admin, self._user):
            if c is not None:
                await c.close()

    async def user(self):
        """The case principal's connection (logged in once)."""
        if self._user is None:
            self._user = await connect(self.broker, "SASL_SSL", self.name)
        return self._user

    async def call(self, api_key: int, version: int, body):
        return await (await self.user()).call(api_key, version, body)

    async def grant(self, op: int, resource: str, rtype: int = TOPIC, pattern: int = LITERAL,
                    permission: int = ALLOW) -> None:
        await create_acls(self.broker, acl(self.principal, op, resource, rtype, pattern, permission))

    def topic_name(self, suffix: str = "") -> str:
        return f"{self.name}-topic{suffix}"

    async def topic(self, suffix: str = "", partitions: int = 1, records: int = 0) -> str:
        name = self.topic_name(suffix)
        await create_topics(self.broker, name, partitions=partitions)
        if records:
            response = await self.admin.call(0, 9, produce_body(name, [b"r%d" % i for i in range(records)]))
            assert response.responses[0].partition_responses[0].error_code == 0
        return name

    async def offsets(self, topic: str) -> tuple[int, int]:
        """(log start, log end) of partition 0, as admin sees them."""
        out = []
        for ts in (-2, -1):
            response = await self.admin.call(2, 5, ListOffsetsRequest(replica_id=-1, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts)])]))
            out.append(response.topics[0].partitions[0].offset)
        return tuple(out)

    async def topic_exists(self, name: str) -> bool:
        response = await self.admin.call(3, 12, MetadataRequest(topics=None))
        return name in {t.name for t in response.topics}

    async def committed(self, group: str, topic: str) -> int:
        response = await self.admin.call(9, 8, OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])]))
        return response.groups[0].topics[0].partitions[0].committed_offset

    async def commit_as_admin(self, group: str, topic: str, offset: int) -> None:
        response = await self.admin.call(8, 8, commit_body(group, topic, offset))
        assert response.topics[0].partitions[0].error_code == 0

    async def group_state(self, group: str) -> str:
        response = await self.admin.call(15, 5, DescribeGroupsRequest(groups=[group]))
        return response.groups[0].group_state


def produce_body(topic: str, values=(b"v",)) -> ProduceRequest:
    records = bytes(build_batch([(None, v) for v in values]))
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])


def commit_body(group: str, topic: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])


def topic_metadata(name: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True,
                           include_topic_authorized_operations=True)


def bits(*ops: int) -> int:
    return sum(1 << op for op in ops)


# -- data ---------------------------------------------------------------------------------

@case(0)
async def produce(ctx: Ctx):
    topic = await ctx.topic()
    response = await ctx.call(0, 9, produce_body(topic))
    assert response.responses[0].partition_responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert await ctx.offsets(topic) == (0, 0)                   # nothing written
    await ctx.grant(WRITE, topic)
    response = await ctx.call(0, 9, produce_body(topic))
    assert response.responses[0].partition_responses[0].error_code == 0
    assert await ctx.offsets(topic) == (0, 1)


@case(1)
async def fetch(ctx: Ctx):
    topic = await ctx.topic(records=3)
    body = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    part = (await ctx.call(1, 12, body)).responses[0].partitions[0]
    assert part.error_code == E.TOPIC_AUTHORIZATION_FAILED and not part.records and part.high_watermark == -1
    await ctx.grant(DESCRIBE, topic)                            # describing is not reading
    part = (await ctx.call(1, 12, body)).responses[0].partitions[0]
    assert part.error_code == E.TOPIC_AUTHORIZATION_FAILED and not part.records
    await ctx.grant(READ, topic)
    part = (await ctx.call(1, 12, body)).responses[0].partitions[0]
    assert part.error_code == 0
    assert [r.value for b in batches(bytes(part.records)) for r in b.records()] == [b"r0", b"r1", b"r2"]


@case(2)
async def list_offsets(ctx: Ctx):
    topic = await ctx.topic(records=2)
    body = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
        ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    p = (await ctx.call(2, 5, body)).topics[0].partitions[0]
    assert (p.error_code, p.offset) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
    await ctx.grant(READ, topic)                               # READ implies DESCRIBE
    p = (await ctx.call(2, 5, body)).topics[0].partitions[0]
    assert (p.error_code, p.offset) == (0, 2)


@case(3)
async def metadata(ctx: Ctx):
    topic = await ctx.topic()
    unknown = ctx.topic_name("-auto")
    t = (await ctx.call(3, 12, topic_metadata(topic))).topics[0]
    assert (t.error_code, t.topic_id, t.partitions) == (E.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID, [])
    everything = await ctx.call(3, 12, MetadataRequest(topics=None))
    assert topic not in {t.name for t in everything.topics}          # left out without a word
    # an unknown topic the caller may not describe: refused before its existence is looked at
    t = (await ctx.call(3, 12, topic_metadata(unknown))).topics[0]
    assert t.error_code == E.TOPIC_AUTHORIZATION_FAILED and not await ctx.topic_exists(unknown)
    await ctx.grant(DESCRIBE, f"{ctx.name}-", pattern=PREFIXED)
    t = (await ctx.call(3, 12, topic_metadata(topic))).topics[0]
    assert (t.error_code, t.name, len(t.partitions)) == (0, topic, 1)
    assert t.topic_authorized_operations == bits(DESCRIBE)
    assert topic in {t.name for t in (await ctx.call(3, 12, MetadataRequest(topics=None))).topics}
    # describable but not creatable: auto-creation is refused, nothing is made
    t = (await ctx.call(3, 12, topic_metadata(unknown))).topics[0]
    assert t.error_code == E.TOPIC_AUTHORIZATION_FAILED and not await ctx.topic_exists(unknown)
    await ctx.grant(CREATE, unknown)
    t = (await ctx.call(3, 12, topic_metadata(unknown))).topics[0]
    assert t.error_code == 0 and await ctx.topic_exists(unknown)
    cluster = await ctx.call(3, 10, MetadataRequest(topics=[], include_cluster_authorized_operations=True))
    assert cluster.cluster_authorized_operations == 0               # no DESCRIBE on the cluster (v8-10 ask)


# -- groups and offsets ----------------------------------------------------------------------

@case(8)
async def offset_commit(ctx: Ctx):
    topic, group = await ctx.topic(records=5), f"{ctx.name}-group"
    response = await ctx.call(8, 8, commit_body(group, topic, 3))
    assert response.topics[0].partitions[0].error_code == E.GROUP_AUTHORIZATION_FAILED
    await ctx.grant(READ, group, GROUP)
    response = await ctx.call(8, 8, commit_body(group, topic, 3))
    assert response.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert await ctx.committed(group, topic) == -1
    await ctx.grant(READ, topic)
    response = await ctx.call(8, 8, commit_body(group, topic, 3))
    assert response.topics[0].partitions[0].error_code == 0
    assert await ctx.committed(group, topic) == 3


@case(9)
async def offset_fetch(ctx: Ctx):
    topic, group = await ctx.topic(records=5), f"{ctx.name}-group"
    await ctx.commit_as_admin(group, topic, 4)

    def body(topics):
        return OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=topics)])
    named = [OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])]
    g = (await ctx.call(9, 8, body(named))).groups[0]
    assert (g.error_code, g.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE, group, GROUP)
    p = (await ctx.call(9, 8, body(named))).groups[0].topics[0].partitions[0]
    assert (p.error_code, p.committed_offset) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
    assert (await ctx.call(9, 8, body(None))).groups[0].topics == []      # all of the group's: left out
    await ctx.grant(DESCRIBE, topic)
    p = (await ctx.call(9, 8, body(named))).groups[0].topics[0].partitions[0]
    assert (p.error_code, p.committed_offset) == (0, 4)
    old = await ctx.call(9, 1, OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    assert old.topics[0].partitions[0].committed_offset == 4


@case(10)
async def find_coordinator(ctx: Ctx):
    group, txn = f"{ctx.name}-group", f"{ctx.name}-txn"
    r = await ctx.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
    assert (r.coordinators[0].error_code, r.coordinators[0].node_id) == (E.GROUP_AUTHORIZATION_FAILED, -1)
    r = await ctx.call(10, 2, FindCoordinatorRequest(key_type=1, key=txn))
    assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await ctx.grant(DESCRIBE, group, GROUP)
    await ctx.grant(DESCRIBE, txn, TRANSACTIONAL_ID)
    r = await ctx.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
    assert (r.coordinators[0].error_code, r.coordinators[0].node_id) == (0, 0)
    r = await ctx.call(10, 2, FindCoordinatorRequest(key_type=1, key=txn))
    assert (r.error_code, r.node_id) == (0, 0)


@case(11, 12, 13, 14)
async def group_membership(ctx: Ctx):
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup all need READ on the group."""
    group = f"{ctx.name}-group"
    join = JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                name="range", metadata=b"")])
    r = await ctx.call(11, 3, join)
    assert (r.error_code, r.generation_id, r.members) == (E.GROUP_AUTHORIZATION_FAILED, -1, [])
    sync = SyncGroupRequest(group_id=group, generation_id=1, member_id="m", assignments=[])
    assert (await ctx.call(14, 3, sync)).error_code == E.GROUP_AUTHORIZATION_FAILED
    beat = HeartbeatRequest(group_id=group, generation_id=1, member_id="m")
    assert (await ctx.call(12, 3, beat)).error_code == E.GROUP_AUTHORIZATION_FAILED
    leave = LeaveGroupRequest(group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id="m")])
    assert (await ctx.call(13, 3, leave)).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert await ctx.group_state(group) == "Dead"                   # no group was made
    await ctx.grant(READ, f"{ctx.name}-", GROUP, PREFIXED)
    joined = await ctx.call(11, 3, join)
    assert joined.error_code == 0 and joined.leader == joined.member_id
    member = joined.member_id
    synced = await ctx.call(14, 3, SyncGroupRequest(group_id=group, generation_id=joined.generation_id,
                                                    member_id=member, assignments=[
                                                        SyncGroupRequest.SyncGroupRequestAssignment(
                                                            member_id=member, assignment=b"a")]))
    assert (synced.error_code, synced.assignment) == (0, b"a")
    beat = HeartbeatRequest(group_id=group, generation_id=joined.generation_id, member_id=member)
    assert (await ctx.call(12, 3, beat)).error_code == 0
    left = await ctx.call(13, 3, LeaveGroupRequest(group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=member)]))
    assert left.error_code == 0 and left.members[0].error_code == 0


@case(68)
async def consumer_group_heartbeat(ctx: Ctx):
    """READ on the group, then DESCRIBE on every topic the member subscribes to by name."""
    group, topic = f"{ctx.name}-group", await ctx.topic()
    join = ConsumerGroupHeartbeatRequest(group_id=group, member_id="m1", member_epoch=0, rebalance_timeout_ms=10000,
                                         subscribed_topic_names=[topic], topic_partitions=[])
    r = await ctx.call(68, 0, join)
    assert (r.error_code, r.assignment) == (E.GROUP_AUTHORIZATION_FAILED, None)
    await ctx.grant(READ, group, GROUP)
    r = await ctx.call(68, 0, join)
    assert (r.error_code, r.assignment) == (E.TOPIC_AUTHORIZATION_FAILED, None)
    assert await ctx.group_state(group) == "Dead"                   # no group was made
    await ctx.grant(DESCRIBE, topic, TOPIC)
    r = await ctx.call(68, 0, join)
    assert (r.error_code, r.member_epoch) == (0, 1)
    assert [list(tp.partitions) for tp in r.assignment.topic_partitions] == [[0]]


@case(69)
async def consumer_group_describe(ctx: Ctx):
    group, topic = f"{ctx.name}-group", await ctx.topic()
    await ctx.grant(READ, group, GROUP)
    await ctx.grant(DESCRIBE, topic, TOPIC)
    joined = await ctx.call(68, 0, ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="m1", member_epoch=0, rebalance_timeout_ms=10000, subscribed_topic_names=[topic],
        topic_partitions=[]))
    assert joined.error_code == 0
    other = f"{ctx.name}-other"
    body = ConsumerGroupDescribeRequest(group_ids=[group, other], include_authorized_operations=True)
    mine, theirs = (await ctx.call(69, 0, body)).groups
    assert (mine.error_code, mine.members) == (0, [mine.members[0]]) and mine.members[0].member_id == "m1"
    assert mine.authorized_operations == bits(READ, DESCRIBE)       # READ implies DESCRIBE
    assert (theirs.error_code, theirs.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE, other, GROUP)
    _, theirs = (await ctx.call(69, 0, body)).groups
    assert theirs.error_code == E.GROUP_ID_NOT_FOUND


@case(76)
async def share_group_heartbeat(ctx: Ctx):
    """READ on the group, then DESCRIBE on every subscribed topic (as ConsumerGroupHeartbeat)."""
    group, topic = f"{ctx.name}-group", await ctx.topic()
    join = ShareGroupHeartbeatRequest(group_id=group, member_id="m1", member_epoch=0, subscribed_topic_names=[topic])
    r = await ctx.call(76, 1, join)
    assert (r.error_code, r.assignment) == (E.GROUP_AUTHORIZATION_FAILED, None)
    await ctx.grant(READ, group, GROUP)
    r = await ctx.call(76, 1, join)
    assert (r.error_code, r.assignment) == (E.TOPIC_AUTHORIZATION_FAILED, None)
    assert await ctx.group_state(group) == "Dead"                   # no group was made
    await ctx.grant(DESCRIBE, topic, TOPIC)
    r = await ctx.call(76, 1, join)
    assert (r.error_code, r.member_epoch) == (0, 1)
    assert [list(tp.partitions) for tp in r.assignment.topic_partitions] == [[0]]


async def _share_member_joined(ctx: Ctx) -> tuple[str, str, str]:
    """(group, topic, another group): member m1 has joined the share group, READ and DESCRIBE granted."""
    group, topic = f"{ctx.name}-group", await ctx.topic()
    await ctx.grant(READ, group, GROUP)
    await ctx.grant(DESCRIBE, topic, TOPIC)
    joined = await ctx.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id="m1", member_epoch=0,
                                                              subscribed_topic_names=[topic]))
    assert joined.error_code == 0
    return group, topic, f"{ctx.name}-other"


@case(77)
async def share_group_describe(ctx: Ctx):
    group, topic, other = await _share_member_joined(ctx)
    body = ShareGroupDescribeRequest(group_ids=[group, other], include_authorized_operations=True)
    mine, theirs = (await ctx.call(77, 1, body)).groups
    assert (mine.error_code, mine.group_state, [m.member_id for m in mine.members]) == (0, "Stable", ["m1"])
    assert mine.authorized_operations == bits(READ, DESCRIBE)
    assert (theirs.error_code, theirs.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE, other, GROUP)
    _, theirs = (await ctx.call(77, 1, body)).groups
    assert theirs.error_code == E.GROUP_ID_NOT_FOUND


@case(90)
async def describe_share_group_offsets(ctx: Ctx):
    """DESCRIBE on the group, then DESCRIBE on each topic named."""
    group, topic, other = await _share_member_joined(ctx)
    R = DescribeShareGroupOffsetsRequest
    body = R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=g, topics=[
        R.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])]) for g in (group, other)])
    mine, theirs = (await ctx.call(90, 1, body)).groups
    assert mine.error_code == 0 and theirs.error_code == E.GROUP_AUTHORIZATION_FAILED
    part = mine.topics[0].partitions[0]
    assert (part.error_code, part.start_offset) == (0, -1), "no share state yet"


@case(91)
async def alter_share_group_offsets(ctx: Ctx):
    """READ on the group, then READ on each topic; the group is made, empty, if it does not exist."""
    group, topic = f"{ctx.name}-group", await ctx.topic()
    R = AlterShareGroupOffsetsRequest
    body = R(group_id=group, topics=[R.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
        R.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])
    assert (await ctx.call(91, 0, body)).error_code == E.GROUP_AUTHORIZATION_FAILED
    await ctx.grant(READ, group, GROUP)
    r = await ctx.call(91, 0, body)
    assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, E.TOPIC_AUTHORIZATION_FAILED)
    await ctx.grant(READ, topic)
    r = await ctx.call(91, 0, body)
    assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, 0)


@case(92)
async def delete_share_group_offsets(ctx: Ctx):
    """DELETE on the group, then READ on each topic."""
    group, topic = f"{ctx.name}-group", await ctx.topic()
    await ctx.grant(READ, group, GROUP)
    await ctx.grant(READ, topic)
    A = AlterShareGroupOffsetsRequest
    made = await ctx.call(91, 0, A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]))
    assert made.error_code == 0
    R = DeleteShareGroupOffsetsRequest
    body = R(group_id=group, topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)])
    assert (await ctx.call(92, 0, body)).error_code == E.GROUP_AUTHORIZATION_FAILED
    await ctx.grant(DELETE, group, GROUP)
    r = await ctx.call(92, 0, body)
    assert (r.error_code, r.responses[0].error_code) == (0, 0)


async def _topic_id(ctx: Ctx, topic: str) -> bytes:
    return (await ctx.admin.call(3, 12, topic_metadata(topic))).topics[0].topic_id


def _share_fetch(group: str, topic_id: bytes, epoch: int = 0) -> ShareFetchRequest:
    return ShareFetchRequest(group_id=group, member_id="m1", share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
                             max_bytes=1 << 20, max_records=10, batch_size=10, topics=[ShareFetchRequest.FetchTopic(
                                 topic_id=topic_id, partitions=[ShareFetchRequest.FetchPartition(partition_index=0)])],
                             forgotten_topics_data=[])


@case(78)
async def share_fetch(ctx: Ctx):
    """READ on the group (else the whole request fails), then READ on each topic."""
    group, topic = f"{ctx.name}-group", await ctx.topic(records=2)
    topic_id = await _topic_id(ctx, topic)
    r = await ctx.call(78, 1, _share_fetch(group, topic_id))
    assert (r.error_code, r.responses) == (E.GROUP_AUTHORIZATION_FAILED, [])
    await ctx.grant(READ, group, GROUP)
    r = await ctx.call(78, 1, _share_fetch(group, topic_id))
    part = r.responses[0].partitions[0]
    assert (r.error_code, part.error_code, part.acquired_records) == (0, E.TOPIC_AUTHORIZATION_FAILED, [])
    await ctx.grant(READ, topic)
    r = await ctx.call(78, 1, _share_fetch(group, topic_id))
    assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, 0)


@case(79)
async def share_acknowledge(ctx: Ctx):
    group, topic = f"{ctx.name}-group", await ctx.topic()
    topic_id = await _topic_id(ctx, topic)
    body = ShareAcknowledgeRequest(group_id=group, member_id="m1", share_session_epoch=1, topics=[
        ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id, partitions=[
            ShareAcknowledgeRequest.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[1])])])])
    r = await ctx.call(79, 1, body)
    assert (r.error_code, r.responses) == (E.GROUP_AUTHORIZATION_FAILED, [])
    await ctx.grant(READ, group, GROUP)
    assert (await ctx.call(78, 1, _share_fetch(group, topic_id))).error_code == 0     # opens the share session
    r = await ctx.call(79, 1, body)
    assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, E.TOPIC_AUTHORIZATION_FAILED)
    await ctx.grant(READ, topic)
    body.share_session_epoch = 2
    r = await ctx.call(79, 1, body)         # allowed now; nothing was ever fetched, so no share partition
    assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, E.UNKNOWN_TOPIC_OR_PARTITION)


@case(88)
async def streams_group_heartbeat(ctx: Ctx):
    """READ on the group, then DESCRIBE on every source topic of the topology a joining member declares."""
    group, topic = f"{ctx.name}-group", await ctx.topic()
    H = StreamsGroupHeartbeatRequest
    join = H(group_id=group, member_id="m1", member_epoch=0, rebalance_timeout_ms=10000, process_id="p1",
             active_tasks=[], standby_tasks=[], warmup_tasks=[], topology=H.Topology(epoch=1, subtopologies=[
                 H.Subtopology(subtopology_id="0", source_topics=[topic], source_topic_regex=[],
                               repartition_sink_topics=[], state_changelog_topics=[], repartition_source_topics=[],
                               copartition_groups=[])]))
    r = await ctx.call(88, 0, join)
    assert (r.error_code, r.active_tasks) == (E.GROUP_AUTHORIZATION_FAILED, None)
    await ctx.grant(READ, group, GROUP)
    r = await ctx.call(88, 0, join)
    assert (r.error_code, r.active_tasks) == (E.TOPIC_AUTHORIZATION_FAILED, None)
    await ctx.grant(DESCRIBE, topic, TOPIC)
    r = await ctx.call(88, 0, join)
    assert (r.error_code, r.member_epoch) == (0, 1)


@case(89)
async def streams_group_describe(ctx: Ctx):
    group, other = f"{ctx.name}-group", f"{ctx.name}-other"
    body = StreamsGroupDescribeRequest(group_ids=[group, other], include_authorized_operations=True)
    await ctx.grant(DESCRIBE, group, GROUP)
    mine, theirs = (await ctx.call(89, 0, body)).groups
    assert mine.error_code == E.GROUP_ID_NOT_FOUND                  # allowed to look, and there is nothing
    assert theirs.error_code == E.GROUP_AUTHORIZATION_FAILED


@case(93)
async def streams_group_topology_description_update(ctx: Ctx):
    """READ on the group; past it the broker says it has no topology description plugin, as Kafka without one."""
    body = StreamsGroupTopologyDescriptionUpdateRequest(group_id=f"{ctx.name}-group", member_id="m1", topology_epoch=1)
    assert (await ctx.call(93, 0, body)).error_code == E.GROUP_AUTHORIZATION_FAILED
    await ctx.grant(READ, f"{ctx.name}-group", GROUP)
    assert (await ctx.call(93, 0, body)).error_code == E.UNSUPPORTED_VERSION


@case(15)
async def describe_groups(ctx: Ctx):
    group, topic = f"{ctx.name}-group", await ctx.topic()
    await ctx.commit_as_admin(group, topic, 0)
    body = DescribeGroupsRequest(groups=[group], include_authorized_operations=True)
    g = (await ctx.call(15, 5, body)).groups[0]
    assert (g.error_code, g.group_state, g.members) == (E.GROUP_AUTHORIZATION_FAILED, "", [])
    await ctx.grant(DELETE, group, GROUP)                           # DELETE implies DESCRIBE
    g = (await ctx.call(15, 5, body)).groups[0]
    assert (g.error_code, g.group_state) == (0, "Empty")
    assert g.authorized_operations == bits(DELETE, DESCRIBE)


@case(16)
async def list_groups(ctx: Ctx):
    mine, other = f"{ctx.name}-group", f"{ctx.name}-other"
    topic = await ctx.topic()
    for g in (mine, other):
        await ctx.commit_as_admin(g, topic, 0)

    async def listed():
        response = await ctx.call(16, 4, ListGroupsRequest(states_filter=[]))
        assert response.error_code == 0
        return {g.group_id for g in response.groups} & {mine, other}
    assert await listed() == set()
    await ctx.grant(DESCRIBE, mine, GROUP)
    assert await listed() == {mine}
    await ctx.grant(DESCRIBE, "kafka-cluster", CLUSTER)             # DESCRIBE on the cluster: every group
    assert await listed() == {mine, other}


@case(42)
async def delete_groups(ctx: Ctx):
    group, topic = f"{ctx.name}-group", await ctx.topic()
    await ctx.commit_as_admin(group, topic, 0)
    r = await ctx.call(42, 2, DeleteGroupsRequest(groups_names=[group]))
    assert r.results[0].error_code == E.GROUP_AUTHORIZATION_FAILED
    assert await ctx.group_state(group) == "Empty"
    await ctx.grant(DESCRIBE, group, GROUP)
    assert (await ctx.call(42, 2, DeleteGroupsRequest(groups_names=[group]))).results[0].error_code == \
        E.GROUP_AUTHORIZATION_FAILED
    await ctx.grant(DELETE, group, GROUP)
    assert (await ctx.call(42, 2, DeleteGroupsRequest(groups_names=[group]))).results[0].error_code == 0
    assert await ctx.group_state(group) == "Dead"


@case(47)
async def offset_delete(ctx: Ctx):
    group, topic = f"{ctx.name}-group", await ctx.topic()
    await ctx.commit_as_admin(group, topic, 0)
    body = OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=topic, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
    assert (await ctx.call(47, 0, body)).error_code == E.GROUP_AUTHORIZATION_FAILED
    await ctx.grant(DELETE, group, GROUP)
    r = await ctx.call(47, 0, body)
    assert (r.error_code, r.topics[0].partitions[0].error_code) == (0, E.TOPIC_AUTHORIZATION_FAILED)
    assert await ctx.committed(group, topic) == 0
    await ctx.grant(READ, topic)
    r = await ctx.call(47, 0, body)
    assert (r.error_code, r.topics[0].partitions[0].error_code) == (0, 0)
    assert await ctx.committed(group, topic) == -1


# -- topics and records ---------------------------------------------------------------------

@case(19)
async def create_topics_case(ctx: Ctx):
    def body(name):
        return CreateTopicsRequest(timeout_ms=5000, topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=2, replication_factor=1)])
    first, second = ctx.topic_name("-a"), ctx.topic_name("-b")
    t = (await ctx.call(19, 7, body(first))).topics[0]
    assert t.error_code == E.TOPIC_AUTHORIZATION_FAILED and not await ctx.topic_exists(first)
    await ctx.grant(CREATE, f"{ctx.name}-", pattern=PREFIXED)
    t = (await ctx.call(19, 7, body(first))).topics[0]
    assert (t.error_code, t.topic_config_error_code, t.configs) == (0, E.TOPIC_AUTHORIZATION_FAILED, [])
    assert await ctx.topic_exists(first)
    await ctx.grant(ALTER_CONFIGS, f"{ctx.name}-", pattern=PREFIXED)   # implies DESCRIBE_CONFIGS
    t = (await ctx.call(19, 7, body(second))).topics[0]
    assert (t.error_code, t.topic_config_error_code, t.num_partitions) == (0, 0, 2) and t.configs


@case(20)
async def delete_topics(ctx: Ctx):
    first, second = await ctx.topic("-a"), await ctx.topic("-b")
    r = await ctx.call(20, 4, DeleteTopicsRequest(topic_names=[first]))
    assert r.responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED and await ctx.topic_exists(first)
    metadata = await ctx.admin.call(3, 12, topic_metadata(second))
    by_id = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=None,
                                                                             topic_id=metadata.topics[0].topic_id)])
    r = await ctx.call(20, 6, by_id)
    assert (r.responses[0].error_code, r.responses[0].name) == (E.TOPIC_AUTHORIZATION_FAILED, None)
    await ctx.grant(DELETE, first)
    assert (await ctx.call(20, 4, DeleteTopicsRequest(topic_names=[first]))).responses[0].error_code == 0
    assert not await ctx.topic_exists(first)
    await ctx.grant(DELETE, second)                                # DELETE implies the DESCRIBE an id needs
    assert (await ctx.call(20, 6, by_id)).responses[0].error_code == 0
    assert not await ctx.topic_exists(second)


@case(21)
async def delete_records(ctx: Ctx):
    topic = await ctx.topic(records=4)
    body = DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[
        DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=2)])])
    p = (await ctx.call(21, 2, body)).topics[0].partitions[0]
    assert (p.error_code, p.low_watermark) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
    assert await ctx.offsets(topic) == (0, 4)
    await ctx.grant(DELETE, topic)
    p = (await ctx.call(21, 2, body)).topics[0].partitions[0]
    assert (p.error_code, p.low_watermark) == (0, 2)
    assert await ctx.offsets(topic) == (2, 4)


@case(23)
async def offset_for_leader_epoch(ctx: Ctx):
    topic = await ctx.topic(records=1)
    body = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic=topic, partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=-1, leader_epoch=0)])])
    p = (await ctx.call(23, 4, body)).topics[0].partitions[0]
    assert (p.error_code, p.end_offset) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
    await ctx.grant(DESCRIBE, topic)
    p = (await ctx.call(23, 4, body)).topics[0].partitions[0]
    assert (p.error_code, p.end_offset) == (0, 1)


@case(37)
async def create_partitions(ctx: Ctx):
    topic = await ctx.topic()
    body = CreatePartitionsRequest(timeout_ms=5000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=3, assignments=None)])
    assert (await ctx.call(37, 3, body)).results[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    metadata = await ctx.admin.call(3, 12, topic_metadata(topic))
    assert len(metadata.topics[0].partitions) == 1
    await ctx.grant(ALTER, topic)
    assert (await ctx.call(37, 3, body)).results[0].error_code == 0
    metadata = await ctx.admin.call(3, 12, topic_metadata(topic))
    assert len(metadata.topics[0].partitions) == 3


@case(61)
async def describe_producers(ctx: Ctx):
    topic = await ctx.topic(records=1)
    body = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])])
    assert (await ctx.call(61, 0, body)).topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    await ctx.grant(READ, topic)
    assert (await ctx.call(61, 0, body)).topics[0].partitions[0].error_code == 0


@case(75)
async def describe_topic_partitions(ctx: Ctx):
    topic = await ctx.topic()
    named = DescribeTopicPartitionsRequest(topics=[DescribeTopicPartitionsRequest.TopicRequest(name=topic)],
                                           response_partition_limit=100)
    t = (await ctx.call(75, 0, named)).topics[0]
    assert (t.error_code, t.topic_id, t.partitions) == (E.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID, [])
    everything = DescribeTopicPartitionsRequest(topics=[], response_partition_limit=2000)
    assert topic not in {t.name for t in (await ctx.call(75, 0, everything)).topics}
    await ctx.grant(ALL, topic)
    t = (await ctx.call(75, 0, named)).topics[0]
    assert (t.error_code, len(t.partitions)) == (0, 1)
    assert t.topic_authorized_operations == bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
                                                 ALTER_CONFIGS)
    assert topic in {t.name for t in (await ctx.call(75, 0, everything)).topics}


# -- producers ---------------------------------------------------------------------------------

@case(22)
async def init_producer_id(ctx: Ctx):
    idempotent = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    r = await ctx.call(22, 4, idempotent)
    assert (r.error_code, r.producer_id) == (E.CLUSTER_AUTHORIZATION_FAILED, -1)
    transactional = InitProducerIdRequest(transactional_id=f"{ctx.name}-txn", transaction_timeout_ms=60000)
    assert (await ctx.call(22, 4, transactional)).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await ctx.grant(WRITE, f"{ctx.name}-", pattern=PREFIXED)         # KIP-679: WRITE on some topic will do
    r = await ctx.call(22, 4, idempotent)
    assert r.error_code == 0 and r.producer_id >= 0
    await ctx.grant(WRITE, f"{ctx.name}-txn", TRANSACTIONAL_ID)
    r = await until_settled(lambda: ctx.call(22, 4, transactional))
    assert r.error_code == 0 and r.producer_epoch == 0


# -- transactions ------------------------------------------------------------------------------

async def until_settled(call):
    """A transactional call again while the coordinator is loading or finishing the last transaction."""
    for _ in range(400):
        r = await call()
        if getattr(r, "error_code", 0) not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS):
            return r
        await asyncio.sleep(0.05)
    raise AssertionError("the transaction coordinator stayed busy")


async def admin_txn(ctx: Ctx, txn_id: str, topic: str | None = None) -> tuple[int, int]:
    """As admin: the id's producer id and epoch, with ``topic``'s partition 0 in an ongoing transaction."""
    r = await until_settled(lambda: ctx.admin.call(22, 4, InitProducerIdRequest(transactional_id=txn_id,
                                                                                transaction_timeout_ms=60000)))
    assert r.error_code == 0
    if topic is not None:
        added = await ctx.admin.call(24, 3, add_partitions_body(txn_id, r.producer_id, r.producer_epoch, topic))
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    return r.producer_id, r.producer_epoch


def add_partitions_body(txn_id: str, pid: int, epoch: int, topic: str) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])])


async def txn_state(ctx: Ctx, txn_id: str):
    r = await ctx.admin.call(65, 0, DescribeTransactionsRequest(transactional_ids=[txn_id]))
    return r.transaction_states[0]


@case(24)
async def add_partitions_to_txn(ctx: Ctx):
    topic, txn = await ctx.topic(), f"{ctx.name}-txn"
    pid, epoch = await admin_txn(ctx, txn)

    async def add():
        r = await ctx.call(24, 3, add_partitions_body(txn, pid, epoch, topic))
        return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    assert await add() == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await ctx.grant(WRITE, txn, TRANSACTIONAL_ID)
    assert await add() == E.TOPIC_AUTHORIZATION_FAILED
    assert (await txn_state(ctx, txn)).transaction_state == "Empty"        # nothing was added
    await ctx.grant(WRITE, topic)
    assert await add() == 0
    assert [(t.topic, t.partitions) for t in (await txn_state(ctx, txn)).topics] == [(topic, [0])]
    verify = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=txn, producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])])])
    r = await ctx.call(24, 4, verify)
    assert (r.error_code, r.results_by_transaction) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    await ctx.grant(9, "kafka-cluster", CLUSTER)                         # CLUSTER_ACTION: brokers only
    r = await ctx.call(24, 4, verify)
    assert r.error_code == 0
    assert r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == 0


@case(25)
async def add_offsets_to_txn(ctx: Ctx):
    txn, group = f"{ctx.name}-txn", f"{ctx.name}-group"
    pid, epoch = await admin_txn(ctx, txn)
    body = AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group)
    assert (await ctx.call(25, 2, body)).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await ctx.grant(WRITE, txn, TRANSACTIONAL_ID)
    assert (await ctx.call(25, 2, body)).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert (await txn_state(ctx, txn)).transaction_state == "Empty"
    await ctx.grant(READ, group, GROUP)
    assert (await ctx.call(25, 2, body)).error_code == 0
    assert [t.topic for t in (await txn_state(ctx, txn)).topics] == ["__consumer_offsets"]


@case(26)
async def end_txn(ctx: Ctx):
    topic, txn = await ctx.topic(), f"{ctx.name}-txn"
    pid, epoch = await admin_txn(ctx, txn, topic)
    body = EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True)
    assert (await ctx.call(26, 3, body)).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (await txn_state(ctx, txn)).transaction_state == "Ongoing"
    await ctx.grant(WRITE, txn, TRANSACTIONAL_ID)
    assert (await ctx.call(26, 3, body)).error_code == 0
    assert (await txn_state(ctx, txn)).transaction_state in ("PrepareCommit", "CompleteCommit")


@case(83, 84, 85, 86, 87)
async def share_state_rpcs(ctx: Ctx):
    """CLUSTER_ACTION on the cluster (brokers' persisters only), for each of the five share-state RPCs."""
    topic = await ctx.topic()
    tid = (await ctx.admin.call(3, 12, topic_metadata(topic))).topics[0].topic_id
    group = f"{ctx.name}-group"

    def body(cls, topics_cls, **fields):
        return cls(group_id=group, topics=[getattr(cls, topics_cls)(topic_id=tid, partitions=[
            cls.PartitionData(partition=0, **fields)])])
    calls = [(83, 0, body(InitializeShareGroupStateRequest, "InitializeStateData", state_epoch=0, start_offset=0)),
             (84, 0, body(ReadShareGroupStateRequest, "ReadStateData", leader_epoch=0)),
             (85, 1, body(WriteShareGroupStateRequest, "WriteStateData", state_epoch=0, leader_epoch=0,
                          start_offset=1, state_batches=[])),
             (87, 1, body(ReadShareGroupStateSummaryRequest, "ReadStateSummaryData", leader_epoch=0)),
             (86, 0, body(DeleteShareGroupStateRequest, "DeleteStateData"))]
    for key, version, request in calls:
        r = await ctx.call(key, version, request)
        assert r.results[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED, key
    summary = (await ctx.admin.call(87, 1, calls[3][2])).results[0].partitions[0]
    assert (summary.error_code, summary.start_offset) == (0, -1), "nothing was initialized"
    await ctx.grant(9, "kafka-cluster", CLUSTER)                         # CLUSTER_ACTION: brokers only
    for key, version, request in calls:
        r = await ctx.call(key, version, request)
        assert r.results[0].partitions[0].error_code == 0, (key, r)


@case(27)
async def write_txn_markers(ctx: Ctx):
    topic = await ctx.topic()
    body = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=123456, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])])
    r = await ctx.call(27, 1, body)
    assert r.markers[0].topics[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert await ctx.offsets(topic) == (0, 0)                         # no marker written
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)
    r = await ctx.call(27, 1, body)
    assert r.markers[0].topics[0].partitions[0].error_code == 0
    assert await ctx.offsets(topic) == (0, 1)


@case(28)
async def txn_offset_commit(ctx: Ctx):
    topic, txn, group = await ctx.topic(records=3), f"{ctx.name}-txn", f"{ctx.name}-group"
    pid, epoch = await admin_txn(ctx, txn)
    added = await ctx.admin.call(25, 2, AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid,
                                                               producer_epoch=epoch, group_id=group))
    assert added.error_code == 0
    body = TxnOffsetCommitRequest(transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch,
                                  generation_id_or_member_epoch=-1, member_id="", topics=[
                                      TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                                          TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                              partition_index=0, committed_offset=2)])])

    async def commit():
        return (await ctx.call(28, 3, body)).topics[0].partitions[0].error_code
    assert await commit() == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await ctx.grant(WRITE, txn, TRANSACTIONAL_ID)
    assert await commit() == E.GROUP_AUTHORIZATION_FAILED
    await ctx.grant(READ, group, GROUP)
    assert await commit() == E.TOPIC_AUTHORIZATION_FAILED
    await ctx.grant(READ, topic)
    assert await commit() == 0
    end = EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True)
    assert (await ctx.admin.call(26, 3, end)).error_code == 0
    for _ in range(400):
        if await ctx.committed(group, topic) == 2:
            break
        await asyncio.sleep(0.05)
    assert await ctx.committed(group, topic) == 2


@case(65)
async def describe_transactions(ctx: Ctx):
    topic, txn = await ctx.topic(), f"{ctx.name}-txn"
    await admin_txn(ctx, txn, topic)
    body = DescribeTransactionsRequest(transactional_ids=[txn])
    d = (await ctx.call(65, 0, body)).transaction_states[0]
    assert (d.error_code, d.transaction_state) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "")
    await ctx.grant(DESCRIBE, txn, TRANSACTIONAL_ID)
    d = (await ctx.call(65, 0, body)).transaction_states[0]
    assert (d.error_code, d.transaction_state, d.topics) == (0, "Ongoing", [])     # the topic is not describable
    await ctx.grant(DESCRIBE, topic)
    d = (await ctx.call(65, 0, body)).transaction_states[0]
    assert [(t.topic, t.partitions) for t in d.topics] == [(topic, [0])]


@case(66)
async def list_transactions(ctx: Ctx):
    txn = f"{ctx.name}-txn"
    await admin_txn(ctx, txn)
    body = ListTransactionsRequest(state_filters=[], producer_id_filters=[])

    async def listed():
        return {s.transactional_id for s in (await ctx.call(66, 0, body)).transaction_states}
    assert txn not in await listed()
    await ctx.grant(DESCRIBE, txn, TRANSACTIONAL_ID)
    assert txn in await listed()


# -- configs -----------------------------------------------------------------------------------

@case(32)
async def describe_configs(ctx: Ctx):
    topic = await ctx.topic()
    body = DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None),
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None)])
    results = (await ctx.call(32, 4, body)).results
    assert [(r.error_code, r.configs) for r in results] == [(E.TOPIC_AUTHORIZATION_FAILED, []),
                                                            (E.CLUSTER_AUTHORIZATION_FAILED, [])]
    await ctx.grant(ALTER_CONFIGS, topic)                           # implies DESCRIBE_CONFIGS
    await ctx.grant(DESCRIBE_CONFIGS, "kafka-cluster", CLUSTER)
    results = (await ctx.call(32, 4, body)).results
    assert [r.error_code for r in results] == [0, 0] and all(r.configs for r in results)


async def retention(ctx: Ctx, topic: str) -> str | None:
    response = await ctx.admin.call(32, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=topic,
                                                       configuration_keys=["retention.ms"])]))
    return response.results[0].configs[0].value


@case(33)
async def alter_configs(ctx: Ctx):
    topic = await ctx.topic()
    before = await retention(ctx, topic)
    body = AlterConfigsRequest(validate_only=False, resources=[AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=topic, configs=[AlterConfigsRequest.AlterableConfig(
            name="retention.ms", value="1234567")])])
    assert (await ctx.call(33, 2, body)).responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert await retention(ctx, topic) == before
    await ctx.grant(DESCRIBE_CONFIGS, topic)
    assert (await ctx.call(33, 2, body)).responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    await ctx.grant(ALTER_CONFIGS, topic)
    assert (await ctx.call(33, 2, body)).responses[0].error_code == 0
    assert await retention(ctx, topic) == "1234567"


@case(44)
async def incremental_alter_configs(ctx: Ctx):
    topic = await ctx.topic()
    body = IncrementalAlterConfigsRequest(validate_only=False, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name=topic, configs=[
            IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0, value="7654321")]),
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=8, resource_name="0", configs=[
            IncrementalAlterConfigsRequest.AlterableConfig(name="kafka_compat", config_operation=0, value="INFO")])])
    codes = [r.error_code for r in (await ctx.call(44, 1, body)).responses]
    assert codes == [E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]
    assert await retention(ctx, topic) != "7654321"
    await ctx.grant(ALTER_CONFIGS, f"{ctx.name}-", pattern=PREFIXED)
    await ctx.grant(ALTER_CONFIGS, "kafka-cluster", CLUSTER)
    assert [r.error_code for r in (await ctx.call(44, 1, body)).responses] == [0, 0]
    assert await retention(ctx, topic) == "7654321"


@case(74)
async def list_config_resources(ctx: Ctx):
    body = ListConfigResourcesRequest(resource_types=[4])
    r = await ctx.call(74, 1, body)
    assert (r.error_code, r.config_resources) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE_CONFIGS, "kafka-cluster", CLUSTER)
    r = await ctx.call(74, 1, body)
    assert r.error_code == 0 and [(c.resource_type, c.resource_name) for c in r.config_resources] == [(4, "0")]


@case(45)
async def alter_partition_reassignments(ctx: Ctx):
    topic = await ctx.topic()
    A = AlterPartitionReassignmentsRequest
    body = A(timeout_ms=5000, topics=[A.ReassignableTopic(name=topic, partitions=[
        A.ReassignablePartition(partition_index=0, replicas=[0])])])
    r = await ctx.call(45, 1, body)
    assert (r.error_code, r.responses) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)
    r = await ctx.call(45, 1, body)
    assert r.error_code == 0 and [p.error_code for t in r.responses for p in t.partitions] == [0]


@case(46)
async def list_partition_reassignments(ctx: Ctx):
    body = ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None)
    r = await ctx.call(46, 0, body)
    assert (r.error_code, r.topics) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE, "kafka-cluster", CLUSTER)
    assert (await ctx.call(46, 0, body)).error_code == 0


# -- delegation tokens ---------------------------------------------------------------------------

async def admin_token(ctx: Ctx, renewers=()) -> CreateDelegationTokenResponse:
    C = CreateDelegationTokenRequest
    r = await ctx.admin.call(38, 3, C(owner_principal_type=None, owner_principal_name=None, max_lifetime_ms=-1,
                                      renewers=[C.CreatableRenewers(principal_type="User", principal_name=n)
                                                for n in renewers]))
    assert r.error_code == 0
    return r


@case(38)
async def create_delegation_token(ctx: Ctx):
    C = CreateDelegationTokenRequest
    own = await ctx.call(38, 3, C(owner_principal_type=None, owner_principal_name=None, renewers=[],
                                  max_lifetime_ms=-1))
    assert own.error_code == 0 and own.principal_name == ctx.name       # one's own token needs no ACL
    other = C(owner_principal_type="User", owner_principal_name="someone", renewers=[], max_lifetime_ms=-1)
    r = await ctx.call(38, 3, other)
    assert (r.error_code, r.token_id) == (E.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "")
    await ctx.grant(AclOperation.CREATE_TOKENS, "User:someone", ResourceType.USER)
    r = await ctx.call(38, 3, other)
    assert r.error_code == 0 and (r.principal_name, r.token_requester_principal_name) == ("someone", ctx.name)


@case(39, 40)
async def renew_and_expire_delegation_token(ctx: Ctx):
    """Not ACLs: the token's owner and renewers may renew or expire it, nobody else."""
    foreign = await admin_token(ctx)
    for key, body in ((39, RenewDelegationTokenRequest(hmac=foreign.hmac, renew_period_ms=1000)),
                      (40, ExpireDelegationTokenRequest(hmac=foreign.hmac, expiry_time_period_ms=1000))):
        assert (await ctx.call(key, 2, body)).error_code == E.DELEGATION_TOKEN_OWNER_MISMATCH
    renewable = await admin_token(ctx, renewers=[ctx.name])
    r = await ctx.call(39, 2, RenewDelegationTokenRequest(hmac=renewable.hmac, renew_period_ms=60000))
    assert r.error_code == 0 and r.expiry_timestamp_ms <= renewable.max_timestamp_ms
    r = await ctx.call(40, 2, ExpireDelegationTokenRequest(hmac=renewable.hmac, expiry_time_period_ms=-1))
    assert r.error_code == 0
    r = await ctx.call(39, 2, RenewDelegationTokenRequest(hmac=renewable.hmac, renew_period_ms=60000))
    assert r.error_code == E.DELEGATION_TOKEN_NOT_FOUND


@case(41)
async def describe_delegation_token(ctx: Ctx):
    token = await admin_token(ctx)
    body = DescribeDelegationTokenRequest(owners=None)
    seen = {t.token_id for t in (await ctx.call(41, 3, body)).tokens}
    assert token.token_id not in seen
    await ctx.grant(DESCRIBE, token.token_id, ResourceType.DELEGATION_TOKEN)
    described = [t for t in (await ctx.call(41, 3, body)).tokens if t.token_id == token.token_id]
    assert [(t.principal_name, t.hmac) for t in described] == [(token.principal_name, token.hmac)]


# -- cluster -----------------------------------------------------------------------------------

@case(34)
async def alter_replica_log_dirs(ctx: Ctx):
    topic = await ctx.topic()
    R = AlterReplicaLogDirsRequest
    body = R(dirs=[R.AlterReplicaLogDir(path=ctx.broker.log_dir, topics=[R.AlterReplicaLogDirTopic(
        name=topic, partitions=[0])])])
    r = await ctx.call(34, 2, body)
    assert [(t.topic_name, p.error_code) for t in r.results for p in t.partitions] == [
        (topic, E.CLUSTER_AUTHORIZATION_FAILED)]
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)
    r = await ctx.call(34, 2, body)       # already in that dir: nothing to move
    assert [(t.topic_name, p.error_code) for t in r.results for p in t.partitions] == [(topic, 0)]


@case(35)
async def describe_log_dirs(ctx: Ctx):
    r = await ctx.call(35, 4, DescribeLogDirsRequest(topics=None))
    assert (r.error_code, r.results) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE, "kafka-cluster", CLUSTER)
    r = await ctx.call(35, 4, DescribeLogDirsRequest(topics=None))
    assert r.error_code == 0 and r.results and r.results[0].total_bytes > 0


@case(43)
async def elect_leaders(ctx: Ctx):
    topic = await ctx.topic()
    body = ElectLeadersRequest(election_type=0, timeout_ms=5000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[0])])
    r = await ctx.call(43, 2, body)
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert r.replica_election_results[0].partition_result[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)
    r = await ctx.call(43, 2, body)
    assert r.error_code == 0
    assert r.replica_election_results[0].partition_result[0].error_code == E.ELECTION_NOT_NEEDED


@case(60)
async def describe_cluster(ctx: Ctx):
    """No ACL to describe the brokers; the cluster's authorized operations need DESCRIBE on it."""
    r = await ctx.call(60, 1, DescribeClusterRequest(include_cluster_authorized_operations=True))
    assert (r.error_code, len(r.brokers), r.cluster_authorized_operations) == (0, 1, 0)
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)                 # ALTER implies DESCRIBE
    r = await ctx.call(60, 1, DescribeClusterRequest(include_cluster_authorized_operations=True))
    assert r.cluster_authorized_operations == bits(ALTER, DESCRIBE)


def acl_filter(cls, name: str):
    return cls(resource_type_filter=TOPIC, resource_name_filter=name, pattern_type_filter=LITERAL,
               principal_filter=None, host_filter=None, operation=1, permission_type=1)


async def acls_on(ctx: Ctx, name: str) -> list:
    response = await ctx.admin.call(29, 3, acl_filter(DescribeAclsRequest, name))
    return [(a.principal, a.operation) for r in response.resources for a in r.acls]


@case(29)
async def describe_acls(ctx: Ctx):
    name = ctx.topic_name()
    await create_acls(ctx.broker, acl("User:someone", READ, name))
    r = await ctx.call(29, 3, acl_filter(DescribeAclsRequest, name))
    assert (r.error_code, r.resources) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE, "kafka-cluster", CLUSTER)
    r = await ctx.call(29, 3, acl_filter(DescribeAclsRequest, name))
    assert r.error_code == 0 and [(a.principal, a.operation) for a in r.resources[0].acls] == [("User:someone", READ)]


@case(30)
async def create_acls_case(ctx: Ctx):
    name = ctx.topic_name()
    body = CreateAclsRequest(creations=[acl("User:someone", WRITE, name)])
    assert (await ctx.call(30, 3, body)).results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert await acls_on(ctx, name) == []
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)
    assert (await ctx.call(30, 3, body)).results[0].error_code == 0
    assert await acls_on(ctx, name) == [("User:someone", WRITE)]


@case(31)
async def delete_acls(ctx: Ctx):
    name = ctx.topic_name()
    await create_acls(ctx.broker, acl("User:someone", WRITE, name))
    body = DeleteAclsRequest(filters=[acl_filter(DeleteAclsRequest.DeleteAclsFilter, name)])
    r = await ctx.call(31, 3, body)
    assert (r.filter_results[0].error_code, r.filter_results[0].matching_acls) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    assert await acls_on(ctx, name) == [("User:someone", WRITE)]
    await ctx.grant(DESCRIBE, "kafka-cluster", CLUSTER)              # describing ACLs is not altering them
    assert (await ctx.call(31, 3, body)).filter_results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)
    r = await ctx.call(31, 3, body)
    assert r.filter_results[0].error_code == 0 and len(r.filter_results[0].matching_acls) == 1
    assert await acls_on(ctx, name) == []


@case(50)
async def describe_user_scram_credentials(ctx: Ctx):
    r = await ctx.call(50, 0, DescribeUserScramCredentialsRequest(users=None))
    assert (r.error_code, r.results) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE, "kafka-cluster", CLUSTER)
    assert (await ctx.call(50, 0, DescribeUserScramCredentialsRequest(users=None))).error_code == 0


@case(51)
async def alter_user_scram_credentials(ctx: Ctx):
    user = f"{ctx.name}-new"
    body = AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        scram_upsertion(user, "pw", ScramMechanism.SCRAM_SHA_256)])
    assert [(r.user, r.error_code) for r in (await ctx.call(51, 0, body)).results] == \
        [(user, E.CLUSTER_AUTHORIZATION_FAILED)]

    async def exists():
        r = await ctx.admin.call(50, 0, DescribeUserScramCredentialsRequest(users=[
            DescribeUserScramCredentialsRequest.UserName(name=user)]))
        return r.results[0].error_code == 0
    assert not await exists()
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)
    assert [r.error_code for r in (await ctx.call(51, 0, body)).results] == [0]
    assert await exists()


@case(48)
async def describe_client_quotas(ctx: Ctx):
    body = DescribeClientQuotasRequest(components=[], strict=False)
    r = await ctx.call(48, 1, body)
    assert (r.error_code, r.entries) == (E.CLUSTER_AUTHORIZATION_FAILED, None)
    await ctx.grant(DESCRIBE, "kafka-cluster", CLUSTER)              # describing the cluster is not its configs
    assert (await ctx.call(48, 1, body)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    await ctx.grant(DESCRIBE_CONFIGS, "kafka-cluster", CLUSTER)
    assert (await ctx.call(48, 1, body)).error_code == 0


@case(49)
async def alter_client_quotas(ctx: Ctx):
    A = AlterClientQuotasRequest
    body = A(validate_only=False, entries=[A.EntryData(
        entity=[A.EntityData(entity_type="client-id", entity_name=ctx.name)],
        ops=[A.OpData(key="producer_byte_rate", value=4096.0, remove=False)])])

    async def quotas():
        D = DescribeClientQuotasRequest
        r = await ctx.admin.call(48, 1, D(components=[D.ComponentData(entity_type="client-id", match_type=0,
                                                                        match=ctx.name)], strict=True))
        return [[(v.key, v.value) for v in e.values] for e in r.entries]
    assert [e.error_code for e in (await ctx.call(49, 1, body)).entries] == [E.CLUSTER_AUTHORIZATION_FAILED]
    assert await quotas() == []
    await ctx.grant(DESCRIBE_CONFIGS, "kafka-cluster", CLUSTER)
    assert [e.error_code for e in (await ctx.call(49, 1, body)).entries] == [E.CLUSTER_AUTHORIZATION_FAILED]
    await ctx.grant(ALTER_CONFIGS, "kafka-cluster", CLUSTER)
    assert [e.error_code for e in (await ctx.call(49, 1, body)).entries] == [0]
    assert await quotas() == [[("producer_byte_rate", 4096.0)]]


@case(57)
async def update_features(ctx: Ctx):
    """ALTER on the cluster; DESCRIBE is not enough. (Validate-only, so the broker's levels stay as they are.)"""
    body = UpdateFeaturesRequest(timeout_ms=5000, validate_only=True, feature_updates=[
        UpdateFeaturesRequest.FeatureUpdateKey(feature="group.version", max_version_level=0, upgrade_type=2)])
    r = await ctx.call(57, 1, body)
    assert (r.error_code, r.results) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    await ctx.grant(DESCRIBE, "kafka-cluster", CLUSTER)
    assert (await ctx.call(57, 1, body)).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    await ctx.grant(ALTER, "kafka-cluster", CLUSTER)
    r = await ctx.call(57, 1, body)
    assert (r.error_code, [x.feature for x in r.results]) == (0, ["group.version"])


# -- the table is complete, and each case holds -------------------------------------------------

CASE_NAMES = sorted({fn.__name__ for fn in CASES.values()})


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_broker(TlsFiles(str(tmp_path_factory.mktemp("tls"))),
                     plain_users={name: f"{name}-secret" for name in CASE_NAMES + ["pattern", "wild"]},
                     **{"delegation.token.secret.key": "acl-matrix-secret"})
    try:
        yield b
    finally:
        b.close()


def test_every_advertised_api_has_a_case():
    assert set(advertised_api_versions()) - NO_ACL_NEEDED == set(CASES)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_api_is_refused_without_its_acl_and_served_with_it(broker, name):
    fn = next(f for f in CASES.values() if f.__name__ == name)

    async def go():
        async with Ctx(broker, name) as ctx:
            await fn(ctx)
    run(go())


def test_deny_wins_over_allow_and_prefixed_over_literal(broker):
    """ALLOW ALL on the prefix, DENY WRITE on one literal topic: that topic alone refuses writes;
    reading it (READ is not denied) still works."""
    async def go():
        async with Ctx(broker, "pattern") as ctx:
            kept, other = await ctx.topic("-kept", records=1), await ctx.topic("-other")
            await ctx.grant(ALL, "pattern-", pattern=PREFIXED)
            await ctx.grant(WRITE, kept, permission=DENY)
            codes = [(await ctx.call(0, 9, produce_body(t))).responses[0].partition_responses[0].error_code
                     for t in (kept, other)]
            assert codes == [E.TOPIC_AUTHORIZATION_FAILED, 0]
            r = await ctx.call(2, 5, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=kept, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
            assert (r.topics[0].partitions[0].error_code, r.topics[0].partitions[0].offset) == (0, 1)
            ops = (await ctx.call(3, 12, topic_metadata(kept))).topics[0].topic_authorized_operations
            assert not ops & bits(WRITE) and ops & bits(READ, DESCRIBE) == bits(READ, DESCRIBE)
    run(go())


def test_wildcard_principal_and_resource(broker):
    async def go():
        async with Ctx(broker, "wild") as ctx:
            topic = await ctx.topic()
            await create_acls(ctx.broker, acl("User:*", DESCRIBE, "*"))
            t = (await ctx.call(3, 12, topic_metadata(topic))).topics[0]
            assert t.error_code == 0 and t.topic_authorized_operations == bits(DESCRIBE)
            assert (await ctx.call(0, 9, produce_body(topic))).responses[0].partition_responses[0].error_code == \
                E.TOPIC_AUTHORIZATION_FAILED
    run(go())


def test_a_super_user_needs_no_acl(broker):
    async def go():
        admin = await connect(broker, "SASL_SSL", *ADMIN)
        r = await admin.call(3, 10, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="super-made")],
                                                  allow_auto_topic_creation=True,
                                                  include_cluster_authorized_operations=True))
        assert r.topics[0].error_code == 0
        assert r.cluster_authorized_operations == bits(CREATE, ALTER, DESCRIBE, 9, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                                                       IDEMPOTENT_WRITE)
        await admin.close()
    run(go())
