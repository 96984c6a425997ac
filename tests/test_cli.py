"""The command line: configuration precedence (embedded defaults < properties file < flags),
clear messages instead of tracebacks, and a graceful SIGTERM."""
import socket
import subprocess
import sys

from kafka_compat.storage.checkpoint import CLEAN_SHUTDOWN_FILE
from wire import WireClient

from kafka_compat.cli import build_config
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.records import build_batch
from kafka_compat.testing import EmbeddedBroker


def test_properties_file_beats_embedded_defaults_and_flags_beat_the_file(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:19999\nlog.dirs=/srv/kafka\nnum.partitions=4\n")
    cfg = build_config(str(props), ["num.partitions=7"])
    assert cfg["listeners"] == ["PLAINTEXT://127.0.0.1:19999"]
    assert cfg.log_dirs == ["/srv/kafka"]
    assert cfg["num.partitions"] == 7


def test_embedded_defaults_without_a_file():
    cfg = build_config(None, [])
    assert cfg["listeners"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert cfg.log_dirs == ["./kafka-compat-data"]


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafka_compat", "serve", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_port_in_use_is_a_clear_message_not_a_traceback(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        got = serve("--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", str(tmp_path / "logs"))
    assert got.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in got.stderr + got.stdout
    assert "Traceback" not in got.stderr + got.stdout


def test_an_unusable_data_directory_is_a_clear_message_not_a_traceback(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    got = serve("--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", str(blocker / "logs"))
    assert got.returncode != 0
    assert "is not usable" in got.stderr + got.stdout and str(blocker / "logs") in got.stderr + got.stdout
    assert "Traceback" not in got.stderr + got.stdout


def test_sigterm_flushes_and_leaves_the_clean_shutdown_marker(tmp_path):
    broker = EmbeddedBroker({"num.partitions": 1}, data_dir=str(tmp_path))
    logs = tmp_path / "logs"
    with broker:
        c = WireClient("127.0.0.1", broker.port)
        c.call(3, 9, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="marked")],
                                     allow_auto_topic_creation=True))
        resp = c.call(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="marked", partition_data=[ProduceRequest.PartitionProduceData(
                index=0, records=build_batch([(b"k", b"v", [], 1000)]))])]))
        assert resp.responses[0].partition_responses[0].error_code == 0
        c.close()
        assert not (logs / CLEAN_SHUTDOWN_FILE).exists()        # running: no marker yet
        assert broker.stop() == 0
        assert (logs / CLEAN_SHUTDOWN_FILE).exists()
        # the flush on shutdown moved the recovery point past the record
        assert "marked 0 1" in (logs / "recovery-point-offset-checkpoint").read_text().splitlines()


def test_broker_id_alone_names_the_broker(tmp_path):
    """As in Kafka's ZooKeeper mode, broker.id by itself is enough: node.id follows it."""
    with EmbeddedBroker({"broker.id": 1}, data_dir=str(tmp_path)) as broker:
        c = WireClient("127.0.0.1", broker.port)
        resp = c.call(3, 9, MetadataRequest(topics=[]))
        c.close()
    assert [b.node_id for b in resp.brokers] == [1]
    assert resp.controller_id == 1
    assert "node.id=1" in (tmp_path / "logs" / "meta.properties").read_text().splitlines()


def test_node_id_alone_and_a_mismatch():
    assert (build_config(None, ["node.id=2"]).broker_id, build_config(None, ["node.id=2"]).node_id) == (2, 2)
    got = serve("--listeners", "PLAINTEXT://127.0.0.1:0", "-o", "broker.id=1", "-o", "node.id=2")
    assert got.returncode != 0
    assert "node.id must be the same value as broker.id" in got.stderr
    assert "Traceback" not in got.stderr
