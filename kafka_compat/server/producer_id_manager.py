"""ProducerIdManager: hands out producer ids, in blocks, never the same id twice.

A single node persists the end of its current block beside its data (written and
fsynced before any id of the block is used); a cluster member takes its blocks
from ZooKeeper's /latest_producer_id_block instead, as Kafka's brokers do.
"""
from __future__ import annotations

import os
import threading

BLOCK_SIZE = 1000          # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
STATE_FILE = "kafka-compat-producer-id"


class ProducerIdManager:
    def __init__(self, directory: str):
        self.path = os.path.join(directory, STATE_FILE)
        self.lock = threading.Lock()
        try:
            with open(self.path) as f:
                self.reserved = int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            self.reserved = 0
        self.next = self.reserved

    def generate(self) -> int:
        with self.lock:
            if self.next >= self.reserved:
                self.reserved = self.next + BLOCK_SIZE
                tmp = self.path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(str(self.reserved))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            pid = self.next
            self.next += 1
            return pid
