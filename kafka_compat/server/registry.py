"""How a handler says which API key it answers, over which versions.

A handler is a method of a handler object (one object per API family, built by
the composition root with its collaborators). ``@handles(key)`` marks it with the
version range it implements, the schema's whole range unless narrowed; KafkaApis
collects the marked methods, and ApiVersions advertises exactly those ranges, so a
client never sees a version we cannot serve.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..protocol.messages import APIS


@dataclass(frozen=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    fn: Callable | None = None


class CloseConnection(Exception):
    """Raised by a handler when Kafka would drop the connection instead of answering."""


def handles(api_key: int, min_version: int | None = None, max_version: int | None = None):
    """Mark a handler method for ``api_key``; the range defaults to everything the schema defines."""
    info = APIS[api_key]
    lo = info.min_version if min_version is None else min_version
    hi = info.max_version if max_version is None else max_version
    if not info.min_version <= lo <= hi <= info.max_version:
        raise ValueError(f"{info.name}: {lo}-{hi} is outside the schema's {info.min_version}-{info.max_version}")

    def mark(fn):
        fn.kafka_api = Handler(api_key, lo, hi)
        return fn
    return mark


def marked_handlers(cls) -> list[tuple[str, Handler]]:
    """(method name, Handler) of every method of ``cls`` marked with @handles."""
    return [(name, fn.kafka_api) for name, fn in vars(cls).items() if hasattr(fn, "kafka_api")]
