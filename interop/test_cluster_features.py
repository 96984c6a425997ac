"""Feature versioning (KIP-584) in a three-broker ZooKeeper cluster.

The controller finalizes the defaults in the `/feature` znode (Kafka's ZooKeeper-mode JSON); every
broker follows the znode, so an UpdateFeatures handled by the controller shows in every broker's
ApiVersions without a restart, the epoch being the znode's version. A broker that is not the
controller answers NOT_CONTROLLER. The levels survive the controller's death, the next controller
takes further updates, and a broker started again reads them.
"""
from __future__ import annotations

import json
import time

import pytest
from cluster_support import WAIT, ReadyCluster, skip_without_cluster
from wire import WireClient

from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.update_features import UpdateFeaturesRequest as U

pytestmark = skip_without_cluster()

NOT_CONTROLLER, INVALID_UPDATE_VERSION = 41, 95
SAFE_DOWNGRADE, UPGRADE = 2, 1
DEFAULTS = {"metadata.version": 33, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1}


@pytest.fixture(scope="module")
def cluster():
    with ReadyCluster(3, {"zookeeper.session.timeout.ms": 6000}) as c:
        yield c


def finalized(broker) -> tuple[int, dict[str, int]]:
    c = WireClient("127.0.0.1", broker.port)
    try:
        r = c.call(18, 4, ApiVersionsRequest(client_software_name="test", client_software_version="1"))
    finally:
        c.close()
    return r.finalized_features_epoch, {f.name: f.max_version_level for f in r.finalized_features}


def update(broker, feature: str, level: int, kind: int, validate_only: bool = False):
    c = WireClient("127.0.0.1", broker.port)
    try:
        return c.call(57, 1, U(timeout_ms=10000, validate_only=validate_only, feature_updates=[
            U.FeatureUpdateKey(feature=feature, max_version_level=level, upgrade_type=kind)]))
    finally:
        c.close()


def feature_znode(cluster) -> tuple[dict | None, int]:
    try:
        data, stat = cluster.zk.get("/feature")
    except Exception:
        return None, -1
    return json.loads(data), stat.version


def every_broker_shows(cluster, expected: tuple[int, dict[str, int]]) -> None:
    live = [b for b in cluster.brokers if b.running]
    cluster.wait_until(lambda: all(finalized(b) == expected for b in live), WAIT,
                       f"every broker to advertise {expected}")


def update_on_controller(cluster, *args):
    """Retried while the controller is being elected (NOT_CONTROLLER): the answer of the active one."""
    deadline = time.monotonic() + WAIT
    while True:
        controller = cluster.controller()
        if controller is not None and cluster.brokers[controller].running:
            r = update(cluster.brokers[controller], *args)
            if r.error_code != NOT_CONTROLLER or time.monotonic() > deadline:
                return controller, r
        assert time.monotonic() < deadline, "no controller took the update"
        time.sleep(0.2)


def test_an_update_reaches_every_broker_and_survives_a_controller_kill(cluster):
    cluster.wait_until(lambda: feature_znode(cluster)[0] is not None, WAIT, "the controller to create /feature")
    node, epoch = feature_znode(cluster)
    assert node == {"version": 2, "status": 1,
                    "features": {name: {"max_version_level": level} for name, level in DEFAULTS.items()}}
    every_broker_shows(cluster, (epoch, DEFAULTS))
    for i in range(3):      # each broker registers what it supports; the controller checks updates against it
        registered = json.loads(cluster.zk.get(f"/brokers/ids/{i}")[0])["features"]
        assert registered == {"metadata.version": {"min_version": 7, "max_version": 33},
                              "transaction.version": {"min_version": 0, "max_version": 2},
                              "group.version": {"min_version": 0, "max_version": 1},
                              "share.version": {"min_version": 0, "max_version": 1},
                              "streams.version": {"min_version": 0, "max_version": 1}}

    controller = cluster.controller()
    other = next(i for i in range(3) if i != controller)
    assert update(cluster.brokers[other], "group.version", 0, SAFE_DOWNGRADE).error_code == NOT_CONTROLLER
    assert update(cluster.brokers[controller], "group.version", 0, SAFE_DOWNGRADE, validate_only=True).error_code == 0
    refused = update(cluster.brokers[controller], "transaction.version", 3, UPGRADE)
    assert refused.error_code == INVALID_UPDATE_VERSION and "only supports versions 0-2" in refused.error_message
    assert feature_znode(cluster) == (node, epoch)          # neither changed anything

    r = update(cluster.brokers[controller], "group.version", 0, SAFE_DOWNGRADE)
    assert r.error_code == 0
    downgraded = {"metadata.version": 33, "transaction.version": 2, "share.version": 1, "streams.version": 1}
    assert finalized(cluster.brokers[controller]) == (epoch + 1, downgraded)   # the controller's broker at once
    every_broker_shows(cluster, (epoch + 1, downgraded))
    assert feature_znode(cluster)[0]["features"] == {n: {"max_version_level": v} for n, v in downgraded.items()}

    cluster.kill(controller)
    new_controller, r = update_on_controller(cluster, "group.version", 1, UPGRADE)
    assert new_controller != controller and r.error_code == 0
    every_broker_shows(cluster, (epoch + 2, DEFAULTS))

    cluster.restart(controller)
    every_broker_shows(cluster, (epoch + 2, DEFAULTS))
