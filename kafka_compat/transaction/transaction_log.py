"""TransactionLog: the records of `__transaction_state`, keyed and encoded as Kafka writes them.

Key: int16 version 0, then TransactionLogKey {TransactionalId}. Value: int16
version, then TransactionLogValue: version 1 (flexible, with the tagged
PreviousProducerId, NextProducerId, NextProducerEpoch and ClientTransactionVersion) while the
finalized `transaction.version` is 1 or more, version 0 below (Kafka's
TransactionVersion.transactionLogValueVersion); both are read. A null value is
a tombstone: the id expired. The partition of an id is Kafka's
`Utils.abs(transactionalId.hashCode) % partitions`.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from ..group.coordinator_records import partition_for
from ..protocol.messages.transaction_log import TransactionLogKey, TransactionLogValue
from .transaction_metadata import TransactionMetadata, TransactionState, TxnTransitMetadata

KEY_VERSION = 0

def value_version(transaction_version_level: int) -> int:
    return 1 if transaction_version_level >= 1 else 0
_VERSION = struct.Struct(">h")

__all__ = ["key_to_bytes", "value_to_bytes", "read_key", "read_value",
           "partition_for", "LoggedTransaction"]


def _prefixed(version: int, message) -> bytes:
    b = bytearray(_VERSION.pack(version))
    message.encode_into(b, version)
    return bytes(b)


def key_to_bytes(transactional_id: str) -> bytes:
    return _prefixed(KEY_VERSION, TransactionLogKey(transactional_id=transactional_id))


def value_to_bytes(t: TxnTransitMetadata, transaction_version_level: int = 0) -> bytes:
    """The value for a transit; Empty states carry a null partition list, as Kafka writes them."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(p)
    partitions = None if t.state == TransactionState.EMPTY else [
        TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=ps) for topic, ps in by_topic.items()]
    return _prefixed(value_version(transaction_version_level), TransactionLogValue(
        producer_id=t.producer_id, previous_producer_id=t.previous_producer_id, next_producer_id=t.next_producer_id,
        producer_epoch=t.producer_epoch, next_producer_epoch=t.next_producer_epoch,
        transaction_timeout_ms=t.txn_timeout_ms,
        transaction_status=int(t.state), transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.txn_last_update_timestamp,
        transaction_start_timestamp_ms=t.txn_start_timestamp,
        client_transaction_version=t.client_transaction_version))


def read_key(buf) -> str | None:
    """The transactional id of a record key; None for a key version Kafka would skip."""
    version = _VERSION.unpack_from(buf, 0)[0]
    if version != KEY_VERSION:
        return None
    return TransactionLogKey.decode(buf, version, 2)[0].transactional_id


class LoggedTransaction(NamedTuple):
    transactional_id: str
    metadata: TransactionMetadata


def read_value(transactional_id: str, buf) -> TransactionMetadata:
    version = _VERSION.unpack_from(buf, 0)[0]
    if version not in (0, 1):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    v = TransactionLogValue.decode(buf, version, 2)[0]
    partitions = [(t.topic, p) for t in (v.transaction_partitions or ()) for p in t.partition_ids]
    flexible = version >= 1
    return TransactionMetadata(transactional_id, v.producer_id, v.previous_producer_id if flexible else -1,
                               v.producer_epoch, -1, v.transaction_timeout_ms, TransactionState(v.transaction_status),
                               partitions, v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms,
                               v.next_producer_id if flexible else -1, v.client_transaction_version if flexible else 0,
                               v.next_producer_epoch if flexible else -1)
