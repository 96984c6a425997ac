"""The group coordinator over the wire: an in-process broker and requests built from our codecs.

Each member of a group gets its own connection, because a parked JoinGroup or
SyncGroup holds its connection's later requests back, as in Kafka. Timeouts are
short (group.min.session.timeout.ms is lowered) so that expiry scenarios run
fast; the tests wait for outcomes and assert their order and content, never
how long they took.
"""
from __future__ import annotations

import asyncio
import os
import struct
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from wire import AsyncWireClient, WireClient, decode_response

from kafka_compat.group.coordinator_records import (
    GROUP_METADATA_TOPIC_NAME,
    OffsetAndMetadata,
    group_metadata_key,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_key,
    read_offset_value,
)
from kafka_compat.group.coordinator_runtime import CoordinatorRuntime
from kafka_compat.protocol.errors import ErrorCode as E
from kafka_compat.protocol.frames import parse_request
from kafka_compat.protocol.messages import APIS
from kafka_compat.protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from kafka_compat.protocol.messages.delete_groups import DeleteGroupsRequest
from kafka_compat.protocol.messages.describe_groups import DescribeGroupsRequest
from kafka_compat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafka_compat.protocol.messages.heartbeat import HeartbeatRequest
from kafka_compat.protocol.messages.join_group import JoinGroupRequest
from kafka_compat.protocol.messages.leave_group import LeaveGroupRequest
from kafka_compat.protocol.messages.list_groups import ListGroupsRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.offset_commit import OffsetCommitRequest
from kafka_compat.protocol.messages.offset_delete import OffsetDeleteRequest
from kafka_compat.protocol.messages.offset_fetch import OffsetFetchRequest
from kafka_compat.protocol.messages.sync_group import SyncGroupRequest
from kafka_compat.protocol.records import batches
from kafka_compat.server.broker import Broker
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.testing import EmbeddedBroker

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 8, 9, 11, 12, 13, 14
DESCRIBE, LIST, DELETE, OFFSET_DELETE = 15, 16, 42, 47
GOLDEN = Path(__file__).parent / "golden" / "frames"
WAIT = 20.0     # seconds an outcome may take before the test gives up (a hang, not a timing check)


def settings(tmp_path, **overrides) -> BrokerConfig:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path), "num.partitions": "1",
             "offsets.topic.num.partitions": "4", "group.initial.rebalance.delay.ms": "100",
             "group.min.session.timeout.ms": "10"}
    props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return BrokerConfig.from_properties(props)


@asynccontextmanager
async def running(tmp_path, **overrides):
    b = Broker(settings(tmp_path, **overrides))
    await b.start()
    await b.group_coordinator.wait_loaded()
    try:
        yield b
    finally:
        await b.stop()


async def connect(b) -> AsyncWireClient:
    return await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)


def subscription(*topics: str) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    ConsumerProtocolSubscription(topics=list(topics)).encode_into(out, 0)
    return bytes(out)


async def create_topic(b, name: str, partitions: int = 1) -> None:
    b.controller.create_topic(name, partitions, 1, {})


class Member:
    """One group member on its own connection."""

    def __init__(self, client: AsyncWireClient, group: str, protocols=None, instance=None,
                 session_ms: int = 10000, rebalance_ms: int = 10000, version: int = 7):
        self.c, self.group, self.instance = client, group, instance
        self.protocols = list(protocols or [("range", subscription("t"))])
        self.session_ms, self.rebalance_ms, self.version = session_ms, rebalance_ms, version
        self.member_id, self.generation = "", -1

    async def join(self, protocol_type: str = "consumer", retry_member_id_required: bool = True):
        req = JoinGroupRequest(group_id=self.group, session_timeout_ms=self.session_ms,
                               rebalance_timeout_ms=self.rebalance_ms, member_id=self.member_id,
                               group_instance_id=self.instance, protocol_type=protocol_type,
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                                          for n, m in self.protocols])
        resp = await self.c.call(JOIN, self.version, req)
        if resp.error_code == E.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            if retry_member_id_required:
                return await self.join(protocol_type)
        if resp.error_code == E.NONE:
            self.member_id, self.generation = resp.member_id, resp.generation_id
        return resp

    async def sync(self, assignments: dict[str, bytes] | None = None, version: int = 5):
        req = SyncGroupRequest(group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                               group_instance_id=self.instance, protocol_type="consumer", protocol_name="range",
                               assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                            for m, a in (assignments or {}).items()])
        return await self.c.call(SYNC, version, req)

    async def heartbeat(self, member_id=None, generation=None):
        return (await self.c.call(HEARTBEAT, 4, HeartbeatRequest(
            group_id=self.group, generation_id=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance))).error_code

    async def commit(self, topic: str, offsets: dict[int, int], metadata: str = "", version: int = 8):
        req = OffsetCommitRequest(group_id=self.group, generation_id_or_member_epoch=self.generation,
                                  member_id=self.member_id, group_instance_id=self.instance,
                                  topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                                      OffsetCommitRequest.OffsetCommitRequestPartition(
                                          partition_index=p, committed_offset=o, committed_metadata=metadata)
                                      for p, o in offsets.items()])])
        resp = await self.c.call(OFFSET_COMMIT, version, req)
        return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}

    async def leave(self):
        return await self.c.call(LEAVE, 5, LeaveGroupRequest(group_id=self.group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=self.member_id, group_instance_id=self.instance)]))


async def members(b, group: str, n: int, **kw) -> list[Member]:
    return [Member(await connect(b), group, **kw) for _ in range(n)]


async def stable_group(b, group: str, n: int, **kw) -> tuple[list[Member], dict[str, bytes]]:
    """n members joined in one generation, the leader's assignment synced: (members, assignments)."""
    return await settled(await members(b, group, n, **kw))


async def settled(ms: list[Member]) -> tuple[list[Member], dict[str, bytes]]:
    """These members joined in one generation and synced: (members, assignments)."""
    # group.initial.rebalance.delay.ms (100 here) gathers members that start together in one generation
    joined = await asyncio.gather(*(m.join() for m in ms))
    assert len({r.generation_id for r in joined}) == 1
    leader = next(m for m, r in zip(ms, joined) if r.leader == r.member_id)
    assignment = {m.member_id: f"assignment of {m.member_id}".encode() for m in ms}
    synced = await asyncio.gather(*(m.sync(assignment if m is leader else None) for m in ms))
    assert all(s.error_code == E.NONE for s in synced)
    return ms, assignment


async def until(predicate, what: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.02)


def offsets_log_records(b, group: str) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) of the group's `__consumer_offsets` partition, in log order."""
    data = b.replica_manager.read_local(GROUP_METADATA_TOPIC_NAME, b.group_coordinator.partition_for(group), 0,
                                        1 << 30).records.read_bytes()
    return [(bytes(r.key), None if r.value is None else bytes(r.value))
            for batch in batches(data) for r in batch.records()]


# ---------------------------------------------------------------- records and partitioning
def test_keys_and_values_are_encoded_as_kafka_writes_them():
    # int16 key version 1, then group, topic (int16-length strings) and partition
    assert offset_commit_key("g", "t", 3) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert group_metadata_key("grp") == b"\x00\x02\x00\x03grp"
    # value version 3: offset, leader epoch, metadata, commit timestamp
    v = offset_commit_value(OffsetAndMetadata(42, 7, "meta", 1000))
    assert v == (b"\x00\x03" + (42).to_bytes(8, "big") + (7).to_bytes(4, "big") + b"\x00\x04meta"
                 + (1000).to_bytes(8, "big"))
    # an explicit expire timestamp needs value version 1: offset, metadata, commit, expire
    v1 = offset_commit_value(OffsetAndMetadata(42, -1, "", 1000, 5000))
    assert v1[:2] == b"\x00\x01" and v1.endswith((5000).to_bytes(8, "big"))
    assert read_offset_value(v1) == OffsetAndMetadata(42, -1, "", 1000, 5000)
    assert read_offset_value(v) == OffsetAndMetadata(42, 7, "meta", 1000, -1)
    assert read_key(offset_commit_key("g", "t", 3)) == ("g", "t", 3)
    assert read_key(b"\x00\x09junk") is None


def test_partition_for_is_javas_string_hash():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -(1 << 31)     # Integer.MIN_VALUE: abs() is 0 in Kafka
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("abc", 50) == 96354 % 50
    assert java_string_hash("é€😀") == _java_hash_reference("é€😀")


def _java_hash_reference(s: str) -> int:
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "big")) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


# ---------------------------------------------------------------- FindCoordinator
def test_find_coordinator_single_and_batched_creates_the_compacted_offsets_topic(tmp_path):
    async def scenario():
        async with running(tmp_path, offsets_topic_num_partitions=7) as b:
            assert b.controller.topics.get(GROUP_METADATA_TOPIC_NAME) is None
            c = await connect(b)
            old = await c.call(FIND_COORDINATOR, 0, FindCoordinatorRequest(key="g"))
            v2 = await c.call(FIND_COORDINATOR, 2, FindCoordinatorRequest(key="g", key_type=0))
            batched = await c.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0,
                                                                               coordinator_keys=["a", "b", "c"]))
            txn = await c.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]))
            bad = await c.call(FIND_COORDINATOR, 6, FindCoordinatorRequest(key_type=9, coordinator_keys=["x"]))
            topic = b.controller.topics.get(GROUP_METADATA_TOPIC_NAME)
            await c.close()
            return b.bound[0].port, old, v2, batched, txn, bad, topic

    port, old, v2, batched, txn, bad, topic = asyncio.run(scenario())
    assert (old.error_code, old.node_id, old.port) == (E.NONE, 0, port)
    assert (v2.error_code, v2.error_message, v2.port) == (E.NONE, "NONE", port)
    assert [(x.key, x.error_code, x.port) for x in batched.coordinators] == [(k, 0, port) for k in "abc"]
    assert [(x.key, x.error_code, x.port) for x in txn.coordinators] == [("t", 0, port)]
    assert bad.coordinators[0].error_code == E.INVALID_REQUEST
    assert topic.partitions == 7 and topic.configs["cleanup.policy"] == "compact"


# ---------------------------------------------------------------- JoinGroup and SyncGroup
def test_first_join_from_v4_needs_a_member_id_and_older_versions_do_not(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            m4 = Member(await connect(b), "g4", version=4)
            first = await m4.join(retry_member_id_required=False)
            second = await m4.join()
            m3 = Member(await connect(b), "g3", version=3)
            direct = await m3.join(retry_member_id_required=False)
            return first, second, direct

    first, second, direct = asyncio.run(scenario())
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
    assert second.error_code == E.NONE and second.member_id == first.member_id
    assert second.generation_id == 1 and second.leader == second.member_id
    assert [m.member_id for m in second.members] == [first.member_id]
    assert direct.error_code == E.NONE and direct.member_id and direct.generation_id == 1


def test_protocol_is_one_every_member_supports_else_inconsistent(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            a = Member(await connect(b), "g", protocols=[("range", b"A"), ("roundrobin", b"a")])
            c = Member(await connect(b), "g", protocols=[("cooperative-sticky", b"C"), ("roundrobin", b"c")])
            ra, rc = await asyncio.gather(a.join(), c.join())
            stranger = Member(await connect(b), "g", protocols=[("sticky", b"s")])
            rs = await stranger.join()
            other_type = Member(await connect(b), "g", protocols=[("roundrobin", b"x")])
            rt = await other_type.join(protocol_type="connect")
            return ra, rc, rs, rt

    ra, rc, rs, rt = asyncio.run(scenario())
    assert ra.protocol_name == rc.protocol_name == "roundrobin"
    leader = ra if ra.leader == ra.member_id else rc
    # the leader sees each member's metadata for the chosen protocol, byte for byte
    assert sorted(m.metadata for m in leader.members) == [b"a", b"c"]
    assert rs.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert rt.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_hands_every_member_the_leaders_assignment_intact(tmp_path):
    payloads = [os.urandom(n) for n in (0x10000, 1, 777)]

    async def scenario():
        async with running(tmp_path) as b:
            ms = await members(b, "g", 3)
            joined = await asyncio.gather(*(m.join() for m in ms))
            leader = next(m for m, r in zip(ms, joined) if r.leader == r.member_id)
            followers = [m for m in ms if m is not leader]
            # followers sync first and wait for the leader
            waiting = [asyncio.ensure_future(f.sync()) for f in followers]
            await asyncio.sleep(0.05)
            assert not any(w.done() for w in waiting)
            assignment = {m.member_id: p for m, p in zip(ms, payloads)}
            mine = await leader.sync(assignment)
            got = {leader.member_id: mine.assignment}
            for f, w in zip(followers, waiting):
                got[f.member_id] = (await w).assignment
            return assignment, got, mine

    assignment, got, mine = asyncio.run(scenario())
    assert got == assignment
    assert (mine.protocol_type, mine.protocol_name) == ("consumer", "range")


def test_rebalance_when_a_member_joins_and_when_one_leaves(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            (m1, m2), _ = await stable_group(b, "g", 2)
            gen = m1.generation
            m3 = Member(await connect(b), "g")
            joining = asyncio.ensure_future(m3.join())
            hb = await until(lambda: _rebalancing(m1), "a heartbeat to see the rebalance")
            rejoined = await asyncio.gather(m1.join(), m2.join(), joining)
            left = await m2.leave()
            hb_after_leave = await m1.heartbeat()
            final = await asyncio.gather(m1.join(), m3.join())
            return gen, hb, rejoined, left, hb_after_leave, final

    gen, hb, rejoined, left, hb_after_leave, final = asyncio.run(scenario())
    assert hb == E.REBALANCE_IN_PROGRESS
    assert {r.generation_id for r in rejoined} == {gen + 1}
    assert len(next(r for r in rejoined if r.leader == r.member_id).members) == 3
    assert left.error_code == E.NONE and left.members[0].error_code == E.NONE
    assert hb_after_leave == E.REBALANCE_IN_PROGRESS
    assert {r.generation_id for r in final} == {gen + 2}


async def _rebalancing(member: Member):
    code = await member.heartbeat()
    return code if code == E.REBALANCE_IN_PROGRESS else None


def test_heartbeat_errors(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            (m,), _ = await stable_group(b, "g", 1)
            return (await m.heartbeat(), await m.heartbeat(generation=m.generation + 5),
                    await m.heartbeat(member_id="nobody"),
                    (await m.c.call(HEARTBEAT, 0, HeartbeatRequest(group_id="unknown", generation_id=1,
                                                                   member_id="x"))).error_code,
                    (await m.c.call(HEARTBEAT, 0, HeartbeatRequest(group_id="", generation_id=1,
                                                                   member_id="x"))).error_code)

    assert asyncio.run(scenario()) == (E.NONE, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID,
                                       E.INVALID_GROUP_ID)


def test_session_timeout_removes_a_silent_member_and_the_group_rebalances(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            # the silent member's session is short; the live one's long, so no stall of the loop expires it
            (alive, silent), _ = await settled([Member(await connect(b), "g", session_ms=10000),
                                                Member(await connect(b), "g", session_ms=300)])
            gen = alive.generation
            # only `alive` heartbeats; the other went away without LeaveGroup
            await until(lambda: _rebalancing(alive), "the silent member's session to expire")
            again = await alive.join()
            return gen, silent.member_id, again, await silent.heartbeat()

    gen, silent_id, again, silent_hb = asyncio.run(scenario())
    assert again.generation_id == gen + 1
    assert [m.member_id for m in again.members] == [again.member_id]
    assert silent_id != again.member_id and silent_hb == E.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_gathers_starting_members_into_one_generation(tmp_path):
    async def scenario():
        async with running(tmp_path, group_initial_rebalance_delay_ms=500) as b:
            ms = await members(b, "g", 3)
            first = asyncio.ensure_future(ms[0].join())
            await asyncio.sleep(0.05)
            rest = await asyncio.gather(ms[1].join(), ms[2].join())
            return [await first, *rest]

    joined = asyncio.run(scenario())
    assert {r.generation_id for r in joined} == {1}
    leader = next(r for r in joined if r.leader == r.member_id)
    assert len(leader.members) == 3


def test_leave_group_batch_and_old_single_member_form(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            (m1, m2, m3), _ = await stable_group(b, "g", 3)
            batch = await m1.c.call(LEAVE, 3, LeaveGroupRequest(group_id="g", members=[
                LeaveGroupRequest.MemberIdentity(member_id=m1.member_id),
                LeaveGroupRequest.MemberIdentity(member_id="stranger")]))
            old = await m2.c.call(LEAVE, 0, LeaveGroupRequest(group_id="g", member_id=m2.member_id))
            old_unknown = await m2.c.call(LEAVE, 1, LeaveGroupRequest(group_id="g", member_id="stranger"))
            rejoin = await m3.join()
            return batch, old, old_unknown, rejoin, m3.member_id

    batch, old, old_unknown, rejoin, m3_id = asyncio.run(scenario())
    assert [(x.member_id != "stranger", x.error_code) for x in batch.members] == [
        (True, E.NONE), (False, E.UNKNOWN_MEMBER_ID)]
    assert old.error_code == E.NONE and old_unknown.error_code == E.UNKNOWN_MEMBER_ID
    assert [m.member_id for m in rejoin.members] == [m3_id]


def test_static_member_restart_keeps_its_assignment_without_a_rebalance(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            a = Member(await connect(b), "g", version=5)
            s = Member(await connect(b), "g", instance="instance-1", version=5)
            joined = await asyncio.gather(a.join(), s.join())
            leader = a if joined[0].leader == a.member_id else s
            assignment = {a.member_id: b"A", s.member_id: b"S"}
            await asyncio.gather(*(m.sync(assignment if m is leader else None) for m in (a, s)))
            gen = a.generation
            # the static member restarts: a new process, unknown member id, same instance id
            restarted = Member(await connect(b), "g", instance="instance-1", version=5)
            back = await restarted.join()
            synced = await restarted.sync()
            return (gen, back, synced, await a.heartbeat(), await s.heartbeat(), await restarted.heartbeat(),
                    s.member_id)

    gen, back, synced, a_hb, old_hb, new_hb, old_id = asyncio.run(scenario())
    assert back.error_code == E.NONE and back.generation_id == gen and back.member_id != old_id
    assert back.member_id.startswith("instance-1-")
    assert synced.assignment == b"S"
    assert a_hb == E.NONE and new_hb == E.NONE       # no rebalance happened
    assert old_hb == E.FENCED_INSTANCE_ID


def test_static_member_joining_with_v9_learns_it_leads_but_skips_assignment(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            s = Member(await connect(b), "g", instance="boss", version=9)
            await s.join()
            await s.sync({s.member_id: b"mine"})
            restarted = Member(await connect(b), "g", instance="boss", version=9)
            return await restarted.join(), (await restarted.sync()).assignment

    back, assignment = asyncio.run(scenario())
    assert back.skip_assignment and back.leader == back.member_id and len(back.members) == 1
    assert assignment == b"mine"


def test_group_max_size(tmp_path):
    async def scenario():
        async with running(tmp_path, group_max_size=1) as b:
            (m1,), _ = await stable_group(b, "g", 1)
            extra = Member(await connect(b), "g")
            return await extra.join()

    assert asyncio.run(scenario()).error_code == E.GROUP_MAX_SIZE_REACHED


# ---------------------------------------------------------------- offsets
def test_simple_consumer_commit_and_fetch_round_trip_metadata(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            await create_topic(b, "t", 3)
            c = await connect(b)
            simple = Member(c, "simple")      # generation -1, member id "": no group management
            v2 = await simple.commit("t", {0: 5, 1: 7}, metadata="héllo wörld", version=2)
            v0 = await c.call(OFFSET_COMMIT, 0, OffsetCommitRequest(group_id="simple", topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=2, committed_offset=9,
                                                                     committed_metadata=None)])]))
            unknown = await simple.commit("missing", {0: 1})
            bad_partition = await simple.commit("t", {5: 1})
            too_big = await simple.commit("t", {0: 1}, metadata="x" * 5000)
            v1 = await c.call(OFFSET_FETCH, 1, OffsetFetchRequest(group_id="simple", topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1, 2])]))
            v7_all = await c.call(OFFSET_FETCH, 7, OffsetFetchRequest(group_id="simple", topics=None))
            none = await c.call(OFFSET_FETCH, 5, OffsetFetchRequest(group_id="nobody", topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
            return v2, v0, unknown, bad_partition, too_big, v1, v7_all, none

    v2, v0, unknown, bad_partition, too_big, v1, v7_all, none = asyncio.run(scenario())
    assert v2 == {0: E.NONE, 1: E.NONE}
    assert v0.topics[0].partitions[0].error_code == E.NONE
    assert unknown == {0: E.UNKNOWN_TOPIC_OR_PARTITION} and bad_partition == {5: E.UNKNOWN_TOPIC_OR_PARTITION}
    assert too_big == {0: E.OFFSET_METADATA_TOO_LARGE}
    got = {p.partition_index: (p.committed_offset, p.metadata, p.error_code) for p in v1.topics[0].partitions}
    assert got == {0: (5, "héllo wörld", 0), 1: (7, "héllo wörld", 0), 2: (9, "", 0)}
    every = {(t.name, p.partition_index): p.committed_offset for t in v7_all.topics for p in t.partitions}
    assert every == {("t", 0): 5, ("t", 1): 7, ("t", 2): 9}
    p = none.topics[0].partitions[0]
    assert (p.committed_offset, p.metadata, p.error_code, none.error_code) == (-1, "", 0, 0)


def test_offset_fetch_v8_several_groups_and_v10_topic_ids(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            await create_topic(b, "t", 2)
            topic_id = b.controller.topics.get("t").topic_id
            c = await connect(b)
            await Member(c, "g1").commit("t", {0: 11})
            await Member(c, "g2").commit("t", {1: 22})
            by_id = await c.call(OFFSET_COMMIT, 10, OffsetCommitRequest(group_id="g3", topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(topic_id=topic_id, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=33)])]))
            v8 = await c.call(OFFSET_FETCH, 8, OffsetFetchRequest(groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g1", topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])]),
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g2", topics=None),
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id="", topics=None)]))
            v10 = await c.call(OFFSET_FETCH, 10, OffsetFetchRequest(groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g3", topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=[0])]),
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g3", topics=None)]))
            return topic_id, by_id, v8, v10

    topic_id, by_id, v8, v10 = asyncio.run(scenario())
    assert by_id.topics[0].topic_id == topic_id and by_id.topics[0].partitions[0].error_code == 0
    g1, g2, empty = v8.groups
    assert [(p.partition_index, p.committed_offset) for p in g1.topics[0].partitions] == [(0, 11), (1, -1)]
    assert [(t.name, p.partition_index, p.committed_offset) for t in g2.topics for p in t.partitions] == [
        ("t", 1, 22)]
    assert empty.error_code == 0 and empty.topics == []
    for group in v10.groups:
        assert [(t.topic_id, p.committed_offset) for t in group.topics for p in t.partitions] == [(topic_id, 33)]


def test_member_commits_are_checked_against_the_generation(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            await create_topic(b, "t", 1)
            (m,), _ = await stable_group(b, "g", 1)
            ok = await m.commit("t", {0: 3})
            stale = Member(m.c, "g")
            stale.member_id, stale.generation = m.member_id, m.generation - 1
            outsider = Member(m.c, "g")         # no member id, no generation: not allowed in a live group
            unknown_v8 = Member(m.c, "nogroup")
            unknown_v8.generation, unknown_v8.member_id = 3, "x"
            return (ok, await stale.commit("t", {0: 4}), await outsider.commit("t", {0: 5}),
                    await unknown_v8.commit("t", {0: 1}), await unknown_v8.commit("t", {0: 1}, version=9))

    ok, stale, outsider, unknown_v8, unknown_v9 = asyncio.run(scenario())
    assert ok == {0: E.NONE}
    assert stale == {0: E.ILLEGAL_GENERATION}
    assert outsider == {0: E.UNKNOWN_MEMBER_ID}
    assert unknown_v8 == {0: E.ILLEGAL_GENERATION} and unknown_v9 == {0: E.GROUP_ID_NOT_FOUND}


def test_commits_and_rebalances_are_kafka_records_in_the_groups_partition(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            await create_topic(b, "t", 1)
            (m,), assignment = await stable_group(b, "g", 1)
            await m.commit("t", {0: 12}, metadata="m")
            return offsets_log_records(b, "g"), assignment, m.member_id

    records, assignment, member_id = asyncio.run(scenario())
    keys = [read_key(k) for k, _ in records]
    assert keys[-1] == ("g", "t", 0)
    assert read_offset_value(records[-1][1])[:3] == (12, -1, "m")
    group_values = [v for k, v in records if k == group_metadata_key("g")]
    assert group_values and group_values[-1][:2] == b"\x00\x03"
    assert assignment[member_id] in group_values[-1] and member_id.encode() in group_values[-1]


# ---------------------------------------------------------------- persistence
def test_restart_serves_committed_offsets_and_the_stable_group(tmp_path, monkeypatch):
    async def first_life():
        async with running(tmp_path) as b:
            await create_topic(b, "t", 2)
            (m,), assignment = await stable_group(b, "g", 1)
            await m.commit("t", {0: 40, 1: 41}, metadata="keep me")
            await Member(await connect(b), "simple").commit("t", {0: 7})
            return m.member_id, m.generation, assignment

    async def second_life():
        # hold the background load back, to see the state before it has run
        gate = asyncio.Event()
        real = CoordinatorRuntime._load

        async def gated(self, index, replay):
            await gate.wait()
            return await real(self, index, replay)

        monkeypatch.setattr(CoordinatorRuntime, "_load", gated)
        b = Broker(settings(tmp_path))
        await b.start()
        coordinator = b.group_coordinator
        during = (coordinator.handle_fetch_offsets("g", None, False)[0],
                  coordinator.handle_heartbeat("g", member_id, None, generation),
                  coordinator.handle_list_groups(None, None)[0])
        gate.set()
        await coordinator.wait_loaded()
        after_error, offsets = coordinator.handle_fetch_offsets("g", None, False)
        simple = coordinator.handle_fetch_offsets("simple", [("t", 0)], False)
        hb = coordinator.handle_heartbeat("g", member_id, None, generation)
        state = coordinator.groups.get_group("g").state.value
        await b.stop()
        return during, after_error, offsets, simple, hb, state

    member_id, generation, assignment = asyncio.run(first_life())
    during, after_error, offsets, simple, hb, state = asyncio.run(second_life())
    assert during == (E.COORDINATOR_LOAD_IN_PROGRESS, E.NONE, E.COORDINATOR_LOAD_IN_PROGRESS)
    assert after_error == E.NONE
    assert sorted((t, p, o.offset, o.metadata) for t, p, o in offsets) == [
        ("t", 0, 40, "keep me"), ("t", 1, 41, "keep me")]
    assert simple[1][0][2].offset == 7
    assert (hb, state) == (E.NONE, "Stable")


def test_a_member_keeps_its_session_across_a_broker_restart(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            (m,), assignment = await stable_group(b, "g", 1)
        async with running(tmp_path) as b:
            m.c = await connect(b)
            return await m.heartbeat(), (await m.sync()).assignment, assignment[m.member_id]

    hb, synced, expected = asyncio.run(scenario())
    assert hb == E.NONE and synced == expected


def test_deleting_a_topic_deletes_the_offsets_committed_for_it(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            await create_topic(b, "gone", 2)
            await create_topic(b, "kept", 1)
            c = await connect(b)
            await Member(c, "both").commit("gone", {0: 1, 1: 2})
            await Member(c, "both").commit("kept", {0: 3})
            await Member(c, "only-gone").commit("gone", {0: 4})
            b.controller.delete_topic("gone")
            coordinator = b.group_coordinator
            return (sorted(coordinator.offsets.offsets["both"]), coordinator.groups.get_group("only-gone"),
                    offsets_log_records(b, "only-gone"))

    both, only_gone, log_records = asyncio.run(scenario())
    assert both == [("kept", 0)]
    assert only_gone is None        # an empty group left without offsets is gone too
    assert (offset_commit_key("only-gone", "gone", 0), None) in log_records


# ---------------------------------------------------------------- expiration
def test_offsets_of_an_empty_group_expire_and_the_group_with_them(tmp_path):
    async def scenario():
        async with running(tmp_path, offsets_retention_minutes=1) as b:
            await create_topic(b, "t", 1)
            (m,), _ = await stable_group(b, "g", 1)
            await m.commit("t", {0: 5})
            await m.leave()
            await Member(await connect(b), "simple").commit("t", {0: 6})
            coordinator = b.group_coordinator
            kept = coordinator.offsets.expire_offsets()                # nothing is old enough yet
            later = coordinator.offsets.clock() + 61_000
            coordinator.offsets.clock = lambda: later
            group_state = coordinator.groups.get_group("g").state.value
            removed = coordinator.offsets.expire_offsets()
            return (kept, group_state, removed, coordinator.groups.get_group("g"),
                    coordinator.groups.get_group("simple"),
                    offsets_log_records(b, "g"), offsets_log_records(b, "simple"))

    kept, state, removed, g, simple, g_log, simple_log = asyncio.run(scenario())
    assert kept == 0 and state == "Empty"
    assert removed == 2 and g is None and simple is None
    # tombstones: the offset key and (for a group that had members) the group key, with null values
    assert (offset_commit_key("g", "t", 0), None) in g_log and (group_metadata_key("g"), None) in g_log
    assert (offset_commit_key("simple", "t", 0), None) in simple_log
    assert (group_metadata_key("simple"), None) not in simple_log     # it never stored metadata


# ---------------------------------------------------------------- admin APIs
def test_list_describe_delete_groups_and_delete_offsets(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            await create_topic(b, "t", 2)
            await create_topic(b, "other", 1)
            (m1, m2), assignment = await stable_group(
                b, "live", 2, protocols=[("range", subscription("t"))])
            await m1.commit("t", {0: 1})
            await m1.commit("other", {0: 2})
            c = await connect(b)
            await Member(c, "idle").commit("t", {0: 3})
            listed = await c.call(LIST, 5, ListGroupsRequest())
            stable_only = await c.call(LIST, 4, ListGroupsRequest(states_filter=["stable"]))
            consumer_type = await c.call(LIST, 5, ListGroupsRequest(types_filter=["consumer"]))
            described = await c.call(DESCRIBE, 5, DescribeGroupsRequest(groups=["live", "ghost"],
                                                                        include_authorized_operations=True))
            ghost6 = await c.call(DESCRIBE, 6, DescribeGroupsRequest(groups=["ghost"]))
            odel = await c.call(OFFSET_DELETE, 0, OffsetDeleteRequest(group_id="live", topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(name="t", partitions=[
                    OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]),
                OffsetDeleteRequest.OffsetDeleteRequestTopic(name="other", partitions=[
                    OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]))
            deleted = await c.call(DELETE, 2, DeleteGroupsRequest(groups_names=["live", "idle", "ghost"]))
            idle_after = await c.call(OFFSET_FETCH, 7, OffsetFetchRequest(group_id="idle", topics=None))
            live_after = await c.call(OFFSET_FETCH, 7, OffsetFetchRequest(group_id="live", topics=None))
            return assignment, (m1, m2), listed, stable_only, consumer_type, described, ghost6, odel, deleted, \
                idle_after, live_after

    (assignment, ms, listed, stable_only, consumer_type, described, ghost6, odel, deleted, idle_after,
     live_after) = asyncio.run(scenario())
    assert sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups) == [
        ("idle", "", "Empty", "classic"), ("live", "consumer", "Stable", "classic")]
    assert [g.group_id for g in stable_only.groups] == ["live"]
    assert consumer_type.groups == []
    live, ghost = described.groups
    assert (live.group_state, live.protocol_type, live.protocol_data) == ("Stable", "consumer", "range")
    assert {m.member_id: (m.member_assignment, m.member_metadata) for m in live.members} == {
        m.member_id: (assignment[m.member_id], subscription("t")) for m in ms}
    assert all(m.client_host == "/127.0.0.1" and m.client_id == "wire" for m in live.members)
    assert live.authorized_operations != -2147483648
    assert (ghost.error_code, ghost.group_state) == (E.NONE, "Dead")
    assert ghost6.groups[0].error_code == E.GROUP_ID_NOT_FOUND
    assert {(t.name, t.partitions[0].error_code) for t in odel.topics} == {
        ("t", E.GROUP_SUBSCRIBED_TO_TOPIC), ("other", E.NONE)}
    assert {r.group_id: r.error_code for r in deleted.results} == {
        "live": E.NON_EMPTY_GROUP, "idle": E.NONE, "ghost": E.GROUP_ID_NOT_FOUND}
    assert idle_after.topics == []
    assert [(t.name, p.committed_offset) for t in live_after.topics for p in t.partitions] == [("t", 1)]


# ---------------------------------------------------------------- real clients' bytes
def _golden_group_requests():
    keys = {FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE}
    for path in sorted(GOLDEN.glob("*/*-request.bin")):
        if int(path.name.split("-")[0]) in keys:
            yield path


@pytest.fixture(scope="module")
def embedded():
    with EmbeddedBroker({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "2"}) as b:
        c = WireClient("127.0.0.1", b.port)       # topics the recorded requests name, auto-created
        c.call(3, 4, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in
                                             ("t", "topic", "test")], allow_auto_topic_creation=True))
        c.close()
        yield b


@pytest.mark.parametrize("path", list(_golden_group_requests()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_requests_real_clients_sent_get_answers_they_can_read(embedded, path):
    frame = path.read_bytes()
    request = parse_request(frame)
    c = WireClient("127.0.0.1", embedded.port)
    try:
        c.send_raw(len(frame).to_bytes(4, "big") + frame)
        answer = c.read_frame()
    finally:
        c.close()
    correlation, body = decode_response(request.api_key, request.api_version, answer)
    assert correlation == request.correlation_id
    assert isinstance(body, APIS[request.api_key].response)
    # the answer to a JoinGroup without a member id, from v4, asks for one
    if request.api_key == JOIN and request.api_version >= 4 and not request.body.member_id:
        assert body.error_code == E.MEMBER_ID_REQUIRED and body.member_id
