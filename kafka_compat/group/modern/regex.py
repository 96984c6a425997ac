"""Topic subscription by regular expression, on the broker (KIP-848's SubscribedTopicRegex).

Kafka evaluates these with RE2/J: a full match against each topic name, and no
constructs that need backtracking. Python's `re` is close for what RE2 accepts;
the few things `re` takes and RE2 refuses (look-around, back-references,
possessive and atomic groups, conditionals) are refused here too, so a pattern
either behaves as on Kafka or gets INVALID_REGULAR_EXPRESSION.
"""
from __future__ import annotations

import re

MAX_REGEX_LENGTH = 1024     # a bound on what a client may make the broker compile
_NOT_RE2 = re.compile(r"\(\?(?:[=!]|<[=!]|P=|\(|>)|\\[1-9]|\\g<|[*+?}]\+")


def validate_regex(regex: str) -> str | None:
    """None when the pattern is valid, else why not."""
    if len(regex) > MAX_REGEX_LENGTH:
        return f"The regular expression is longer than {MAX_REGEX_LENGTH} characters."
    if _NOT_RE2.search(regex):
        return f"Invalid regular expression {regex!r}: look-around, back-references and atomic groups are " \
               "not supported (RE2 syntax)."
    try:
        re.compile(regex)
    except re.error as e:
        return f"Invalid regular expression {regex!r}: {e}."
    except (RecursionError, OverflowError):
        return f"Invalid regular expression {regex!r}: too complex."
    return None


def resolve_regex(regex: str, topic_names) -> frozenset:
    """The topics whose whole name matches."""
    pattern = re.compile(regex)
    return frozenset(t for t in topic_names if pattern.fullmatch(t))
