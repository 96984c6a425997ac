"""InitProducerId: a producer id and epoch for an idempotent producer.

Most ids come from the block at hand; claiming the next block (a file write, or
ZooKeeper in a cluster) happens in a worker thread.
"""
from __future__ import annotations

import asyncio
import logging

from ..protocol.errors import ErrorCode
from ..protocol.messages.init_producer_id import InitProducerIdResponse
from .producer_id_manager import ProducerIdManager
from .registry import handles

log = logging.getLogger(__name__)

EPOCH_EXHAUSTED = 32766       # Short.MAX_VALUE - 1: past it an id gets a fresh producer id


class InitProducerIdApi:
    def __init__(self, producer_ids: ProducerIdManager):
        self.producer_ids = producer_ids

    @handles(22, 0, 5)
    def handle_init_producer_id(self, request):
        req = request.body
        resp = InitProducerIdResponse(throttle_time_ms=0, producer_id=-1, producer_epoch=-1)
        if req.transactional_id is not None:
            # Transactions are not implemented: we are nobody's transaction coordinator.
            resp.error_code = ErrorCode.NOT_COORDINATOR
            return resp
        if request.api_version >= 3 and req.producer_id >= 0 and req.producer_epoch >= 0:
            # KIP-360: an idempotent producer bumps its epoch; at the top it needs a new id.
            if req.producer_epoch < EPOCH_EXHAUSTED:
                resp.producer_id, resp.producer_epoch = req.producer_id, req.producer_epoch + 1
                return resp
        pid = self.producer_ids.next_id()
        if pid is None:
            return self._with_new_block(resp)
        resp.producer_id, resp.producer_epoch = pid, 0
        return resp

    async def _with_new_block(self, resp):
        try:
            resp.producer_id, resp.producer_epoch = await asyncio.to_thread(self.producer_ids.generate), 0
        except Exception as e:          # ZooKeeper unreachable, say: the producer retries
            log.warning("cannot claim a block of producer ids: %s", e)
            resp.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return resp
