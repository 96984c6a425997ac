import java.time.Duration;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * MEMBERS consumers of one new group, one thread each, reading a topic from its start until RECORDS distinct
 * records have come, for bench/share_groups.py. The bookkeeping is per poll (one lock, a bit per offset), so
 * what the benchmark times is the clients and the broker, and it still sees every record that came twice.
 *
 * usage: ConsumeAll BOOTSTRAP TOPIC GROUP KIND MEMBERS RECORDS LINGER_MS TIMEOUT_MS
 *   KIND share-implicit  KafkaShareConsumer, share.acknowledgement.mode=implicit
 *        share-explicit  KafkaShareConsumer, each record acknowledged ACCEPT (sent with the next ShareFetch)
 *        classic         KafkaConsumer, group.protocol=classic, auto-commit
 * Prints {"event":"consumed",...} when the last distinct record comes (or at TIMEOUT_MS), keeps polling
 * LINGER_MS more (anything delivered then is a duplicate), commits, closes, and prints {"event":"summary",...}.
 */
public final class ConsumeAll {
    static final Object lock = new Object();
    static final Map<Integer, BitSet> seen = new HashMap<>();
    static long delivered, distinct, duplicates, redelivered, bytes, firstNs, doneNs;
    static long[] perMember;
    static long records;
    static final CountDownLatch done = new CountDownLatch(1);
    static volatile boolean stop;
    static volatile String failure;

    static void emit(String json) {
        synchronized (System.out) {
            System.out.println(json);
            System.out.flush();
        }
    }

    static void count(ConsumerRecords<byte[], byte[]> rs, int member, boolean share) {
        long now = System.nanoTime();
        synchronized (lock) {
            if (firstNs == 0) firstNs = now;
            for (ConsumerRecord<byte[], byte[]> r : rs) {
                delivered++;
                perMember[member]++;
                bytes += r.value() == null ? 0 : r.value().length;
                if (share && r.deliveryCount().map(Short::intValue).orElse(1) > 1) redelivered++;
                BitSet b = seen.computeIfAbsent(r.partition(), k -> new BitSet());
                int o = (int) r.offset();
                if (b.get(o)) {
                    duplicates++;
                } else {
                    b.set(o);
                    distinct++;
                }
            }
            if (distinct >= records && doneNs == 0) {
                doneNs = now;
                done.countDown();
            }
        }
    }

    static Properties common(String bootstrap, String group, String name) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", name);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return p;
    }

    static void share(String bootstrap, String topic, String group, int member, boolean explicit) {
        Properties p = common(bootstrap, group, group + "-m" + member);
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (!stop) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                if (rs.isEmpty()) continue;
                count(rs, member, true);
                if (explicit) for (ConsumerRecord<byte[], byte[]> r : rs) c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();         // the last poll's acknowledgements, before close
        }
    }

    static void classic(String bootstrap, String topic, String group, int member) {
        Properties p = common(bootstrap, group, group + "-m" + member);
        p.put("group.protocol", "classic");
        p.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (!stop) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                if (!rs.isEmpty()) count(rs, member, false);
            }
        }                           // auto-commit commits the positions on close
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], kind = args[3];
        int members = Integer.parseInt(args[4]);
        records = Long.parseLong(args[5]);
        long lingerMs = Long.parseLong(args[6]), timeoutMs = Long.parseLong(args[7]);
        perMember = new long[members];
        boolean isShare = kind.startsWith("share");
        if (isShare) {              // a new share group starts at the latest offset: this one reads the topic
            Properties a = new Properties();
            a.put("bootstrap.servers", bootstrap);
            try (Admin admin = Admin.create(a)) {
                ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
                admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET))))
                    .all().get(60, TimeUnit.SECONDS);
            }
        }
        long startNs = System.nanoTime();
        Thread[] threads = new Thread[members];
        for (int i = 0; i < members; i++) {
            final int m = i;
            threads[i] = new Thread(() -> {
                try {
                    if (isShare) share(bootstrap, topic, group, m, kind.equals("share-explicit"));
                    else classic(bootstrap, topic, group, m);
                } catch (Throwable t) {
                    failure = t.toString();
                    done.countDown();
                }
            }, "member-" + i);
            threads[i].start();
        }
        boolean complete = done.await(timeoutMs, TimeUnit.MILLISECONDS);
        synchronized (lock) {
            emit("{\"event\":\"consumed\",\"complete\":" + (complete && distinct >= records)
                + ",\"join_s\":" + (firstNs == 0 ? 0 : (firstNs - startNs) / 1e9)
                + ",\"seconds\":" + (doneNs == 0 ? 0 : (doneNs - firstNs) / 1e9) + "}");
        }
        Thread.sleep(lingerMs);
        stop = true;
        for (Thread t : threads) t.join(60_000);
        StringBuilder s = new StringBuilder("{\"event\":\"summary\",\"kind\":\"" + kind + "\"");
        synchronized (lock) {
            s.append(",\"delivered\":").append(delivered).append(",\"distinct\":").append(distinct)
                .append(",\"duplicates\":").append(duplicates).append(",\"redelivered\":").append(redelivered)
                .append(",\"bytes\":").append(bytes).append(",\"per_member\":[");
            for (int i = 0; i < members; i++) s.append(i == 0 ? "" : ",").append(perMember[i]);
            s.append("],\"partitions\":{");
            String sep = "";
            for (Map.Entry<Integer, BitSet> e : new TreeMap<>(seen).entrySet()) {
                BitSet b = e.getValue();
                // distinct offsets and the first gap: a partition read in full has neither a gap nor a hole
                s.append(sep).append('"').append(e.getKey()).append("\":{\"distinct\":").append(b.cardinality())
                    .append(",\"first_missing\":").append(b.nextClearBit(0)).append('}');
                sep = ",";
            }
            s.append('}');
        }
        s.append(",\"failure\":").append(failure == null ? "null" : "\"" + failure.replace("\\", "\\\\")
            .replace("\"", "\\\"") + "\"").append('}');
        emit(s.toString());
        System.exit(0);
    }
}
