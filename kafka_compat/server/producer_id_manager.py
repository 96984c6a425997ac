"""ProducerIdManager: hands out producer ids, in blocks, never the same id twice.

Ids come in blocks from a block source: a single node reserves them in a file
beside its data (`LocalProducerIdBlocks`: the end of the block is written and
fsynced before any id of it is used); a cluster member claims them from
ZooKeeper's /latest_producer_id_block (the composition root hands in a source
over KafkaZkClient), as Kafka's ZooKeeper-mode brokers do. Claiming a block may
block on I/O, so `next_id` answers only from the current block and the caller
runs `generate` in a worker thread when the block is used up.
"""
from __future__ import annotations

import os
import threading
from typing import Callable

from kafka_compat.storage.checkpoint import write_atomically

BLOCK_SIZE = 1000          # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
STATE_FILE = "kafka-compat-producer-id"


class LocalProducerIdBlocks:
    """A single node's block source: the end of the last reserved block, in a file."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, STATE_FILE)
        try:
            with open(self.path) as f:
                self.reserved = int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            self.reserved = 0

    def __call__(self) -> tuple[int, int]:
        start = self.reserved
        self.reserved = start + BLOCK_SIZE
        write_atomically(self.path, str(self.reserved))     # the rename is made durable: no id twice
        return start, BLOCK_SIZE


class ProducerIdManager:
    def __init__(self, block_source: Callable[[], tuple[int, int]]):
        """``block_source()`` claims a new block: (first id, count). It is called with the lock held."""
        self.block_source = block_source
        self.lock = threading.Lock()
        self.next = 0
        self.end = 0                  # exclusive: the current block is used up when next == end

    def next_id(self) -> int | None:
        """An id from the current block, or None when a new block must be claimed first."""
        with self.lock:
            if self.next >= self.end:
                return None
            pid = self.next
            self.next += 1
            return pid

    def generate(self) -> int:
        """An id, claiming a new block if needed (may block: a worker thread's call)."""
        with self.lock:
            if self.next >= self.end:
                start, count = self.block_source()
                self.next, self.end = start, start + count
            pid = self.next
            self.next += 1
            return pid
