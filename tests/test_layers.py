"""The layers stay apart: every import of every module (inside functions too) obeys the house rules.

- protocol is sans-I/O: no network, server, storage, coordinators, controller, ZooKeeper or asyncio;
- generated messages import only the protocol runtime;
- storage knows batches and files: no network, server, coordinators, controller or ZooKeeper;
- only the composition root (server/broker.py) imports the network layer, and only it builds the
  storage engine's LogManager beside ReplicaManager;
- only ReplicaManager and Partition touch a partition's log.
A rule is checked by a function that returns the offending imports, so a test also proves each
rule fails when a forbidden import is added.
"""
from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"kafka_compat": ROOT / "kafka_compat", "kafka_compat.storage": ROOT / "storage",
            "kafka_compat.codegen": ROOT / "codegen"}


def module_files() -> dict[str, Path]:
    """Every module of the installed package, by dotted name (storage and codegen mapped as pip maps them)."""
    out = {}
    for prefix, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if prefix == "kafka_compat" and parts[:1] in (["storage"], ["codegen"]):
                continue
            out[".".join([prefix, *parts])] = path
    return out


def imports_of(name: str, source: str) -> set[str]:
    """Absolute names of everything ``source`` imports, at any depth (function bodies included)."""
    package = name if name.endswith("__init__") else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def is_package(name: str, files: dict[str, Path]) -> bool:
    return files[name].name == "__init__.py"


@functools.cache
def _import_graph() -> tuple:
    files = module_files()
    return tuple((name, frozenset(imports_of(name + ".__init__" if is_package(name, files) else name,
                                             path.read_text())))
                 for name, path in files.items())


def all_imports() -> dict[str, set[str]]:
    """module -> everything it imports (parsed once per test run; a fresh copy each call)."""
    return {name: set(imported) for name, imported in _import_graph()}


def under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


COORDINATORS = ("kafka_compat.group", "kafka_compat.transaction", "kafka_compat.controller", "kafka_compat.zk")


def violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, imported in graph.items():
        for target in imported:
            if under(module, "kafka_compat.protocol"):
                if under(target, "kafka_compat.network", "kafka_compat.server", "kafka_compat.storage", "asyncio",
                         *COORDINATORS):
                    bad.append(f"{module} (protocol) imports {target}")
                if under(module, "kafka_compat.protocol.messages") and under(target, "kafka_compat") and not \
                        under(target, "kafka_compat.protocol.primitives", "kafka_compat.protocol.layouts",
                              "kafka_compat.protocol.messages"):
                    bad.append(f"{module} (generated) imports {target}")
            if under(module, "kafka_compat.storage") and under(
                    target, "kafka_compat.network", "kafka_compat.server", *COORDINATORS):
                bad.append(f"{module} (storage) imports {target}")
            if under(target, "kafka_compat.network") and not under(
                    module, "kafka_compat.network", "kafka_compat.server.broker"):
                bad.append(f"{module} imports the network layer ({target}); only the composition root may")
            if under(target, "kafka_compat.storage.log_manager") and not under(
                    module, "kafka_compat.storage", "kafka_compat.server.broker",
                    "kafka_compat.server.replica_manager"):
                bad.append(f"{module} builds storage ({target}); only the composition root may")
    return sorted(bad)


LOG_TOUCH = re.compile(r"\.log\.(append|read|truncate|maybe_increment_log_start_offset|delete_old_segments)\b|"
                       r"\b(append_as_leader|append_as_follower|maybe_increment_log_start_offset|truncate_to)\(")
LOG_OWNERS = {"kafka_compat.server.partition", "kafka_compat.server.replica_manager"}


def log_touchers(files: dict[str, Path]) -> list[str]:
    """Modules outside storage that call a log's write, read or truncation methods."""
    bad = []
    for name, path in files.items():
        if under(name, "kafka_compat.storage") or name in LOG_OWNERS:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if LOG_TOUCH.search(line):
                bad.append(f"{path}:{n}: {line.strip()}")
    return bad


def test_layers_hold():
    assert violations(all_imports()) == []


def test_only_replica_manager_and_partition_touch_a_log():
    assert log_touchers(module_files()) == []


@pytest.mark.parametrize("module, target", [
    ("kafka_compat.protocol.records", "asyncio"),
    ("kafka_compat.protocol.frames", "kafka_compat.storage.log_config"),
    ("kafka_compat.protocol.messages.produce", "kafka_compat.protocol.records"),
    ("kafka_compat.storage.local_log", "kafka_compat.server.partition"),
    ("kafka_compat.storage.segment", "kafka_compat.group.coordinator"),
    ("kafka_compat.server.produce", "kafka_compat.network.connection"),
    ("kafka_compat.group.coordinator", "kafka_compat.storage.log_manager"),
])
def test_a_forbidden_import_is_caught(module, target):
    graph = all_imports()
    assert violations(graph) == []
    graph[module] = graph.get(module, set()) | {target}
    assert violations(graph), f"{module} importing {target} should break a rule"


def test_an_import_inside_a_function_counts():
    source = "def f():\n    import asyncio\n    from ..server import partition\n"
    assert {"asyncio", "kafka_compat.server.partition"} <= imports_of("kafka_compat.protocol.records", source)


def test_a_log_call_from_a_handler_is_caught(tmp_path):
    handler = tmp_path / "bad_handler.py"
    handler.write_text("def handle(p, records):\n    return p.log.append(records)\n")
    assert log_touchers({"kafka_compat.server.bad_handler": handler})


def test_every_package_is_installed():
    """pyproject lists packages by hand (storage and codegen are mapped): none may be missing."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    files = module_files()
    packages = {name for name in files if is_package(name, files)}
    assert packages <= listed, f"add to pyproject.toml packages: {sorted(packages - listed)}"
    assert config["package-dir"] == {"kafka_compat.storage": "storage", "kafka_compat.codegen": "codegen"}
