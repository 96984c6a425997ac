"""DescribeLogDirs: each log dir with its partitions' sizes and its disk space.
"""
from __future__ import annotations

import os

from ..protocol.errors import ErrorCode
from ..protocol.messages.describe_log_dirs import DescribeLogDirsResponse
from .auth_helper import DESCRIBE, NO_AUTHORIZER, AuthHelper
from .registry import handles


class DescribeLogDirsApi:
    def __init__(self, replica_manager, auth: AuthHelper = NO_AUTHORIZER):
        self.replica_manager = replica_manager
        self.auth = auth

    @handles(35)
    def handle_describe_log_dirs(self, request):
        """Each log dir with the sizes of its partitions (null topics = all); v4+ adds disk space."""
        req = request.body
        if not self.auth.authorize_cluster(request, DESCRIBE):
            # no results; v3+ says why
            return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                           results=[])
        wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
        by_dir: dict[str, dict[str, list]] = {d: {} for d in self.replica_manager.log_manager.log_dirs}
        for d, sizes in self.replica_manager.log_dir_sizes().items():
            for (topic, index), size in sizes.items():
                if wanted is None or (topic, index) in wanted:
                    by_dir[d].setdefault(topic, []).append(DescribeLogDirsResponse.DescribeLogDirsPartition(
                        partition_index=index, partition_size=size, offset_lag=0, is_future_key=False))
        results = []
        for d, topics in by_dir.items():
            out = DescribeLogDirsResponse.DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=d, topics=[
                DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=sorted(
                    parts, key=lambda x: x.partition_index)) for name, parts in sorted(topics.items())])
            try:
                st = os.statvfs(d)
                out.total_bytes, out.usable_bytes = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            except OSError:
                out.error_code, out.topics = ErrorCode.KAFKA_STORAGE_ERROR, []
            results.append(out)
        for d in self.replica_manager.offline_log_dirs:     # a write there failed: Kafka reports only the error
            results.append(DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=d, topics=[]))
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
