"""Share groups (KIP-932) without a broker: the simple assignor, share sessions, and ShareGroupHeartbeat's
membership rules (epochs, joining, leaving, fencing, the group's size) over a fake metadata cache."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafka_compat.group.assignor.simple import SimpleAssignor
from kafka_compat.group.group_metadata_manager import GroupMetadataManager
from kafka_compat.group.modern.share.share_group_protocol import ShareGroupProtocol
from kafka_compat.protocol.errors import ErrorCode as E
from kafka_compat.protocol.errors import KafkaError
from kafka_compat.server.share.share_session_cache import FINAL_EPOCH, ShareSessionCache, next_epoch

T1, T2 = b"\x01" * 16, b"\x02" * 16


def counts(assignment: dict, topic: bytes) -> dict:
    return {m: len(a.get(topic, ())) for m, a in assignment.items()}


@pytest.mark.parametrize("members, partitions", [(1, 6), (3, 6), (4, 6), (6, 6), (7, 3), (10, 4)])
def test_simple_assignor_balances(members, partitions):
    ids = [f"m{i}" for i in range(members)]
    out = SimpleAssignor().assign({m: frozenset([T1]) for m in ids}, {T1: partitions}, {})
    sizes = counts(out, T1)
    if members <= partitions:
        assert max(sizes.values()) - min(sizes.values()) <= 1
        assigned = [p for a in out.values() for p in a.get(T1, ())]
        assert sorted(assigned) == list(range(partitions)), "each partition to exactly one member"
    else:
        assert set(sizes.values()) == {1}, "each member gets one partition"
        sharing = [sum(1 for a in out.values() if p in a[T1]) for p in range(partitions)]
        assert max(sharing) - min(sharing) <= 1


def test_simple_assignor_is_sticky_and_follows_subscriptions():
    a = SimpleAssignor()
    first = a.assign({"m0": frozenset([T1]), "m1": frozenset([T1])}, {T1: 6}, {})
    second = a.assign({"m0": frozenset([T1]), "m1": frozenset([T1]), "m2": frozenset([T1])}, {T1: 6}, first)
    for m in ("m0", "m1"):
        assert second[m][T1] <= first[m][T1], "a member that stays keeps partitions it had"
    assert counts(second, T1) == {"m0": 2, "m1": 2, "m2": 2}
    mixed = a.assign({"m0": frozenset([T1]), "m1": frozenset([T1, T2])}, {T1: 2, T2: 3}, {})
    assert T2 not in mixed["m0"] and mixed["m1"][T2] == frozenset(range(3))


def test_share_session_epochs():
    cache = ShareSessionCache(max_sessions=1)
    ctx, _ = cache.new_context("g", "m", 0, [(T1, 0)], [], False)
    assert ctx.full and ctx.partitions == [(T1, 0)] and cache.get("g", "m").epoch == 1
    ctx, _ = cache.new_context("g", "m", 1, [(T1, 1)], [(T1, 0)], True)
    assert not ctx.full and ctx.partitions == [(T1, 1)] and cache.get("g", "m").epoch == 2
    for epoch, code in [(1, E.INVALID_SHARE_SESSION_EPOCH), (5, E.INVALID_SHARE_SESSION_EPOCH)]:
        with pytest.raises(KafkaError) as e:
            cache.new_context("g", "m", epoch, [], [], False)
        assert e.value.error_code == code
    with pytest.raises(KafkaError) as e:
        cache.new_context("g", "other", 3, [], [], False)
    assert e.value.error_code == E.SHARE_SESSION_NOT_FOUND
    with pytest.raises(KafkaError) as e:
        cache.new_context("g", "m", 0, [(T1, 0)], [], True)
    assert e.value.error_code == E.INVALID_REQUEST, "no acknowledgements in a session's first request"
    with pytest.raises(KafkaError) as e:
        cache.new_context("g", "other", 0, [], [], False)
    assert e.value.error_code == E.SHARE_SESSION_LIMIT_REACHED
    assert cache.acknowledge_context("g", "m", 2).final is False and cache.get("g", "m").epoch == 3
    with pytest.raises(KafkaError) as e:
        cache.acknowledge_context("g", "m", 0)
    assert e.value.error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge_context("g", "m", FINAL_EPOCH).final
    assert next_epoch(0x7FFFFFFF) == 1 and next_epoch(-1) == -1


class FakeRuntime:
    def is_group_loading(self, group_id):
        return False

    def partition_for(self, group_id):
        return 0


def protocol(max_size=200) -> ShareGroupProtocol:
    topics = {"t": SimpleNamespace(topic_id=T1, partitions=4), "u": SimpleNamespace(topic_id=T2, partitions=2)}
    cache = SimpleNamespace(get_topic=topics.get)
    config = {"group.share.heartbeat.interval.ms": 500, "group.share.session.timeout.ms": 45000,
              "group.share.max.size": max_size}
    p = ShareGroupProtocol(config, GroupMetadataManager(FakeRuntime()), cache)
    p._schedule_session_timeout = lambda group_id, member_id: None     # no event loop here
    return p


def beat(p, member, epoch, topics=None, group="g"):
    return p.heartbeat(group, member, epoch, None, topics, "client", "/127.0.0.1")


def test_heartbeat_join_assign_leave():
    p = protocol()
    r = beat(p, "m1", 0, ["t"])
    assert (r.error, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, 1, 500)
    assert r.assignment == {T1: frozenset(range(4))}
    r = beat(p, "m1", 1)
    assert (r.error, r.member_epoch, r.assignment) == (E.NONE, 1, None), "nothing changed: no assignment sent"
    r2 = beat(p, "m2", 0, ["t"])
    assert (r2.member_epoch, len(r2.assignment[T1])) == (2, 2)
    r = beat(p, "m1", 1)
    assert r.member_epoch == 2 and len(r.assignment[T1]) == 2, "the first member gives half up at once"
    assert r.assignment[T1].isdisjoint(r2.assignment[T1])
    assert beat(p, "m1", 1).error == E.NONE, "the previous epoch is accepted (its answer may have been lost)"
    group = p.groups.get_group("g")
    assert (group.state_string, group.group_epoch, group.protocol_type) == ("Stable", 2, "share")
    r = beat(p, "m2", -1)
    assert (r.error, r.member_epoch) == (E.NONE, -1)
    assert beat(p, "m1", 2).assignment == {T1: frozenset(range(4))}
    assert beat(p, "m1", -1).error == E.NONE and group.state_string == "Empty"
    assert group.validate_delete_group() is None


@pytest.mark.parametrize("member, epoch, topics, code", [
    ("", 0, ["t"], E.INVALID_REQUEST),
    ("x" * 37, 0, ["t"], E.INVALID_REQUEST),
    ("m1", 0, None, E.INVALID_REQUEST),
    ("m1", -2, ["t"], E.INVALID_REQUEST),
    ("m9", 1, None, E.UNKNOWN_MEMBER_ID),
    ("m9", -1, None, E.UNKNOWN_MEMBER_ID),
    ("m1", 7, None, E.FENCED_MEMBER_EPOCH),
])
def test_heartbeat_errors(member, epoch, topics, code):
    p = protocol()
    assert beat(p, "m1", 0, ["t"]).error == E.NONE
    assert beat(p, member, epoch, topics).error == code


def test_heartbeat_group_limits():
    p = protocol(max_size=1)
    assert beat(p, "m1", 0, ["t"]).error == E.NONE
    assert beat(p, "m2", 0, ["t"]).error == E.GROUP_MAX_SIZE_REACHED
    assert p.groups.get_group("g").validate_delete_group() == E.NON_EMPTY_GROUP
    assert p.groups.get_group("g").validate_offset_commit("m1", None, 1, 9) == E.GROUP_ID_NOT_FOUND
    assert beat(p, "m1", 1, ["t", "u"]).assignment == {T1: frozenset(range(4)), T2: frozenset(range(2))}


def test_share_sessions_of_a_closed_connection_end():
    cache = ShareSessionCache()
    cache.new_context("g", "a", 0, [(T1, 0)], [], False, connection_id=1)
    cache.new_context("g", "b", 0, [(T1, 0)], [], False, connection_id=2)
    assert [s.member_id for s in cache.on_disconnect(1)] == ["a"]
    assert cache.get("g", "a") is None and cache.get("g", "b") is not None
    assert cache.on_disconnect(1) == []
