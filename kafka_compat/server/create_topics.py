"""CreateTopics and CreatePartitions: Kafka's checks, in Kafka's order, then the controller.

Manual replica assignments must name live brokers, each once, with one replication factor.
In a ZooKeeper cluster (an asynchronous admin manager, see admin_manager) only the controller's
broker answers, and the answer waits until the metadata cache shows a leader for every new
partition or `timeoutMs` passes (REQUEST_TIMED_OUT), as Kafka's DelayedCreatePartitions.
"""
from __future__ import annotations

from collections import Counter

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.create_partitions import CreatePartitionsResponse
from ..protocol.messages.create_topics import CreateTopicsResponse
from ..protocol.primitives import ZERO_UUID
from ..zk.zk_data import TopicPartition
from .admin_manager import is_asynchronous, resolved, respond
from .auth_helper import ALTER, CREATE, DESCRIBE_CONFIGS, NO_AUTHORIZER, TOPIC, AuthHelper
from .config_helper import effective_topic_config
from .controller_mutation_quota import ControllerMutationQuota, ControllerMutationQuotaManager, unlimited
from .registry import handles
from .topics import validate_name

# Kafka's controller refuses a CreateTopics asking for more partitions in all (QuorumController's
# MAX_RECORDS_PER_USER_OP), before looking at any topic.
MAX_PARTITIONS_PER_REQUEST = 10000

def _fail(code: ErrorCode, message: str):
    raise KafkaError(code, message)


class CreateTopicsApi:
    def __init__(self, config, metadata_cache, controller, auth: AuthHelper = NO_AUTHORIZER,
                 quotas: ControllerMutationQuotaManager | None = None):
        self.config = config
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.auth = auth
        self.quotas = quotas or unlimited()

    def check_replicas(self, broker_ids: list[int], replication_factor: int | None) -> None:
        """Kafka's manual-assignment rules: live brokers, each once, one replication factor."""
        if not broker_ids:
            _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                  "The manual partition assignment includes an empty replica list.")
        previous = None
        for b in sorted(broker_ids):
            if not self.metadata_cache.is_alive(b):
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

    def _requested_partitions(self, t) -> tuple[int, int]:
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
                self.check_replicas(a.broker_ids, rf)
                seen.add(a.partition_index)
                rf = len(a.broker_ids)
            if seen != set(range(len(seen))):
                _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      "partitions should be a consecutive 0-based integer sequence")
            return len(seen), rf
        if t.replication_factor < -1 or t.replication_factor == 0:
            _fail(ErrorCode.INVALID_REPLICATION_FACTOR,
                  "Replication factor must be larger than 0, or -1 to use the default value.")
        if t.num_partitions < -1 or t.num_partitions == 0:
            _fail(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        rf = self.config["default.replication.factor"] if t.replication_factor == -1 else t.replication_factor
        brokers = len(self.metadata_cache.alive_brokers())
        if rf > brokers:
            _fail(ErrorCode.INVALID_REPLICATION_FACTOR,
                  f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot "
                  f"be reached because only {brokers} broker(s) are registered.")
        return (self.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions), rf

    @property
    def _clustered(self) -> bool:
        return is_asynchronous(self.controller)

    async def _create_one(self, t, validate_only: bool, show_configs: bool,
                          quota: ControllerMutationQuota) -> CreateTopicsResponse.CreatableTopicResult:
        """Name, existence, configs, then partitions, in the order Kafka's controller checks them.
        Without `show_configs` (DESCRIBE_CONFIGS on the topic) the answer leaves out the topic's settings."""
        validate_name(t.name)
        if self.metadata_cache.get(t.name) is not None:
            _fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        other = self.metadata_cache.collides(t.name)
        if other:
            _fail(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{t.name}' collides with existing topic: {other}")
        nulls = [c.name for c in t.configs if c.value is None]
        if nulls:
            _fail(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls))
        configs = {c.name: c.value for c in t.configs}
        effective = effective_topic_config(self.config, configs)
        partitions, rf = self._requested_partitions(t)
        placement = {"assignments": {a.partition_index: list(a.broker_ids) for a in t.assignments}} \
            if self._clustered and t.assignments else {}
        topic = await resolved(self.controller.create_topic(t.name, partitions, rf, configs, validate_only,
                                                            on_valid=quota.record, **placement))
        if not show_configs:
            return CreateTopicsResponse.CreatableTopicResult(
                name=t.name, topic_id=topic.topic_id if topic else ZERO_UUID, error_code=ErrorCode.NONE,
                error_message=None, topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        return CreateTopicsResponse.CreatableTopicResult(
            name=t.name, topic_id=topic.topic_id if topic else ZERO_UUID, error_code=ErrorCode.NONE,
            error_message=None, num_partitions=partitions, replication_factor=rf,
            configs=[CreateTopicsResponse.CreatableTopicConfigs(
                name=name, value=None if e.is_sensitive else e.value, read_only=e.read_only,
                config_source=int(e.effective_source), is_sensitive=e.is_sensitive)
                for name, e in sorted(effective.items())])

    @handles(19)
    def handle_create_topics(self, request):
        """v5+ answers with the partitions, replication factor and effective configs of each topic,
        also for validate_only (whose topic id stays zero: no topic was made)."""
        return respond(self.controller, self._create_topics(request))

    async def _create_topics(self, request):
        req = request.body
        Result = CreateTopicsResponse.CreatableTopicResult
        if self._clustered and not self.controller.is_active_controller():
            return CreateTopicsResponse(throttle_time_ms=0, topics=[
                Result(name=t.name, error_code=ErrorCode.NOT_CONTROLLER, error_message=None) for t in req.topics])
        if self._total_partitions(req.topics) > MAX_PARTITIONS_PER_REQUEST:
            return CreateTopicsResponse(throttle_time_ms=0, topics=[
                Result(name=t.name, error_code=ErrorCode.POLICY_VIOLATION,
                       error_message="Excessively large number of partitions per request.") for t in req.topics])
        quota = self.quotas.quota_for_request(request)
        counts = Counter(t.name for t in req.topics)
        auth = self.auth
        cluster_create = auth.authorize_cluster(request, CREATE)
        results = []
        for t in req.topics:
            if counts[t.name] > 1:
                continue
            if not cluster_create and not auth.authorize(request, CREATE, TOPIC, t.name):
                results.append(Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      error_message="Authorization failed."))
                continue
            try:
                results.append(await self._create_one(t, req.validate_only,
                                                      auth.authorize(request, DESCRIBE_CONFIGS, TOPIC, t.name), quota))
            except KafkaError as e:
                results.append(Result(name=t.name, error_code=e.error_code, error_message=e.message))
        for name in dict.fromkeys(t.name for t in req.topics if counts[t.name] > 1):
            results.append(Result(name=name, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Duplicate topic name."))
        if self._clustered and not req.validate_only:
            created = {r.name: r.num_partitions for r in results if r.error_code == ErrorCode.NONE}
            leaderless = await self._leaderless(created, req.timeout_ms)
            for r in results:
                if r.name in leaderless:
                    r.error_code, r.error_message = ErrorCode.REQUEST_TIMED_OUT, None
                    r.configs, r.num_partitions, r.replication_factor, r.topic_config_error_code = [], -1, -1, 0
        return CreateTopicsResponse(throttle_time_ms=quota.throttle_time_ms, topics=results)

    def _total_partitions(self, topics) -> int:
        """Partitions asked for in all: assignments, else the count (-1: num.partitions)."""
        total = 0
        for t in topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += self.config["num.partitions"]
            elif t.num_partitions > 0:
                total += t.num_partitions
        return total

    async def _leaderless(self, partition_counts: dict[str, int], timeout_ms: int) -> set[str]:
        """Kafka's DelayedCreatePartitions: the topics that still lack a leader for some partition when
        all have one or at the timeout (all of them if the timeout is not positive)."""
        if timeout_ms <= 0:
            return set(partition_counts)
        waiting = [TopicPartition(name, p) for name, count in partition_counts.items() for p in range(count)]
        return {tp.topic for tp in await self.controller.wait_for_leaders(waiting, timeout_ms)}

    async def _add_partitions(self, t, validate_only: bool, quota: ControllerMutationQuota) -> None:
        topic = self.metadata_cache.get(t.name)
        if topic is None:
            _fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
        if t.count - len(topic.partition_states) > MAX_PARTITIONS_PER_REQUEST:
            _fail(ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
        if self._clustered:
            # ZooKeeper's admin manager checks counts and placement against the topic's replication factor,
            # then charges the quota for the partitions it adds
            assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            await self.controller.create_partitions(t.name, t.count, validate_only, assignments,
                                                    on_valid=quota.record)
            return
        await resolved(self.controller.create_partitions(t.name, t.count, validate_only=True))  # count checks
        if t.assignments is not None:
            additional = t.count - topic.partitions
            if len(t.assignments) != additional:
                _fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      f"Attempted to add {additional} additional partition(s), but only {len(t.assignments)} "
                      "assignment(s) were specified.")
            for a in t.assignments:
                self.check_replicas(a.broker_ids, 1)
        if not validate_only:
            quota.record(t.count - topic.partitions)        # after every check, as Kafka charges it
            await resolved(self.controller.create_partitions(t.name, t.count))

    @handles(37)
    def handle_create_partitions(self, request):
        """Null assignments let the broker place the new partitions (a single node: on itself)."""
        return respond(self.controller, self._create_partitions(request))

    async def _create_partitions(self, request):
        req = request.body
        Result = CreatePartitionsResponse.CreatePartitionsTopicResult
        if self._clustered and not self.controller.is_active_controller():
            return CreatePartitionsResponse(throttle_time_ms=0, results=[
                Result(name=t.name, error_code=ErrorCode.NOT_CONTROLLER, error_message=None) for t in req.topics])
        quota = self.quotas.quota_for_request(request)
        counts = Counter(t.name for t in req.topics)
        results = [Result(name=n, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
                   for n, c in counts.items() if c > 1]
        for t in req.topics:
            if counts[t.name] > 1:
                continue
            if not self.auth.authorize(request, ALTER, TOPIC, t.name):
                results.append(Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      error_message=ErrorCode.TOPIC_AUTHORIZATION_FAILED.message))
                continue
            try:
                await self._add_partitions(t, req.validate_only, quota)
                results.append(Result(name=t.name, error_code=ErrorCode.NONE, error_message=None))
            except KafkaError as e:
                results.append(Result(name=t.name, error_code=e.error_code, error_message=e.message))
        if self._clustered and not req.validate_only:
            requested = {t.name: t.count for t in req.topics}
            grown = {r.name: requested[r.name] for r in results if r.error_code == ErrorCode.NONE}
            leaderless = await self._leaderless(grown, req.timeout_ms)
            for r in results:
                if r.name in leaderless:
                    r.error_code, r.error_message = ErrorCode.REQUEST_TIMED_OUT, None
        return CreatePartitionsResponse(throttle_time_ms=quota.throttle_time_ms, results=results)
