"""The command line's configuration precedence: embedded defaults < properties file < flags."""
from kafka_compat.cli import build_config


def test_properties_file_beats_embedded_defaults_and_flags_beat_the_file(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:19999\nlog.dirs=/srv/kafka\nnum.partitions=4\n")
    cfg = build_config(str(props), ["num.partitions=7"])
    assert cfg["listeners"] == "PLAINTEXT://127.0.0.1:19999"
    assert cfg.log_dirs == ["/srv/kafka"]
    assert cfg["num.partitions"] == 7


def test_embedded_defaults_without_a_file():
    cfg = build_config(None, [])
    assert cfg["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert cfg.log_dirs == ["./kafka-compat-data"]
