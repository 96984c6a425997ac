"""Kafka's ConfigDef: property types, validators, secrets, and how values parse and print.

Parsing and printing follow Kafka's ConfigDef.parseType / convertToString, so a
value reads and shows as it would on a Java broker. Errors raise
:class:`ConfigError`, which names the property; a client gets INVALID_CONFIG (40).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .protocol.errors import ErrorCode, KafkaError

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
DOUBLE_MAX = 1.7976931348623157e308


# -- vocabulary --------------------------------------------------------------------


class ConfigType(enum.Enum):
    """ConfigDef.Type; ``id`` is the DescribeConfigs (v3+) ConfigType byte."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9

    @property
    def id(self) -> int:
        return self.value


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ConfigSource(enum.IntEnum):
    """DescribeConfigs ConfigSource ids (v1+); the wire calls 1 TOPIC_CONFIG."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8
    TOPIC_CONFIG = 1  # alias: the name used in DescribeConfigsResponse


_NO_VALUE = object()


class ConfigError(KafkaError, ValueError):
    """A configuration value Kafka would refuse (Kafka's ConfigException): INVALID_CONFIG to a client."""

    def __init__(self, name: str, value: Any = _NO_VALUE, message: str = "") -> None:
        self.name = name
        self.value = None if value is _NO_VALUE else value
        if value is _NO_VALUE:
            text = message if name in message else f"{name}: {message}"
        else:
            shown = "[hidden]" if isinstance(value, Password) else value
            text = f"Invalid value {shown} for configuration {name}" + (f": {message}" if message else "")
        super().__init__(ErrorCode.INVALID_CONFIG, text)


class Password:
    """A secret that never shows in reprs or logs (Kafka's Password)."""

    __slots__ = ("value",)
    HIDDEN = "[hidden]"

    def __init__(self, value: str) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return self.HIDDEN

    __str__ = __repr__


# -- validators --------------------------------------------------------------------


class Range:
    """Numeric bounds, inclusive, with Kafka's messages."""

    def __init__(self, lo: float | None = None, hi: float | None = None) -> None:
        self.lo, self.hi = lo, hi

    @classmethod
    def at_least(cls, lo: float) -> Range:
        return cls(lo, None)

    @classmethod
    def between(cls, lo: float, hi: float) -> Range:
        return cls(lo, hi)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError(name, None, "Value must be non-null")
        if self.lo is not None and value < self.lo:
            raise ConfigError(name, value, f"Value must be at least {self.lo}")
        if self.hi is not None and value > self.hi:
            raise ConfigError(name, value, f"Value must be no more than {self.hi}")

    def __str__(self) -> str:
        return f"[{self.lo},...]" if self.hi is None else f"[{self.lo},...,{self.hi}]"


class ValidString:
    """One of a fixed set of strings (case-sensitive, as Kafka)."""

    def __init__(self, *valid: str) -> None:
        self.valid = valid

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.valid:
            raise ConfigError(name, value, "String must be one of: " + ", ".join(self.valid))

    def __str__(self) -> str:
        return "[" + ", ".join(self.valid) + "]"


class ValidList(ValidString):
    """Every element of a list is one of a fixed set."""

    def __call__(self, name: str, value: Any) -> None:
        for item in value:
            super().__call__(name, item)


class LambdaValidator:
    """A validator from a predicate and Kafka's message (ConfigDef.LambdaValidator)."""

    def __init__(self, ok: Callable[[Any], bool], message: str, shown: str) -> None:
        self.ok, self.message, self.shown = ok, message, shown

    def __call__(self, name: str, value: Any) -> None:
        if not self.ok(value):
            raise ConfigError(name, value, self.message)

    def __str__(self) -> str:
        return self.shown


# -- parsing and printing values -----------------------------------------------------

_INT_RANGES = {ConfigType.SHORT: 15, ConfigType.INT: 31, ConfigType.LONG: 63}
_INTEGER_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?")
_LIST_SPLIT = re.compile(r"\s*,\s*")


def parse_type(name: str, value: Any, type_: ConfigType) -> Any:
    """Turn a raw value (usually a string) into the typed value, as ConfigDef.parseType."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else None
    if type_ is ConfigType.BOOLEAN:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(name, value, "Expected value to be either true or false")
    if type_ in _INT_RANGES:
        bits = _INT_RANGES[type_]
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif text is not None and _INTEGER_RE.fullmatch(text):
            number = int(text)
        else:
            raise ConfigError(name, value, f"Not a number of type {type_.name}")
        if not -(1 << bits) <= number < (1 << bits):
            raise ConfigError(name, value, f"Not a number of type {type_.name}")
        return number
    if type_ is ConfigType.DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if text is not None and _DOUBLE_RE.fullmatch(text):
            return float(text.rstrip("fFdD").replace("Infinity", "inf"))
        raise ConfigError(name, value, "Not a number of type DOUBLE")
    if type_ is ConfigType.LIST:
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
        if text is not None:
            return _LIST_SPLIT.split(text) if text else []
        raise ConfigError(name, value, "Expected a comma separated list.")
    if type_ is ConfigType.PASSWORD:
        if isinstance(value, Password):
            return value
        if text is not None:
            return Password(text)
    elif text is not None:  # STRING, CLASS
        return text
    raise ConfigError(name, value, f"Expected value to be a string, but it was a {type(value).__name__}")


def java_double_to_string(d: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else ``1.0E10`` style."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    if 1e-3 <= abs(d) < 1e7:
        return repr(d)
    sign, digits, exponent = Decimal(repr(d)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = text[0] + "." + (text[1:] or "0")
    return ("-" if sign else "") + mantissa + "E" + str(len(digits) - 1 + exponent)


def convert_to_string(value: Any, type_: ConfigType | None) -> str | None:
    """A typed value as Kafka prints it (ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_to_string(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


# -- definitions ---------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    """One defined property: name, type, default (parsed; None = null), importance, doc."""

    name: str
    type: ConfigType
    default: Any
    importance: Importance
    doc: str
    validator: Callable[[str, Any], None] | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_VALUE

    def parse(self, raw: Any) -> Any:
        value = parse_type(self.name, raw, self.type)
        if self.validator is not None:
            self.validator(self.name, value)
        return value


class DictView(Mapping):
    """Read-only mapping over ``self._data``."""

    _data: dict

    def __getitem__(self, name: str) -> Any:
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class ConfigDef(DictView):
    """An ordered registry of ConfigKeys by name (Kafka's ConfigDef)."""

    def __init__(self) -> None:
        self._data: dict[str, ConfigKey] = {}

    @property
    def config_keys(self) -> dict[str, ConfigKey]:
        return self._data

    def define(self, name: str, type_: ConfigType, default: Any, validator, importance: Importance,
               doc: str) -> ConfigDef:
        if name in self._data:
            raise ValueError(f"Configuration {name} is defined twice.")
        key = ConfigKey(name, type_, _NO_VALUE, importance, doc, validator)
        if default is not _NO_VALUE:
            # Defaults go through the same parser and validator as user values.
            key = ConfigKey(name, type_, parse_type(name, default, type_), importance, doc, validator)
            if validator is not None and key.default is not None:
                validator(name, key.default)
        self._data[name] = key
        return self

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values for every defined key: the given one, else the default."""
        values = {}
        for name, key in self._data.items():
            if name in props:
                values[name] = key.parse(props[name])
            elif key.has_default:
                values[name] = key.default
            else:
                raise ConfigError(name, message=f'Missing required configuration "{name}" which has no default value.')
        return values

    def default_strings(self) -> dict[str, str]:
        """Non-null defaults as strings (Kafka's staticDefaultConfigs)."""
        return {n: convert_to_string(k.default, k.type) for n, k in self._data.items()
                if k.has_default and k.default is not None}


# Short names for definition tables (kafka_config.py, storage/log_config.py).
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG,
    ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW
at_least, between = Range.at_least, Range.between
