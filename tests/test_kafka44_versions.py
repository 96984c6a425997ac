"""What Kafka 4.4's new versions mean, over the wire: ApiVersions v5's target check (KIP-1242),
TxnOffsetCommit v6's topic ids and errors (KIP-1319), DeleteGroups v3's per-group message, and the
Streams v1s (the int64 recovery lag, MISSING_CLIENT_TAGS, KIP-1331's description status, KIP-1357's
assignor name) with StreamsGroupTopologyDescriptionUpdate (93) as Kafka answers it without a plugin, and
metadata.version 4.4-IV1's CIDR ACL hosts."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_streams_groups import hb, started  # noqa: E402
from test_transaction_coordinator import ADD_OFFSETS, Txn, connect, fetch_offset, running  # noqa: E402

from kafka_compat.protocol.errors import ErrorCode as E  # noqa: E402
from kafka_compat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest  # noqa: E402
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from kafka_compat.protocol.messages.delete_groups import DeleteGroupsRequest  # noqa: E402
from kafka_compat.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest  # noqa: E402
from kafka_compat.protocol.messages.streams_group_topology_description_update import (  # noqa: E402
    StreamsGroupTopologyDescriptionUpdateRequest,
)
from kafka_compat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest as TC  # noqa: E402


def test_api_versions_v5_checks_the_cluster_and_node_the_client_means(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            c = await connect(b)
            ask = {
                "cluster only": (b.cluster_id, -1), "node only": (None, b.broker_id),
                "another cluster": ("not-this-one", b.broker_id), "another node": (b.cluster_id, b.broker_id + 7),
                "this broker": (b.cluster_id, b.broker_id), "neither": (None, -1)}
            out = {}
            for what, (cluster_id, node_id) in ask.items():
                r = await c.call(18, 5, ApiVersionsRequest(client_software_name="t", client_software_version="1",
                                                           cluster_id=cluster_id, node_id=node_id))
                out[what] = (r.error_code, len(r.api_keys) > 0)
            # v4 carries neither field, so nothing is checked
            v4 = await c.call(18, 4, ApiVersionsRequest(client_software_name="t", client_software_version="1",
                                                        cluster_id="not-this-one", node_id=99))
            out["v4"] = (v4.error_code, len(v4.api_keys) > 0)
            await c.close()
            return out

    assert asyncio.run(scenario()) == {
        "cluster only": (E.INVALID_REQUEST, False), "node only": (E.INVALID_REQUEST, False),
        "another cluster": (E.REBOOTSTRAP_REQUIRED, False), "another node": (E.REBOOTSTRAP_REQUIRED, False),
        "this broker": (E.NONE, True), "neither": (E.NONE, True), "v4": (E.NONE, True)}


def test_txn_offset_commit_v6_names_topics_by_id_and_tells_the_newer_errors(tmp_path):
    def commit(t, topic_id=None, name="t", group="g", epoch=-1, version=6):
        return version, TC(transactional_id=t.txn_id, group_id=group, producer_id=t.pid, producer_epoch=t.epoch,
                           generation_id_or_member_epoch=epoch, member_id="", topics=[TC.TxnOffsetCommitRequestTopic(
                               name=name, topic_id=topic_id or b"\0" * 16, partitions=[TC.TxnOffsetCommitRequestPartition(
                                   partition_index=0, committed_offset=5, committed_metadata="")])])

    async def scenario():
        async with running(tmp_path) as b:
            b.controller.create_topic("t", 1, 1, {})
            c = await connect(b)
            await b.group_coordinator.wait_loaded()
            t = Txn(c, "v6")
            await t.init()
            await c.call(ADD_OFFSETS, 2, AddOffsetsToTxnRequest(transactional_id="v6", producer_id=t.pid,
                                                               producer_epoch=t.epoch, group_id="g"))
            topic_id = b.metadata_cache.get("t").topic_id
            out = {}
            for what, (v, body) in {
                "by id": commit(t, topic_id),
                "unknown id": commit(t, b"\x01" * 16),
                "missing group, v6": commit(t, topic_id, group="nobody", epoch=3),
                "missing group, v5": commit(t, name="t", group="nobody", epoch=3, version=5),
            }.items():
                r = await c.call(28, v, body)
                out[what] = (r.topics[0].topic_id == (body.topics[0].topic_id if v >= 6 else b"\0" * 16),
                             r.topics[0].partitions[0].error_code)
            await t.end(True)
            await t.settled("CompleteCommit")
            out["committed"] = await fetch_offset(c, "g", "t", True)
            await c.close()
            return out

    assert asyncio.run(scenario()) == {
        "by id": (True, E.NONE), "unknown id": (True, E.UNKNOWN_TOPIC_ID),
        "missing group, v6": (True, E.GROUP_ID_NOT_FOUND), "missing group, v5": (True, E.ILLEGAL_GENERATION),
        "committed": (E.NONE, 5)}


def test_delete_groups_v3_carries_a_message_only_for_a_coordinator_failure(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            c = await connect(b)
            await b.group_coordinator.wait_loaded()
            r3 = await c.call(42, 3, DeleteGroupsRequest(groups_names=["nobody"]))
            r2 = await c.call(42, 2, DeleteGroupsRequest(groups_names=["nobody"]))
            await c.close()
            return r3.results[0], r2.results[0]

    v3, v2 = asyncio.run(scenario())
    assert (v3.error_code, v3.error_message) == (E.GROUP_ID_NOT_FOUND, None)
    assert v2.error_code == E.GROUP_ID_NOT_FOUND


def test_streams_v1_recovery_lag_client_tags_and_describe(tmp_path):
    async def scenario():
        b, c = await started(tmp_path, **{"group.streams.rack.aware.assignment.tags": "zone,rack"})
        b.controller.create_topic("in", 1, 1, {})
        v0 = await c.call(88, 0, hb("m0", group="app0"))
        body = hb("m1")
        body.client_tags = [type(body).KeyValue(key="zone", value="a")]
        v1 = await c.call(88, 1, body)
        D = StreamsGroupDescribeRequest
        described = {(v, include): (await c.call(89, v, D(group_ids=["app"], include_authorized_operations=False,
                                                            include_topology_description=include))).groups[0]
                     for v, include in ((1, False), (1, True))}
        missing = (await c.call(89, 1, D(group_ids=["nobody"], include_authorized_operations=False,
                                         include_topology_description=True))).groups[0]
        U = StreamsGroupTopologyDescriptionUpdateRequest
        pushed = await c.call(93, 0, U(group_id="app", member_id="m1", topology_epoch=1,
                                       topology_description=U.TopologyDescription(subtopologies=[], global_stores=[])))
        await c.close()
        await b.stop()
        return v0, v1, described, missing, pushed

    v0, v1, described, missing, pushed = asyncio.run(scenario())
    assert v0.error_code == v1.error_code == E.NONE
    assert (v0.acceptable_recovery_lag_legacy, v1.acceptable_recovery_lag) == (0, 10000)
    assert v1.topology_description_required is False        # no topology description plugin
    assert 6 not in [s.status_code for s in v0.status]      # a v0 client does not know MISSING_CLIENT_TAGS
    assert [s.status_detail for s in v1.status if s.status_code == 6] == [
        "Missing required client tags for rack-aware standby assignment: [rack]. Configure them via "
        "'client.tag.<tagKey>' in your Streams config."]
    for (v, include), g in described.items():
        assert (g.error_code, g.assignor_name, g.topology_description) == (E.NONE, "sticky", None)
        assert g.topology_description_status == (1 if include else 0)      # NOT_STORED / NOT_REQUESTED
    assert (missing.error_code, missing.assignor_name, missing.topology_description_status) == (
        E.GROUP_ID_NOT_FOUND, None, 0)
    # no topology description plugin: Kafka's coordinator refuses the push before it looks at the group
    assert (pushed.error_code, pushed.error_message) == (
        E.UNSUPPORTED_VERSION, "The broker has no streams group topology description plugin configured.")


# ---------------------------------------------------------------- metadata.version 4.4-IV1: CIDR ACL hosts
def test_a_cidr_host_applies_to_the_addresses_of_its_network():
    from kafka_compat.security.authorizer import host_applies, in_cidr, validate_host

    assert in_cidr("10.1.0.0/16", "10.1.255.255") and in_cidr("10.1.0.0/16", "10.1.0.0")     # inclusive
    assert in_cidr("10.1.2.3/16", "10.1.9.9")       # host bits set, as SubnetUtils allows
    assert not in_cidr("10.1.0.0/16", "10.2.0.1") and not in_cidr("10.1.0.0/16", "::1")
    assert in_cidr("2001:db8::/32", "2001:db8:0:0:0:0:0:1") and not in_cidr("bad/8", "10.0.0.1")
    assert host_applies("*", ("10.0.0.1", "*")) and host_applies("10.0.0.1", ("10.0.0.1", "*"))
    assert host_applies("10.0.0.0/8", ("10.0.0.1", "*")) and not host_applies("10.0.0.2", ("10.0.0.1", "*"))
    assert validate_host("10.0.0.0/8", True) is None and validate_host("*", False) is None
    assert validate_host("10.0.0.0/8", False).code == E.UNSUPPORTED_VERSION
    assert validate_host("10.0.0.0/33", True).code == E.INVALID_REQUEST
    assert validate_host("", True).code == E.INVALID_REQUEST


def test_create_acls_takes_a_cidr_host_once_4_4_iv1_is_finalized_and_the_authorizer_matches_it(tmp_path):
    from kafka_compat.protocol.messages.create_acls import CreateAclsRequest
    from kafka_compat.protocol.messages.update_features import UpdateFeaturesRequest as U
    from kafka_compat.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
    from kafka_compat.server import features as ft

    ft.LocalFeatureStore(str(tmp_path)).write({"metadata.version": 30}, 0)       # a cluster made by 4.3
    C = CreateAclsRequest.AclCreation

    def allow(host):
        return C(resource_type=ResourceType.TOPIC, resource_name="t", resource_pattern_type=PatternType.LITERAL,
                 principal="User:alice", host=host, operation=AclOperation.READ,
                 permission_type=AclPermissionType.ALLOW)

    async def scenario():
        async with running(tmp_path, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                        "super.users": "User:ANONYMOUS"}) as b:
            c = await connect(b)
            before = (await c.call(30, 3, CreateAclsRequest(creations=[allow("127.0.0.0/8")]))).results[0]
            up = await c.call(57, 1, U(timeout_ms=30000, feature_updates=[U.FeatureUpdateKey(
                feature="metadata.version", max_version_level=33, upgrade_type=1)], validate_only=False))
            after = (await c.call(30, 3, CreateAclsRequest(creations=[allow("127.0.0.0/8"), allow("10.0.0.0/99")])))
            decide = b.authorizer._decide
            alice = ("User", "alice")
            matched = (decide(alice, "127.9.9.9", AclOperation.READ, ResourceType.TOPIC, "t"),
                       decide(alice, "192.168.0.1", AclOperation.READ, ResourceType.TOPIC, "t"))
            await c.close()
            return before, up.error_code, [r.error_code for r in after.results], matched

    before, up, after, matched = asyncio.run(scenario())
    assert (before.error_code, before.error_message) == (
        E.UNSUPPORTED_VERSION, "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher.")
    assert up == E.NONE and after == [E.NONE, E.INVALID_REQUEST]
    assert matched == (True, False)
