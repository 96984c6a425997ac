"""A document kept in one file and replaced atomically, so a crash leaves either the old document or
the new one (storage.checkpoint.write_atomically: temporary file, fsync, rename, fsync of the directory)."""
from __future__ import annotations

import json

from kafka_compat.storage.checkpoint import write_atomically


def read_json(path: str):
    """The document, or None when the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def write_json(path: str, document, mode: int = 0o600) -> None:
    """Replace the file's content; `mode` applies to the new file (secrets stay owner-only)."""
    write_atomically(path, json.dumps(document, indent=1, sort_keys=True), mode)
