"""`python -m kafka_compat.codegen [--check] [--out DIR]`: regenerate the codecs from schemas/."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .emit import generate
from .model import SchemaError, load

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas"
TARGET = ROOT / "kafka_compat" / "protocol"


def write(out: Path) -> list[Path]:
    files = generate(load(SCHEMAS))
    written = []
    for rel, text in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    # drop generated modules whose schema is gone
    for old in (out / "messages").glob("*.py"):
        if old not in written:
            old.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafka_compat.codegen", description=__doc__)
    ap.add_argument("--out", type=Path, default=TARGET,
                    help="package folder to write into (default: kafka_compat/protocol)")
    args = ap.parse_args(argv)
    try:
        files = write(args.out)
    except SchemaError as e:
        print(f"schema error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
