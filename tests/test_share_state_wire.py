"""The share coordinator on the wire, on a single node: FindCoordinator with key type SHARE (version 6)
and its refusals of a malformed key or an older version, and the share-state RPCs (83-87) with the errors
Kafka's share coordinator answers: uninitialized reads and writes, leader and state epochs fenced, an
unknown topic, an empty group id, a deletion; and the state they keep survives a restart."""
from __future__ import annotations

import pytest
from wire import WireClient

from kafka_compat.protocol.errors import ErrorCode as E
from kafka_compat.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest as Del
from kafka_compat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafka_compat.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest as Init
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.read_share_group_state import ReadShareGroupStateRequest as Read
from kafka_compat.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest as Summ
from kafka_compat.protocol.messages.write_share_group_state import WriteShareGroupStateRequest as Write
from kafka_compat.server.share.share_coordinator_shard import READ_UNINITIALIZED, WRITE_UNINITIALIZED, coordinator_key
from kafka_compat.testing import EmbeddedBroker

GROUP = "wire-share"


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker({"num.partitions": 2}, data_dir=str(tmp_path)) as b:
        yield b


def topic_id(client, name: str) -> bytes:
    response = client.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                                  allow_auto_topic_creation=True))
    return bytes(response.topics[0].topic_id)


def init(client, tid, state_epoch, start, partition=0, group=GROUP):
    return client.call(83, 0, Init(group_id=group, topics=[Init.InitializeStateData(topic_id=tid, partitions=[
        Init.PartitionData(partition=partition, state_epoch=state_epoch, start_offset=start)])])).results


def read(client, tid, leader_epoch, partition=0):
    return client.call(84, 0, Read(group_id=GROUP, topics=[Read.ReadStateData(topic_id=tid, partitions=[
        Read.PartitionData(partition=partition, leader_epoch=leader_epoch)])])).results[0].partitions[0]


def write(client, tid, state_epoch, leader_epoch, start, batches=()):
    return client.call(85, 1, Write(group_id=GROUP, topics=[Write.WriteStateData(topic_id=tid, partitions=[
        Write.PartitionData(partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
                            delivery_complete_count=1, state_batches=[
                                Write.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                                for f, last, s, c in batches])])])).results[0].partitions[0]


def summary(client, tid):
    return client.call(87, 1, Summ(group_id=GROUP, topics=[Summ.ReadStateSummaryData(topic_id=tid, partitions=[
        Summ.PartitionData(partition=0, leader_epoch=0)])])).results[0].partitions[0]


def test_find_coordinator_with_a_share_key(broker):
    client = WireClient("127.0.0.1", broker.port)
    tid = topic_id(client, "fc-share")
    key = coordinator_key(GROUP, tid, 0)
    found = client.call(10, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=[key])).coordinators[0]
    if found.error_code == E.COORDINATOR_NOT_AVAILABLE:      # the first ask creates __share_group_state
        found = client.call(10, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=[key])).coordinators[0]
    assert (found.error_code, found.node_id, found.port) == (E.NONE, 0, broker.port)
    bad = ["", "g:1", f"{GROUP}:not-a-uuid:0", f"{GROUP}:{key.split(':')[1]}:x", f" :{key.split(':')[1]}:0"]
    answers = client.call(10, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=bad)).coordinators
    assert [(c.key, c.error_code) for c in answers] == [(k, E.INVALID_REQUEST) for k in bad]
    older = client.call(10, 5, FindCoordinatorRequest(key_type=2, coordinator_keys=[key])).coordinators[0]
    assert older.error_code == E.INVALID_REQUEST, "key type SHARE needs version 6"
    client.close()


def test_share_state_rpcs_and_their_errors(broker):
    client = WireClient("127.0.0.1", broker.port)
    tid = topic_id(client, "state-share")
    first = read(client, tid, 0)
    assert (first.error_code, first.error_message) == (E.INVALID_REQUEST, READ_UNINITIALIZED)
    assert (write(client, tid, 0, 0, 0).error_message, summary(client, tid).start_offset) == (WRITE_UNINITIALIZED, -1)
    assert init(client, tid, 0, 10)[0].partitions[0].error_code == E.NONE
    state = read(client, tid, 3)
    assert (state.error_code, state.start_offset, state.state_epoch, state.state_batches) == (E.NONE, 10, 0, [])
    assert write(client, tid, 0, 3, 10, [(10, 12, 2, 1), (13, 14, 0, 1)]).error_code == E.NONE
    state = read(client, tid, 3)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches] == \
        [(10, 12, 2, 1), (13, 14, 0, 1)]
    assert read(client, tid, 2).error_code == E.FENCED_LEADER_EPOCH
    assert write(client, tid, 0, 2, 10).error_code == E.FENCED_LEADER_EPOCH
    s = summary(client, tid)
    assert (s.error_code, s.start_offset, s.leader_epoch, s.state_epoch) == (E.NONE, 10, 3, 0)
    assert init(client, tid, 1, 20)[0].partitions[0].error_code == E.NONE        # offsets reset: a new state epoch
    assert write(client, tid, 0, 3, 20).error_code == E.FENCED_STATE_EPOCH
    assert init(client, tid, 0, 0)[0].partitions[0].error_code == E.FENCED_STATE_EPOCH
    unknown = init(client, bytes(range(16)), 0, 0)[0].partitions[0]
    assert unknown.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert init(client, tid, 0, 0, partition=7)[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert init(client, tid, 0, 0, group="") == [], "an empty group id: no results at all, as Kafka answers"
    # the state is in __share_group_state: a restart reads it back
    broker.restart()
    client = WireClient("127.0.0.1", broker.port)
    state = read(client, tid, 3)
    assert (state.error_code, state.start_offset, state.state_epoch) == (E.NONE, 20, 1)
    deleted = client.call(86, 0, Del(group_id=GROUP, topics=[Del.DeleteStateData(topic_id=tid, partitions=[
        Del.PartitionData(partition=0)])])).results[0].partitions[0]
    assert deleted.error_code == E.NONE and read(client, tid, 3).error_code == E.INVALID_REQUEST
    client.close()
