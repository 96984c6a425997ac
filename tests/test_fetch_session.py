"""Incremental fetch sessions (KIP-227) between followers and leaders, over the real codecs
(replication_harness): what a session request names, what its answer carries, the session errors, and
followers that lose their session and start a new one while copying every byte."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from replication_harness import TOPIC_ID, Cluster, LocalLink, batch, until

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.server.fetch_session import FetchSessionCache

PARTITIONS = 4


def run(tmp_path, scenario, n: int = 2):
    async def main():
        cluster = Cluster(tmp_path, n)
        try:
            return await scenario(cluster)
        finally:
            await cluster.close()
    return asyncio.run(main())


async def done(result):
    """A produce's results: at once for acks=1, once the ISR has them for acks=-1."""
    return await asyncio.wait_for(result, 10) if isinstance(result, asyncio.Future) else result


def sessions(node):
    """The leader's fetch session cache (its FetchApi's)."""
    return node.apis.handlers[1].fn.__self__.sessions


def fetches_sent(node):
    return [body for fetcher in node.rm.fetcher_manager.fetchers.values() for _, api_key, body in fetcher.client.sent
            if api_key == 1]


def named(request) -> set[tuple[int, int]]:
    return {(t.topic_id == TOPIC_ID, p.partition) for t in request.topics for p in t.partitions}


class Follower:
    """Fetch requests as replica 1 would send them, written by hand."""

    def __init__(self, cluster: Cluster, replica_id: int = 1):
        self.link = LocalLink(cluster)
        self.replica_id = replica_id
        self.epoch = cluster[replica_id].epoch

    async def fetch(self, session_id: int, epoch: int, offsets: dict[int, int], forget=(), replica: bool = True):
        partitions = [FetchRequest.FetchPartition(partition=p, current_leader_epoch=0, fetch_offset=o,
                                                  last_fetched_epoch=-1, log_start_offset=0,
                                                  partition_max_bytes=1 << 20) for p, o in offsets.items()]
        request = FetchRequest(replica_id=self.replica_id if replica else -1, max_wait_ms=0, min_bytes=1,
                               max_bytes=1 << 24, session_id=session_id, session_epoch=epoch,
                               topics=[FetchRequest.FetchTopic(topic_id=TOPIC_ID, partitions=partitions)]
                               if partitions else [],
                               forgotten_topics_data=[FetchRequest.ForgottenTopic(topic_id=TOPIC_ID,
                                                                                  partitions=list(forget))]
                               if forget else [])
        if replica:
            request.replica_state = FetchRequest.ReplicaState(replica_id=self.replica_id, replica_epoch=self.epoch)
        return await self.link.send(SimpleNamespace(node_id=0), 1, 15, request)


def answered(response) -> dict[int, tuple[int, int, int]]:
    """{partition: (error, high watermark, record bytes)} of a response."""
    return {p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in response.responses for p in t.partitions}


def test_an_incremental_answer_carries_only_partitions_with_news(tmp_path):
    async def scenario(c):
        for p in range(2):          # node 1 is a replica the leader waits for, but it fetches only by hand
            c.lead(0, 0, isr=(0,), replicas=(0, 1), index=p, to=[0])
            await done(c[0].produce(1, batch(b"a", b"b"), index=p))
        f = Follower(c)
        out = {}
        full = await f.fetch(0, 0, {0: 0, 1: 0})
        out["full"] = (full.error_code, full.session_id != 0, answered(full))
        sid = full.session_id
        caught_up = await f.fetch(sid, 1, {0: 2, 1: 2})           # both at the end: no news at all
        out["caught_up"] = (caught_up.session_id, answered(caught_up))
        await done(c[0].produce(1, batch(b"c"), index=1))
        news = await f.fetch(sid, 2, {})                          # nothing changed here; partition 1 has data
        out["news"] = answered(news)
        await done(c[0].produce(1, batch(b"d"), index=1))
        forgot = await f.fetch(sid, 3, {}, forget=[1])            # partition 1 leaves the session
        out["forgot"] = answered(forgot)
        out["stale_epoch"] = (await f.fetch(sid, 3, {})).error_code
        out["unknown"] = (await f.fetch(sid + 1, 1, {})).error_code
        out["next"] = (await f.fetch(sid, 4, {})).error_code
        consumer = await f.fetch(0, 0, {0: 0}, replica=False)     # consumers get sessions too
        out["consumer"] = (consumer.session_id, answered(consumer))
        out["consumer_next"] = answered(await f.fetch(consumer.session_id, 1, {0: 2}, replica=False))
        out["sessions"] = len(sessions(c[0]))
        out["closed"] = ((await f.fetch(sid, -1, {0: 2})).session_id, len(sessions(c[0])))
        return out

    out = run(tmp_path, scenario)
    error, granted, parts = out["full"]
    assert error == ErrorCode.NONE and granted
    assert {p: (e, hw) for p, (e, hw, _) in parts.items()} == {0: (0, 2), 1: (0, 2)}
    assert all(size > 0 for _, _, size in parts.values())
    assert out["caught_up"][1] == {}                                # HW and log start unchanged, no records
    assert set(out["news"]) == {1} and out["news"][1][0] == 0 and out["news"][1][2] > 0
    assert out["forgot"] == {}                                      # partition 0 had nothing, 1 was forgotten
    assert out["stale_epoch"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert out["unknown"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert out["next"] == ErrorCode.NONE                           # the stale request did not move the epoch
    assert out["consumer"][0] != 0 and set(out["consumer"][1]) == {0} and out["consumer"][1][0][2] > 0
    assert out["consumer_next"] == {}                               # the consumer's session: nothing new
    assert out["sessions"] == 2
    assert out["closed"] == (0, 1)                                  # epoch -1 closes the session


def test_a_follower_names_only_what_changed_and_copies_every_partition(tmp_path):
    async def scenario(c):
        for p in range(PARTITIONS):
            c.lead(0, 0, isr=(0, 1), index=p)
        await done(c[0].produce(-1, batch(b"x"), index=0))
        for n in range(5):
            await done(c[0].produce(-1, batch(b"y%d" % n, b"z"), index=2))
        for p in range(PARTITIONS):
            await until(lambda p=p: c[1].partition(p).high_watermark == c[0].partition(p).log_end_offset,
                        what=f"the follower's HW on partition {p}")
        return ([c[0].data(p) for p in range(PARTITIONS)], [c[1].data(p) for p in range(PARTITIONS)],
                fetches_sent(c[1]), len(sessions(c[0])))

    leader, follower, requests, open_sessions = run(tmp_path, scenario)
    assert follower == leader and len(leader[2]) > len(leader[0]) > 0
    first = requests[0]
    assert first.session_epoch == 0 and named(first) == {(True, p) for p in range(PARTITIONS)}
    incremental = [r for r in requests if r.session_epoch > 0]
    assert incremental and all(r.session_id == incremental[0].session_id != 0 for r in incremental)
    # after each append the follower names the one partition whose offset moved, never the idle ones
    assert all(named(r) <= {(True, 0), (True, 2)} for r in incremental)
    assert any(named(r) == {(True, 2)} for r in incremental)
    assert open_sessions == 1


def test_a_follower_whose_session_the_leader_lost_starts_again_and_catches_up(tmp_path):
    async def scenario(c):
        for p in range(2):
            c.lead(0, 0, isr=(0, 1), index=p)
        await done(c[0].produce(-1, batch(b"a"), index=0))
        await until(lambda: any(r.session_epoch > 1 for r in fetches_sent(c[1])), what="an incremental fetch")
        sessions(c[0]).sessions.clear()                # a leader restarted, or evicted the session
        await done(c[0].produce(-1, batch(b"b"), batch(b"c"), index=1))
        await done(c[0].produce(-1, batch(b"d"), index=0))
        for p in range(2):
            await until(lambda p=p: c[1].partition(p).high_watermark == c[0].partition(p).log_end_offset,
                        what=f"the follower's HW on partition {p}")
        return [c[0].data(p) for p in range(2)], [c[1].data(p) for p in range(2)], fetches_sent(c[1])

    leader, follower, requests = run(tmp_path, scenario)
    assert follower == leader and all(leader)
    opened = [r for r in requests if r.session_epoch == 0]
    assert len(opened) >= 2                              # the first session, and the one after the loss
    assert opened[-1].session_id == 0                    # an unknown session is not named again
    assert named(opened[-1]) == {(True, 0), (True, 1)}


def test_answered_partitions_go_to_the_end_of_the_session(tmp_path):
    """Kafka's rotation: a partition an incremental answer carried is read last next time, so under a byte
    limit the others get their turn."""
    async def scenario(c):
        for p in range(3):
            c.lead(0, 0, isr=(0,), replicas=(0, 1), index=p, to=[0])
        f = Follower(c)
        full = await f.fetch(0, 0, {0: 0, 1: 0, 2: 0}, replica=False)
        sid, order = full.session_id, []
        await done(c[0].produce(1, batch(b"a"), index=0))
        news = await f.fetch(sid, 1, {})                        # partition 0 answered: it goes last
        order.append([p.partition_index for t in news.responses for p in t.partitions])
        for p in range(3):
            await done(c[0].produce(1, batch(b"b"), index=p))
        news = await f.fetch(sid, 2, {0: 1})                    # the consumer moved on in partition 0
        order.append([p.partition_index for t in news.responses for p in t.partitions])
        return order

    assert run(tmp_path, scenario) == [[0], [1, 2, 0]]


def test_a_full_cache_evicts_as_kafka_does():
    now = [0]
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000, clock=lambda: now[0])
    small = cache.create(True, privileged=False, size=1)
    big = cache.create(True, privileged=False, size=5)
    small.partitions = dict.fromkeys(range(1))
    big.partitions = dict.fromkeys(range(5))
    assert cache.create(True, privileged=False, size=9) is None     # both new: no consumer may evict them
    follower = cache.create(True, privileged=True, size=1)           # a follower evicts the smallest consumer
    assert follower is not None and set(cache.sessions) == {big.id, follower.id}
    assert cache.create(True, privileged=True, size=1) is not None   # ...and the other one
    assert big.id not in cache.sessions
    now[0] = 1500                                                     # created long enough ago, and in use
    for s in list(cache.sessions.values()):
        cache.get(s.id)
    assert cache.create(True, privileged=False, size=3) is None      # a consumer does not outrank a follower
    bigger = cache.create(True, privileged=True, size=1)              # a follower with more partitions does
    assert bigger is not None and len(cache) == 2
    now[0] = 2600                                                     # unused for 1.1 s: the stalest goes
    cache.get(bigger.id)
    assert cache.create(True, privileged=False, size=0) is not None and bigger.id in cache.sessions


def test_the_cache_size_is_the_brokers_setting_and_its_sessions_are_metrics():
    from test_metrics import samples, scrape, value
    from wire import WireClient

    from kafka_compat.testing import EmbeddedBroker, free_port
    port = free_port()
    with EmbeddedBroker({"max.incremental.fetch.session.cache.slots": 1, "prometheus.listener":
                         f"http://127.0.0.1:{port}", "num.partitions": 2}) as b:
        b.metrics_url = f"http://127.0.0.1:{port}/metrics"
        c = WireClient("127.0.0.1", b.port)
        assert c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="s")],
                                             allow_auto_topic_creation=True)).topics[0].error_code in (0, 5)

        def open_session(partitions):
            return c.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                              session_id=0, session_epoch=0, topics=[FetchRequest.FetchTopic(
                                                  topic="s", partitions=[FetchRequest.FetchPartition(
                                                      partition=p, fetch_offset=0, partition_max_bytes=1024)
                                                      for p in partitions])])).session_id
        first = open_session([0])
        assert first != 0
        assert open_session([0, 1]) == 0          # one slot, its session new: a bigger one may not evict it
        got = samples(scrape(b))
        assert value(got, "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 1
        assert value(got, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 1
        assert value(got, "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total") == 0
        c.close()
