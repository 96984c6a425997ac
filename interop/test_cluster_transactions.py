"""Transactions on a three-broker ZooKeeper cluster: the coordinator of a transactional id is the leader of
its `__transaction_state` partition (RF 3, min.insync.replicas 2), the partitions a transaction touches are
led by any broker, markers reach them over the inter-broker listener, and a partition leader checks a
transactional produce with the coordinator wherever it lives (KIP-890).

- confluent-kafka and the Java client run interop/test_transactions_clients.py's consume-transform-produce
  copier (every third transaction aborted, then redone) against the cluster; the outcome is checked the
  same way: read_committed sees each record once, in order; read_uncommitted the aborted copies too; the
  group's committed offsets are those of the committed transactions.
- The coordinator's broker is SIGKILLed in the middle of a transaction, and once after EndTxn while a
  marker cannot be delivered (the partition's only replica is down): another broker takes over the
  coordinator's partition, loads it, and the transaction ends committed or aborted on every partition,
  never half of each.
"""
from __future__ import annotations

import uuid

import pytest
from cluster_support import WAIT, new_cluster, skip_without_cluster, wait_for_full_isr

pytestmark = skip_without_cluster()
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from test_transactions_clients import (  # noqa: E402
    COUNT,
    check_outcome,
    committed_offsets,
    copy_with_confluent,
    java_copier,  # noqa: F401  (the fixture)
    produce_input,
    read_all,
)

from kafka_compat.transaction import TRANSACTION_STATE_TOPIC_NAME  # noqa: E402
from kafka_compat.transaction.transaction_log import partition_for  # noqa: E402

PARTITIONS = 3
TXN_PARTITIONS = 50


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def cluster():
    with new_cluster(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
                        "transaction.state.log.replication.factor": 3,
                        "transaction.state.log.min.isr": 2}) as c:
        yield c


def create_topics(cluster, *names: str, assignment: list[list[int]] | None = None,
                  configs: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    if assignment is not None:
        topics = [NewTopic(n, len(assignment), replica_assignment=assignment, config=configs or {}) for n in names]
    else:
        topics = [NewTopic(n, PARTITIONS, 3, config=configs or {}) for n in names]
    for future in admin.create_topics(topics).values():
        future.result(WAIT)
    for n in names:
        for p, replicas in enumerate(assignment or [[0, 1, 2]] * PARTITIONS):
            wait_for_full_isr(cluster, n, p, len(replicas))


def ensure_transaction_state(cluster) -> None:
    """`__transaction_state` exists (a first transactional producer makes it) and every partition leads."""
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": unique("first")})
    p.init_transactions(WAIT)
    p.flush(WAIT)
    for index in range(TXN_PARTITIONS):
        cluster.wait_for_leader(TRANSACTION_STATE_TOPIC_NAME, index)


def coordinator_of(cluster, txn_id: str) -> int:
    return cluster.wait_for_leader(TRANSACTION_STATE_TOPIC_NAME, partition_for(txn_id, TXN_PARTITIONS))


def txn_id_coordinated_by(cluster, broker: int, prefix: str) -> str:
    """A fresh transactional id whose `__transaction_state` partition ``broker`` leads."""
    for _ in range(1000):
        txn_id = unique(prefix)
        if cluster.leader(TRANSACTION_STATE_TOPIC_NAME, partition_for(txn_id, TXN_PARTITIONS)) == broker:
            return txn_id
    raise AssertionError(f"broker {broker} leads no {TRANSACTION_STATE_TOPIC_NAME} partition")


def restart_all(cluster, *killed: int) -> None:
    """Restart the SIGKILLed brokers, each once its old ZooKeeper session has ended: a broker whose id is
    still registered by another session refuses to start, as Kafka's does."""
    for i in killed:
        cluster.wait_until(lambda: i not in cluster.registered(), WAIT, f"broker {i}'s old session to end")
        cluster.restart(i)
    cluster.wait_until(lambda: cluster.registered() == {0, 1, 2}, WAIT, "every broker registered")
    for index in range(TXN_PARTITIONS):
        wait_for_full_isr(cluster, TRANSACTION_STATE_TOPIC_NAME, index, 3)


def values(prefix: str, partition: int, n: int) -> list[bytes]:
    return [f"{prefix}-{partition}-{i}".encode() for i in range(n)]


def produce_in_transaction(cluster, txn_id: str, topic: str, prefix: str, n: int):
    """A producer with an open transaction holding ``n`` records on each partition of ``topic``, all acknowledged."""
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                            "transaction.timeout.ms": 60000})
    producer.init_transactions(WAIT)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        for v in values(prefix, p, n):
            producer.produce(topic, value=v, partition=p)
    assert producer.flush(WAIT) == 0
    return producer


def all_or_nothing(cluster, topic: str, prefix: str, n: int, partitions: range) -> bool:
    """Every partition shows the transaction's ``n`` records to read_uncommitted, and to read_committed
    either on every partition (True: committed) or on none (False: aborted)."""
    bootstrap = cluster.bootstrap
    uncommitted = read_all(bootstrap, topic, "read_uncommitted", n * len(partitions))
    for p in partitions:
        assert uncommitted[p] == values(prefix, p, n), f"partition {p}: {uncommitted[p]}"
    committed = read_all(bootstrap, topic, "read_committed", 0)
    seen = {p: committed[p] for p in partitions}
    if all(v == values(prefix, p, n) for p, v in seen.items()):
        return True
    assert all(v == [] for v in seen.values()), f"half committed: {seen}"
    return False


# ---------------------------------------------------------------- consume-transform-produce
def test_confluent_consume_transform_produce_on_a_cluster_is_exactly_once(cluster):
    input_topic, output, group = unique("in"), unique("out"), unique("copier")
    create_topics(cluster, input_topic, output)
    source = produce_input(cluster.bootstrap, input_topic)
    result = copy_with_confluent(cluster.bootstrap, input_topic, output, group)
    assert result["committed"] == COUNT and result["aborted"] > 0
    check_outcome(cluster.bootstrap, source, output, group, input_topic, result["aborted"])


def test_java_consume_transform_produce_on_a_cluster_is_exactly_once(cluster, java_copier):  # noqa: F811
    import json
    import subprocess
    input_topic, output, group = unique("jin"), unique("jout"), unique("jcopier")
    create_topics(cluster, input_topic, output)
    source = produce_input(cluster.bootstrap, input_topic)
    done = subprocess.run(["java", "-cp", java_copier, "TransactionalCopy", cluster.bootstrap, input_topic, output,
                           group, unique("jtxn"), str(COUNT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["committed"] == COUNT and result["aborted"] > 0
    check_outcome(cluster.bootstrap, source, output, group, input_topic, result["aborted"])


# ---------------------------------------------------------------- the coordinator's broker killed
def test_the_coordinators_broker_killed_mid_transaction_commits_or_aborts_every_partition(cluster):
    ensure_transaction_state(cluster)
    topic, group = unique("mid"), unique("mid-group")
    create_topics(cluster, topic)
    coordinator = cluster.wait_for_leader(TRANSACTION_STATE_TOPIC_NAME, 0)
    txn_id = txn_id_coordinated_by(cluster, coordinator, "mid")
    producer = produce_in_transaction(cluster, txn_id, topic, "mid", 4)
    consumer_group = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    producer.send_offsets_to_transaction([ck.TopicPartition(topic, p, 4) for p in range(PARTITIONS)],
                                         consumer_group.consumer_group_metadata(), WAIT)
    consumer_group.close()

    cluster.kill(coordinator)
    cluster.wait_for_leader(TRANSACTION_STATE_TOPIC_NAME, partition_for(txn_id, TXN_PARTITIONS),
                            exclude={coordinator})
    try:
        producer.commit_transaction(WAIT)
        outcome = True
    except ck.KafkaException as e:
        assert e.args[0].txn_requires_abort(), e
        producer.abort_transaction(WAIT)
        outcome = False
    print("the transaction", "committed" if outcome else "aborted")
    assert all_or_nothing(cluster, topic, "mid", 4, range(PARTITIONS)) is outcome
    expected = {p: 4 if outcome else -1001 for p in range(PARTITIONS)}
    assert committed_offsets(cluster.bootstrap, group, topic) == expected
    restart_all(cluster, coordinator)
    assert all_or_nothing(cluster, topic, "mid", 4, range(PARTITIONS)) is outcome
    # the id carries on with the next coordinator: a new transaction commits
    producer.begin_transaction()
    producer.produce(topic, value=b"next", partition=0)
    producer.commit_transaction(WAIT)
    assert read_all(cluster.bootstrap, topic, "read_committed", 1)[0][-1] == b"next"


def test_the_coordinators_broker_killed_after_end_txn_before_every_marker_the_next_one_completes_it(cluster):
    """EndTxn(commit) is answered once PrepareCommit is durable; one partition's only replica is down, so its
    marker cannot be written and the transaction stays PrepareCommit. Then the coordinator's broker dies:
    the broker that takes its partition over loads PrepareCommit and writes the missing marker (once the
    partition is back), and CompleteCommit."""
    ensure_transaction_state(cluster)
    lonely = 2                     # partition 0's only replica
    others = [0, 1]
    topic = unique("prepared")
    create_topics(cluster, topic, assignment=[[lonely], [0], [1]], configs={"min.insync.replicas": "1"})
    coordinator = next(b for b in others if any(
        cluster.leader(TRANSACTION_STATE_TOPIC_NAME, i) == b for i in range(TXN_PARTITIONS)))
    txn_id = txn_id_coordinated_by(cluster, coordinator, "prepared")
    producer = produce_in_transaction(cluster, txn_id, topic, "prepared", 3)

    cluster.kill(lonely)
    cluster.wait_until(lambda: lonely not in cluster.registered(), WAIT, f"broker {lonely} to be gone")
    cluster.wait_until(lambda: cluster.leader(topic, 0) == -1, WAIT, f"{topic}-0 to be offline")
    try:
        producer.commit_transaction(30)        # PrepareCommit is durable; partition 0's marker is pending
        resume = False
    except ck.KafkaException as e:
        # EndTxn met the reload that broker 2's death causes (the coordinator's partition gets a new leader
        # epoch): the retried EndTxn finds PrepareCommit and waits, as in Kafka, for partition 0's marker
        assert e.args[0].retriable(), e
        resume = True
    committed = read_all(cluster.bootstrap, topic, "read_committed", 6)
    assert committed[1] == values("prepared", 1, 3) and committed[2] == values("prepared", 2, 3)

    cluster.kill(coordinator)
    restart_all(cluster, lonely, coordinator)
    if resume:
        producer.commit_transaction(WAIT)
    # the new coordinator wrote partition 0's COMMIT marker
    assert all_or_nothing(cluster, topic, "prepared", 3, range(PARTITIONS)) is True
    # and CompleteCommit: the id's next transaction is accepted
    producer.begin_transaction()
    producer.produce(topic, value=b"after", partition=1)
    producer.commit_transaction(WAIT)
    assert read_all(cluster.bootstrap, topic, "read_committed", 7)[1][-1] == b"after"
