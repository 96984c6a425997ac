"""Share groups (KIP-932) with the Java client 4.x's KafkaShareConsumer, on a single node.

Three members of one share group on a six-partition topic (interop/java4/ShareMember.java reports
every record it is given, with its delivery count and what it acknowledged). A new share group
starts at the latest offset, so most tests first write "warm" records until every partition has
delivered one: from then on every record written must be delivered. One sets the group's
share.auto.offset.reset to earliest (the GROUP config resource) and reads what came before it.
"""
from __future__ import annotations

import contextlib
import itertools
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import peers  # noqa: E402
from test_groups_support import WAIT, Member, new_topic, unique, wait_until  # noqa: E402
from wire import WireClient  # noqa: E402

from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest  # noqa: E402
from kafka_compat.protocol.messages.list_groups import ListGroupsRequest  # noqa: E402
from kafka_compat.protocol.messages.share_group_describe import ShareGroupDescribeRequest  # noqa: E402
from kafka_compat.testing import EmbeddedBroker  # noqa: E402

PARTITIONS = 6
LOCK_MS = 3000
# Short heartbeats, sessions and acquisition locks so that the tests take seconds (Kafka's floors allow 1 s
# locks): a killed member's partitions go to the others when its session ends.
BROKER = {"group.share.min.heartbeat.interval.ms": "500", "group.share.heartbeat.interval.ms": "500",
          "group.share.min.session.timeout.ms": "2000", "group.share.session.timeout.ms": "4000",
          "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS),
          "offsets.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(BROKER, data_dir=str(tmp_path_factory.mktemp("share-broker"))) as b:
        yield b


@pytest.fixture(scope="module")
def java4():
    return peers.require(peers.java4_classpath(), "the Java client 4.x")


def share_member(classpath, broker, topic, group, name, log_dir, mode) -> Member:
    return Member("java-4.x", ["java", "-Xmx256m", "-cp", classpath, "ShareMember", broker.bootstrap, topic, group,
                               name, mode], name, log_dir)


def records(member: Member) -> list[dict]:
    with member.lock:
        return [e for e in member.events if e["event"] == "record"]


def deliveries(members) -> list[dict]:
    return [r for m in members for r in records(m)]


class Producer:
    def __init__(self, broker, topic: str, partitions: int = PARTITIONS):
        from kafka import KafkaProducer
        self.producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        self.topic, self.partitions = topic, partitions

    def send(self, values: list[str]) -> None:
        for i, v in enumerate(values):
            self.producer.send(self.topic, value=v.encode(), partition=i % self.partitions)
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()


def warm_up(producer: Producer, members) -> None:
    """Write warm records (accepted, then ignored) until every partition has delivered one to the group:
    every share partition then exists, and what is written after it is delivered."""
    seen: set[int] = set()
    deadline = time.monotonic() + WAIT
    for n in itertools.count():
        producer.send([f"warm-{n}-{p}" for p in range(producer.partitions)])
        seen = {r["p"] for r in deliveries(members) if r["v"].startswith("warm")}
        if len(seen) == producer.partitions:
            return
        assert time.monotonic() < deadline, f"partitions that delivered a warm record: {sorted(seen)}"
        time.sleep(0.5)


def wire(broker) -> WireClient:
    host, port = broker.bootstrap.rsplit(":", 1)
    return WireClient(host, int(port))


def set_group_config(broker, group: str, name: str, value: str) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource (what kafka-configs --entity-type groups sends)."""
    A = IncrementalAlterConfigsRequest
    c = wire(broker)
    try:
        r = c.call(44, 1, A(resources=[A.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
            A.AlterableConfig(name=name, config_operation=0, value=value)])], validate_only=False))
    finally:
        c.close()
    assert r.responses[0].error_code == 0, r.responses[0].error_message


@contextlib.contextmanager
def share_group(java4, broker, log_dir, modes, partitions: int = PARTITIONS):
    """A new topic and a share group of members in these modes, warmed up: (topic, group, producer, members).
    Members added to the list are stopped too."""
    topic = new_topic(broker, partitions)
    group = unique("share")
    members = [share_member(java4, broker, topic, group, f"{group}-m{i}", log_dir, mode)
               for i, mode in enumerate(modes)]
    producer = Producer(broker, topic, partitions)
    try:
        wait_until(lambda: all(any(e["event"] == "subscribed" for e in m.events) for m in members),
                   "members started", members)
        warm_up(producer, members)
        yield topic, group, producer, members
    finally:
        producer.close()
        for m in members:
            m.close() if m.alive else None


def by_value(members) -> dict[str, list[int]]:
    """Each value delivered: its delivery counts, in the order reported."""
    out: dict[str, list[int]] = {}
    for r in deliveries(members):
        out.setdefault(r["v"], []).append(r["d"])
    return out


def test_implicit_acknowledgement_delivers_every_record_once(java4, broker, tmp_path):
    with share_group(java4, broker, tmp_path, ["implicit"] * 3) as (_, _, producer, members):
        values = [f"v-{i}" for i in range(300)]
        producer.send(values)
        wait_until(lambda: {r["v"] for r in deliveries(members)} >= set(values), "every record delivered", members)
        time.sleep(1)       # anything delivered twice would show now
        got = Counter(r["v"] for r in deliveries(members) if not r["v"].startswith("warm"))
        assert got == Counter(values), "with no lock expiring, every record is delivered exactly once"
        assert all(r["d"] == 1 for r in deliveries(members))
        assert sum(1 for m in members if any(not r["v"].startswith("warm") for r in records(m))) >= 2, \
            "the group shares the work"


def test_a_group_set_to_earliest_reads_what_was_written_before_it(java4, broker, tmp_path):
    topic = new_topic(broker, PARTITIONS)
    producer = Producer(broker, topic)
    values = [f"old-{i}" for i in range(120)]
    producer.send(values)
    producer.close()
    group = unique("share")
    set_group_config(broker, group, "share.auto.offset.reset", "earliest")
    members = [share_member(java4, broker, topic, group, f"{group}-m{i}", tmp_path, "implicit") for i in range(3)]
    try:
        wait_until(lambda: {r["v"] for r in deliveries(members)} >= set(values), "every old record delivered",
                   members)
        assert Counter(r["v"] for r in deliveries(members)) == Counter(values)
        c = wire(broker)
        try:
            listed = c.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["share"])).groups
            assert (group, "share") in {(g.group_id, g.group_type) for g in listed}
            assert group not in {g.group_id for g in c.call(16, 5, ListGroupsRequest(
                states_filter=[], types_filter=["consumer"])).groups}

            def described():
                d = c.call(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups[0]
                owned = [p for m in d.members for tp in m.assignment.topic_partitions for p in tp.partitions]
                return d.error_code == 0 and d.group_state == "Stable" and len(d.members) == 3 \
                    and sorted(owned) == list(range(PARTITIONS)) and d.assignor_name == "simple"
            wait_until(described, "three members sharing the six partitions", members)
        finally:
            c.close()
    finally:
        for m in members:
            m.close()


def test_explicit_accept_release_reject(java4, broker, tmp_path):
    with share_group(java4, broker, tmp_path, ["explicit"] * 3) as (_, _, producer, members):
        accepted = [f"a-{i}" for i in range(60)]
        released = [f"r-{i}" for i in range(30)]
        rejected = [f"x-{i}" for i in range(30)]
        producer.send(accepted + released + rejected)
        wait_until(lambda: all(sorted(by_value(members).get(v, [])) == [1, 2] for v in released)
                   and all(v in by_value(members) for v in accepted + rejected), "released records redelivered",
                   members)
        time.sleep(LOCK_MS / 1000 + 1)      # past a lock's expiry: nothing more may come back
        seen = by_value(members)
        assert all(seen[v] == [1] for v in accepted), "ACCEPT is final"
        assert all(sorted(seen[v]) == [1, 2] for v in released), "a RELEASEd record comes back with delivery count 2"
        assert all(seen[v] == [1] for v in rejected), "a REJECTed record never comes back"


def hold_records(java4, broker, topic, group, producer, log_dir, members) -> tuple[Member, set[str]]:
    """A member that acquires records of whatever it is given, then stops polling: (it, what it holds)."""
    holder = share_member(java4, broker, topic, group, f"{group}-holder", log_dir, "hold")
    members.append(holder)
    deadline = time.monotonic() + WAIT
    while not any(e["event"] == "holding" for e in holder.events):
        producer.send([f"h-{time.monotonic_ns()}-{p}" for p in range(producer.partitions)])
        assert time.monotonic() < deadline, "the holder never received records"
        time.sleep(0.3)
    return holder, {r["v"] for r in records(holder)}


def test_records_held_past_the_lock_duration_go_to_another_member(java4, broker, tmp_path):
    """One partition shared by two members: the holder stays in the group (its session alive) but its
    acquisition locks run out, and the other member is given the records."""
    with share_group(java4, broker, tmp_path, ["implicit"], partitions=1) as (topic, group, producer, members):
        other = list(members)
        holder, held = hold_records(java4, broker, topic, group, producer, tmp_path, members)
        held_at = time.monotonic()
        wait_until(lambda: held <= {r["v"] for r in deliveries(other)}, "held records redelivered", other)
        assert time.monotonic() - held_at >= LOCK_MS / 1000 - 0.5, "not before the lock ran out"
        assert holder.alive
        assert all(r["d"] == 2 for r in deliveries(other) if r["v"] in held), "they come back as second deliveries"


def test_records_held_by_a_killed_member_go_to_another(java4, broker, tmp_path):
    """A SIGKILLed member's connection closes: its share session ends and its records are released (as
    Kafka's ShareSessionCache does on a disconnect); its partitions move when its group session ends."""
    with share_group(java4, broker, tmp_path, ["implicit"] * 2) as (topic, group, producer, members):
        other = list(members)
        holder, held = hold_records(java4, broker, topic, group, producer, tmp_path, members)
        holder.kill()
        wait_until(lambda: held <= {r["v"] for r in deliveries(other)}, "held records redelivered", other)
        assert all(r["d"] == 2 for r in deliveries(other) if r["v"] in held), "they come back as second deliveries"


def test_poison_record_is_archived_at_the_delivery_count_limit(java4, broker, tmp_path):
    limit = 5       # group.share.delivery.count.limit
    with share_group(java4, broker, tmp_path, ["explicit"] * 3) as (_, _, producer, members):
        producer.send(["p-poison"] + [f"a-{i}" for i in range(PARTITIONS - 1)])
        wait_until(lambda: sorted(by_value(members).get("p-poison", [])) == list(range(1, limit + 1)),
                   "the poison record delivered up to the limit", members)
        time.sleep(LOCK_MS / 1000 + 1)
        assert sorted(by_value(members)["p-poison"]) == list(range(1, limit + 1)), \
            "archived at the delivery count limit: never delivered again"


def test_read_committed_share_group_sees_committed_records_only(java4, broker, tmp_path):
    from confluent_kafka import Producer as TxnProducer

    topic = new_topic(broker, PARTITIONS)
    producer = TxnProducer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("txn")})
    producer.init_transactions()
    committed, aborted = [], []
    for n, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        values = [f"{'c' if commit else 'x'}-{n}-{i}" for i in range(30)]
        for i, v in enumerate(values):
            producer.produce(topic, value=v.encode(), partition=i % PARTITIONS)
        producer.flush()
        (producer.commit_transaction if commit else producer.abort_transaction)()
        (committed if commit else aborted).extend(values)
    group = unique("share")
    set_group_config(broker, group, "share.auto.offset.reset", "earliest")
    set_group_config(broker, group, "share.isolation.level", "read_committed")
    members = [share_member(java4, broker, topic, group, f"{group}-m{i}", tmp_path, "implicit") for i in range(3)]
    try:
        wait_until(lambda: {r["v"] for r in deliveries(members)} >= set(committed), "every committed record",
                   members)
        time.sleep(LOCK_MS / 1000 + 1)      # past a lock's expiry: whatever was held comes back by now
        got = Counter(r["v"] for r in deliveries(members))
        assert not set(got) & set(aborted), "an aborted transaction's records are never delivered"
        assert got == Counter(committed), "each committed record once"
    finally:
        for m in members:
            m.close()


def test_kafka_share_groups_tool(java4, broker, tmp_path):
    """Kafka 4.4's kafka-share-groups (ShareGroupCommand) lists, describes, resets the offsets of and deletes
    a share group: ListGroups, ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets, DeleteGroups."""
    import kafka_tools
    kafka_tools.require()

    def share_groups(*args) -> str:
        out = kafka_tools.run("kafka-share-groups", "--bootstrap-server", broker.bootstrap, *args)
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    topic = new_topic(broker, 3)
    producer = Producer(broker, topic, 3)
    producer.send([f"t-{i}" for i in range(30)])
    producer.close()
    group = unique("share")
    set_group_config(broker, group, "share.auto.offset.reset", "earliest")
    member = share_member(java4, broker, topic, group, f"{group}-m", tmp_path, "implicit")
    try:
        wait_until(lambda: len(deliveries([member])) >= 30, "every record delivered", [member])
        assert group in share_groups("--list").split()
        rows = [line.split() for line in share_groups("--describe", "--group", group).splitlines()
                if line.startswith(group)]
        # the start offsets move past what the member accepted (its next poll acknowledges the last ones)
        wait_until(lambda: all(r[3] == "10" and r[4] == "0" for r in [
            line.split() for line in share_groups("--describe", "--group", group).splitlines()
            if line.startswith(group)]), "every partition acknowledged to its end", [member])
        assert sorted(r[2] for r in rows) == ["0", "1", "2"]
        members = share_groups("--describe", "--group", group, "--members")
        assert f"{group}-m" in members and f"{topic}:0,1,2" in members
        assert "Stable" in share_groups("--describe", "--group", group, "--state")
    finally:
        member.close()

    def start_offsets() -> dict[str, str]:
        return {r[2]: r[3] for r in (line.split() for line in share_groups("--describe", "--group", group)
                                     .splitlines()) if r and r[0] == group}
    # AlterShareGroupOffsets: the empty group is reset, and a new member is given the records again
    share_groups("--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "5", "--execute")
    assert start_offsets() == {"0": "10", "1": "5", "2": "10"}
    share_groups("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert start_offsets() == {"0": "0", "1": "0", "2": "0"}
    again = share_member(java4, broker, topic, group, f"{group}-again", tmp_path, "implicit")
    try:
        wait_until(lambda: len(deliveries([again])) >= 30, "every record delivered after the reset", [again])
    finally:
        again.close()
    # DeleteShareGroupOffsets, then DeleteGroups
    assert "Successful" in share_groups("--delete-offsets", "--group", group, "--topic", topic)
    assert start_offsets() == {}
    assert "was successful" in share_groups("--delete", "--group", group)
    assert group not in share_groups("--list").split()


def test_acknowledgements_survive_a_broker_restart(java4, tmp_path_factory, tmp_path):
    """The share partitions' state is in __share_group_state: after a restart the group goes on from where
    its acknowledgements left it, and only what was not acknowledged is delivered again."""
    with EmbeddedBroker(BROKER, data_dir=str(tmp_path_factory.mktemp("share-restart"))) as b:
        topic = new_topic(b, 3)
        producer = Producer(b, topic, 3)
        accepted = [f"a-{i}" for i in range(30)]
        released = [f"r-{i}" for i in range(6)]         # released once, then left unacknowledged
        producer.send(accepted + released)
        producer.close()
        group = unique("share")
        set_group_config(b, group, "share.auto.offset.reset", "earliest")
        member = share_member(java4, b, topic, group, f"{group}-m", tmp_path, "explicit")
        try:
            wait_until(lambda: all(sorted(by_value([member]).get(v, [])) == [1, 2] for v in released)
                       and all(v in by_value([member]) for v in accepted), "everything delivered", [member])
        finally:
            member.close()
        producer = Producer(b, topic, 3)
        held = [f"h-{i}" for i in range(3)]       # acquired by a member that never acknowledges them
        producer.send(held)
        producer.close()
        holder = share_member(java4, b, topic, group, f"{group}-holder", tmp_path, "hold")
        try:
            wait_until(lambda: any(e["event"] == "holding" for e in holder.events), "the records held", [holder])
            b.stop()
        finally:
            holder.kill()
        b.start()
        producer = Producer(b, topic, 3)
        later = [f"later-{i}" for i in range(9)]
        producer.send(later)
        producer.close()
        after = share_member(java4, b, topic, group, f"{group}-after", tmp_path, "implicit")
        try:
            held_then = {r["v"] for r in records(holder)}
            wait_until(lambda: set(later) | held_then <= set(by_value([after])), "the new and the held records",
                       [after])
            time.sleep(1)
            seen = by_value([after])
            assert not set(seen) & set(accepted + released), "no acknowledged record comes back after the restart"
            assert set(seen) == set(later) | held_then, seen
            assert all(seen[v] == [2] for v in held_then), "a held record comes back as its second delivery"
        finally:
            after.close()
