"""Load and validate `schemas/` into a small object model.

The generator never guesses: every rule Kafka's own generator enforces on its
message definitions (tagged fields only in flexible versions, unique tags,
nullability only on types that can be null, ranges inside the message's
range) is checked here, so a typo in a schema fails `python -m kafka_compat.codegen`
instead of producing a codec that silently disagrees with real clients.
"""
from __future__ import annotations

import keyword
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
              "string", "uuid", "bytes", "records"}
NULLABLE_TYPES = {"string", "bytes", "records", "uuid"}
FIELD_ATTRS = {"versions", "nullable", "default", "tag", "tagged", "flexible", "entity"}
FIELD_FLAGS = {"map-key", "ignorable", "zero-copy"}


class SchemaError(Exception):
    """A schema file breaks a rule; the message names the file and line."""


@dataclass(frozen=True)
class Versions:
    """A closed or open range of versions; `hi is None` means "and every later one"."""
    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str) -> "Versions | None":
        text = text.strip()
        if text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v and (self.hi is None or v <= self.hi)

    def __str__(self) -> str:
        if self.hi is None:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


def in_range(r: Versions | None, v: int) -> bool:
    return r is not None and v in r


@dataclass
class Field:
    name: str
    type: str
    versions: Versions
    nullable: Versions | None = None
    default: str | None = None
    tag: int | None = None
    tagged: Versions | None = None
    flexible: Versions | None = None
    flexible_override: bool = False
    map_key: bool = False
    ignorable: bool = False
    zero_copy: bool = False
    entity: str | None = None
    fields: list["Field"] = field(default_factory=list)   # inline struct fields
    line: int = 0

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element not in PRIMITIVES

    @property
    def attr(self) -> str:
        return snake(self.name)


@dataclass
class Struct:
    name: str
    versions: Versions
    fields: list[Field]


@dataclass
class Message:
    name: str                     # e.g. ProduceRequest
    kind: str                     # request, response or message
    versions: Versions
    flexible: Versions | None
    fields: list[Field]
    structs: dict[str, Struct]    # every struct the message uses, inline or common
    api_key: int | None = None

    def is_flexible(self, v: int) -> bool:
        return in_range(self.flexible, v)

    def version_list(self) -> list[int]:
        return list(range(self.versions.lo, self.versions.hi + 1))


@dataclass
class Api:
    name: str
    key: int
    versions: Versions
    flexible: Versions | None
    listeners: list[str]
    latest_unstable: bool
    request: Message
    response: Message
    source: str


@dataclass
class ErrorCode:
    code: int
    name: str
    retriable: bool
    message: str


@dataclass
class Schemas:
    apis: list[Api]
    messages: dict[str, list[Message]]     # file stem -> standalone messages
    errors: list[ErrorCode]


def snake(name: str) -> str:
    """Kafka's CamelCase (or camelCase) field name as a Python attribute."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    s = s.lower()
    return s + "_" if keyword.iskeyword(s) else s


# ---------------------------------------------------------------- parsing

def _indent(line: str) -> int:
    return (len(line) - len(line.lstrip(" "))) // 2


def _parse_attrs(tokens: list[str], where: str) -> tuple[dict, set]:
    attrs, flags = {}, set()
    for tok in tokens:
        if "=" in tok:
            k, v = tok.split("=", 1)
            attrs[k] = v
        else:
            flags.add(tok)
    return attrs, flags


def _parse_field(tokens: list[str], where: str, lineno: int) -> Field:
    if len(tokens) < 2:
        raise SchemaError(f"{where}: a field needs a name and a type")
    name, typ = tokens[0], tokens[1]
    attrs, flags = _parse_attrs(tokens[2:], where)
    unknown = (set(attrs) - FIELD_ATTRS) | (flags - FIELD_FLAGS)
    if unknown:
        raise SchemaError(f"{where}: unknown attribute(s) {sorted(unknown)}")
    if "versions" not in attrs:
        raise SchemaError(f"{where}: field {name} has no versions=")
    f = Field(name=name, type=typ, versions=Versions.parse(attrs["versions"]), line=lineno)
    if f.versions is None:
        raise SchemaError(f"{where}: field {name} has versions=none")
    if "nullable" in attrs:
        f.nullable = Versions.parse(attrs["nullable"])
    f.default = attrs.get("default")
    if "tag" in attrs:
        f.tag = int(attrs["tag"])
        if "tagged" not in attrs:
            raise SchemaError(f"{where}: tag= needs tagged=")
        f.tagged = Versions.parse(attrs["tagged"])
    if "flexible" in attrs:
        f.flexible = Versions.parse(attrs["flexible"])
        f.flexible_override = True
    f.map_key = "map-key" in flags
    f.ignorable = "ignorable" in flags
    f.zero_copy = "zero-copy" in flags
    f.entity = attrs.get("entity")
    return f


def _parse_block(lines: list[tuple[int, str]], i: int, depth: int, where: str,
                 fields: list[Field], structs: dict[str, Struct]) -> int:
    """Parse fields at `depth` starting at lines[i]; return the index after the block."""
    while i < len(lines):
        lineno, text = lines[i]
        d = _indent(text)
        if d < depth:
            return i
        if d > depth:
            raise SchemaError(f"{where}:{lineno}: unexpected indentation")
        tokens = shlex.split(text.strip())
        if tokens[0] == "struct":
            attrs, _ = _parse_attrs(tokens[2:], where)
            st = Struct(tokens[1], Versions.parse(attrs.get("versions", "0+")), [])
            if st.name in structs:
                raise SchemaError(f"{where}:{lineno}: struct {st.name} defined twice")
            structs[st.name] = st
            i = _parse_block(lines, i + 1, depth + 1, where, st.fields, structs)
            continue
        f = _parse_field(tokens, f"{where}:{lineno}", lineno)
        fields.append(f)
        i += 1
        if i < len(lines) and _indent(lines[i][1]) > depth:
            i = _parse_block(lines, i, depth + 1, where, f.fields, structs)
            if f.element in structs:
                raise SchemaError(f"{where}:{lineno}: struct {f.element} defined twice")
            structs[f.element] = Struct(f.element, f.versions, f.fields)
    return i


def _content_lines(path: Path) -> list[tuple[int, str]]:
    out = []
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        out.append((n, raw.rstrip()))
    return out


def _header(tokens: list[str], where: str) -> tuple[dict, set]:
    return _parse_attrs(tokens[2:], where)


def load_api(path: Path) -> Api:
    lines = _content_lines(path)
    where = path.name
    tokens = shlex.split(lines[0][1])
    if tokens[0] != "api":
        raise SchemaError(f"{where}: must start with 'api'")
    attrs, flags = _header(tokens, where)
    name = tokens[1]
    versions = Versions.parse(attrs["versions"])
    flexible = Versions.parse(attrs.get("flexible", "none"))
    sections: dict[str, Message] = {}
    i = 1
    while i < len(lines):
        lineno, text = lines[i]
        word = text.strip()
        if word not in ("request", "response") or _indent(text) != 0:
            raise SchemaError(f"{where}:{lineno}: expected 'request' or 'response'")
        fields: list[Field] = []
        structs: dict[str, Struct] = {}
        i = _parse_block(lines, i + 1, 1, where, fields, structs)
        sections[word] = Message(name + word.capitalize(), word, versions, flexible,
                                 fields, structs, int(attrs["key"]))
    if set(sections) != {"request", "response"}:
        raise SchemaError(f"{where}: needs a request and a response section")
    api = Api(name, int(attrs["key"]), versions, flexible,
              attrs.get("listeners", "").split(",") if attrs.get("listeners") else [],
              "latest-unstable" in flags, sections["request"], sections["response"], where)
    for m in (api.request, api.response):
        validate(m, where)
    return api


def load_messages(path: Path) -> list[Message]:
    lines = _content_lines(path)
    where = path.name
    out = []
    i = 0
    while i < len(lines):
        lineno, text = lines[i]
        tokens = shlex.split(text)
        if tokens[0] != "message" or _indent(text) != 0:
            raise SchemaError(f"{where}:{lineno}: expected 'message Name ...'")
        attrs, _ = _header(tokens, where)
        fields: list[Field] = []
        structs: dict[str, Struct] = {}
        i = _parse_block(lines, i + 1, 1, where, fields, structs)
        m = Message(tokens[1], "message", Versions.parse(attrs["versions"]),
                    Versions.parse(attrs.get("flexible", "none")), fields, structs)
        validate(m, where)
        out.append(m)
    return out


def load_errors(path: Path) -> list[ErrorCode]:
    out = []
    for lineno, text in _content_lines(path):
        tokens = shlex.split(text)
        if len(tokens) != 4 or tokens[2] not in ("retriable", "fatal"):
            raise SchemaError(f"{path.name}:{lineno}: expected CODE NAME retriable|fatal \"message\"")
        out.append(ErrorCode(int(tokens[0]), tokens[1], tokens[2] == "retriable", tokens[3]))
    codes = [e.code for e in out]
    if len(set(codes)) != len(codes):
        raise SchemaError(f"{path.name}: duplicate error codes")
    return out


def load(root: Path) -> Schemas:
    apis = [load_api(p) for p in sorted((root / "apis").glob("*.schema"))]
    keys = [a.key for a in apis]
    if len(set(keys)) != len(keys):
        raise SchemaError("two API files share an API key")
    messages = {p.stem: load_messages(p) for p in sorted(root.glob("*.schema")) if p.stem != "errors"}
    errors_path = root / "errors.schema"
    errors = load_errors(errors_path) if errors_path.exists() else []
    return Schemas(apis, messages, errors)


# ---------------------------------------------------------------- validation

def validate(m: Message, where: str) -> None:
    if m.versions is None or m.versions.hi is None:
        raise SchemaError(f"{where}: {m.name} needs a closed version range")

    def check(fields: list[Field], scope: Versions, path: str) -> None:
        tags = set()
        names = set()
        for f in fields:
            at = f"{where}:{f.line}: {path}{f.name}"
            if f.name in names:
                raise SchemaError(f"{at}: duplicate field name")
            names.add(f.name)
            if f.element not in PRIMITIVES and f.element not in m.structs:
                raise SchemaError(f"{at}: unknown type {f.type}")
            if f.nullable is not None and not (f.is_array or f.is_struct or f.type in NULLABLE_TYPES):
                raise SchemaError(f"{at}: type {f.type} cannot be nullable")
            if f.tag is not None:
                if f.tag in tags:
                    raise SchemaError(f"{at}: tag {f.tag} used twice")
                tags.add(f.tag)
                if f.tagged.hi is not None:
                    raise SchemaError(f"{at}: tagged versions must be open-ended")
                for v in range(f.tagged.lo, m.versions.hi + 1):
                    if not m.is_flexible(v):
                        raise SchemaError(f"{at}: tagged in non-flexible version {v}")
            if f.is_struct and f.fields:
                check(f.fields, f.versions, f"{path}{f.name}.")
        return None

    check(m.fields, m.versions, "")
    for st in m.structs.values():
        check(st.fields, st.versions, f"{st.name}.")


