"""Finalized features in a ZooKeeper cluster: Kafka's FinalizedFeatureChangeListener and the broker's
side of UpdateFeatures.

Every broker watches the `/feature` znode and puts what it holds into its FeatureCache, the znode's
version being the epoch, so a change made through any broker reaches all of them without a restart
(an absent znode: nothing finalized yet, the defaults apply until the controller creates it). The
controller alone changes the znode (KafkaController.update_features); a broker that is not the active
controller answers NOT_CONTROLLER, and clients (the Admin client, kafka-features) go to the controller
they learn from Metadata, as for CreateTopics and AlterPartitionReassignments.
"""
from __future__ import annotations

import asyncio
import logging

from ..protocol.errors import ErrorCode, KafkaError
from ..zk import zk_data as zd
from ..zk.kafka_zk_client import KafkaZkClient, ZkWatch
from .features import FeatureCache, FeatureUpdateError

log = logging.getLogger(__name__)

# how long UpdateFeatures waits for this broker's own cache to show the new epoch (read-your-writes)
OWN_CACHE_WAIT_S = 5.0


class ZkFeatureManager:
    def __init__(self, zk_client: KafkaZkClient, cache: FeatureCache, controller=None):
        """`controller`: this broker's KafkaController (None: it never answers UpdateFeatures)."""
        self.zk = zk_client
        self.cache = cache
        self.controller = controller
        self._watch: ZkWatch | None = None

    def startup(self) -> None:
        """Read /feature and follow it (blocking: from a worker thread)."""
        self._watch = self.zk.watch_data(zd.FEATURE_PATH, self._changed)

    def shutdown(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _changed(self, path: str, data: bytes | None, stat) -> None:
        """On kazoo's thread: the cache is replaced whole, so readers on the loop see one or the other."""
        if stat is None:
            log.warning("%s is absent: treating the finalized features as the defaults", path)
            self.cache.update(None, -1)
            return
        try:
            node = zd.decode_feature(data)
        except zd.ZkDataError as e:
            log.error("ignoring an unreadable %s: %s", path, e)
            return
        if node.status != zd.FeatureZNodeStatus.ENABLED:
            self.cache.update({}, stat.version)
        else:
            self.cache.update(dict(node.features), stat.version)

    async def update_features(self, updates: list[tuple[str, int, int]], validate_only: bool) -> None:
        controller = self.controller
        if controller is None or not controller.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        result = await asyncio.wrap_future(controller.update_features(updates, validate_only))
        if isinstance(result, FeatureUpdateError):
            raise result
        if result is not None and not await asyncio.to_thread(self.cache.wait_for_epoch, result, OWN_CACHE_WAIT_S):
            log.warning("finalized features epoch %d not seen by this broker's watch after %.0f s", result,
                        OWN_CACHE_WAIT_S)
