"""Partition and ReplicaManager in-process, without sockets: appends under each acks, the high watermark,
leader epochs, delayed produce and fetch, follower appends and truncation."""
from __future__ import annotations

import asyncio
import os

import pytest
from kafka_compat.storage import checkpoint
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.unified_log import FetchIsolation

from kafka_compat.protocol.batch_header import parse_header
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.records import batches, build_batch
from kafka_compat.server.delayed_fetch import FetchParams, PartitionFetchInfo
from kafka_compat.server.metadata_cache import MetadataCache, PartitionLeadership
from kafka_compat.server.replica_manager import ReplicaManager

ME, OTHER = 1, 2
T = "t"


def batch(*values: bytes, ts: int = 1000) -> bytearray:
    return bytearray(build_batch([(b"k", v, [], ts) for v in values]))


class Harness:
    """A ReplicaManager over real logs in a temporary directory, on the running loop."""

    def __init__(self, tmp_path, **topic_props):
        self.dir = str(tmp_path / "logs")
        self.config = LogConfig(topic_props)
        self.logs = LogManager([self.dir], self.config, topic_config=lambda topic: self.config,
                               cleaner_enabled=False)
        self.logs.startup(background=False)
        self.rm = ReplicaManager(ME, self.logs, lambda topic: self.config, hw_checkpoint_interval_ms=3_600_000)
        self.rm.startup()

    def lead(self, epoch: int = 0, isr=(ME,), replicas=(ME,), index: int = 0):
        state = PartitionLeadership(ME, epoch, tuple(isr), tuple(replicas))
        assert self.rm.apply_local_leadership(T, b"\x01" * 16, {index: state}) == {index: ErrorCode.NONE}
        return self.rm.get_partition(T, index)

    def follow(self, epoch: int = 0, index: int = 0):
        state = PartitionLeadership(OTHER, epoch, (ME, OTHER), (ME, OTHER))
        self.rm.apply_local_leadership(T, b"\x01" * 16, {index: state})
        return self.rm.get_partition(T, index)

    def produce(self, acks: int, *batches_, timeout_ms: int = 30_000, index: int = 0):
        return self.rm.append_records(timeout_ms, acks, [(T, index, b) for b in batches_])

    def fetch(self, offset: int, replica_id: int = -1, max_wait_ms: int = 0, min_bytes: int = 1,
              isolation=FetchIsolation.HIGH_WATERMARK, last_fetched_epoch: int = -1, epoch: int = -1):
        params = FetchParams(replica_id, max_wait_ms, min_bytes, 1 << 20,
                             FetchIsolation.LOG_END if replica_id >= 0 else isolation)
        return self.rm.fetch_messages(params, [(T, 0, PartitionFetchInfo(offset, 1 << 20, epoch,
                                                                         last_fetched_epoch))])

    def close(self):
        self.rm.shutdown()
        self.logs.shutdown()


def run(tmp_path, scenario, **topic_props):
    async def main():
        h = Harness(tmp_path, **topic_props)
        try:
            return await scenario(h)
        finally:
            h.close()
    return asyncio.run(main())


def values(read_result) -> list[bytes]:
    data = read_result.info.records.read_bytes()
    return [bytes(r.value) for b in batches(data) for r in b.records()]


# ---------------------------------------------------------------- acks and the high watermark
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_a_lone_leader_answers_every_acks_at_once_and_its_hw_follows(tmp_path, acks):
    async def scenario(h):
        p = h.lead()
        results = h.produce(acks, batch(b"a", b"b"), batch(b"c"))
        assert isinstance(results, list), "a single replica needs no wait, even for acks=-1"
        return [(r.error_code, r.base_offset) for r in results], p.high_watermark, p.log_end_offset

    results, hw, leo = run(tmp_path, scenario)
    assert results == [(0, 0), (0, 2)] and hw == leo == 3


def test_appended_batches_carry_the_leader_epoch(tmp_path):
    async def scenario(h):
        h.lead(epoch=0)
        h.produce(1, batch(b"a"))
        h.lead(epoch=3)
        h.produce(1, batch(b"b"), batch(b"c"))
        data = h.fetch(0)[0].info.records.read_bytes()
        return [b.partition_leader_epoch for b in batches(data)]

    assert run(tmp_path, scenario) == [0, 3, 3]


def test_acks_all_waits_for_the_follower_and_the_hw_moves_with_its_fetch(tmp_path):
    async def scenario(h):
        p = h.lead(isr=(ME, OTHER), replicas=(ME, OTHER))
        pending = h.produce(-1, batch(b"a", b"b"))
        assert isinstance(pending, asyncio.Future) and not pending.done()
        before = (p.high_watermark, p.log_end_offset)
        consumer_before = h.fetch(0)[0]
        h.fetch(0, replica_id=OTHER)           # the follower has nothing yet: its LEO is 0
        assert not pending.done() and p.high_watermark == 0
        h.fetch(2, replica_id=OTHER)           # the follower asks for offset 2: it holds 0 and 1
        result = await asyncio.wait_for(pending, 10)
        return before, consumer_before.info.records.size, [(r.error_code, r.base_offset) for r in result], \
            p.high_watermark

    before, consumer_bytes, result, hw = run(tmp_path, scenario)
    assert before == (0, 2) and consumer_bytes == 0    # consumers see nothing above the HW
    assert result == [(ErrorCode.NONE, 0)] and hw == 2


def test_acks_all_times_out_when_the_follower_never_fetches(tmp_path):
    async def scenario(h):
        h.lead(isr=(ME, OTHER), replicas=(ME, OTHER))
        result = await asyncio.wait_for(h.produce(-1, batch(b"a"), timeout_ms=50), 10)
        return [(r.error_code, r.base_offset) for r in result]

    assert run(tmp_path, scenario) == [(ErrorCode.REQUEST_TIMED_OUT, 0)]


def test_acks_all_below_min_insync_replicas_writes_nothing(tmp_path):
    async def scenario(h):
        p = h.lead(isr=(ME,), replicas=(ME, OTHER))
        refused = h.produce(-1, batch(b"a"))
        leo_after_refusal = p.log_end_offset
        accepted = h.produce(1, batch(b"b"))          # acks=1 still works
        return refused[0].error_code, leo_after_refusal, accepted[0].error_code, p.log_end_offset

    assert run(tmp_path, scenario, **{"min.insync.replicas": 2}) == (ErrorCode.NOT_ENOUGH_REPLICAS, 0,
                                                                     ErrorCode.NONE, 1)


def test_the_isr_shrinking_below_min_isr_after_the_append_holds_the_high_watermark(tmp_path):
    """Kafka 3.7+ (KAFKA-15583): under min.insync.replicas the HW stays, so the acks=-1 produce is never
    acknowledged (it times out) although its batch is in the log."""
    async def scenario(h):
        h.lead(isr=(ME, OTHER), replicas=(ME, OTHER))
        pending = h.produce(-1, batch(b"a"), timeout_ms=200)
        h.lead(isr=(ME,), replicas=(ME, OTHER))       # the follower left the ISR (same epoch)
        result = await asyncio.wait_for(pending, 10)
        partition = h.rm.get_partition(T, 0)
        return result[0].error_code, partition.high_watermark, partition.log_end_offset

    assert run(tmp_path, scenario, **{"min.insync.replicas": 2}) == (ErrorCode.REQUEST_TIMED_OUT, 0, 1)


def test_only_the_leader_appends(tmp_path):
    async def scenario(h):
        h.follow()
        return h.produce(1, batch(b"a"))[0].error_code, h.rm.get_partition(T, 0).log_end_offset

    assert run(tmp_path, scenario) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 0)


def test_an_unknown_partition_and_an_internal_topic_are_refused(tmp_path):
    async def scenario(h):
        h.lead()
        unknown = h.rm.append_records(1000, 1, [(T, 5, batch(b"a"))])[0].error_code
        internal = h.rm.append_records(1000, 1, [("__consumer_offsets", 0, batch(b"a"))])[0].error_code
        return unknown, internal

    assert run(tmp_path, scenario) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION)


# ---------------------------------------------------------------- delayed fetch
def test_a_waiting_fetch_completes_on_the_append_that_brings_min_bytes(tmp_path):
    async def scenario(h, monkeypatch_reads):
        p = h.lead()
        waiting = h.fetch(0, max_wait_ms=60_000, min_bytes=600)
        assert isinstance(waiting, asyncio.Future)
        reads = monkeypatch_reads(p)
        h.produce(1, batch(b"x" * 100))            # about 170 bytes: not enough
        h.produce(1, batch(b"y" * 100))
        assert not waiting.done()
        reads_while_waiting = reads[0]
        h.produce(1, batch(b"z" * 400))
        result = await asyncio.wait_for(waiting, 10)
        return reads_while_waiting, values(result[0])

    def counting(partition):
        count = [0]
        real = partition.log.read

        def read(*args, **kwargs):
            count[0] += 1
            return real(*args, **kwargs)
        partition.log.read = read
        return count

    reads, got = run(tmp_path, lambda h: scenario(h, counting))
    assert reads == 0, "deciding whether a waiting fetch can complete must not read the log"
    assert got == [b"x" * 100, b"y" * 100, b"z" * 400]


def test_a_waiting_fetch_answers_when_leadership_moves(tmp_path):
    async def scenario(h):
        h.lead(epoch=0)
        waiting = h.fetch(0, max_wait_ms=60_000, epoch=0)
        h.follow(epoch=1)
        result = await asyncio.wait_for(waiting, 10)
        return result[0].error_code

    assert run(tmp_path, scenario) == ErrorCode.FENCED_LEADER_EPOCH


def test_fetch_epoch_checks(tmp_path):
    async def scenario(h):
        h.lead(epoch=5)
        return h.fetch(0, epoch=4)[0].error_code, h.fetch(0, epoch=6)[0].error_code, h.fetch(0, epoch=5)[0].error_code

    assert run(tmp_path, scenario) == (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NONE)


# ---------------------------------------------------------------- epochs, followers, truncation
def test_offset_for_leader_epoch_answers_from_the_epoch_cache(tmp_path):
    async def scenario(h):
        h.lead(epoch=0)
        h.produce(1, batch(b"a"), batch(b"b"))         # epoch 0: offsets 0, 1
        h.lead(epoch=2)
        h.produce(1, batch(b"c"))                      # epoch 2: offset 2
        rm = h.rm
        return [tuple(rm.last_offset_for_leader_epoch(T, 0, -1, e)) for e in (0, 1, 2, 3)]

    assert run(tmp_path, scenario) == [(0, 0, 2), (0, 0, 2), (0, 2, 3), (0, -1, -1)]


def test_a_follower_keeps_the_leaders_offsets_and_epochs_and_truncates(tmp_path):
    async def scenario(h):
        p = h.follow(epoch=4)
        leader_side = bytearray(build_batch([(b"k", b"a", [], 1), (b"k", b"b", [], 1)], base_offset=0,
                                            partition_leader_epoch=4))
        more = bytearray(build_batch([(b"k", b"c", [], 1)], base_offset=2, partition_leader_epoch=4))
        p.append_records_to_follower(leader_side)
        p.append_records_to_follower(more)
        after_append = (p.log_end_offset, p.log.latest_epoch)
        p.truncate_to(2)
        data = p.log.read(0, 1 << 20, FetchIsolation.LOG_END, True).records.read_bytes()
        return after_append, p.log_end_offset, [(b.base_offset, b.partition_leader_epoch) for b in batches(data)]

    after_append, leo, kept = run(tmp_path, scenario)
    assert after_append == (3, 4) and leo == 2 and kept == [(0, 4)]


def test_a_follower_fetch_with_a_diverging_epoch_gets_the_divergence_point(tmp_path):
    async def scenario(h):
        h.lead(epoch=0, isr=(ME, OTHER), replicas=(ME, OTHER))
        h.produce(1, batch(b"a"), batch(b"b"))         # epoch 0 ends at 2
        h.lead(epoch=1, isr=(ME, OTHER), replicas=(ME, OTHER))
        h.produce(1, batch(b"c"))
        # the follower had written offsets 2.. in epoch 0 that the leader never had
        r = h.fetch(3, replica_id=OTHER, last_fetched_epoch=0)[0]
        return r.diverging_epoch, r.info

    assert run(tmp_path, scenario) == ((0, 2), None)


# ---------------------------------------------------------------- log start offset and checkpoints
def test_delete_records_moves_the_log_start_but_not_past_the_hw(tmp_path):
    async def scenario(h):
        h.lead()
        h.produce(1, batch(b"a"), batch(b"b"), batch(b"c"))
        return h.rm.delete_records(30000, [(T, 0, 2), (T, 0, 9), (T, 0, -1)])

    # each answer's low watermark is the partition's once the whole request is done (DelayedDeleteRecords)
    assert run(tmp_path, scenario) == [(ErrorCode.NONE, 3), (ErrorCode.OFFSET_OUT_OF_RANGE, -1), (ErrorCode.NONE, 3)]


def test_high_watermarks_and_epochs_are_checkpointed_in_kafkas_format(tmp_path):
    async def scenario(h):
        h.lead(epoch=0)
        h.produce(1, batch(b"a"), batch(b"b"))
        h.lead(epoch=7)
        h.produce(1, batch(b"c"))
        h.rm.checkpoint_high_watermarks()
        return h.rm.get_partition(T, 0).log_dir

    part_dir = run(tmp_path, scenario)
    hw_file = os.path.join(os.path.dirname(part_dir), checkpoint.REPLICATION_OFFSET_CHECKPOINT)
    assert open(hw_file).read() == "0\n1\nt 0 3\n"
    assert open(os.path.join(part_dir, "leader-epoch-checkpoint")).read() == "0\n2\n0 0\n7 2\n"


def test_an_idle_checkpoint_skips_the_walk_and_every_move_or_new_partition_is_written(tmp_path):
    def read(h):
        with open(os.path.join(h.dir, checkpoint.REPLICATION_OFFSET_CHECKPOINT)) as f:
            return f.read()

    async def scenario(h):
        h.lead()
        h.produce(1, batch(b"a"))
        h.rm.checkpoint_high_watermarks()
        first = read(h)
        walked = []
        h.rm.partitions = WalkCounter(h.rm.partitions, walked)
        h.rm.checkpoint_high_watermarks()              # nothing moved: no walk
        idle = len(walked)
        h.produce(1, batch(b"b"), batch(b"c"))         # the high watermark moves: 1 -> 3
        h.rm.checkpoint_high_watermarks()
        moved = read(h)
        h.lead(index=1)                                # a new partition, its high watermark unmoved
        h.rm.checkpoint_high_watermarks()
        return first, idle, len(walked), moved, read(h)

    first, idle, walks, moved, added = run(tmp_path, scenario)
    assert first == "0\n1\nt 0 1\n"
    assert idle == 0 and walks == 2
    assert moved == "0\n1\nt 0 3\n"
    assert sorted(added.splitlines()[2:]) == ["t 0 3", "t 1 0"]


class WalkCounter(dict):
    """The partitions dict, counting the walks over its items."""

    def __init__(self, partitions, walked):
        super().__init__(partitions)
        self.walked = walked

    def items(self):
        self.walked.append(1)
        return super().items()


def test_the_checkpointed_high_watermark_is_where_a_restarted_follower_starts(tmp_path):
    async def first(h):
        h.lead(isr=(ME, OTHER), replicas=(ME, OTHER))
        h.produce(1, batch(b"a"), batch(b"b"), batch(b"c"))
        h.fetch(2, replica_id=OTHER)                   # the follower holds 0 and 1: HW 2
        return h.rm.get_partition(T, 0).high_watermark

    async def second(h):
        return h.follow(epoch=1).high_watermark

    assert run(tmp_path, first) == 2
    assert run(tmp_path, second) == 2


def test_leader_epoch_is_in_the_batch_header_bytes(tmp_path):
    async def scenario(h):
        h.lead(epoch=9)
        h.produce(1, batch(b"a"))
        return parse_header(h.fetch(0)[0].info.records.read_bytes()).partition_leader_epoch

    assert run(tmp_path, scenario) == 9


def test_a_partition_led_elsewhere_is_not_leader_or_follower_here(tmp_path):
    """Kafka's answer for a partition this broker does not host: NOT_LEADER_OR_FOLLOWER when the cluster's
    metadata has it (the client goes to its leader), UNKNOWN_TOPIC_OR_PARTITION when nobody has it."""
    async def scenario(h):
        cache = MetadataCache(ME, "cluster")
        cache.update_partitions(T, b"\x01" * 16, {0: PartitionLeadership(OTHER, 0, (OTHER,), (OTHER,))})
        rm = ReplicaManager(ME, h.logs, lambda topic: h.config, hw_checkpoint_interval_ms=3_600_000,
                            metadata_cache=cache)
        rm.startup()
        try:
            produced = rm.append_records(1000, 1, [(T, 0, batch(b"a")), ("nowhere", 0, batch(b"b"))])
            fetched = rm.fetch_messages(FetchParams(-1, 0, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK), [
                (T, 0, PartitionFetchInfo(0, 1 << 20)), ("nowhere", 0, PartitionFetchInfo(0, 1 << 20))])
            return [r.error_code for r in produced], [r.error_code for r in fetched]
        finally:
            rm.shutdown()

    not_here, unknown = ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert run(tmp_path, scenario) == ([not_here, unknown], [not_here, unknown])
