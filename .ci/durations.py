"""Per-file wall time from pytest's JUnit XML: what decides which files run beside the rest (tests/run.sh)."""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def per_file(paths: list[str]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for path in paths:
        for case in ET.parse(path).iter("testcase"):
            module = case.get("classname", "").split(".")
            name = "/".join(p for p in module if not p[:1].isupper()) + ".py"
            totals[name] += float(case.get("time", 0))
    return totals


if __name__ == "__main__":
    for path in sys.argv[1:]:
        totals = per_file([path])
        print(f"--- {path}: {sum(totals.values()) / 60:.1f} min in {len(totals)} files; the slowest:")
        for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1])[:25]:
            print(f"{seconds:8.1f}s  {name}")
