"""Broker and topic configuration: Kafka's names, defaults, precedence, parsing and DescribeConfigs view."""

from __future__ import annotations

import pytest
from kafka_compat.storage.log_config import TOPIC_CONFIG_DEF, validate_topic_configs

from kafka_compat.configdef import (
    LONG_MAX,
    ConfigError,
    ConfigSource,
    ConfigType,
    Password,
    convert_to_string,
    java_double_to_string,
)
from kafka_compat.endpoint import EndPoint, SecurityProtocol
from kafka_compat.properties import load_properties, parse_properties
from kafka_compat.server.config_helper import describe_broker_config, effective_topic_config
from kafka_compat.server.kafka_config import (
    BROKER_CONFIG_DEF,
    DYNAMIC_BROKER_CONFIGS,
    INTERNAL_BROKER_CONFIGS,
    READ_ONLY_BROKER_CONFIGS,
    SENSITIVE_BROKER_CONFIGS,
    TOPIC_CONFIG_SYNONYMS,
    BrokerConfig,
    broker_config_synonyms,
)

S = ConfigSource

# -- defaults ----------------------------------------------------------------------


@pytest.mark.parametrize("name, expected", [
    ("broker.id", 0), ("node.id", 0),
    ("listeners", ["PLAINTEXT://:9092"]), ("advertised.listeners", None),
    ("log.dir", ["/tmp/kafka-logs"]), ("log.dirs", None),
    ("num.partitions", 1), ("default.replication.factor", 1),
    ("auto.create.topics.enable", True), ("delete.topic.enable", True),
    ("log.segment.bytes", 1073741824), ("log.roll.hours", 168), ("log.roll.ms", None),
    ("log.retention.hours", 168), ("log.retention.minutes", None), ("log.retention.ms", None),
    ("log.retention.bytes", -1), ("log.retention.check.interval.ms", 300000),
    ("log.cleanup.policy", ["delete"]), ("log.cleaner.enable", True),
    ("log.cleaner.min.cleanable.ratio", 0.5), ("log.cleaner.delete.retention.ms", 86400000),
    ("log.index.size.max.bytes", 10485760), ("log.index.interval.bytes", 4096),
    ("log.flush.interval.messages", LONG_MAX), ("log.flush.interval.ms", None),
    ("log.flush.scheduler.interval.ms", LONG_MAX), ("log.message.timestamp.type", "CreateTime"),
    ("log.message.timestamp.before.max.ms", LONG_MAX), ("log.message.timestamp.after.max.ms", 3600000),
    ("message.max.bytes", 1048588), ("socket.request.max.bytes", 104857600),
    ("connections.max.idle.ms", 600000), ("offsets.topic.num.partitions", 50),
    ("offsets.topic.replication.factor", 3), ("offsets.retention.minutes", 10080),
    ("offsets.retention.check.interval.ms", 600000), ("group.initial.rebalance.delay.ms", 3000),
    ("group.min.session.timeout.ms", 6000), ("group.max.session.timeout.ms", 1800000),
    ("group.max.size", 2147483647), ("transaction.max.timeout.ms", 900000),
    ("producer.id.expiration.ms", 86400000), ("fetch.max.bytes", 57671680),
    ("replica.fetch.max.bytes", 1048576), ("zookeeper.connect", None),
    ("zookeeper.session.timeout.ms", 18000), ("controller.socket.timeout.ms", 30000),
    ("min.insync.replicas", 1), ("unclean.leader.election.enable", False),
    ("log.segment.delete.delay.ms", 60000), ("num.io.threads", 8),
    ("fetch.purgatory.purge.interval.requests", 1000), ("compression.type", "producer"),
])
def test_broker_defaults(name, expected):
    assert BrokerConfig()[name] == expected


def test_every_key_is_documented_and_typed():
    for registry in (BROKER_CONFIG_DEF, TOPIC_CONFIG_DEF):
        for key in registry.config_keys.values():
            assert key.doc and key.doc[-1] == "." and len(key.doc) < 120, key.name
            assert isinstance(key.type, ConfigType) and key.has_default


def test_topic_defaults_follow_the_broker_synonyms():
    cfg = BrokerConfig({"log.segment.bytes": "1048576", "message.max.bytes": "2000000",
                        "log.cleanup.policy": "compact", "log.roll.hours": "2"})
    topic = cfg.topic_defaults()
    assert set(topic) == set(TOPIC_CONFIG_DEF)
    assert topic["segment.bytes"] == 1048576
    assert topic["max.message.bytes"] == 2000000
    assert topic["cleanup.policy"] == ["compact"]
    assert topic["segment.ms"] == 2 * 3600 * 1000
    assert topic["retention.ms"] == 7 * 24 * 3600 * 1000
    assert topic["flush.ms"] == LONG_MAX
    assert topic["remote.storage.enable"] is False  # no broker synonym: topic default


# -- retention precedence --------------------------------------------------------------


@pytest.mark.parametrize("props, expected", [
    ({}, 168 * 3_600_000),
    ({"log.retention.hours": "1"}, 3_600_000),
    ({"log.retention.minutes": "5", "log.retention.hours": "1"}, 300_000),
    ({"log.retention.ms": "1234", "log.retention.minutes": "5", "log.retention.hours": "1"}, 1234),
    ({"log.retention.ms": "1234", "log.retention.hours": "1"}, 1234),
    ({"log.retention.ms": "-5", "log.retention.minutes": "5"}, -1),
    ({"log.retention.hours": "-1"}, -1),
])
def test_retention_ms_wins_over_minutes_over_hours(props, expected):
    cfg = BrokerConfig(props)
    assert cfg.log_retention_ms == expected
    assert effective_topic_config(cfg)["retention.ms"].parsed == expected


def test_zero_retention_is_refused():
    with pytest.raises(ConfigError) as err:
        BrokerConfig({"log.retention.minutes": "0"})
    assert err.value.name == "log.retention.ms"


def test_roll_and_flush_fall_back_to_their_secondary_synonyms():
    cfg = BrokerConfig({"log.roll.hours": "3", "log.roll.jitter.hours": "1",
                        "log.flush.scheduler.interval.ms": "500"})
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms, cfg.log_flush_interval_ms) == (10_800_000, 3_600_000, 500)
    cfg = BrokerConfig({"log.roll.ms": "10", "log.roll.hours": "3", "log.flush.interval.ms": "7"})
    assert (cfg.log_roll_ms, cfg.log_flush_interval_ms) == (10, 7)


# -- .properties parsing -------------------------------------------------------------------


def test_properties_separators_comments_and_whitespace():
    text = (
        "# a comment\n"
        "! another comment\n"
        "   \n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "   d   =   4  \n"
        "e\t\t5\n"
        "f==6\n"
        "g = = 7\n"
        "h=\n"
        "i\n"
        "a=last wins\n"
    )
    assert parse_properties(text) == {"a": "last wins", "b": "2", "c": "3", "d": "4  ", "e": "5",
                                      "f": "=6", "g": "= 7", "h": "", "i": ""}


def test_properties_continuations():
    text = (
        "listeners=PLAINTEXT://:9092,\\\n"
        "          SSL://:9093\n"
        "# comment ending in a backslash does not continue \\\n"
        "two=a\\\\\n"          # even count: a literal backslash, no continuation
        "three=x\\\\\\\n"      # odd count: literal backslash, then continuation
        "   y\n"
        "four=\\\n"
        "   # not a comment here\n"
        "last=z\\"             # continuation at end of file
    )
    assert parse_properties(text) == {
        "listeners": "PLAINTEXT://:9092,SSL://:9093",
        "two": "a\\",
        "three": "x\\y",
        "four": "# not a comment here",
        "last": "z",
    }


def test_properties_escapes_and_line_endings():
    text = ("key\\=with\\:seps\\ and\\ space = v\r\n"
            "tab=a\\tb\\nc\r"
            "uni=caf\\u00e9 \\uD83D\\uDE00\n"
            "other=\\q\\\\\n")
    assert parse_properties(text) == {
        "key=with:seps and space": "v",
        "tab": "a\tb\nc",
        "uni": "café 😀",
        "other": "q\\",
    }


def test_malformed_unicode_escape_is_an_error():
    with pytest.raises(ValueError, match="Malformed"):
        parse_properties("bad=\\u12G4\n")


def test_from_properties_file_with_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# broker\nnum.partitions=3\nlog.dirs=/data/a, /data/b\n"
                    "log.retention.hours=24\ncustom.plugin.setting = x \n")
    cfg = BrokerConfig.from_properties(path, {"num.partitions": "6", "broker.id": "4"})
    assert cfg["num.partitions"] == 6
    assert cfg.log_dirs == ["/data/a", "/data/b"]
    assert cfg.log_retention_ms == 24 * 3_600_000
    assert (cfg.broker_id, cfg.node_id) == (4, 4)
    assert cfg.unknown == {"custom.plugin.setting": "x "}
    assert cfg.is_set("log.dirs") and not cfg.is_set("log.dir")
    assert cfg.originals["log.dirs"] == "/data/a, /data/b"


def test_latin1_properties_file_is_read(tmp_path):
    path = tmp_path / "latin1.properties"
    path.write_bytes("log.dir=/donn\u00e9es\n".encode("iso-8859-1"))
    assert load_properties(path) == {"log.dir": "/donn\u00e9es"}
    path.write_bytes("log.dir=/donn\u00e9es\n".encode("utf-8"))
    assert load_properties(path) == {"log.dir": "/donn\u00e9es"}


def test_values_are_trimmed_when_parsed_and_dict_values_may_be_typed():
    cfg = BrokerConfig.from_properties({"num.partitions": " 4 ", "log.cleaner.enable": False,
                                        "log.cleaner.min.cleanable.ratio": 0.25})
    assert cfg["num.partitions"] == 4
    assert cfg["log.cleaner.enable"] is False
    assert cfg["log.cleaner.min.cleanable.ratio"] == 0.25
    assert cfg.static_configs()["log.cleaner.enable"] == "false"


# -- typed parsing and validation --------------------------------------------------------


@pytest.mark.parametrize("name, raw, expected", [
    ("auto.create.topics.enable", "TRUE", True),
    ("auto.create.topics.enable", " False ", False),
    ("log.cleanup.policy", "compact , delete", ["compact", "delete"]),
    ("log.cleanup.policy", "", []),
    ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256", ["PLAIN", "SCRAM-SHA-256"]),
    ("log.cleaner.min.cleanable.ratio", "1e-1", 0.1),
    ("log.cleaner.io.buffer.load.factor", ".75d", 0.75),
    ("log.retention.bytes", "+9223372036854775807", LONG_MAX),
    ("offsets.topic.replication.factor", "1", 1),
    ("compression.gzip.level", "-1", -1),
    ("create.topic.policy.class.name", " org.example.Policy ", "org.example.Policy"),
])
def test_values_parse_as_kafka_does(name, raw, expected):
    assert BrokerConfig({name: raw})[name] == expected


@pytest.mark.parametrize("name, raw", [
    ("num.partitions", "0"),                       # at least 1
    ("num.partitions", "two"),
    ("num.partitions", "1.0"),
    ("num.partitions", "2147483648"),              # beyond int32
    ("offsets.topic.replication.factor", "40000"),  # beyond int16
    ("auto.create.topics.enable", "yes"),
    ("log.cleanup.policy", "delete,bogus"),
    ("log.message.timestamp.type", "createtime"),  # case-sensitive, as Kafka
    ("log.cleaner.min.cleanable.ratio", "1.5"),
    ("log.cleaner.min.cleanable.ratio", "half"),
    ("compression.type", "brotli"),
    ("compression.gzip.level", "0"),
    ("compression.zstd.level", "23"),
    ("socket.request.max.bytes", "0"),
    ("ssl.client.auth", "always"),
    ("listeners", "PLAINTEXT://:9092,PLAINTEXT://:9093"),
    ("listeners", "PLAINTEXT:9092"),
    ("listeners", "INTERNAL://:9092"),
    ("listener.security.protocol.map", "PLAINTEXT:TLS"),
    ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
    ("advertised.listeners", "SSL://host:9093"),
    ("broker.id", "-1"),
    ("log.dirs", " , "),
    ("replica.fetch.wait.max.ms", "40000"),
])
def test_invalid_values_raise_a_config_error_naming_the_property(name, raw):
    with pytest.raises(ConfigError) as err:
        BrokerConfig({name: raw})
    assert err.value.name == name
    assert name in str(err.value)
    assert err.value.error_code == 40


def test_kafka_message_shape():
    with pytest.raises(ConfigError, match=r"^Invalid value 0 for configuration num.partitions: Value must be at least 1$"):
        BrokerConfig({"num.partitions": "0"})


def test_node_id_and_broker_id_are_one_setting():
    assert BrokerConfig({"node.id": "3"}).broker_id == 3
    assert BrokerConfig({"broker.id": "5"}).node_id == 5
    with pytest.raises(ConfigError) as err:
        BrokerConfig({"broker.id": "1", "node.id": "2"})
    assert err.value.name == "node.id"


def test_listeners_and_protocol_map():
    cfg = BrokerConfig({
        "listeners": "internal://127.0.0.1:9092, EXTERNAL://[::1]:9093,REPL://:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,REPL:SSL",
        "advertised.listeners": "EXTERNAL://broker.example:19093",
    })
    assert cfg.listeners == [EndPoint("INTERNAL", "127.0.0.1", 9092, "PLAINTEXT"),
                             EndPoint("EXTERNAL", "::1", 9093, "SASL_SSL"),
                             EndPoint("REPL", None, 0, "SSL")]
    assert cfg.advertised_listeners == [EndPoint("EXTERNAL", "broker.example", 19093, "SASL_SSL")]
    assert cfg.listeners[1].security_protocol is SecurityProtocol.SASL_SSL
    assert [p.id for p in SecurityProtocol] == [0, 1, 2, 3]  # the ids UpdateMetadata and ZooKeeper carry


def test_password_values_stay_hidden():
    cfg = BrokerConfig({"ssl.keystore.password": "s3cret"})
    assert isinstance(cfg["ssl.keystore.password"], Password)
    assert cfg["ssl.keystore.password"].value == "s3cret"
    assert "s3cret" not in repr(dict(cfg))


def test_topic_overrides_are_validated():
    assert validate_topic_configs({"cleanup.policy": "compact,delete", "retention.ms": "-1",
                                   "min.cleanable.dirty.ratio": "0.1"}) == {
        "cleanup.policy": ["compact", "delete"], "retention.ms": -1, "min.cleanable.dirty.ratio": 0.1}
    for name, raw in [("retention.ms", "-2"), ("segment.bytes", "13"), ("cleanup.policy", "remove"),
                      ("message.timestamp.type", "Now"), ("no.such.config", "1")]:
        with pytest.raises(ConfigError) as err:
            validate_topic_configs({name: raw})
        assert err.value.name == name
    with pytest.raises(ConfigError, match="Unknown topic config name"):
        validate_topic_configs({"log.retention.ms": "1"})  # broker name, not a topic name
    with pytest.raises(ConfigError) as err:
        effective_topic_config(BrokerConfig(), {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert err.value.name == "max.compaction.lag.ms"


# -- printing values ----------------------------------------------------------------------


@pytest.mark.parametrize("value, type_, text", [
    (True, ConfigType.BOOLEAN, "true"),
    (["compact", "delete"], ConfigType.LIST, "compact,delete"),
    ([], ConfigType.LIST, ""),
    (LONG_MAX, ConfigType.LONG, "9223372036854775807"),
    (0.5, ConfigType.DOUBLE, "0.5"),
    (None, ConfigType.STRING, None),
])
def test_convert_to_string(value, type_, text):
    assert convert_to_string(value, type_) == text


@pytest.mark.parametrize("d, text", [
    (1.0, "1.0"), (0.001, "0.001"), (1234567.0, "1234567.0"), (1e7, "1.0E7"), (1.5e-4, "1.5E-4"),
    (1.7976931348623157e308, "1.7976931348623157E308"), (-2.5e10, "-2.5E10"), (0.0, "0.0"),
    (float("inf"), "Infinity"),
])
def test_doubles_print_as_java_does(d, text):
    assert java_double_to_string(d) == text


# -- synonyms and sources --------------------------------------------------------------------


def test_source_and_type_ids_match_the_wire():
    assert [(s.name, int(s)) for s in ConfigSource] == [
        ("UNKNOWN", 0), ("DYNAMIC_TOPIC_CONFIG", 1), ("DYNAMIC_BROKER_CONFIG", 2),
        ("DYNAMIC_DEFAULT_BROKER_CONFIG", 3), ("STATIC_BROKER_CONFIG", 4), ("DEFAULT_CONFIG", 5),
        ("DYNAMIC_BROKER_LOGGER_CONFIG", 6), ("DYNAMIC_CLIENT_METRICS_CONFIG", 7), ("DYNAMIC_GROUP_CONFIG", 8)]
    assert ConfigSource.TOPIC_CONFIG is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [t.id for t in ConfigType] == list(range(1, 10))


def test_synonym_order_is_kafkas():
    def names(topic):
        return [s.name for s in TOPIC_CONFIG_SYNONYMS[topic]]

    assert names("retention.ms") == ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert names("segment.ms") == ["log.roll.ms", "log.roll.hours"]
    assert names("segment.jitter.ms") == ["log.roll.jitter.ms", "log.roll.jitter.hours"]
    assert names("flush.ms") == ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    assert names("max.message.bytes") == ["message.max.bytes"]
    assert names("file.delete.delay.ms") == ["log.segment.delete.delay.ms"]
    assert names("min.cleanable.dirty.ratio") == ["log.cleaner.min.cleanable.ratio"]
    assert names("cleanup.policy") == ["log.cleanup.policy"]
    assert broker_config_synonyms("log.retention.hours") == names("retention.ms")
    assert broker_config_synonyms("num.partitions") == ["num.partitions"]
    assert all(s in BROKER_CONFIG_DEF for syns in TOPIC_CONFIG_SYNONYMS.values() for s, _ in syns)
    assert set(TOPIC_CONFIG_SYNONYMS) <= set(TOPIC_CONFIG_DEF)


def test_topic_entry_synonyms_run_topic_then_static_then_default():
    cfg = BrokerConfig({"log.retention.ms": "5000", "log.retention.minutes": "10", "log.retention.hours": "2"})
    entry = effective_topic_config(cfg, {"retention.ms": "100"})["retention.ms"]
    assert (entry.value, entry.source, entry.effective_source) == ("100", S.DYNAMIC_TOPIC_CONFIG, S.DYNAMIC_TOPIC_CONFIG)
    assert list(entry.synonyms) == [
        ("retention.ms", "100", S.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "5000", S.STATIC_BROKER_CONFIG),
        ("log.retention.minutes", "10", S.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "2", S.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", S.DEFAULT_CONFIG),
    ]
    assert entry.documentation and entry.config_type is ConfigType.LONG and not entry.read_only


def test_lower_synonym_value_with_kafkas_describe_quirk():
    # log.roll.hours supplies segment.ms; DescribeConfigs drops synonyms ranked before
    # the primary log.roll.ms and reports DEFAULT_CONFIG, CreateTopics reports STATIC.
    entry = effective_topic_config(BrokerConfig({"log.roll.hours": "2"}))["segment.ms"]
    assert entry.value == "7200000"
    assert (entry.source, entry.synonyms) == (S.DEFAULT_CONFIG, ())
    assert entry.effective_source == S.STATIC_BROKER_CONFIG


def test_sources_of_each_tier():
    cfg = BrokerConfig({"log.roll.jitter.ms": "123"})
    entries = effective_topic_config(
        cfg, {"index.interval.bytes": "9999999"},
        dynamic_broker_configs={"log.cleaner.delete.retention.ms": "34"},
        dynamic_default_broker_configs={"log.retention.hours": "3"})

    def row(name):
        e = entries[name]
        return e.value, e.effective_source

    assert row("cleanup.policy") == ("delete", S.DEFAULT_CONFIG)
    assert entries["cleanup.policy"].source == S.DEFAULT_CONFIG
    assert row("retention.ms") == ("10800000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert row("delete.retention.ms") == ("34", S.DYNAMIC_BROKER_CONFIG)
    assert entries["delete.retention.ms"].source == S.DYNAMIC_BROKER_CONFIG
    assert row("segment.jitter.ms") == ("123", S.STATIC_BROKER_CONFIG)
    assert entries["segment.jitter.ms"].synonyms == (("log.roll.jitter.ms", "123", S.STATIC_BROKER_CONFIG),
                                                     ("log.roll.jitter.hours", "0", S.DEFAULT_CONFIG))
    assert row("index.interval.bytes") == ("9999999", S.DYNAMIC_TOPIC_CONFIG)
    assert row("max.message.bytes") == ("1048588", S.DEFAULT_CONFIG)
    assert entries["max.message.bytes"].synonyms == (("message.max.bytes", "1048588", S.DEFAULT_CONFIG),)
    assert list(entries) == list(TOPIC_CONFIG_DEF)


def test_broker_entries_read_only_sensitive_and_synonyms():
    cfg = BrokerConfig({"log.retention.ms": "1680000000", "log.retention.hours": "168",
                        "ssl.keystore.password": "s3cret"})
    entries = describe_broker_config(cfg)
    assert set(entries) == set(BROKER_CONFIG_DEF) - INTERNAL_BROKER_CONFIGS      # Kafka lists no internal one
    ms, hours, roll = entries["log.retention.ms"], entries["log.retention.hours"], entries["log.roll.hours"]
    assert [(s.name, s.source) for s in ms.synonyms] == [
        ("log.retention.ms", S.STATIC_BROKER_CONFIG), ("log.retention.hours", S.STATIC_BROKER_CONFIG),
        ("log.retention.hours", S.DEFAULT_CONFIG)]
    assert [(s.name, s.source) for s in hours.synonyms] == [
        ("log.retention.hours", S.STATIC_BROKER_CONFIG), ("log.retention.hours", S.DEFAULT_CONFIG)]
    assert [(s.name, s.source) for s in roll.synonyms] == [("log.roll.hours", S.DEFAULT_CONFIG)]
    assert (ms.read_only, hours.read_only, roll.read_only) == (False, True, True)
    assert entries["log.dirs"].value is None and entries["log.dirs"].source == S.DEFAULT_CONFIG
    pw = entries["ssl.keystore.password"]
    assert pw.is_sensitive and pw.value is None and pw.source == S.STATIC_BROKER_CONFIG
    assert all(s.value is None for s in pw.synonyms)
    assert "ssl.keystore.password" in SENSITIVE_BROKER_CONFIGS
    assert {"broker.id", "log.dirs", "log.retention.hours"} <= READ_ONLY_BROKER_CONFIGS
    assert {"message.max.bytes", "log.retention.ms", "num.io.threads"} <= DYNAMIC_BROKER_CONFIGS
    assert not READ_ONLY_BROKER_CONFIGS & DYNAMIC_BROKER_CONFIGS
