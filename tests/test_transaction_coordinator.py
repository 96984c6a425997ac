"""The transaction coordinator over the wire: the state machine's answers, `__transaction_state`'s
records, markers and the last stable offset, pending transactional offsets, timeouts, expiry,
and a restart that loads what was written."""
from __future__ import annotations

import asyncio
import io
import os
import time
from contextlib import asynccontextmanager

from kafka_compat.storage import dump
from wire import AsyncWireClient

from kafka_compat.group.coordinator_records import java_string_hash
from kafka_compat.protocol.errors import ErrorCode as E
from kafka_compat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kafka_compat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kafka_compat.protocol.messages.end_txn import EndTxnRequest
from kafka_compat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafka_compat.protocol.messages.init_producer_id import InitProducerIdRequest
from kafka_compat.protocol.messages.list_offsets import ListOffsetsRequest
from kafka_compat.protocol.messages.list_transactions import ListTransactionsRequest
from kafka_compat.protocol.messages.offset_fetch import OffsetFetchRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.messages.transaction_log import TransactionLogKey, TransactionLogValue
from kafka_compat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kafka_compat.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kafka_compat.protocol.records import batches, build_batch
from kafka_compat.server.broker import Broker
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.transaction import TRANSACTION_STATE_TOPIC_NAME

WAIT = 20.0     # seconds an outcome may take before the test gives up (a hang, not a timing check)
INIT, PRODUCE, LIST_OFFSETS, FETCH_OFFSETS, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 22, 0, 2, 9, 24, 25, 26
WRITE_MARKERS, TXN_COMMIT, DESCRIBE, LIST, API_VERSIONS, FIND_COORDINATOR = 27, 28, 65, 66, 18, 10


def settings(path, **overrides) -> BrokerConfig:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(path), "num.partitions": "2",
             "offsets.topic.num.partitions": "4", "transaction.state.log.num.partitions": "50"}
    props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return BrokerConfig.from_properties(props)


@asynccontextmanager
async def running(path, **overrides):
    b = Broker(settings(path, **overrides))
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


async def connect(b) -> AsyncWireClient:
    """A client once the coordinator is ready: FindCoordinator creates __transaction_state, then it loads."""
    c = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
    r = await c.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["any"]))
    assert r.coordinators[0].error_code == E.NONE

    async def loaded():
        return not b.txn_coordinator.state_manager.loading
    await until(loaded, "__transaction_state to load")
    return c


async def until(predicate, what: str):
    deadline = time.monotonic() + WAIT
    while True:
        value = await predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.05)


class Txn:
    """One transactional producer speaking the protocol by hand."""

    def __init__(self, c: AsyncWireClient, txn_id: str):
        self.c, self.txn_id = c, txn_id
        self.pid, self.epoch, self.seq = -1, -1, {}

    async def init(self, timeout_ms: int = 60000, version: int = 4, expected=None):
        pid, epoch = expected or (-1, -1)
        r = await self.c.call(INIT, version, InitProducerIdRequest(
            transactional_id=self.txn_id, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch))
        if r.error_code == E.NONE:
            self.pid, self.epoch, self.seq = r.producer_id, r.producer_epoch, {}
        return r

    async def init_until_done(self, **kw):
        async def attempt():
            r = await self.init(**kw)
            return r if r.error_code != E.CONCURRENT_TRANSACTIONS else None
        return await until(attempt, "InitProducerId to stop answering CONCURRENT_TRANSACTIONS")

    async def add(self, topic: str, *partitions: int, version: int = 3, epoch: int | None = None,
                  pid: int | None = None) -> dict[tuple[str, int], int]:
        r = await self.c.call(ADD_PARTITIONS, version, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.txn_id, v3_and_below_producer_id=self.pid if pid is None else pid,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic,
                                                                                  partitions=list(partitions))]))
        return {(t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

    async def produce(self, topic: str, partition: int, n: int, epoch: int | None = None, version: int = 9) -> int:
        seq = self.seq.get((topic, partition), 0)
        now = int(time.time() * 1000)
        batch = build_batch([(b"k%d" % i, b"v%d" % i, [], now) for i in range(seq, seq + n)], producer_id=self.pid,
                            producer_epoch=self.epoch if epoch is None else epoch, base_sequence=seq,
                            is_transactional=True)
        r = await self.c.call(PRODUCE, version, ProduceRequest(transactional_id=self.txn_id, acks=-1, timeout_ms=5000,
                                                         topic_data=[ProduceRequest.TopicProduceData(
                                                             name=topic, partition_data=[
                                                                 ProduceRequest.PartitionProduceData(
                                                                     index=partition, records=batch)])]))
        error = r.responses[0].partition_responses[0].error_code
        if error == E.NONE:
            self.seq[(topic, partition)] = seq + n
        return error

    async def end(self, committed: bool, version: int = 3, epoch: int | None = None) -> int:
        r = await self.c.call(END_TXN, version, EndTxnRequest(
            transactional_id=self.txn_id, producer_id=self.pid, producer_epoch=self.epoch if epoch is None else epoch,
            committed=committed))
        return r.error_code

    async def describe(self):
        r = await self.c.call(DESCRIBE, 0, DescribeTransactionsRequest(transactional_ids=[self.txn_id]))
        return r.transaction_states[0]

    async def settled(self, state: str):
        async def check():
            d = await self.describe()
            return d if d.transaction_state == state else None
        return await until(check, f"{self.txn_id} to reach {state}")


async def latest(c: AsyncWireClient, topic: str, partition: int, isolation: int) -> int:
    r = await c.call(LIST_OFFSETS, 5, ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
    return r.topics[0].partitions[0].offset


def txn_state_records(b, txn_id: str) -> list[tuple[int, str, int, TransactionLogValue | None]]:
    """(key version, id, value version, value) of every record of the id's __transaction_state partition."""
    index = abs(java_string_hash(txn_id)) % 50
    start, end = b.replica_manager.log_offsets(TRANSACTION_STATE_TOPIC_NAME, index)
    data = b.replica_manager.read_local(TRANSACTION_STATE_TOPIC_NAME, index, start, 1 << 20).records.read_bytes()
    out = []
    for batch in batches(data):
        for record in batch.records():
            key_version = int.from_bytes(record.key[:2], "big", signed=True)
            key = TransactionLogKey.decode(bytes(record.key), 0, 2)[0]
            if key.transactional_id != txn_id:
                continue
            if record.value is None:
                out.append((key_version, key.transactional_id, -1, None))
                continue
            value_version = int.from_bytes(record.value[:2], "big", signed=True)
            out.append((key_version, key.transactional_id, value_version,
                        TransactionLogValue.decode(bytes(record.value), value_version, 2)[0]))
    return out


# ---------------------------------------------------------------- versions
def test_transactional_apis_are_advertised_at_kafkas_ranges_with_transaction_version_2_finalized(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            c = await connect(b)
            r = await c.call(API_VERSIONS, 4, ApiVersionsRequest(client_software_name="t",
                                                                  client_software_version="1"))
            await c.close()
            return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}, r

    keys, r = asyncio.run(scenario())
    assert {k: keys[k] for k in (22, 24, 25, 26, 27, 28, 65, 66)} == {
        22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (0, 2), 28: (0, 6), 65: (0, 0), 66: (0, 2)}
    assert [(f.name, f.min_version, f.max_version) for f in r.supported_features
            if f.name == "transaction.version"] == [("transaction.version", 0, 2)]
    # a new data directory finalizes Kafka 4's default: transactions v2
    assert [(f.name, f.max_version_level) for f in r.finalized_features
            if f.name == "transaction.version"] == [("transaction.version", 2)]


# ---------------------------------------------------------------- InitProducerId
def test_init_producer_id_bumps_the_epoch_recognises_a_retry_and_fences_a_stale_producer(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            c = await connect(b)
            t = Txn(c, "bump")
            first = await t.init()
            second = await t.init()
            stale = await t.init(expected=(first.producer_id, 0))
            stale_v3 = await t.init(version=3, expected=(first.producer_id, 0))
            bumped = await t.init(expected=(first.producer_id, 1))
            retried = await Txn(c, "bump").init(expected=(first.producer_id, 1))
            half = await t.init(expected=(first.producer_id, -1))
            too_long = await Txn(c, "x").init(timeout_ms=900001)
            empty = await Txn(c, "").init()
            # an exhausted epoch: the next InitProducerId rotates to a new producer id at epoch 0
            md = b.txn_coordinator.state_manager.get_transaction_state("bump")[1].metadata
            md.producer_epoch = 32766
            rotated = await Txn(c, "bump").init()
            await c.close()
            return first, second, stale, stale_v3, bumped, retried, half, too_long, empty, rotated

    first, second, stale, stale_v3, bumped, retried, half, too_long, empty, rotated = asyncio.run(scenario())
    assert (first.error_code, first.producer_epoch) == (E.NONE, 0)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (E.NONE, first.producer_id, 1)
    assert stale.error_code == E.PRODUCER_FENCED and stale_v3.error_code == E.INVALID_PRODUCER_EPOCH
    assert (bumped.error_code, bumped.producer_epoch) == (E.NONE, 2)
    assert (retried.error_code, retried.producer_epoch) == (E.NONE, 2)     # a lost answer, asked again
    assert half.error_code == E.INVALID_REQUEST
    assert too_long.error_code == E.INVALID_TRANSACTION_TIMEOUT and empty.error_code == E.INVALID_REQUEST
    assert rotated.error_code == E.NONE and rotated.producer_id != first.producer_id and rotated.producer_epoch == 0


# ---------------------------------------------------------------- a whole transaction
def test_a_transaction_commits_with_markers_moves_the_lso_and_answers_each_misuse_as_kafka(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            b.controller.create_topic("t", 2, 1, {})
            c = await connect(b)
            t = Txn(c, "flow")
            await t.init()
            out = {"end_empty": await t.end(True),
                   "unknown": await t.add("nope", 0, version=3) | await t.add("t", 0, 7),
                   "fenced": await t.add("t", 0, epoch=t.epoch + 1),
                   "fenced_v1": await t.add("t", 0, version=1, epoch=t.epoch + 1),
                   "bad_pid": await t.add("t", 0, pid=t.pid + 1000),
                   "add": await t.add("t", 0, 1)}
            out["ongoing"] = await t.describe()
            out["produce"] = await t.produce("t", 0, 3)
            out["lso_open"] = await latest(c, "t", 0, 1)
            out["hw_open"] = await latest(c, "t", 0, 0)
            listed = await c.call(LIST, 1, ListTransactionsRequest(state_filters=["Ongoing", "Bogus"],
                                                                   producer_id_filters=[], duration_filter=-1))
            out["listed"] = (listed.unknown_state_filters,
                             [(s.transactional_id, s.transaction_state) for s in listed.transaction_states])
            out["commit"] = await t.end(True)
            out["complete"] = await t.settled("CompleteCommit")
            out["commit_again"] = await t.end(True)
            out["abort_after_commit"] = await t.end(False)
            out["lso_done"] = await latest(c, "t", 0, 1)
            out["hw_done"] = await latest(c, "t", 0, 0)
            out["records"] = txn_state_records(b, "flow")
            out["unknown_id"] = (await Txn(c, "never").describe()).error_code
            await c.close()
            return out

    out = asyncio.run(scenario())
    assert out["end_empty"] == E.INVALID_TXN_STATE
    assert out["unknown"] == {("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 0): E.OPERATION_NOT_ATTEMPTED,
                              ("t", 7): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert out["fenced"] == {("t", 0): E.PRODUCER_FENCED}
    assert out["fenced_v1"] == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    assert out["bad_pid"] == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert out["add"] == {("t", 0): E.NONE, ("t", 1): E.NONE}
    ongoing = out["ongoing"]
    assert (ongoing.error_code, ongoing.transaction_state) == (E.NONE, "Ongoing")
    assert [(x.topic, x.partitions) for x in ongoing.topics] == [("t", [0, 1])]
    assert out["produce"] == E.NONE
    assert (out["lso_open"], out["hw_open"]) == (0, 3)      # read_committed stops at the open transaction
    assert out["listed"] == (["Bogus"], [("flow", "Ongoing")])
    assert out["commit"] == E.NONE and out["complete"].topics == []
    assert out["commit_again"] == E.NONE and out["abort_after_commit"] == E.INVALID_TXN_STATE
    assert out["lso_done"] == out["hw_done"] == 4           # three records and the COMMIT marker
    states = [(kv, vv, v.transaction_status if v else None) for kv, _id, vv, v in out["records"]]
    # Empty (init), Ongoing (add), PrepareCommit, CompleteCommit: key v0, value v1 (transaction.version >= 1),
    # as Kafka writes them; a v1 client's transaction records ClientTransactionVersion 0 (TV_0, left out)
    assert states == [(0, 1, 0), (0, 1, 1), (0, 1, 2), (0, 1, 4)]
    assert [v.client_transaction_version for *_, v in out["records"]] == [0, 0, 0, 0]
    assert out["records"][0][3].transaction_partitions is None
    assert [(p.topic, p.partition_ids) for p in out["records"][2][3].transaction_partitions] == [("t", [0, 1])]
    assert out["unknown_id"] == E.TRANSACTIONAL_ID_NOT_FOUND


# ---------------------------------------------------------------- offsets in a transaction
async def fetch_offset(c: AsyncWireClient, group: str, topic: str, require_stable: bool):
    r = await c.call(FETCH_OFFSETS, 7, OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    p = r.topics[0].partitions[0]
    return p.error_code, p.committed_offset


async def txn_commit(c: AsyncWireClient, t: Txn, group: str, topic: str, offset: int):
    r = await c.call(TXN_COMMIT, 3, TxnOffsetCommitRequest(
        transactional_id=t.txn_id, group_id=group, producer_id=t.pid, producer_epoch=t.epoch, generation_id_or_member_epoch=-1,
        member_id="", topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                   committed_metadata="m")])]))
    return r.topics[0].partitions[0].error_code


def test_transactional_offsets_are_unstable_until_the_commit_marker_and_vanish_on_abort(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            b.controller.create_topic("in", 1, 1, {})
            c = await connect(b)
            t = Txn(c, "offsets")
            await t.init()
            out = {"add": (await c.call(ADD_OFFSETS, 2, AddOffsetsToTxnRequest(
                transactional_id="offsets", producer_id=t.pid, producer_epoch=t.epoch, group_id="g"))).error_code}
            out["commit_offsets"] = await txn_commit(c, t, "g", "in", 42)
            out["stable_pending"] = await fetch_offset(c, "g", "in", True)
            out["unstable_read"] = await fetch_offset(c, "g", "in", False)
            out["described"] = await t.describe()
            # an offset-expiry round meanwhile must not drop the group that holds only pending offsets
            b.group_coordinator.offsets.expire_offsets()
            out["end"] = await t.end(True)
            await t.settled("CompleteCommit")
            out["after_commit"] = await fetch_offset(c, "g", "in", True)
            # a second transaction with other offsets, aborted: the committed offset stays
            await c.call(ADD_OFFSETS, 2, AddOffsetsToTxnRequest(transactional_id="offsets", producer_id=t.pid,
                                                                producer_epoch=t.epoch, group_id="g"))
            await txn_commit(c, t, "g", "in", 99)
            out["abort"] = await t.end(False)
            await t.settled("CompleteAbort")
            out["after_abort"] = await fetch_offset(c, "g", "in", True)
            await c.close()
        # a restart replays __consumer_offsets, markers included
        async with running(tmp_path) as b:
            c = await connect(b)
            await until(lambda: _groups_loaded(b), "__consumer_offsets to load")
            out["after_restart"] = await fetch_offset(c, "g", "in", True)
            await c.close()
        return out

    out = asyncio.run(scenario())
    assert out["add"] == E.NONE and out["commit_offsets"] == E.NONE
    assert out["stable_pending"] == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert out["unstable_read"] == (E.NONE, -1)
    assert [t.topic for t in out["described"].topics] == ["__consumer_offsets"]
    assert out["end"] == E.NONE and out["after_commit"] == (E.NONE, 42)
    assert out["abort"] == E.NONE and out["after_abort"] == (E.NONE, 42)
    assert out["after_restart"] == (E.NONE, 42)


async def _groups_loaded(b) -> bool:
    return not b.group_coordinator.runtime.loading


# ---------------------------------------------------------------- restart, markers on disk
def test_a_restart_loads_the_coordinator_state_and_the_aborted_transactions_stay_aborted(tmp_path):
    async def scenario():
        out = {}
        async with running(tmp_path) as b:
            b.controller.create_topic("t", 1, 1, {})
            c = await connect(b)
            aborted, open_ = Txn(c, "aborted"), Txn(c, "open")
            await aborted.init()
            await aborted.add("t", 0)
            await aborted.produce("t", 0, 2)
            assert await aborted.end(False) == E.NONE
            out["aborted"] = await aborted.settled("CompleteAbort")
            await open_.init()
            await open_.add("t", 0)
            await open_.produce("t", 0, 3)
            out["open"] = await open_.describe()
            out["lso_before"] = await latest(c, "t", 0, 1)
            await c.close()
        async with running(tmp_path) as b:
            c = await connect(b)
            out["aborted_after"] = await Txn(c, "aborted").describe()
            t = Txn(c, "open")
            out["open_after"] = await t.describe()
            out["lso_after"] = await latest(c, "t", 0, 1)
            # the same producer carries on after the restart and ends its transaction
            t.pid, t.epoch = out["open_after"].producer_id, out["open_after"].producer_epoch
            out["end_after"] = await t.end(True)
            await t.settled("CompleteCommit")
            out["lso_end"] = await latest(c, "t", 0, 1)
            seg_dir = b.replica_manager.get_partition("t", 0).log_dir
            await c.close()
        return out, seg_dir

    out, seg_dir = asyncio.run(scenario())
    for before, after in (("aborted", "aborted_after"), ("open", "open_after")):
        b, a = out[before], out[after]
        assert (a.error_code, a.transaction_state, a.producer_id, a.producer_epoch) == (
            E.NONE, b.transaction_state, b.producer_id, b.producer_epoch)
    assert out["open_after"].transaction_state == "Ongoing"
    assert out["lso_before"] == out["lso_after"] == 3       # two aborted records, their marker, then the open txn
    assert out["end_after"] == E.NONE and out["lso_end"] == 7
    # dump-log shows both markers and the aborted transaction in the segment's .txnindex
    text = io.StringIO()
    files = sorted(os.path.join(seg_dir, f) for f in os.listdir(seg_dir) if f.endswith((".log", ".txnindex")))
    dump.main(["--deep-iteration", *files], out=text, err=io.StringIO())
    shown = text.getvalue()
    assert "endTxnMarker: ABORT" in shown and "endTxnMarker: COMMIT" in shown
    assert f"producerId: {out['aborted'].producer_id} firstOffset: 0 lastOffset: 2 lastStableOffset: 3" in shown


# ---------------------------------------------------------------- timeouts and expiry
def test_an_expired_transaction_is_fenced_and_aborted_and_an_idle_id_expires(tmp_path):
    async def scenario():
        async with running(tmp_path, transaction_abort_timed_out_transaction_cleanup_interval_ms=50,
                           transaction_remove_expired_transaction_cleanup_interval_ms=50,
                           transactional_id_expiration_ms=1500) as b:
            b.controller.create_topic("t", 1, 1, {})
            c = await connect(b)
            t = Txn(c, "slow")
            await t.init(timeout_ms=1000)       # room for AddPartitions and Produce on a stalled loop
            await t.add("t", 0)
            await t.produce("t", 0, 2)
            out = {"aborted": await t.settled("CompleteAbort")}
            out["late_produce"] = await t.produce("t", 0, 1)
            out["late_add"] = await t.add("t", 0)
            out["late_end"] = await t.end(True)
            out["lso"] = await latest(c, "t", 0, 1)
            out["hw"] = await latest(c, "t", 0, 0)

            async def gone():
                d = await t.describe()
                return d if d.error_code == E.TRANSACTIONAL_ID_NOT_FOUND else None
            await until(gone, "the idle transactional id to expire")
            out["records"] = txn_state_records(b, "slow")
            await c.close()
            return t.epoch, out

    epoch, out = asyncio.run(scenario())
    assert out["aborted"].producer_epoch == epoch + 1      # fenced: the abort carries the bumped epoch
    assert out["late_produce"] == E.INVALID_PRODUCER_EPOCH
    assert out["late_add"] == {("t", 0): E.PRODUCER_FENCED}
    assert out["late_end"] == E.PRODUCER_FENCED
    assert out["lso"] == out["hw"] == 3
    assert out["records"][-1][3] is None                     # the expired id's tombstone


# ---------------------------------------------------------------- WriteTxnMarkers
def test_write_txn_markers_writes_a_control_batch_that_closes_the_producers_transaction(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            b.controller.create_topic("t", 1, 1, {})
            c = await connect(b)
            t = Txn(c, "marked")
            await t.init()
            await t.init()          # epoch 1, so that epoch 0 is stale
            await t.add("t", 0)
            await t.produce("t", 0, 2)
            lso_open = await latest(c, "t", 0, 1)
            r = await c.call(WRITE_MARKERS, 1, WriteTxnMarkersRequest(markers=[
                WriteTxnMarkersRequest.WritableTxnMarker(
                    producer_id=t.pid, producer_epoch=t.epoch, transaction_result=False, coordinator_epoch=0,
                    topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="t", partition_indexes=[0]),
                            WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="missing", partition_indexes=[0])])]))
            stale = await c.call(WRITE_MARKERS, 1, WriteTxnMarkersRequest(markers=[
                WriteTxnMarkersRequest.WritableTxnMarker(
                    producer_id=t.pid, producer_epoch=t.epoch - 1, transaction_result=True,
                    coordinator_epoch=0,
                    topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="t", partition_indexes=[0])])]))
            lso = await latest(c, "t", 0, 1)
            await c.close()
            return t.epoch, lso_open, r, stale, lso

    epoch, lso_open, r, stale, lso = asyncio.run(scenario())
    assert lso_open == 0
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.markers[0].topics] == [
        ("t", [(0, E.NONE)]), ("missing", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert lso == 3
    assert epoch == 1 and stale.markers[0].topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH


# ---------------------------------------------------------------- KIP-890 part 1
def test_a_write_to_a_partition_outside_the_transaction_is_refused_unless_verification_is_off(tmp_path):
    async def scenario(verify: bool):
        async with running(tmp_path / str(verify), transaction_partition_verification_enable=str(verify).lower()) as b:
            b.controller.create_topic("t", 2, 1, {})
            c = await connect(b)
            t = Txn(c, "verified")
            await t.init()
            await t.add("t", 0)
            out = {"added": await t.produce("t", 0, 2),
                   "not_added_v9": await t.produce("t", 1, 1),
                   "not_added_v11": await t.produce("t", 1, 1, version=11),
                   "hw_1": await latest(c, "t", 1, 0)}
            await t.end(False)
            await t.settled("CompleteAbort")
            # after the abort the same producer (same epoch: transaction.version 1) writes again without
            # AddPartitionsToTxn: that would open a transaction the coordinator knows nothing of
            out["after_abort"] = await t.produce("t", 0, 1)
            out["lso_0"], out["hw_0"] = await latest(c, "t", 0, 1), await latest(c, "t", 0, 0)
            await c.close()
            return out

    on = asyncio.run(scenario(True))
    assert on["added"] == E.NONE
    assert (on["not_added_v9"], on["not_added_v11"]) == (E.INVALID_TXN_STATE, E.TRANSACTION_ABORTABLE)
    assert on["hw_1"] == 0                                  # nothing was written there
    assert on["after_abort"] == E.INVALID_TXN_STATE
    assert on["lso_0"] == on["hw_0"] == 3                   # two records and the ABORT marker, nothing hanging
    off = asyncio.run(scenario(False))
    assert (off["not_added_v9"], off["hw_1"]) == (E.NONE, 2)
    assert off["after_abort"] == E.NONE and off["lso_0"] < off["hw_0"]     # a hanging transaction


# ---------------------------------------------------------------- a decided transaction survives a restart
def test_a_transaction_decided_before_a_restart_gets_its_markers_after_it(tmp_path):
    async def scenario():
        out = {}
        async with running(tmp_path) as b:
            b.controller.create_topic("t", 1, 1, {})
            c = await connect(b)
            t = Txn(c, "decided")
            await t.init()
            await t.add("t", 0)
            await t.produce("t", 0, 2)
            stalled = asyncio.Event()

            async def never(markers):       # the markers cannot be written before the broker stops
                stalled.set()
                await asyncio.Event().wait()
            b.txn_coordinator.marker_manager.write_local = never
            out["end"] = await t.end(True)
            await stalled.wait()
            out["before"] = await t.describe()
            out["lso_before"] = await latest(c, "t", 0, 1)
            await c.close()
        async with running(tmp_path) as b:
            c = await connect(b)
            t = Txn(c, "decided")
            out["after"] = await t.settled("CompleteCommit")
            out["lso_after"] = await latest(c, "t", 0, 1)
            await c.close()
        return out

    out = asyncio.run(scenario())
    assert out["end"] == E.NONE                                   # answered once PrepareCommit is durable
    assert out["before"].transaction_state == "PrepareCommit" and out["lso_before"] == 0
    assert out["after"].producer_epoch == out["before"].producer_epoch
    assert out["lso_after"] == 3                                  # the two records and the COMMIT marker
