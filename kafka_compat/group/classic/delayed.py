"""The coordinator's delayed operations: they park in a purgatory and expire on the timing wheel.

- DelayedJoin: the PreparingRebalance phase; completes once every known member
  rejoined, or at the rebalance timeout (members that did not rejoin are dropped).
- InitialDelayedJoin: the first rebalance of an empty group waits
  `group.initial.rebalance.delay.ms`, again while new members keep arriving,
  up to the rebalance timeout, so a starting fleet lands in one generation.
- DelayedSync: members that got their JoinGroup answer must SyncGroup within the
  rebalance timeout, or they are dropped and the group rebalances again.
- DelayedHeartbeat: one per member; it expires after the session timeout unless
  a heartbeat (or any proof of life) completes it first.
"""
from __future__ import annotations

from ...purgatory import DelayedOperation


def join_key(group_id: str):
    return ("join", group_id)


def sync_key(group_id: str):
    return ("sync", group_id)


def member_key(group_id: str, member_id: str):
    return ("member", group_id, member_id)


class DelayedJoin(DelayedOperation):
    def __init__(self, coordinator, group, rebalance_timeout_ms: int):
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    def __init__(self, coordinator, purgatory, group, configured_delay_ms: int, delay_ms: int, remaining_ms: int):
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, self.purgatory, group, self.configured_delay_ms,
                                   delay, remaining), [join_key(group.group_id)])
        else:
            super().on_complete()


class DelayedSync(DelayedOperation):
    def __init__(self, coordinator, group, generation_id: int, rebalance_timeout_ms: int):
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_pending_sync(self.group, self.generation_id, self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)


class DelayedHeartbeat(DelayedOperation):
    def __init__(self, coordinator, group, member_id: str, is_pending: bool, timeout_ms: int):
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(self.group, self.member_id, self.is_pending,
                                                       self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)
