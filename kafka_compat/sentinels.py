"""Kafka's internal topic names and the sentinel values shared by the wire, the storage engine,
the coordinators and the controller, written once.

The names are those of Kafka's `org.apache.kafka.common.internals.Topic`; the sentinels those of
`RecordBatch` (NO_PRODUCER_ID, ...), `FetchRequest` (CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID),
`LeaderAndIsr` (NoLeader, LeaderDuringDelete, EpochDuringDelete, NoEpoch) and the broker epoch
that inter-broker requests carry before they knew one (-1).
"""
from __future__ import annotations

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, SHARE_GROUP_STATE_TOPIC_NAME})

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1

CONSUMER_REPLICA_ID = -1        # Fetch and ListOffsets from a consumer
DEBUGGING_REPLICA_ID = -2       # a consumer that may read past the high watermark, from any replica

NO_LEADER = -1                  # no live leader; Metadata answers LEADER_NOT_AVAILABLE
LEADER_DURING_DELETE = -2       # the topic is being deleted (sent in UpdateMetadata)
NO_EPOCH = -1                   # the leader epoch of a partition without leadership information
EPOCH_DURING_DELETE = -2        # the leader epoch StopReplica carries for a topic being deleted
UNKNOWN_BROKER_EPOCH = -1       # an inter-broker request from a version without the broker epoch
