"""A streams group's topology as its members declare it, and the same topology configured against the
cluster's metadata (Kafka's StreamsTopology, ConfiguredTopology, InternalTopicManager, TopologyValidation).

Configuring it finds each subtopology's number of tasks (the most partitions among its source topics,
external or repartition), the partition count of every repartition topic that declares none (the task
count of the subtopologies writing into it, repeated until nothing changes, then made equal within a
copartition group), and of every changelog topic (its subtopology's task count). What is missing or
wrongly partitioned becomes the heartbeat's Status; the internal topics missing are returned to be
created, as Kafka's coordinator asks its broker to create them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ...protocol.errors import ErrorCode, KafkaError

# StreamsGroupHeartbeatResponse's Status codes
STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS, \
    SHUTDOWN_APPLICATION, ASSIGNMENT_DELAYED, MISSING_CLIENT_TAGS = 0, 1, 2, 3, 4, 5, 6

_LEGAL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class TopicInfo(NamedTuple):
    name: str
    partitions: int = 0             # 0: derived by the broker
    replication_factor: int = 0     # 0: the broker's default
    configs: tuple = ()             # ((key, value), ...)


class CopartitionGroup(NamedTuple):
    source_topics: tuple = ()           # indexes into the subtopology's source topics
    repartition_source_topics: tuple = ()


class Subtopology(NamedTuple):
    subtopology_id: str
    source_topics: tuple = ()
    repartition_sink_topics: tuple = ()
    state_changelog_topics: tuple = ()      # TopicInfo
    repartition_source_topics: tuple = ()   # TopicInfo
    copartition_groups: tuple = ()          # CopartitionGroup

    @property
    def is_stateful(self) -> bool:
        return bool(self.state_changelog_topics)


class StreamsTopology(NamedTuple):
    epoch: int
    subtopologies: tuple    # Subtopology, ordered by id

    def subtopology(self, subtopology_id: str) -> Subtopology | None:
        return next((s for s in self.subtopologies if s.subtopology_id == subtopology_id), None)


def topology_from_request(t) -> StreamsTopology:
    """StreamsGroupHeartbeatRequest.Topology -> StreamsTopology."""
    def info(i):
        return TopicInfo(i.name, i.partitions, i.replication_factor,
                         tuple((kv.key, kv.value) for kv in i.topic_configs or ()))
    subs = []
    for s in t.subtopologies or ():
        subs.append(Subtopology(
            s.subtopology_id, tuple(s.source_topics or ()), tuple(s.repartition_sink_topics or ()),
            tuple(info(i) for i in s.state_changelog_topics or ()),
            tuple(info(i) for i in s.repartition_source_topics or ()),
            tuple(CopartitionGroup(tuple(g.source_topics or ()), tuple(g.repartition_source_topics or ()))
                  for g in s.copartition_groups or ())))
    return StreamsTopology(t.epoch, tuple(sorted(subs)))


def _check_name(name: str, what: str) -> None:
    if not name or len(name) > 249 or name in (".", "..") or not set(name) <= _LEGAL:
        raise KafkaError(ErrorCode.STREAMS_INVALID_TOPOLOGY, f"{what} {name!r} is not a valid topic name.")


def validate_topology(topology: StreamsTopology) -> None:
    """STREAMS_INVALID_TOPOLOGY for what Kafka's TopologyValidation and the service reject."""
    seen = set()
    repartition_sources = {i.name for s in topology.subtopologies for i in s.repartition_source_topics}
    for s in topology.subtopologies:
        if not s.subtopology_id or s.subtopology_id in seen:
            raise KafkaError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                             f"Subtopology id {s.subtopology_id!r} is empty or not unique.")
        seen.add(s.subtopology_id)
        if not s.source_topics and not s.repartition_source_topics:
            raise KafkaError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                             f"Subtopology {s.subtopology_id} has no source topics.")
        for name in s.source_topics:
            _check_name(name, "Source topic")
        for i in s.state_changelog_topics:
            _check_name(i.name, "Changelog topic")
            if i.partitions != 0:
                raise KafkaError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                 f"Changelog topic {i.name} must have an undefined partition count, but it is set "
                                 f"to {i.partitions}.")
        for i in s.repartition_source_topics:
            _check_name(i.name, "Repartition topic")
            if i.partitions < 0:
                raise KafkaError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                 f"Repartition topic {i.name} has a negative partition count.")
        for name in s.repartition_sink_topics:
            if name not in repartition_sources:
                raise KafkaError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                 f"Repartition sink topic {name} is not a repartition source topic of any "
                                 f"subtopology.")
        for g in s.copartition_groups:
            if any(not 0 <= n < len(s.source_topics) for n in g.source_topics) or \
                    any(not 0 <= n < len(s.repartition_source_topics) for n in g.repartition_source_topics):
                raise KafkaError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                 f"Subtopology {s.subtopology_id} has a copartition group out of range.")


@dataclass
class ConfiguredTopology:
    """What a topology comes to against the metadata: tasks per subtopology when it is ready to assign."""
    topology: StreamsTopology
    tasks: dict = field(default_factory=dict)           # subtopology id -> number of tasks (partitions)
    status: list = field(default_factory=list)          # [(code, detail)]
    to_create: dict = field(default_factory=dict)       # internal topic -> TopicInfo with its partitions
    signature: tuple = ()                               # what the configuration depended on

    @property
    def is_ready(self) -> bool:
        return not self.status


def configure(topology: StreamsTopology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    """`partitions_of(topic)` is the topic's partition count, None when it does not exist."""
    looked: dict = {}
    out = _configure(topology, partitions_of, looked)
    out.signature = tuple(sorted(looked.items()))
    return out


def _configure(topology, partitions_of, looked) -> ConfiguredTopology:
    subs = topology.subtopologies

    def existing(name):
        if name not in looked:
            looked[name] = partitions_of(name)
        return looked[name]

    out = ConfiguredTopology(topology)
    missing = sorted({t for s in subs for t in s.source_topics if existing(t) is None})
    if missing:
        out.status.append((MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing."))
        return out
    # repartition topics: declared counts, else the task count of the subtopologies writing into them
    repartition = {i.name: (i.partitions or None) for s in subs for i in s.repartition_source_topics}

    def task_count(s):
        counts = [existing(t) for t in s.source_topics]
        counts += [repartition[i.name] for i in s.repartition_source_topics]
        return None if any(c is None for c in counts) else max(counts, default=0)

    changed = True
    while changed:
        changed = False
        for s in subs:
            n = task_count(s)
            if n is None:
                continue
            for sink in s.repartition_sink_topics:
                fixed = next(i.partitions for t in subs for i in t.repartition_source_topics if i.name == sink)
                if not fixed and (repartition[sink] or 0) < n:
                    repartition[sink] = n
                    changed = True
    unresolved = sorted(n for n, c in repartition.items() if c is None)
    if unresolved:
        out.status.append((MISSING_SOURCE_TOPICS,
                           f"The partition counts of repartition topics {', '.join(unresolved)} cannot be derived."))
        return out
    # copartition groups: external sources must agree; undeclared repartition topics follow them
    for s in subs:
        for g in s.copartition_groups:
            external = {existing(s.source_topics[n]) for n in g.source_topics}
            names = [s.repartition_source_topics[n] for n in g.repartition_source_topics]
            if len(external) > 1:
                topics = sorted(s.source_topics[n] for n in g.source_topics)
                out.status.append((INCORRECTLY_PARTITIONED_TOPICS,
                                   f"Following topics do not have the same number of partitions: "
                                   f"[{', '.join(topics)}]"))
                continue
            target = next(iter(external)) if external else max((repartition[i.name] for i in names), default=0)
            for i in names:
                if not i.partitions:
                    repartition[i.name] = target
                elif i.partitions != target:
                    out.status.append((INCORRECTLY_PARTITIONED_TOPICS,
                                       f"Repartition topic {i.name} has {i.partitions} partitions, its copartition "
                                       f"group needs {target}."))
    if out.status:
        return out
    internal = {}
    for s in subs:
        n = task_count(s)
        out.tasks[s.subtopology_id] = n
        for i in s.repartition_source_topics:
            internal[i.name] = i._replace(partitions=repartition[i.name])
        for i in s.state_changelog_topics:
            internal[i.name] = i._replace(partitions=n)
    wrong = []
    for name, info in sorted(internal.items()):
        have = existing(name)
        if have is None:
            out.to_create[name] = info
        elif have != info.partitions:
            wrong.append(f"{name} has {have} partitions, expected {info.partitions}")
    if wrong:
        out.status.append((INCORRECTLY_PARTITIONED_TOPICS, "Internal topics are incorrectly partitioned: "
                           + "; ".join(wrong) + "."))
    if out.to_create:
        out.status.append((MISSING_INTERNAL_TOPICS,
                           f"Internal topics are missing: {', '.join(sorted(out.to_create))}"))
    if not out.is_ready:
        out.tasks = {}
    return out
