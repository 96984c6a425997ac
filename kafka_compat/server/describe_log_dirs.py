"""DescribeLogDirs and AlterReplicaLogDirs: the log dirs of this broker, and moving a replica between them.

DescribeLogDirs lists each log dir with its partitions' sizes (future replicas too, with how far
they are behind), its disk space (v4+) and whether it is cordoned (v5+). AlterReplicaLogDirs hands
each partition's destination to ReplicaManager.alter_replica_log_dirs, which does the checks and the
move.
"""
from __future__ import annotations

import os

from ..protocol.errors import ErrorCode
from ..protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsResponse
from ..protocol.messages.describe_log_dirs import DescribeLogDirsResponse
from .auth_helper import ALTER, DESCRIBE, NO_AUTHORIZER, AuthHelper
from .registry import handles

Moved = AlterReplicaLogDirsResponse


class DescribeLogDirsApi:
    def __init__(self, replica_manager, auth: AuthHelper = NO_AUTHORIZER):
        self.replica_manager = replica_manager
        self.auth = auth

    @handles(34)
    def handle_alter_replica_log_dirs(self, request):
        """Each partition's destination (the last one named wins, as Kafka's map does); the answer groups the
        partitions by topic. Without ALTER on the cluster every partition is CLUSTER_AUTHORIZATION_FAILED."""
        req = request.body
        if not self.auth.authorize_cluster(request, ALTER):
            return Moved(throttle_time_ms=0, results=[
                Moved.AlterReplicaLogDirTopicResult(topic_name=t.name, partitions=[
                    Moved.AlterReplicaLogDirPartitionResult(
                        partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for p in t.partitions])
                for d in req.dirs for t in d.topics])
        wanted = {(t.name, p): d.path for d in req.dirs for t in d.topics for p in t.partitions}
        errors = self.replica_manager.alter_replica_log_dirs(wanted)
        by_topic: dict[str, list] = {}
        for (topic, index), code in errors.items():
            by_topic.setdefault(topic, []).append(Moved.AlterReplicaLogDirPartitionResult(
                partition_index=index, error_code=code))
        return Moved(throttle_time_ms=0, results=[Moved.AlterReplicaLogDirTopicResult(topic_name=t, partitions=parts)
                                                  for t, parts in by_topic.items()])

    @handles(35)
    def handle_describe_log_dirs(self, request):
        """Each log dir with the sizes of its partitions (null topics = all); v4+ adds disk space."""
        req = request.body
        if not self.auth.authorize_cluster(request, DESCRIBE):
            # no results; v3+ says why
            return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                           results=[])
        wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
        rm = self.replica_manager
        by_dir: dict[str, dict[str, list]] = {d: {} for d in rm.log_manager.log_dirs}
        for d, entries in rm.describe_log_dirs().items():
            for topic, index, size, lag, future in entries:
                if wanted is None or (topic, index) in wanted:
                    by_dir[d].setdefault(topic, []).append(DescribeLogDirsResponse.DescribeLogDirsPartition(
                        partition_index=index, partition_size=size, offset_lag=lag, is_future_key=future))
        cordoned = rm.cordoned_log_dirs
        results = []
        for d, topics in by_dir.items():
            out = DescribeLogDirsResponse.DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=d, topics=[
                DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=sorted(
                    parts, key=lambda x: (x.partition_index, x.is_future_key)))
                for name, parts in sorted(topics.items())],
                is_cordoned=d in cordoned)
            try:
                st = os.statvfs(d)
                out.total_bytes, out.usable_bytes = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            except OSError:
                out.error_code, out.topics = ErrorCode.KAFKA_STORAGE_ERROR, []
            results.append(out)
        for d in rm.offline_log_dirs:     # a write there failed: Kafka reports only the error
            results.append(DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=d, topics=[]))
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
