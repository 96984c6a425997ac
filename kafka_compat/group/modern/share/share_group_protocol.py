"""ShareGroupHeartbeat (KIP-932): share group membership, in Kafka's order (GroupMetadataManager.shareGroupHeartbeat).

One heartbeat: check the request, get or create the group and the member (epoch 0 joins with a
member id the client made up), check its epoch (the current one, or the previous one whose
answer may have been lost), store its subscription, bump the group epoch when the members'
subscriptions or the subscribed topics' partitions changed, compute a new target assignment
with the simple assignor when the group epoch is ahead of it, give the member its target
(share groups revoke nothing first), re-arm its session timer, answer. Epoch -1 leaves.

The group's `share.heartbeat.interval.ms` and `share.session.timeout.ms` (the GROUP config
resource, else the broker's `group.share.*`) and the broker's `group.share.max.size` apply. Share
group metadata lives in memory only (not yet written to `__consumer_offsets`): a restarted
coordinator sees its members rejoin.
"""
from __future__ import annotations

import logging

from ....clock import now_ms
from ....protocol.errors import ErrorCode, KafkaError
from ...assignor.simple import SimpleAssignor
from ...timer import Timer
from ..consumer_group_protocol import HeartbeatResult, _fail
from .share_group import ShareGroup, ShareGroupMember

log = logging.getLogger(__name__)
E = ErrorCode
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36       # a printed UUID, as Kafka's KafkaApis.isMemberIdValid


class ShareGroupProtocol:
    def __init__(self, config, groups, metadata_cache, clock=now_ms, group_configs=None):
        """``groups`` is the GroupMetadataManager (share groups sit beside classic and consumer ones);
        ``group_configs`` the GroupConfigManager, whose share.* overrides win over the broker's defaults."""
        self.groups = groups
        self.group_configs = group_configs
        self.metadata_cache = metadata_cache
        self.clock = clock
        self.heartbeat_interval_ms = config["group.share.heartbeat.interval.ms"]
        self.session_timeout_ms = config["group.share.session.timeout.ms"]
        self.max_size = config["group.share.max.size"]
        self.assignor = SimpleAssignor()
        self.timer = Timer()

    def shutdown(self) -> None:
        self.timer.cancel_all()

    def _group_setting(self, group_id: str, name: str, default: int) -> int:
        return default if self.group_configs is None else self.group_configs.group_config(group_id)[name]

    # ------------------------------------------------------------ heartbeat
    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names, client_id: str, client_host: str) -> HeartbeatResult:
        try:
            self._validate(group_id, member_id, member_epoch, subscribed_topic_names)
            if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(group_id, member_id)
            return self._heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names,
                                   client_id, client_host)
        except KafkaError as e:
            return HeartbeatResult(e.error_code, str(e) if e.args else None)

    @staticmethod
    def _validate(group_id, member_id, member_epoch, subscribed_topic_names) -> None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (and KafkaApis's member id check)."""
        if not group_id:
            _fail(E.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
            _fail(E.INVALID_REQUEST, "Invalid member id in the request.")
        if member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            _fail(E.INVALID_REQUEST, f"MemberEpoch is {member_epoch}, but must be greater than or equal to -1.")
        if member_epoch == JOIN_GROUP_MEMBER_EPOCH and not subscribed_topic_names:
            _fail(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")

    def _get_group(self, group_id: str, create: bool) -> ShareGroup:
        group = self.groups.get_group(group_id)
        if isinstance(group, ShareGroup):
            return group
        if group is not None:
            _fail(E.INVALID_GROUP_ID if not create else E.GROUP_ID_NOT_FOUND,
                  f"Group {group_id} is not a share group.")
        if not create:
            _fail(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        group = ShareGroup(group_id)
        self.groups.put(group)
        return group

    def _heartbeat(self, group_id, member_id, member_epoch, rack_id, subscribed_topic_names, client_id,
                   client_host) -> HeartbeatResult:
        group = self._get_group(group_id, member_epoch == JOIN_GROUP_MEMBER_EPOCH)
        member = group.members.get(member_id)
        if member is None:
            if member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                _fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.max_size:
                _fail(E.GROUP_MAX_SIZE_REACHED,
                      f"The share group has reached its maximum capacity of {self.max_size} members.")
            member = ShareGroupMember(member_id)
            joined = True
        else:
            joined = False
            if member_epoch > member.member_epoch or (
                    member_epoch < member.member_epoch and member_epoch != member.previous_member_epoch):
                _fail(E.FENCED_MEMBER_EPOCH, f"The share group member has epoch {member_epoch}, the group "
                      f"coordinator knows {member.member_epoch}. The member must abandon all its partitions "
                      "and rejoin.")
        member.rack_id = rack_id if rack_id is not None else member.rack_id
        member.client_id, member.client_host = client_id, client_host
        bump = joined
        if subscribed_topic_names is not None and tuple(sorted(subscribed_topic_names)) != \
                member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(sorted(subscribed_topic_names))
            bump = True
        group.members[member_id] = member
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            log.info("share group %s: epoch %d (%d members)", group_id, group.group_epoch, len(group.members))
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group)
        before = member.assigned_partitions
        target = group.target_assignment.get(member_id, {})
        if member.member_epoch != group.assignment_epoch or target != before:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
            member.assigned_partitions = target
        self._schedule_session_timeout(group_id, member_id)
        send = joined or subscribed_topic_names is not None or member.assigned_partitions != before
        interval = self._group_setting(group_id, "share.heartbeat.interval.ms", self.heartbeat_interval_ms)
        return HeartbeatResult(E.NONE, None, member_id, member.member_epoch, interval,
                                    dict(member.assigned_partitions) if send else None)

    def _subscription_metadata(self, group: ShareGroup) -> dict:
        out = {}
        for name in group.subscribed_topic_names():
            topic = self.metadata_cache.get_topic(name)
            if topic is not None and topic.partitions > 0:
                out[name] = (topic.topic_id, topic.partitions)
        return out

    def _update_target_assignment(self, group: ShareGroup) -> None:
        metadata = group.subscription_metadata
        members = {m.member_id: frozenset(metadata[t][0] for t in m.subscribed_topic_names if t in metadata)
                   for m in group.members.values()}
        counts = {topic_id: n for topic_id, n in metadata.values()}
        group.target_assignment = self.assignor.assign(members, counts, group.target_assignment)
        group.assignment_epoch = group.group_epoch

    # ------------------------------------------------------------ leaving and fencing
    def _leave(self, group_id: str, member_id: str) -> HeartbeatResult:
        group = self._get_group(group_id, False)
        if member_id not in group.members:
            _fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        self._remove_member(group, member_id)
        log.info("share group %s: member %s left", group_id, member_id)
        return HeartbeatResult(E.NONE, None, member_id, LEAVE_GROUP_MEMBER_EPOCH, 0)

    def _remove_member(self, group: ShareGroup, member_id: str) -> None:
        self.timer.cancel((group.group_id, member_id))
        del group.members[member_id]
        group.target_assignment.pop(member_id, None)
        group.group_epoch += 1

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        def expire():
            group = self.groups.get_group(group_id)
            if isinstance(group, ShareGroup) and not group.is_dead and member_id in group.members:
                log.info("share group %s: member %s fenced, its session timed out", group_id, member_id)
                self._remove_member(group, member_id)
        self.timer.schedule((group_id, member_id),
                            self._group_setting(group_id, "share.session.timeout.ms", self.session_timeout_ms), expire)

    def on_group_unloaded(self, group: ShareGroup) -> None:
        for member_id in group.members:
            self.timer.cancel((group.group_id, member_id))


__all__ = ["ShareGroupProtocol"]
