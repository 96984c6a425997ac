"""Kafka's partition leader elections (PartitionLeaderElectionAlgorithms, Election) and the ISR
change a dead replica causes (ReplicaStateMachine's removal from the ISR), as pure functions.

`assignment` is the partition's replica list in preference order; `live` is the set of brokers
that count as online for the partition (registered, not shutting down, log dir online), except in
the controlled-shutdown election, where shutting-down brokers count as live too. Every new leader
or ISR comes with leader_epoch + 1; the partition epoch (zkVersion) stays the one read, because
the write is conditional on it.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

from ..leader_and_isr import LeaderAndIsr
from ..sentinels import NO_LEADER


class ElectionResult(NamedTuple):
    """`leader_and_isr` is None when no replica can lead: the partition stays (or goes) offline and
    its state in ZooKeeper is left as it was. `live_replicas` are the replicas to send LeaderAndIsr to."""

    leader_and_isr: LeaderAndIsr | None
    live_replicas: list[int]


# -- the algorithms: which replica leads ---------------------------------------------------------


def offline_partition_leader_election(assignment: Sequence[int], isr: Collection[int], live: Collection[int],
                                      unclean_leader_election_enabled: bool) -> int | None:
    """The first live ISR member in assignment order; failing that, and only when unclean election is
    enabled (unclean.leader.election.enable, default false), the first live replica (it may lack
    acknowledged records: an unclean election)."""
    leader = next((r for r in assignment if r in live and r in isr), None)
    if leader is None and unclean_leader_election_enabled:
        leader = next((r for r in assignment if r in live), None)
    return leader


def reassign_partition_leader_election(reassignment: Sequence[int], isr: Collection[int],
                                       live: Collection[int]) -> int | None:
    """The first live ISR member of the reassignment's target replicas."""
    return next((r for r in reassignment if r in live and r in isr), None)


def preferred_replica_partition_leader_election(assignment: Sequence[int], isr: Collection[int],
                                                live: Collection[int]) -> int | None:
    """The preferred replica (the first assigned), only if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(assignment: Sequence[int], isr: Collection[int],
                                                  live: Collection[int], shutting_down: Collection[int]) -> int | None:
    """The first live ISR member that is not shutting down."""
    return next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)


# -- the elections: the new state of the partition -------------------------------------------------


def leader_for_offline(current: LeaderAndIsr | None, assignment: Sequence[int], live: Collection[int],
                       unclean_leader_election_enabled: bool = False,
                       leader_recovery_supported: bool = True) -> ElectionResult:
    """Elect for a new or offline partition whose state is `current` (None: no state znode yet, no election).
    The new ISR is the old ISR's live members when the leader came from the ISR, else the leader alone,
    marked RECOVERING (IBP 3.2+, `leader_recovery_supported`) because it may lack committed records."""
    live_replicas = [r for r in assignment if r in live]
    if current is None:
        return ElectionResult(None, live_replicas)
    leader = offline_partition_leader_election(assignment, current.isr, live, unclean_leader_election_enabled)
    if leader is None:
        return ElectionResult(None, live_replicas)
    if leader in current.isr:
        return ElectionResult(current.new_leader_and_isr(leader, [r for r in current.isr if r in live]), live_replicas)
    if leader_recovery_supported:
        return ElectionResult(current.new_recovering_leader_and_isr(leader, [leader]), live_replicas)
    return ElectionResult(current.new_leader_and_isr(leader, [leader]), live_replicas)


def leader_for_reassign(current: LeaderAndIsr, target_replicas: Sequence[int], live: Collection[int]) -> ElectionResult:
    """Elect among a reassignment's target replicas; the ISR is kept."""
    leader = reassign_partition_leader_election(target_replicas, current.isr, live)
    return ElectionResult(None if leader is None else current.new_leader(leader), list(target_replicas))


def leader_for_preferred_replica(current: LeaderAndIsr, assignment: Sequence[int],
                                 live: Collection[int]) -> ElectionResult:
    """Move leadership back to the preferred replica; the ISR is kept."""
    leader = preferred_replica_partition_leader_election(assignment, current.isr, live)
    return ElectionResult(None if leader is None else current.new_leader(leader), list(assignment))


def leader_for_controlled_shutdown(current: LeaderAndIsr, assignment: Sequence[int], live: Collection[int],
                                   shutting_down: Collection[int]) -> ElectionResult:
    """Move leadership off brokers that are shutting down (`live` includes them); they leave the ISR."""
    live_or_shutting_down = [r for r in assignment if r in live]
    leader = controlled_shutdown_partition_leader_election(assignment, current.isr, live, shutting_down)
    if leader is None:
        return ElectionResult(None, live_or_shutting_down)
    new_isr = [r for r in current.isr if r not in shutting_down]
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), live_or_shutting_down)


def initial_leader_and_isr(assignment: Sequence[int], live: Collection[int]) -> LeaderAndIsr | None:
    """A new partition's first state: the first live replica leads, every live replica is in the ISR,
    leader epoch 0. None when no replica is live (the partition stays New)."""
    live_replicas = [r for r in assignment if r in live]
    return LeaderAndIsr.initial(live_replicas[0], live_replicas) if live_replicas else None


def remove_replica_from_isr(current: LeaderAndIsr, replica: int) -> LeaderAndIsr | None:
    """The state after `replica` goes offline (OfflineReplica): out of the ISR, and no leader if it led.
    The ISR is never emptied: a last member stays, so that the partition can come back with it
    ("last replica standing") rather than with a replica that missed records. None when the replica
    is not in the ISR (nothing to write)."""
    if replica not in current.isr:
        return None
    leader = NO_LEADER if replica == current.leader else current.leader
    isr = current.isr if len(current.isr) == 1 else [r for r in current.isr if r != replica]
    return current.new_leader_and_isr(leader, isr)
