"""Kafka's leader election rules and the OfflineReplica ISR change, case by case."""
from __future__ import annotations

from kafka_compat.controller import election as el
from kafka_compat.leader_and_isr import NO_LEADER, LeaderAndIsr, LeaderRecoveryState

RECOVERED, RECOVERING = LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING


def state(leader, isr, epoch=4, partition_epoch=9, recovery=RECOVERED):
    return LeaderAndIsr(leader, epoch, tuple(isr), recovery, partition_epoch)


def test_offline_picks_the_first_live_isr_member_in_assignment_order():
    # 1 is live but out of the ISR, 2 is in the ISR but dead: 3 leads; the ISR keeps its live members
    result = el.leader_for_offline(state(2, [2, 3]), [1, 2, 3], live={1, 3})
    assert result.leader_and_isr == state(3, [3], epoch=5)          # partition epoch: still the one read
    assert result.live_replicas == [1, 3]
    # assignment order, not ISR order
    assert el.leader_for_offline(state(3, [1, 2, 3]), [3, 2, 1], live={1, 2}).leader_and_isr.leader == 2


def test_offline_without_a_live_isr_member():
    current = state(3, [3])
    assert el.leader_for_offline(current, [1, 2, 3], live={1, 2}).leader_and_isr is None
    # unclean: the first live replica, alone in the ISR, and RECOVERING (it may miss committed records)
    unclean = el.leader_for_offline(current, [1, 2, 3], live={1, 2}, unclean_leader_election_enabled=True)
    assert unclean.leader_and_isr == state(1, [1], epoch=5, recovery=RECOVERING)
    older = el.leader_for_offline(current, [1, 2, 3], live={2}, unclean_leader_election_enabled=True,
                                  leader_recovery_supported=False)
    assert older.leader_and_isr == state(2, [2], epoch=5)
    assert el.leader_for_offline(current, [1, 2, 3], live=set(), unclean_leader_election_enabled=True) \
        .leader_and_isr is None


def test_offline_keeps_the_recovery_state_when_clean():
    current = state(1, [1, 2], recovery=RECOVERING)
    assert el.leader_for_offline(current, [1, 2], live={2}).leader_and_isr == state(2, [2], 5, recovery=RECOVERING)


def test_no_state_no_election():
    assert el.leader_for_offline(None, [1, 2, 3], live={2, 3}) == el.ElectionResult(None, [2, 3])


def test_preferred_replica():
    current = state(2, [2, 3, 1])
    assert el.leader_for_preferred_replica(current, [1, 2, 3], live={1, 2, 3}) == el.ElectionResult(
        state(1, [2, 3, 1], epoch=5), [1, 2, 3])
    assert el.leader_for_preferred_replica(state(2, [2, 3]), [1, 2, 3], live={1, 2, 3}).leader_and_isr is None
    assert el.leader_for_preferred_replica(current, [1, 2, 3], live={2, 3}).leader_and_isr is None


def test_controlled_shutdown_moves_leadership_and_shrinks_the_isr():
    result = el.leader_for_controlled_shutdown(state(1, [1, 2, 3]), [1, 2, 3], live={1, 2, 3}, shutting_down={1})
    assert result == el.ElectionResult(state(2, [2, 3], epoch=5), [1, 2, 3])
    alone = el.leader_for_controlled_shutdown(state(1, [1]), [1, 2], live={1, 2}, shutting_down={1})
    assert alone.leader_and_isr is None           # 2 is live but out of the ISR: the partition stays on 1


def test_reassignment_elects_among_the_targets():
    result = el.leader_for_reassign(state(1, [1, 4, 5]), [4, 5, 6], live={4, 5, 6})
    assert result == el.ElectionResult(state(4, [1, 4, 5], epoch=5), [4, 5, 6])
    assert el.leader_for_reassign(state(1, [1, 6]), [4, 5, 6], live={4, 5}).leader_and_isr is None


def test_new_partition():
    assert el.initial_leader_and_isr([3, 1, 2], live={1, 2}) == LeaderAndIsr(1, 0, (1, 2))
    assert el.initial_leader_and_isr([3], live={1}) is None


def test_offline_replica_leaves_the_isr_but_never_empties_it():
    assert el.remove_replica_from_isr(state(1, [1, 2, 3]), 1) == state(NO_LEADER, [2, 3], epoch=5)
    assert el.remove_replica_from_isr(state(1, [1, 2, 3]), 2) == state(1, [1, 3], epoch=5)
    # the last replica standing stays in the ISR, with no leader
    assert el.remove_replica_from_isr(state(2, [2]), 2) == state(NO_LEADER, [2], epoch=5)
    assert el.remove_replica_from_isr(state(1, [1, 2]), 5) is None


def test_broker_failure_sequence():
    # broker 1 dies leading [1, 2, 3] with ISR [1, 2]: the offline election moves leadership to 2 with ISR [2],
    # after which 1 is already out of the ISR (no second write), and 3, never in the ISR, cannot lead
    elected = el.leader_for_offline(state(1, [1, 2]), [1, 2, 3], live={2, 3}).leader_and_isr
    assert elected == state(2, [2], epoch=5)
    assert el.remove_replica_from_isr(elected, 1) is None
    # then 2 dies too: no ISR member is live; 2 stays the ISR's last member, with no leader
    assert el.leader_for_offline(elected, [1, 2, 3], live={3}).leader_and_isr is None
    assert el.remove_replica_from_isr(elected, 2) == state(NO_LEADER, [2], epoch=6)
