"""Kafka's log engine: partitions as directories of segments with sparse indexes.

Usable without the broker: ``LocalLog`` for one partition, ``LogManager`` for the
partitions of several log dirs with recovery, retention, flushing and the
cleaner in background threads. ``python -m kafka_compat.storage.dump`` prints files the
way Kafka's DumpLogSegments does.
"""
