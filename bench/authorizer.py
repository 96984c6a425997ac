"""Cost of one ACL check, warm and cold, next to the floor of one dict lookup.

    python bench/authorizer.py [--acls 2000] [--seconds 1.0]

The authorizer holds `--acls` topic ACLs (literal, prefixed and wildcard, several principals).
Cases, each printed as a JSON line with ns per check:
  floor        a plain dict.get on the same 5-tuple key (the least a cached answer can cost);
  warm         AclAuthorizer.authorize() for 1,000 distinct questions already asked once;
  cold         the decision itself (cache bypassed): what the first check of a question costs;
  request-N    what a Produce or Fetch of N topics spends on authorization, as the handlers ask it
               (AuthHelper.authorize, once per topic, for a connection), against N plain dict lookups
               of (principal, host, operation, type, name): ns per request.
The target is warm within ~2x of the floor, and a request's checks within ~2x of one dict lookup per topic.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafka_compat.security.acl import (  # noqa: E402
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafka_compat.security.authorizer import AclAuthorizer  # noqa: E402
from kafka_compat.security.principal import KafkaPrincipal  # noqa: E402
from kafka_compat.server.auth_helper import TOPIC, WRITE, AuthHelper  # noqa: E402


class Connection:
    """What a handler's request carries: the connection's principal, address and cache key."""

    def __init__(self, principal: KafkaPrincipal, host: str):
        self.principal, self.host, self.acl_key = principal, host, f"{principal}|{host}"


class Request:
    def __init__(self, connection):
        self.connection = connection

OPS = [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE]


def build(n_acls: int) -> tuple[AclAuthorizer, list[tuple]]:
    bindings = []
    for i in range(n_acls):
        pattern_type = PatternType.PREFIXED if i % 10 == 0 else PatternType.LITERAL
        name = f"team{i % 50}-" if pattern_type is PatternType.PREFIXED else f"topic-{i}"
        permission = AclPermissionType.DENY if i % 17 == 0 else AclPermissionType.ALLOW
        bindings.append(AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern_type),
                                   AccessControlEntry(f"User:user{i % 20}", "*" if i % 3 else "10.0.0.1",
                                                      OPS[i % 3], permission)))
    bindings.append(AclBinding(ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL),
                               AccessControlEntry("User:monitor", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)))
    auth = AclAuthorizer(super_users="User:admin")
    results = auth.create_acls(bindings)
    assert all(r is None for r in results), [r for r in results if r][:3]
    questions = []
    for q in range(1000):
        principal = KafkaPrincipal("User", f"user{q % 20}")
        name = f"topic-{(q * 7) % n_acls}" if q % 4 else f"team{q % 50}-orders"
        questions.append((principal, "10.0.0.1" if q % 2 else "10.0.0.2", OPS[q % 3], ResourceType.TOPIC, name))
    return auth, questions


def timed(fn, seconds: float) -> float:
    """ns per call of fn(), each call doing 1,000 checks; best of several runs."""
    fn()
    best = float("inf")
    deadline = time.perf_counter() + seconds
    gc.disable()
    try:
        while True:
            t0 = time.perf_counter_ns()
            fn()
            best = min(best, (time.perf_counter_ns() - t0) / 1000)
            if time.perf_counter() > deadline:
                return best
    finally:
        gc.enable()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--acls", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    auth, questions = build(args.acls)
    authorize = auth.authorize
    answers = [authorize(*q) for q in questions]
    floor_dict = {q: a for q, a in zip(questions, answers)}

    def floor():
        get = floor_dict.get
        for p, h, o, t, n in questions:
            get((p, h, o, t, n))

    def warm():
        for p, h, o, t, n in questions:
            authorize(p, h, o, t, n)

    decide = auth._decide

    def cold():
        for p, h, o, t, n in questions:
            decide(p, h, o, t, n)

    assert [decide(*q) for q in questions] == answers
    figures = {"floor": timed(floor, args.seconds), "warm": timed(warm, args.seconds),
               "cold": timed(cold, args.seconds)}
    for case, ns in figures.items():
        print(json.dumps({"case": case, "ns_per_check": round(ns, 1), "acls": args.acls + 1}))
    print(f"warm check: {figures['warm']:.0f} ns ({figures['warm'] / figures['floor']:.2f}x a dict lookup), "
          f"cold decision: {figures['cold']:.0f} ns, over {args.acls + 1} ACLs; "
          f"{sum(answers)} of {len(answers)} questions allowed")
    for topics in (1, 10):
        per_request, floor_request = request_figures(auth, topics, args.seconds)
        print(json.dumps({"case": f"request-{topics}", "ns_per_request": round(per_request, 1),
                          "floor_ns_per_request": round(floor_request, 1), "topics": topics}))
        print(f"a request of {topics} topic(s): {per_request:.0f} ns of authorization "
              f"({per_request / floor_request:.2f}x {topics} dict lookup(s) of the full question)")
    return 0


def request_figures(auth: AclAuthorizer, topics: int, seconds: float) -> tuple[float, float]:
    """ns per request: the handlers' checks (1,000 requests from 20 connections, warm) and the floor."""
    helper = AuthHelper(auth)
    requests = []
    for q in range(1000):
        connection = Connection(KafkaPrincipal("User", f"user{q % 20}"), "10.0.0.1")
        requests.append((Request(connection), [f"topic-{(q * 7 + t) % 2000}" for t in range(topics)]))
    authorize = helper.authorize
    floor_dict = {}
    for request, names in requests:
        for n in names:
            floor_dict[(request.connection.principal, request.connection.host, AclOperation.WRITE,
                        ResourceType.TOPIC, n)] = authorize(request, WRITE, TOPIC, n)

    def checks():
        for request, names in requests:
            for n in names:
                authorize(request, WRITE, TOPIC, n)

    def floor():
        get = floor_dict.get
        for request, names in requests:
            c = request.connection
            for n in names:
                get((c.principal, c.host, AclOperation.WRITE, ResourceType.TOPIC, n))
    return timed(checks, seconds), timed(floor, seconds)


if __name__ == "__main__":
    sys.exit(main())
