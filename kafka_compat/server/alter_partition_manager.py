"""AlterPartitionManager: a leader's ISR proposals, sent to the controller (Kafka's DefaultAlterPartitionManager).

A partition proposes an ISR with `submit` and gets a future of the controller's
answer: (leader epoch, ISR, partition epoch) or a KafkaError with the
partition's error code. Proposals are batched: one AlterPartition (key 56) is in
flight at a time, and what is submitted meanwhile goes in the next one. A
request that fails as a whole (no controller known, a network error,
NOT_CONTROLLER, STALE_BROKER_EPOCH...) is sent again after a backoff with every
proposal it carried; partition-level errors go back to the partition, which
decides (Partition._on_isr_change_answered). Version 3 names topics by id and
brokers with epochs (-1, as ZooKeeper-mode brokers send); a topic whose id is not
known yet is sent with version 1, by name.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.alter_partition import AlterPartitionRequest
from ..protocol.primitives import ZERO_UUID

log = logging.getLogger(__name__)

ALTER_PARTITION = 56
VERSION_BY_ID = 3
VERSION_BY_NAME = 1


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 send: Callable[[int, int, object], Awaitable], retry_backoff_ms: int = 100):
        """``send(api_key, api_version, body)`` reaches the current controller and returns its answer
        (it raises when no controller is known or reachable)."""
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.send = send
        self.retry_backoff_ms = retry_backoff_ms
        self.unsent: dict[tuple[str, int], tuple[object, object, asyncio.Future]] = {}
        self.in_flight = False
        self._retry: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()

    def submit(self, partition, change, retry: bool = False) -> asyncio.Future:
        """Propose ``change`` (a PendingIsrChange) for ``partition`` (after the backoff with ``retry``).
        A second proposal for a partition whose first is still unsent fails with
        OPERATION_NOT_ATTEMPTED, as in Kafka."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if retry:
            loop.call_later(self.retry_backoff_ms / 1000, self._enqueue, partition, change, future)
        else:
            self._enqueue(partition, change, future)
        return future

    def _enqueue(self, partition, change, future: asyncio.Future) -> None:
        key = (partition.topic, partition.index)
        if key in self.unsent:
            future.set_exception(KafkaError(ErrorCode.OPERATION_NOT_ATTEMPTED,
                                            f"an ISR change for {key[0]}-{key[1]} is already queued"))
            return
        self.unsent[key] = (partition, change, future)
        self._maybe_send()

    def _maybe_send(self) -> None:
        if self.in_flight or not self.unsent or self._retry is not None:
            return
        batch, self.unsent = self.unsent, {}
        self.in_flight = True
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def build_request(self, batch) -> tuple[int, AlterPartitionRequest]:
        by_id = all(p.topic_id != ZERO_UUID for p, _, _ in batch.values())
        version = VERSION_BY_ID if by_id else VERSION_BY_NAME
        topics: dict[str, AlterPartitionRequest.TopicData] = {}
        for partition, change, _ in batch.values():
            topic = topics.get(partition.topic)
            if topic is None:
                topic = topics[partition.topic] = AlterPartitionRequest.TopicData(
                    topic_name=partition.topic, topic_id=partition.topic_id, partitions=[])
            topic.partitions.append(AlterPartitionRequest.PartitionData(
                partition_index=partition.index, leader_epoch=change.leader_epoch, new_isr=list(change.new_isr),
                new_isr_with_epochs=[AlterPartitionRequest.BrokerState(broker_id=b, broker_epoch=-1)
                                     for b in change.new_isr],
                leader_recovery_state=0, partition_epoch=change.partition_epoch))
        return version, AlterPartitionRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch(),
                                              topics=list(topics.values()))

    async def _send(self, batch) -> None:
        retry = False
        try:
            version, request = self.build_request(batch)
            response = await self.send(ALTER_PARTITION, version, request)
            if response.error_code:
                log.info("AlterPartition failed: %s; retrying", ErrorCode(response.error_code).name)
                retry = True
            else:
                self._complete(batch, response)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("cannot send AlterPartition to the controller: %s; retrying", e)
            retry = True
        finally:
            self.in_flight = False
        if retry:
            for key, item in batch.items():
                self.unsent.setdefault(key, item)
            self._retry = asyncio.get_running_loop().call_later(self.retry_backoff_ms / 1000, self._retry_now)
        else:
            self._maybe_send()

    def _retry_now(self) -> None:
        self._retry = None
        self._maybe_send()

    @staticmethod
    def _complete(batch, response) -> None:
        by_id = {p.topic_id: p.topic for p, _, _ in batch.values()}
        for topic in response.topics:
            name = topic.topic_name or by_id.get(topic.topic_id)
            for p in topic.partitions:
                item = batch.pop((name, p.partition_index), None)
                if item is None:
                    continue
                future = item[2]
                if future.done():
                    continue
                if p.error_code:
                    future.set_exception(KafkaError(p.error_code))
                else:
                    future.set_result((p.leader_epoch, tuple(p.isr), p.partition_epoch))
        for _, _, future in batch.values():      # the controller left these out: the partition retries
            if not future.done():
                future.set_exception(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                "the controller did not answer for this partition"))

    async def shutdown(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
