"""Java ``.properties`` files (java.util.Properties.load rules): how server.properties reads."""

from __future__ import annotations

import os
import re

_NEWLINE = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WS = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (java.util.Properties.load rules)."""
    lines = _NEWLINE.split(text)
    props: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # blank or comment; a comment never continues onto the next line
        while _odd_trailing_backslashes(line):
            line = line[:-1]
            if i == len(lines):
                break
            line += lines[i].lstrip(_WS)
            i += 1
        key, value = _split_key_value(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _odd_trailing_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    escaped = False
    end = len(line)
    has_sep = False
    for pos, c in enumerate(line):
        if not escaped and c in "=:":
            end, has_sep = pos, True
            break
        if not escaped and c in _WS:
            end = pos
            break
        escaped = c == "\\" and not escaped
    start = end + 1 if end < len(line) else end
    while start < len(line):
        c = line[start]
        if c not in _WS:
            if has_sep or c not in "=:":
                break
            has_sep = True
        start += 1
    return line[:end], line[start:]


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\" or i == len(s):
            out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    text = "".join(out)
    # \uD83D\uDE00 is one character written as two UTF-16 halves.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def load_properties(path: str | os.PathLike) -> dict[str, str]:
    """Read a ``.properties`` file. Java reads ISO-8859-1; we read UTF-8 and fall back
    to ISO-8859-1, which is the same for ASCII files and right for UTF-8 ones."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)
