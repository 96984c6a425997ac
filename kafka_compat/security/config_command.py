"""`kafka-compat configs --zookeeper ...`: SCRAM credentials written straight to ZooKeeper, as Kafka's
`kafka-configs.sh --zookeeper` does for the one case it still allows there: creating the users the
brokers themselves log in with (the inter-broker user) before any broker runs, when no broker could
yet take AlterUserScramCredentials.

    kafka-compat configs --zookeeper localhost:2181/kafka --alter --entity-type users \\
        --entity-name broker --add-config 'SCRAM-SHA-512=[iterations=8192,password=broker-secret]'

The credential lands in /config/users/<user> with a /config/changes notification (ZkCredentialStore),
so running brokers see it too.
"""
from __future__ import annotations

import argparse
import re

from ..protocol.sasl import ScramMechanism
from ..zk.kafka_zk_client import KafkaZkClient
from .scram import DEFAULT_ITERATIONS, credential_from_password
from .zk_stores import ZkCredentialStore

_ENTRY = re.compile(r"\s*([^=,\[\]]+)=(\[[^\]]*\]|[^,]*)\s*(?:,|$)")


def parse_add_config(text: str) -> dict[str, tuple[str, int]]:
    """'SCRAM-SHA-512=[iterations=8192,password=p],SCRAM-SHA-256=[password=p]' -> {mechanism: (password,
    iterations)}; ValueError names what is wrong (a key that is not a SCRAM mechanism, no password...)."""
    out: dict[str, tuple[str, int]] = {}
    pos = 0
    while pos < len(text):
        m = _ENTRY.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"cannot parse --add-config at {text[pos:]!r}: expected KEY=[k=v,...]")
        pos = m.end()
        name, value = m.group(1).strip(), m.group(2).strip()
        mechanism = ScramMechanism.from_name(name)
        if mechanism is None:
            raise ValueError(f"{name}: only SCRAM credentials (SCRAM-SHA-256, SCRAM-SHA-512) can be set through "
                             "ZooKeeper; use a broker (--bootstrap-server) for anything else")
        if not (value.startswith("[") and value.endswith("]")):
            raise ValueError(f"{name}: expected {name}=[password=...,iterations=...], not {value!r}")
        options = dict(part.split("=", 1) if "=" in part else (part, None) for part in value[1:-1].split(","))
        unknown = sorted(k for k, v in options.items() if k not in ("password", "iterations") or v is None)
        if unknown:
            raise ValueError(f"{name}: only password=... and iterations=... go in the brackets, not {unknown}")
        if "password" not in options:
            raise ValueError(f"{name}: a password is needed, e.g. {name}=[password=secret]")
        iterations = options.get("iterations", str(DEFAULT_ITERATIONS))
        if not iterations.isdigit():
            raise ValueError(f"{name}: iterations must be a number, not {iterations!r}")
        iterations = int(iterations)
        if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
            raise ValueError(f"{name}: iterations must be between {mechanism.min_iterations} and "
                             f"{mechanism.max_iterations}")
        out[mechanism.mechanism_name] = (options["password"], iterations)
    return out


def alter_scram_user(zookeeper_connect: str, user: str, add: dict[str, tuple[str, int]],
                     delete: list[str] = ()) -> None:
    """Delete then add the user's credentials in ZooKeeper (blocking)."""
    for name in delete:
        if ScramMechanism.from_name(name) is None:
            raise ValueError(f"{name}: only SCRAM credentials can be deleted through ZooKeeper")
    zk = KafkaZkClient(zookeeper_connect).start()
    try:
        store = ZkCredentialStore(zk)
        store.alter(upserts=[(user, m, credential_from_password(m, p, i)) for m, (p, i) in add.items()],
                    deletions=[(user, m) for m in delete])
    finally:
        zk.close()


def add_parser(sub) -> None:
    p = sub.add_parser("configs", help="add or delete SCRAM users in ZooKeeper before brokers run "
                                       "(kafka-configs.sh --zookeeper)")
    p.add_argument("--zookeeper", required=True, help="ZooKeeper connect string with the cluster's chroot")
    p.add_argument("--alter", action="store_true", required=True)
    p.add_argument("--entity-type", required=True, choices=["users"])
    p.add_argument("--entity-name", required=True)
    p.add_argument("--add-config", default="", help="'SCRAM-SHA-512=[iterations=N,password=P],...'")
    p.add_argument("--delete-config", default="", help="mechanisms to delete, comma-separated")


def run(args: argparse.Namespace) -> None:
    """ValueError on bad arguments; the caller prints it."""
    add = parse_add_config(args.add_config)
    delete = [m.strip() for m in args.delete_config.split(",") if m.strip()]
    if not add and not delete:
        raise ValueError("nothing to do: give --add-config or --delete-config")
    alter_scram_user(args.zookeeper, args.entity_name, add, delete)
    print(f"Completed updating config for user {args.entity_name}.")
