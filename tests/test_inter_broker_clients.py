"""Every inter-broker client the broker builds logs in as the inter-broker listener says.

The brokers' own connections (replica fetchers, the controller's channel, AlterPartition and
ControlledShutdown, transaction markers...) are `network.client.NetworkClient`s. One built without
`security=` opens plain TCP, which on a cluster whose inter-broker listener is SSL or SASL_* fails
only there, at run time (a secured cluster that cannot replicate, or whose markers never arrive).
So every `NetworkClient(...)` outside the network layer must pass `security=` (from
`Broker.inter_broker_security()`). The check is a function returning the offending calls, and the
test also proves it finds one.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "kafka_compat"


def unsecured_clients(source: str, filename: str = "<source>") -> list[str]:
    """`file:line` of each NetworkClient(...) call without a security= keyword."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if called == "NetworkClient" and not any(k.arg in ("security", None) for k in node.keywords):
            out.append(f"{filename}:{node.lineno}")
    return out


def test_every_inter_broker_client_is_given_the_inter_broker_security():
    offending = []
    for path in ROOT.rglob("*.py"):
        if path.parent.name == "network":
            continue
        offending += unsecured_clients(path.read_text(), str(path.relative_to(ROOT)))
    assert offending == [], ("NetworkClient built without security= (pass security=self.inter_broker_security(), "
                             f"as the fetchers and the controller's channel do): {offending}")


def test_the_check_finds_an_unsecured_client():
    source = ("a = NetworkClient('x', security=s)\n"
              "b = network.NetworkClient('y', request_timeout_ms=1)\n"
              "c = NetworkClient('z', **options)\n")
    assert unsecured_clients(source, "m.py") == ["m.py:2"]
