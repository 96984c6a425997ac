"""Share sessions (KIP-932, Kafka's ShareSessionCache and ShareSession), sans I/O.

A share session is keyed by (group id, member id) and remembers the partitions a member fetches,
so a ShareFetch names only what changed. Its epoch runs as a fetch session's: 0 opens a new
session (a full request; acknowledgements are not allowed in it), -1 closes it (acknowledge, then
release what the member holds), any other value must be the session's expected epoch, which then
moves to the next (wrapping past INT32_MAX to 1). ``group.share.max.share.sessions`` caps the cache.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode, KafkaError

E = ErrorCode
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    partitions: dict = field(default_factory=dict)     # {(topic id, index): None}, in the order first named
    connection_id: object = None

    def update(self, added, forgotten) -> None:
        for key in added:
            self.partitions.setdefault(key, None)
        for key in forgotten:
            self.partitions.pop(key, None)


class ShareSessionContext:
    """What one request is in its session: which partitions to fetch, whether it is the session's first
    (full) request, or its last (``final``: acknowledge, answer nothing more, close the session)."""

    def __init__(self, session: ShareSession | None, partitions: list, full: bool, final: bool = False):
        self.session = session
        self.partitions = partitions
        self.full = full
        self.final = final


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def new_context(self, group_id: str, member_id: str, epoch: int, named: list, forgotten: list,
                    has_acknowledgements: bool, connection_id=None) -> tuple[ShareSessionContext, ShareSession | None]:
        """Kafka's SharePartitionManager.newContext for ShareFetch. Returns the context and the session it
        replaced (epoch 0 over an existing one), whose held records the caller releases. Raises
        KafkaError: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, INVALID_REQUEST,
        SHARE_SESSION_LIMIT_REACHED."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            session = self.sessions.get(key)
            if session is None:
                raise KafkaError(E.SHARE_SESSION_NOT_FOUND)
            return ShareSessionContext(session, [], False, final=True), None
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise KafkaError(E.INVALID_REQUEST, "Acknowledge data present in the initial ShareFetch request.")
            replaced = self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                raise KafkaError(E.SHARE_SESSION_LIMIT_REACHED)
            session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection_id=connection_id)
            session.update(named, ())
            self.sessions[key] = session
            return ShareSessionContext(session, list(session.partitions), True), replaced
        session = self._expect(key, epoch)
        session.update(named, forgotten)
        session.epoch = next_epoch(session.epoch)
        return ShareSessionContext(session, list(session.partitions), False), None

    def acknowledge_context(self, group_id: str, member_id: str, epoch: int) -> ShareSessionContext:
        """The session a ShareAcknowledge belongs to: epoch 0 cannot open one; -1 closes it."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            raise KafkaError(E.INVALID_SHARE_SESSION_EPOCH)
        if epoch == FINAL_EPOCH:
            session = self.sessions.get(key)
            if session is None:
                raise KafkaError(E.SHARE_SESSION_NOT_FOUND)
            return ShareSessionContext(session, [], False, final=True)
        session = self._expect(key, epoch)
        session.epoch = next_epoch(session.epoch)
        return ShareSessionContext(session, [], False)

    def on_disconnect(self, connection_id) -> list[ShareSession]:
        """The sessions opened over a connection that is gone, removed (Kafka's ClientConnectionDisconnectListener):
        their members' records are released without waiting for the locks."""
        gone = [key for key, s in self.sessions.items() if s.connection_id == connection_id]
        return [self.sessions.pop(key) for key in gone]

    def _expect(self, key, epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise KafkaError(E.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            raise KafkaError(E.INVALID_SHARE_SESSION_EPOCH,
                             f"expected share session epoch {session.epoch}, got {epoch}")
        return session


__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessionCache", "ShareSessionContext", "next_epoch"]
