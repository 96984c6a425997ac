"""DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546.

Entities are `user`, `client-id`, both, or `ip` alone; a null name is the
default entity. Quotas are stored as Kafka stores them (see config_store.py)
and applied through the DynamicConfigManager. Validation is Kafka's: the entity
types and their combination, non-empty names, known keys, values above 0, byte
rates integral, no key twice; an invalid entry fails alone with INVALID_REQUEST
and Kafka's message. controller_mutation_rate is enforced on CreateTopics,
CreatePartitions and DeleteTopics (controller_mutation_quota.py);
connection_creation_rate on new connections from the address
(network/connection_quotas.py).
"""
from __future__ import annotations

import asyncio
import ipaddress

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.alter_client_quotas import AlterClientQuotasResponse
from ..protocol.messages.describe_client_quotas import DescribeClientQuotasResponse
from ..sanitizer import desanitize, sanitize
from .auth_helper import ALTER_CONFIGS, DESCRIBE_CONFIGS, NO_AUTHORIZER, AuthHelper
from .client_quota_manager import DEFAULT, IP_QUOTA_KEYS, USER_AND_CLIENT_QUOTA_KEYS
from .config_store import user_client_name
from .dynamic_config_manager import DynamicConfigManager
from .registry import handles

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
INT64_MAX = 2 ** 63 - 1
_ANY = object()           # a filter component matching any name of its type


class ClientQuotasApi:
    def __init__(self, dynamic_config: DynamicConfigManager, auth: AuthHelper = NO_AUTHORIZER):
        self.dynamic_config = dynamic_config
        self.auth = auth

    # -- DescribeClientQuotas ------------------------------------------------------------------
    @handles(48)
    async def handle_describe_client_quotas(self, request):
        """DESCRIBE_CONFIGS on the cluster, as Kafka asks, before anything is read."""
        req = request.body
        try:
            if not self.auth.authorize_cluster(request, DESCRIBE_CONFIGS):
                raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            components, strict = _filter(req.components), req.strict
            entries = []
            for entity_type, name, configs in await self.dynamic_config.all_quota_entities():
                entity = _entity_of(entity_type, name)
                keys = IP_QUOTA_KEYS if IP in entity else USER_AND_CLIENT_QUOTA_KEYS
                values = {k: float(v) for k, v in configs.items() if k in keys}
                if values and _matches(components, strict, entity):
                    entries.append((entity, values))
        except KafkaError as e:
            return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=e.error_code, error_message=e.message,
                                                entries=None)
        E = DescribeClientQuotasResponse
        return E(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=[
            E.EntryData(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                        values=[E.ValueData(key=k, value=v) for k, v in sorted(values.items())])
            for entity, values in sorted(entries, key=lambda e: sorted((t, n or "") for t, n in e[0].items()))])

    # -- AlterClientQuotas ---------------------------------------------------------------------
    @handles(49)
    async def handle_alter_client_quotas(self, request):
        """ALTER_CONFIGS on the cluster, as Kafka asks: without it every entry is refused."""
        req = request.body
        R = AlterClientQuotasResponse
        allowed = self.auth.authorize_cluster(request, ALTER_CONFIGS)
        out = []
        for entry in req.entries:
            code, message = ErrorCode.NONE, None
            try:
                if not allowed:
                    raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                await self._alter(entry, req.validate_only)
            except KafkaError as e:
                code, message = e.error_code, e.message
            out.append(R.EntryData(error_code=code, error_message=message, entity=[
                R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]))
        return R(throttle_time_ms=0, entries=out)

    async def _alter(self, entry, validate_only: bool) -> None:
        entity: dict[str, str | None] = {}
        if not entry.entity:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
        for e in entry.entity:
            if e.entity_type in entity:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Invalid client quota entity, duplicate entity entry {e.entity_type}")
            if e.entity_type not in (USER, CLIENT_ID, IP):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {e.entity_type}")
            if e.entity_name is not None and not e.entity_name:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Empty {e.entity_type} not supported")
            entity[e.entity_type] = e.entity_name
        if IP in entity:
            if len(entity) > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should "
                                                            "not be used with user/client ID entity.")
            ip = entity[IP]
            if ip is not None and not await _resolvable(ip):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
            keys, entity_type, name = IP_QUOTA_KEYS, "ips", _sanitized(ip)
        else:
            keys = USER_AND_CLIENT_QUOTA_KEYS
            if USER in entity and CLIENT_ID in entity:
                entity_type, name = "users", user_client_name(_sanitized(entity[USER]), _sanitized(entity[CLIENT_ID]))
            elif USER in entity:
                entity_type, name = "users", _sanitized(entity[USER])
            else:
                entity_type, name = "clients", _sanitized(entity[CLIENT_ID])
        changes: dict[str, float | None] = {}
        for op in entry.ops:
            if op.key in changes:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Duplicate quota key {op.key} not updating quota for this entity")
            changes[op.key] = None if op.remove else op.value
        for key, value in changes.items():
            if value is not None:
                _validate(keys, key, value)
        configs = await self.dynamic_config.entity_configs(entity_type, name)
        for key, value in changes.items():
            if value is None:
                configs.pop(key, None)
            else:
                configs[key] = str(int(round(value))) if keys[key] else repr(float(value))
        if not validate_only:
            await self.dynamic_config.change(entity_type, name, configs)


def _validate(keys: dict[str, bool], key: str, value: float) -> None:
    """ClientQuotaControlManager.validateQuotaKeyValue."""
    if key not in keys:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not value > 0.0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if keys[key]:
        if value > INT64_MAX:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for a LONG.")
        if abs(value % 1.0) > 1e-6:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")


async def _resolvable(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        await asyncio.get_running_loop().getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError):
        return False


def _sanitized(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def _name(sanitized: str) -> str | None:
    return None if sanitized == DEFAULT else desanitize(sanitized)


def _entity_of(entity_type: str, name: str) -> dict[str, str | None]:
    """A stored entity as the protocol names it: {entity type: name, None for the default}."""
    if entity_type == "clients":
        return {CLIENT_ID: _name(name)}
    if entity_type == "ips":
        return {IP: _name(name)}
    user, sep, client = name.partition("/clients/")
    return {USER: _name(user), CLIENT_ID: _name(client)} if sep else {USER: _name(user)}


def _filter(components) -> dict[str, object]:
    """The request's filter: entity type -> a name, None (the default entity) or _ANY."""
    out: dict[str, object] = {}
    for c in components:
        if c.entity_type == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in out:
            which = {USER: "user", CLIENT_ID: "client", IP: "ip"}[c.entity_type]
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate {which} filter component entity type")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Exact match of {c.entity_type} needs a name")
            out[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            out[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            out[c.entity_type] = _ANY
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected match type: {c.match_type}")
    if IP in out and (USER in out or CLIENT_ID in out):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter "
                                                    "component should not be used with user or clientId filter "
                                                    "component.")
    return out


def _matches(components: dict[str, object], strict: bool, entity: dict[str, str | None]) -> bool:
    """ZkAdminManager.describeClientQuotas: every component matches; with `strict` the entity has no other type."""
    if IP in entity and (USER in components or CLIENT_ID in components):
        return False
    if IP not in entity and IP in components:
        return False
    for entity_type in (USER, CLIENT_ID, IP):
        want = components.get(entity_type, _MISSING)
        if want is _MISSING:
            if entity_type in entity and strict:
                return False
        elif entity_type not in entity:
            return False
        elif want is not _ANY and entity[entity_type] != want:
            return False
    return True


_MISSING = object()
