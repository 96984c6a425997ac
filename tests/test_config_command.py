"""`kafka-compat configs --zookeeper`: SCRAM users written straight into ZooKeeper before brokers run
(kafka-configs.sh --zookeeper), in Kafka's /config/users/<user> format with a /config/changes
notification that a running broker's credential store follows; bad arguments are a clear message
and exit status 1, with nothing written."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from kafka_compat.cli import main
from kafka_compat.protocol.sasl import ScramMechanism
from kafka_compat.security.scram import credential_from_password, parse_credential
from kafka_compat.security.zk_stores import ZkCredentialStore
from kafka_compat.testing import EmbeddedZooKeeper, zookeeper_missing
from kafka_compat.zk.kafka_zk_client import KafkaZkClient

pytestmark = pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def server():
    with EmbeddedZooKeeper() as zk:
        yield zk


def configs(connect: str, user: str, *args: str) -> int:
    return main(["configs", "--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name", user,
                 *args])


def test_scram_users_land_in_kafkas_znodes_and_a_running_store_follows(server, capsys):
    connect = server.connect_string(f"/cfg-{uuid.uuid4().hex[:8]}")
    assert configs(connect, "broker", "--add-config",
                   "SCRAM-SHA-256=[password=pw-256],SCRAM-SHA-512=[iterations=8192,password=pw-512]") == 0
    assert "Completed updating config for user broker" in capsys.readouterr().out
    zk = KafkaZkClient(connect).start()
    store = ZkCredentialStore(zk)
    store.listen()
    try:
        node = json.loads(zk.zk.get("/config/users/broker")[0])
        assert node["version"] == 1 and set(node["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        for mech, password, iterations in ((SHA256, "pw-256", 4096), (SHA512, "pw-512", 8192)):
            stored = parse_credential(node["config"][mech.mechanism_name])
            assert stored.iterations == iterations
            assert stored == credential_from_password(mech, password, iterations, salt=stored.salt)
            assert store.lookup(mech, "broker") == stored
        notes = [json.loads(zk.zk.get(f"/config/changes/{c}")[0]) for c in zk.zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/broker"} in notes

        assert configs(connect, "broker", "--delete-config", "SCRAM-SHA-256") == 0     # seen without a restart
        deadline = time.monotonic() + 20
        while store.lookup(SHA256, "broker") is not None:
            assert time.monotonic() < deadline, "the running store did not see the deletion"
            time.sleep(0.05)
        assert set(json.loads(zk.zk.get("/config/users/broker")[0])["config"]) == {"SCRAM-SHA-512"}
    finally:
        store.close()
        zk.close()


@pytest.mark.parametrize("args, says", [
    (["--add-config", "producer_byte_rate=1024"], "only SCRAM credentials"),
    (["--add-config", "SCRAM-SHA-256=[iterations=8192]"], "a password is needed"),
    (["--add-config", "SCRAM-SHA-256=[iterations=many,password=p]"], "iterations must be a number"),
    (["--add-config", "SCRAM-SHA-512=[iterations=10,password=p]"], "iterations must be between"),
    (["--add-config", "SCRAM-SHA-256=[password=p"], "expected SCRAM-SHA-256=[password="),
    (["--add-config", "SCRAM-SHA-256=[password=a,b]"], "only password=... and iterations=..."),
    (["--add-config", "=x"], "cannot parse"),
    (["--delete-config", "PLAIN"], "only SCRAM credentials can be deleted"),
    ([], "nothing to do"),
])
def test_bad_arguments_are_refused_with_a_reason_and_nothing_written(server, capsys, args, says):
    connect = server.connect_string(f"/cfg-{uuid.uuid4().hex[:8]}")
    assert configs(connect, "someone", *args) == 1
    assert says in capsys.readouterr().err
    zk = KafkaZkClient(server.connect_string()).start()
    try:
        assert not zk.zk.exists(connect[connect.index("/"):])
    finally:
        zk.close()
