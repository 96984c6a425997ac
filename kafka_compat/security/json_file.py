"""A JSON document kept in one file and replaced atomically (write a temporary file, fsync, rename,
fsync the directory), so a crash leaves either the old document or the new one."""
from __future__ import annotations

import json
import os


def read_json(path: str):
    """The document, or None when the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def write_json(path: str, document, mode: int = 0o600) -> None:
    """Replace the file's content; `mode` applies to the new file (secrets stay owner-only)."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            json.dump(document, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
    finally:
        if fd >= 0:
            os.close(fd)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
