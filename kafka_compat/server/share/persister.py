"""The persister (KIP-932; Kafka's DefaultStatePersister and PersisterStateManager): how a share partition's
leader reads and writes its state at the share coordinator.

Each call goes to the leader of the share partition's `__share_group_state` partition: the MetadataCache
names it once the topic exists; before that a FindCoordinator with key type SHARE (which creates the
topic) asks a live broker. The coordinator on this broker is called in-process, another one with the
share-state RPC over the inter-broker listener (``send``). NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE and a lost connection are retried with backoff until ``timeout_ms`` passes, as
leadership of the topic moves; every other answer is the caller's. A single node (no ``send``) keeps
every call in-process, through the same coordinator.
"""
from __future__ import annotations

import asyncio
import logging
import random

from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from ...protocol.messages.find_coordinator import FindCoordinatorRequest
from ...protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from ...protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from ...protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from .share_coordinator import SHARE_GROUP_STATE_TOPIC
from .share_coordinator_shard import READ_UNINITIALIZED, PersistedState, coordinator_key

log = logging.getLogger(__name__)
E = ErrorCode
RETRIED = {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.REQUEST_TIMED_OUT}
SHARE_KEY_TYPE = 2
INITIALIZE, READ, WRITE, DELETE = 83, 84, 85, 86


class DefaultStatePersister:
    def __init__(self, coordinator, metadata_cache, broker_id: int, send=None, timeout_ms: int = 20000,
                 backoff_ms: int = 100, max_backoff_ms: int = 1000):
        """``send(broker id, api key, version, body)``: a coroutine of the response body, over the inter-broker
        listener; None on a single node."""
        self.coordinator = coordinator
        self.metadata_cache = metadata_cache
        self.broker_id = broker_id
        self.send = send
        self.timeout_ms = timeout_ms
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms

    # ------------------------------------------------------------ the calls
    async def read(self, group_id: str, topic_id: bytes, partition: int, leader_epoch: int
                   ) -> tuple[int, PersistedState | None]:
        """(error, state); (NONE, None) for a share partition never initialized."""
        R = ReadShareGroupStateRequest
        req = R(group_id=group_id, topics=[R.ReadStateData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        error, result = await self._call(READ, 0, req, group_id, topic_id, partition)
        if error == E.INVALID_REQUEST and result is not None and result.error_message == READ_UNINITIALIZED:
            return E.NONE, None
        if error:
            return error, None
        return E.NONE, PersistedState(result.start_offset, result.state_epoch, [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches])

    async def initialize(self, group_id: str, topic_id: bytes, partition: int, state_epoch: int,
                         start_offset: int) -> int:
        R = InitializeShareGroupStateRequest
        req = R(group_id=group_id, topics=[R.InitializeStateData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])
        return (await self._call(INITIALIZE, 0, req, group_id, topic_id, partition))[0]

    async def write(self, group_id: str, topic_id: bytes, partition: int, state: PersistedState, leader_epoch: int,
                    delivery_complete: int = -1) -> int:
        R = WriteShareGroupStateRequest
        req = R(group_id=group_id, topics=[R.WriteStateData(topic_id=topic_id, partitions=[R.PartitionData(
            partition=partition, state_epoch=state.state_epoch, leader_epoch=leader_epoch,
            start_offset=state.start_offset, delivery_complete_count=delivery_complete,
            state_batches=[R.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                           for f, last, s, c in state.batches])])])
        return (await self._call(WRITE, 1, req, group_id, topic_id, partition))[0]

    async def delete(self, group_id: str, topic_id: bytes, partition: int) -> int:
        R = DeleteShareGroupStateRequest
        req = R(group_id=group_id, topics=[R.DeleteStateData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=partition)])])
        return (await self._call(DELETE, 0, req, group_id, topic_id, partition))[0]

    # ------------------------------------------------------------ finding and asking the coordinator
    def _local(self, api_key: int, version: int, req):
        c = self.coordinator
        if api_key == READ:
            return c.read_state(req)
        if api_key == WRITE:
            return c.write_state(req, version)
        if api_key == INITIALIZE:
            return c.initialize_state(req)
        return c.delete_state(req)

    async def _coordinator_node(self, group_id: str, topic_id: bytes, partition: int) -> int | None:
        if self.metadata_cache.get_topic(SHARE_GROUP_STATE_TOPIC) is not None or self.send is None:
            index = self.coordinator.partition_for(group_id, topic_id, partition)
            state = self.metadata_cache.partition_state(SHARE_GROUP_STATE_TOPIC, index)
            if state is None or state.leader < 0 or not self.metadata_cache.is_alive(state.leader):
                if self.send is None:
                    self.coordinator.ensure_topic()
                return None
            return state.leader
        # the topic is not known here yet: FindCoordinator (key type SHARE) at a live broker creates it
        brokers = [b.broker_id for b in self.metadata_cache.alive_brokers()]
        if not brokers:
            return None
        response = await self.send(random.choice(brokers), 10, 6, FindCoordinatorRequest(
            key_type=SHARE_KEY_TYPE, coordinator_keys=[coordinator_key(group_id, topic_id, partition)]))
        found = response.coordinators[0] if response.coordinators else None
        return found.node_id if found is not None and found.error_code == E.NONE else None

    async def _call(self, api_key: int, version: int, req, group_id: str, topic_id: bytes, partition: int):
        """(error, the partition's result or None), retrying while the coordinator moves."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        backoff = self.backoff_ms
        error, result = E.COORDINATOR_NOT_AVAILABLE, None
        while True:
            try:
                node = await self._coordinator_node(group_id, topic_id, partition)
                if node is None:
                    error, result = E.COORDINATOR_NOT_AVAILABLE, None
                else:
                    if node == self.broker_id or self.send is None:
                        response = await self._local(api_key, version, req)
                    else:
                        response = await self.send(node, api_key, version, req)
                    result = response.results[0].partitions[0] if response.results else None
                    error = result.error_code if result is not None else E.UNKNOWN_SERVER_ERROR
            except asyncio.CancelledError:
                raise
            except Exception as e:      # the coordinator's broker is gone, or did not answer in time
                log.debug("share-state call %d for %s failed: %s", api_key, group_id, e)
                error, result = E.COORDINATOR_NOT_AVAILABLE, None
            if error not in RETRIED or loop.time() + backoff / 1000 > deadline:
                if error:
                    log.info("share-state call %d for %s-%d: %s", api_key, group_id, partition, E(error).name)
                return error, result
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, self.max_backoff_ms)


__all__ = ["DefaultStatePersister"]
