"""A partition's leader, leader epoch and ISR: Kafka's LeaderAndIsr and LeaderRecoveryState.

One value type shared by the ZooKeeper state znode codec (kafka_compat.zk), the controller's
election rules (kafka_compat.controller) and, later, the brokers' partitions, so that all three
agree on what "a new leader epoch" means. Every change of leader or ISR made by the controller
bumps `leader_epoch`; `partition_epoch` is the zkVersion of the partition's state znode (Kafka
3.3 renamed the LeaderAndIsr field ZkVersion to PartitionEpoch; it is the same number).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from .sentinels import NO_LEADER

INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0


class LeaderRecoveryState(enum.IntEnum):
    """RECOVERING: the leader was elected uncleanly (it was not in the ISR) and has not yet
    recovered its log; the ISR may not grow until it has (KIP-704, Kafka 3.2)."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))
        object.__setattr__(self, "leader_recovery_state", LeaderRecoveryState(self.leader_recovery_state))

    @classmethod
    def initial(cls, leader: int, isr) -> "LeaderAndIsr":
        """A new partition's first state: epoch 0, recovered."""
        return cls(leader, INITIAL_LEADER_EPOCH, tuple(isr))

    @property
    def leader_or_none(self) -> int | None:
        return None if self.leader == NO_LEADER else self.leader

    def new_leader(self, leader: int) -> "LeaderAndIsr":
        """Another leader, same ISR, next epoch."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1)

    def new_leader_and_isr(self, leader: int, isr) -> "LeaderAndIsr":
        """Another leader and ISR, next epoch, recovery state kept."""
        return replace(self, leader=leader, isr=tuple(isr), leader_epoch=self.leader_epoch + 1)

    def new_recovering_leader_and_isr(self, leader: int, isr) -> "LeaderAndIsr":
        """As new_leader_and_isr, for an unclean election: the new leader was not in the ISR."""
        return replace(self, leader=leader, isr=tuple(isr), leader_epoch=self.leader_epoch + 1,
                       leader_recovery_state=LeaderRecoveryState.RECOVERING)

    def new_epoch(self) -> "LeaderAndIsr":
        return replace(self, leader_epoch=self.leader_epoch + 1)

    def with_partition_epoch(self, partition_epoch: int) -> "LeaderAndIsr":
        return replace(self, partition_epoch=partition_epoch)

    def equals_allow_stale_partition_epoch(self, other: "LeaderAndIsr") -> bool:
        """Same leader, epoch, ISR and recovery state, and our partition epoch is not newer: how the
        controller recognises an AlterPartition retry that it has already applied."""
        return (self.leader == other.leader and self.leader_epoch == other.leader_epoch and self.isr == other.isr
                and self.leader_recovery_state == other.leader_recovery_state
                and self.partition_epoch <= other.partition_epoch)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """A partition state znode's content: the LeaderAndIsr plus the epoch of the controller that wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int
