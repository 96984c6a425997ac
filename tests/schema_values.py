"""Random values for any generated message at any version, driven by the schemas.

Used by the round-trip property test and the fuzz test: a value only sets the
fields its version carries, so encode-then-decode must give it back unchanged.
"""
from __future__ import annotations

import importlib
import random
from pathlib import Path

from kafka_compat.codegen.emit import module_name
from kafka_compat.codegen.model import Field, Message, in_range, load

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = load(ROOT / "schemas")

INT_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "uint16": (0, 65535),
              "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1)}


def all_messages() -> list[tuple[Message, type]]:
    """Every (schema message, generated class) pair."""
    out = []
    for api in SCHEMAS.apis:
        mod = importlib.import_module(f"kafka_compat.protocol.messages.{module_name(api.name)}")
        for m in (api.request, api.response):
            out.append((m, getattr(mod, m.name)))
    for stem, msgs in SCHEMAS.messages.items():
        mod = importlib.import_module(f"kafka_compat.protocol.messages.{stem}")
        for m in msgs:
            out.append((m, getattr(mod, m.name)))
    return out


def _text(rng: random.Random) -> str:
    alphabet = "abcXYZ09-_.é€漢"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


def _primitive(rng: random.Random, f: Field, t: str, v: int):
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return rng.choice([0, -1, 1, lo, hi, rng.randint(lo, hi)]) if lo < 0 else \
            rng.choice([0, 1, hi, rng.randint(lo, hi)])
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.choice([0.0, -1.5, 1e300, rng.random()])
    if t == "string":
        return _text(rng)
    if t in ("bytes", "records"):
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 20)))
    if t == "uuid":
        return bytes(rng.getrandbits(8) for _ in range(16))
    raise AssertionError(t)


def make_value(rng: random.Random, m: Message, cls: type, v: int, depth: int = 0):
    return _make_struct(rng, m, cls, m.fields, v, depth)


def _make_struct(rng, m, cls, fields, v, depth):
    obj = cls()
    for f in fields:
        if v not in f.versions:
            continue
        tagged = f.tag is not None and in_range(f.tagged, v)
        if tagged and rng.random() < 0.4:
            continue            # leave the default: the encoder omits it
        setattr(obj, f.attr, _field_value(rng, m, cls, f, v, depth))
    return obj


def _field_value(rng, m, cls, f: Field, v: int, depth: int):
    if in_range(f.nullable, v) and rng.random() < 0.2:
        return None
    if f.is_array:
        n = rng.randint(0, 3 if depth < 3 else 0)
        if f.is_struct:
            sub = getattr(cls_root(cls), f.element)
            return [_make_struct(rng, m, sub, m.structs[f.element].fields, v, depth + 1) for _ in range(n)]
        return [_primitive(rng, f, f.element, v) for _ in range(n)]
    if f.is_struct:
        sub = getattr(cls_root(cls), f.element)
        return _make_struct(rng, m, sub, m.structs[f.element].fields, v, depth + 1)
    return _primitive(rng, f, f.type, v)


def cls_root(cls: type) -> type:
    """The top-level message class that holds `cls` (nested struct classes hang off it)."""
    top = cls.__qualname__.split(".")[0]
    return getattr(importlib.import_module(cls.__module__), top)


# -- the same values as hypothesis strategies, built from the schemas --------------------------------

def value_strategy(m: Message, cls: type, v: int):
    """A hypothesis strategy for ``cls`` at version ``v``: every field the version carries, drawn by its
    schema type (nullable fields may be None, arrays hold up to 3 elements, 3 levels deep)."""
    return _struct_strategy(m, cls, m.fields, v, 0)


def _primitive_strategy(t: str):
    from hypothesis import strategies as st
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.integers(lo, hi)
    return {"bool": st.booleans(), "float64": st.floats(allow_nan=False),
            "string": st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
            "bytes": st.binary(max_size=20), "records": st.binary(max_size=20),
            "uuid": st.binary(min_size=16, max_size=16)}[t]


def _struct_strategy(m: Message, cls: type, fields, v: int, depth: int):
    from hypothesis import strategies as st
    parts = {f.attr: _field_strategy(m, cls, f, v, depth) for f in fields if v in f.versions}

    def build(values: dict):
        obj = cls()
        for attr, value in values.items():
            setattr(obj, attr, value)
        return obj
    return st.fixed_dictionaries(parts).map(build)


def _field_strategy(m: Message, cls: type, f: Field, v: int, depth: int):
    from hypothesis import strategies as st
    if f.is_struct:
        sub = getattr(cls_root(cls), f.element)
        element = _struct_strategy(m, sub, m.structs[f.element].fields, v, depth + 1)
    else:
        element = _primitive_strategy(f.element if f.is_array else f.type)
    s = st.lists(element, max_size=3 if depth < 3 else 0) if f.is_array else element
    return st.none() | s if in_range(f.nullable, v) else s
