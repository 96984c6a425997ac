"""Feature versioning (KIP-584) on a single node, over the wire: ApiVersions' features, UpdateFeatures
(upgrade, safe and unsafe downgrade, validate_only, Kafka's errors), the gates, and persistence."""
from __future__ import annotations

import json
import os

import pytest
from wire import WireClient

from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kafka_compat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kafka_compat.protocol.messages.share_fetch import ShareFetchRequest
from kafka_compat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kafka_compat.protocol.messages.update_features import UpdateFeaturesRequest as U
from kafka_compat.server import features as ft
from kafka_compat.testing import EmbeddedBroker

INVALID_UPDATE_VERSION, UNSUPPORTED_VERSION = 95, 35
FAILED = "The update failed for all features since the following feature had an error: "


def api_versions(c: WireClient, version: int = 4):
    return c.call(18, version, ApiVersionsRequest(client_software_name="test", client_software_version="1"))


# what a new node finalizes: Kafka 4's defaults, capped at what is built
NEW_NODE = {"metadata.version": 33, "transaction.version": 2, "group.version": 1, "share.version": 1,
            "streams.version": 1}


def finalized(c: WireClient) -> tuple[int, dict[str, int]]:
    r = api_versions(c)
    assert all(f.min_version_level == f.max_version_level for f in r.finalized_features)
    return r.finalized_features_epoch, {f.name: f.max_version_level for f in r.finalized_features}


def update(c: WireClient, *updates, version: int = 1, validate_only: bool = False):
    """updates: (feature, level, upgrade type) for v1+, (feature, level, allow_downgrade) for v0."""
    keys = [U.FeatureUpdateKey(feature=f, max_version_level=level, allow_downgrade=bool(kind) if version == 0 else False,
                               upgrade_type=kind if version else 1) for f, level, kind in updates]
    return c.call(57, version, U(timeout_ms=10000, feature_updates=keys, validate_only=validate_only))


@pytest.fixture
def broker():
    with EmbeddedBroker() as b:
        yield b


def test_api_versions_carries_the_features(broker):
    c = WireClient("127.0.0.1", broker.port)
    v4 = api_versions(c, 4)
    assert {f.name: (f.min_version, f.max_version) for f in v4.supported_features} == {
        "metadata.version": (7, 33), "transaction.version": (0, 2), "group.version": (0, 1),
        "share.version": (0, 1), "streams.version": (0, 1)}
    # a new node finalizes the defaults: Kafka 4's, capped at what is built; nothing at 0 is listed
    assert finalized(c) == (0, {"metadata.version": 33, "transaction.version": 2, "group.version": 1,
                                "share.version": 1, "streams.version": 1})
    v3 = api_versions(c, 3)        # below v4 no feature whose minimum is 0 (KAFKA-17492)
    assert [(f.name, f.min_version, f.max_version) for f in v3.supported_features] == [("metadata.version", 7, 33)]
    assert v3.finalized_features_epoch == 0 and len(v3.finalized_features) == 5
    assert 57 in {k.api_key for k in v4.api_keys}
    c.close()


def test_upgrade_downgrade_and_validate_only(broker):
    c = WireClient("127.0.0.1", broker.port)
    # validate_only checks and changes nothing
    r = update(c, ("group.version", 0, ft.SAFE_DOWNGRADE), validate_only=True)
    assert (r.error_code, r.error_message, [(x.feature, x.error_code) for x in r.results]) == \
        (0, None, [("group.version", 0)])
    assert finalized(c) == (0, {"metadata.version": 33, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1})
    # a safe downgrade to 0 turns the consumer protocol off, as Kafka 4 does: still advertised, refused
    assert update(c, ("group.version", 0, ft.SAFE_DOWNGRADE)).error_code == 0
    assert finalized(c) == (1, {"metadata.version": 33, "transaction.version": 2, "share.version": 1, "streams.version": 1})
    assert {68, 69} <= {k.api_key for k in api_versions(c).api_keys}
    hb = c.call(68, 1, ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0,
                                                     rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
                                                     topic_partitions=[]))
    assert hb.error_code == UNSUPPORTED_VERSION
    described = c.call(69, 1, ConsumerGroupDescribeRequest(group_ids=["g"]))
    assert [g.error_code for g in described.groups] == [UNSUPPORTED_VERSION]
    # upgrade back (v2: no per-feature results), and an upgrade to the level held is accepted
    r = update(c, ("group.version", 1, ft.UPGRADE), version=2)
    assert (r.error_code, r.results) == (0, [])
    assert update(c, ("group.version", 1, ft.UPGRADE)).error_code == 0
    assert finalized(c) == (3, {"metadata.version": 33, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1})
    assert c.call(68, 1, ConsumerGroupHeartbeatRequest(group_id="g", member_id="m-1", member_epoch=0,
                                                       rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
                                                       topic_partitions=[])).error_code == 0
    # an unsafe downgrade of transaction.version, and v0's AllowDowngrade (a safe downgrade) back and forth
    assert update(c, ("transaction.version", 0, ft.UNSAFE_DOWNGRADE)).error_code == 0
    assert update(c, ("group.version", 0, True), version=0).error_code == 0
    assert finalized(c) == (5, {"metadata.version": 33, "share.version": 1, "streams.version": 1})
    r = update(c, ("group.version", 1, False), ("transaction.version", 1, False), version=0)
    assert (r.error_code, [x.feature for x in r.results]) == (0, ["group.version", "transaction.version"])
    assert finalized(c) == (6, {"metadata.version": 33, "transaction.version": 1, "group.version": 1, "share.version": 1, "streams.version": 1})
    c.close()


def test_share_version_0_turns_share_groups_off(broker):
    """As Kafka 4.4's KafkaApis: at share.version 0 the share group APIs stay advertised and answer
    UNSUPPORTED_VERSION (the client's "does not support the share group protocol"); at 1 they work."""
    c = WireClient("127.0.0.1", broker.port)
    join = ShareGroupHeartbeatRequest(group_id="sg", member_id="m", member_epoch=0, subscribed_topic_names=["t"])
    fetch = ShareFetchRequest(group_id="sg", member_id="m", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
                              max_bytes=1024, max_records=10, batch_size=10, topics=[], forgotten_topics_data=[])
    assert c.call(76, 1, join).error_code == 0
    assert update(c, ("share.version", 0, ft.SAFE_DOWNGRADE)).error_code == 0
    assert {76, 77, 78, 79, 90} <= {k.api_key for k in api_versions(c).api_keys}
    assert c.call(76, 1, join).error_code == UNSUPPORTED_VERSION
    assert c.call(78, 1, fetch).error_code == UNSUPPORTED_VERSION
    assert update(c, ("share.version", 1, ft.UPGRADE)).error_code == 0
    assert c.call(78, 1, fetch).error_code == 0
    c.close()


@pytest.mark.parametrize("updates,message", [
    ([("group.version", 0, ft.UPGRADE)],
     "Invalid update version 0 for feature group.version. Can't downgrade the version of this feature without "
     "setting the upgrade type to either safe or unsafe downgrade."),
    ([("group.version", 2, ft.UPGRADE)],
     "Invalid update version 2 for feature group.version. Local controller 0 only supports versions 0-1"),
    ([("transaction.version", 3, ft.UPGRADE)],
     "Invalid update version 3 for feature transaction.version. Local controller 0 only supports versions 0-2"),
    ([("share.version", 2, ft.UPGRADE)],
     "Invalid update version 2 for feature share.version. Local controller 0 only supports versions 0-1"),
    ([("no.such.version", 1, ft.UPGRADE)],
     "Invalid update version 1 for feature no.such.version. Local controller 0 does not support this feature."),
    ([("no.such.version", 0, ft.SAFE_DOWNGRADE)],
     "Invalid update version 0 for feature no.such.version. Feature no.such.version not found."),
    ([("group.version", -1, ft.SAFE_DOWNGRADE)],
     "Invalid update version -1 for feature group.version. A feature version cannot be less than 0."),
    ([("group.version", 0, 0)],
     "Invalid update version 0 for feature group.version. The controller does not support the given upgrade type."),
    ([("group.version", 1, ft.SAFE_DOWNGRADE), ("transaction.version", 3, ft.SAFE_DOWNGRADE)],
     "Invalid update version 3 for feature transaction.version. Local controller 0 only supports versions 0-2"),
    ([("transaction.version", 0, ft.SAFE_DOWNGRADE), ("group.version", 1, ft.UNSAFE_DOWNGRADE),
      ("group.version", 9, ft.UPGRADE)],        # the first ones would apply: none does
     "Invalid update version 9 for feature group.version. Local controller 0 only supports versions 0-1"),
    ([("metadata.version", 32, ft.SAFE_DOWNGRADE)],
     "Unsupported metadata.version downgrade from 33 to 32. Refusing to perform the requested downgrade because "
     "it might delete metadata information."),
    ([("metadata.version", 31, ft.UNSAFE_DOWNGRADE)],
     "Unsupported metadata.version downgrade from 33 to 31. Unsafe metadata downgrade is not supported in this "
     "version."),
    ([("metadata.version", 34, ft.UPGRADE)],
     "Invalid update version 34 for feature metadata.version. Local controller 0 only supports versions 7-33"),
])
def test_refused_updates(broker, updates, message):
    c = WireClient("127.0.0.1", broker.port)
    for validate_only in (True, False):
        r = update(c, *updates, validate_only=validate_only)
        assert (r.error_code, r.error_message, r.results) == (INVALID_UPDATE_VERSION, FAILED + message, [])
    assert finalized(c) == (0, {"metadata.version": 33, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1})
    c.close()


def test_finalized_levels_survive_a_restart(broker):
    c = WireClient("127.0.0.1", broker.port)
    assert update(c, ("group.version", 0, ft.SAFE_DOWNGRADE)).error_code == 0
    c.close()
    with open(os.path.join(broker.log_dir, ft.FEATURES_FILE)) as f:    # the /feature znode's JSON, and the epoch
        assert json.load(f) == {"version": 2, "status": 1, "epoch": 1, "features": {
            "metadata.version": {"max_version_level": 33}, "share.version": {"max_version_level": 1},
            "streams.version": {"max_version_level": 1}, "transaction.version": {"max_version_level": 2}}}
    for stop in (broker.kill, broker.stop):
        stop()
        broker.start()
        c = WireClient("127.0.0.1", broker.port)
        assert finalized(c) == (1, {"metadata.version": 33, "transaction.version": 2, "share.version": 1, "streams.version": 1})
        c.close()


# -- the rules without a broker -----------------------------------------------------------------

def test_metadata_changed_is_kafkas():
    assert not ft.metadata_changed(30, 30)
    assert ft.metadata_changed(30, 29)            # 4.3-IV0 changed the metadata
    assert not ft.metadata_changed(29, 24)        # 4.0-IV2 .. 4.2-IV1 did not
    assert ft.metadata_changed(24, 22)            # 4.0-IV1 did
    assert not ft.metadata_changed(31, 30)        # 4.4-IV0 did not
    assert ft.metadata_changed(32, 31) and ft.metadata_changed(33, 32)     # 4.4-IV1 (CIDR ACLs) and 4.4-IV2 did


def test_validate_update_checks_every_broker():
    current = {"metadata.version": 30, "group.version": 1}
    others = {1: {"transaction.version": ft.VersionRange(0, 1)}, 2: {}}    # broker 2 registered no features
    with pytest.raises(ft.FeatureUpdateError, match="Broker 2 does not support this feature"):
        ft.validate_update(current, [("transaction.version", 1, ft.UPGRADE)], 0, others)
    assert ft.validate_update(current, [("group.version", 0, ft.SAFE_DOWNGRADE)], 0, others) == \
        {"metadata.version": 30}


def test_cache_gates_and_defaults():
    cache = ft.FeatureCache()
    assert cache.epoch == -1 and cache.finalized_level("group.version") == 1      # nothing finalized: defaults
    seen = []
    cache.add_listener(seen.append)
    cache.update({"metadata.version": 30}, 4)
    assert cache.finalized_level("group.version") == 0 and cache.finalized_level("no.such") == 0
    cache.update({"group.version": 1}, 3)            # a late watch: ignored
    assert cache.epoch == 4 and len(seen) == 1


def test_a_damaged_file_is_refused(tmp_path):
    (tmp_path / ft.FEATURES_FILE).write_text('{"version": 2, "features": {"group.version": {}}}')
    with pytest.raises(ValueError, match="damaged"):
        ft.LocalFeatureStore(str(tmp_path)).read()


def test_levels_this_broker_cannot_serve_refuse_the_start(tmp_path):
    """As Kafka's broker with incompatible finalized features: a clear refusal, never a silent run."""
    ft.LocalFeatureStore(str(tmp_path)).write({"metadata.version": 30, "transaction.version": 3}, 7)
    manager = ft.LocalFeatureManager(ft.LocalFeatureStore(str(tmp_path)), ft.FeatureCache(), 0)
    with pytest.raises(ValueError, match=r"transaction.version.: 3.*does not support.*0-2"):
        manager.startup()
    ft.LocalFeatureStore(str(tmp_path)).write({"metadata.version": 30, "some.future.version": 3}, 8)
    manager.startup()                  # a feature it does not know is not its to refuse
    assert manager.cache.current == ft.FinalizedFeatures({"metadata.version": 30, "some.future.version": 3}, 8)


def test_the_feature_znode_watch():
    """What a broker makes of /feature (zk_features, without ZooKeeper): the levels at the znode's version;
    absent: the defaults; disabled: nothing finalized; unreadable: kept as it was, loudly."""
    from types import SimpleNamespace

    from kafka_compat.server.zk_features import ZkFeatureManager
    cache = ft.FeatureCache()
    watch = ZkFeatureManager(None, cache)._changed
    watch("/feature", b'{"version":2,"status":1,"features":{"group.version":{"max_version_level":1}}}',
          SimpleNamespace(version=3))
    assert cache.current == ft.FinalizedFeatures({"group.version": 1}, 3)
    watch("/feature", b'{"version":2,"status":1,"features":{"group.version":{"max_version_level":0}}}',
          SimpleNamespace(version=4))
    assert cache.current == ft.FinalizedFeatures({"group.version": 1}, 3)      # Kafka refuses a level below 1
    watch("/feature", b'{"version":2,"status":0,"features":{"group.version":{"max_version_level":1}}}',
          SimpleNamespace(version=5))
    assert cache.current == ft.FinalizedFeatures({}, 5)
    watch("/feature", None, None)
    assert cache.current == ft.FinalizedFeatures(ft.finalized_levels(None), -1)
