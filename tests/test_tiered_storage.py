"""Tiered storage (KIP-405) against a real S3 server (SeaweedFS, tests/test_s3_server.py's fixture): Kafka's
settings and their checks, segments copied with their indexes, local retention, reads of tiered offsets."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_compat.testing import EmbeddedBroker, s3_server  # noqa: F401  (the fixture)


def _create(admin: AdminClient, name: str, config: dict) -> None:
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)


def _refusal(admin: AdminClient, name: str, config: dict) -> str:
    with pytest.raises(KafkaException) as info:
        _create(admin, name, config)
    error = info.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    return error.str()


def test_a_tiered_topic_needs_the_brokers_remote_storage_system():
    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        message = _refusal(admin, "tiered", {"remote.storage.enable": "true"})
        assert "Tiered Storage functionality is disabled in the broker" in message
        _create(admin, "plain", {"remote.storage.enable": "false", "local.retention.ms": "1000"})


def test_kafkas_rules_for_a_tiered_topic(s3_server):  # noqa: F811
    with EmbeddedBroker({"remote.log.storage.system.enable": "true", **s3_server.rsm_config()}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert "compacted" in _refusal(admin, "c", {"remote.storage.enable": "true", "cleanup.policy": "compact"})
        assert "must not be more than retention.ms" in _refusal(
            admin, "r", {"remote.storage.enable": "true", "retention.ms": "60000", "local.retention.ms": "120000"})
        assert "must not be more than retention.bytes" in _refusal(
            admin, "b", {"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "2000"})
        _create(admin, "ok", {"remote.storage.enable": "true", "local.retention.ms": "1000"})
