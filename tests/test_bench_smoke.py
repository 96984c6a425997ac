"""bench/run.py still runs: one tiny produce and consume-back against our broker.

Timing is never asserted here (figures belong to the benchmark); this only
proves the benchmark's plumbing and its lost/duplicate check work.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("confluent_kafka")
pytest.importorskip("psutil")


def test_bench_help():
    out = subprocess.run([sys.executable, "bench/run.py", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and "--quick" in out.stdout


def test_bench_minimal_scenario():
    out = subprocess.run([sys.executable, "bench/run.py", "--brokers", "kafka-compat", "--rounds", "1",
                          "--scale", "0.001", "--only", "produce-1KiB-acks1-none", "consume-1KiB-acks1-none",
                          "scale-200-connections"],
                         cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = {d["scenario"]: d for d in map(json.loads, (line for line in out.stdout.splitlines()
                                                        if line.startswith("{")))}
    consumed = lines["consume-1KiB-acks1-none"]["kafka-compat"]
    assert consumed["received"] == 1000 and consumed["missing"] == 0 and consumed["duplicates"] == 0
    assert consumed["checksum_ok"] is True
    produced = lines["produce-1KiB-acks1-none"]["kafka-compat"]
    assert produced["mb_per_s"] > 0
    # which client thread set the pace: a named thread that used some CPU, reported for every kind of run
    for r in (produced, consumed, lines["scale-200-connections"]["kafka-compat"]):
        assert r["client_busiest_thread"] and r["client_busiest_share"] > 0
    startup = lines["startup"]["kafka-compat"]      # from the start to the first answered Metadata request
    assert 0 < startup["startup_s"] < 60 and startup["startup_rss_mb"] > 0 and startup["startup_cpu_s"] >= 0
    fleet = lines["scale-200-connections"]["kafka-compat"]   # 200 producers over client processes
    assert "error" not in fleet and fleet["mb_per_s"] > 0 and fleet["client_processes"] >= 1
    # the fleet's processes report their own CPU, so the client's side of the work is measured too
    assert fleet["client_cpu_s_per_gb"] > 0 and fleet["broker_cpu_wait_share"] >= 0


def test_bench_paired_metrics_on_against_off():
    """--paired: both contenders run each scenario every round, and each scenario gets its per-round ratios."""
    out = subprocess.run([sys.executable, "bench/run.py", "--paired", "--brokers", "kafka-compat,kafka-compat+metrics",
                          "--rounds", "2", "--scale", "0.001", "--only", "produce-1KiB-acks1-none",
                          "consume-1KiB-acks1-none"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = {d["scenario"]: d for d in map(json.loads, (line for line in out.stdout.splitlines()
                                                        if line.startswith("{")))}
    startup = lines.pop("startup")          # each round's start, to the first answered request
    assert startup["ratio_of"] == "kafka-compat+metrics/kafka-compat" and startup["kafka-compat"]["rounds"] == 2
    assert set(lines) == {"produce-1KiB-acks1-none", "consume-1KiB-acks1-none"}
    for line in lines.values():
        assert line["pair"] == "kafka-compat+metrics/kafka-compat" and line["rounds"] == 2
        assert line["ratio_mb_per_s_min"] <= line["ratio_mb_per_s"] <= line["ratio_mb_per_s_max"]
        assert line.get("ratio_cpu_s_per_gb_coarse", True)     # a thousand records: far below half a CPU second
    assert "round 2/2" in out.stderr and "kafka-compat+metrics" in out.stderr


def test_the_control_contender_is_the_plain_broker_under_another_name():
    """kafka-compat+control, for an A/A run: the same broker as kafka-compat (no metrics endpoint, not
    scraped), told apart only by name, so the paired report can set one against the other."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        from contenders import contender
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    plain, control = contender("kafka-compat"), contender("kafka-compat+control")
    assert (control.name, plain.name) == ("kafka-compat+control", "kafka-compat")
    assert type(control) is type(plain) and control.metrics is plain.metrics is False
    with pytest.raises(ValueError, match="unknown contender option"):
        contender("kafka-compat+other")


def allowed_cpus(pid: int) -> set[frozenset[int]]:
    """Each thread's allowed CPUs, as a set of the distinct sets."""
    out = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            out.add(frozenset(os.sched_getaffinity(int(task))))
        except (ProcessLookupError, PermissionError):
            pass
    return out


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="--pin needs two CPUs")
def test_pin_puts_every_broker_thread_on_its_cpu_and_the_clients_on_the_others():
    """--pin: a broker started through start_on runs every thread on the brokers' CPU, threads it starts
    later included; the process that started it, and the +metrics scraper, stay on the clients' CPUs."""
    import time

    sys.path.insert(0, ROOT)
    from bench.contenders import contender
    from bench.run import cpu_split, start_on

    before = os.sched_getaffinity(0)
    brokers, clients = cpu_split(True)
    assert brokers and clients and not brokers & clients and brokers | clients == before
    assert cpu_split(False) == (None, None)
    c = contender("kafka-compat+metrics")
    try:
        start_on(c, brokers, clients)
        assert os.sched_getaffinity(0) == before          # this thread is given back its CPUs
        deadline = time.monotonic() + 30
        while c.scrapes == 0:                               # the endpoint's thread has started and answered
            assert time.monotonic() < deadline, "never scraped"
            time.sleep(0.1)
        assert allowed_cpus(c.pid) == {frozenset(brokers)}
        assert os.sched_getaffinity(c._scraper.native_id) == clients
    finally:
        c.stop()


def test_three_contenders_are_reported_pairwise_against_the_first():
    """kafka-compat,kafka,tansu: kafka-compat against each of the others (ratio_of names the unsuffixed pair),
    then kafka against tansu, each with its own suffix."""
    sys.path.insert(0, ROOT)
    from bench.run import add_ratios, contender_pairs

    pairs = contender_pairs(["kafka-compat", "kafka", "tansu"])
    assert pairs == [("kafka-compat", "kafka"), ("kafka-compat", "tansu"), ("kafka", "tansu")]
    line = {"kafka-compat": {"mb_per_s": 3.0}, "kafka": {"mb_per_s": 2.0}, "tansu": {"mb_per_s": 1.0}}
    add_ratios(line, pairs, ("mb_per_s",))
    assert line["ratio_of"] == "kafka-compat/kafka" and line["ratio_mb_per_s"] == 1.5
    assert line["ratio_mb_per_s_kc_vs_tansu"] == 3.0 and line["ratio_mb_per_s_kafka_vs_tansu"] == 2.0


def test_bench_against_apache_kafka():
    """The kafka contender (interop/reference.py's KRaft node): the same produce and consume-back, its JVM's CPU
    and RSS sampled, and its start-up figure with the storage format before the JVM counted in."""
    sys.path.insert(0, os.path.join(ROOT, "interop"))
    import reference

    if not reference.available():
        pytest.skip("Apache Kafka 4.x is not resolved, or no java (bash interop/maven.sh kafka)")
    out = subprocess.run([sys.executable, "bench/run.py", "--brokers", "kafka-compat,kafka", "--rounds", "1",
                          "--scale", "0.001", "--only", "produce-1KiB-acks1-none", "consume-1KiB-acks1-none"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = {d["scenario"]: d for d in map(json.loads, (line for line in out.stdout.splitlines()
                                                        if line.startswith("{")))}
    produced, consumed = lines["produce-1KiB-acks1-none"], lines["consume-1KiB-acks1-none"]
    assert produced["ratio_of"] == "kafka-compat/kafka" and produced["ratio_mb_per_s"] > 0
    kafka = consumed["kafka"]
    assert kafka["received"] == 1000 and kafka["missing"] == 0 and kafka["checksum_ok"] is True
    assert produced["kafka"]["peak_rss_mb"] > 100 and kafka["cpu_s"] > 0      # the JVM's, not a wrapper's
    startup = lines["startup"]["kafka"]
    assert startup["startup_before_broker_s"] > 0 and startup["startup_s"] > startup["startup_before_broker_s"]
    assert "ratio_startup_s" in lines["startup"] and "Apache Kafka 4." in out.stdout
