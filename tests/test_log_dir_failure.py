"""A log dir whose writes fail goes offline in a cluster member (Kafka's LogDirFailureChannel path).

Real logs in two temporary log dirs; the write that fails is a real one: a checkpoint whose path a
directory has taken (the rename over it fails with IsADirectoryError), as a failing disk refuses a
write. The cluster tests (interop/test_cluster_log_dir_failure.py) fill a real filesystem.
"""
from __future__ import annotations

import asyncio
import os
import types

from kafka_compat.storage import checkpoint
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.unified_log import FetchIsolation

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kafka_compat.protocol.records import build_batch
from kafka_compat.server.delayed_fetch import FetchParams, PartitionFetchInfo
from kafka_compat.server.describe_log_dirs import DescribeLogDirsApi
from kafka_compat.server.log_dir_failure_channel import LogDirFailureChannel
from kafka_compat.server.metadata_cache import PartitionLeadership
from kafka_compat.server.replica_manager import ReplicaManager

ME = 1
T = "t"
TOPIC_ID = b"\x01" * 16


def batch(value: bytes) -> bytearray:
    return bytearray(build_batch([(b"k", value, [], 1000)]))


def block(path: str) -> None:
    """A directory where a checkpoint file should be: writing it fails."""
    os.makedirs(path)


def leader(epoch: int) -> PartitionLeadership:
    return PartitionLeadership(ME, epoch, (ME,), (ME,))


def produce(rm: ReplicaManager, index: int) -> int:
    return rm.append_records(1000, 1, [(T, index, batch(b"v"))])[0].error_code


def fetch(rm: ReplicaManager, index: int) -> int:
    params = FetchParams(-1, 0, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    return rm.fetch_messages(params, [(T, index, PartitionFetchInfo(0, 1 << 20, -1, -1))])[0].error_code


def test_a_failed_log_dir_takes_its_partitions_offline_while_the_other_dir_serves_on(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    config = LogConfig({})

    async def main():
        logs = LogManager([a, b], config, topic_config=lambda topic: config, cleaner_enabled=False)
        logs.startup(background=False)
        channel = LogDirFailureChannel()
        rm = ReplicaManager(ME, logs, lambda topic: config, hw_checkpoint_interval_ms=3_600_000,
                            log_dir_failure_channel=channel)
        rm.startup()
        channel.start(asyncio.get_running_loop(), rm.handle_log_dir_failure)
        try:
            assert rm.apply_local_leadership(T, TOPIC_ID, {0: leader(0), 1: leader(0)}) == {0: 0, 1: 0}
            assert os.path.isdir(os.path.join(a, "t-0")) and os.path.isdir(os.path.join(b, "t-1"))
            assert produce(rm, 0) == produce(rm, 1) == ErrorCode.NONE

            block(os.path.join(a, checkpoint.REPLICATION_OFFSET_CHECKPOINT))
            rm.checkpoint_high_watermarks()          # the write in a fails: a goes offline
            await asyncio.sleep(0.05)
            assert channel.offline_log_dirs == {a} and rm.offline_log_dirs == [a] and logs.log_dirs == [b]
            assert not channel.maybe_add_offline_log_dir(a, "again", OSError("again"))   # reported once

            assert rm.get_partition(T, 0) is None and rm.get_partition(T, 1) is not None
            assert produce(rm, 0) == fetch(rm, 0) == ErrorCode.KAFKA_STORAGE_ERROR
            assert produce(rm, 1) == fetch(rm, 1) == ErrorCode.NONE
            result = rm.become_leader_or_follower(0, 1, [(T, TOPIC_ID, {0: leader(1), 1: leader(1), 2: leader(1)})])
            assert result.partition_errors == {(T, 0): ErrorCode.KAFKA_STORAGE_ERROR, (T, 1): ErrorCode.NONE,
                                               (T, 2): ErrorCode.NONE}
            assert os.path.isdir(os.path.join(b, "t-2"))          # a new log goes to a live dir
            assert rm.apply_stop_replica(0, 1, [(T, 0, 1, False)])[1] == {(T, 0): ErrorCode.KAFKA_STORAGE_ERROR}

            described = DescribeLogDirsApi(rm).handle_describe_log_dirs(
                types.SimpleNamespace(body=DescribeLogDirsRequest(topics=None)))
            by_dir = {r.log_dir: r for r in described.results}
            assert by_dir[a].error_code == ErrorCode.KAFKA_STORAGE_ERROR and by_dir[a].topics == []
            assert by_dir[b].error_code == ErrorCode.NONE
            assert sorted(p.partition_index for t in by_dir[b].topics for p in t.partitions) == [1, 2]
        finally:
            rm.shutdown()
            logs.shutdown()
        assert checkpoint.had_clean_shutdown(b) and not checkpoint.had_clean_shutdown(a)   # a: recovered next start
    asyncio.run(main())


def test_a_single_node_keeps_serving_a_dir_whose_write_failed(tmp_path):
    """Without a channel (no zookeeper.connect) nobody could take over: the error is logged, nothing goes offline."""
    d = str(tmp_path / "logs")
    config = LogConfig({})

    async def main():
        logs = LogManager([d], config, topic_config=lambda topic: config, cleaner_enabled=False)
        logs.startup(background=False)
        rm = ReplicaManager(ME, logs, lambda topic: config, hw_checkpoint_interval_ms=3_600_000)
        rm.startup()
        try:
            rm.apply_local_leadership(T, TOPIC_ID, {0: leader(0)})
            block(os.path.join(d, checkpoint.REPLICATION_OFFSET_CHECKPOINT))
            rm.checkpoint_high_watermarks()
            await asyncio.sleep(0.05)
            assert rm.offline_log_dirs == [] and logs.log_dirs == [d]
            assert produce(rm, 0) == fetch(rm, 0) == ErrorCode.NONE
        finally:
            rm.shutdown()
            logs.shutdown()
    asyncio.run(main())


def test_the_log_managers_background_writes_report_their_dir(tmp_path):
    d = str(tmp_path / "logs")
    reported = []
    logs = LogManager([d], LogConfig({}), cleaner_enabled=False,
                      dir_failed=lambda directory, what, e: reported.append((directory, what, type(e))))
    logs.startup(background=False)
    try:
        logs.get_or_create_log(T, 0)
        os.remove(os.path.join(d, checkpoint.RECOVERY_POINT_CHECKPOINT))
        block(os.path.join(d, checkpoint.RECOVERY_POINT_CHECKPOINT))
        logs.checkpoint_recovery_points()
        assert reported and reported[0][0] == os.path.abspath(d)
        assert checkpoint.RECOVERY_POINT_CHECKPOINT in reported[0][1] and issubclass(reported[0][2], OSError)
        assert logs.handle_log_dir_failure(os.path.abspath(d)) == [(T, 0)]
        assert logs.log_dirs == [] and logs.get_log(T, 0) is None
    finally:
        logs.shutdown()
