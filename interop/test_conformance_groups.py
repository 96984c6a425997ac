"""Groups, offsets and transactions: the same sequences to Apache Kafka 4.x and to kafka-compat.

Member ids, producer ids and the hosts of coordinators are each cluster's own (see
conformance.ALLOWED); everything else in each answer is compared, errors included.
"""
from __future__ import annotations

from conformance import coordinator_ready, create, until

from kafka_compat.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    consumer_group_heartbeat,
    delete_groups,
    describe_groups,
    end_txn,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    streams_group_describe,
    streams_group_heartbeat,
    streams_group_topology_description_update,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 15, 16, 22, 24, 25, 26
TXN_OFFSET_COMMIT, DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_HEARTBEAT = 28, 42, 47, 68
WRITE_TXN_MARKERS = 27
PROTOCOL = join_group.JoinGroupRequest.JoinGroupRequestProtocol


def join(group: str, member: str = "", protocol_type: str = "consumer", session_ms: int = 10000, **kw):
    return join_group.JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=kw.pop("rebalance_ms", 10000),
        member_id=member, group_instance_id=None, protocol_type=protocol_type,
        protocols=kw.pop("protocols", [PROTOCOL(name="range", metadata=b"\x00\x01")]), reason=None)


# --- FindCoordinator ---------------------------------------------------------------------

def test_find_coordinator(pair):
    coordinator_ready(pair, "conf-fc")
    for v in pair.versions(FIND_COORDINATOR):
        body = find_coordinator.FindCoordinatorRequest(key="conf-fc", key_type=0, coordinator_keys=["conf-fc", ""])
        pair.call(FIND_COORDINATOR, v, body, "group")
        if v >= 1:
            pair.call(FIND_COORDINATOR, v, find_coordinator.FindCoordinatorRequest(
                key="conf-fc", key_type=7, coordinator_keys=["conf-fc"]), "unknown key type")
    pair.check()


# --- classic groups ------------------------------------------------------------------------

def test_join_group_errors(pair):
    coordinator_ready(pair, "conf-jg")
    for v in pair.versions(JOIN_GROUP):
        for what, body in {
            "empty group id": join(""),
            "session too short": join("conf-jg", session_ms=1),
            "session too long": join("conf-jg", session_ms=10_000_000),
            "unknown member": join("conf-jg", member="conf-nobody"),
            "no protocols": join("conf-jg", protocols=[]),
        }.items():
            pair.call(JOIN_GROUP, v, body, what)
    pair.check()


def test_classic_group_lifecycle(pair):
    """Join (member id required from v4), join again, sync, heartbeat, commit, describe, leave."""
    group = "conf-life"
    coordinator_ready(pair, group)
    create(pair, "conf-life-t")
    v = max(pair.versions(JOIN_GROUP))
    first, _ = pair.call(JOIN_GROUP, v, join(group), "first join")
    members = {}
    for side in ("ours", "kafka"):
        members[side] = pair.client(side).call(JOIN_GROUP, v, join(group)).member_id
    assert all(members.values())
    # the member joins again with its id: it becomes the leader of generation 1
    pair.call(JOIN_GROUP, v, lambda side: join(group, member=members[side]), "join with id")
    gens = {}
    for side in ("ours", "kafka"):
        gens[side] = 1
    sync = lambda side: sync_group.SyncGroupRequest(  # noqa: E731
        group_id=group, generation_id=gens[side], member_id=members[side], group_instance_id=None,
        protocol_type="consumer", protocol_name="range",
        assignments=[sync_group.SyncGroupRequest.SyncGroupRequestAssignment(member_id=members[side],
                                                                            assignment=b"\x00\x01")])
    pair.call(SYNC_GROUP, max(pair.versions(SYNC_GROUP)), sync, "sync")
    for hv in pair.versions(HEARTBEAT):
        pair.call(HEARTBEAT, hv, lambda side: heartbeat.HeartbeatRequest(
            group_id=group, generation_id=gens[side], member_id=members[side]), "heartbeat")
        pair.call(HEARTBEAT, hv, lambda side: heartbeat.HeartbeatRequest(
            group_id=group, generation_id=9, member_id=members[side]), "heartbeat, wrong generation")
        pair.call(HEARTBEAT, hv, heartbeat.HeartbeatRequest(group_id=group, generation_id=1, member_id="conf-x"),
                  "heartbeat, unknown member")
    C = offset_commit.OffsetCommitRequest
    for cv in pair.versions(OFFSET_COMMIT, hi=9):
        commit = lambda side, gen=None: C(  # noqa: E731
            group_id=group, generation_id_or_member_epoch=gens[side] if gen is None else gen,
            member_id=members[side], group_instance_id=None, retention_time_ms=-1,
            topics=[C.OffsetCommitRequestTopic(name="conf-life-t", partitions=[C.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="m")])])
        pair.call(OFFSET_COMMIT, cv, commit, "commit")
        pair.call(OFFSET_COMMIT, cv, lambda side: commit(side, 7), "commit, wrong generation")
    pair.call(DESCRIBE_GROUPS, max(pair.versions(DESCRIBE_GROUPS)), describe_groups.DescribeGroupsRequest(
        groups=[group, "conf-nogroup"], include_authorized_operations=False), "describe")
    pair.call(DELETE_GROUPS, max(pair.versions(DELETE_GROUPS)), delete_groups.DeleteGroupsRequest(
        groups_names=[group]), "delete, not empty")
    L = leave_group.LeaveGroupRequest
    pair.call(LEAVE_GROUP, max(pair.versions(LEAVE_GROUP)), lambda side: L(group_id=group, members=[
        L.MemberIdentity(member_id=members[side], group_instance_id=None, reason="done")]), "leave")
    pair.call(LEAVE_GROUP, max(pair.versions(LEAVE_GROUP)), L(group_id=group, members=[
        L.MemberIdentity(member_id="conf-x", group_instance_id=None, reason=None)]), "leave, unknown member")
    pair.check()


# --- offsets ---------------------------------------------------------------------------------

def test_offset_commit_and_fetch(pair):
    group = "conf-offsets"
    coordinator_ready(pair, group)
    create(pair, "conf-off-t", partitions=2)
    C = offset_commit.OffsetCommitRequest

    def commit(topic, offset=3, metadata="", partition=0):
        return C(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                 retention_time_ms=-1, topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[
                     C.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset,
                                                    committed_leader_epoch=-1, committed_metadata=metadata)])])
    for v in pair.versions(OFFSET_COMMIT, hi=9):
        pair.call(OFFSET_COMMIT, v, commit("conf-off-t"), "simple commit")
        pair.call(OFFSET_COMMIT, v, commit("conf-off-missing"), "unknown topic")
        pair.call(OFFSET_COMMIT, v, commit("conf-off-t", partition=9), "unknown partition")
        pair.call(OFFSET_COMMIT, v, commit("conf-off-t", metadata="m" * 5000), "metadata too large")
    F = offset_fetch.OffsetFetchRequest
    for v in pair.versions(OFFSET_FETCH, hi=9):
        if v < 8:
            body = F(group_id=group, topics=[F.OffsetFetchRequestTopic(name="conf-off-t", partition_indexes=[0, 1])],
                     require_stable=False)
            everything = F(group_id=group, topics=None, require_stable=False)
            missing = F(group_id="conf-off-none", topics=[F.OffsetFetchRequestTopic(
                name="conf-off-t", partition_indexes=[0])], require_stable=False)
        else:
            G = F.OffsetFetchRequestGroup
            body = F(groups=[G(group_id=group, topics=[F.OffsetFetchRequestTopics(name="conf-off-t",
                                                                                 partition_indexes=[0, 1])])])
            everything = F(groups=[G(group_id=group, topics=None)])
            missing = F(groups=[G(group_id="conf-off-none", topics=[F.OffsetFetchRequestTopics(
                name="conf-off-t", partition_indexes=[0])])])
        if v >= 2:
            pair.call(OFFSET_FETCH, v, everything, "all topics")
        pair.call(OFFSET_FETCH, v, body, "named")
        pair.call(OFFSET_FETCH, v, missing, "unknown group")
    D = offset_delete.OffsetDeleteRequest
    for v in pair.versions(OFFSET_DELETE):
        pair.call(OFFSET_DELETE, v, D(group_id=group, topics=[D.OffsetDeleteRequestTopic(
            name="conf-off-t", partitions=[D.OffsetDeleteRequestPartition(partition_index=1)])]), "delete")
        pair.call(OFFSET_DELETE, v, D(group_id="conf-off-none", topics=[D.OffsetDeleteRequestTopic(
            name="conf-off-t", partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])]), "unknown group")
    pair.check()


def test_list_describe_delete_groups(pair):
    group = "conf-ldd"
    coordinator_ready(pair, group)
    create(pair, "conf-ldd-t")
    C = offset_commit.OffsetCommitRequest
    pair.call(OFFSET_COMMIT, 8, C(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, topics=[C.OffsetCommitRequestTopic(
                                      name="conf-ldd-t", partitions=[C.OffsetCommitRequestPartition(
                                          partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                          committed_metadata="")])]), "set-up")
    for v in pair.versions(DESCRIBE_GROUPS):
        pair.call(DESCRIBE_GROUPS, v, describe_groups.DescribeGroupsRequest(
            groups=[group, "conf-ldd-none", ""], include_authorized_operations=False))
    for v in pair.versions(LIST_GROUPS, lo=4):
        for states in ([], ["Empty"], ["Stable"], ["NoSuchState"]):
            pair.call(LIST_GROUPS, v, list_groups.ListGroupsRequest(
                states_filter=states, types_filter=["classic"]), f"states {states}")
    for v in pair.versions(DELETE_GROUPS):
        pair.call(DELETE_GROUPS, v, delete_groups.DeleteGroupsRequest(groups_names=["conf-ldd-none", ""]), "missing")
    pair.call(DELETE_GROUPS, max(pair.versions(DELETE_GROUPS)), delete_groups.DeleteGroupsRequest(
        groups_names=[group]), "empty group")
    pair.check()


# --- KIP-848 consumer groups ----------------------------------------------------------------

def test_consumer_group_heartbeat_errors(pair):
    group = "conf-cgh"
    coordinator_ready(pair, group)
    create(pair, "conf-cgh-t")
    H = consumer_group_heartbeat.ConsumerGroupHeartbeatRequest
    for v in pair.versions(CONSUMER_GROUP_HEARTBEAT):
        for what, body in {
            "unknown member": H(group_id=group, member_id="conf-nobody-0000000000", member_epoch=5,
                                rebalance_timeout_ms=10000, subscribed_topic_names=["conf-cgh-t"], topic_partitions=[]),
            "empty group": H(group_id="", member_id="m" * 22, member_epoch=0, rebalance_timeout_ms=10000,
                             subscribed_topic_names=["conf-cgh-t"], topic_partitions=[]),
            "unknown assignor": H(group_id=group, member_id="conf-assignor-00000001", member_epoch=0,
                                  rebalance_timeout_ms=10000, server_assignor="nope",
                                  subscribed_topic_names=["conf-cgh-t"], topic_partitions=[]),
            "no subscription": H(group_id=group, member_id="conf-nosub-0000000001", member_epoch=0,
                                 rebalance_timeout_ms=10000, subscribed_topic_names=None, topic_partitions=[]),
        }.items():
            pair.call(CONSUMER_GROUP_HEARTBEAT, v, body, what)
    pair.check()


def test_streams_group_heartbeat_errors(pair):
    group = "conf-sgh"
    coordinator_ready(pair, group)
    create(pair, "conf-sgh-t")
    H = streams_group_heartbeat.StreamsGroupHeartbeatRequest

    def topology(changelog_partitions=0, app=group):
        return H.Topology(epoch=1, subtopologies=[H.Subtopology(
            subtopology_id="0", source_topics=["conf-sgh-t"], source_topic_regex=[], repartition_sink_topics=[],
            state_changelog_topics=[H.TopicInfo(name=f"{app}-store-changelog", partitions=changelog_partitions,
                                                replication_factor=0, topic_configs=[])],
            repartition_source_topics=[], copartition_groups=[])])

    def join(member, **kw):
        fields = dict(group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=10000,
                      topology=topology(), process_id="conf-process", active_tasks=[], standby_tasks=[],
                      warmup_tasks=[])
        fields.update(kw)
        return H(**fields)
    for v in pair.versions(88):
        for what, body in {
            "unknown group": H(group_id="conf-sgh-nobody", member_id="conf-nobody", member_epoch=5),
            "empty member id": join(""),
            "no topology": join("conf-sgh-notopo", topology=None),
            "no rebalance timeout": join("conf-sgh-norto", rebalance_timeout_ms=-1),
            "owned tasks on join": join("conf-sgh-owned", active_tasks=[H.TaskIds(subtopology_id="0",
                                                                                  partitions=[0])]),
            "changelog partitions": join("conf-sgh-badcl", topology=topology(3)),
            "epoch -3": H(group_id=group, member_id="conf-sgh-m3", member_epoch=-3),
            "missing source topic": join("conf-sgh-nosrc", group_id="conf-sgh-nosrc", topology=H.Topology(
                epoch=1, subtopologies=[H.Subtopology(subtopology_id="0", source_topics=["conf-sgh-absent"],
                                                      source_topic_regex=[], repartition_sink_topics=[],
                                                      state_changelog_topics=[], repartition_source_topics=[],
                                                      copartition_groups=[])])),
            # a first join at every version: its own application, so no earlier version's join is rejoined
            "first join": join("conf-sgh-first") if v == 0 else join(
                "conf-sgh-first", group_id=f"{group}-v{v}", topology=topology(app=f"{group}-v{v}")),
        }.items():
            pair.call(88, v, body, what)
    D = streams_group_describe.StreamsGroupDescribeRequest
    for v in pair.versions(89):
        pair.call(89, v, D(group_ids=["conf-sgh-none"], include_authorized_operations=False), "unknown group")
        if v >= 1:      # KIP-1331: the description's status, null-described for a group that is not there
            pair.call(89, v, D(group_ids=["conf-sgh-none"], include_authorized_operations=False,
                               include_topology_description=True), "unknown group, description asked")
    U = streams_group_topology_description_update.StreamsGroupTopologyDescriptionUpdateRequest
    for v in pair.versions(93):     # KIP-1331 without a topology description plugin (Kafka's default)
        pair.call(93, v, U(group_id=group, member_id="conf-sgh-first", topology_epoch=1,
                           topology_description=U.TopologyDescription(subtopologies=[], global_stores=[])),
                  "no plugin")
    pair.check()


# --- transactions ----------------------------------------------------------------------------

def test_transaction_errors(pair):
    tid = "conf-txn"
    coordinator_ready(pair, tid, key_type=1)
    create(pair, "conf-txn-t")
    ids = {}
    for side in ("ours", "kafka"):
        r = until(lambda: pair.client(side).call(INIT_PRODUCER_ID, 4, init_producer_id.InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)),
            lambda r: r.error_code == 0)
        assert r.error_code == 0, (side, r)
        ids[side] = (r.producer_id, r.producer_epoch)
    pair.call(INIT_PRODUCER_ID, 4, init_producer_id.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=10_000_000, producer_id=-1, producer_epoch=-1), "timeout too big")
    for v in pair.versions(END_TXN):        # v5: transactions v2's epoch rules
        pair.call(END_TXN, v, lambda side: end_txn.EndTxnRequest(
            transactional_id=tid, producer_id=ids[side][0], producer_epoch=ids[side][1] + 1, committed=True),
            "end, no transaction")
        pair.call(END_TXN, v, lambda side: end_txn.EndTxnRequest(
            transactional_id=tid, producer_id=ids[side][0], producer_epoch=ids[side][1] - 1, committed=True),
            "end, old epoch")
    A = add_partitions_to_txn.AddPartitionsToTxnRequest
    for v in pair.versions(ADD_PARTITIONS_TO_TXN, hi=3):
        pair.call(ADD_PARTITIONS_TO_TXN, v, lambda side: A(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=ids[side][0] + 1000,
            v3_and_below_producer_epoch=ids[side][1], v3_and_below_topics=[
                A.AddPartitionsToTxnTopic(name="conf-txn-t", partitions=[0])]), "unknown producer id")
        pair.call(ADD_PARTITIONS_TO_TXN, v, lambda side: A(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=ids[side][0],
            v3_and_below_producer_epoch=ids[side][1], v3_and_below_topics=[
                A.AddPartitionsToTxnTopic(name="conf-txn-missing", partitions=[0])]), "unknown topic")
    for v in pair.versions(ADD_OFFSETS_TO_TXN):
        pair.call(ADD_OFFSETS_TO_TXN, v, lambda side: add_offsets_to_txn.AddOffsetsToTxnRequest(
            transactional_id=tid, producer_id=ids[side][0], producer_epoch=ids[side][1] + 3, group_id="conf-txn-g"),
            "fenced epoch")
    T = txn_offset_commit.TxnOffsetCommitRequest
    topic_ids = {side: pair.topic_id(side, "conf-txn-t") for side in ("ours", "kafka")}

    def commit(group="conf-txn-g", epoch=-1, topic_id=None):
        def body(side):
            return T(transactional_id=tid, group_id=group, producer_id=ids[side][0], producer_epoch=ids[side][1],
                     generation_id_or_member_epoch=epoch, member_id="", group_instance_id=None,
                     topics=[T.TxnOffsetCommitRequestTopic(     # v6 names the topic by id only (KIP-1319)
                         name="conf-txn-t", topic_id=topic_ids[side] if topic_id is None else topic_id,
                         partitions=[T.TxnOffsetCommitRequestPartition(
                             partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                             committed_metadata="")])])
        return body
    for v in pair.versions(TXN_OFFSET_COMMIT, hi=4):
        pair.call(TXN_OFFSET_COMMIT, v, commit(), "not added to the transaction")
    for v in pair.versions(TXN_OFFSET_COMMIT, lo=5):       # transactions v2: the commit adds the group itself
        pair.call(TXN_OFFSET_COMMIT, v, commit(), "added by the commit")
        # a generation for a group that does not exist: v6 says GROUP_ID_NOT_FOUND, older ILLEGAL_GENERATION
        pair.call(TXN_OFFSET_COMMIT, v, commit(group="conf-txn-nogroup", epoch=3), "generation of a missing group")
    for v in pair.versions(TXN_OFFSET_COMMIT, lo=6):
        pair.call(TXN_OFFSET_COMMIT, v, commit(topic_id=b"\x01" * 16), "unknown topic id")
    W = write_txn_markers.WriteTxnMarkersRequest
    for v in pair.versions(WRITE_TXN_MARKERS):
        pair.call(WRITE_TXN_MARKERS, v, lambda side: W(markers=[W.WritableTxnMarker(
            producer_id=ids[side][0], producer_epoch=ids[side][1], transaction_result=False, coordinator_epoch=0,
            transaction_version=2, topics=[W.WritableTxnMarkerTopic(name="conf-txn-missing", partition_indexes=[0])])]),
            "a marker for a missing topic")
    pair.check()
