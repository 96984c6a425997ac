"""BrokerTopicStats: per-topic and all-topics traffic counters (Kafka's BrokerTopicMetrics).

Bumped once per partition of a request (never per record), read when the
metrics are scraped. Plain integers: the event loop is the only writer and a
scrape copies them, so no lock is needed. Kafka exposes these as meters named
`MessagesInPerSec`, `BytesInPerSec`...; a scrape sees their running counts.
"""
from __future__ import annotations

# (field, Kafka's meter name) in the order a scrape lists them
METERS = (
    ("messages_in", "MessagesInPerSec"),
    ("bytes_in", "BytesInPerSec"),
    ("bytes_out", "BytesOutPerSec"),
    ("bytes_rejected", "BytesRejectedPerSec"),
    ("total_produce_requests", "TotalProduceRequestsPerSec"),
    ("failed_produce_requests", "FailedProduceRequestsPerSec"),
    ("total_fetch_requests", "TotalFetchRequestsPerSec"),
    ("failed_fetch_requests", "FailedFetchRequestsPerSec"),
)
# only for all topics, as in Kafka
ALL_TOPICS_METERS = (
    ("replication_bytes_in", "ReplicationBytesInPerSec"),
    ("replication_bytes_out", "ReplicationBytesOutPerSec"),
)
# tiered storage (KIP-405): for all topics, and per topic for the topics with remote traffic
REMOTE_METERS = (
    ("remote_copy_bytes", "RemoteCopyBytesPerSec"),
    ("remote_copy_requests", "RemoteCopyRequestsPerSec"),
    ("remote_copy_errors", "RemoteCopyErrorsPerSec"),
    ("remote_fetch_bytes", "RemoteFetchBytesPerSec"),
    ("remote_fetch_requests", "RemoteFetchRequestsPerSec"),
    ("remote_fetch_errors", "RemoteFetchErrorsPerSec"),
    ("remote_delete_requests", "RemoteDeleteRequestsPerSec"),
    ("remote_delete_errors", "RemoteDeleteErrorsPerSec"),
)
# and its gauges, per topic over the partitions led here (the remote log manager's copy task keeps them)
REMOTE_GAUGES = ("RemoteLogSizeBytes", "RemoteCopyLagBytes", "RemoteCopyLagSegments", "RemoteLogMetadataCount")


class BrokerTopicMetrics:
    __slots__ = tuple(f for f, _ in METERS + ALL_TOPICS_METERS + REMOTE_METERS)

    def __init__(self) -> None:
        for f in self.__slots__:
            setattr(self, f, 0)

    def snapshot(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in self.__slots__}


class BrokerTopicStats:
    def __init__(self) -> None:
        self.all_topics = BrokerTopicMetrics()
        self.topics: dict[str, BrokerTopicMetrics] = {}

    def topic(self, name: str) -> BrokerTopicMetrics:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = BrokerTopicMetrics()
        return stats

    def record_append(self, topic: str, nbytes: int, messages: int) -> None:
        """One partition's successful append as leader (ReplicaManager.appendToLocalLog)."""
        t, a = self.topic(topic), self.all_topics
        t.total_produce_requests += 1
        a.total_produce_requests += 1
        t.bytes_in += nbytes
        a.bytes_in += nbytes
        t.messages_in += messages
        a.messages_in += messages

    def record_failed_append(self, topic: str, nbytes: int, rejected: bool) -> None:
        """A partition's append that failed; ``rejected``: the batch itself was refused (bytes rejected)."""
        t, a = self.topic(topic), self.all_topics
        t.total_produce_requests += 1
        a.total_produce_requests += 1
        t.failed_produce_requests += 1
        a.failed_produce_requests += 1
        if rejected:
            t.bytes_rejected += nbytes
            a.bytes_rejected += nbytes

    def record_fetch(self, topic: str, failed: bool) -> None:
        """One partition read for a fetch (ReplicaManager.readFromLocalLog)."""
        t, a = self.topic(topic), self.all_topics
        t.total_fetch_requests += 1
        a.total_fetch_requests += 1
        if failed:
            t.failed_fetch_requests += 1
            a.failed_fetch_requests += 1

    def record_remote(self, topic: str, field: str, n: int = 1) -> None:
        """Tiered storage traffic (a REMOTE_METERS field), from the remote log manager (the event loop)."""
        setattr(self.topic(topic), field, getattr(self.topic(topic), field) + n)
        setattr(self.all_topics, field, getattr(self.all_topics, field) + n)

    def record_bytes_out(self, topic: str, nbytes: int, from_follower: bool) -> None:
        """Record bytes sent in a fetch response; a follower's count as replication traffic only."""
        if from_follower:
            self.all_topics.replication_bytes_out += nbytes
        else:
            self.topic(topic).bytes_out += nbytes
            self.all_topics.bytes_out += nbytes

    def record_replication_bytes_in(self, nbytes: int) -> None:
        """For the replica fetcher: bytes a follower appended from its leader."""
        self.all_topics.replication_bytes_in += nbytes

    def remove_topic(self, name: str) -> None:
        """A deleted topic's series disappear, as Kafka removes its metrics."""
        self.topics.pop(name, None)
