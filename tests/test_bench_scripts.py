"""bench/codec.py, bench/storage.py, bench/security.py, bench/transactions.py, bench/share_groups.py, bench/cluster.py and
bench/cluster_security.py, bench/replication_floor.py and bench/scrape_cost.py still run, floors included.

No figure is asserted (timing belongs to the benchmarks); these prove the scripts
work and that their reference loops do the same work as the code they are set against.
"""
import json
import os
import subprocess
import sys

import pytest

from kafka_compat.testing import zookeeper_missing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_codec_bench_with_floor():
    # exit status 1 only says a 3x target is missed; the script asserts the floor decoder
    # decodes the frame to the same objects as the generated one before timing it
    out = subprocess.run([sys.executable, "bench/codec.py", "--seconds", "0.05", "--floor"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    cases = {d["case"]: d for d in _json_lines(out.stdout)}
    assert {"decode Produce v9, 10 x 16 KiB", "floor decode Produce v9"} <= set(cases)
    assert cases["floor decode Produce v9"]["floor_us"] > 0
    assert "(no copy): True" in out.stdout


def test_codec_floor_decoder_refuses_other_shapes():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import codec
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    from kafka_compat.protocol.messages.produce import ProduceRequest
    floor = codec.floor_produce_decoder()
    small = ProduceRequest(acks=1, timeout_ms=1, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"x" * 10)])]).encode(9)
    try:
        floor(small)
    except NotImplementedError:
        pass
    else:
        raise AssertionError("a 1-byte length varint was decoded by a decoder written for 3-byte ones")


def test_storage_bench_with_floor(tmp_path):
    out = subprocess.run([sys.executable, "bench/storage.py", "--quick", "--floor", "--spread", "--dir", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if "floor loop:" in line]
    assert [r.split()[0] + r.split()[1] for r in rows] == ["1MiB", "16KiB", "1KiB"]
    assert "Recovery of a" in out.stdout
    assert "    4 files x 256 KiB writes" in out.stdout and " 1000 files x   1 KiB writes" in out.stdout


def test_replication_floor_moves_every_byte_to_both_followers(tmp_path):
    """bench/replication_floor.py's stand-ins: the followers' logs equal the leader's, each stand-in counted."""
    out = subprocess.run([sys.executable, "bench/replication_floor.py", "--mib", "4", "--frame-kib", "64",
                          "--rounds", "1", "--dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    (floor,) = _json_lines(out.stdout)
    assert floor["scenario"] == "replication-floor" and floor["followers_match_leader"] is True
    runs = [json.loads(line.split(": ", 1)[1]) for line in out.stderr.splitlines() if line.startswith("round ")]
    assert sorted(len(r["per_broker_cpu_s_per_gb"]) for r in runs) == [1, 3]
    assert os.listdir(tmp_path) == []                   # the stand-ins' logs are gone


def test_scrape_cost_renders_what_prometheus_client_renders():
    """bench/scrape_cost.py exits 1 unless the library renders its snapshot's families to the same bytes."""
    out = subprocess.run([sys.executable, "bench/scrape_cost.py", "--rounds", "1", "--calls", "1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "2565 lines" in out.stdout and "ratio exposition/prometheus_client" in out.stdout


def test_fetch_sessions_bench_measures_both_sides():
    out = subprocess.run([sys.executable, "bench/fetch_sessions.py", "--rounds", "1", "--partitions", "8",
                          "--seconds", "1", "--rate", "50"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "ratio sessions/none CPU per fetch" in out.stdout and "round 1: sessions" in out.stdout


def test_cluster_bench_scale_scenario():
    """bench/cluster.py's plumbing: one broker against a two-broker cluster (a real ZooKeeper), a tiny run."""
    if zookeeper_missing():
        pytest.skip(zookeeper_missing())
    out = subprocess.run([sys.executable, "bench/cluster.py", "--only", "scale", "--records", "2000", "--rounds", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (scale,) = _json_lines(out.stdout)
    assert scale["scenario"] == "scale" and scale["records"] == 2000
    for side in ("one_broker", "cluster"):
        assert scale[side]["mb_per_s"] > 0 and scale[side]["client_busiest_thread"]
        # the brokers' CPU split into their own (Python) and the kernel's share, adding up to the whole
        assert scale[side]["user_s_per_gb"] + scale[side]["sys_s_per_gb"] == pytest.approx(
            scale[side]["cpu_s_per_gb"], abs=1e-3)


def test_cluster_security_bench_runs_both_sides():
    """bench/cluster_security.py's plumbing: a PLAINTEXT and a SASL_SSL inter-broker cluster each take the
    records (acks=all, so every side's replication worked), and the ratio line is there."""
    if zookeeper_missing():
        pytest.skip(zookeeper_missing())
    out = subprocess.run([sys.executable, "bench/cluster_security.py", "--records", "2000", "--rounds", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (row,) = _json_lines(out.stdout)
    assert row["scenario"] == "inter_broker_security" and row["records"] == 2000
    assert row["plaintext"]["mb_per_s"] > 0 and row["sasl_ssl"]["mb_per_s"] > 0 and row["ratio_mb_per_s"] > 0


def test_security_bench_runs_every_case():
    """Tiny: the three brokers start, every case produces and consumes (the script checks each consume
    is complete), and each compared case gets its ratio line."""
    out = subprocess.run([sys.executable, "bench/security.py", "--count", "200", "--rounds", "1", "--acls", "20"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    cases = {d["case"] for d in _json_lines(out.stdout)}
    assert {f"{kind}-1KiB-{case}{suffix}" for kind in ("produce", "consume")
            for case, suffix in (("PLAINTEXT", ""), ("ACL-OFF", ""), ("SSL", ""), ("SSL", "-vs-PLAINTEXT"),
                                 ("SASL_SSL", "-vs-PLAINTEXT"), ("ACL-ON", "-vs-ACL-OFF"))} <= cases


def test_transactions_bench_writes_what_it_times():
    out = subprocess.run([sys.executable, "bench/transactions.py", "--records", "2000", "--rounds", "1",
                          "--per-txn", "500"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    # 2,000 records and a warm-up record each; the transactional side also holds one COMMIT marker per
    # partition of each of its 4 + 1 transactions (4 partitions, the warm-up's 1)
    assert "records in the log: {'idempotent': 2001, 'transactional': 2018}" in out.stdout
    assert "ratio" in out.stdout


def test_cluster_bench_sigterm_failover_scenario(tmp_path):
    """bench/cluster.py's failover plumbing: one SIGTERM trial on three brokers, the producer first delivering to
    every broker; the gap is measured and no record failed; --keep-logs keeps the brokers' logs of a trial over
    the threshold (here any), the controlled shutdown in them."""
    if zookeeper_missing():
        pytest.skip(zookeeper_missing())
    out = subprocess.run([sys.executable, "bench/cluster.py", "--only", "failover", "--failover-kinds", "sigterm",
                          "--trials", "1", "--keep-logs", str(tmp_path), "--keep-logs-over", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (failover,) = _json_lines(out.stdout)
    assert failover["scenario"] == "failover" and len(failover["sigterm_gap_s"]) == 1
    assert "sigkill_s" not in failover and failover["sigterm_gap_s"][0] > 0
    assert sorted(os.listdir(tmp_path)) == [f"sigterm-trial1-b{i}.log" for i in range(3)]
    kept = "".join((tmp_path / f"sigterm-trial1-b{i}.log").read_text() for i in range(3))
    assert "controlled shutdown succeeded" in kept


def test_cluster_bench_against_kafka():
    """bench/cluster.py --only kafka: our three brokers (a real ZooKeeper) and three Apache Kafka 4.x nodes each
    take acks=all to replication factor 3 and an e2e trickle, and the kafka-compat/Kafka ratios are there."""
    if zookeeper_missing():
        pytest.skip(zookeeper_missing())
    sys.path.insert(0, os.path.join(ROOT, "interop"))
    import reference

    if not reference.available():
        pytest.skip("Apache Kafka 4.x is not resolved, or no java (bash interop/maven.sh kafka)")
    out = subprocess.run([sys.executable, "bench/cluster.py", "--only", "kafka", "--records", "2000", "--rounds", "1",
                          "--e2e-seconds", "1"], cwd=ROOT, capture_output=True, text=True, timeout=420)
    assert out.returncode == 0, out.stderr[-3000:]
    (row,) = _json_lines(out.stdout)
    assert row["scenario"] == "kafka" and row["records"] == 2000
    for side in ("kafka_compat", "kafka"):
        assert row[side]["mb_per_s"] > 0 and row[side]["startup_s"] > 0
        assert row[side]["e2e"]["received"] == 1000 and row[side]["e2e"]["missing"] == 0
    assert row["ratio_mb_per_s"] > 0 and row["ratio_e2e_p99"] > 0 and row["ratio_startup_s"] > 0


def test_share_groups_bench_reads_every_record_once_on_each_side(tmp_path):
    """bench/share_groups.py, tiny: a share group of each acknowledgement mode and a classic group read the
    topic (three Java 4.x consumers each), each record once; the script exits 1 on a missing or repeated one."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import share_groups
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    if share_groups.classpath() is None:
        pytest.skip("the Java client 4.x jars (bash interop/maven.sh) or javac are missing")
    out = subprocess.run([sys.executable, "bench/share_groups.py", "--records", "1200", "--rounds", "2",
                          "--linger-ms", "500", "--data-dir", str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=420)
    log = tmp_path / "broker.log"
    assert out.returncode == 0, out.stdout + out.stderr[-3000:] + (log.read_text()[-3000:] if log.exists() else "")
    rows = [r for r in _json_lines(out.stdout) if "contender" in r]
    assert sorted((r["round"], r["contender"]) for r in rows) == [
        (n, k) for n in (1, 2) for k in ("classic", "share-explicit", "share-implicit")]
    for r in rows:
        assert r["once"] and r["delivered"] == r["distinct"] == 1200 and r["duplicates"] == 0, r
        assert r["redelivered"] == 0 and r["mb_per_s"] > 0 and r["broker_cpu_s"] >= 0
    # the order rotates: round 2 does not start with round 1's first contender
    assert rows[0]["contender"] != rows[3]["contender"]
    summary = _json_lines(out.stdout)[-1]
    assert summary["every_record_once"] is True
    assert {"ratio_mb_per_s share-implicit/classic", "ratio_mb_per_s share-explicit/classic",
            "ratio_cpu_per_record share-implicit/classic"} <= set(summary)
