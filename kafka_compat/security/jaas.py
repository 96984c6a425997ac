"""Kafka's `sasl.jaas.config` syntax and the credentials the PLAIN login module options hold.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

One or more entries, each `LoginModule flag key=value ... ;`. Kafka reads it with
Java's StreamTokenizer, and so does this parser: words are letters (and '-', '_',
'$'), then also digits and '.'; values are words or quoted strings with backslash
escapes; // and /* */ start comments, and so does a lone '/'. A value that starts
with a digit is a number token, which Kafka refuses ("Value not specified for key"),
so a config accepted here is accepted by Kafka too.
"""
from __future__ import annotations

import hmac
from typing import Iterable, Mapping, NamedTuple

from ..configdef import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
CONTROL_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")


class JaasEntry(NamedTuple):
    login_module: str
    control_flag: str
    options: dict[str, str]

    def __repr__(self) -> str:      # options hold passwords
        return f"JaasEntry({self.login_module}, {self.control_flag}, options={sorted(self.options)})"


_WORD, _NUMBER, _QUOTED, _CHAR = "word", "number", "quoted", "char"
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _is_word_start(c: str) -> bool:
    return c.isascii() and c.isalpha() or c in "_$" or ord(c) >= 0xA0


def _tokens(text: str):
    """(kind, value) pairs as StreamTokenizer yields them for Kafka's settings."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:                   # '//' and a lone '/' both comment out the rest of the line
                while i < n and text[i] not in "\r\n":
                    i += 1
        elif c in "\"'":
            i += 1
            out = []
            while i < n and text[i] != c and text[i] not in "\r\n":
                ch = text[i]
                if ch == "\\" and i + 1 < n:
                    i += 1
                    ch = text[i]
                    if ch in "01234567":
                        digits = ch
                        while len(digits) < (3 if ch <= "3" else 2) and i + 1 < n and text[i + 1] in "01234567":
                            i += 1
                            digits += text[i]
                        ch = chr(int(digits, 8))
                    else:
                        ch = _ESCAPES.get(ch, ch)
                out.append(ch)
                i += 1
            i += 1                  # the closing quote (or the end of the line)
            yield _QUOTED, "".join(out)
        elif c == "-" and not (i + 1 < n and (text[i + 1].isdigit() or text[i + 1] == ".")):
            yield _CHAR, c          # '-' is numeric before it is a word character
            i += 1
        elif c.isdigit() or c in ".-":
            j = i + 1
            while j < n and (text[j].isdigit() or text[j] == "."):
                j += 1
            yield _NUMBER, text[i:j]
            i = j
        elif _is_word_start(c):
            j = i + 1
            while j < n and (_is_word_start(text[j]) or text[j].isdigit() or text[j] in ".-"):
                j += 1
            yield _WORD, text[i:j]
            i = j
        else:
            yield _CHAR, c
            i += 1


def parse_jaas_config(text: str, name: str = "sasl.jaas.config") -> list[JaasEntry]:
    """The entries of a JAAS configuration; ConfigError (naming `name`, never a value) when Kafka would refuse it."""
    def fail(message: str):
        raise ConfigError(name, message=f"{name}: {message}")

    tokens = list(_tokens(text or ""))
    entries = []
    i = 0
    while i < len(tokens):
        module_kind, module = tokens[i]
        i += 1
        if module_kind not in (_WORD, _QUOTED):
            fail("Login module not specified in JAAS config")
        if i >= len(tokens):
            fail("Login module control flag not specified in JAAS config")
        flag_kind, flag = tokens[i]
        i += 1
        if flag_kind not in (_WORD, _QUOTED):
            fail("Login module control flag is not available in the JAAS config")
        if flag.upper() not in CONTROL_FLAGS:
            fail(f"Invalid login module control flag '{flag}' in JAAS config")
        options: dict[str, str] = {}
        terminated = False
        while i < len(tokens):
            kind, key = tokens[i]
            i += 1
            if kind == _CHAR and key == ";":
                terminated = True
                break
            if kind not in (_WORD, _QUOTED):
                key = "null"
            if i + 1 >= len(tokens) or tokens[i] != (_CHAR, "=") or tokens[i + 1][0] not in (_WORD, _QUOTED):
                fail(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[i + 1][1]
            i += 2
        if not terminated:
            fail("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(module, flag.upper(), options))
    if not entries:
        fail("Login module not specified in JAAS config")
    return entries


def entry_option(entries: Iterable[JaasEntry], key: str, login_module: str | None = None) -> str | None:
    """Kafka's JaasContext.configEntryOption: the first entry (of that login module) having the option."""
    for entry in entries:
        if login_module is not None and entry.login_module != login_module:
            continue
        if key in entry.options:
            return entry.options[key]
    return None


class PlainCredentials:
    """The `user_<name>="<password>"` options of the PlainLoginModule entry (Kafka's
    PlainServerCallbackHandler), checked in constant time."""

    def __init__(self, users: Mapping[str, str]):
        self._users = {u: p.encode("utf-8") for u, p in users.items()}

    @classmethod
    def from_jaas(cls, entries: Iterable[JaasEntry]) -> PlainCredentials:
        users = {}
        for entry in entries:
            if entry.login_module != PLAIN_LOGIN_MODULE:
                continue
            for key, value in entry.options.items():
                if key.startswith("user_"):
                    users.setdefault(key[5:], value)
        return cls(users)

    def verify(self, username: str, password: str) -> bool:
        expected = self._users.get(username)
        return expected is not None and hmac.compare_digest(password.encode("utf-8"), expected)

    __call__ = verify
