"""Consumer groups with the Java client, KafkaJS and kcat.

The Java and KafkaJS members below speak the JSON lines of
test_groups_support.py (assigned / revoked / records, committed before they are
reported; "close" on stdin leaves the group), so they run the same scenarios as
the Python clients. The programs are small and live here, next to the only
tests that use them; they are written to a temporary directory and compiled
(Java) or run (Node) from there against the peers `interop/setup.sh` installs.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

kafka = pytest.importorskip("kafka")

import peers  # noqa: E402
from test_groups_support import (  # noqa: E402
    BROKER,
    PARTITIONS,
    Member,
    balanced,
    expect_each_once,
    membership_scenario,
    new_topic,
    produce,
    restart_scenario,
    resume_scenario,
    static_restart_scenario,
    unique,
    wait_until,
)

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

JAVA_GROUP_TOOL = r'''
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.io.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/** A consumer-group member that reports as JSON lines, and the AdminClient's group calls. */
public class GroupTool {
    static synchronized void emit(String json) { System.out.println(json); System.out.flush(); }

    static String q(String s) { return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\""; }

    static String partitions(Collection<TopicPartition> tps) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : tps) ps.add(tp.partition());
        Collections.sort(ps);
        return ps.toString();
    }

    public static void main(String[] a) throws Exception {
        if (a[0].equals("member")) member(a[1], a[2], a[3], a[4], a[5], Integer.parseInt(a[6]));
        else System.exit(admin(a[1], a[2], a.length > 3 ? a[3] : null));
    }

    static void member(String bootstrap, String topic, String group, String name, String instance, int sessionMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", name);
        if (!instance.equals("-")) p.put("group.instance.id", instance);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("session.timeout.ms", Integer.toString(sessionMs));
        p.put("heartbeat.interval.ms", Integer.toString(sessionMs / 4));
        p.put("partition.assignment.strategy", RangeAssignor.class.getName());
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = r.readLine()) != null && !line.trim().equals("close")) { }
            } catch (IOException e) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                    emit("{\"event\":\"revoked\",\"partitions\":" + partitions(ps) + "}");
                }
                public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                    emit("{\"event\":\"assigned\",\"partitions\":" + partitions(ps) + "}");
                }
            });
            while (!stop.get()) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(100));
                if (rs.isEmpty()) continue;
                try {
                    c.commitSync();
                } catch (KafkaException e) {
                    emit("{\"event\":\"commit-failed\",\"error\":" + q(e.toString()) + "}");
                    continue;
                }
                StringBuilder b = new StringBuilder("{\"event\":\"records\",\"records\":[");
                boolean first = true;
                for (ConsumerRecord<String, String> r : rs) {
                    if (!first) b.append(',');
                    first = false;
                    b.append('[').append(r.partition()).append(',').append(r.offset()).append(',')
                     .append(q(r.value())).append(']');
                }
                emit(b.append("]}").toString());
            }
        }
        emit("{\"event\":\"closed\"}");
    }

    static int admin(String bootstrap, String command, String group) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            switch (command) {
                case "list": {
                    StringBuilder b = new StringBuilder("{\"groups\":{");
                    boolean first = true;
                    for (ConsumerGroupListing g : admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS)) {
                        if (!first) b.append(',');
                        first = false;
                        b.append(q(g.groupId())).append(':').append(q(String.valueOf(g.state().orElse(null))));
                    }
                    emit(b.append("}}").toString());
                    return 0;
                }
                case "describe": {
                    ConsumerGroupDescription d = admin.describeConsumerGroups(Collections.singletonList(group))
                        .all().get(30, TimeUnit.SECONDS).get(group);
                    StringBuilder b = new StringBuilder("{\"state\":" + q(String.valueOf(d.state()))
                        + ",\"assignor\":" + q(d.partitionAssignor()) + ",\"members\":[");
                    boolean first = true;
                    for (MemberDescription m : d.members()) {
                        if (!first) b.append(',');
                        first = false;
                        b.append("{\"id\":").append(q(m.consumerId())).append(",\"client\":").append(q(m.clientId()))
                         .append(",\"host\":").append(q(m.host())).append(",\"partitions\":")
                         .append(partitions(m.assignment().topicPartitions())).append('}');
                    }
                    emit(b.append("]}").toString());
                    return 0;
                }
                case "offsets": {
                    Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                    StringBuilder b = new StringBuilder("{\"offsets\":{");
                    boolean first = true;
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                        if (!first) b.append(',');
                        first = false;
                        b.append(q(e.getKey().topic() + ":" + e.getKey().partition())).append(':')
                         .append(e.getValue().offset());
                    }
                    emit(b.append("}}").toString());
                    return 0;
                }
                case "delete": {
                    try {
                        admin.deleteConsumerGroups(Collections.singletonList(group)).all().get(30, TimeUnit.SECONDS);
                        emit("{\"deleted\":" + q(group) + "}");
                    } catch (ExecutionException e) {
                        emit("{\"error\":" + q(e.getCause().getClass().getSimpleName()) + "}");
                    }
                    return 0;
                }
                default:
                    return 2;
            }
        }
    }
}
'''

KAFKAJS_MEMBER = r'''
'use strict'
// A KafkaJS consumer-group member that reports as JSON lines (see test_groups_support.py).
const { Kafka, logLevel } = require('kafkajs')
const [bootstrap, topic, group, name, sessionMs] = process.argv.slice(2)
const out = obj => process.stdout.write(JSON.stringify(obj) + '\n')
const kafka = new Kafka({ clientId: name, brokers: [bootstrap], logLevel: logLevel.NOTHING })
const consumer = kafka.consumer({
  groupId: group, sessionTimeout: Number(sessionMs), heartbeatInterval: Math.floor(Number(sessionMs) / 4),
  rebalanceTimeout: 20000,
  // KafkaJS heartbeats between fetches: a fetch must not wait longer than the session lasts.
  maxWaitTimeInMs: 200
})
consumer.on(consumer.events.GROUP_JOIN, e => out({
  event: 'assigned', partitions: (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
}))
consumer.on(consumer.events.REBALANCING, () => out({ event: 'revoked', partitions: [] }))

async function main () {
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (!batch.messages.length) return
      const last = batch.messages[batch.messages.length - 1].offset
      try {
        await consumer.commitOffsets([{ topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() }])
      } catch (e) {
        out({ event: 'commit-failed', error: String(e) })
        throw e   // KafkaJS rejoins and starts again from the committed offsets
      }
      out({ event: 'records', records: batch.messages.map(m => [batch.partition, Number(m.offset), m.value.toString()]) })
    }
  })
}

let closing = false
process.stdin.on('data', async data => {
  if (closing || !data.toString().includes('close')) return
  closing = true
  await consumer.disconnect()
  out({ event: 'closed' })
  process.exit(0)
})
main().catch(e => { console.error(e); process.exit(1) })
'''


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(BROKER) as b:
        yield b


# ---------------------------------------------------------------- Java
@pytest.fixture(scope="module")
def java(tmp_path_factory):
    """The class path that runs GroupTool (compiled once per module)."""
    jars = peers.require(peers.java_classpath(), "the Java client")
    out = tmp_path_factory.mktemp("java-group-tool")
    (out / "GroupTool.java").write_text(JAVA_GROUP_TOOL)
    subprocess.run(["javac", "-nowarn", "-cp", jars, "-d", str(out), str(out / "GroupTool.java")], check=True,
                   capture_output=True)
    return os.pathsep.join([str(out), jars])


def java_member(classpath, broker, topic, group, log_dir, instance=None, session_ms=3000) -> Member:
    name = unique("java")
    return Member("java", ["java", "-cp", classpath, "GroupTool", "member", broker.bootstrap, topic, group, name,
                           instance or "-", str(session_ms)], name, log_dir)


def java_admin(classpath, broker, command: str, group: str | None = None) -> dict:
    args = ["java", "-cp", classpath, "GroupTool", "admin", broker.bootstrap, command] + ([group] if group else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_java_static_member_restarts_within_its_session_without_a_rebalance(broker, tmp_path, java):
    topic, group = new_topic(broker), "java-static"
    static_restart_scenario(broker, topic, group, lambda instance: java_member(
        java, broker, topic, group, tmp_path, instance=instance, session_ms=10000))


def test_java_and_python_members_agree_on_range(broker, tmp_path, java):
    from test_groups_support import python_member
    topic, group = new_topic(broker), "java-mixed"
    members = [java_member(java, broker, topic, group, tmp_path),
               python_member("kafka-python", broker.bootstrap, topic, group, unique("kp"), tmp_path)]
    try:
        wait_until(lambda: balanced(members, PARTITIONS), "Java and kafka-python to share the partitions", members)
        assert sorted(tuple(m.assignment) for m in members) == [(0, 1, 2), (3, 4, 5)]
        expect_each_once(members, produce(broker, topic, "mixed"))
    finally:
        for m in members:
            m.stop()


def test_java_admin_lists_describes_and_deletes_groups_and_lists_offsets(broker, tmp_path, java):
    topic, group = new_topic(broker), "java-admin"
    member = java_member(java, broker, topic, group, tmp_path)
    try:
        wait_until(lambda: balanced([member], PARTITIONS), "the member to own the topic", [member])
        expect_each_once([member], produce(broker, topic, "admin", count=12))
        listed = java_admin(java, broker, "list")["groups"]
        assert listed[group] == "Stable"
        described = java_admin(java, broker, "describe", group)
        assert described["state"] == "Stable" and described["assignor"] == "range"
        assert [(m["id"], m["partitions"]) for m in described["members"]] == [
            (described["members"][0]["id"], list(range(PARTITIONS)))]
        assert described["members"][0]["host"] == "/127.0.0.1"
        offsets = java_admin(java, broker, "offsets", group)["offsets"]
        assert offsets == {f"{topic}:{p}": 2 for p in range(PARTITIONS)}
        assert java_admin(java, broker, "delete", group) == {"error": "GroupNotEmptyException"}
    finally:
        member.stop()
    assert java_admin(java, broker, "describe", group)["state"] == "Empty"
    assert java_admin(java, broker, "delete", group) == {"deleted": group}
    assert group not in java_admin(java, broker, "list")["groups"]
    assert java_admin(java, broker, "offsets", group)["offsets"] == {}
    assert java_admin(java, broker, "delete", group) == {"error": "GroupIdNotFoundException"}


# ---------------------------------------------------------------- KafkaJS
@pytest.fixture(scope="module")
def kafkajs(tmp_path_factory):
    node_dir = peers.require(peers.node_dir(), "KafkaJS")
    script = tmp_path_factory.mktemp("kafkajs-member") / "member.js"
    script.write_text(KAFKAJS_MEMBER)
    env = dict(os.environ, NODE_PATH=os.path.join(node_dir, "node_modules"))
    return script, env


def kafkajs_member(kafkajs, broker, topic, group, log_dir, session_ms=3000) -> Member:
    script, env = kafkajs
    name = unique("kafkajs")
    return Member("kafkajs", [peers.node_binary(), str(script), broker.bootstrap, topic, group, name,
                              str(session_ms)], name, log_dir, env=env)


# ---------------------------------------------------------------- both
@pytest.fixture(params=["java", "kafkajs"])
def start_peer(request):
    """`start_peer(broker, topic, group, log_dir)` starts a Java or a KafkaJS member."""
    if request.param == "java":
        classpath = request.getfixturevalue("java")
        return lambda broker, topic, group, log_dir: java_member(classpath, broker, topic, group, log_dir)
    runtime = request.getfixturevalue("kafkajs")
    return lambda broker, topic, group, log_dir: kafkajs_member(runtime, broker, topic, group, log_dir)


def test_three_members_then_leave_crash_and_join(broker, tmp_path, start_peer):
    topic = new_topic(broker)
    membership_scenario(broker, topic, lambda: start_peer(broker, topic, f"group-of-{topic}", tmp_path))


def test_consumer_resumes_from_committed_offsets_also_after_a_broker_restart(tmp_path, start_peer):
    with EmbeddedBroker(BROKER) as broker:
        topic = new_topic(broker)
        start = lambda: start_peer(broker, topic, f"resume-{topic}", tmp_path)  # noqa: E731
        resume_scenario(broker, topic, start)
        restart_scenario(broker, topic, start)


# ---------------------------------------------------------------- kcat
def kcat_group(broker, topic: str, group: str, count: int) -> list[str]:
    """kcat -G: consume `count` records as a member of `group`, then leave (committing on close)."""
    binary = peers.require(peers.kcat_binary(), "kcat")
    done = subprocess.run([binary, "-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                           "-c", str(count), "-q", "-f", "%s\n", topic],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_kcat_consumes_as_a_group_and_resumes_where_the_group_left_off(broker):
    topic, group = new_topic(broker), "kcat-group"
    first = produce(broker, topic, "first", count=30)
    assert sorted(kcat_group(broker, topic, group, 30)) == sorted(first)
    second = produce(broker, topic, "second", count=30)
    assert sorted(kcat_group(broker, topic, group, 30)) == sorted(second)
