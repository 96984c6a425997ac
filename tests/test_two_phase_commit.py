"""Two-phase commit (KIP-939) over the wire: InitProducerId v6's Enable2Pc, refused as Kafka refuses it
(the broker setting off, or no TWO_PHASE_COMMIT on the transactional id), a 2PC transaction that outlives
any timeout, and KeepPreparedTxn handing an ongoing transaction to a new producer across restarts, which
then commits it for read_committed readers."""
from __future__ import annotations

import asyncio

from test_transaction_coordinator import INIT, Txn, connect, latest, running, txn_state_records
from test_transaction_v2 import end_v5
from wire import AsyncWireClient

from kafka_compat.protocol.errors import ErrorCode as E
from kafka_compat.protocol.messages.create_acls import CreateAclsRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.init_producer_id import InitProducerIdRequest
from kafka_compat.protocol.records import batches
from kafka_compat.security.acl import AclOperation, ResourceType

INT_MAX = 2147483647
UNSTABLE = {"unstable_api_versions_enable": "true"}     # Kafka marks InitProducerId v6 unstable
TWO_PC = {"transaction_two_phase_commit_enable": "true", **UNSTABLE}
AUTHORIZER = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer",
              "allow_everyone_if_no_acl_found": "true"}


async def init_v6(t: Txn, enable_2pc: bool = True, keep: bool = False, timeout_ms: int = 60000):
    """InitProducerId v6; on success the producer takes the id and epoch it answers."""
    r = await t.c.call(INIT, 6, InitProducerIdRequest(transactional_id=t.txn_id, transaction_timeout_ms=timeout_ms,
                                                      enable2_pc=enable_2pc, keep_prepared_txn=keep))
    if r.error_code == E.NONE:
        t.pid, t.epoch, t.seq = r.producer_id, r.producer_epoch, {}
    return r


async def prepared(b, txn_id: str, n: int) -> Txn:
    """A 2PC producer with ``n`` records written to t-0 in an open transaction (topic t made here)."""
    b.controller.create_topic("t", 1, 1, {})
    t = Txn(await connect(b), txn_id)
    assert (await init_v6(t)).error_code == E.NONE
    assert await t.add("t", 0) == {("t", 0): E.NONE}
    assert await t.produce("t", 0, n) == E.NONE
    return t


async def read_committed(c: AsyncWireClient, topic: str) -> list[bytes]:
    """The values a read_committed consumer gets from partition 0."""
    r = await c.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                         isolation_level=1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                                             FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                                         partition_max_bytes=1 << 20)])]))
    part = r.responses[0].partitions[0]
    assert part.error_code == E.NONE
    aborted = {a.producer_id for a in part.aborted_transactions or ()}
    return [rec.value for b in batches(bytes(part.records or b"")) if not b.is_control
            and b.producer_id not in aborted for rec in b.records()]


def test_enable_2pc_is_refused_while_the_broker_setting_is_off(tmp_path):
    async def scenario():
        async with running(tmp_path, **UNSTABLE) as b:
            c = await connect(b)
            t = Txn(c, "off")
            out = {"2pc": await init_v6(t), "keep_alone": await init_v6(t, enable_2pc=False, keep=True),
                   "plain": await init_v6(t, enable_2pc=False)}
            out["described"] = await t.describe()
            await c.close()
            return out

    out = asyncio.run(scenario())
    assert (out["2pc"].error_code, out["2pc"].producer_id, out["2pc"].producer_epoch) == (
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    assert out["keep_alone"].error_code == E.INVALID_REQUEST
    plain = out["plain"]
    assert plain.error_code == E.NONE and plain.producer_epoch == 0
    assert (plain.ongoing_txn_producer_id, plain.ongoing_txn_producer_epoch) == (-1, -1)
    assert out["described"].transaction_timeout_ms == 60000


def test_enable_2pc_needs_two_phase_commit_on_the_transactional_id(tmp_path):
    def allow(op: AclOperation) -> CreateAclsRequest.AclCreation:
        return CreateAclsRequest.AclCreation(resource_type=int(ResourceType.TRANSACTIONAL_ID), resource_name="acl",
                                             resource_pattern_type=3, principal="User:ANONYMOUS", host="*",
                                             operation=int(op), permission_type=3)

    async def grant(c: AsyncWireClient, op: AclOperation) -> None:
        r = await c.call(30, 3, CreateAclsRequest(creations=[allow(op)]))
        assert [x.error_code for x in r.results] == [E.NONE]

    async def scenario():
        async with running(tmp_path, **TWO_PC, **AUTHORIZER) as b:
            c = await connect(b)
            await grant(c, AclOperation.WRITE)      # from now on the id has ACLs: only what they allow passes
            t = Txn(c, "acl")
            out = {"write_only": await init_v6(t), "plain": await init_v6(t, enable_2pc=False)}
            await grant(c, AclOperation.TWO_PHASE_COMMIT)
            c2 = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
            out["granted"] = await init_v6(Txn(c2, "acl"))
            await c.close()
            await c2.close()
            return out

    out = asyncio.run(scenario())
    assert out["write_only"].error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert out["plain"].error_code == E.NONE
    assert out["granted"].error_code == E.NONE
    assert out["granted"].producer_epoch == out["plain"].producer_epoch + 1


def test_a_2pc_transaction_outlives_its_timeout_and_a_plain_init_still_aborts_it(tmp_path):
    async def scenario():
        async with running(tmp_path, transaction_abort_timed_out_transaction_cleanup_interval_ms=50,
                           **TWO_PC) as b:
            b.controller.create_topic("t", 1, 1, {})
            c = await connect(b)
            plain, tpc = Txn(c, "plain"), Txn(c, "tpc")
            await plain.init(timeout_ms=1000)
            await init_v6(tpc, timeout_ms=1000)
            for t in (tpc, plain):
                assert await t.add("t", 0) == {("t", 0): E.NONE}
                assert await t.produce("t", 0, 2) == E.NONE
            out = {"plain": await plain.settled("CompleteAbort")}     # the same sweeps passed over the 2PC one
            out["tpc"] = await tpc.describe()
            out["lso"] = await latest(c, "t", 0, 1)
            epoch = tpc.epoch
            out["again"] = await init_v6(Txn(c, "tpc"))                # no KeepPreparedTxn: fenced and aborted
            out["aborted"] = await tpc.settled("CompleteAbort")
            out["retry"] = await Txn(c, "tpc").init_until_done(version=6)
            await c.close()
            return epoch, out

    epoch, out = asyncio.run(scenario())
    assert out["tpc"].transaction_state == "Ongoing"
    assert out["tpc"].transaction_timeout_ms == INT_MAX           # as Kafka records a 2PC transaction
    assert out["lso"] == 0                                          # still held open by the 2PC transaction
    assert out["again"].error_code == E.CONCURRENT_TRANSACTIONS
    assert out["aborted"].producer_epoch == epoch + 1
    assert (out["retry"].error_code, out["retry"].producer_epoch) == (E.NONE, epoch + 2)


def test_keep_prepared_txn_hands_the_transaction_over_across_restarts_and_its_commit_is_read(tmp_path):
    async def scenario():
        out = {}
        async with running(tmp_path, **TWO_PC) as b:
            first = await prepared(b, "xa", 3)
            out["first"] = (first.pid, first.epoch)       # prepared: the external coordinator decides it later
            await first.c.close()
        async with running(tmp_path, **TWO_PC) as b:
            c = await connect(b)
            second = Txn(c, "xa")
            out["keep"] = await init_v6(second, keep=True)
            out["kept"] = await second.describe()
            out["lso_kept"] = await latest(c, "t", 0, 1)
            out["stale_add"] = await Txn(c, "xa").add("t", 0, pid=first.pid, epoch=first.epoch)
            out["records"] = txn_state_records(b, "xa")
            await c.close()
        async with running(tmp_path, **TWO_PC) as b:       # the kept identity is in __transaction_state
            c = await connect(b)
            out["stale_end"] = await end_v5(Txn(c, "xa"), True, epoch=first.epoch, pid=first.pid)
            second.c = c                                    # the second producer reconnects with its identity
            out["commit"] = await end_v5(second, True)
            out["committed"] = await second.settled("CompleteCommit")
            out["lso"] = await latest(c, "t", 0, 1)
            out["values"] = await read_committed(c, "t")
            await c.close()
        return out

    out = asyncio.run(scenario())
    pid, epoch = out["first"]
    keep = out["keep"]
    assert (keep.error_code, keep.producer_id, keep.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert (keep.ongoing_txn_producer_id, keep.ongoing_txn_producer_epoch) == (pid, epoch)
    kept = out["kept"]
    assert (kept.transaction_state, kept.producer_id, kept.producer_epoch) == ("Ongoing", pid, epoch)
    assert out["lso_kept"] == 0
    assert out["stale_add"] == {("t", 0): E.PRODUCER_FENCED}
    last = out["records"][-1]
    assert last[2] == 1 and (last[3].producer_epoch, last[3].next_producer_id, last[3].next_producer_epoch,
                             last[3].transaction_status) == (epoch, pid, epoch + 1, 1)
    assert out["stale_end"].error_code == E.PRODUCER_FENCED
    commit = out["commit"]
    assert (commit.error_code, commit.producer_id, commit.producer_epoch) == (E.NONE, pid, epoch + 2)
    assert (out["committed"].producer_id, out["committed"].producer_epoch) == (pid, epoch + 2)
    assert out["lso"] == 4                                          # three records and the commit marker
    assert out["values"] == [b"v0", b"v1", b"v2"]


def test_a_kept_transaction_is_still_aborted_by_an_init_without_keep_prepared_txn(tmp_path):
    async def scenario():
        async with running(tmp_path, **TWO_PC) as b:
            first = await prepared(b, "xb", 2)
            c = first.c
            keeper = Txn(c, "xb")
            out = {"keep": await init_v6(keeper, keep=True), "again": await init_v6(Txn(c, "xb"))}
            out["aborted"] = await keeper.settled("CompleteAbort")
            out["keeper_end"] = await end_v5(keeper, True)
            out["retry"] = await Txn(c, "xb").init_until_done(version=6)
            out["values"] = await read_committed(c, "t")
            await c.close()
            return first.epoch, out

    epoch, out = asyncio.run(scenario())
    assert out["keep"].producer_epoch == epoch + 1
    assert out["again"].error_code == E.CONCURRENT_TRANSACTIONS
    # the abort is fenced past every epoch handed out, the keeper's included: no epoch is used twice
    assert out["aborted"].producer_epoch == epoch + 2
    # the keeper's commit comes too late: under transactions v2 its epoch + 1 is the abort's, so it reads as a
    # commit retried onto an aborted transaction (Kafka's answer to that too)
    assert out["keeper_end"].error_code == E.INVALID_TXN_STATE
    assert (out["retry"].error_code, out["retry"].producer_epoch) == (E.NONE, epoch + 3)
    assert out["values"] == []


def test_v6_is_not_served_without_unstable_api_versions_enable(tmp_path):
    """As Kafka's: a version it marks unstable is neither advertised nor answered unless the setting is on."""
    async def scenario():
        async with running(tmp_path) as b:
            c = await connect(b)
            try:
                await init_v6(Txn(c, "v6"))
            except asyncio.IncompleteReadError:
                return "closed"
            finally:
                await c.close()
            return "answered"

    assert asyncio.run(scenario()) == "closed"
