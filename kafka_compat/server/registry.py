"""Which module handles which API key, and over which versions.

A handler is `fn(broker, request) -> response body | awaitable | None`. It
registers the version range it implements; the broker advertises exactly those
ranges in ApiVersions, so a client never sees a version we cannot serve.
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
    fn: Callable


HANDLERS: dict[int, Handler] = {}


class CloseConnection(Exception):
    """Raised by a handler when Kafka would drop the connection instead of answering."""


def handles(api_key: int, min_version: int | None = None, max_version: int | None = None):
    """Register `fn` for `api_key`; the range defaults to everything the schema defines."""
    info = APIS[api_key]
    lo = info.min_version if min_version is None else min_version
    hi = info.max_version if max_version is None else max_version
    if not info.min_version <= lo <= hi <= info.max_version:
        raise ValueError(f"{info.name}: {lo}-{hi} is outside the schema's {info.min_version}-{info.max_version}")

    def register(fn):
        if api_key in HANDLERS:
            raise ValueError(f"{info.name} is handled twice")
        HANDLERS[api_key] = Handler(api_key, lo, hi, fn)
        return fn
    return register


def supported_versions() -> dict[int, tuple[int, int]]:
    return {k: (h.min_version, h.max_version) for k, h in sorted(HANDLERS.items())}
