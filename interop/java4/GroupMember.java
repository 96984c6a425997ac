import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One consumer-group member written with the Java client 4.x, reporting as
 * interop/test_groups_support.py expects: JSON lines "assigned" (the whole set it
 * holds), "revoked", "fetched" before a commit and "records" only after it; "close" on
 * stdin closes the consumer (it leaves the group), SIGKILL is a crash.
 *
 * usage: GroupMember BOOTSTRAP TOPIC-OR-/REGEX/ GROUP NAME PROTOCOL(classic|consumer) [ASSIGNOR [INSTANCE-ID]]
 * A topic written /re/ subscribes to the broker-side regular expression re (KIP-848); an ASSIGNOR
 * written server:NAME names the broker's assignor for the consumer protocol (group.remote.assignor).
 */
public final class GroupMember {
    static synchronized void emit(String event, String fields) {
        System.out.println("{\"event\":\"" + event + "\",\"t\":" + (System.currentTimeMillis() / 1000.0)
            + (fields.isEmpty() ? "" : "," + fields) + "}");
        System.out.flush();
    }

    static String partitions(Collection<Integer> ps) {
        StringBuilder b = new StringBuilder("\"partitions\":[");
        String sep = "";
        for (int p : new TreeSet<>(ps)) { b.append(sep).append(p); sep = ","; }
        return b.append(']').toString();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], name = args[3], protocol = args[4];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", name);
        p.put("group.protocol", protocol);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        if (args.length > 6) p.put("group.instance.id", args[6]);      // a static member
        if (protocol.equals("consumer") && args.length > 5 && args[5].startsWith("server:")) {
            p.put("group.remote.assignor", args[5].substring("server:".length()));   // the broker's assignor
        }
        if (protocol.equals("classic")) {
            p.put("session.timeout.ms", "6000");
            p.put("heartbeat.interval.ms", "1000");
            p.put("partition.assignment.strategy", args.length > 5 && args[5].equals("cooperative-sticky")
                ? "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
                : "org.apache.kafka.clients.consumer.RangeAssignor");
        }
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try {
                java.io.BufferedReader r = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
                String line;
                while ((line = r.readLine()) != null && !line.trim().equals("close")) { }
            } catch (java.io.IOException e) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        TreeSet<Integer> held = new TreeSet<>();
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                if (ps.isEmpty()) return;
                for (TopicPartition tp : ps) held.remove(tp.partition());
                emit("revoked", partitions(ps.stream().map(TopicPartition::partition).toList()));
                if (!held.isEmpty()) emit("assigned", partitions(held));
            }
            public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                for (TopicPartition tp : ps) held.add(tp.partition());
                emit("assigned", partitions(held));
            }
            public void onPartitionsLost(Collection<TopicPartition> ps) { onPartitionsRevoked(ps); }
        };
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            if (topic.startsWith("/") && topic.endsWith("/")) {
                c.subscribe(new SubscriptionPattern(topic.substring(1, topic.length() - 1)), listener);
            } else {
                c.subscribe(List.of(topic), listener);
            }
            while (!stop.get()) {
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(100));
                if (records.isEmpty()) continue;
                List<String> out = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    out.add(String.format(Locale.ROOT, "[%d,%d,\"%s\"]", r.partition(), r.offset(), r.value()));
                }
                String listed = "\"records\":[" + String.join(",", out) + "]";
                emit("fetched", listed);     // a kill between the commit and its report must not lose these
                try {
                    c.commitSync();
                } catch (RuntimeException e) {
                    emit("commit-failed", "\"error\":\"" + e.getClass().getSimpleName() + "\",\"count\":" + records.count());
                    // Not committed, not reported: read them again (or let their next owner do so).
                    for (TopicPartition tp : records.partitions()) {
                        try {
                            c.seek(tp, records.records(tp).get(0).offset());
                        } catch (IllegalStateException gone) { }
                    }
                    continue;
                }
                emit("records", listed);
            }
        }
        emit("closed", "");
    }
}
