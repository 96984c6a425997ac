"""Runs of array elements that share one byte layout, decoded a run at a time.

An element made only of fixed-width fields and short arrays of fixed-width values
(a Metadata partition: four ints, then replica, ISR and offline-replica lists) has
a layout fixed by its own counts. Big responses repeat one layout thousands of
times, so the first element's counts pick a decoder written for exactly that
layout: one `Struct.iter_unpack` over the run, every value unpacked into a local,
each list built from locals. The generated code keeps its general, field-by-field
path for the element where the layout changes, for counts past LIMIT, for tagged
fields and for damaged input, so nothing here ever raises.

The source of a layout's decoder is built from the schema's field names and small
integer counts only, never from the frame's bytes, and at most MAX_LAYOUTS are kept
per element type, so hostile frames cannot grow the cache.
"""
from __future__ import annotations

from struct import Struct

from .primitives import new

LIMIT = 16          # the longest array a layout-specific decoder is written for
MAX_LAYOUTS = 32    # layouts compiled per element type

SIZES = {"b": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "d": 8, "?": 1, "16s": 16}


class ElementLayout:
    """The fields of one struct at one version, and the decoders of its layouts.

    ``fields`` lists (attribute, struct code, is_array) in wire order; ``defaults``
    maps the attributes this version does not carry to a Python expression for their
    default; ``flexible`` says whether counts are compact varints and a tagged-field
    section closes the element. Calling it decodes the longest run of elements at
    ``p`` (at most ``remaining``) that share the first one's layout, appending each to
    ``append``; it returns (count, new position), (0, p) when it cannot.
    """

    def __init__(self, cls, fields, defaults, flexible: bool, namespace: dict):
        self.cls = cls
        self.fields = fields
        self.defaults = defaults
        self.flexible = flexible
        self.namespace = namespace
        self.runs: dict[tuple, object] = {}

    def counts_at(self, buf, p: int) -> tuple | None:
        """The array lengths of the element at ``p``, or None where a layout decoder cannot go."""
        counts = []
        try:
            for _attr, code, is_array in self.fields:
                if not is_array:
                    p += SIZES[code]
                    continue
                if self.flexible:
                    n = buf[p] - 1
                    p += 1
                else:
                    n = int.from_bytes(buf[p:p + 4], "big", signed=True)
                    p += 4
                if not 0 <= n <= LIMIT:
                    return None
                counts.append(n)
                p += n * SIZES[code]
        except IndexError:
            return None
        return tuple(counts)

    def __call__(self, buf, p: int, remaining: int, append) -> tuple[int, int]:
        counts = self.counts_at(buf, p)
        if counts is None:
            return 0, p
        run = self.runs.get(counts)
        if run is None:
            if len(self.runs) >= MAX_LAYOUTS:
                return 0, p
            run = self.runs[counts] = self.compile(counts)
        return run(buf, p, remaining, append)

    def compile(self, counts: tuple):
        """Write and compile the decoder of one layout."""
        fmt, names, checks, stores = ">", [], [], []
        arrays = iter(counts)
        for i, (attr, code, is_array) in enumerate(self.fields):
            if not is_array:
                fmt += code
                names.append(f"f{i}")
                stores.append(f"o.{attr} = f{i}")
                continue
            n = next(arrays)
            fmt += "B" if self.flexible else "i"
            names.append(f"c{i}")
            checks.append(f"c{i} != {n + 1 if self.flexible else n}")
            items = [f"f{i}_{j}" for j in range(n)]
            fmt += code * n
            names += items
            stores.append(f"o.{attr} = [{', '.join(items)}]")
        if self.flexible:
            fmt += "B"
            names.append("tags")
            checks.append("tags")
        stores.append("o.unknown_tags = None")
        stores += [f"o.{attr} = {expr}" for attr, expr in self.defaults.items()]
        unpacker = Struct(fmt)
        size = unpacker.size
        target = ", ".join(names) + ("," if len(names) == 1 else "")
        body = [
            "def run(buf, p, remaining, append):",
            f"    m = (len(buf) - p) // {size}",
            "    if m > remaining:",
            "        m = remaining",
            "    c = 0",
            f"    for {target} in iter_unpack(buf[p:p + m * {size}]):",
        ]
        if checks:
            body += [f"        if {' or '.join(checks)}:", "            break"]
        body += ["        o = new(cls)"] + [f"        {s}" for s in stores] + [
            "        append(o)",
            "        c += 1",
            f"    return c, p + c * {size}",
        ]
        scope = dict(self.namespace)
        scope.update(new=new, cls=self.cls, iter_unpack=unpacker.iter_unpack)
        exec("\n".join(body), scope)
        return scope["run"]
