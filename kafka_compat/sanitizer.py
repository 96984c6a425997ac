"""Kafka's Sanitizer (org.apache.kafka.common.utils.Sanitizer): user principals and client ids as
ZooKeeper node names and quota metric tags.

`sanitize` is Java's URLEncoder with UTF-8 (ASCII letters, digits and `.-*_` kept, a space as `+`,
every other byte as upper-case %XX), then `*` written %2A and `+` (a space) written %20: only
letters, digits and `.-_` survive. `desanitize` is Java's URLDecoder: %XX decoded and `+` read as a
space. Names written by this project's older encoding (Python's `quote`, which kept `~`) decode to
the same names.
"""
from __future__ import annotations

from urllib.parse import quote, unquote_plus


def sanitize(name: str) -> str:
    """`name` URL-encoded as Kafka writes it in a znode name."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """The name `sanitize` encoded (a malformed %-escape is kept as written, where Java would refuse it)."""
    return unquote_plus(name)


def legacy_sanitize(name: str) -> str:
    """The encoding earlier releases wrote SCRAM users' znodes with (`~` kept), to find and retire them."""
    return quote(name, safe="")
