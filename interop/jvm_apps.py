"""Class paths of the JVM applications the Streams and Connect suites run (interop/maven.sh resolves the jars).

`streams_classpath` compiles interop/streams/*.java against .cache/jvm/streams (Kafka Streams 4.x) into
.cache/streams-classes when the sources' digest changed, as peers.java4_classpath does for the clients;
`connect_classpath` is the Connect runtime's jars behind interop/connect (one bridge class that lets
connect-file 4.3.1, the newest on Maven Central, run on kafka-clients 4.4).
Each returns None when java, javac or the jars are missing, so a test can skip.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
STREAMS_JAR_DIR = CACHE / "jvm" / "streams"       # kafka-streams 4.4 + slf4j 2 (interop/maven.sh streams)
STREAMS_CLASS_DIR = CACHE / "streams-classes"
STREAMS_SRC_DIR = ROOT / "interop" / "streams"
CONNECT_JAR_DIR = CACHE / "jvm" / "connect"       # connect-runtime, connect-file, connect-json (maven.sh connect)
CONNECT_CLASS_DIR = CACHE / "connect-classes"
CONNECT_SRC_DIR = ROOT / "interop" / "connect"    # a bridge class, see interop/connect/AppInfoParser.java


def _jars(directory: Path, required: str) -> str | None:
    if not (shutil.which("java") and (directory / required).is_file()):
        return None
    # (maven.sh pins slf4j-api 2.x in these sets: kafka-clients' own 1.7 finds no slf4j-simple 2.x binding)
    return os.pathsep.join(sorted(glob.glob(str(directory / "*.jar"))))


def _compiled(src_dir: Path, class_dir: Path, jars: str) -> str | None:
    """src_dir/**/*.java compiled against jars into class_dir when the sources' digest changed."""
    javac = shutil.which("javac")
    if javac is None:
        return None
    sources = sorted(src_dir.rglob("*.java"))
    # a digest of the sources, not their mtimes: a fresh checkout has new mtimes but maybe stale classes;
    # one directory per digest, so checkouts sharing the cache never run each other's classes
    digest = hashlib.sha256(b"".join(s.name.encode() + b"\0" + s.read_bytes() for s in sources)).hexdigest()
    class_dir = class_dir / digest[:16]
    stamp = class_dir / ".stamp"
    if not stamp.exists() or stamp.read_text() != digest:
        class_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", jars, "-d", str(class_dir),
                        *map(str, sources)], check=True)
        stamp.write_text(digest)
    return str(class_dir)


def streams_classpath() -> str | None:
    """interop/streams/*.java compiled against Kafka Streams (when stale) plus its jars, or None."""
    jars = _jars(STREAMS_JAR_DIR, "kafka-streams.jar")
    classes = jars and _compiled(STREAMS_SRC_DIR, STREAMS_CLASS_DIR, jars)
    return os.pathsep.join([classes, jars]) if classes else None


def connect_classpath() -> str | None:
    """The Connect runtime with the file connectors and the JSON converter on its class path, or None."""
    jars = _jars(CONNECT_JAR_DIR, "connect-runtime.jar")
    if jars is None or not (CONNECT_JAR_DIR / "connect-file.jar").is_file():
        return None
    bridge = _compiled(CONNECT_SRC_DIR, CONNECT_CLASS_DIR, jars)    # connect-file 4.3 on clients 4.4
    return os.pathsep.join([bridge, jars]) if bridge else None


def missing(kind: str) -> str | None:
    """Why the `kind` ("streams" or "connect") suite cannot run, or None."""
    if shutil.which("java") is None:
        return "java is not on PATH"
    if kind == "streams":
        if shutil.which("javac") is None:
            return "javac is not on PATH"
        if not (STREAMS_JAR_DIR / "kafka-streams.jar").is_file():
            return "Kafka Streams is not resolved (run: bash interop/maven.sh streams)"
    elif shutil.which("javac") is None:
        return "javac is not on PATH"
    elif not (CONNECT_JAR_DIR / "connect-runtime.jar").is_file():
        return "Kafka Connect is not resolved (run: bash interop/maven.sh connect)"
    return None
