"""What TLS, SASL and ACLs cost: 1 KiB records produced and consumed over PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512) listeners of one broker, reported as ratios to PLAINTEXT; and over PLAINTEXT on two
twin brokers, one of them running the ACL authorizer (ACL-ON against ACL-OFF), in the same run.

    python bench/security.py [--count 100000] [--rounds 3]

Each round produces `--count` 1 KiB records (acks=1, no compression, confluent-kafka with
bench/workloads.py's settings) to a fresh topic over each listener, then reads one topic back over
each listener in a fresh consumer group. The consumed topic was just written, so it sits in the
page cache: the consume figures are what serving a fetch costs. Over PLAINTEXT record bytes go from
the segment file to the socket with sendfile; TLS must encrypt them in user space, so they are
read (pread) and written through the TLS transport instead. The broker's CPU seconds per MiB are
measured beside the throughput. The twins differ only in the authorizer: ACL-ON holds `--acls`
ACLs (other principals' literal topics, and the prefixed ones that let User:ANONYMOUS use the
benchmark's topics and groups), so its figures include every authorization a produce and a fetch
make; twins, because brokers that have written different amounts do not compare. The order of the
cases turns each round. Medians over rounds, one JSON line per case, then the ratios. No figure is asserted anywhere (tests only run it tiny).
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography.x509.oid import NameOID  # noqa: E402
from tls_certs import issue, make_ca, name  # noqa: E402

from bench import workloads  # noqa: E402
from bench.contenders import Sampler, wait_quiet  # noqa: E402
from kafka_compat.testing import EmbeddedBroker  # noqa: E402

LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL", "ADMIN": "SASL_PLAINTEXT"}
MEASURED = ("PLAINTEXT", "SSL", "SASL_SSL", "ACL-OFF", "ACL-ON")
RATIOS = {"SSL": "PLAINTEXT", "SASL_SSL": "PLAINTEXT", "ACL-ON": "ACL-OFF"}     # case: its baseline
SIZE = 1024
MIB = 1 << 20
USER, PASSWORD = "bench", secrets.token_hex(8)
ADMIN_PASSWORD = secrets.token_hex(8)


def tls_files(directory: str) -> tuple[str, str]:
    """(CA file, broker PEM key store) made here, for loopback only."""
    ca = make_ca()
    server = issue(ca, name((NameOID.COMMON_NAME, "localhost")), server=True)
    ca_path, keystore = os.path.join(directory, "ca.pem"), os.path.join(directory, "broker.pem")
    with open(ca_path, "w") as f:
        f.write(ca.cert_pem)
    with open(keystore, "w") as f:
        f.write(server.key_pem() + server.cert_pem)
    return ca_path, keystore


def start(directory: str) -> tuple[EmbeddedBroker, dict[str, dict]]:
    ca, keystore = tls_files(directory)
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="{ADMIN_PASSWORD}";'
    broker = EmbeddedBroker({"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore,
                             "listener.name.admin.sasl.enabled.mechanisms": "PLAIN",
                             "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                             "listener.name.admin.plain.sasl.jaas.config": jaas, "num.partitions": 1,
                             "group.initial.rebalance.delay.ms": 0}, listeners=LISTENERS).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_for("ADMIN"), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())]).values():
        f.result(30)
    clients = {
        "PLAINTEXT": {},
        "SSL": {"security.protocol": "SSL", "ssl.ca.location": ca},
        "SASL_SSL": {"security.protocol": "SASL_SSL", "ssl.ca.location": ca, "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": USER, "sasl.password": PASSWORD},
    }
    return broker, clients


def start_twin(directory: str, acls: int | None) -> EmbeddedBroker:
    """A PLAINTEXT broker; with `acls`, running the ACL authorizer: User:ANONYMOUS may use the
    benchmark's topics (prefixed ACLs) and groups, and `acls` literal topic ACLs of other principals
    sit beside them."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    settings = {"listener.name.admin.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.admin.plain.sasl.jaas.config": "org.apache.kafka.common.security."
                f'plain.PlainLoginModule required user_admin="{ADMIN_PASSWORD}";',
                "num.partitions": 1, "group.initial.rebalance.delay.ms": 0}
    if acls is not None:
        settings.update({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                         "super.users": "User:admin"})
    broker = EmbeddedBroker(settings, data_dir=directory,
                            listeners={"PLAINTEXT": "PLAINTEXT", "ADMIN": "SASL_PLAINTEXT"}).start()
    if acls is None:
        return broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_for("ADMIN"), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD})
    allow, topic, lit, pre = (AclPermissionType.ALLOW, ResourceType.TOPIC, ResourcePatternType.LITERAL,
                              ResourcePatternType.PREFIXED)
    bindings = [AclBinding(topic, prefix, pre, "User:ANONYMOUS", "*", AclOperation.ALL, allow)
                for prefix in ("produced-", "fetched-")]
    bindings.append(AclBinding(ResourceType.GROUP, "g-", pre, "User:ANONYMOUS", "*", AclOperation.READ, allow))
    bindings += [AclBinding(topic, f"other-{i}", lit, f"User:u{i % 50}", "*", AclOperation.WRITE, allow)
                 for i in range(acls)]
    for f in admin.create_acls(bindings).values():
        f.result(60)
    return broker


def measure(broker, work) -> dict:
    with Sampler(broker.proc.pid) as sampler:
        result = work()
    return {**result, "broker_cpu_s": sampler.cpu_seconds}


def ratio(this: float, base: float) -> float | None:
    """None when the base is too small to measure (a tiny --count)."""
    return round(this / base, 2) if base else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--acls", type=int, default=2000)
    args = ap.parse_args()
    mib = args.count * SIZE / MIB
    source = workloads.values(args.count, SIZE)
    figures: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        broker, clients = start(tmp)
        twins = {"ACL-OFF": start_twin(os.path.join(tmp, "acl-off"), None),
                 "ACL-ON": start_twin(os.path.join(tmp, "acl-on"), args.acls)}
        # each case: the broker it measures, and the address its client uses
        where = {listener: (broker, broker.bootstrap_for(listener)) for listener in MEASURED[:3]}
        for case, twin in twins.items():
            where[case] = (twin, twin.bootstrap)
            clients[case] = {}
        try:
            for r in range(args.rounds):
                order = MEASURED[r % len(MEASURED):] + MEASURED[:r % len(MEASURED)]
                fetched = f"fetched-{r}"
                for b in (broker, *twins.values()):
                    workloads.create_topic(b.bootstrap, fetched, 1)
                    workloads.produce(b.bootstrap, fetched, source, acks=1, compression="none")
                for listener in order:
                    b, bootstrap = where[listener]
                    topic = f"produced-{listener.lower()}-{r}"
                    workloads.create_topic(b.bootstrap, topic, 1)
                    wait_quiet(0.2)
                    out = measure(b, lambda: workloads.produce(bootstrap, topic, source, acks=1, compression="none",
                                                              client=clients[listener]))
                    figures.setdefault(("produce", listener), []).append(out)
                for listener in order:
                    b, bootstrap = where[listener]
                    wait_quiet(0.2)
                    out = measure(b, lambda: workloads.consume(bootstrap, fetched, args.count,
                                                              f"g-{listener}-{r}-{time.time()}",
                                                              client=clients[listener]))
                    if out["missing"] or out["duplicates"] or not out["checksum_ok"]:
                        raise RuntimeError(f"consume over {listener} lost or repeated records: {out}")
                    figures.setdefault(("consume", listener), []).append(out)
        finally:
            for twin in twins.values():
                twin.close()
            broker.close()
    summary = {}
    for (kind, listener), runs in figures.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        cpu = statistics.median(r["broker_cpu_s"] for r in runs)
        summary[(kind, listener)] = line = {
            "case": f"{kind}-1KiB-{listener}", "records": args.count, "mb_per_s": round(mib / seconds, 1),
            "broker_cpu_s_per_mib": round(cpu / mib, 4), "client_busiest_share": round(statistics.median(
                r["client_busiest_share"] for r in runs), 2)}
        print(json.dumps(line))
    for kind in ("produce", "consume"):
        for case, baseline in RATIOS.items():
            this, base = summary[(kind, case)], summary[(kind, baseline)]
            print(json.dumps({"case": f"{kind}-1KiB-{case}-vs-{baseline}",
                              "throughput_ratio": round(this["mb_per_s"] / base["mb_per_s"], 2),
                              "broker_cpu_per_mib_ratio": ratio(this["broker_cpu_s_per_mib"],
                                                                base["broker_cpu_s_per_mib"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
