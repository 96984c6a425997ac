"""A restarted ZooKeeper-mode broker reads the overrides of the topics already on disk before it loads
their logs (as Kafka's LogManager does): without them the existing logs ran with the broker's defaults, so
a restarted broker in the fault campaign kept a 1 MiB-segment topic in one ever-growing segment that
retention never touched, until its small disk was full (interop/test_cluster_chaos.py has the restart)."""
from __future__ import annotations

from kafka_compat.storage.log_manager import hosted_topics

from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.server.zk_topic_configs import ZkTopicConfigs


class FakeZk:
    def __init__(self, configs):
        self.configs = configs
        self.asked: list[list[str]] = []

    def get_entities_configs(self, entity_type, names):
        assert entity_type == "topics"
        names = list(names)
        self.asked.append(names)
        return {n: dict(self.configs.get(n, {})) for n in names}


def test_the_overrides_of_hosted_topics_are_read_before_the_logs_load(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a / "chaos-0", a / "chaos-2", b / "my-topic-11", b / "gone-0-delete", a / "not-a-partition"):
        d.mkdir(parents=True)
    (a / "stray-0").write_text("a file, not a partition folder")
    topics = hosted_topics([str(a), str(b), str(tmp_path / "missing")])
    assert topics == ["chaos", "my-topic"]
    zk = FakeZk({"chaos": {"segment.bytes": "1048576", "retention.bytes": "12582912"}})
    configs = ZkTopicConfigs(zk, BrokerConfig({"log.dirs": str(a)}))
    configs.load(topics)
    assert zk.asked == [["chaos", "my-topic"]]
    assert configs.missing(["chaos", "my-topic", "other"]) == ["other"]
    chaos = configs.log_config("chaos")
    assert (chaos.segment_bytes, chaos.retention_bytes) == (1 << 20, 12 << 20)
    assert configs.log_config("my-topic").segment_bytes == configs.log_config("").segment_bytes
