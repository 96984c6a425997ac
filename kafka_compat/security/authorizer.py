"""Kafka's ACL authorizer (kafka.security.authorizer.AclAuthorizer semantics), with a decision cache.

An ACL applies to a resource when its pattern is LITERAL with the resource's name,
LITERAL "*" (every resource of the type), or PREFIXED with a prefix of the name. Its
principal applies when it is the caller's or "User:*", its host when it is the
client's address (as Java prints it), "*", or a CIDR network holding the address (Kafka 4.4,
from metadata.version 4.4-IV1: CreateAcls takes a CIDR host only once that level is finalized,
`cidr_hosts_supported`). For a request:

1. a `super.users` principal is allowed everything;
2. no ACL at all on the resource (for anyone): `allow.everyone.if.no.acl.found` decides;
3. any applying DENY for the operation (or ALL) denies;
4. any applying ALLOW for the operation, ALL, or an operation implying it allows
   (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS);
5. otherwise denied.

`authorize()` answers from a dict keyed by the whole question once it has been asked;
any ACL change clears the dict. ACLs persist through an `AclStore`: a local JSON file
here; encode/decode of ZooKeeper's /kafka-acl znodes is provided for a ZooKeeper store.
"""
from __future__ import annotations

import ipaddress
import json
import threading
from functools import lru_cache
from typing import Callable, Iterable, Mapping, NamedTuple, Protocol

from ..json_file import read_json, write_json
from ..protocol.errors import ErrorCode
from .acl import (
    ANY_FILTER,
    CLUSTER_NAME,
    IMPLIED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    acl_binding,
)
from .principal import KafkaPrincipal, parse_principal

ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
ALL = AclOperation.ALL


class ApiError(NamedTuple):
    code: ErrorCode
    message: str | None = None


class AclDeleteResult(NamedTuple):
    """One DeleteAcls filter's outcome: an error for the filter, or the bindings it removed."""
    error: ApiError | None
    deleted: list[tuple[AclBinding, ApiError | None]]


class AclStore(Protocol):
    def load(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]: ...

    def write(self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        """Replace the ACLs of each resource pattern given (an empty set removes it), all or nothing."""


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by ';' ('User:Bob;User:Alice')."""
    if not text:
        return frozenset()
    return frozenset(str(parse_principal(s.strip())) for s in text.split(";") if s.strip())


def normalize_binding(binding: AclBinding) -> AclBinding:
    """The binding with its codes as enum members (unknown codes read as UNKNOWN)."""
    return acl_binding(*binding.pattern, *binding.entry)


def validate_new_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses this binding (INVALID_REQUEST), or None."""
    pattern, entry = binding
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if not pattern.pattern_type.is_specific:
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission_type not in (ALLOW, DENY):
        return f"Invalid permissionType {entry.permission_type.name}"
    if not pattern.name:
        return "Invalid empty resource name"
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if "/" in pattern.name:
        return f"ACL binding contains invalid resource name: {pattern.name}"
    try:
        parse_principal(entry.principal)
    except ValueError as e:
        return str(e)
    if entry.host is None:
        return "Invalid null host"
    return None


@lru_cache(maxsize=1024)
def _network(cidr: str):
    """The network of a CIDR host pattern; host bits may be set ('10.1.2.3/8'), as Kafka's SubnetUtils allows."""
    return ipaddress.ip_network(cidr, strict=False)


def in_cidr(cidr: str, host: str) -> bool:
    """Kafka's CidrUtils.isInRange: the address lies in the network, its first and last address included;
    anything unparsable, or of the other IP family, is outside."""
    try:
        return ipaddress.ip_address(host.partition("%")[0]) in _network(cidr)
    except ValueError:
        return False


def host_applies(ace_host: str, hosts: tuple[str, str]) -> bool:
    """An ACL's host applies to a client: its address, "*" (hosts = (address, "*")), or a network holding it."""
    return ace_host in hosts or ("/" in ace_host and in_cidr(ace_host, hosts[0]))


# metadata.version from which a CIDR ACL host is accepted (MetadataVersion.IBP_4_4_IV1.isCidrAclSupported)
CIDR_ACL_METADATA_VERSION = 32


def validate_host(host: str | None, cidr_supported: bool) -> ApiError | None:
    """AclControlManager.validateHostPattern: a host pattern is "*", an address, or a valid CIDR network once
    the cluster's metadata.version has CIDR ACLs."""
    if not host:
        return ApiError(ErrorCode.INVALID_REQUEST, "Host pattern cannot be null or empty")
    if "/" not in host or host == WILDCARD_HOST:
        return None
    if not cidr_supported:
        return ApiError(ErrorCode.UNSUPPORTED_VERSION,
                        "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher.")
    try:
        _network(host)
    except ValueError as e:
        return ApiError(ErrorCode.INVALID_REQUEST, f"Invalid CIDR notation '{host}': {e}")
    return None


# authorizer.class.name values that mean this authorizer (Kafka's ZooKeeper and KRaft authorizers)
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def configured_authorizer(class_name: str | None, settings: Mapping, store: AclStore | None) -> AclAuthorizer | None:
    """The authorizer `authorizer.class.name` asks for (None when it is empty); ValueError for any other class.
    `settings` holds super.users and allow.everyone.if.no.acl.found as given."""
    class_name = (class_name or "").strip()
    if not class_name:
        return None
    if class_name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"authorizer.class.name: {class_name} is not available; use one of "
                         f"{', '.join(AUTHORIZER_CLASS_NAMES)} (the same ACL authorizer) or leave it empty")
    return AclAuthorizer.from_config(settings, store)


class AclAuthorizer:
    """ACLs in memory, indexed for the authorization path, persisted through `store`."""

    def __init__(self, super_users: str | Iterable[str] | None = None, allow_everyone_if_no_acl_found: bool = False,
                 store: AclStore | None = None, cache_size: int = 100_000):
        if super_users is None or isinstance(super_users, str):
            self.super_users = parse_super_users(super_users)
        else:
            self.super_users = frozenset(str(parse_principal(str(p))) for p in super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.store = store
        self.cache_size = cache_size
        self._lock = threading.Lock()
        self._cache: dict = {}
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._literal: dict[tuple, tuple[AccessControlEntry, ...]] = {}
        self._prefixed: dict[tuple, tuple[AccessControlEntry, ...]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        # whether the finalized metadata.version has CIDR hosts; the broker ties it to its FeatureCache
        self.cidr_hosts_supported: Callable[[], bool] = lambda: True
        if store is not None:
            self._install({p: frozenset(a) for p, a in store.load().items() if a})

    @classmethod
    def from_config(cls, config: Mapping, store: AclStore | None = None) -> AclAuthorizer:
        allow = config.get("allow.everyone.if.no.acl.found", False)
        if isinstance(allow, str):
            allow = allow.strip().lower() == "true"
        return cls(config.get("super.users"), bool(allow), store)

    # -- the authorization path
    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """May `principal`, connected from `host`, perform `operation` on the resource?"""
        key = (principal, host, operation, resource_type, name)
        cache = self._cache         # taken first: a decision made while ACLs change lands in the cache dropped
        decision = cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, AclOperation(operation), ResourceType(resource_type), name)
            if len(cache) >= self.cache_size:
                cache.clear()
            cache[key] = decision
        return decision

    def authorize_caller(self, caller, operation: int, resource_type: int, name: str) -> bool:
        """authorize() for a connection: `caller` has `principal`, `host` and `acl_key`, a string naming both
        made once per connection, so a cached answer costs one dict lookup on a key of a string, two ints
        and the resource name."""
        key = (caller.acl_key, operation, resource_type, name)
        cache = self._cache
        decision = cache.get(key)
        if decision is None:
            decision = self._decide(caller.principal, caller.host, AclOperation(operation),
                                    ResourceType(resource_type), name)
            if len(cache) >= self.cache_size:
                cache.clear()
            cache[key] = decision
        return decision

    def _decide(self, principal, host: str, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        pstr = f"{principal[0]}:{principal[1]}"
        if pstr in self.super_users:
            return True
        groups = self._matching(resource_type, name)
        if not groups:
            return self.allow_everyone_if_no_acl_found
        principals = (pstr, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        for group in groups:
            for ace in group:
                if (ace.permission_type is DENY and (ace.operation is operation or ace.operation is ALL)
                        and ace.principal in principals and host_applies(ace.host, hosts)):
                    return False
        allowed_by = IMPLIED_BY.get(operation) or (operation,)
        for group in groups:
            for ace in group:
                if (ace.permission_type is ALLOW and (ace.operation in allowed_by or ace.operation is ALL)
                        and ace.principal in principals and host_applies(ace.host, hosts)):
                    return True
        return False

    def _matching(self, resource_type: ResourceType, name: str) -> list[tuple[AccessControlEntry, ...]]:
        literal = self._literal
        groups = []
        found = literal.get((resource_type, name))
        if found:
            groups.append(found)
        if name != WILDCARD_RESOURCE:
            found = literal.get((resource_type, WILDCARD_RESOURCE))
            if found:
                groups.append(found)
        prefixed = self._prefixed
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found = prefixed.get((resource_type, name[:length]))
            if found:
                groups.append(found)
        return groups

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Could the principal perform `operation` on at least one resource of the type (KIP-679: InitProducerId
        without a transactional id needs IDEMPOTENT_WRITE on the cluster or WRITE on any topic)? Implied
        operations do not count here, as in Kafka."""
        pstr = f"{principal[0]}:{principal[1]}"
        if pstr in self.super_users:
            return True
        principals = (pstr, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        operation = AclOperation(operation)

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            return {p.name for p, aces in self._acls.items()
                    if p.resource_type is resource_type and p.pattern_type is pattern_type
                    and any(a.permission_type is permission and a.principal in principals
                            and host_applies(a.host, hosts)
                            and (a.operation is operation or a.operation is ALL) for a in aces)}

        deny_literals = names(DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(DENY, PatternType.PREFIXED)

        def denied_by_prefix(name: str) -> bool:
            return any(name.startswith(p) for p in deny_prefixes)

        if any(not denied_by_prefix(p) for p in names(ALLOW, PatternType.PREFIXED)):
            return True
        return any(n == WILDCARD_RESOURCE or (n not in deny_literals and not denied_by_prefix(n))
                   for n in names(ALLOW, PatternType.LITERAL))

    def authorized_operations(self, principal: KafkaPrincipal, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """The authorized-operations bit field of Metadata, DescribeGroups, DescribeCluster... (bit n = code n)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[ResourceType(resource_type)]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    # -- ACL management
    def acls(self, acl_filter: AclBindingFilter = ANY_FILTER) -> list[AclBinding]:
        """The bindings the filter matches, ordered by resource then entry."""
        out = []
        for pattern in sorted(self._acls):
            if not acl_filter.pattern_filter.matches(pattern):
                continue
            for entry in sorted(self._acls[pattern]):
                binding = AclBinding(pattern, entry)
                if acl_filter.entry_filter.matches(entry):
                    out.append(binding)
        return out

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[ApiError | None]:
        """Add bindings (adding one that exists is a success); one result per binding, None = created."""
        bindings = list(bindings)
        results: list[ApiError | None] = [None] * len(bindings)
        cidr_supported = self.cidr_hosts_supported()
        with self._lock:
            changes: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
            index: dict[ResourcePattern, list[int]] = {}
            for i, binding in enumerate(bindings):
                binding = normalize_binding(binding)
                problem = validate_new_binding(binding)
                if problem is not None:
                    results[i] = ApiError(ErrorCode.INVALID_REQUEST, problem)
                    continue
                refused = validate_host(binding.entry.host, cidr_supported)
                if refused is not None:
                    results[i] = refused
                    continue
                pattern = binding.pattern
                current = changes.get(pattern, self._acls.get(pattern, frozenset()))
                changes[pattern] = current | {binding.entry}
                index.setdefault(pattern, []).append(i)
            changes = {p: a for p, a in changes.items() if a != self._acls.get(p)}
            failure = self._commit(changes)
            if failure is not None:
                for pattern in changes:
                    for i in index[pattern]:
                        results[i] = failure
        return results

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclDeleteResult]:
        """Remove what each filter matches; a binding several filters match counts for the first of them."""
        filters = list(filters)
        results = []
        with self._lock:
            remaining = dict(self._acls)
            for f in filters:
                if f.pattern_filter.is_unknown:
                    results.append(AclDeleteResult(ApiError(ErrorCode.INVALID_REQUEST, "Unknown patternFilter."), []))
                    continue
                if f.entry_filter.is_unknown:
                    results.append(AclDeleteResult(ApiError(ErrorCode.INVALID_REQUEST, "Unknown entryFilter."), []))
                    continue
                deleted = []
                for pattern in sorted(remaining):
                    if not f.pattern_filter.matches(pattern):
                        continue
                    aces = remaining[pattern]
                    gone = frozenset(a for a in aces if f.entry_filter.matches(a))
                    if gone:
                        remaining[pattern] = aces - gone
                        deleted += [AclBinding(pattern, a) for a in sorted(gone)]
                results.append(AclDeleteResult(None, deleted))
            changes = {p: a for p, a in remaining.items() if a != self._acls.get(p)}
            failure = self._commit(changes)
            if failure is not None:
                return [AclDeleteResult(r.error, [(b, failure) for b in r.deleted]) for r in results]
        return [AclDeleteResult(r.error, [(b, None) for b in r.deleted]) for r in results]

    def refresh(self, patterns) -> None:
        """Re-read these resource patterns from the store: another broker changed them."""
        with self._lock:
            self._install({p: self.store.read(p) for p in patterns})

    def reload(self) -> None:
        """Re-read every ACL from the store (another process changed it)."""
        with self._lock:
            self._acls = {}
            self._install({p: frozenset(a) for p, a in self.store.load().items() if a})

    def _commit(self, changes: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> ApiError | None:
        if not changes:
            return None
        if self.store is not None:
            try:
                self.store.write(changes)
            except Exception as e:      # a file, or ZooKeeper: the client gets an error, the ACLs stay as they were
                return ApiError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                f"Could not store the ACLs: {getattr(e, 'strerror', None) or e}")
        self._install(changes)
        return None

    def _install(self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        """Apply changes to the ACLs and rebuild the lookup indexes; drop every cached decision."""
        acls = dict(self._acls)
        for pattern, aces in changes.items():
            if aces:
                acls[pattern] = aces
            else:
                acls.pop(pattern, None)
        literal: dict[tuple, tuple[AccessControlEntry, ...]] = {}
        prefixed: dict[tuple, tuple[AccessControlEntry, ...]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for pattern, aces in acls.items():
            key = (pattern.resource_type, pattern.name)
            if pattern.pattern_type is PatternType.LITERAL:
                literal[key] = tuple(aces)
            else:
                prefixed[key] = tuple(aces)
                lengths.setdefault(pattern.resource_type, set()).add(len(pattern.name))
        self._acls, self._literal, self._prefixed = acls, literal, prefixed
        self._prefix_lengths = {t: tuple(sorted(s)) for t, s in lengths.items()}
        self._cache = {}


# -- persistence ---------------------------------------------------------------------


def _entry_json(ace: AccessControlEntry) -> dict:
    """One ACL as ZooKeeper's AclEntry JSON writes it."""
    return {"principal": ace.principal, "permissionType": ace.permission_type.pascal_name,
            "operation": ace.operation.pascal_name, "host": ace.host}


def _entry_from_json(item: Mapping) -> AccessControlEntry:
    principal = str(parse_principal(item["principal"]))
    return AccessControlEntry(principal, item["host"], AclOperation.from_name(item["operation"]),
                              AclPermissionType.from_name(item["permissionType"]))


def encode_zk_acls(aces: Iterable[AccessControlEntry]) -> bytes:
    """The value of a /kafka-acl/<Type>/<name> znode:
    {"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}."""
    return json.dumps({"version": 1, "acls": [_entry_json(a) for a in sorted(aces)]},
                      separators=(",", ":")).encode()


def decode_zk_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    doc = json.loads(data)
    if doc.get("version") != 1:
        raise ValueError(f"unknown ACL znode version {doc.get('version')}")
    return frozenset(_entry_from_json(item) for item in doc["acls"])


def zk_acl_path(pattern: ResourcePattern) -> str:
    """/kafka-acl/Topic/orders for LITERAL, /kafka-acl-extended/prefixed/Topic/orders- for PREFIXED."""
    base = "/kafka-acl" if pattern.pattern_type is PatternType.LITERAL else \
        f"/kafka-acl-extended/{pattern.pattern_type.name.lower()}"
    return f"{base}/{pattern.resource_type.pascal_name}/{pattern.name}"


def zk_pattern(path: str) -> ResourcePattern:
    """The resource pattern a /kafka-acl... znode path stands for."""
    parts = path.strip("/").split("/", 3)
    if parts[0] == "kafka-acl" and len(parts) >= 3:
        rtype, name = parts[1], "/".join(parts[2:])
        pattern_type = PatternType.LITERAL
    elif parts[0] == "kafka-acl-extended" and len(parts) == 4:
        pattern_type, rtype, name = PatternType.from_name(parts[1]), parts[2], parts[3]
    else:
        raise ValueError(f"not an ACL znode path: {path}")
    return ResourcePattern(ResourceType.from_name(rtype), name, pattern_type)


def encode_zk_acl_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(sequential node prefix, data) of the change notification Kafka's brokers watch."""
    if pattern.pattern_type is PatternType.LITERAL:
        return "/kafka-acl-changes/acl_changes_", f"{pattern.resource_type.name}:{pattern.name}".encode()
    return "/kafka-acl-extended-changes/acl_changes_", json.dumps(
        {"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
         "patternType": pattern.pattern_type.name}, separators=(",", ":")).encode()


class AclFileStore:
    """Every ACL in one JSON file, rewritten atomically on each change:
    {"version":1,"resources":[{"resourceType":"Topic","patternType":"Literal","name":"orders","acls":[...]}]}."""

    def __init__(self, path: str):
        self.path = path
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        doc = read_json(self.path)
        acls = {}
        if doc is not None:
            if doc.get("version") != 1:
                raise ValueError(f"{self.path}: unknown ACL file version {doc.get('version')}")
            for r in doc["resources"]:
                pattern = ResourcePattern(ResourceType.from_name(r["resourceType"]), r["name"],
                                          PatternType.from_name(r["patternType"]))
                acls[pattern] = frozenset(_entry_from_json(a) for a in r["acls"])
        self._acls = acls
        return dict(acls)

    def write(self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        acls = dict(self._acls)
        for pattern, aces in changes.items():
            if aces:
                acls[pattern] = frozenset(aces)
            else:
                acls.pop(pattern, None)
        write_json(self.path, {"version": 1, "resources": [
            {"resourceType": p.resource_type.pascal_name, "patternType": p.pattern_type.pascal_name, "name": p.name,
             "acls": [_entry_json(a) for a in sorted(aces)]} for p, aces in sorted(acls.items())]}, mode=0o644)
        self._acls = acls
