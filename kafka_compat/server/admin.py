"""Admin APIs of a single node: topics, partitions, the cluster, log dirs, producers, elections.

Every change goes through the controller (controller.py), so these handlers
only check requests the way Kafka's KRaft controller does (same error codes,
same order of checks) and shape the answers. With one broker, replica
assignments may only name this node, every partition leads on it, and the
preferred leader is always the leader.
"""
from __future__ import annotations

import os
from collections import Counter

from ..config import effective_topic_config
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.create_partitions import CreatePartitionsResponse
from ..protocol.messages.create_topics import CreateTopicsResponse
from ..protocol.messages.delete_topics import DeleteTopicsResponse
from ..protocol.messages.describe_cluster import DescribeClusterResponse
from ..protocol.messages.describe_log_dirs import DescribeLogDirsResponse
from ..protocol.messages.describe_producers import DescribeProducersResponse
from ..protocol.messages.describe_topic_partitions import DescribeTopicPartitionsResponse
from ..protocol.messages.elect_leaders import ElectLeadersResponse
from ..protocol.primitives import ZERO_UUID
from .metadata import AUTHORIZED_OPS_NOT_REQUESTED, CLUSTER_OPS, TOPIC_OPS
from .registry import handles
from .topics import INTERNAL_TOPICS, validate_name

ENDPOINT_BROKER, ENDPOINT_CONTROLLER = 1, 2
PREFERRED, UNCLEAN = 0, 1
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


def _fail(code: ErrorCode, message: str):
    raise KafkaError(code, message)


def check_replicas(broker, broker_ids: list[int], replication_factor: int | None) -> None:
    """Kafka's manual-assignment rules; with one broker, only [node id] passes them."""
    if not broker_ids:
        _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    previous = None
    for b in sorted(broker_ids):
        if b != broker.node_id:
            _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                  f"The manual partition assignment includes broker {b}, but no such broker is registered.")
        if b == previous:
            _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                  f"The manual partition assignment includes the broker {b} more than once.")
        previous = b
    if replication_factor is not None and len(broker_ids) != replication_factor:
        _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
              f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but "
              f"this is not consistent with previous partitions, which have {replication_factor} replica(s).")


# -- CreateTopics -------------------------------------------------------------------------

def _requested_partitions(broker, t) -> tuple[int, int]:
    """Partitions and replication factor from the assignments, or the counts (-1 = broker default)."""
    if t.assignments:
        if t.replication_factor != -1:
            _fail(ErrorCode.INVALID_REQUEST,
                  "A manual partition assignment was specified, but replication factor was not set to -1.")
        if t.num_partitions != -1:
            _fail(ErrorCode.INVALID_REQUEST,
                  "A manual partition assignment was specified, but numPartitions was not set to -1.")
        seen, rf = set(), None
        for a in t.assignments:
            if a.partition_index in seen:
                _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      f"Found multiple manual partition assignments for partition {a.partition_index}")
            check_replicas(broker, a.broker_ids, rf)
            seen.add(a.partition_index)
            rf = len(a.broker_ids)
        if seen != set(range(len(seen))):
            _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
        return len(seen), rf
    if t.replication_factor < -1 or t.replication_factor == 0:
        _fail(ErrorCode.INVALID_REPLICATION_FACTOR,
              "Replication factor must be larger than 0, or -1 to use the default value.")
    if t.num_partitions < -1 or t.num_partitions == 0:
        _fail(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    rf = broker.config["default.replication.factor"] if t.replication_factor == -1 else t.replication_factor
    if rf > 1:
        _fail(ErrorCode.INVALID_REPLICATION_FACTOR,
              f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot "
              "be reached because only 1 broker(s) are registered.")
    return (broker.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions), rf


def _create_one(broker, t, validate_only: bool) -> CreateTopicsResponse.CreatableTopicResult:
    """Name, existence, configs, then partitions, in the order Kafka's controller checks them."""
    validate_name(t.name)
    if broker.topics.get(t.name) is not None:
        _fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    other = broker.topics.collides(t.name)
    if other:
        _fail(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{t.name}' collides with existing topic: {other}")
    nulls = [c.name for c in t.configs if c.value is None]
    if nulls:
        _fail(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls))
    configs = {c.name: c.value for c in t.configs}
    effective = effective_topic_config(broker.config, configs)
    partitions, rf = _requested_partitions(broker, t)
    topic = broker.controller.create_topic(t.name, partitions, rf, configs, validate_only)
    return CreateTopicsResponse.CreatableTopicResult(
        name=t.name, topic_id=topic.topic_id if topic else ZERO_UUID, error_code=ErrorCode.NONE,
        error_message=None, num_partitions=partitions, replication_factor=rf,
        configs=[CreateTopicsResponse.CreatableTopicConfigs(
            name=name, value=None if e.is_sensitive else e.value, read_only=e.read_only,
            config_source=int(e.effective_source), is_sensitive=e.is_sensitive)
            for name, e in sorted(effective.items())])


@handles(19)
def handle_create_topics(broker, request):
    """v5+ answers with the partitions, replication factor and effective configs of each topic,
    also for validate_only (whose topic id stays zero: no topic was made)."""
    req = request.body
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        if counts[t.name] > 1:
            continue
        try:
            results.append(_create_one(broker, t, req.validate_only))
        except KafkaError as e:
            results.append(CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=e.error_code,
                                                                     error_message=e.message))
    for name in dict.fromkeys(t.name for t in req.topics if counts[t.name] > 1):
        results.append(CreateTopicsResponse.CreatableTopicResult(
            name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name."))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


# -- DeleteTopics -------------------------------------------------------------------------

@handles(20)
def handle_delete_topics(broker, request):
    """By name (all versions) or by topic id (v6+), with Kafka's checks for duplicates and mixes."""
    req = request.body
    v = request.api_version
    Result = DeleteTopicsResponse.DeletableTopicResult
    asked = [(n, ZERO_UUID) for n in req.topic_names] if v < 6 else [(t.name, t.topic_id) for t in req.topics]
    if not broker.config["delete.topic.enable"]:
        code = ErrorCode.INVALID_REQUEST if v < 3 else ErrorCode.TOPIC_DELETION_DISABLED
        return DeleteTopicsResponse(throttle_time_ms=0, responses=[
            Result(name=n, topic_id=i, error_code=code, error_message="Topic deletion is disabled.")
            for n, i in asked])
    results = []

    def answer(name, topic_id, code=ErrorCode.NONE, message=None):
        if code and message is None:
            message = code.message
        results.append(Result(name=name, topic_id=topic_id, error_code=code, error_message=message))

    by_name = Counter(n for n, i in asked if n is not None and i == ZERO_UUID)
    by_id = Counter(i for n, i in asked if n is None and i != ZERO_UUID)
    for name, topic_id in asked:
        if name is None and topic_id == ZERO_UUID:
            answer(None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
        elif name is not None and topic_id != ZERO_UUID:
            answer(name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    for name in (n for n, c in by_name.items() if c > 1):
        answer(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    for topic_id in (i for i, c in by_id.items() if c > 1):
        answer(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
    doomed: dict[bytes, str] = {}
    for topic_id in (i for i, c in by_id.items() if c == 1):
        topic = broker.topics.by_id.get(topic_id)
        if topic is None:
            answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
        else:
            doomed[topic_id] = topic.name
    for name in (n for n, c in by_name.items() if c == 1):
        topic = broker.topics.get(name)
        if topic is None:
            answer(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        elif topic.topic_id in doomed:
            # Kafka answers only this entry when a name repeats an id given in the same request.
            del doomed[topic.topic_id]
            answer(name, topic.topic_id, ErrorCode.INVALID_REQUEST,
                   "The provided topic name maps to an ID that was already supplied.")
        else:
            doomed[topic.topic_id] = name
    for topic_id, name in doomed.items():
        try:
            broker.controller.delete_topic(name)
            answer(name, topic_id)
        except KafkaError as e:
            answer(name, topic_id, e.error_code, e.message)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


# -- CreatePartitions ---------------------------------------------------------------------

def _add_partitions(broker, t, validate_only: bool) -> None:
    topic = broker.topics.get(t.name)
    if topic is None:
        _fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
    broker.controller.create_partitions(t.name, t.count, validate_only=True)  # count checks
    if t.assignments is not None:
        additional = t.count - topic.partitions
        if len(t.assignments) != additional:
            _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                  f"Attempted to add {additional} additional partition(s), but only {len(t.assignments)} "
                  "assignment(s) were specified.")
        for a in t.assignments:
            check_replicas(broker, a.broker_ids, 1)
    if not validate_only:
        broker.controller.create_partitions(t.name, t.count)


@handles(37)
def handle_create_partitions(broker, request):
    """Null assignments let the broker place the new partitions (here: on itself)."""
    req = request.body
    Result = CreatePartitionsResponse.CreatePartitionsTopicResult
    counts = Counter(t.name for t in req.topics)
    results = [Result(name=n, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
               for n, c in counts.items() if c > 1]
    for t in req.topics:
        if counts[t.name] > 1:
            continue
        try:
            _add_partitions(broker, t, req.validate_only)
            results.append(Result(name=t.name, error_code=ErrorCode.NONE, error_message=None))
        except KafkaError as e:
            results.append(Result(name=t.name, error_code=e.error_code, error_message=e.message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


# -- DescribeCluster ----------------------------------------------------------------------

@handles(60)
def handle_describe_cluster(broker, request):
    """A broker answers for brokers only: asked for controllers it says MISMATCHED_ENDPOINT_TYPE."""
    req = request.body
    v = request.api_version
    wanted = req.endpoint_type if v >= 1 else ENDPOINT_BROKER
    if wanted not in (ENDPOINT_BROKER, ENDPOINT_CONTROLLER):
        return DescribeClusterResponse(
            error_code=ErrorCode.INVALID_REQUEST if v == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"Unsupported endpoint type {wanted}")
    if wanted != ENDPOINT_BROKER:
        return DescribeClusterResponse(
            error_code=ErrorCode.INVALID_REQUEST if v == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                          "type CONTROLLER")
    host, port = broker.advertised_endpoint()
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=ENDPOINT_BROKER,
        cluster_id=broker.cluster_id, controller_id=broker.node_id,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(
            broker_id=broker.node_id, host=host, port=port, rack=broker.config.get("broker.rack"),
            is_fenced=False)],
        cluster_authorized_operations=CLUSTER_OPS if req.include_cluster_authorized_operations
        else AUTHORIZED_OPS_NOT_REQUESTED)


# -- DescribeLogDirs ----------------------------------------------------------------------

@handles(35)
def handle_describe_log_dirs(broker, request):
    """Each log dir with the sizes of its partitions (null topics = all); v4+ adds disk space."""
    req = request.body
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list]] = {d: {} for d in broker.log_dirs}
    for (topic, index), p in list(broker.replicas.partitions.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        parent = os.path.dirname(p.log.dir)
        if parent in by_dir:
            by_dir[parent].setdefault(topic, []).append(DescribeLogDirsResponse.DescribeLogDirsPartition(
                partition_index=index, partition_size=p.log.size, offset_lag=0, is_future_key=False))
    results = []
    for d, topics in by_dir.items():
        out = DescribeLogDirsResponse.DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=d, topics=[
            DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=sorted(
                parts, key=lambda x: x.partition_index)) for name, parts in sorted(topics.items())])
        try:
            st = os.statvfs(d)
            out.total_bytes, out.usable_bytes = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            out.error_code, out.topics = ErrorCode.KAFKA_STORAGE_ERROR, []
        results.append(out)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)


# -- DescribeTopicPartitions --------------------------------------------------------------

def _dtp_partitions(broker, topic, start: int, limit: int) -> tuple[list, int]:
    """Partitions start..start+limit of a topic, and the next index to ask for (-1 if none)."""
    upper = min(topic.partitions, start + limit)
    parts = []
    for index in range(start, upper):
        state = broker.replicas.partition_state(topic.name, index)
        parts.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.NONE, partition_index=index, leader_id=state.leader,
            leader_epoch=state.leader_epoch, replica_nodes=list(state.replicas), isr_nodes=list(state.isr),
            eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[]))
    return parts, (upper if upper < topic.partitions else -1)


@handles(75)
def handle_describe_topic_partitions(broker, request):
    """Topics in name order from the cursor on, at most `response_partition_limit` partitions
    (capped at 2000) per answer; `next_cursor` says where the next request starts.

    An empty topic list means every topic (then unknown ones are simply absent);
    otherwise an unknown topic answers UNKNOWN_TOPIC_OR_PARTITION (or
    INVALID_TOPIC_EXCEPTION for an illegal name) and still counts its place.
    """
    req = request.body
    Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
    everything = not req.topics
    cursor = req.cursor
    after = cursor.topic_name if cursor is not None else ""
    names = set(broker.topics.topics) if everything else {t.name for t in req.topics}
    names = {n for n in names if n >= after}
    if cursor is not None and ((not everything and cursor.topic_name not in names) or cursor.partition_index < 0):
        # Kafka's INVALID_REQUEST: the cursor must name a requested topic and a real partition.
        return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
            Topic(error_code=ErrorCode.INVALID_REQUEST, name=t.name, is_internal=False, partitions=[])
            for t in req.topics])
    limit = max(min(broker.config.get("max.request.partition.size.limit", MAX_REQUEST_PARTITION_SIZE_LIMIT),
                    req.response_partition_limit), 1)
    out = DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=None)
    remaining = limit
    for name in sorted(names):
        if remaining == 0:
            out.next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=0)
            break
        topic = broker.topics.get(name)
        if topic is None:
            if not everything:
                try:
                    validate_name(name)
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                except KafkaError:
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                out.topics.append(Topic(error_code=code, name=name, topic_id=ZERO_UUID,
                                        is_internal=name in INTERNAL_TOPICS, partitions=[],
                                        topic_authorized_operations=TOPIC_OPS))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts, following = _dtp_partitions(broker, topic, start, remaining)
        out.topics.append(Topic(error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                                is_internal=topic.internal, partitions=parts,
                                topic_authorized_operations=TOPIC_OPS))
        if following != -1:
            out.next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=following)
            break
        remaining -= len(parts)
    return out


# -- DescribeProducers --------------------------------------------------------------------

def _producers(broker, name: str, index: int, topic_error) -> DescribeProducersResponse.PartitionResponse:
    out = DescribeProducersResponse.PartitionResponse(partition_index=index, error_code=ErrorCode.NONE,
                                                      error_message=None, active_producers=[])
    if topic_error is not None:
        out.error_code, out.error_message = topic_error
        return out
    partition = broker.replicas.get(name, index)
    if partition is None:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    for p in partition.log.active_producers():
        out.active_producers.append(DescribeProducersResponse.ProducerState(
            producer_id=p.producer_id, producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
            last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
            current_txn_start_offset=p.current_txn_start_offset))
    return out


@handles(61)
def handle_describe_producers(broker, request):
    """The idempotent producers each partition remembers, with their last sequence and timestamp."""
    topics = []
    for t in request.body.topics:
        topic_error = None
        try:
            validate_name(t.name)
            if broker.topics.get(t.name) is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topic_error = (code, code.message)
        except KafkaError as e:
            topic_error = (e.error_code, e.message)
        topics.append(DescribeProducersResponse.TopicResponse(
            name=t.name, partitions=[_producers(broker, t.name, i, topic_error) for i in t.partition_indexes]))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


# -- ElectLeaders -------------------------------------------------------------------------

def _election(broker, topic: str, index: int) -> ElectLeadersResponse.PartitionResult:
    """Every partition already leads on its preferred (only) replica: nothing to elect."""
    t = broker.topics.get(topic)
    if t is None:
        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    elif not 0 <= index < t.partitions:
        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{index}"
    else:
        code = ErrorCode.ELECTION_NOT_NEEDED
        message = code.message
    return ElectLeadersResponse.PartitionResult(partition_id=index, error_code=code, error_message=message)


@handles(43)
def handle_elect_leaders(broker, request):
    """Null partitions mean all; Kafka then leaves out those that needed no election (here: all)."""
    req = request.body
    v = request.api_version
    Result = ElectLeadersResponse.ReplicaElectionResult
    election = req.election_type if v >= 1 else PREFERRED
    if election not in (PREFERRED, UNCLEAN):
        message = f"Unknown election type {election}"
        return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                    replica_election_results=[Result(topic=t.topic, partition_result=[
                                        ElectLeadersResponse.PartitionResult(
                                            partition_id=p, error_code=ErrorCode.INVALID_REQUEST,
                                            error_message=message) for p in t.partitions])
                                        for t in req.topic_partitions or []])
    if req.topic_partitions is None:
        results = [Result(topic=name, partition_result=[]) for name in list(broker.topics.topics)]
    else:
        results = [Result(topic=t.topic, partition_result=[_election(broker, t.topic, p) for p in t.partitions])
                   for t in req.topic_partitions]
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)
