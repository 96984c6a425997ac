"""ACL vocabulary with Kafka's wire codes: resource and pattern types, operations, permissions,
bindings and the filters DescribeAcls / DeleteAcls match with (Kafka's common.acl / common.resource)."""
from __future__ import annotations

import ipaddress
from enum import IntEnum
from typing import NamedTuple

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class _Coded(IntEnum):
    @classmethod
    def from_code(cls, code: int):
        """Unknown codes read as UNKNOWN, as Kafka's fromCode does."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN

    @property
    def is_unknown(self) -> bool:
        return self is type(self).UNKNOWN

    @property
    def pascal_name(self) -> str:
        """The name Kafka writes into ZooKeeper and logs (TRANSACTIONAL_ID -> TransactionalId)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_name(cls, name: str):
        """'TransactionalId' or any case of it ('TRANSACTIONALID') -> member, as SecurityUtils looks names up;
        unknown names read as UNKNOWN."""
        upper = name.upper()
        for member in cls:
            if upper == member.pascal_name.upper():
                return member
        return cls.UNKNOWN


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        return self is PatternType.LITERAL or self is PatternType.PREFIXED


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Operations an ALLOW ACL on these grants as well (DENY ACLs imply nothing).
IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}

# The operations that mean something for each resource type (AclEntry.supportedOperations), in code order:
# the bits of the authorized-operations fields of Metadata, DescribeGroups, DescribeCluster...
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                         AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
                           AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def _first_reason(checks) -> str | None:
    return next((why for indefinite, why in checks if indefinite), None)


class ResourcePattern(NamedTuple):
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, " \
               f"patternType={self.pattern_type.name})"


class AccessControlEntry(NamedTuple):
    principal: str          # 'User:alice', 'User:*'
    host: str               # an IP address as Java prints it, or '*'
    operation: AclOperation
    permission_type: AclPermissionType


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AccessControlEntry

    @property
    def is_unknown(self) -> bool:
        p, e = self.pattern, self.entry
        return (p.resource_type.is_unknown or p.pattern_type.is_unknown or e.operation.is_unknown
                or e.permission_type.is_unknown)


class ResourcePatternFilter(NamedTuple):
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    @property
    def is_unknown(self) -> bool:
        return self.resource_type.is_unknown or self.pattern_type.is_unknown

    def matches(self, pattern: ResourcePattern) -> bool:
        """ANY matches every pattern type; MATCH also matches the literal '*' and prefixes of the name."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        ptype = self.pattern_type
        if ptype is not PatternType.ANY and ptype is not PatternType.MATCH and ptype is not pattern.pattern_type:
            return False
        name = self.name
        if name is None:
            return True
        if ptype is PatternType.ANY or ptype is pattern.pattern_type:
            return name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type is PatternType.PREFIXED:
            return name.startswith(pattern.name)
        return False

    def find_indefinite_field(self) -> str | None:
        """What keeps the filter from naming exactly one pattern (Kafka's wording), or None."""
        rtype, ptype = self.resource_type, self.pattern_type
        return _first_reason(((rtype is ResourceType.ANY, "Resource type is ANY."),
                              (rtype is ResourceType.UNKNOWN, "Resource type is UNKNOWN."),
                              (self.name is None, "Resource name is NULL."),
                              (ptype is PatternType.MATCH, "Resource pattern type is MATCH."),
                              (ptype is PatternType.UNKNOWN, "Resource pattern type is UNKNOWN.")))


class AccessControlEntryFilter(NamedTuple):
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @property
    def is_unknown(self) -> bool:
        return self.operation.is_unknown or self.permission_type.is_unknown

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation is not entry.operation:
            return False
        return self.permission_type is AclPermissionType.ANY or self.permission_type is entry.permission_type

    def find_indefinite_field(self) -> str | None:
        """What keeps the filter from naming exactly one entry (Kafka's wording), or None."""
        op, perm = self.operation, self.permission_type
        return _first_reason(((self.principal is None, "Principal is NULL"), (self.host is None, "Host is NULL"),
                              (op is AclOperation.ANY, "Operation is ANY"),
                              (op is AclOperation.UNKNOWN, "Operation is UNKNOWN"),
                              (perm is AclPermissionType.ANY, "Permission type is ANY"),
                              (perm is AclPermissionType.UNKNOWN, "Permission type is UNKNOWN")))


class AclBindingFilter(NamedTuple):
    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()


ANY_FILTER = AclBindingFilter()


def acl_binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
                permission_type: int) -> AclBinding:
    """A binding from wire codes, which may be unknown (they read as UNKNOWN, for validation to refuse)."""
    return AclBinding(ResourcePattern(ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type)),
                      AccessControlEntry(principal, host, AclOperation.from_code(operation),
                                         AclPermissionType.from_code(permission_type)))


def acl_binding_filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None,
                       host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
    """A filter from wire codes (None names match anything)."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type)),
        AccessControlEntryFilter(principal, host, AclOperation.from_code(operation),
                                 AclPermissionType.from_code(permission_type)))


def host_address(ip: str) -> str:
    """A client address as Java's InetAddress.getHostAddress() prints it, the form ACL hosts are written in:
    IPv6 uncompressed with lower-case hex and no leading zeros ('0:0:0:0:0:0:0:1'), an IPv4-mapped IPv6
    address as plain IPv4."""
    text, _, scope = ip.partition("%")
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return ip
    if addr.version == 4:
        return str(addr)
    if addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    groups = addr.exploded.split(":")
    out = ":".join(format(int(g, 16), "x") for g in groups)
    return f"{out}%{scope}" if scope else out
