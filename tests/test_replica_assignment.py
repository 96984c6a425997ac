"""Replica placement as Kafka's AdminUtils.assignReplicasToBrokers makes it.

Every expected table below was worked out by hand from Kafka's algorithm (the derivation is in the
comments: n brokers, start index s, shift h; partition p's first replica sits at (p + s) mod n, replica
j + 1 at distance 1 + (h + j) mod (n - 1) from it, h growing by one each time p wraps around). The
two fixed-start-0 tables are also the ones Kafka's own documentation draws for the same inputs.
"""
from __future__ import annotations

import pytest

from kafka_compat.controller.replica_assignment import (
    BrokerMetadata,
    assign_new_partitions,
    assign_replicas_to_brokers,
    broker_metadatas,
    rack_alternated_broker_list,
)
from kafka_compat.protocol.errors import ErrorCode, KafkaError


def brokers(*ids, racks=None):
    return [BrokerMetadata(i, racks[i] if racks else None) for i in ids]


def test_rack_unaware_five_brokers_start_zero():
    # n=5, s=h=0. p0-p4: first = p, then +1, +2. p5 wraps: h=1, so +2, +3 from the first.
    assert assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_unaware_uses_list_positions_not_ids():
    # brokers 1,2,3 (positions 0,1,2), s=h=1: p0 first at 1 (broker 2), next at 1+(1+0)%2=2 -> pos 0 (broker 1);
    # p1 first pos 2 (3), +2 -> pos 1 (2); p2 first pos 0 (1), +2 -> pos 2 (3); p3 wraps: h=2, first pos 1 (2),
    # +1+(2%2)=1 -> pos 2 (3)
    assert assign_replicas_to_brokers(brokers(1, 2, 3), 4, 2, fixed_start_index=1) == {
        0: [2, 1], 1: [3, 2], 2: [1, 3], 3: [2, 3]}


class Draws:
    """Stands in for Java's Random: hands out the given numbers in order."""

    def __init__(self, *values):
        self.values = list(values)
        self.calls = []

    def randint(self, lo, hi):
        self.calls.append((lo, hi))
        return self.values.pop(0)


def test_random_start_index_then_shift():
    # Kafka draws the start index, then the shift, each in [0, n). Start 2, shift 0: p0 first 2, then +1;
    # p1 first 3, then +1.
    draws = Draws(2, 0)
    assert assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 2, 2, rng=draws) == {0: [2, 3], 1: [3, 4]}
    assert draws.calls == [(0, 4), (0, 4)]


def test_every_random_layout_is_a_valid_one():
    for _ in range(50):
        result = assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4, 5), 12, 3)
        assert sorted(result) == list(range(12))
        assert all(len(set(r)) == 3 for r in result.values())
        leaders = [r[0] for r in result.values()]
        assert all(leaders.count(b) == 2 for b in range(6))      # leaders round-robin: two each


def test_rack_alternated_list():
    # racks sorted by name, brokers of a rack by id: r1: 0 5, r2: 3 4, r3: 1 2
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 4, 2]          # rack1 runs out first


def test_rack_aware_six_brokers_three_racks():
    # arranged 0(r1) 3(r2) 1(r3) 5(r1) 4(r2) 2(r3), s=h=0: each partition walks on from its first replica
    # and every rack is still free, so no skips: p0 = arranged[0,1,2], p1 = [1,2,3] ... p5 = [5,0,1].
    # p6 wraps: h=1, the walk starts at 1 + (1*3 + 0) % 5 = 4 from the first: arranged[0,4,5] = 0,4,2.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    result = assign_replicas_to_brokers(brokers(*sorted(racks), racks=racks), 7, 3, 0, 0)
    assert result == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
                      6: [0, 4, 2]}


def test_rack_aware_skips_a_rack_that_already_has_a_replica():
    # arranged 0(r1) 2(r2) 1(r1). p2's first replica is 1 (r1); the next in the walk is 0, also r1 while r2 has
    # none: skipped; the one after is 2 (r2).
    racks = {0: "r1", 1: "r1", 2: "r2"}
    assert assign_replicas_to_brokers(brokers(0, 1, 2, racks=racks), 3, 2, 0, 0) == {0: [0, 2], 1: [2, 1], 2: [1, 2]}
    # more replicas than racks: once each rack has one, racks repeat (brokers do not)
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2"}
    assert assign_replicas_to_brokers(brokers(0, 1, 2, 3, racks=racks), 1, 3, 0, 0) == {0: [0, 2, 1]}


def test_errors_are_kafkas():
    with pytest.raises(KafkaError) as e:
        assign_replicas_to_brokers(brokers(0, 1, 2), 1, 4)
    assert e.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert str(e.value) == "Replication factor: 4 larger than available brokers: 3."
    with pytest.raises(KafkaError) as e:
        assign_replicas_to_brokers(brokers(0), 1, 0)
    assert (e.value.error_code, str(e.value)) == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                                  "Replication factor must be larger than 0.")
    with pytest.raises(KafkaError) as e:
        assign_replicas_to_brokers(brokers(0), 0, 1)
    assert (e.value.error_code, str(e.value)) == (ErrorCode.INVALID_PARTITIONS,
                                                  "Number of partitions must be larger than 0.")
    with pytest.raises(KafkaError, match="Not all brokers have rack information") as e:
        assign_replicas_to_brokers([BrokerMetadata(0, "r1"), BrokerMetadata(1)], 1, 1)
    assert e.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_broker_metadatas_rack_modes():
    mixed = [BrokerMetadata(2, "r1"), BrokerMetadata(0), BrokerMetadata(1, "r2")]
    with pytest.raises(KafkaError, match="--disable-rack-aware"):
        broker_metadatas(mixed)
    assert broker_metadatas(mixed, "safe") == brokers(0, 1, 2)
    full = [BrokerMetadata(2, "r1"), BrokerMetadata(0, "r2")]
    assert broker_metadatas(full) == [BrokerMetadata(0, "r2"), BrokerMetadata(2, "r1")]
    assert broker_metadatas(full, "disabled") == brokers(0, 2)


def test_new_partitions_continue_the_pattern():
    # Partition 0 starts at broker 0, so s = position of broker 0 = 0 and the new partitions 3..5 are what a
    # 6-partition topic created with s=h=0 would have had: p3 [3,4,0], p4 [4,0,1], p5 wraps (h=1) [0,2,3].
    existing = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4]}
    added = assign_new_partitions("t", existing, brokers(0, 1, 2, 3, 4), 6)
    assert added == {3: [3, 4, 0], 4: [4, 0, 1], 5: [0, 2, 3]}
    assert added == {p: r for p, r in assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 6, 3, 0).items() if p >= 3}


def test_new_partitions_start_at_partition_zeros_first_replica():
    # brokers 1,3,5; partition 0 led by 3 -> s = h = 1 (position of 3). p2: first pos (2+1)%3=0 (broker 1), then
    # +1+(1%2)=2 -> pos 2 (5); p3 wraps: h=2, first pos 1 (3), +1 -> pos 2 (5).
    added = assign_new_partitions("t", {0: [3, 5], 1: [5, 1]}, brokers(1, 3, 5), 4)
    assert added == {2: [1, 5], 3: [3, 5]}


def test_new_partitions_errors():
    with pytest.raises(KafkaError) as e:
        assign_new_partitions("t", {0: [1], 1: [2]}, brokers(1, 2), 2)
    assert e.value.error_code == ErrorCode.INVALID_PARTITIONS
    assert str(e.value) == ("The number of partitions for a topic can only be increased. Topic t currently has 2 "
                            "partitions, 2 would not be an increase.")
    with pytest.raises(KafkaError, match="partition id 0 is missing"):
        assign_new_partitions("t", {1: [1]}, brokers(1, 2), 3)
    with pytest.raises(KafkaError, match="Replication factor: 3 larger than available brokers: 2"):
        assign_new_partitions("t", {0: [1, 2, 3]}, brokers(1, 2), 2)
