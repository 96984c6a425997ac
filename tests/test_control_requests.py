"""LeaderAndIsr, UpdateMetadata and StopReplica as a broker handles them: the broker-epoch and controller-epoch
checks, Kafka's per-partition rules, the MetadataCache they feed (and so what Metadata answers), and the group
coordinator following leadership of `__consumer_offsets`. Requests go through the real codecs at the versions
Kafka's controllers send."""
from __future__ import annotations

import asyncio

import pytest
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager

from kafka_compat.group import GroupCoordinator
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import encode_request, parse_request
from kafka_compat.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.stop_replica import StopReplicaRequest
from kafka_compat.protocol.messages.update_metadata import UpdateMetadataRequest
from kafka_compat.server.control_requests import ControlRequestsApi
from kafka_compat.server.kafka_apis import KafkaApis
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.server.metadata import MetadataApi
from kafka_compat.server.metadata_cache import MetadataCache
from kafka_compat.server.replica_manager import ReplicaManager
from kafka_compat.server.zk_registration import ZkBrokerRegistration

ME = 1
TOPIC_ID = b"\x05" * 16
OFFSETS_ID = b"\x06" * 16
LISR, STOP, UM = 4, 5, 6
PState = LeaderAndIsrRequest.LeaderAndIsrPartitionState


class Broker:
    """One broker's control path in-process, with our registration at broker epoch 50."""

    def __init__(self, tmp_path):
        self.epoch = 50
        self.config = BrokerConfig({"log.dirs": str(tmp_path), "broker.id": ME, "offsets.topic.num.partitions": 2})
        self.logs = LogManager([str(tmp_path)], LogConfig({}), topic_config=lambda t: LogConfig({}),
                               cleaner_enabled=False)
        self.logs.startup(background=False)
        self.cache = MetadataCache(ME, "c")
        self.rm = ReplicaManager(ME, self.logs, lambda t: LogConfig({}), hw_checkpoint_interval_ms=3_600_000,
                                 metadata_cache=self.cache)
        self.rm.startup()
        self.groups = GroupCoordinator(self.config, ME, self.rm, self.cache, controller=None)
        self.apis_list = [ControlRequestsApi(ME, self.rm, self.cache, self.groups, lambda: self.epoch),
                          MetadataApi(self.config, self.cache, controller=None)]
        self.apis = KafkaApis(self.apis_list)
        self.correlation = 0

    async def call(self, api_key: int, version: int, body):
        self.correlation += 1
        request = parse_request(encode_request(api_key, version, body, self.correlation)[4:])
        result = self.apis.handle(request, None)
        return await result if asyncio.iscoroutine(result) else result

    def close(self):
        self.rm.shutdown()
        self.logs.shutdown()


def run(tmp_path, scenario):
    async def main():
        b = Broker(tmp_path)
        await b.groups.startup()
        try:
            return await scenario(b)
        finally:
            await b.groups.shutdown()
            b.close()
    return asyncio.run(main())


def lisr(*partitions, controller_epoch=3, broker_epoch=50, topic="t", topic_id=TOPIC_ID) -> LeaderAndIsrRequest:
    """LeaderAndIsr v7 (Kafka 3.4+) with (index, leader, epoch, isr, replicas) partitions of one topic."""
    states = [PState(partition_index=i, controller_epoch=controller_epoch, leader=leader, leader_epoch=epoch,
                     isr=list(isr), partition_epoch=epoch, replicas=list(replicas))
              for i, leader, epoch, isr, replicas in partitions]
    return LeaderAndIsrRequest(controller_id=9, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                               type=1, topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
                                   topic_name=topic, topic_id=topic_id, partition_states=states)])


def errors_of(response) -> dict[int, int]:
    return {p.partition_index: p.error_code for t in response.topics for p in t.partition_errors}


def update_metadata(brokers, partitions=(), controller_epoch=3, broker_epoch=50, topic="t", topic_id=TOPIC_ID):
    """UpdateMetadata v8: brokers as (id, [(listener, host, port)], rack); partitions as (index, leader, epoch,
    isr, replicas, offline)."""
    Broker_, Endpoint = UpdateMetadataRequest.UpdateMetadataBroker, UpdateMetadataRequest.UpdateMetadataEndpoint
    live = [Broker_(id=i, endpoints=[Endpoint(listener=n, host=h, port=p, security_protocol=0) for n, h, p in eps],
                    rack=rack) for i, eps, rack in brokers]
    states = [UpdateMetadataRequest.UpdateMetadataPartitionState(
        partition_index=i, controller_epoch=controller_epoch, leader=leader, leader_epoch=epoch, isr=list(isr),
        zk_version=epoch, replicas=list(replicas), offline_replicas=list(offline))
        for i, leader, epoch, isr, replicas, offline in partitions]
    topics = [UpdateMetadataRequest.UpdateMetadataTopicState(topic_name=topic, topic_id=topic_id,
                                                             partition_states=states)] if states else []
    return UpdateMetadataRequest(controller_id=9, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                 topic_states=topics, live_brokers=live)


# ---------------------------------------------------------------- epochs
@pytest.mark.parametrize("broker_epoch, registered, expected", [
    (49, True, ErrorCode.STALE_BROKER_EPOCH),     # sent before the controller saw our current registration
    (50, True, ErrorCode.NONE),
    (51, True, ErrorCode.NONE),                   # the controller may learn our new epoch before we do
    (-1, True, ErrorCode.NONE),                   # a controller before KIP-380 sends none
    (50, False, ErrorCode.STALE_BROKER_EPOCH),    # our session is gone: nothing until we register again
])
def test_the_broker_epoch_decides_first(tmp_path, broker_epoch, registered, expected):
    async def scenario(b):
        if not registered:
            b.epoch = None
        answers = [(await b.call(LISR, 7, lisr((0, ME, 0, [ME], [ME]), broker_epoch=broker_epoch))).error_code,
                   (await b.call(UM, 8, update_metadata([], broker_epoch=broker_epoch))).error_code,
                   (await b.call(STOP, 4, StopReplicaRequest(controller_id=9, controller_epoch=3,
                                                             broker_epoch=broker_epoch))).error_code]
        return answers, b.rm.get_partition("t", 0) is not None

    answers, hosted = run(tmp_path, scenario)
    assert answers == [expected] * 3 and hosted == (expected == ErrorCode.NONE)


def test_a_request_for_the_registration_under_way_waits_for_it(tmp_path):
    """Our session expired at broker epoch 50 and we register again: the controller saw the new znode (epoch 51)
    and sent its requests before our create returned. Those wait for the registration and then apply (refused,
    they would never come again); one carrying the expired epoch is still refused at once."""
    async def scenario(b):
        reg = ZkBrokerRegistration(None, None, asyncio.get_running_loop(), on_suspended=None, on_resumed=None,
                                   on_lost=None, on_registered=None)
        reg.expired_epoch, reg.epoch = 50, None
        api = b.apis_list[0]
        api.broker_epoch, api.wait_registered = (lambda: reg.epoch), reg.wait_registered
        stale = (await b.call(LISR, 7, lisr((0, ME, 0, [ME], [ME]), broker_epoch=50))).error_code
        pending = [asyncio.ensure_future(b.call(UM, 8, update_metadata([], broker_epoch=51))),
                   asyncio.ensure_future(b.call(LISR, 7, lisr((0, ME, 0, [ME], [ME]), broker_epoch=51)))]
        await asyncio.sleep(0.2)
        waited = not any(p.done() for p in pending) and b.rm.get_partition("t", 0) is None
        reg.epoch = 51
        reg._registered.set()
        answers = [r.error_code for r in await asyncio.gather(*pending)]
        return stale, waited, answers, b.rm.get_partition("t", 0) is not None

    stale, waited, answers, hosted = run(tmp_path, scenario)
    assert stale == ErrorCode.STALE_BROKER_EPOCH
    assert waited and answers == [ErrorCode.NONE, ErrorCode.NONE] and hosted


def test_an_older_controller_epoch_is_refused_whole(tmp_path):
    async def scenario(b):
        first = await b.call(LISR, 7, lisr((0, ME, 1, [ME], [ME]), controller_epoch=5))
        stale = await b.call(LISR, 7, lisr((0, 2, 2, [2, ME], [2, ME]), controller_epoch=4))
        um = await b.call(UM, 8, update_metadata([], controller_epoch=4))
        return first.error_code, stale.error_code, errors_of(stale), um.error_code, b.rm.get_partition("t", 0)

    first, stale, per_partition, um, partition = run(tmp_path, scenario)
    assert (first, stale, um) == (ErrorCode.NONE, ErrorCode.STALE_CONTROLLER_EPOCH, ErrorCode.STALE_CONTROLLER_EPOCH)
    assert per_partition == {0: ErrorCode.STALE_CONTROLLER_EPOCH}
    assert partition.is_leader and partition.leader_epoch == 1


def test_per_partition_rules_of_leader_and_isr(tmp_path):
    async def scenario(b):
        await b.call(LISR, 7, lisr((0, ME, 5, [ME], [ME]), (1, ME, 5, [ME], [ME]), (2, ME, 5, [ME], [ME])))
        again = await b.call(LISR, 7, lisr((0, ME, 5, [ME], [ME]),        # same epoch: ignored
                                           (1, ME, 4, [ME], [ME]),        # older: refused
                                           (2, 2, 6, [2, ME], [2, ME]),   # newer: applied (we follow)
                                           (3, 2, 0, [2], [2])))          # not a replica here
        other_id = await b.call(LISR, 7, lisr((0, ME, 7, [ME], [ME]), topic_id=b"\x09" * 16))
        return errors_of(again), errors_of(other_id), b.rm.get_partition("t", 2).leader_id, \
            b.rm.get_partition("t", 3)

    again, other_id, leader_of_2, hosted_3 = run(tmp_path, scenario)
    assert again == {0: ErrorCode.STALE_CONTROLLER_EPOCH, 1: ErrorCode.STALE_CONTROLLER_EPOCH,
                     2: ErrorCode.NONE, 3: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert other_id == {0: ErrorCode.INCONSISTENT_TOPIC_ID}
    assert leader_of_2 == 2 and hosted_3 is None


def test_a_partition_whose_log_cannot_be_made_is_a_storage_error_of_its_own(tmp_path):
    """A file where the log directories of t-1 and t-2 belong: making those logs fails (as with no
    descriptors or no disk); the request answers KAFKA_STORAGE_ERROR for them, to lead and to follow,
    hosts neither, and still applies partition 0."""
    (tmp_path / "t-1").write_text("in the way")
    (tmp_path / "t-2").write_text("in the way")

    async def scenario(b):
        response = await b.call(LISR, 7, lisr((0, ME, 1, [ME], [ME]), (1, ME, 1, [ME], [ME]),
                                              (2, 2, 1, [2, ME], [2, ME])))
        return response.error_code, errors_of(response), [b.rm.get_partition("t", i) for i in range(3)]

    code, errors, (p0, p1, p2) = run(tmp_path, scenario)
    assert code == ErrorCode.NONE
    assert errors == {0: ErrorCode.NONE, 1: ErrorCode.KAFKA_STORAGE_ERROR, 2: ErrorCode.KAFKA_STORAGE_ERROR}
    assert p0.is_leader and p1 is None and p2 is None
    assert (tmp_path / "t-1").read_text() == "in the way"        # nothing of ours replaced it


def test_a_leader_that_cannot_start_its_epoch_does_not_act_as_leader(tmp_path):
    """Starting the epoch writes the leader-epoch checkpoint; on a full disk that fails after the state was
    taken. The partition answered KAFKA_STORAGE_ERROR yet went on as a leader without an epoch start or
    follower states (the campaign saw it shrink its ISR and take fetches): it must not lead until told again."""
    async def scenario(b):
        await b.call(LISR, 7, lisr((0, 2, 1, [2, ME], [2, ME])))          # a follower first
        partition = b.rm.get_partition("t", 0)

        def full(*args):
            raise OSError(28, "No space left on device")
        partition.log.maybe_assign_epoch_start_offset = full
        response = await b.call(LISR, 7, lisr((0, ME, 2, [2, ME], [2, ME])))
        led = partition.is_leader
        del partition.log.maybe_assign_epoch_start_offset
        again = await b.call(LISR, 7, lisr((0, ME, 3, [2, ME], [2, ME])))
        return errors_of(response), led, errors_of(again), partition.is_leader

    errors, led, errors_again, leads_again = run(tmp_path, scenario)
    assert errors == {0: ErrorCode.KAFKA_STORAGE_ERROR} and not led
    assert errors_again == {0: ErrorCode.NONE} and leads_again


def test_old_leader_and_isr_versions_answer_by_name(tmp_path):
    async def scenario(b):
        body = LeaderAndIsrRequest(controller_id=9, controller_epoch=1, broker_epoch=50, ungrouped_partition_states=[
            PState(topic_name="old", partition_index=0, controller_epoch=1, leader=ME, leader_epoch=0, isr=[ME],
                   partition_epoch=0, replicas=[ME])])
        response = await b.call(LISR, 1, body)
        return [(p.topic_name, p.partition_index, p.error_code) for p in response.partition_errors]

    assert run(tmp_path, scenario) == [("old", 0, ErrorCode.NONE)]


# ---------------------------------------------------------------- UpdateMetadata and Metadata answers
def test_update_metadata_feeds_what_metadata_answers(tmp_path):
    async def scenario(b):
        await b.call(UM, 8, update_metadata(
            [(ME, [("PLAINTEXT", "h1", 9091), ("INTERNAL", "i1", 19091)], "rack-a"),
             (2, [("PLAINTEXT", "h2", 9092)], None)],
            [(0, 2, 4, [2, 3], [2, 3, ME], [3]),       # broker 3 is down
             (1, 3, 2, [3], [3, ME], [3])]))           # its leader is down
        v1 = await b.call(3, 12, MetadataRequest(topics=None))
        v0 = await b.call(3, 0, MetadataRequest(topics=[]))
        return b.cache.controller_id, v1, v0

    controller, v1, v0 = run(tmp_path, scenario)
    assert controller == 9 and v1.controller_id == 9
    assert sorted((x.node_id, x.host, x.port, x.rack) for x in v1.brokers) == [(1, "h1", 9091, "rack-a"),
                                                                              (2, "h2", 9092, None)]
    p0, p1 = sorted(v1.topics[0].partitions, key=lambda p: p.partition_index)
    assert (p0.error_code, p0.leader_id, p0.leader_epoch, p0.replica_nodes, p0.isr_nodes, p0.offline_replicas) == \
        (ErrorCode.NONE, 2, 4, [2, 3, ME], [2, 3], [3])          # unfiltered in v1+
    assert (p1.error_code, p1.leader_id, p1.leader_epoch) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, 2)
    q0 = sorted(v0.topics[0].partitions, key=lambda p: p.partition_index)[0]
    assert (q0.error_code, q0.replica_nodes, q0.isr_nodes) == (ErrorCode.REPLICA_NOT_AVAILABLE, [2, ME], [2])


def test_a_topic_being_deleted_leaves_the_cache(tmp_path):
    async def scenario(b):
        await b.call(UM, 8, update_metadata([(ME, [("PLAINTEXT", "h", 1)], None)],
                                            [(0, ME, 0, [ME], [ME], []), (1, ME, 0, [ME], [ME], [])]))
        await b.call(UM, 8, update_metadata([(ME, [("PLAINTEXT", "h", 1)], None)], [(0, -2, 0, [ME], [ME], [])]))
        half = sorted(b.cache.get_topic("t").partition_states)
        await b.call(UM, 8, update_metadata([(ME, [("PLAINTEXT", "h", 1)], None)], [(1, -2, 0, [ME], [ME], [])]))
        return half, b.cache.get_topic("t"), b.cache.topic_by_id(TOPIC_ID)

    assert run(tmp_path, scenario) == ([1], None, None)


def test_update_metadata_without_partitions_keeps_them_and_replaces_brokers(tmp_path):
    async def scenario(b):
        await b.call(UM, 8, update_metadata([(ME, [("PLAINTEXT", "h", 1)], None), (2, [("PLAINTEXT", "g", 2)], None)],
                                            [(0, 2, 0, [2], [2, ME], [])]))
        await b.call(UM, 8, update_metadata([(ME, [("PLAINTEXT", "h", 1)], None)]))
        return b.cache.is_alive(2), b.cache.partition_state("t", 0).leader

    assert run(tmp_path, scenario) == (False, 2)


# ---------------------------------------------------------------- StopReplica
def stop_replica(*partitions, controller_epoch=3) -> StopReplicaRequest:
    """StopReplica v4 with (index, leader epoch, delete) partitions of topic t."""
    return StopReplicaRequest(controller_id=9, controller_epoch=controller_epoch, broker_epoch=50, topic_states=[
        StopReplicaRequest.StopReplicaTopicState(topic_name="t", partition_states=[
            StopReplicaRequest.StopReplicaPartitionState(partition_index=i, leader_epoch=e, delete_partition=d)
            for i, e, d in partitions])])


def test_stop_replica_epochs_and_deletion(tmp_path):
    async def scenario(b):
        await b.call(LISR, 7, lisr(*[(i, ME, 5, [ME], [ME]) for i in range(4)]))
        log_dir = b.rm.get_partition("t", 1).log_dir
        response = await b.call(STOP, 4, stop_replica((0, 4, True),     # older epoch: fenced
                                                      (1, 5, True),     # deleted, with its log
                                                      (2, -2, True),    # topic deletion: no epoch check
                                                      (3, 6, False)))   # stopped, kept
        errors = {p.partition_index: p.error_code for p in response.partition_errors}
        hosted = {i: b.rm.get_partition("t", i) is not None for i in range(4)}
        import os
        return errors, hosted, os.path.exists(log_dir)

    errors, hosted, dir_left = run(tmp_path, scenario)
    assert errors == {0: ErrorCode.FENCED_LEADER_EPOCH, 1: ErrorCode.NONE, 2: ErrorCode.NONE, 3: ErrorCode.NONE}
    assert hosted == {0: True, 1: False, 2: False, 3: True} and not dir_left


# ---------------------------------------------------------------- the group coordinator follows
def test_the_group_coordinator_follows_offsets_leadership(tmp_path):
    async def scenario(b):
        offsets = dict(topic="__consumer_offsets", topic_id=OFFSETS_ID)
        await b.call(UM, 8, update_metadata([(ME, [("PLAINTEXT", "h", 1)], None)],
                                            [(0, ME, 0, [ME], [ME, 2], []), (1, ME, 0, [ME], [ME, 2], [])],
                                            **offsets))
        await b.call(LISR, 7, lisr((0, ME, 0, [ME], [ME, 2]), (1, ME, 0, [ME], [ME, 2]), **offsets))
        await b.groups.wait_loaded()
        owned = set(b.groups.runtime.owned)
        group = next(g for g in (f"g{i}" for i in range(100)) if b.groups.partition_for(g) == 0)
        b.groups.groups.get_or_maybe_create_classic_group(group, True)
        served = b.groups.validate_group_status(group, "Heartbeat")
        await b.call(LISR, 7, lisr((0, 2, 1, [2, ME], [ME, 2]), **offsets))     # leadership moves to broker 2
        after = (set(b.groups.runtime.owned), b.groups.groups.get_group(group),
                 b.groups.validate_group_status(group, "Heartbeat"))
        await b.call(STOP, 4, StopReplicaRequest(controller_id=9, controller_epoch=3, broker_epoch=50, topic_states=[
            StopReplicaRequest.StopReplicaTopicState(topic_name="__consumer_offsets", partition_states=[
                StopReplicaRequest.StopReplicaPartitionState(partition_index=1, leader_epoch=-2,
                                                             delete_partition=True)])]))
        return owned, served, after, set(b.groups.runtime.owned)

    owned, served, (owned_after, group_after, status_after), owned_last = run(tmp_path, scenario)
    assert owned == {0, 1} and served is None
    assert owned_after == {1} and group_after is None and status_after == ErrorCode.NOT_COORDINATOR
    assert owned_last == set()
