"""What securing the inter-broker listener costs a replicating cluster.

    python bench/cluster_security.py [--records N] [--rounds R]

Two three-broker ZooKeeper clusters, one after the other in each round (the order alternating between
rounds), take the same N x 1 KiB records from confluent-kafka with acks=all on a topic of 4 partitions,
replication factor 3 (min.insync.replicas=2). Clients use a PLAINTEXT listener on both, so only the
brokers' own traffic differs: replica fetches, the controller's requests and AlterPartition go over

  plaintext   an INTERNAL listener on PLAINTEXT
  sasl_ssl    an INTERNAL listener on SASL_SSL, the brokers logged in with SCRAM-SHA-512 (their user
              written into ZooKeeper first, as `kafka-compat configs --zookeeper` does)

Measured: MB/s produced and the three brokers' CPU seconds per GB produced; the JSON line gives the
medians over the rounds and sasl_ssl / plaintext ratios. Timing never runs in CI
(tests/test_bench_scripts.py only checks that a tiny run completes).
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from bench import workloads  # noqa: E402
from bench.cluster import (  # noqa: E402
    CLUSTER,
    KIB,
    PARTITIONS,
    WAIT,
    create_when_ready,
    log,
    medians,
    timed_produce,
    wait_for_isr,
)
from bench.security import tls_files  # noqa: E402
from kafka_compat.security.config_command import alter_scram_user  # noqa: E402
from kafka_compat.testing import EmbeddedCluster, EmbeddedZooKeeper  # noqa: E402

MECHANISM = "SCRAM-SHA-512"
BROKER_PASSWORD = secrets.token_hex(8)


def settings(secured: bool, directory: str) -> tuple[dict, dict]:
    """(listeners, broker properties) of one side."""
    props = {**CLUSTER, "inter.broker.listener.name": "INTERNAL", "num.partitions": PARTITIONS}
    if not secured:
        return {"CLIENT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"}, props
    ca, keystore = tls_files(directory)
    return {"CLIENT": "PLAINTEXT", "INTERNAL": "SASL_SSL"}, {
        **props, "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": ca,
        "sasl.enabled.mechanisms": MECHANISM, "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            f'password="{BROKER_PASSWORD}";'}


def one_side(secured: bool, values: list[bytes]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-cluster-security-") as directory:
        listeners, props = settings(secured, directory)
        zookeeper = EmbeddedZooKeeper().start()
        cluster = EmbeddedCluster(3, props, zookeeper=zookeeper, listeners=listeners)
        try:
            if secured:
                alter_scram_user(cluster.zookeeper_connect, "broker", {MECHANISM: (BROKER_PASSWORD, 4096)})
            cluster.start(WAIT)
            cluster.wait_for_controller(WAIT)
            create_when_ready(cluster.bootstrap, "bench", partitions=PARTITIONS, replication_factor=3)
            wait_for_isr(cluster, "bench", PARTITIONS, 3)
            return timed_produce(cluster.bootstrap, "bench", values, "all", [b.proc.pid for b in cluster.brokers])
        finally:
            cluster.close()
            zookeeper.close()


def round_(values: list[bytes], rnd: int) -> dict:
    out = {}
    for side in (("plaintext", "sasl_ssl") if rnd % 2 == 0 else ("sasl_ssl", "plaintext")):
        out[side] = one_side(side == "sasl_ssl", values)
    for key in ("mb_per_s", "cpu_s_per_gb"):      # a tiny run may measure no CPU tick on one side
        a, b = out["sasl_ssl"][key], out["plaintext"][key]
        out[f"ratio_{key}"] = a / b if b else float("nan")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="1 KiB records per produce run (default 200,000)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    values = workloads.values(args.records, KIB)
    rounds = []
    for r in range(args.rounds):
        rounds.append(round_(values, r))
        log(f"round {r + 1}: {json.dumps(rounds[-1])} (load average {os.getloadavg()[0]:.2f})")
    print(json.dumps({"scenario": "inter_broker_security", "records": args.records, "record_bytes": KIB,
                      "load_average": round(os.getloadavg()[0], 2), **medians(rounds)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
