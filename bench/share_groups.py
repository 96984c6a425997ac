"""A share group (KIP-932) against a classic consumer group reading the same topic, side by side on one broker.

One broker, a six-partition topic of `--records` 1 KiB records written once (confluent-kafka, acks=all).
Each round, every contender reads the whole topic with a new group of three Java 4.x consumers (one JVM,
a thread each; bench/java/ConsumeAll.java, compiled into .cache like the interop tests' Java peers):

- share-implicit: KafkaShareConsumers, share.acknowledgement.mode=implicit (each poll accepts the last);
- share-explicit: KafkaShareConsumers acknowledging every record ACCEPT (sent with the next ShareFetch);
- classic: KafkaConsumers, group.protocol=classic, auto-commit.

The share groups are set to share.auto.offset.reset=earliest (the GROUP config resource) first. The order
of the contenders rotates from round to round so the shared machine's noise falls on each alike. MB/s is
timed from the first record a group receives to its last distinct one (the group's join is apart:
join_s). The broker's CPU (utime + stime from /proc/<pid>/stat) is read before the JVM starts and after
it closes its consumers (their last acknowledgements or commits included): for a share group that is
per acknowledged record (every record is accepted), for the classic group per consumed record.

Each side must see every record exactly once (no lock expires at the default 30 s
share.record.lock.duration.ms): the consumers count distinct offsets per partition and every record
that came again, and keep polling `--linger-ms` after the last one. A missing or repeated record is
printed and makes the exit status 1; it is not retried.

    python bench/share_groups.py [--records 100000] [--rounds 5] [--only share-implicit,classic] [--quick] \\
        [--data-dir DIR]

Prints one JSON line per round and contender, then the medians and the ratios share/classic.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "interop"))

RECORD = 1024
PARTITIONS = 6
MEMBERS = 3
CONTENDERS = ("share-implicit", "share-explicit", "classic")
JAVA_SRC = ROOT / "bench" / "java"
CLASS_DIR = ROOT / ".cache" / "bench-java4-classes"


def classpath() -> str | None:
    """bench/java/*.java compiled against the Java client 4.x (when stale), or None without the jars or javac."""
    import peers
    return peers.java4_classpath(JAVA_SRC, CLASS_DIR)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")     # utime + stime


def write_topic(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 21})
    value = os.urandom(RECORD)
    for i in range(records):
        p.produce(topic, value, partition=i % PARTITIONS)
        if i % 10000 == 9999:
            p.poll(0)
    assert p.flush(120) == 0, "the producer could not deliver every record"


def read_once(cp: str, broker, topic: str, kind: str, records: int, linger_ms: int, timeout_s: float) -> dict:
    """One new group of MEMBERS consumers reads the topic; the consumers' summary and the broker's CPU."""
    group = f"bench-{kind}-{time.time_ns()}"
    pid = broker.proc.pid
    cpu0 = cpu_seconds(pid)
    errors = tempfile.TemporaryFile("w+")        # SLF4J's no-logger notice, or the JVM's trouble
    proc = subprocess.Popen(["java", "-Xmx512m", "-cp", cp, "ConsumeAll", broker.bootstrap, topic, group, kind,
                             str(MEMBERS), str(records), str(linger_ms), str(int(timeout_s * 1000))],
                            stdout=subprocess.PIPE, stderr=errors, text=True)
    lines: dict[str, dict] = {}
    cpu_consumed = None
    try:
        for line in proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                lines[event["event"]] = event
                if event["event"] == "consumed":
                    cpu_consumed = cpu_seconds(pid)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    cpu1 = cpu_seconds(pid)
    errors.seek(0)
    stderr = errors.read()
    errors.close()
    if "summary" not in lines:
        raise RuntimeError(f"{kind}: the consumers ended without a summary (exit {proc.returncode}): {lines}\n"
                           f"{stderr[-3000:]}")
    s, c = lines["summary"], lines["consumed"]
    mib = s["bytes"] / (1 << 20)
    expected = {str(p): records // PARTITIONS + (p < records % PARTITIONS) for p in range(PARTITIONS)}
    out = {"contender": kind, "records": records, "complete": c["complete"],
           "mb_per_s": round(mib / c["seconds"], 2) if c["seconds"] else 0.0,
           "seconds": round(c["seconds"], 3), "join_s": round(c["join_s"], 3),
           "broker_cpu_s": round(cpu1 - cpu0, 3),
           "broker_cpu_s_to_last_record": round(cpu_consumed - cpu0, 3) if cpu_consumed is not None else None,
           "broker_cpu_us_per_record": round((cpu1 - cpu0) / records * 1e6, 2),
           "delivered": s["delivered"], "distinct": s["distinct"], "duplicates": s["duplicates"],
           "redelivered": s["redelivered"], "per_member": s["per_member"], "failure": s["failure"], "group": group}
    got = {p: v["distinct"] for p, v in s["partitions"].items()}
    holes = {p: v["first_missing"] for p, v in s["partitions"].items() if v["first_missing"] != v["distinct"]}
    out["once"] = (got == expected and not holes and s["duplicates"] == 0 and s["delivered"] == records
                   and s["failure"] is None)
    if not out["once"]:
        out["problem"] = {"expected_per_partition": expected, "distinct_per_partition": got,
                          "first_missing_offset": holes, "stderr": stderr[-2000:]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=",".join(CONTENDERS),
                    help="comma-separated contenders (classic is the base of the ratios)")
    ap.add_argument("--linger-ms", type=int, default=1000,
                    help="how long the consumers keep polling after the last record (a late duplicate shows)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a group may take to read the topic")
    ap.add_argument("--quick", action="store_true", help="a tenth of the records, at most 3 rounds")
    ap.add_argument("--data-dir", default=None, help="keep the broker's data and broker.log here (to look into a "
                    "delivery problem afterwards)")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.rounds = max(args.records // 10, PARTITIONS), min(args.rounds, 3)
    contenders = [k for k in CONTENDERS if k in args.only.split(",")]
    if not contenders or set(args.only.split(",")) - set(CONTENDERS):
        ap.error(f"--only takes some of {', '.join(CONTENDERS)}")
    cp = classpath()
    if cp is None:
        print("the Java client 4.x jars (.cache/jvm/java4, interop/maven.sh) or javac are missing", file=sys.stderr)
        return 2

    from kafka_compat.testing import EmbeddedBroker
    settings = {"num.partitions": PARTITIONS, "log.flush.interval.messages": "9223372036854775807",
                "offsets.topic.num.partitions": 5, "share.coordinator.state.topic.num.partitions": 5}
    results: dict[str, list[dict]] = {k: [] for k in contenders}
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(settings, data_dir=args.data_dir))
        topic = f"share-bench-{time.time_ns()}"
        write_topic(broker.bootstrap, topic, args.records)
        for r in range(args.rounds):
            shift = r % len(contenders)
            for kind in contenders[shift:] + contenders[:shift]:
                out = read_once(cp, broker, topic, kind, args.records, args.linger_ms, args.timeout)
                out["round"] = r + 1
                print(json.dumps(out), flush=True)
                results[kind].append(out)
    mib = args.records * RECORD / (1 << 20)
    print(f"\n{args.records} records x {RECORD} B ({mib:.1f} MiB), {PARTITIONS} partitions, {MEMBERS} members "
          f"per group, {args.rounds} round(s)")
    med = {k: statistics.median(o["mb_per_s"] for o in rs) for k, rs in results.items()}
    cpu = {k: statistics.median(o["broker_cpu_us_per_record"] for o in rs) for k, rs in results.items()}
    for k in contenders:
        per = "acknowledged" if k.startswith("share") else "consumed"
        print(f"  {k:15s} {med[k]:8.1f} MB/s, broker CPU {cpu[k]:7.2f} us per {per} record")
    summary: dict = {"median_mb_per_s": med, "median_broker_cpu_us_per_record": cpu}
    if "classic" in contenders:
        for k in contenders:
            if k == "classic":
                continue
            ratio = med[k] / med["classic"] if med["classic"] else float("inf")
            cpu_ratio = cpu[k] / cpu["classic"] if cpu["classic"] else float("inf")
            print(f"  ratio {k}/classic: MB/s {ratio:.2f} (target at least 0.70), broker CPU per record "
                  f"{cpu_ratio:.2f}")
            summary[f"ratio_mb_per_s {k}/classic"] = round(ratio, 3)
            summary[f"ratio_cpu_per_record {k}/classic"] = round(cpu_ratio, 3)
    bad = [o for rs in results.values() for o in rs if not o["once"]]
    summary["every_record_once"] = not bad
    print(json.dumps(summary))
    for o in bad:
        print(f"DELIVERY PROBLEM: round {o['round']} {o['contender']} ({o['group']}): delivered {o['delivered']}, "
              f"distinct {o['distinct']}, duplicates {o['duplicates']}, redelivered {o['redelivered']}, "
              f"failure {o['failure']}: {json.dumps(o['problem'])}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
