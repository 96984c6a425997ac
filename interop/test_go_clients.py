"""The Go clients, used as libraries: franz-go (kgo and kadm), sarama and kafka-go, against one broker and a
three-broker ZooKeeper cluster.

interop/go is a Go module of ours (go.mod pins the libraries) whose one program, kafka-compat-go, runs a
scenario per subcommand and prints what it observed as JSON lines (interop/go/main.go lists them); it is
built by interop/go/build.sh into .cache/go/bin (a no-op while the sources are unchanged). Every test
asserts on those lines: the records read back with their partitions and offsets, the assignments, the
committed offsets, the admin answers.

- codecs: none, gzip, snappy, lz4 and zstd, every record read back once, at the offset its acknowledgement
  gave, in the order produced; and the log holds batches of that codec (on every replica in the cluster).
- groups: two members split the partitions (franz-go's cooperative-sticky balancer, and its KIP-848
  consumer protocol; sarama's ConsumerGroup; kafka-go's Reader with GroupID), then each record produced is
  consumed exactly once, by the member that owns its partition, and the commits end at the log end.
- transactions: franz-go's GroupTransactSession copies a topic (consume-transform-produce, every third
  transaction flushed then aborted and redone); sarama's transactional producer does the same with
  AddOffsetsToTxn. read_committed sees exactly the records of the committed transactions, in order;
  read_uncommitted sees the aborted copies too. kafka-go has no transactional producer: no such test.
- admin: kadm, sarama's ClusterAdmin and kafka-go's Client: create (and again: TOPIC_ALREADY_EXISTS),
  list, describe and alter configs (incremental and whole-set), create partitions, list offsets (earliest,
  latest, by time, max timestamp), list, describe and delete groups, delete topics.
- a broker SIGKILLed under a running acks=all producer of each client, then started again: every
  acknowledged record is in the log once, at its offset, in the order produced.
"""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import threading
import uuid
from collections import Counter
from pathlib import Path

import peers
import pytest
from cluster_support import WAIT, new_cluster, wait_for_full_isr, wait_for_metadata

from kafka_compat.testing import EmbeddedBroker, zookeeper_missing

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}     # the batch attributes' codec bits
# quick group rebalances, both protocols; small internal topics, which are created on first use
GROUPS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 5,
          "transaction.state.log.num.partitions": 5, "group.consumer.heartbeat.interval.ms": 500,
          "group.consumer.min.heartbeat.interval.ms": 100,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
VERBOSE = os.environ.get("KAFKA_COMPAT_GO_VERBOSE") == "1"     # the libraries' own logs on stderr


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# --- the program and what it prints ------------------------------------------------------------------

@pytest.fixture(scope="module")
def go():
    try:
        binary = peers.go_clients_binary()
    except subprocess.CalledProcessError as e:
        pytest.fail(f"interop/go/build.sh failed ({e.returncode}):\n{e.stdout}\n{e.stderr}")
    if binary is None:
        pytest.skip("no Go toolchain (go on PATH, $GO or /usr/local/go/bin/go): the Go clients cannot be built")
    return binary


class Run:
    """One run of kafka-compat-go: its JSON lines as dicts, its exit status and stderr."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str):
        self.args, self.returncode, self.stderr = args, returncode, stderr
        self.events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]

    def of(self, event: str, **match) -> list[dict]:
        return [e for e in self.events if e["event"] == event and all(e.get(k) == v for k, v in match.items())]

    def one(self, event: str, **match) -> dict:
        found = self.of(event, **match)
        assert len(found) == 1, f"{len(found)} {event} events matching {match}:\n{self.why()}"
        return found[0]

    def why(self) -> str:
        said = [e for e in self.events if e["event"] in ("error", "problem", "done")]
        return (f"{' '.join(self.args[1:])}\nexit {self.returncode}\n" + "\n".join(map(json.dumps, said[:30])) +
                f"\n--- stderr\n{self.stderr[-4000:]}")

    def assert_ok(self) -> "Run":
        done = self.of("done")
        assert self.returncode == 0 and done and done[-1]["ok"], self.why()
        return self


def run(go: str, scenario: str, client: str, bootstrap: str, *args: str, timeout: float = 180) -> Run:
    cmd = [go, scenario, "-client", client, "-brokers", bootstrap, *args] + (["-v"] if VERBOSE else [])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return Run(cmd, done.returncode, done.stdout, done.stderr).assert_ok()


def seq(value: str) -> int:
    """i of a value PREFIX-i (codec values carry a |padding tail)."""
    return int(value.split("|")[0].rsplit("-", 1)[1])


def by_partition(events: list[dict]) -> dict[int, list[tuple[int, str]]]:
    """{partition: [(offset, value)]} in the order the events came."""
    out: dict[int, list[tuple[int, str]]] = {}
    for e in events:
        out.setdefault(e["partition"], []).append((e["offset"], e["value"]))
    return out


def assert_read_back(acked: list[dict], read: list[dict], what: str) -> None:
    """Each acknowledged record read once at its offset, nothing else read, per partition in offset order,
    and the offsets of each partition in the order the records were produced."""
    assert len(read) == len(acked), f"{what}: {len(acked)} acknowledged, {len(read)} read"
    assert {(e["partition"], e["offset"]): e["value"] for e in read} == \
        {(e["partition"], e["offset"]): e["value"] for e in acked}, what
    for p, records in by_partition(read).items():
        offsets = [o for o, _ in records]
        assert offsets == sorted(set(offsets)), f"{what}: partition {p} read out of order or twice"
    for p, records in by_partition(acked).items():
        in_offset_order = [seq(v) for _, v in sorted(records)]
        assert in_offset_order == sorted(in_offset_order), f"{what}: partition {p} stored out of produce order"


# --- where they run -----------------------------------------------------------------------------------

class Target:
    def __init__(self, kind: str, brokers: list[EmbeddedBroker], cluster=None):
        self.kind, self.brokers, self.cluster = kind, brokers, cluster
        self.bootstrap = ",".join(b.bootstrap for b in brokers)
        self.rf = "3" if cluster else "1"

    def batch_codecs(self, topic: str, partition: int) -> dict[int, list[int]]:
        """{broker index: the codec of every batch its replica of the partition holds}, replicas with data."""
        found = {}
        for i, b in enumerate(self.brokers):
            data = b"".join(Path(f).read_bytes() for f in sorted(glob.glob(f"{b.log_dir}/{topic}-{partition}/*.log")))
            codecs, pos = [], 0
            while pos + 23 <= len(data):   # base offset 8, length 4, epoch 4, magic 1, crc 4, attributes 2
                length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
                if length <= 0 or pos + 12 + length > len(data):
                    break                   # the preallocated tail
                codecs.append(int.from_bytes(data[pos + 21:pos + 23], "big") & 7)
                pos += 12 + length
            if codecs:
                found[i] = codecs
        return found


def cluster_missing() -> str | None:
    return zookeeper_missing()


@pytest.fixture(scope="module")
def cluster():
    if cluster_missing():
        pytest.skip(cluster_missing())
    with new_cluster(**GROUPS) as c:
        yield c


@pytest.fixture(scope="module", params=["broker", "cluster"])
def target(request, tmp_path_factory):
    """One broker, then the three-broker cluster: every test that takes it runs against both."""
    if request.param == "broker":
        # a data directory pytest keeps, so broker.log is there after a failure
        with EmbeddedBroker(GROUPS, data_dir=str(tmp_path_factory.mktemp("go-broker"))) as b:
            yield Target("broker", [b])
    else:
        c = request.getfixturevalue("cluster")
        yield Target("cluster", c.brokers, c)


# --- codecs -------------------------------------------------------------------------------------------

COUNT = 120         # per codec, over 3 partitions


def check_codecs(go: str, client: str, target: Target) -> None:
    prefix = unique(f"{client}-codecs")
    r = run(go, "codecs", client, target.bootstrap, "-topic", prefix, "-partitions", "3", "-rf", target.rf,
            "-count", str(COUNT))
    for codec, bits in CODECS.items():
        acked, read = r.of("ack", codec=codec), r.of("record", codec=codec)
        assert len(acked) == COUNT
        assert sorted(seq(e["value"]) for e in acked) == list(range(COUNT))
        assert all(e["partition"] == seq(e["value"]) % 3 for e in acked)
        assert_read_back(acked, read, codec)
        assert r.one("codec", codec=codec)["ok"]
        for p in range(3):
            replicas = target.batch_codecs(f"{prefix}-{codec}", p)
            assert len(replicas) == int(target.rf), f"{codec}: partition {p} is on {sorted(replicas)}"
            for broker, codecs in replicas.items():
                assert set(codecs) == {bits}, f"{codec}: broker {broker} holds batches of codecs {codecs}"


def test_franz_go_codecs(go, target):
    check_codecs(go, "franz-go", target)


def test_sarama_codecs(go, target):
    check_codecs(go, "sarama", target)


def test_kafka_go_codecs(go, target):
    check_codecs(go, "kafka-go", target)


# --- consumer groups ----------------------------------------------------------------------------------

GROUP_PARTITIONS, GROUP_COUNT = 4, 200


def check_group(go: str, client: str, target: Target, *args: str, assignor: str | None = None) -> Run:
    topic = unique(f"{client}-group")
    r = run(go, "group", client, target.bootstrap, "-topic", topic, "-partitions", str(GROUP_PARTITIONS),
            "-rf", target.rf, "-count", str(GROUP_COUNT), *args)
    assert r.one("assignment", member="a", stage="alone")["partitions"] == list(range(GROUP_PARTITIONS))
    end = {e["member"]: e["partitions"] for e in r.of("assignment", stage="end")}
    assert set(end) == {"a", "b"} and end["a"] and end["b"], end
    assert sorted(end["a"] + end["b"]) == list(range(GROUP_PARTITIONS)), f"not a split: {end}"
    split = {e["member"]: e["partitions"] for e in r.of("assignment", stage="split")}
    assert split == end, "the assignment changed while the records were consumed"

    described = r.one("described")
    assert described["state"] == "Stable" and described["protocol_type"] == "consumer"
    if assignor:
        assert described["assignor"] == assignor
    assert {m["client_id"]: m["partitions"] for m in described["members"]} == \
        {f"{client}-a": end["a"], f"{client}-b": end["b"]}

    acked = r.of("ack")
    assert len(acked) == GROUP_COUNT
    consumed = r.of("record")
    assert Counter(e["value"] for e in consumed) == Counter(e["value"] for e in acked), "not each record once"
    for e in consumed:
        assert e["partition"] in end[e["member"]], f"{e['value']} consumed by {e['member']}, not its owner"
    assert_read_back(acked, consumed, "group")
    committed = r.one("committed")
    assert committed["offsets"] == committed["ends"] == {str(p): GROUP_COUNT // GROUP_PARTITIONS
                                                         for p in range(GROUP_PARTITIONS)}
    return r


def test_franz_go_cooperative_sticky_group(go, target):
    r = check_group(go, "franz-go", target, "-protocol", "classic", assignor="cooperative-sticky")
    protocol = r.one("protocol")
    assert protocol["protocol"] == "classic" and protocol["join_group"] > 0
    assert protocol["consumer_group_heartbeat"] == 0


def test_franz_go_consumer_protocol_group(go, target):
    """franz-go v1.22's ServerSideBalancer (KIP-848): the members heartbeat with ConsumerGroupHeartbeat and
    the broker assigns; franz-go falls back to the classic protocol silently when a broker lacks it, so the
    requests it wrote are counted."""
    r = check_group(go, "franz-go", target, "-protocol", "consumer", assignor="uniform")
    protocol = r.one("protocol")
    assert protocol["protocol"] == "consumer" and protocol["join_group"] == 0
    assert protocol["consumer_group_heartbeat"] > 0


def test_sarama_consumer_group(go, target):
    check_group(go, "sarama", target, assignor="sticky")


def test_kafka_go_reader_group(go, target):
    check_group(go, "kafka-go", target)


# --- transactions -------------------------------------------------------------------------------------

TXN_COUNT = 60


def check_transactions(go: str, client: str, target: Target) -> None:
    topic = unique(f"{client}-txn")
    r = run(go, "txn", client, target.bootstrap, "-topic", topic, "-partitions", "3", "-rf", target.rf,
            "-count", str(TXN_COUNT))
    inputs = {(e["partition"], e["offset"]): e["value"] for e in r.of("input")}
    assert len(inputs) == TXN_COUNT
    txns = r.of("txn")
    aborted = [t for t in txns if not t["committed"]]
    committed = [t for t in txns if t["committed"]]
    assert aborted and len(committed) >= 2, [(t["n"], t["committed"]) for t in txns]
    assert all(t["abort"] for t in aborted), "a transaction meant to commit was aborted"

    def records(t):      # "partition:offset:value" of the input record each copy is of
        return [(int(p), int(o), v) for p, o, v in (rec.split(":", 2) for rec in t["records"])]

    assert all(inputs[(p, o)] == v for t in txns for p, o, v in records(t)), "a copy of a record not in the input"
    committed_inputs = [(p, o) for t in committed for p, o, _ in records(t)]
    assert Counter(committed_inputs) == Counter(list(inputs)), "not every input record copied by one committed transaction"
    # the exact committed set, as read_committed must see it: per partition, in input order
    expected = {p: [f"t-{inputs[(p, o)]}" for o in sorted(o for q, o in inputs if q == p)] for p in range(3)}
    read = by_partition(r.of("read_committed"))
    assert {p: [v for _, v in records] for p, records in read.items()} == expected
    for p, records in read.items():
        assert [o for o, _ in records] == sorted({o for o, _ in records}), f"read_committed {p} out of order"
    copies = sum(len(t["records"]) for t in txns)
    assert r.one("read_uncommitted")["records"] == copies > TXN_COUNT     # the aborted copies are in the log
    group = r.one("committed")
    assert group["offsets"] == group["ends"] == {str(p): TXN_COUNT // 3 for p in range(3)}


def test_franz_go_group_transact_session(go, target):
    check_transactions(go, "franz-go", target)


def test_sarama_transactional_producer(go, target):
    check_transactions(go, "sarama", target)


# --- admin --------------------------------------------------------------------------------------------

ADMIN_COUNT = 30        # produced to topic a, 10 per partition, timestamps base, base+1ms, ...


def check_admin(go: str, client: str, target: Target) -> Run:
    prefix = unique(f"{client}-admin")
    a, b = f"{prefix}-a", f"{prefix}-b"
    rf = int(target.rf)
    r = run(go, "admin", client, target.bootstrap, "-topic", prefix, "-partitions", "3", "-rf", target.rf,
            "-count", str(ADMIN_COUNT))
    assert r.one("brokers")["ids"] == list(range(len(target.brokers)))
    assert {e["topic"]: e["error"] for e in r.of("created")} == {a: "", b: ""}
    assert r.one("created_again")["already_exists"]
    for t in (a, b):
        listed = r.one("listed", topic=t)
        assert listed["error"] == "" and not listed["internal"]
        assert [p["partition"] for p in listed["partitions"]] == [0, 1, 2]
        for p in listed["partitions"]:
            assert len(p["replicas"]) == rf and p["leader"] in p["replicas"] and set(p["isr"]) <= set(p["replicas"])
    assert [p["partition"] for p in r.one("listed_grown", topic=b)["partitions"]] == [0, 1, 2, 3, 4]
    assert r.one("partitions_created")["error"] == ""

    def config(stage, name):
        return r.one("configs", stage=stage)["configs"][name]

    assert config("initial", "retention.ms") == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert config("initial", "cleanup.policy") == {"value": "delete", "source": "DEFAULT_CONFIG"}
    assert all(e["error"] == "" for e in r.of("altered"))
    assert config("after_incremental", "cleanup.policy") == {"value": "compact", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert config("after_incremental", "retention.ms") == {"value": "604800000", "source": "DEFAULT_CONFIG"}
    # AlterConfigs sets the whole set of overrides: b's retention.ms override from its creation is gone
    assert config("after_state", "max.message.bytes") == {"value": "200000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert config("after_state", "retention.ms") == {"value": "604800000", "source": "DEFAULT_CONFIG"}

    def offsets(kind):
        e = r.one("offsets", kind=kind)
        assert not e["errors"], e
        return e["offsets"]

    def each(n):
        return {str(p): n for p in range(3)}

    assert offsets("start") == each(0) and offsets("end") == each(10)
    assert offsets("after_start") == each(0)
    assert offsets("after_mid") == each(5)      # the first records at or after base+15ms: 15, 16 and 17
    assert r.one("produced")["records"] == ADMIN_COUNT

    assert f"{prefix}-group" in r.one("groups")["groups"]
    described = r.one("described")
    assert described["state"] == "Stable" and len(described["members"]) == 1
    assert described["members"][0]["partitions"] == [0, 1, 2]
    assert r.one("committed")["offsets"] == each(10)
    assert r.one("group_deleted")["error"] == ""
    assert not r.one("groups_after_delete")["has_group"]
    assert {e["topic"]: e["error"] for e in r.of("deleted")} == {a: "", b: ""}
    assert r.one("listed_after_delete") == {"event": "listed_after_delete", "has_a": False, "has_b": False}
    return r


def test_franz_go_kadm(go, target):
    r = check_admin(go, "franz-go", target)

    def offsets(kind):
        return r.one("offsets", kind=kind)["offsets"]

    each = {str(p): 10 for p in range(3)}
    assert offsets("committed") == each                  # the last stable offsets
    assert offsets("after_end") == each                  # kadm answers the end where Kafka finds no offset
    assert offsets("max_timestamp") == {str(p): 9 for p in range(3)}
    assert r.one("lag")["total"] == 0


def test_sarama_cluster_admin(go, target):
    r = check_admin(go, "sarama", target)
    assert r.one("offsets", kind="after_end")["offsets"] == {str(p): -1 for p in range(3)}
    assert r.one("brokers")["controller"] in range(len(target.brokers))
    assert {e["topic"]: (e["partitions"], e["retention_ms"]) for e in r.of("listed_topics")} == \
        {e["topic"]: (3, "3600000") for e in r.of("created")}


def test_kafka_go_admin(go, target):
    r = check_admin(go, "kafka-go", target)
    assert r.one("offsets", kind="after_end")["offsets"] == {str(p): -1 for p in range(3)}
    assert r.one("brokers")["controller"] in range(len(target.brokers))


# --- a broker SIGKILLed under a producer ----------------------------------------------------------------

class Producer:
    """kafka-compat-go produce in the background: its JSON lines as they come."""

    def __init__(self, go: str, client: str, bootstrap: str, topic: str, log_path: Path):
        self.args = [go, "produce", "-client", client, "-brokers", bootstrap, "-topic", topic, "-create",
                     "-partitions", "3", "-rf", "3", "-interval", "5ms", "-timeout", "10m"] + (["-v"] if VERBOSE else [])
        self.stderr = open(log_path, "w")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def acked(self) -> int:
        return sum('"event":"ack"' in line for line in list(self.lines))

    def finish(self) -> Run:
        """SIGTERM: it stops writing, waits for what is in flight and says what became of it."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)
        self.thread.join(30)
        self.stderr.close()
        return Run(self.args, self.proc.returncode, "".join(self.lines), Path(self.stderr.name).read_text())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def check_survives_kill(go: str, client: str, cluster, tmp_path: Path, idempotent: bool) -> None:
    topic = unique(f"{client}-kill")
    producer = Producer(go, client, cluster.bootstrap, topic, tmp_path / "producer.log")
    try:
        cluster.wait_until(lambda: producer.acked() >= 150 or producer.proc.poll() is not None, WAIT,
                           "150 acknowledgements")
        assert producer.proc.poll() is None, "".join(producer.lines[-20:])
        victim = cluster.wait_for_leader(topic, 0)
        cluster.kill(victim)
        for p in range(3):
            cluster.wait_for_leader(topic, p, WAIT, exclude={victim})
        before = producer.acked()
        cluster.wait_until(lambda: producer.acked() >= before + 150, WAIT, "writes to the new leaders")
        cluster.start_broker(victim)
        for p in range(3):
            wait_for_full_isr(cluster, topic, p)
        wait_for_metadata(cluster)
        before = producer.acked()
        cluster.wait_until(lambda: producer.acked() >= before + 100, WAIT, "writes after the restart")
        r = producer.finish().assert_ok()
    finally:
        producer.kill()
    acked, failed = r.of("ack"), r.of("failed")
    stopped = r.one("stopped")
    print(f"{client}: broker {victim} killed and restarted; {stopped['sent']} sent, {len(acked)} acknowledged, "
          f"{len(failed)} failed")
    assert stopped["acked"] == len(acked) > 400 and stopped["failed"] == len(failed)
    if idempotent:      # retried until written, never given up on
        assert failed == [] and stopped["sent"] == len(acked)
    read = run(go, "consume", client, cluster.bootstrap, "-topic", topic, "-partitions", "3").of("record")
    log = {(e["partition"], e["offset"]): e["value"] for e in read}
    assert len(log) == len(read)
    for e in acked:
        assert log.get((e["partition"], e["offset"])) == e["value"], \
            f"acknowledged {e['value']} at {e['partition']}:{e['offset']}, the log has {log.get((e['partition'], e['offset']))}"
    assert Counter(e["value"] for e in read).most_common(1)[0][1] == 1, "a record is in the log twice"
    unacknowledged = {e["value"] for e in read} - {e["value"] for e in acked}
    assert unacknowledged <= {e["value"] for e in failed}, "the log has records nobody sent"
    for p, records in by_partition(read).items():
        in_offset_order = [seq(v) for _, v in sorted(records)]
        assert in_offset_order == sorted(in_offset_order), f"partition {p} out of the order produced"
        assert all(seq(v) % 3 == p for _, v in records)


def test_franz_go_acknowledged_records_survive_broker_kill(go, cluster, tmp_path):
    check_survives_kill(go, "franz-go", cluster, tmp_path, idempotent=True)


def test_sarama_acknowledged_records_survive_broker_kill(go, cluster, tmp_path):
    check_survives_kill(go, "sarama", cluster, tmp_path, idempotent=True)


def test_kafka_go_acknowledged_records_survive_broker_kill(go, cluster, tmp_path):
    """kafka-go has no idempotent producer, so its writer does not retry here (MaxAttempts 1): a write the
    kill failed may or may not be in the log, but at most once; every acknowledged one exactly once."""
    check_survives_kill(go, "kafka-go", cluster, tmp_path, idempotent=False)
