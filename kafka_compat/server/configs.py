"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic, broker, logger and group configs.

Topic configs are the topic's overrides (stored in the topic registry through
the controller) on top of the broker's defaults; describing a topic lists every
topic-level config with its effective value and where it came from, as Kafka
does. Broker configs can be changed at runtime for this broker (resource name =
its id) or as the cluster default (resource name ""), as far as
DynamicBrokerConfig allows: stored through the DynamicConfigManager and applied
at once. BROKER_LOGGER resources map onto Python's `logging` loggers. GROUP resources are a group's
own consumer.*, share.* and streams.* configs (GroupConfig), stored like a broker's dynamic configs.
"""
from __future__ import annotations

import logging

from kafka_compat.storage.log_config import TOPIC_CONFIG_DEF

from ..configdef import ConfigSource, ConfigType, convert_to_string
from ..group.group_config import GroupConfigManager
from ..group.group_config import validate as validate_group_configs
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.alter_configs import AlterConfigsResponse
from ..protocol.messages.describe_configs import DescribeConfigsResponse
from ..protocol.messages.incremental_alter_configs import IncrementalAlterConfigsResponse
from ..protocol.messages.list_config_resources import ListConfigResourcesResponse
from .admin_manager import resolved, respond
from .auth_helper import ALTER_CONFIGS, DESCRIBE_CONFIGS, NO_AUTHORIZER, AuthHelper
from .auth_helper import GROUP as GROUP_RESOURCE
from .auth_helper import TOPIC as TOPIC_RESOURCE
from .client_metrics_manager import CLIENT_METRICS_CONFIG_DEF, ClientMetricsManager, validate_subscription
from .client_quota_manager import sanitize
from .config_helper import describe_broker_config, describe_default_broker_config, effective_topic_config
from .dynamic_broker_config import DEFAULT
from .dynamic_config_manager import DynamicConfigManager
from .kafka_config import BROKER_CONFIG_DEF
from .registry import handles
from .topics import validate_name

# ConfigResource.Type ids
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
RESOURCE_TYPE_NAMES = {TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER",
                       CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}
LISTED_TYPES = {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}
# AlterConfigOp.OpType ids
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


class ConfigsApi:
    def __init__(self, broker_id, metadata_cache, config, controller, dynamic_config: DynamicConfigManager,
                 auth: AuthHelper = NO_AUTHORIZER, group_configs: GroupConfigManager | None = None,
                 client_metrics: ClientMetricsManager | None = None):
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.config = config
        self.controller = controller
        self.dynamic_config = dynamic_config
        self.dynamic_broker = dynamic_config.broker_config
        self.auth = auth
        self.group_configs = group_configs if group_configs is not None else GroupConfigManager(config)
        self.client_metrics = client_metrics if client_metrics is not None \
            else ClientMetricsManager(config["telemetry.max.bytes"])

    def _authorize(self, request, resource, operation: int) -> None:
        """DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster (broker and logger resources), the topic or the
        group, before anything about the resource is looked at."""
        rtype, name = resource.resource_type, resource.resource_name
        if rtype == TOPIC:
            if not self.auth.authorize(request, operation, TOPIC_RESOURCE, name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif rtype == GROUP:
            if not self.auth.authorize(request, operation, GROUP_RESOURCE, name):
                raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        elif rtype in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
            if not self.auth.authorize_cluster(request, operation):
                raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    def _node_id(self, name: str, what: str = "Broker id") -> None:
        """Resource names of BROKER/BROKER_LOGGER resources must be this node's id."""
        try:
            node = int(name)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{what} must be an integer, but it is: {name}") from None
        if node != self.broker_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                           f"Unexpected broker id, expected {self.broker_id}, but received {name}")




    # -- loggers (BROKER_LOGGER) ----------------------------------------------------------

    def _alter_loggers(self, resource, validate_only: bool) -> None:
        """KIP-412 log levels: SET a level or DELETE it (back to the parent's); nothing else."""
        self._node_id(resource.resource_name, "Node id")
        changes = []
        for c in resource.configs:
            op = c.config_operation
            if op in (APPEND, SUBTRACT):
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                               f"{OP_NAMES[op]} operation is not allowed for the BROKER_LOGGER resource")
            if op not in (SET, DELETE):
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                               f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource")
            lg = _logger(c.name)
            if op == DELETE:
                if c.name == ROOT_LOGGER:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     "Removing the log level of the root logger is not allowed")
                changes.append((lg, logging.NOTSET))
            elif c.value not in LOG4J_LEVELS:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                               f"Cannot set the log level of {c.name} to {c.value} as it is not a supported log "
                               f"level. Valid log levels are {', '.join(LOG4J_LEVELS)}")
            else:
                changes.append((lg, LOG4J_LEVELS[c.value]))
        if not validate_only:
            for lg, level in changes:
                lg.setLevel(level)


    # -- DescribeConfigs ------------------------------------------------------------------

    async def _describe(self, resource, synonyms: bool, docs: bool) -> list[Entry]:
        rtype, name = resource.resource_type, resource.resource_name
        if rtype == TOPIC:
            validate_name(name)
            topic = self.metadata_cache.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            overrides = await resolved(self.controller.topic_configs(name))
            dyn = self.dynamic_broker
            entries = effective_topic_config(self.config, overrides, dynamic_broker_configs=dyn.dynamic_broker,
                                             dynamic_default_broker_configs=dyn.dynamic_default).values()
            return [_entry(e, synonyms, docs) for e in entries]
        if rtype == BROKER:
            dyn = self.dynamic_broker
            if not name:
                entries = describe_default_broker_config(self.config, dyn.dynamic_default).values()
                return [_entry(e, synonyms, docs) for e in entries]
            self._node_id(name)
            entries = describe_broker_config(self.config, dynamic_broker_configs=dyn.dynamic_broker,
                                             dynamic_default_broker_configs=dyn.dynamic_default).values()
            return [_entry(e, synonyms, docs) for e in entries] + _unknown_broker_entries(self.config, synonyms)
        if rtype == BROKER_LOGGER:
            if not name:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
            self._node_id(name)
            src = int(ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)
            return [Entry(name=n, value=level, read_only=False, config_source=src, is_sensitive=False,
                          synonyms=[], config_type=0, documentation=None) for n, level in loggers().items()]
        if rtype == GROUP:
            if not name:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
            return [_group_entry(row, synonyms, docs) for row in self.group_configs.describe(name, self._sources())]
        if rtype == CLIENT_METRICS:
            if not name:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
            own = self.client_metrics.configs.get(name, {})
            return [_client_metrics_entry(key, own.get(key), synonyms, docs)
                    for key in CLIENT_METRICS_CONFIG_DEF]
        raise _unsupported(rtype)

    def _sources(self) -> dict[str, ConfigSource]:
        """Where each group.* broker setting came from: a group config's default synonym says so."""
        dyn = self.dynamic_broker
        out = {}
        for key in BROKER_CONFIG_DEF:
            if key.startswith("group."):
                if key in dyn.dynamic_broker:
                    out[key] = ConfigSource.DYNAMIC_BROKER_CONFIG
                elif key in dyn.dynamic_default:
                    out[key] = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                elif key in self.config.originals:
                    out[key] = ConfigSource.STATIC_BROKER_CONFIG
        return out

    @handles(32)
    def handle_describe_configs(self, request):
        """Every config of each resource (or the named ones); unknown names are left out."""
        return respond(self.controller, self._describe_configs(request))

    async def _describe_configs(self, request):
        req = request.body
        v = request.api_version
        synonyms = v >= 1 and req.include_synonyms
        docs = v >= 3 and req.include_documentation
        results = []
        for r in req.resources:
            out = Result(error_code=ErrorCode.NONE, error_message=None, resource_type=r.resource_type,
                         resource_name=r.resource_name, configs=[])
            try:
                self._authorize(request, r, DESCRIBE_CONFIGS)
                entries = await self._describe(r, synonyms, docs)
            except KafkaError as e:
                out.error_code, out.error_message = e.error_code, e.message
            else:
                keys = set(r.configuration_keys or ())
                out.configs = [e for e in entries if e.name in keys] if keys else entries
            results.append(out)
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)


    # -- shared by AlterConfigs and IncrementalAlterConfigs ---------------------------------

    async def _set_topic_configs(self, name: str, overrides: dict[str, str], validate_only: bool) -> None:
        """Replace a topic's overrides: name, then existence, then values (as a whole), as Kafka's
        AdminZkClient.validateTopicConfig (librdkafka's 0081 expects an unknown topic before a bad value)."""
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        validate_name(name)
        if self.metadata_cache.get(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        effective_topic_config(self.config, overrides)
        await resolved(self.controller.set_topic_configs(name, overrides, validate_only))

    async def _alter_broker(self, name: str, ops: list[tuple[str, int, str | None]], replace: bool,
                            validate_only: bool) -> None:
        """Change this broker's (``name`` = its id) or the cluster's (``name`` = "") dynamic configs.

        ``replace`` (AlterConfigs): the given configs become the whole dynamic set; otherwise
        (IncrementalAlterConfigs) the operations apply to what is stored. Validated as Kafka's
        ConfigAdminManager does (see DynamicBrokerConfig.validate), then stored and applied.
        """
        if name:
            self._node_id(name, "Node id")
        for key, op, _ in ops:
            if op not in OP_NAMES:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
            if op in (APPEND, SUBTRACT):
                definition = BROKER_CONFIG_DEF.get(key)
                if definition is None or definition.type is not ConfigType.LIST:
                    raise KafkaError(ErrorCode.INVALID_CONFIG,
                                     f"Config value {OP_NAMES[op].lower()} is not allowed for config key: {key}")
        entity = name or DEFAULT
        props = {} if replace else dict(await self.dynamic_config.entity_configs("brokers", entity))
        for key, op, value in ops:
            if op == SET:
                props[key] = value
            elif op == DELETE:
                props.pop(key, None)
            else:
                old = props.get(key)
                if old is None:
                    old = convert_to_string(self.config[key], ConfigType.LIST) or ""
                parts = _list_parts(old)
                for item in _list_parts(value):
                    if op == APPEND and item not in parts:
                        parts.append(item)
                    elif op == SUBTRACT and item in parts:
                        parts.remove(item)
                props[key] = ",".join(parts)
        self.dynamic_broker.validate(props, per_broker=bool(name))
        if not validate_only:
            await self.dynamic_config.change("brokers", entity, props)

    async def _alter_scalar_entity(self, entity_type: str, name: str, ops: list[tuple[str, int, str | None]],
                                   replace: bool, validate_only: bool, validate) -> None:
        """A group's or a telemetry subscription's configs: SET and DELETE only (Kafka refuses APPEND and
        SUBTRACT on both resource types, lists included), ``validate(name, props)``, then stored for every
        broker. Deleting every config removes the entity."""
        for key, op, _ in ops:
            if op in (APPEND, SUBTRACT):
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Can't {OP_NAMES[op]} to key {key} because its type is not LIST.")
            if op not in (SET, DELETE):
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
        entity = sanitize(name)
        props = {} if replace else dict(await self.dynamic_config.entity_configs(entity_type, entity))
        for key, op, value in ops:
            if op == SET:
                props[key] = value
            else:
                props.pop(key, None)
        validate(name, props)
        if not validate_only:
            await self.dynamic_config.change(entity_type, entity, props)

    async def _alter_group(self, name: str, ops, replace: bool, validate_only: bool) -> None:
        """A group's overrides (it need not exist), checked as Kafka's GroupConfig.validate and the broker's bounds."""
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        await self._alter_scalar_entity("groups", name, ops, replace, validate_only,
                                        lambda _, props: validate_group_configs(props, self.config))

    async def _alter_client_metrics(self, name: str, ops, replace: bool, validate_only: bool) -> None:
        """A telemetry subscription's `metrics`, `interval.ms` and `match`."""
        await self._alter_scalar_entity("client-metrics", name, ops, replace, validate_only, validate_subscription)

    # -- ListConfigResources ----------------------------------------------------------------

    @handles(74)
    async def handle_list_config_resources(self, request):
        """Every resource with configs, of the asked types (v0: only client metrics subscriptions)."""
        L = ListConfigResourcesResponse
        wanted = set(request.body.resource_types) if request.api_version >= 1 else {CLIENT_METRICS}
        if wanted - LISTED_TYPES:
            return L(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[])
        if not self.auth.authorize_cluster(request, DESCRIBE_CONFIGS):
            return L(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, config_resources=[])
        brokers = [str(b.broker_id) for b in self.metadata_cache.alive_brokers()] or [str(self.broker_id)]
        names = {
            GROUP: sorted(self.group_configs.names()),
            CLIENT_METRICS: self.client_metrics.names(),
            BROKER_LOGGER: brokers, BROKER: brokers,
            TOPIC: sorted(self.metadata_cache.topic_names()),
        }
        out = [L.ConfigResource(resource_name=n, resource_type=t) for t in (GROUP, CLIENT_METRICS, BROKER_LOGGER,
                                                                              BROKER, TOPIC)
               if not wanted or t in wanted for n in names[t]]
        return L(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=out)

    # -- AlterConfigs -----------------------------------------------------------------------

    @handles(33)
    async def handle_alter_configs(self, request):
        """The legacy API: the given configs replace the resource's whole override set."""
        req = request.body

        async def alter(r):
            self._authorize(request, r, ALTER_CONFIGS)
            _check_request_configs(r.configs)
            if r.resource_type == TOPIC:
                await self._set_topic_configs(r.resource_name, {c.name: c.value for c in r.configs},
                                              req.validate_only)
            elif r.resource_type == BROKER:
                await self._alter_broker(r.resource_name, [(c.name, SET, c.value) for c in r.configs], True,
                                         req.validate_only)
            elif r.resource_type == GROUP:
                await self._alter_group(r.resource_name, [(c.name, SET, c.value) for c in r.configs], True,
                                        req.validate_only)
            elif r.resource_type == CLIENT_METRICS:
                await self._alter_client_metrics(r.resource_name, [(c.name, SET, c.value) for c in r.configs],
                                                 True, req.validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")

        responses = await _respond(AlterConfigsResponse.AlterConfigsResourceResponse, req.resources, alter)
        return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


    # -- IncrementalAlterConfigs ------------------------------------------------------------

    @handles(44)
    async def handle_incremental_alter_configs(self, request):
        req = request.body

        async def alter(r):
            self._authorize(request, r, ALTER_CONFIGS)
            _check_request_configs(r.configs, null_ok=lambda c: c.config_operation == DELETE)
            if r.resource_type == TOPIC:
                topic = self.metadata_cache.get(r.resource_name)
                current = await resolved(self.controller.topic_configs(r.resource_name)) if topic else {}
                await self._set_topic_configs(r.resource_name, apply_ops(current, r.configs), req.validate_only)
            elif r.resource_type == BROKER:
                await self._alter_broker(r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs],
                                         False, req.validate_only)
            elif r.resource_type == BROKER_LOGGER:
                self._alter_loggers(r, req.validate_only)
            elif r.resource_type == GROUP:
                await self._alter_group(r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs],
                                        False, req.validate_only)
            elif r.resource_type == CLIENT_METRICS:
                await self._alter_client_metrics(r.resource_name, [(c.name, c.config_operation, c.value)
                                                                   for c in r.configs], False, req.validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")

        responses = await _respond(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse, req.resources, alter)
        return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _unsupported(resource_type: int) -> KafkaError:
    name = RESOURCE_TYPE_NAMES.get(resource_type, str(resource_type))
    return KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {name}")
ROOT_LOGGER = "root"
LOG4J_LEVELS = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR,
                "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": 5, "ALL": 1}
def _level_name(level: int) -> str:
    """The log4j name of a Python level: the highest log4j level at or below it."""
    return next((n for n, lv in LOG4J_LEVELS.items() if lv <= level), "ALL")
def loggers() -> dict[str, str]:
    """Every existing logger with its effective level, as log4j names them (root first)."""
    out = {ROOT_LOGGER: _level_name(logging.getLogger().getEffectiveLevel())}
    for name in sorted(logging.Logger.manager.loggerDict):
        lg = logging.Logger.manager.loggerDict[name]
        if isinstance(lg, logging.Logger):
            out[name] = _level_name(lg.getEffectiveLevel())
    return out
def _logger(name: str) -> logging.Logger:
    """An existing logger, or a package (a placeholder parent of existing ones) to set as a whole."""
    if name == ROOT_LOGGER:
        return logging.getLogger()
    if name not in logging.Logger.manager.loggerDict:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
    return logging.getLogger(name)
def _entry(e, synonyms: bool, docs: bool) -> Entry:
    return Entry(name=e.name, value=None if e.is_sensitive else e.value, read_only=e.read_only,
                 config_source=int(e.source), is_default=e.source == ConfigSource.DEFAULT_CONFIG,
                 is_sensitive=e.is_sensitive,
                 synonyms=[Synonym(name=s.name, value=s.value, source=int(s.source)) for s in e.synonyms]
                 if synonyms else [],
                 config_type=e.config_type.id if e.config_type else 0,
                 documentation=e.documentation if docs else None)
def _client_metrics_entry(key: str, value: str | None, synonyms: bool, docs: bool) -> Entry:
    """A subscription's config: its own value (CLIENT_METRICS_CONFIG, itself its synonym) or the default
    (DEFAULT_CONFIG, no synonym), as Kafka describes them."""
    definition = CLIENT_METRICS_CONFIG_DEF[key]
    if value is None:
        value, source, syns = convert_to_string(definition.default, definition.type) or "", \
            ConfigSource.DEFAULT_CONFIG, []
    else:
        source = ConfigSource.DYNAMIC_CLIENT_METRICS_CONFIG
        syns = [Synonym(name=key, value=value, source=int(source))]
    return Entry(name=key, value=value, read_only=False, config_source=int(source), is_default=False,
                 is_sensitive=False, synonyms=syns if synonyms else [], config_type=definition.type.id,
                 documentation=definition.doc if docs else None)
def _group_entry(row, synonyms: bool, docs: bool) -> Entry:
    name, value, source, syns, config_type, doc = row
    return Entry(name=name, value=value, read_only=False, config_source=int(source), is_default=False,
                 is_sensitive=False, synonyms=[Synonym(name=n, value=v, source=int(s)) for n, v, s in syns]
                 if synonyms else [], config_type=config_type.id, documentation=doc if docs else None)
def _unknown_broker_entries(cfg, synonyms: bool) -> list[Entry]:
    """Properties set but not defined: Kafka shows them as sensitive (unknown type), read-only."""
    src = int(ConfigSource.STATIC_BROKER_CONFIG)
    return [Entry(name=name, value=None, read_only=True, config_source=src, is_sensitive=True,
                  synonyms=[Synonym(name=name, value=None, source=src)] if synonyms else [],
                  config_type=0, documentation=None) for name in cfg.unknown]
def _duplicates(resources) -> set:
    seen, dup = set(), set()
    for r in resources:
        key = (r.resource_type, r.resource_name)
        (dup if key in seen else seen).add(key)
    return dup
def _check_request_configs(configs, null_ok=lambda c: False) -> None:
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in configs if c.value is None and not null_ok(c)]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
async def _respond(cls, resources, alter) -> list:
    """One response per resource, in request order; a resource named twice fails both times."""
    dup = _duplicates(resources)
    out = []
    for r in resources:
        code, message = ErrorCode.NONE, None
        try:
            if (r.resource_type, r.resource_name) in dup:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            await alter(r)
        except KafkaError as e:
            code, message = e.error_code, e.message
        out.append(cls(error_code=code, error_message=message, resource_type=r.resource_type,
                       resource_name=r.resource_name))
    return out
def _list_parts(value: str | None) -> list[str]:
    return [p for p in (value or "").split(",") if p]
def apply_ops(current: dict[str, str], ops) -> dict[str, str]:
    """The override set after SET/DELETE/APPEND/SUBTRACT; APPEND and SUBTRACT only on LIST configs,
    starting from the topic-level default when the topic has no override (as Kafka's controller)."""
    new = dict(current)
    for c in ops:
        op = c.config_operation
        if op == SET:
            new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            key = TOPIC_CONFIG_DEF.get(c.name)
            if key is None or key.type is not ConfigType.LIST:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                               f"Can't {OP_NAMES[op]} to key {c.name} because its type is not LIST.")
            old = new.get(c.name)
            if old is None:
                old = ",".join(key.default) if key.default is not None else None
            parts = _list_parts(old)
            given = (c.value or "").split(",")
            while given and not given[-1]:
                given.pop()  # Java's String.split drops trailing empty strings
            for item in given:
                if op == APPEND and item not in parts:
                    parts.append(item)
                elif op == SUBTRACT and item in parts:
                    parts.remove(item)
            new[c.name] = ",".join(parts)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
    return new
