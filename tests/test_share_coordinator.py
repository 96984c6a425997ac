"""The share coordinator in-process: its records, the shard's rules (initialization, leader and state
epochs, snapshots after updates, replay) and the coordinator's answers to the share-state RPCs over a
ReplicaManager and MetadataCache stand-in (who serves which key, loading, errors, the persister)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kafka_compat.protocol.errors import ErrorCode as E
from kafka_compat.protocol.messages.share_coordinator import ShareUpdateKey, ShareUpdateValue
from kafka_compat.server.delayed_produce import ProduceResult
from kafka_compat.server.share.persister import DefaultStatePersister
from kafka_compat.server.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, ShareCoordinator
from kafka_compat.server.share.share_coordinator_shard import (
    PersistedState,
    ShareCoordinatorShard,
    combine_state_batches,
    coordinator_key,
    java_string_hash,
    parse_coordinator_key,
    partition_for,
    read_record,
    snapshot_record,
)

TID = bytes(range(16))
K = ("g", TID, 3)
AV, AK, AR = 0, 2, 4


def test_records_keys_and_partitions():
    assert java_string_hash("hello") == 99162322 and java_string_hash("") == 0
    assert 0 <= partition_for("g", TID, 3, 50) < 50
    assert parse_coordinator_key(coordinator_key("g", TID, 3)) == K
    for bad in ("", "g:x", " :AAECAwQFBgcICQoLDA0ODw:1", "g:nope:1", "g:AAECAwQFBgcICQoLDA0ODw:x"):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)
    key, value = snapshot_record("g", TID, 3, PersistedState(5, 0, [(5, 6, 2, 1)]), 7, 1000)
    assert key[:2] == b"\x00\x00" and value[:2] == b"\x00\x00"       # ShareSnapshot: key type 0, value version 0
    (g, t, p), kind, v = read_record(key, value)
    assert (g, t, p, kind, v.start_offset, v.leader_epoch) == ("g", TID, 3, 0, 5, 7)
    shard = ShareCoordinatorShard()
    shard.replay(key, value)
    update_key = b"\x00\x01" + ShareUpdateKey(group_id="g", topic_id=TID, partition=3).encode(0)
    update = b"\x00\x00" + ShareUpdateValue(snapshot_epoch=0, leader_epoch=7, start_offset=-1, state_batches=[
        ShareUpdateValue.StateBatch(first_offset=6, last_offset=8, delivery_state=4, delivery_count=2)]).encode(0)
    shard.replay(update_key, update)
    assert shard.states[K].batches == [(5, 5, 2, 1), (6, 8, 4, 2)]
    shard.replay(key, None)
    assert K not in shard.states


def test_combine_state_batches():
    assert combine_state_batches([(0, 9, AV, 1)], [(3, 4, AK, 1)], -1) == [(0, 2, AV, 1), (3, 4, AK, 1),
                                                                             (5, 9, AV, 1)]
    assert combine_state_batches([(0, 4, AK, 1)], [(5, 9, AK, 1)], 2) == [(2, 9, AK, 1)], "pruned, merged"


def _apply(shard, result):
    records = result[0]
    for key, value in records:
        shard.replay(key, value)
    return result


def test_shard_initialize_write_read_and_the_epochs():
    shard = ShareCoordinatorShard(updates_per_snapshot=2, clock=lambda: 1)
    records, error, message = shard.write_state(K, 0, 0, 0, -1, [])
    assert (records, error) == ([], E.INVALID_REQUEST) and "uninitialized" in message
    assert shard.read_state(K, 0)[1] == E.INVALID_REQUEST
    _apply(shard, shard.initialize_state(K, 0, 10))
    records, error, _, state = _apply(shard, shard.read_state(K, 5))
    assert error == E.NONE and len(records) == 1 and (state.start_offset, state.batches) == (10, [])
    assert shard.leader_epochs[K] == 5, "a read with a newer leader epoch records it"
    assert _apply(shard, shard.read_state(K, 5))[0] == [], "the same epoch again writes nothing"
    assert shard.read_state(K, 4)[1] == E.FENCED_LEADER_EPOCH
    assert shard.write_state(K, 0, 4, 10, -1, [])[1] == E.FENCED_LEADER_EPOCH
    records, error, _ = _apply(shard, shard.write_state(K, 0, 5, 10, 2, [(10, 11, AK, 1), (12, 14, AV, 1)]))
    assert error == E.NONE and records[0][0][:2] == b"\x00\x01", "a write is a ShareUpdate"
    _apply(shard, shard.write_state(K, 0, 5, 12, 0, [(12, 12, AR, 2)]))
    assert shard.states[K].start_offset == 12 and shard.states[K].batches == [(12, 12, AR, 2), (13, 14, AV, 1)]
    records, error, _ = _apply(shard, shard.write_state(K, 0, 5, 13, 0, []))
    assert records[0][0][:2] == b"\x00\x00", "after updates_per_snapshot updates, a ShareSnapshot"
    assert shard.states[K].snapshot_epoch == 1 and shard.states[K].batches == [(13, 14, AV, 1)]
    # a new state epoch (offsets altered) fences writes and initializations of the old one
    _apply(shard, shard.initialize_state(K, 1, 20))
    assert shard.write_state(K, 0, 5, 20, -1, [])[1] == E.FENCED_STATE_EPOCH
    assert shard.initialize_state(K, 0, 0)[1] == E.FENCED_STATE_EPOCH
    assert shard.write_state(K, -1, -1, 21, -1, [])[1] == E.NONE, "-1 skips both checks"
    assert shard.delete_state(("other", TID, 0)) == ([], E.NONE, None), "deleting nothing writes nothing"
    _apply(shard, shard.delete_state(K))
    assert K not in shard.states and K not in shard.leader_epochs


def test_replaying_the_written_records_gives_the_same_state():
    shard = ShareCoordinatorShard(updates_per_snapshot=3, clock=lambda: 1)
    log = []
    for result in (shard.initialize_state(K, 0, 0), shard.read_state(K, 2),
                   *[shard.write_state(K, 0, 2, i, i, [(i, i + 4, AK if i % 2 else AV, 1)]) for i in range(8)]):
        _apply(shard, result)
        log.extend(result[0])
    again = ShareCoordinatorShard(updates_per_snapshot=3)
    for key, value in log:
        again.replay(key, value)
    assert again.states == shard.states and again.leader_epochs == shard.leader_epochs


# ------------------------------------------------------------ the coordinator over stand-ins
class FakeReplicaManager:
    def __init__(self):
        self.appended = []

    def append_records(self, timeout_ms, acks, entries, origin=None, internal_topics_allowed=False):
        assert acks == -1 and internal_topics_allowed
        self.appended.extend(entries)
        return [ProduceResult(E.NONE)]

    def get_partition(self, topic, index):
        return SimpleNamespace(is_leader=True, leader_epoch=0, topic_id=TID) if topic == SHARE_GROUP_STATE_TOPIC \
            else None


class FakeCache:
    def __init__(self, partitions=4):
        self.topics = {SHARE_GROUP_STATE_TOPIC: SimpleNamespace(partitions=partitions)}

    def get_topic(self, name):
        return self.topics.get(name)

    def topic_by_id(self, topic_id):
        return SimpleNamespace(partitions=8) if topic_id == TID else None

    def partition_state(self, topic, index):
        return SimpleNamespace(leader=1)

    def is_alive(self, broker_id):
        return True


CONFIG = {"share.coordinator.state.topic.num.partitions": 4, "share.coordinator.state.topic.segment.bytes": 1 << 20,
          "share.coordinator.state.topic.min.isr": 1, "share.coordinator.write.timeout.ms": 5000,
          "share.coordinator.load.buffer.size": 1 << 20,
          "share.coordinator.snapshot.update.records.per.snapshot": 500}


def coordinator():
    c = ShareCoordinator(CONFIG, FakeReplicaManager(), FakeCache(), controller=None)
    c.active = True
    return c


def test_who_serves_a_key_and_the_errors_of_the_rpcs():
    async def run():
        c = coordinator()
        p = DefaultStatePersister(c, c.metadata_cache, broker_id=1, timeout_ms=300, backoff_ms=10)
        index = c.partition_for(*K)
        assert await p.initialize(*K, 0, 5) == E.NOT_COORDINATOR, "retried until the deadline, then given up"
        c._read_partition = lambda i: [snapshot_record("g", TID, 3, PersistedState(7, 0, [(7, 8, AK, 1)]), 0, 1)]
        for i in range(4):
            c.on_election(i, 3)
        assert c._not_served(K) == E.COORDINATOR_LOAD_IN_PROGRESS
        await c.wait_loaded()
        assert await p.read(*K, 3) == (E.NONE, PersistedState(7, 0, [(7, 8, AK, 1)])), "loaded from the log"
        assert await p.write(*K, PersistedState(9, 0, []), 2) == E.FENCED_LEADER_EPOCH
        assert await p.write(*K, PersistedState(9, 0, [(9, 9, AV, 1)]), 3) == E.NONE
        assert await p.read(*K, 3) == (E.NONE, PersistedState(9, 0, [(9, 9, AV, 1)]))
        assert await p.read("g", TID, 5, 0) == (E.NONE, None), "never initialized: no state"
        assert await p.initialize("g", bytes(16), 0, 0, 0) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert (await c.write_state(SimpleNamespace(group_id="", topics=[]))).results == [], "empty group: nothing"
        assert await p.delete(*K) == E.NONE and await p.read(*K, 3) == (E.NONE, None)
        c.on_resignation(index, 2)
        assert index in c.owned, "a resignation older than the election is ignored"
        c.on_resignation(index, 4)
        assert index not in c.owned and c._not_served(K) == E.NOT_COORDINATOR
        assert all(topic == SHARE_GROUP_STATE_TOPIC and i == index for topic, i, _ in c.replica_manager.appended)
    asyncio.run(run())
