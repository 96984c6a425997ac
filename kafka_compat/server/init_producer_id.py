"""InitProducerId: a producer id and epoch, for an idempotent producer or (with a transactional id)
from the transaction coordinator, which fences the id's previous producer.

v6 (KIP-939): Enable2Pc asks for a two-phase-commit producer, which needs TWO_PHASE_COMMIT on the
transactional id besides WRITE (Kafka's KafkaApis checks both, answering
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); KeepPreparedTxn takes an ongoing transaction over.

Most ids come from the block at hand; claiming the next block (a file write, or ZooKeeper in a
cluster) happens in a worker thread.
"""
from __future__ import annotations

import asyncio
import logging

from ..protocol.errors import ErrorCode
from ..protocol.messages.init_producer_id import InitProducerIdResponse
from ..security.acl import AclOperation
from .auth_helper import IDEMPOTENT_WRITE, NO_AUTHORIZER, TOPIC, TRANSACTIONAL_ID, WRITE, AuthHelper
from .producer_id_manager import ProducerIdManager
from .registry import handles

log = logging.getLogger(__name__)

EPOCH_EXHAUSTED = 32766       # Short.MAX_VALUE - 1: past it an id gets a fresh producer id
TWO_PHASE_COMMIT = int(AclOperation.TWO_PHASE_COMMIT)


class InitProducerIdApi:
    def __init__(self, producer_ids: ProducerIdManager, txn_coordinator, auth: AuthHelper = NO_AUTHORIZER):
        self.producer_ids = producer_ids
        self.txn_coordinator = txn_coordinator
        self.auth = auth

    @handles(22, 0, 6)
    def handle_init_producer_id(self, request):
        req = request.body
        resp = InitProducerIdResponse(throttle_time_ms=0, producer_id=-1, producer_epoch=-1)
        if req.transactional_id is not None:
            if not self.auth.authorize(request, WRITE, TRANSACTIONAL_ID, req.transactional_id):
                resp.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                return resp
            if req.enable2_pc and not self.auth.authorize(request, TWO_PHASE_COMMIT, TRANSACTIONAL_ID,
                                                          req.transactional_id):
                resp.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                return resp
            return self._transactional(request)
        if not (self.auth.authorize_cluster(request, IDEMPOTENT_WRITE)
                or self.auth.authorize_by_resource_type(request, WRITE, TOPIC)):
            # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
            resp.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
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

    async def _transactional(self, request):
        req = request.body
        v = request.api_version
        expected = None
        if v >= 3 and (req.producer_id >= 0 or req.producer_epoch >= 0):
            if req.producer_id < 0 or req.producer_epoch < 0:
                return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                              producer_id=-1, producer_epoch=-1)
            expected = (req.producer_id, req.producer_epoch)
        result = await self.txn_coordinator.handle_init_producer_id(
            req.transactional_id, req.transaction_timeout_ms, expected, enable_2pc=req.enable2_pc,
            keep_prepared=req.keep_prepared_txn)
        error = result.error
        if error == ErrorCode.PRODUCER_FENCED and v < 4:
            error = ErrorCode.INVALID_PRODUCER_EPOCH      # PRODUCER_FENCED is known from v4
        return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=result.producer_id,
                                      producer_epoch=result.producer_epoch,
                                      ongoing_txn_producer_id=result.ongoing_producer_id,
                                      ongoing_txn_producer_epoch=result.ongoing_producer_epoch)
