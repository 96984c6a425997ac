"""Transactions v2 (KIP-890 part 2) over the wire: EndTxn v5's epoch bump, Produce v12+ and TxnOffsetCommit v5
adding partitions without AddPartitionsToTxn, the records and markers as Kafka writes them, ListTransactions v2,
and a transaction.version change that leaves running transactions under the rules they started with."""
from __future__ import annotations

import asyncio

from test_transaction_coordinator import (
    END_TXN,
    LIST,
    TXN_COMMIT,
    Txn,
    connect,
    latest,
    running,
    txn_state_records,
)

from kafka_compat.group.coordinator_records import GROUP_METADATA_TOPIC_NAME
from kafka_compat.protocol.errors import ErrorCode as E
from kafka_compat.protocol.messages.end_txn import EndTxnRequest
from kafka_compat.protocol.messages.list_transactions import ListTransactionsRequest
from kafka_compat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kafka_compat.protocol.records import batches
from kafka_compat.server import features as ft
from kafka_compat.transaction.transaction_metadata import SHORT_MAX

PRODUCE_V2, END_V2, COMMIT_V2 = 12, 5, 5      # the first versions of transactions v2


async def end_v5(t: Txn, committed: bool, epoch: int | None = None, pid: int | None = None):
    """EndTxn v5; the producer goes on with the id and epoch it answers."""
    r = await t.c.call(END_TXN, END_V2, EndTxnRequest(
        transactional_id=t.txn_id, producer_id=t.pid if pid is None else pid,
        producer_epoch=t.epoch if epoch is None else epoch, committed=committed))
    if r.error_code == E.NONE:
        if (r.producer_id, r.producer_epoch) != (t.pid, t.epoch):
            t.seq = {}          # a new epoch (or id) starts every partition's sequence at 0
        t.pid, t.epoch = r.producer_id, r.producer_epoch
    return r


async def commit_offset_v5(t: Txn, group: str, topic: str, offset: int) -> int:
    r = await t.c.call(TXN_COMMIT, COMMIT_V2, TxnOffsetCommitRequest(
        transactional_id=t.txn_id, group_id=group, producer_id=t.pid, producer_epoch=t.epoch, generation_id_or_member_epoch=-1,
        member_id="", topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                   committed_metadata="")])]))
    return r.topics[0].partitions[0].error_code


def control_batches(b, topic: str, partition: int) -> list[tuple[int, int, int]]:
    """(producer id, producer epoch, base offset) of each marker of a partition."""
    start, _ = b.replica_manager.log_offsets(topic, partition)
    data = b.replica_manager.read_local(topic, partition, start, 1 << 20).records.read_bytes()
    return [(x.producer_id, x.producer_epoch, x.base_offset) for x in batches(data) if x.is_control]


def topics_of(described) -> dict[str, list[int]]:
    return {x.topic: x.partitions for x in described.topics}


async def until_settled(t: Txn, *states: str):
    for _ in range(400):
        d = await t.describe()
        if d.transaction_state in states:
            return d
        await asyncio.sleep(0.05)
    raise AssertionError(f"{t.txn_id} never reached {states}")


def test_an_epoch_bump_per_transaction_and_partitions_added_by_the_writes(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            b.controller.create_topic("t", 2, 1, {})
            c = await connect(b)
            t = Txn(c, "flow")
            await t.init()
            out = {"start": (t.pid, t.epoch)}
            out["produce"] = await t.produce("t", 0, 3, version=PRODUCE_V2)     # no AddPartitionsToTxn
            out["offsets"] = await commit_offset_v5(t, "g", "t", 3)               # no AddOffsetsToTxn
            out["ongoing"] = await t.describe()
            out["lso_open"] = await latest(c, "t", 0, 1)
            out["commit"] = await end_v5(t, True)
            out["complete"] = await until_settled(t, "CompleteCommit")
            out["retry"] = await end_v5(t, True, epoch=t.epoch - 1)            # a lost answer, sent again
            out["lso"] = (await latest(c, "t", 0, 1), await latest(c, "t", 0, 0))
            # the next transaction at the bumped epoch starts over at sequence 0, and aborts
            out["produce2"] = await t.produce("t", 1, 2, version=PRODUCE_V2)
            out["stale"] = await t.produce("t", 0, 1, epoch=t.epoch - 1, version=PRODUCE_V2)
            out["abort"] = await end_v5(t, False)
            await until_settled(t, "CompleteAbort")
            out["abort_retry"] = await end_v5(t, False, epoch=t.epoch - 1)
            out["commit_after_abort"] = await end_v5(t, True)
            out["abort_nothing"] = await end_v5(t, False)      # v2 may abort with nothing added
            await until_settled(t, "CompleteAbort")
            out["markers"] = (control_batches(b, "t", 0), control_batches(b, "t", 1))
            out["records"] = txn_state_records(b, "flow")
            out["v11_unadded"] = await t.produce("t", 0, 1, version=11)     # v11 still only verifies
            await c.close()
            return out

    out = asyncio.run(scenario())
    pid, epoch = out["start"]
    assert out["produce"] == out["offsets"] == E.NONE
    ongoing = out["ongoing"]
    offsets_partition = [p for x in ongoing.topics if x.topic == GROUP_METADATA_TOPIC_NAME for p in x.partitions]
    assert ongoing.transaction_state == "Ongoing" and topics_of(ongoing)["t"] == [0] and len(offsets_partition) == 1
    assert out["lso_open"] == 0
    commit = out["commit"]
    assert (commit.error_code, commit.producer_id, commit.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert out["complete"].producer_epoch == epoch + 1 and out["complete"].topics == []
    retry = out["retry"]
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert out["lso"] == (4, 4)                  # three records and the COMMIT marker, all stable
    assert out["produce2"] == E.NONE
    assert out["stale"] == E.INVALID_PRODUCER_EPOCH           # the coordinator's PRODUCER_FENCED, as Kafka maps it
    assert (out["abort"].error_code, out["abort"].producer_epoch) == (E.NONE, epoch + 2)
    assert (out["abort_retry"].error_code, out["abort_retry"].producer_epoch) == (E.NONE, epoch + 2)
    assert out["commit_after_abort"].error_code == E.INVALID_TXN_STATE
    assert (out["abort_nothing"].error_code, out["abort_nothing"].producer_epoch) == (E.NONE, epoch + 3)
    # the markers carry the bumped epoch: one above the transaction's data
    assert [(p, e) for p, e, _ in out["markers"][0]] == [(pid, epoch + 1)]
    assert [(p, e) for p, e, _ in out["markers"][1]] == [(pid, epoch + 2)]
    # value v1 with ClientTransactionVersion 2 from the first implicit add on; Prepare* carries the new epoch
    states = [(vv, v.transaction_status, v.producer_epoch, v.client_transaction_version)
              for _kv, _id, vv, v in out["records"]]
    assert states[0] == (1, 0, epoch, 0)                       # InitProducerId: Empty
    assert (1, 2, epoch + 1, 2) in states and (1, 4, epoch + 1, 2) in states   # PrepareCommit, CompleteCommit
    assert (1, 3, epoch + 3, 2) in states                      # the abort with nothing added
    assert all(vv == 1 for vv, *_ in states)
    assert out["v11_unadded"] == E.TRANSACTION_ABORTABLE


def test_the_last_epoch_moves_the_transaction_to_a_new_producer_id(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            b.controller.create_topic("t", 1, 1, {})
            c = await connect(b)
            t = Txn(c, "worn")
            await t.init()
            old_pid = t.pid
            # state injection: as after 32766 transactions (the last epoch a client may use)
            md = b.txn_coordinator.state_manager.get_transaction_state("worn")[1].metadata
            md.producer_epoch = t.epoch = SHORT_MAX - 1
            out = {"produce": await t.produce("t", 0, 2, version=PRODUCE_V2)}
            out["commit"] = await end_v5(t, True)
            out["complete"] = await until_settled(t, "CompleteCommit")
            out["retry"] = await end_v5(t, True, epoch=SHORT_MAX - 1, pid=old_pid)
            out["next"] = await t.produce("t", 0, 1, version=PRODUCE_V2)
            out["markers"] = control_batches(b, "t", 0)
            await c.close()
            return old_pid, out

    old_pid, out = asyncio.run(scenario())
    assert out["produce"] == E.NONE
    commit = out["commit"]
    assert commit.error_code == E.NONE and commit.producer_id != old_pid and commit.producer_epoch == 0
    assert (out["complete"].producer_id, out["complete"].producer_epoch) == (commit.producer_id, 0)
    assert (out["retry"].error_code, out["retry"].producer_id, out["retry"].producer_epoch) == \
        (E.NONE, commit.producer_id, 0)
    assert out["next"] == E.NONE
    assert [(p, e) for p, e, _ in out["markers"]] == [(old_pid, SHORT_MAX)]     # the old id's last epoch


def test_list_transactions_v2_filters_by_a_transactional_id_pattern(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            c = await connect(b)
            for txn_id in ("app-1", "app-2", "other"):
                await Txn(c, txn_id).init()

            async def listed(pattern, version=2):
                r = await c.call(LIST, version, ListTransactionsRequest(
                    state_filters=[], producer_id_filters=[], duration_filter=-1, transactional_id_pattern=pattern))
                return r.error_code, sorted(s.transactional_id for s in r.transaction_states)
            out = [await listed("app-.*"), await listed("app"), await listed(None), await listed(""),
                   await listed("app-("), await listed("app-.*", version=1)]
            await c.close()
            return out

    out = asyncio.run(scenario())
    everything = (E.NONE, ["app-1", "app-2", "other"])
    assert out[0] == (E.NONE, ["app-1", "app-2"])
    assert out[1] == (E.NONE, [])                      # matched whole, as Java's Matcher.matches
    assert out[2] == out[3] == everything              # null or empty: no filter
    assert out[4] == (E.INVALID_REGULAR_EXPRESSION, [])
    assert out[5] == everything                        # v1 has no pattern


def test_changing_transaction_version_leaves_running_transactions_under_their_rules(tmp_path):
    async def scenario():
        async with running(tmp_path) as b:
            b.controller.create_topic("t", 2, 1, {})
            c = await connect(b)
            v1, v2 = Txn(c, "old-style"), Txn(c, "new-style")
            await v1.init()
            await v2.init()
            out = {"v1_start": v1.epoch, "v2_start": v2.epoch}
            assert await v1.add("t", 0) == {("t", 0): E.NONE}
            assert await v1.produce("t", 0, 2) == E.NONE
            assert await v2.produce("t", 1, 2, version=PRODUCE_V2) == E.NONE
            await b.feature_manager.update_features([(ft.TRANSACTION_VERSION, 1, ft.SAFE_DOWNGRADE)], False)
            out["level"] = b.features.finalized_level(ft.TRANSACTION_VERSION)
            out["v2_end"] = await end_v5(v2, True)         # started under v2: ends under v2
            out["v1_end"] = await v1.end(True, version=4)  # started under v1: its epoch stays
            await until_settled(v1, "CompleteCommit")
            await until_settled(v2, "CompleteCommit")
            out["v1_epoch"] = (await v1.describe()).producer_epoch
            await b.feature_manager.update_features([(ft.TRANSACTION_VERSION, 2, ft.UPGRADE)], False)
            assert await v1.add("t", 0) == {("t", 0): E.NONE}
            assert await v1.produce("t", 0, 1) == E.NONE
            out["v1_again"] = await v1.end(False, version=4)
            await until_settled(v1, "CompleteAbort")
            # transaction.version 0: values as v0 again (non-flexible), transactions still work
            await b.feature_manager.update_features([(ft.TRANSACTION_VERSION, 0, ft.UNSAFE_DOWNGRADE)], False)
            assert await v1.add("t", 0) == {("t", 0): E.NONE}
            out["v1_at_0"] = await v1.end(True, version=4)
            await until_settled(v1, "CompleteCommit")
            out["records"] = [vv for _kv, _id, vv, _v in txn_state_records(b, "old-style")]
            out["lso"] = (await latest(c, "t", 0, 1), await latest(c, "t", 0, 0),
                          await latest(c, "t", 1, 1), await latest(c, "t", 1, 0))
            await c.close()
            return out

    out = asyncio.run(scenario())
    assert out["level"] == 1
    assert (out["v2_end"].error_code, out["v2_end"].producer_epoch) == (E.NONE, out["v2_start"] + 1)
    assert out["v1_end"] == E.NONE and out["v1_epoch"] == out["v1_start"]
    assert out["v1_again"] == E.NONE and out["v1_at_0"] == E.NONE
    assert out["records"][-2:] == [0, 0]               # the last two writes at transaction.version 0
    assert out["records"][0] == 1
    lso_0, hw_0, lso_1, hw_1 = out["lso"]
    assert lso_0 == hw_0 and lso_1 == hw_1 == 3        # every transaction decided and marked


def test_the_implicit_add_needs_no_verification_and_a_restart_keeps_the_bumped_epoch(tmp_path):
    """transaction.partition.verification.enable=false turns off part 1's check of v1 writes, not part 2's add;
    the v2 state (epoch, client version) comes back from `__transaction_state` after a restart."""
    off = {"transaction_partition_verification_enable": "false"}

    async def first():
        async with running(tmp_path, **off) as b:
            b.controller.create_topic("t", 1, 1, {})
            c = await connect(b)
            t = Txn(c, "durable")
            await t.init()
            produced = await t.produce("t", 0, 2, version=PRODUCE_V2)
            added = topics_of(await t.describe())
            committed = await end_v5(t, True)
            await until_settled(t, "CompleteCommit")
            await c.close()
            return t.pid, t.epoch, produced, added, committed

    async def second(pid, epoch):
        async with running(tmp_path, **off) as b:
            c = await connect(b)
            t = Txn(c, "durable")
            t.pid, t.epoch = pid, epoch
            described = await t.describe()
            retry = await end_v5(t, True, epoch=epoch - 1)      # the lost answer of the commit, after a restart
            produced = await t.produce("t", 0, 1, version=PRODUCE_V2)
            aborted = await end_v5(t, False)
            await until_settled(t, "CompleteAbort")
            lso = (await latest(c, "t", 0, 1), await latest(c, "t", 0, 0))
            await c.close()
            return described, retry, produced, aborted, lso

    pid, epoch, produced, added, committed = asyncio.run(first())
    assert produced == E.NONE and added == {"t": [0]}
    assert committed.error_code == E.NONE and epoch == committed.producer_epoch
    described, retry, produced, aborted, lso = asyncio.run(second(pid, epoch))
    assert (described.transaction_state, described.producer_id, described.producer_epoch) == \
        ("CompleteCommit", pid, epoch)
    assert (retry.error_code, retry.producer_epoch) == (E.NONE, epoch)
    assert produced == E.NONE
    assert (aborted.error_code, aborted.producer_epoch) == (E.NONE, epoch + 1)
    assert lso == (5, 5)        # two records, COMMIT, one record, ABORT
