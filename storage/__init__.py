"""Kafka's log engine: partitions as directories of segments with sparse indexes.

Usable without the broker: ``UnifiedLog`` for one partition (its segments, a ``LocalLog``,
with leader epochs, producer state, transactions and the high watermark), ``LogManager``
for the partitions of several log dirs with recovery, retention, flushing, producer expiry
and the cleaner in background threads. ``python -m kafka_compat.storage.dump`` prints files
the way Kafka's DumpLogSegments does.
"""
