"""Where a new topic's partition replicas go: Kafka's AdminUtils.assignReplicasToBrokers.

Same inputs, same start index and shift, same result as Kafka, rack-unaware and rack-aware, so
that a topic created through us is laid out as Kafka would lay it out (tools and operators reason
about that layout). Kafka picks the start index and the replica shift at random when none is fixed;
pass `rng` (anything with randint) to make that reproducible. Pure functions.

Rack-unaware: partition p's first replica is broker (p + start) mod n; the others follow it at
distance 1 + (shift + j) mod (n - 1), the shift growing by one each time p wraps around the broker
list, so that the replicas of one broker's partitions spread over all the others.
Rack-aware: the same walk over a rack-alternated broker list, skipping a broker whose rack (or
itself) already holds a replica of the partition while some rack (or broker) holds none.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from ..protocol.errors import ErrorCode, KafkaError


class BrokerMetadata(NamedTuple):
    id: int
    rack: str | None = None


def admin_operation_error(message: str) -> KafkaError:
    """Kafka's AdminOperationException is no ApiException: a client sees UNKNOWN_SERVER_ERROR."""
    return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, message)


def broker_metadatas(brokers: Iterable[BrokerMetadata], rack_aware_mode: str = "enforced") -> list[BrokerMetadata]:
    """Kafka's AdminZkClient.getBrokerMetadatas: the brokers sorted by id, with their racks kept
    ("enforced": all or none must have one; "safe": dropped unless all have one) or dropped ("disabled")."""
    brokers = list(brokers)
    with_rack = [b for b in brokers if b.rack is not None]
    mode = rack_aware_mode.lower()
    if mode not in ("enforced", "safe", "disabled"):
        raise ValueError(f"rack-aware mode is enforced, safe or disabled, not {rack_aware_mode!r}")
    if mode == "enforced" and with_rack and len(with_rack) < len(brokers):
        raise admin_operation_error("Not all brokers have rack information. Add --disable-rack-aware in command "
                                    "line to make replica assignment without rack information.")
    if mode == "disabled" or (mode == "safe" and len(with_rack) < len(brokers)):
        brokers = [BrokerMetadata(b.id) for b in brokers]
    return sorted(brokers, key=lambda b: b.id)


def replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one rack at a time, racks in name order, brokers of a rack in id order: racks
    r1: 0 1 2, r2: 3 4 5, r3: 6 7 8 give 0 3 6 1 4 7 2 5 8."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    iterators = [iter(sorted(by_rack[rack])) for rack in sorted(by_rack)]
    result: list[int] = []
    i = 0
    while len(result) < len(broker_racks):
        broker = next(iterators[i], None)
        if broker is not None:
            result.append(broker)
        i = (i + 1) % len(iterators)
    return result


def assign_replicas_to_brokers(brokers: Sequence[BrokerMetadata], n_partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, list[int]]:
    """{partition: replicas} for partitions start_partition_id (or 0) onwards, the first replica of
    each being its preferred leader. `brokers` in the order Kafka's callers pass them: by id.
    A negative fixed_start_index means a random start index and a random shift, as in Kafka."""
    if n_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random
    if all(b.rack is None for b in brokers):
        return _rack_unaware([b.id for b in brokers], n_partitions, replication_factor, fixed_start_index,
                             start_partition_id, rng)
    if any(b.rack is None for b in brokers):
        raise admin_operation_error("Not all brokers have rack information for replica rack aware assignment.")
    return _rack_aware({b.id: b.rack for b in brokers}, n_partitions, replication_factor, fixed_start_index,
                       start_partition_id, rng)


def _first_replicas(n: int, n_partitions: int, fixed_start_index: int, start_partition_id: int, rng):
    """(partition, index of its first replica, replica shift) for each partition to place. Kafka draws the
    start index, then the shift, each uniformly in [0, n) unless fixed; the shift grows by one each time
    the partition id wraps around the broker list."""
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randint(0, n - 1)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randint(0, n - 1)
    partition = max(0, start_partition_id)
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        yield partition, (partition + start_index) % n, shift
        partition += 1


def _rack_unaware(broker_list: list[int], n_partitions: int, replication_factor: int, fixed_start_index: int,
                  start_partition_id: int, rng) -> dict[int, list[int]]:
    n = len(broker_list)
    return {partition: [broker_list[first]] + [broker_list[replica_index(first, shift, j, n)]
                                               for j in range(replication_factor - 1)]
            for partition, first, shift in _first_replicas(n, n_partitions, fixed_start_index, start_partition_id, rng)}


def _rack_aware(broker_racks: dict[int, str], n_partitions: int, replication_factor: int, fixed_start_index: int,
                start_partition_id: int, rng) -> dict[int, list[int]]:
    n_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    out = {}
    for partition, first, shift in _first_replicas(n, n_partitions, fixed_start_index, start_partition_id, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {broker_racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # skip a rack that has a replica while another has none, and a broker likewise
                if ((rack not in racks_with_replicas or len(racks_with_replicas) == n_racks)
                        and (broker not in brokers_with_replicas or len(brokers_with_replicas) == n)):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        out[partition] = replicas
    return out


def assign_new_partitions(topic: str, existing: Mapping[int, Sequence[int]], brokers: Sequence[BrokerMetadata],
                          num_partitions: int) -> dict[int, list[int]]:
    """Assignments for the partitions that grow `topic` to `num_partitions` (Kafka's
    createNewPartitionsAssignment): the same replication factor as partition 0, continuing the layout
    from the position of partition 0's first replica, so the new partitions follow the existing pattern.
    `brokers` sorted by id."""
    if 0 not in existing:
        raise admin_operation_error(f"Unexpected existing replica assignment for topic '{topic}', partition id 0 "
                                    f"is missing. Assignment: {dict(existing)}")
    to_add = num_partitions - len(existing)
    if to_add <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                     f"The number of partitions for a topic can only be increased. Topic {topic} currently has "
                     f"{len(existing)} partitions, {num_partitions} would not be an increase.")
    first_replica = existing[0][0]
    start_index = next((i for i, b in enumerate(brokers) if b.id >= first_replica), 0)
    return assign_replicas_to_brokers(brokers, to_add, len(existing[0]), start_index, len(existing))
